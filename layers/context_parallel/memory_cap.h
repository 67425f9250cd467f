// layers/context_parallel/memory_cap.h: a per-shard allocation cap (issue 9,
// `--memory-cap-per-shard BYTES`), so that a configuration that does not fit fails with a
// clear out-of-memory error naming the shard and what it tried to allocate, instead of
// the process being killed by the operating system.
//
// layers/micro_batch_stash.h MemoryTracker counts live and peak stash bytes but has no
// cap (and is not thread-safe); ShardMemoryCap is the capped counter a context shard (or
// any shard) charges its buffers to. Callers that keep their own counter (a
// MemoryTracker) can ask Check(live, bytes, what) before allocating instead.
//
// Units: bytes. A cap of 0 means "no cap" (the default of the flag).
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_MEMORY_CAP_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_MEMORY_CAP_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace mxmaca::layers::cp {

// kMemoryCapFlag: the flag's name, "--memory-cap-per-shard" (an MXMACA flag; Megatron has
// none). Its value is BYTES: a non-negative integer, optionally followed by one of the
// suffixes K, M, G, T (powers of 1024; also KiB, MiB, GiB, TiB) or KB, MB, GB, TB
// (powers of 1000). 0 disables the cap.
inline constexpr char kMemoryCapFlag[] = "--memory-cap-per-shard";

// ParseMemoryCap: the byte count of a `--memory-cap-per-shard` value, e.g. "1073741824",
// "1G", "512MiB", "3GB". Errors: InvalidArgument naming the flag and the value when it is
// empty, negative, has an unknown suffix or overflows int64.
absl::StatusOr<int64_t> ParseMemoryCap(absl::string_view value);

// ShardMemoryCap: a thread-safe counter of the bytes one shard holds, with an optional
// cap. Reserve charges an allocation before it is made, Release gives it back.
class ShardMemoryCap {
 public:
  // shard_name: how errors name the shard, e.g. "context_parallel rank 3";
  // cap_bytes: the cap (0: unlimited; negative is treated as 0).
  ShardMemoryCap(std::string shard_name, int64_t cap_bytes);
  ShardMemoryCap(const ShardMemoryCap&) = delete;
  ShardMemoryCap& operator=(const ShardMemoryCap&) = delete;

  // Check: whether allocating `bytes` more on top of `live_bytes` fits the cap, without
  // charging anything. Errors: ResourceExhausted "shard <name>: allocating <n> bytes for
  // <what> would use <total> of the <cap>-byte cap"; InvalidArgument for bytes < 0.
  absl::Status Check(int64_t live_bytes, int64_t bytes, absl::string_view what) const;

  // Reserve: charges `bytes` for `what` (e.g. "ring attention K/V receive buffers") if
  // live() + bytes fits the cap; on error nothing is charged. Errors: as Check, with
  // live_bytes = live().
  absl::Status Reserve(int64_t bytes, absl::string_view what);

  // Release: gives back `bytes` from an earlier Reserve (clamped so live() stays >= 0).
  void Release(int64_t bytes);

  const std::string& shard_name() const { return shard_name_; }
  int64_t cap_bytes() const { return cap_bytes_; }
  // live / peak: bytes charged now / the most charged at once since construction or
  // ResetPeak.
  int64_t live() const;
  int64_t peak() const;
  void ResetPeak();

 private:
  const std::string shard_name_;
  const int64_t cap_bytes_;
  mutable absl::Mutex mu_;
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
};

// CappedReservation: RAII for one ShardMemoryCap::Reserve (released on destruction).
// Move-only. A default-constructed one holds nothing.
class CappedReservation {
 public:
  CappedReservation() = default;
  CappedReservation(CappedReservation&& o) noexcept { *this = std::move(o); }
  CappedReservation& operator=(CappedReservation&& o) noexcept;
  CappedReservation(const CappedReservation&) = delete;
  CappedReservation& operator=(const CappedReservation&) = delete;
  ~CappedReservation() { Reset(); }

  // Make: reserves `bytes` for `what` on `cap` (nullptr: nothing is counted, always OK).
  // Errors: as ShardMemoryCap::Reserve.
  static absl::StatusOr<CappedReservation> Make(ShardMemoryCap* cap, int64_t bytes,
                                                absl::string_view what);

  // Reset: releases the reservation now.
  void Reset();
  int64_t bytes() const { return bytes_; }

 private:
  ShardMemoryCap* cap_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_MEMORY_CAP_H_
