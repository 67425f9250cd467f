// tests/integration/moe_test_args.h: the tiny MoE GPT the MoE parity tests train
// (moe_parity_test, moe_ep_parity_test): 4 layers, hidden 32, 4 heads, seq 32, 4 experts,
// top-2, expert FFN 48, 8 iterations of global batch 8 with dropout, and router set-ups.
#ifndef MXMACA_TESTS_INTEGRATION_MOE_TEST_ARGS_H_
#define MXMACA_TESTS_INTEGRATION_MOE_TEST_ARGS_H_

#include <catch2/catch.hpp>

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

}  // namespace mxmaca::testing

#endif  // MXMACA_TESTS_INTEGRATION_MOE_TEST_ARGS_H_
