// data/mock_dataset.cc: see mock_dataset.h.
#include "data/mock_dataset.h"

#include "absl/strings/str_cat.h"
#include "data/numpy_random_state.h"

namespace mxmaca::data {

MockTokenSource::MockTokenSource(int32_t eod_token, int64_t vocab_size)
    : eod_token_(eod_token), vocab_size_(vocab_size) {
  NumpyDefaultRng rng(kSeed);
  lengths_.resize(kSize);
  for (int64_t i = 0; i < kSize; ++i) lengths_[i] = rng.IntegersInt32(1, kMaxSequenceLength);
}

absl::Status MockTokenSource::GetInto(int64_t seq, int64_t offset, absl::Span<int32_t> out) const {
  if (seq < 0 || seq >= kSize || offset < 0 ||
      offset + static_cast<int64_t>(out.size()) > lengths_[seq]) {
    return absl::OutOfRangeError(absl::StrCat("mock sequence ", seq, ": tokens [", offset, ", ",
                                              offset + out.size(), ") out of range"));
  }
  const int64_t length = lengths_[seq];
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t pos = offset + static_cast<int64_t>(k);
    const int64_t token = vocab_size_ > 0 ? (pos + 1) % vocab_size_ : pos + 1;
    out[k] = pos == length - 1 ? eod_token_ : static_cast<int32_t>(token);
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::data
