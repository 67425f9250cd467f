// kernels/cuda/device_arena.cc: the device side of the memory arena and slot pools.
#include "kernels/cuda/device_arena.h"

#include <memory>
#include <string>

namespace mxmaca::kernels::cuda {

CudaStatus SlotPool::Release(int slot) {
  const PlanStatus s = book_.Release(slot);
  if (!s.ok()) return InvalidArgumentAt(s.message(), __FILE__, __LINE__);
  return CudaStatus();
}

void* SlotPool::SlotPtr(int slot) const {
  if (slot < 0 || slot >= book_.num_slots()) return nullptr;
  return base_ + book_.SlotOffset(slot);
}

CudaStatus DeviceArena::Create(int64_t capacity_bytes, std::unique_ptr<DeviceArena>* out) {
  MXMACA_CUDA_REQUIRE(capacity_bytes > 0,
                      "DeviceArena: capacity " + std::to_string(capacity_bytes) + " bytes");
  std::unique_ptr<DeviceArena> arena(new DeviceArena(capacity_bytes));
  const cudaError_t err = cudaMalloc(&arena->base_, static_cast<size_t>(capacity_bytes));
  if (err != cudaSuccess) {
    arena->base_ = nullptr;
    return CudaErrorAt(err,
                       ("cudaMalloc(" + std::to_string(capacity_bytes) + " bytes)").c_str(),
                       __FILE__, __LINE__);
  }
  *out = std::move(arena);
  return CudaStatus();
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) cudaFree(base_);
}

CudaStatus DeviceArena::Carve(int64_t bytes, const std::string& what, void** ptr) {
  int64_t offset = 0;
  const PlanStatus s = plan_.Reserve(bytes, what, &offset);
  if (!s.ok()) return InvalidArgumentAt(s.message(), __FILE__, __LINE__);
  *ptr = static_cast<char*>(base_) + offset;
  return CudaStatus();
}

CudaStatus DeviceArena::MakeSlotPool(const std::string& edge, int64_t slot_bytes,
                                     int num_slots, std::unique_ptr<SlotPool>* out) {
  const int64_t total = SlotBook::TotalBytes(slot_bytes, num_slots);
  MXMACA_CUDA_REQUIRE(total > 0, "slot pool '" + edge + "': " + std::to_string(num_slots) +
                                     " slots of " + std::to_string(slot_bytes) + " bytes");
  int64_t offset = 0;
  const PlanStatus reserved = plan_.Reserve(total, "slots of " + edge, &offset);
  if (!reserved.ok()) return InvalidArgumentAt(reserved.message(), __FILE__, __LINE__);
  SlotBook book;
  const PlanStatus made = SlotBook::Create(edge, offset, slot_bytes, num_slots, &book);
  if (!made.ok()) return InvalidArgumentAt(made.message(), __FILE__, __LINE__);
  *out = std::make_unique<SlotPool>(std::move(book), base_);
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
