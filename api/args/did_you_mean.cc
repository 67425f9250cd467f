// api/args/did_you_mean.cc: Levenshtein distance and nearest-candidate lookup.
#include "api/args/did_you_mean.h"

#include <algorithm>
#include <numeric>

namespace mxmaca::api {

size_t EditDistance(std::string_view a, std::string_view b) {
  // row[j] = distance between the first i bytes of a and the first j bytes of b.
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];  // distance(a[0, i-1), b[0, j-1))
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = &candidate;
    }
  }
  return best == nullptr ? std::string() : *best;
}

}  // namespace mxmaca::api
