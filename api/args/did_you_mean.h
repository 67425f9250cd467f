// api/args/did_you_mean.h: nearest-name suggestions for misspelt flags.
#ifndef MXMACA_API_ARGS_DID_YOU_MEAN_H_
#define MXMACA_API_ARGS_DID_YOU_MEAN_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mxmaca::api {

// EditDistance: Levenshtein distance between `a` and `b` (insertion, deletion and
// substitution of one byte each cost 1). O(|a|*|b|) time, O(|b|) memory.
size_t EditDistance(std::string_view a, std::string_view b);

// DidYouMean: the candidate with the smallest EditDistance to `word` (the earliest
// one on a tie), or "" when the best is further than max(2, |word| / 3) edits away
// (so a suggestion is never a wild guess) or `candidates` is empty.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace mxmaca::api

#endif  // MXMACA_API_ARGS_DID_YOU_MEAN_H_
