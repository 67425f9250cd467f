// layers/context_parallel/cp_batch_test.cc: slicing a GPT micro-batch for CP ranks and
// the CP loss reduction, on random samples with end-of-document tokens.
#include "layers/context_parallel/cp_batch.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "data/gpt_batch.h"
#include "layers/context_parallel/cp_layout.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers::cp {
namespace {

constexpr int32_t kEod = 50256;

// RandomSamples: b samples of s + 1 tokens, ~1 in 20 an EOD.
std::vector<int32_t> RandomSamples(int64_t b, int64_t s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> tok(0, 50255);
  std::vector<int32_t> samples(b * (s + 1));
  for (int32_t& t : samples) t = gen() % 20 == 0 ? kEod : tok(gen);
  return samples;
}

TEST_CASE(
    "cp batch: each rank keeps chunks r and 2CP-1-r with original positions, "
    "labels and document starts",
    "[cp_batch]") {
  const int64_t b = 3, s = 96;
  uint32_t seed = 40;
  for (bool reset : {false, true}) {
    const std::vector<int32_t> samples = RandomSamples(b, s, ++seed);
    const data::GptMicroBatch full = data::BuildGptMicroBatch(
        samples, b, s, kEod, /*eod_mask_loss=*/true, /*reset_position_ids=*/reset,
        /*reset_attention_mask=*/reset);
    for (int64_t cp : {1, 2, 4, 8}) {
      auto layout = MakeCpLayout(s, cp);
      REQUIRE(layout.ok());
      const int64_t c = s / (2 * cp);
      data::GptMicroBatch rebuilt = full;  // overwritten position by position below
      std::vector<int> covered(b * s, 0);
      for (int64_t r = 0; r < cp; ++r) {
        auto part = SliceMicroBatchForCpRank(*layout, r, full);
        REQUIRE(part.ok());
        REQUIRE(part->b == b);
        REQUIRE(part->s == s / cp);
        REQUIRE(part->tokens.size() == static_cast<size_t>(b * s / cp));
        for (int64_t bi = 0; bi < b; ++bi) {
          for (int64_t t = 0; t < s / cp; ++t) {
            // Independent of cp_layout: chunk r, then chunk 2CP-1-r.
            const int64_t pos = t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
            const int64_t li = bi * (s / cp) + t, gi = bi * s + pos;
            const int32_t* sample = samples.data() + bi * (s + 1);
            INFO("reset " << reset << " cp " << cp << " rank " << r << " b " << bi << " t " << t
                          << " pos " << pos);
            // Tokens and labels straight from the raw sample: the label is the next token
            // of the ORIGINAL sample, also at a chunk's last position.
            REQUIRE(part->tokens[li] == sample[pos]);
            REQUIRE(part->labels[li] == sample[pos + 1]);
            REQUIRE(part->loss_mask[li] == (sample[pos] == kEod ? 0.0f : 1.0f));
            REQUIRE(part->position_ids[li] == full.position_ids[gi]);
            if (!reset) REQUIRE(part->position_ids[li] == pos);
            REQUIRE(part->doc_start[li] == full.doc_start[gi]);
            REQUIRE(part->doc_start[li] <= pos);
            ++covered[gi];
          }
        }
        // Gathering every rank's part rebuilds the original arrays.
        REQUIRE(GatherSequence(*layout, r, b, 1, part->labels.data(), rebuilt.labels.data()).ok());
      }
      for (int x : covered) REQUIRE(x == 1);
      CHECK(rebuilt.labels == full.labels);
    }
  }
}

TEST_CASE("cp batch: clear errors", "[cp_batch]") {
  const data::GptMicroBatch full =
      data::BuildGptMicroBatch(RandomSamples(2, 64, 3), 2, 64, kEod, true, false, false);
  auto layout = MakeCpLayout(64, 4);
  REQUIRE(layout.ok());
  CHECK(SliceMicroBatchForCpRank(*layout, 4, full).status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto other = MakeCpLayout(128, 4);
  REQUIRE(other.ok());
  auto st = SliceMicroBatchForCpRank(*other, 0, full);
  REQUIRE(!st.ok());
  CHECK(std::string(st.status().message()).find("sequence length 64") != std::string::npos);
  data::GptMicroBatch bad = full;
  bad.labels.pop_back();
  st = SliceMicroBatchForCpRank(*layout, 0, bad);
  REQUIRE(!st.ok());
  CHECK(std::string(st.status().message()).find("labels has 127 elements") != std::string::npos);
  bad = full;
  bad.doc_start.clear();  // allowed: no document masks
  auto ok = SliceMicroBatchForCpRank(*layout, 1, bad);
  REQUIRE(ok.ok());
  CHECK(ok->doc_start.empty());
  // The divisibility rule comes from MakeCpLayout.
  CHECK(MakeCpLayout(100, 8).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE(
    "cp batch: the loss summed over CP ranks equals the unsharded loss; a fully "
    "masked rank contributes 0 and 0",
    "[cp_batch]") {
  const int64_t b = 2, s = 128;
  std::mt19937 gen(77);
  std::uniform_real_distribution<float> loss_dist(0.5f, 11.0f);
  std::vector<float> loss(b * s);
  for (float& x : loss) x = loss_dist(gen);
  std::vector<float> mask(b * s, 1.0f);
  for (float& m : mask) m = gen() % 7 == 0 ? 0.0f : 1.0f;
  for (int64_t cp : {1, 2, 4}) {
    auto layout = MakeCpLayout(s, cp);
    REQUIRE(layout.ok());
    // Rank cp-1's tokens: all masked, and their losses NaN (e.g. garbage logits).
    std::vector<float> lm = loss, mm = mask;
    if (cp > 1) {
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int64_t t = 0; t < layout->LocalSeq(); ++t) {
          const int64_t gi = bi * s + layout->GlobalPosition(cp - 1, t);
          mm[gi] = 0.0f;
          lm[gi] = std::numeric_limits<float>::quiet_NaN();
        }
      }
    }
    // Unsharded: the plain masked mean over the whole micro-batch, written directly.
    double want_sum = 0.0, want_tokens = 0.0;
    for (size_t i = 0; i < lm.size(); ++i) {
      if (mm[i] != 0.0f) {
        want_sum += lm[i];
        want_tokens += 1.0;
      }
    }
    std::vector<CpLossPart> parts(cp);
    for (int64_t r = 0; r < cp; ++r) {
      std::vector<float> ll(b * layout->LocalSeq()), ml(ll.size());
      REQUIRE(SliceSequence(*layout, r, b, 1, lm.data(), ll.data()).ok());
      REQUIRE(SliceSequence(*layout, r, b, 1, mm.data(), ml.data()).ok());
      auto p = LocalLossPart(ll, ml);
      REQUIRE(p.ok());
      parts[r] = *p;
      if (cp > 1 && r == cp - 1) {
        CHECK(p->loss_sum == 0.0);
        CHECK(p->tokens == 0.0);
        CHECK(p->Mean() == 0.0);
      }
    }
    const CpLossPart total = ReduceCpLossParts(parts);
    CHECK(total.tokens == want_tokens);
    // Double sums of < 256 fp32 values in different orders: ~1e-16 relative.
    CHECK(std::abs(total.Mean() - want_sum / want_tokens) <= 1e-12 * want_sum / want_tokens);

    // The same over the in-process hub, one thread per rank: fp32 all-reduce of the
    // pair, so within fp32 rounding (a few ulps of a sum of <= 4 terms: 1e-6 relative).
    auto grid = transport::RankGrid::Create(static_cast<int>(cp), 1, 1, static_cast<int>(cp));
    REQUIRE(grid.ok());
    transport::InProcessHub hub(static_cast<int>(cp));
    std::vector<absl::StatusOr<CpLossPart>> reduced(cp, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < cp; ++r) {
      threads.emplace_back([&, r] {
        const transport::RankView view(*grid, static_cast<int>(r));
        reduced[r] = AllReduceCpLoss(hub.ForRank(static_cast<int>(r)),
                                     view.context_parallel_group(), parts[r]);
      });
    }
    for (auto& t : threads) t.join();
    for (int64_t r = 0; r < cp; ++r) {
      REQUIRE(reduced[r].ok());
      CHECK(reduced[r]->tokens == want_tokens);
      CHECK(std::isfinite(reduced[r]->Mean()));
      CHECK(std::abs(reduced[r]->Mean() - want_sum / want_tokens) <= 1e-6 * want_sum / want_tokens);
      CHECK(reduced[r]->Mean() == reduced[0]->Mean());
    }
  }
  // Nothing unmasked anywhere: 0, not NaN.
  std::vector<float> zeros(16, 0.0f), nan_loss(16, std::nanf(""));
  auto none = LocalLossPart(nan_loss, zeros);
  REQUIRE(none.ok());
  CHECK(ReduceCpLossParts({*none, *none}).Mean() == 0.0);
  // Bad masks are errors, naming the index.
  std::vector<float> neg(16, 1.0f);
  neg[5] = -1.0f;
  auto bad = LocalLossPart(zeros, neg);
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("loss_mask[5] = -1") != std::string::npos);
  CHECK(!LocalLossPart(zeros, std::vector<float>(3, 1.0f)).ok());
}

TEST_CASE("cp batch: the loss all-reduce times out when a rank is missing", "[cp_batch]") {
  auto grid = transport::RankGrid::Create(2, 1, 1, 2);
  REQUIRE(grid.ok());
  transport::InProcessHub hub(2);
  const transport::RankView view(*grid, 0);
  auto r = AllReduceCpLoss(hub.ForRank(0), view.context_parallel_group(), CpLossPart{1.0, 2.0},
                           absl::Milliseconds(50));
  REQUIRE(r.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(r.status().message()).find("context_parallel#0") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::layers::cp
