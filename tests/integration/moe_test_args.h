// tests/integration/moe_test_args.h: the tiny MoE GPT the MoE parity tests train
// (moe_parity_test, moe_ep_parity_test): 4 layers, hidden 32, 4 heads, seq 32, 4 experts,
// top-2, expert FFN 48, 8 iterations of global batch 8 with dropout, and router set-ups.
#ifndef MXMACA_TESTS_INTEGRATION_MOE_TEST_ARGS_H_
#define MXMACA_TESTS_INTEGRATION_MOE_TEST_ARGS_H_

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/train/train_command.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {

// MoEBaseArgs: the model and schedule flags, then `moe` (router flags), then the corpus's.
inline std::vector<std::string> MoEBaseArgs(const ParityCorpus& corpus,
                                            const std::vector<std::string>& moe) {
  std::vector<std::string> a = {
      "--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4",
      "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "1",
      "--global-batch-size", "8", "--train-iters", "8", "--lr", "3e-3", "--min-lr", "3e-4",
      "--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--weight-decay", "0.1",
      "--clip-grad", "1.0", "--hidden-dropout", "0.1", "--attention-dropout", "0.1",
      "--eval-interval", "4", "--eval-iters", "1", "--num-experts", "4",
      "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48"};
  a.insert(a.end(), moe.begin(), moe.end());
  const std::vector<std::string> common = corpus.CommonArgs(1000);
  a.insert(a.end(), common.begin(), common.end());
  return a;
}

// With: `a` followed by `more`.
inline std::vector<std::string> With(std::vector<std::string> a,
                                     const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// ErrorCase: flags added to a base run, and a piece of the error message they must give.
using ErrorCase = std::pair<std::vector<std::string>, std::string>;

// CheckTrainErrors: every case's run fails (non-OK status, no training) with a message
// containing its expected piece.
inline void CheckTrainErrors(const std::vector<std::string>& base,
                             const std::vector<ErrorCase>& cases) {
  for (const auto& [extra, expected] : cases) {
    absl::StatusOr<actors::TrainingSummary> r =
        api::Train(With(base, extra), [](const std::string&) {});
    INFO(expected);
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find(expected) != std::string::npos);
  }
}

// Router A: softmax top-2 on every other layer, dropless, aux loss 1e-2, z-loss 1e-3, a
// shared expert, GELU with biases.
inline const std::vector<std::string> kMoERouterA = {
    "--moe-layer-freq", "2", "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3",
    "--moe-shared-expert-intermediate-size", "32"};

// kMinTopKMargin: the smallest top-k margin (TrainingSummary::moe_min_topk_margin) a MoE
// parity test's single-device run may have. A top-k choice is discontinuous: one whose
// margin is below the difference the parallel layouts' summation order makes in the values
// it chooses on can take another expert there (or count another in the aux loss), and the
// runs then differ by a whole token's gradient — a real outcome of fp32, not a bug, and no
// tolerance on the result covers it (seen: ~1 draw in 50 failed the 1e-3 weight bound of
// cp2 tp2 sp pp2 that way, once through the aux loss's top-k on softmax scores 3e-8
// apart). The bound: over the 8 steps of cp2 tp2 sp pp2 (the most reduced layout) the
// router logits differed from one device's by at most d = 9e-8 (measured on every token
// of every step, router A) until a choice flipped. A margin between two logits then moves
// by at most 2d = 1.8e-7; between two scores (softmax, sigmoid: slope <= 1/4, each value
// rounded once more, ulp <= 6e-8 below 1) by at most 2 (d / 4 + ulp) = 1.6e-7. 5e-7 is
// about 3 times either. Scores sit on a grid of 3e-8..6e-8, so with 16K choices per run
// (router C) about half the draws have a margin below it; they are redrawn (one
// single-device run, ~1 s, each).
constexpr double kMinTopKMargin = 5e-7;
constexpr int kMaxReferenceDraws = 30;

// MoEReference: a MoE parity test's single-device run and what it was drawn with.
struct MoEReference {
  std::vector<std::string> base;  // the run's flags (the seed included)
  Weights w0;                     // its initial weights (ParityCorpus::InitialWeights)
  Run single;
};

// DrawMoEReference: base = make_base() (built from corpus.CommonArgs, so with its seed),
// trained on one device for `iterations` steps with `single_extra` added (flags for that
// run only, e.g. its --save, whose directory is emptied before each draw); while that run's
// smallest top-k margin is below kMinTopKMargin, a fresh seed (ParityCorpus::Redraw, printed) and
// again. FAILs after kMaxReferenceDraws draws (at the measured rejection rate of at most ~60%, 30
// in a row has a chance of ~2e-7).
inline MoEReference DrawMoEReference(ParityCorpus& corpus,
                                     const std::function<std::vector<std::string>()>& make_base,
                                     const std::string& label, int iterations,
                                     const std::vector<std::string>& single_extra = {}) {
  for (int draw = 1; draw <= kMaxReferenceDraws; ++draw) {
    for (size_t i = 0; i + 1 < single_extra.size(); ++i) {
      if (single_extra[i] == "--save") std::filesystem::remove_all(single_extra[i + 1]);
    }
    MoEReference ref;
    ref.base = make_base();
    ref.single = corpus.Train(label, With(ref.base, single_extra), iterations);
    const double margin = ref.single.summary.moe_min_topk_margin;
    REQUIRE(std::isfinite(margin));  // every router here leaves experts out (k < E)
    if (margin >= kMinTopKMargin) {
      ref.w0 = corpus.InitialWeights(ref.base, 1000);
      return ref;
    }
    std::cerr << label << ": draw " << draw << " has a top-k choice " << margin << " from a tie (< "
              << kMinTopKMargin << "), which another summation order "
              << "may flip; drawing another seed" << std::endl;
    corpus.Redraw();
  }
  FAIL("no draw of " << kMaxReferenceDraws << " had every top-k margin >= " << kMinTopKMargin);
  return {};
}

}  // namespace mxmaca::testing

#endif  // MXMACA_TESTS_INTEGRATION_MOE_TEST_ARGS_H_
