// kernels/cuda/arena_plan.cc: bump allocation and slot bookkeeping (host only).
#include "kernels/cuda/arena_plan.h"

#include <cstdint>
#include <limits>
#include <string>

namespace mxmaca::kernels::cuda {
namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() / 2;

}  // namespace

PlanStatus ArenaPlan::Reserve(int64_t bytes, const std::string& what, int64_t* offset) {
  if (bytes <= 0 || bytes > kMaxBytes) {
    return PlanStatus::Error("arena: cannot reserve " + std::to_string(bytes) +
                             " bytes for '" + what + "': expected 1.." +
                             std::to_string(kMaxBytes) + " bytes");
  }
  if (bytes > capacity_bytes_ - used_bytes_) {
    return PlanStatus::Error("arena: cannot reserve " + std::to_string(bytes) +
                             " bytes for '" + what + "': " + std::to_string(used_bytes_) +
                             " of " + std::to_string(capacity_bytes_) + " bytes used, " +
                             std::to_string(free_bytes()) + " free");
  }
  *offset = used_bytes_;
  regions_.push_back({what, used_bytes_, bytes});
  // Aligning the end may step past the capacity; the next reservation then fails.
  used_bytes_ = AlignUp(used_bytes_ + bytes);
  if (used_bytes_ > capacity_bytes_) used_bytes_ = capacity_bytes_;
  return PlanStatus();
}

int64_t SlotBook::TotalBytes(int64_t slot_bytes, int num_slots) {
  if (slot_bytes <= 0 || slot_bytes > kMaxBytes || num_slots <= 0) return -1;
  const int64_t stride = AlignUp(slot_bytes);
  if (stride > kMaxBytes / num_slots) return -1;
  return stride * num_slots;
}

PlanStatus SlotBook::Create(const std::string& edge, int64_t base_offset, int64_t slot_bytes,
                            int num_slots, SlotBook* out) {
  const std::string where = "slot pool '" + edge + "': ";
  if (slot_bytes <= 0 || num_slots <= 0) {
    return PlanStatus::Error(where + std::to_string(num_slots) + " slots of " +
                             std::to_string(slot_bytes) +
                             " bytes: expected at least 1 slot of at least 1 byte");
  }
  if (base_offset < 0 || base_offset % kArenaAlignment != 0) {
    return PlanStatus::Error(where + "base offset " + std::to_string(base_offset) +
                             " is not a non-negative multiple of " +
                             std::to_string(kArenaAlignment) + " bytes");
  }
  const int64_t total = TotalBytes(slot_bytes, num_slots);
  if (total < 0 || base_offset > kMaxBytes - total) {
    return PlanStatus::Error(where + std::to_string(num_slots) + " slots of " +
                             std::to_string(slot_bytes) + " bytes overflow int64");
  }
  SlotBook book;
  book.edge_ = edge;
  book.base_offset_ = base_offset;
  book.slot_bytes_ = slot_bytes;
  book.stride_bytes_ = AlignUp(slot_bytes);
  book.in_use_.assign(static_cast<size_t>(num_slots), false);
  *out = std::move(book);
  return PlanStatus();
}

int SlotBook::Acquire() {
  for (size_t i = 0; i < in_use_.size(); ++i) {
    if (!in_use_[i]) {
      in_use_[i] = true;
      ++num_in_use_;
      return static_cast<int>(i);
    }
  }
  return kNoFreeSlot;
}

PlanStatus SlotBook::Release(int slot) {
  if (slot < 0 || slot >= num_slots()) {
    return PlanStatus::Error("slot pool '" + edge_ + "': release of slot " +
                             std::to_string(slot) + ": expected 0.." +
                             std::to_string(num_slots() - 1));
  }
  if (!in_use_[static_cast<size_t>(slot)]) {
    return PlanStatus::Error("slot pool '" + edge_ + "': release of slot " +
                             std::to_string(slot) +
                             ", which is not in use (double release?)");
  }
  in_use_[static_cast<size_t>(slot)] = false;
  --num_in_use_;
  return PlanStatus();
}

}  // namespace mxmaca::kernels::cuda
