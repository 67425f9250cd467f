// MoE aux-loss-free load balancing in training (--moe-router-enable-expert-bias,
// --moe-router-bias-update-rate; Megatron-Core's _update_router_expert_bias): the bias is
// updated once per iteration from the token counts summed over the stage's TP x DP ranks,
// and travels with checkpoints as "buffers/decoder.layers.N.mlp.router.expert_bias".
//
// Criteria. (1) Layouts: TP2 x SP x PP2 x DP2 and EP2 x TP2 x SP x DP2 against the single
// device — losses within 1e-5 relative and weight changes within 1e-3 (the parity tests'
// fp32 bounds, moe_ep_parity_test.cc), and the final biases IDENTICAL: every update adds
// +-rate or 0 decided by integer token counts, which are the same as long as no top-k
// choice flips (the routing is the same bits in the first forward and drifts by ~1e-7
// relative later; the reference is redrawn until no choice is within 5e-7 of a tie:
// DrawMoEReference, moe_test_args.h). (2) The bias moves (a run that does not
// update it would leave zeros) and is what routes: a run without the flag gives other
// losses. (3) A run stopped at iteration 4 and resumed ends with the uninterrupted run's
// bias and losses, bit for bit (the bias is restored from the checkpoint; were it not,
// routing after the resume would differ).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_reader.h"
#include "api/train/train_command.h"
#include "tests/integration/moe_test_args.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

// Sigmoid top-2 on every layer with the expert bias, no aux loss (DeepSeek-V3's recipe).
const std::vector<std::string> kBiasRouter = {
    "--moe-layer-freq", "1", "--moe-router-score-function", "sigmoid",
    "--moe-router-load-balancing-type", "none", "--moe-router-enable-expert-bias",
    "--moe-router-bias-update-rate", "1e-2"};

// The expert bias of every layer in the latest checkpoint of `save`, layer after layer.
std::vector<float> Biases(const std::string& save) {
  absl::StatusOr<actors::checkpoint::CheckpointReader> r =
      actors::checkpoint::CheckpointReader::Open(save);
  REQUIRE(r.ok());
  std::vector<float> out;
  for (int layer = 0; layer < 4; ++layer) {
    const std::string name =
        "buffers/decoder.layers." + std::to_string(layer) + ".mlp.router.expert_bias";
    REQUIRE(r->HasTensor(name));
    std::vector<float> b(4);
    REQUIRE(r->ReadShard(name, {4}, {0}, {4}, b.data()).ok());
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

TEST_CASE("MoE expert bias: updated over TP x DP, the same under every layout, resumable") {
  ParityCorpus corpus("moe_expert_bias");
  const std::string dir = corpus.dir();
  const auto& [base, w0, single] =
      DrawMoEReference(corpus, [&] { return MoEBaseArgs(corpus, kBiasRouter); }, "single device", 8,
                       {"--save", dir + "/single", "--save-interval", "8"});
  const std::vector<float> bias = Biases(dir + "/single");
  int moved = 0;
  for (float v : bias) moved += v != 0.0f;
  CHECK(moved > 0);

  const Run layouts[] = {
      corpus.Train("tp2 sp pp2 dp2",
                   With(base, {"--tensor-model-parallel-size", "2", "--sequence-parallel",
                               "--pipeline-model-parallel-size", "2", "--world-size", "8",
                               "--save", dir + "/tp2pp2dp2", "--save-interval", "8"}),
                   8),
      corpus.Train("ep2 tp2 sp dp2",
                   With(base, {"--tensor-model-parallel-size", "2", "--sequence-parallel",
                               "--world-size", "4", "--expert-model-parallel-size", "2",
                               "--expert-tensor-parallel-size", "1", "--save", dir + "/ep2dp2",
                               "--save-interval", "8"}),
                   8)};
  const char* saves[] = {"/tp2pp2dp2", "/ep2dp2"};
  for (int i = 0; i < 2; ++i) {
    CheckClose(single, layouts[i], w0, 1e-5, 1e-3);
    CHECK(Biases(dir + saves[i]) == bias);
  }

  // Without the update the losses differ (the bias is what changes the routing).
  std::vector<std::string> no_bias = base;
  no_bias.erase(std::find(no_bias.begin(), no_bias.end(), "--moe-router-enable-expert-bias"));
  const Run plain = corpus.Train(
      "no bias", With(no_bias, {"--save", dir + "/plain", "--save-interval", "8"}), 8);
  CHECK(plain.summary.train_losses != single.summary.train_losses);

  // Stop at 4 (save), resume: the uninterrupted run's bias and losses.
  const std::vector<std::string> resume =
      With(base, {"--save", dir + "/resume", "--save-interval", "4"});
  absl::StatusOr<actors::TrainingSummary> first =
      api::Train(With(resume, {"--exit-interval", "4"}), [](const std::string&) {});
  REQUIRE(first.ok());
  absl::StatusOr<actors::TrainingSummary> second =
      api::Train(With(resume, {"--load", dir + "/resume"}), [](const std::string&) {});
  REQUIRE(second.ok());
  CHECK(Biases(dir + "/resume") == bias);
  REQUIRE(second->train_losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(second->train_losses[i] == single.summary.train_losses[4 + i]);
  }
}

}  // namespace
}  // namespace mxmaca::testing
