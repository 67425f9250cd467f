// MoE GPT (issue "Mixture of Experts"): the MoE model trained with tensor (+ sequence),
// pipeline (1F1B, interleaved, ZB-H1) and data parallelism and the distributed optimizer,
// against the single-device run on the same weights and batches, for two router set-ups:
//   A: softmax top-2 of 4 experts on every other layer, dropless, aux loss 1e-2, z-loss
//      1e-3, a shared expert, GELU with biases;
//   B: sigmoid top-2 of 4 experts with a top-k scaling factor on every layer, capacity
//      factor 1.0 with the position drop policy (tokens are dropped), seq_aux_loss, SwiGLU,
//      no biases.
// Every TP rank routes all tokens of the micro-batch through every expert (EP 1), so the
// routing and the expert GEMMs see the same rows as on one device (their row-invariant
// GEMM: layers/moe/expert_gemm.h); what TP changes is the attention's and the dense
// layers' row-parallel summation order (tensor_parallel_parity_test.cc) — a different
// router logit could flip a top-k choice only at a near-tie, so the single-device reference
// is redrawn until every top-k margin is >= 5e-7 (DrawMoEReference, moe_test_args.h). Tolerances as
// there: per-step loss within 1e-5 relative, the per-tensor weight change within 1e-3 relative,
// norm-wise.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "api/train/train_command.h"
#include "tests/integration/moe_test_args.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

const std::vector<std::string> kRouterB = {
    "--moe-layer-freq", "1", "--moe-router-score-function", "sigmoid",
    "--moe-router-topk-scaling-factor", "2.0", "--moe-router-load-balancing-type",
    "seq_aux_loss", "--moe-aux-loss-coeff", "1e-2", "--moe-expert-capacity-factor", "1.0",
    "--moe-token-drop-policy", "position", "--swiglu", "--disable-bias-linear",
    "--normalization", "RMSNorm"};

TEST_CASE("MoE GPT: TP x SP x PP x DP layouts give the single-device run") {
  for (const auto& [name, router] : {std::pair{"A", kMoERouterA}, std::pair{"B", kRouterB}}) {
    ParityCorpus corpus(std::string("moe_parity_") + name);
    const auto& [base, w0, single] = DrawMoEReference(
        corpus, [&, r = router] { return MoEBaseArgs(corpus, r); },
        std::string(name) + " single device", 8);
    const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
        {"tp2 sp pp2 dp2",
         {"--tensor-model-parallel-size", "2", "--sequence-parallel",
          "--pipeline-model-parallel-size", "2", "--world-size", "8"}},
        {"pp2 interleaved dp2 distopt",
         {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
          "--world-size", "4", "--use-distributed-optimizer", "--overlap-grad-reduce"}},
        {"pp2 zb-h1 dynamic dp2",
         {"--pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-h1",
          "--dynamic-pipeline", "--world-size", "4"}},
    };
    for (const auto& [label, layout] : layouts) {
      const Run run = corpus.Train(std::string(name) + " " + label, With(base, layout), 8);
      CheckClose(single, run, w0, 1e-5, 1e-3);
    }
  }
}

TEST_CASE("MoE flags that cannot run are clear errors") {
  ParityCorpus corpus("moe_errors");
  const std::vector<std::string> base = MoEBaseArgs(corpus, kMoERouterA);
  CheckTrainErrors(base, {
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "4",
             "--sequence-parallel", "--expert-tensor-parallel-size", "1", "--world-size", "4"},
            "--expert-model-parallel-size 2"},
           {{"--moe-router-topk", "5"}, "--moe-router-topk"},
           {{"--moe-layer-freq", "[1,0]"}, "--moe-layer-freq"},
           {{"--moe-router-score-function", "relu"}, "relu"}});
}

}  // namespace
}  // namespace mxmaca::testing
