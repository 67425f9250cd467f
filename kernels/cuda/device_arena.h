// kernels/cuda/device_arena.h: one actor's device memory: a single cudaMalloc'd region
// carved by a bump allocator (DeviceArena), and per-edge message slots on top (SlotPool).
//
// docs/ARCHITECTURE.md, "Messages reference pooled memory": an activation or gradient message
// points into a slot of the producer's pool; the consumer returns the slot by message;
// each edge has a slot quota (back-pressure). Addresses never move for the arena's
// lifetime, so a CUDA graph captured with them can be replayed (graph_cache.h). The
// bookkeeping is arena_plan.h (host only, tested without a GPU); this file adds the
// device pointer. Units: bytes; every carved pointer is 256-byte aligned.
// Not thread-safe: one actor owns an arena.
#ifndef MXMACA_KERNELS_CUDA_DEVICE_ARENA_H_
#define MXMACA_KERNELS_CUDA_DEVICE_ARENA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/arena_plan.h"
#include "kernels/cuda/cuda_check.h"

namespace mxmaca::kernels::cuda {

// SlotPool: num_slots fixed-size slots of one edge, at fixed addresses.
class SlotPool {
 public:
  // SlotPool: over `book`'s layout, offsets counted from `arena_base` (a device pointer;
  // any pointer for host-side tests). DeviceArena::MakeSlotPool is the usual maker.
  SlotPool(SlotBook book, void* arena_base)
      : book_(std::move(book)), base_(static_cast<char*>(arena_base)) {}

  // Acquire: a free slot's index, or SlotBook::kNoFreeSlot when the quota is used up
  // (back-pressure: wait for a release message).
  int Acquire() { return book_.Acquire(); }
  // Release: returns a slot. Errors: out of range or not in use (double release), with
  // the edge's name.
  CudaStatus Release(int slot);
  // SlotPtr: the slot's address (slot_bytes() bytes); nullptr when slot is out of range.
  void* SlotPtr(int slot) const;
  const SlotBook& book() const { return book_; }
  int64_t slot_bytes() const { return book_.slot_bytes(); }

 private:
  SlotBook book_;
  char* base_;
};

// DeviceArena: one cudaMalloc'd region of capacity_bytes on the current device.
class DeviceArena {
 public:
  // Create: cudaMalloc of capacity_bytes (> 0) on the calling thread's current device.
  // Errors: capacity <= 0, allocation failure (the CUDA error and the size).
  static CudaStatus Create(int64_t capacity_bytes, std::unique_ptr<DeviceArena>* out);
  // ~DeviceArena: cudaFree (which waits for the device). Release the arena only after
  // the work using it and every graph captured with its addresses are gone.
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Carve: `bytes` (> 0) at the next 256-byte-aligned offset, in *ptr. Errors: the
  // ArenaPlan's (invalid size, "cannot reserve N bytes for 'what': U of C bytes used").
  CudaStatus Carve(int64_t bytes, const std::string& what, void** ptr);
  // CarveArray: n elements of T (n > 0).
  template <typename T>
  CudaStatus CarveArray(int64_t n, const std::string& what, T** ptr) {
    MXMACA_CUDA_REQUIRE(n > 0 && n <= INT64_MAX / static_cast<int64_t>(sizeof(T)),
                        "DeviceArena::CarveArray '" + what + "': " + std::to_string(n) +
                            " elements");
    void* p = nullptr;
    MXMACA_RETURN_IF_CUDA_ERROR(Carve(n * static_cast<int64_t>(sizeof(T)), what, &p));
    *ptr = static_cast<T*>(p);
    return CudaStatus();
  }
  // MakeSlotPool: carves num_slots slots of slot_bytes (each 256-byte aligned) for edge.
  CudaStatus MakeSlotPool(const std::string& edge, int64_t slot_bytes, int num_slots,
                          std::unique_ptr<SlotPool>* out);

  void* base() const { return base_; }
  const ArenaPlan& plan() const { return plan_; }

 private:
  explicit DeviceArena(int64_t capacity_bytes) : plan_(capacity_bytes) {}

  ArenaPlan plan_;
  void* base_ = nullptr;
};

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_DEVICE_ARENA_H_
