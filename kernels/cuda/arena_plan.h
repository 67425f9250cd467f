// kernels/cuda/arena_plan.h: the host-only bookkeeping of a device memory arena and of
// the message slots carved from it (docs/ARCHITECTURE.md, "Messages reference pooled memory").
//
// ArenaPlan lays out one contiguous region (bytes) with a bump allocator: every
// reservation starts at a multiple of kArenaAlignment and is never moved or freed until
// the whole plan is reset, so device addresses derived from it stay fixed for the
// arena's lifetime — what captured CUDA graphs need. SlotBook tracks N fixed-size slots of
// one edge: Acquire hands out a free slot or reports "none free" (back-pressure, not an
// error), Release returns it and detects double or foreign releases.
//
// No CUDA here: kernels/cuda/device_arena.h puts a cudaMalloc'd region under an ArenaPlan
// and a device pointer under a SlotBook. Units: bytes, offsets from the region's start.
// Not thread-safe: one actor owns an arena (STYLE.md, "Actors").
#ifndef MXMACA_KERNELS_CUDA_ARENA_PLAN_H_
#define MXMACA_KERNELS_CUDA_ARENA_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/plan_status.h"

namespace mxmaca::kernels::cuda {

// kArenaAlignment: alignment of every reservation and of every slot stride, in bytes
// (cudaMalloc's own alignment; enough for vectorised float4 / bf16x8 accesses).
inline constexpr int64_t kArenaAlignment = 256;

// AlignUp: the smallest multiple of kArenaAlignment >= bytes (bytes >= 0, not near
// INT64_MAX; callers check first).
inline int64_t AlignUp(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// ArenaPlan: a bump allocator over [0, capacity_bytes).
class ArenaPlan {
 public:
  // Region: one reservation, for reports ("what" is the caller's label, e.g. "F act s0").
  struct Region {
    std::string what;
    int64_t offset = 0;  // bytes from the arena start, a multiple of kArenaAlignment
    int64_t bytes = 0;   // as requested (the next region starts at AlignUp(offset+bytes))
  };

  // ArenaPlan: an empty plan over capacity_bytes (< 0 is treated as 0: every
  // reservation then fails with a message).
  explicit ArenaPlan(int64_t capacity_bytes)
      : capacity_bytes_(capacity_bytes < 0 ? 0 : capacity_bytes) {}

  // Reserve: reserves `bytes` (> 0) at the next aligned offset and stores it in *offset.
  // Errors: bytes <= 0, or not enough room ("arena: cannot reserve 4096 bytes for 'x':
  // 1024 of 2048 bytes used, 1024 free").
  PlanStatus Reserve(int64_t bytes, const std::string& what, int64_t* offset);

  // Reset: forgets every reservation (all derived addresses become invalid: invalidate
  // any CUDA graph captured with them first).
  void Reset() {
    used_bytes_ = 0;
    regions_.clear();
  }

  int64_t capacity_bytes() const { return capacity_bytes_; }
  // used_bytes: end of the last reservation, rounded up to kArenaAlignment.
  int64_t used_bytes() const { return used_bytes_; }
  int64_t free_bytes() const { return capacity_bytes_ - used_bytes_; }
  const std::vector<Region>& regions() const { return regions_; }

 private:
  int64_t capacity_bytes_;
  int64_t used_bytes_ = 0;
  std::vector<Region> regions_;
};

// SlotBook: num_slots slots of slot_bytes each, slot i at base_offset + i * stride_bytes
// (stride = AlignUp(slot_bytes)). The quota of an edge is its slot count.
class SlotBook {
 public:
  // kNoFreeSlot: what Acquire returns when every slot is in use (back-pressure: the
  // producer waits for a release message).
  static constexpr int kNoFreeSlot = -1;

  // Create: validates the layout (slot_bytes > 0, num_slots > 0, base_offset a multiple of
  // kArenaAlignment, no overflow) and stores a SlotBook in *out. `edge` names it in errors.
  static PlanStatus Create(const std::string& edge, int64_t base_offset, int64_t slot_bytes,
                           int num_slots, SlotBook* out);
  SlotBook() = default;

  // TotalBytes: the bytes a book of num_slots slots of slot_bytes spans (num_slots *
  // AlignUp(slot_bytes)); -1 when the arguments are invalid or it overflows.
  static int64_t TotalBytes(int64_t slot_bytes, int num_slots);

  // Acquire: the lowest-numbered free slot, now in use; kNoFreeSlot when none is free.
  // Lowest-first keeps the slot sequence, hence the addresses a graph sees, deterministic.
  int Acquire();
  // Release: returns slot to the free set. Errors: out of range, or not in use (a double
  // release, or a slot this book never handed out), naming the edge and the slot.
  PlanStatus Release(int slot);

  // SlotOffset: byte offset of slot (0 <= slot < num_slots) from the arena start.
  int64_t SlotOffset(int slot) const { return base_offset_ + slot * stride_bytes_; }
  bool InUse(int slot) const {
    return slot >= 0 && slot < num_slots() && in_use_[static_cast<size_t>(slot)];
  }
  const std::string& edge() const { return edge_; }
  int num_slots() const { return static_cast<int>(in_use_.size()); }
  int num_in_use() const { return num_in_use_; }
  int num_free() const { return num_slots() - num_in_use_; }
  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t stride_bytes() const { return stride_bytes_; }

 private:
  std::string edge_;
  int64_t base_offset_ = 0;
  int64_t slot_bytes_ = 0;
  int64_t stride_bytes_ = 0;
  std::vector<bool> in_use_;
  int num_in_use_ = 0;
};

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_ARENA_PLAN_H_
