// layers/context_parallel/memory_cap.cc: see memory_cap.h.
#include "layers/context_parallel/memory_cap.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mxmaca::layers::cp {

absl::StatusOr<int64_t> ParseMemoryCap(absl::string_view value) {
  const absl::string_view v = absl::StripAsciiWhitespace(value);
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(kMemoryCapFlag, " \"", value, "\": ", why,
                                                   " (expected BYTES, e.g. 1073741824, "
                                                   "512M, 2GiB or 3GB; 0 = no cap)"));
  };
  size_t digits = 0;
  while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
  if (digits == 0) return bad(v.empty() ? "empty value" : "not a non-negative integer");
  uint64_t number = 0;
  if (!absl::SimpleAtoi(v.substr(0, digits), &number) ||
      number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return bad("out of range");
  }
  const std::string suffix = absl::AsciiStrToUpper(v.substr(digits));
  int64_t unit = 1;
  if (suffix.empty() || suffix == "B") {
    unit = 1;
  } else if (suffix == "K" || suffix == "KIB") {
    unit = int64_t{1} << 10;
  } else if (suffix == "M" || suffix == "MIB") {
    unit = int64_t{1} << 20;
  } else if (suffix == "G" || suffix == "GIB") {
    unit = int64_t{1} << 30;
  } else if (suffix == "T" || suffix == "TIB") {
    unit = int64_t{1} << 40;
  } else if (suffix == "KB") {
    unit = 1000;
  } else if (suffix == "MB") {
    unit = 1000 * 1000;
  } else if (suffix == "GB") {
    unit = int64_t{1000} * 1000 * 1000;
  } else if (suffix == "TB") {
    unit = int64_t{1000} * 1000 * 1000 * 1000;
  } else {
    return bad(absl::StrCat("unknown suffix \"", v.substr(digits), "\""));
  }
  if (number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / unit)) {
    return bad("out of range");
  }
  return static_cast<int64_t>(number) * unit;
}

ShardMemoryCap::ShardMemoryCap(std::string shard_name, int64_t cap_bytes)
    : shard_name_(std::move(shard_name)), cap_bytes_(std::max<int64_t>(cap_bytes, 0)) {}

absl::Status ShardMemoryCap::Check(int64_t live_bytes, int64_t bytes,
                                   absl::string_view what) const {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard_name_, ": allocating ", bytes,
                                                   " bytes for ", what, ": negative size"));
  }
  if (cap_bytes_ == 0) return absl::OkStatus();
  // Compare without overflow: live + bytes > cap <=> bytes > cap - live.
  if (live_bytes > cap_bytes_ || bytes > cap_bytes_ - live_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shard ", shard_name_, ": allocating ", bytes, " bytes for ", what,
                     " would use ", live_bytes + bytes, " of the ", cap_bytes_, "-byte cap (",
                     kMemoryCapFlag, "; ", live_bytes, " bytes already held)"));
  }
  return absl::OkStatus();
}

absl::Status ShardMemoryCap::Reserve(int64_t bytes, absl::string_view what) {
  absl::MutexLock lock(&mu_);
  absl::Status st = Check(live_, bytes, what);
  if (!st.ok()) return st;
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return absl::OkStatus();
}

void ShardMemoryCap::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  live_ = std::max<int64_t>(0, live_ - std::max<int64_t>(bytes, 0));
}

int64_t ShardMemoryCap::live() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

int64_t ShardMemoryCap::peak() const {
  absl::MutexLock lock(&mu_);
  return peak_;
}

void ShardMemoryCap::ResetPeak() {
  absl::MutexLock lock(&mu_);
  peak_ = live_;
}

CappedReservation& CappedReservation::operator=(CappedReservation&& o) noexcept {
  if (this != &o) {
    Reset();
    cap_ = o.cap_;
    bytes_ = o.bytes_;
    o.cap_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

absl::StatusOr<CappedReservation> CappedReservation::Make(ShardMemoryCap* cap, int64_t bytes,
                                                          absl::string_view what) {
  CappedReservation r;
  if (cap == nullptr) return r;
  absl::Status st = cap->Reserve(bytes, what);
  if (!st.ok()) return st;
  r.cap_ = cap;
  r.bytes_ = bytes;
  return r;
}

void CappedReservation::Reset() {
  if (cap_ != nullptr) cap_->Release(bytes_);
  cap_ = nullptr;
  bytes_ = 0;
}

}  // namespace mxmaca::layers::cp
