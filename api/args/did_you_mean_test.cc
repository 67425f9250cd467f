// Tests for api/args/did_you_mean.h.
#include "api/args/did_you_mean.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::api {
namespace {

std::string RandomWord(std::mt19937* rng, int max_len) {
  std::uniform_int_distribution<int> len(0, max_len);
  std::uniform_int_distribution<int> letter(0, 3);  // small alphabet: many near-matches
  std::string out(len(*rng), 'a');
  for (char& c : out) c = static_cast<char>('a' + letter(*rng));
  return out;
}

TEST_CASE("EditDistance on textbook pairs") {
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("", "abc") == 3);
  CHECK(EditDistance("abc", "") == 3);
  CHECK(EditDistance("flaw", "lawn") == 2);
  CHECK(EditDistance("--num_layers", "--num-layers") == 1);
  CHECK(EditDistance("same", "same") == 0);
}

TEST_CASE("EditDistance is a metric on random words") {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string a = RandomWord(&rng, 9), b = RandomWord(&rng, 9), c = RandomWord(&rng, 9);
    const size_t ab = EditDistance(a, b);
    CHECK(ab == EditDistance(b, a));
    CHECK((ab == 0) == (a == b));
    CHECK(EditDistance(a, c) <= ab + EditDistance(b, c));
    // Bounded by the longer length and at least the length difference.
    CHECK(ab <= std::max(a.size(), b.size()));
    CHECK(ab >= (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()));
    // One random edit moves the distance by at most one.
    std::string a2 = a;
    a2.insert(a2.begin() + (a.empty() ? 0 : rng() % (a.size() + 1)), 'z');
    const size_t a2b = EditDistance(a2, b);
    CHECK((a2b + 1 >= ab && a2b <= ab + 1));
  }
}

TEST_CASE("DidYouMean picks the nearest candidate and refuses wild guesses") {
  const std::vector<std::string> names = {"--num-layers", "--hidden-size", "--seq-length", "--lr",
                                          "--min-lr"};
  CHECK(DidYouMean("--num-layer", names) == "--num-layers");
  CHECK(DidYouMean("--hidden_size", names) == "--hidden-size");
  CHECK(DidYouMean("--seq-len", names) == "--seq-length");
  CHECK(DidYouMean("--lrr", names) == "--lr");
  CHECK(DidYouMean("--completely-unrelated-flag", names).empty());
  CHECK(DidYouMean("--lr", {}).empty());
  // Ties go to the earliest candidate.
  CHECK(DidYouMean("--ab", {"--ax", "--xb"}) == "--ax");
}

}  // namespace
}  // namespace mxmaca::api
