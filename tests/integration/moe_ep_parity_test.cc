// MoE GPT with expert parallelism (issue "Mixture of Experts", "EP in {1,2,4} composed with
// TP/PP/DP"): EP = TP with sequence parallelism and expert tensor parallel size 1 (the
// layout this version admits, api/train/moe_setup.cc), each TP rank holding E / EP experts
// and routing its own sequence-parallel rows, the tokens moved by the all-gather,
// all-to-all and hierarchical dispatchers — against the single-device (EP 1) run on the
// same weights and batches.
//
// Why the tolerances hold. Dispatch and combine copy rows bit for bit and the expert GEMM's
// rows do not depend on how many rows it gets (layers/moe/expert_gemm.h), so every token's
// MoE output is the same bits at EP 1 and EP > 1 at the same TP layout: the first
// iteration's loss (a forward of the initial weights) must be IDENTICAL between
// "tp2 sp" at EP 1 and EP 2, and so must the tokens each expert received in it. After that
// the runs differ only in summation order — expert weight gradients summed over the rows
// of all EP ranks in one GEMM instead of per rank, the router's and shared expert's
// gradient summed over the TP group, the aux-loss counts reduced over it — and fp32
// reassociation moves a sum by a few ulps (~1e-7 relative), which over 8 AdamW steps stays
// well inside the per-step loss bound of 1e-5 relative and the weight-change bound of 1e-3
// norm-wise used by every parity test here (tensor_parallel_parity_test.cc). A top-k flip
// needs a choice within that drift of a tie, which many fresh draws at this size have
// somewhere in their 8 steps: the single-device reference is redrawn until every margin is
// >= 5e-7 (DrawMoEReference and its arithmetic, moe_test_args.h).
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "api/train/train_command.h"
#include "tests/integration/moe_test_args.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

// Router C: sigmoid top-2 with a top-k scaling factor on every layer, aux loss, SwiGLU, no
// biases (router A: moe_test_args.h).
const std::vector<std::string> kRouterC = {
    "--moe-layer-freq", "1", "--moe-router-score-function", "sigmoid",
    "--moe-router-topk-scaling-factor", "2.0", "--moe-aux-loss-coeff", "1e-2",
    "--swiglu", "--disable-bias-linear", "--normalization", "RMSNorm"};

// The "tokens per expert: [...]" of the first log line of MoE layer `layer`.
std::string FirstTokensPerExpert(const std::string& log, int layer) {
  const std::string key = "moe layer " + std::to_string(layer) + " | tokens per expert: [";
  const size_t at = log.find(key);
  if (at == std::string::npos) return "";
  const size_t end = log.find(']', at);
  return log.substr(at + key.size(), end - at - key.size());
}

// The parameter count the log prints for (tensor, pipeline) rank (0, 0), or -1.
int64_t RankParameters(const std::string& log) {
  const std::string key = "model parallel rank (0, 0): ";
  const size_t at = log.find(key);
  if (at == std::string::npos) return -1;
  return std::stoll(log.substr(at + key.size()));
}

TEST_CASE("MoE GPT: expert parallelism EP = TP in {2, 4} gives the EP 1 run") {
  // Elements of one expert (hidden 32, --moe-ffn-hidden-size 48) and the MoE layers:
  // A: GELU with biases, layers 0 and 2; C: SwiGLU without biases, all 4 layers.
  const int64_t expert_a = 48 * 32 + 48 + 32 * 48 + 32, expert_c = 2 * 48 * 32 + 32 * 48;
  const std::pair<int64_t, int64_t> expert_elements[] = {{expert_a, 2}, {expert_c, 4}};
  int router_index = 0;
  for (const auto& [name, router] : {std::pair{"A", kMoERouterA}, std::pair{"C", kRouterC}}) {
    const auto [per_expert, moe_layers] = expert_elements[router_index++];
    ParityCorpus corpus(std::string("moe_ep_parity_") + name);
    const auto& [base, w0, single] = DrawMoEReference(
        corpus,
        [&, r = router] {
          return With(MoEBaseArgs(corpus, r), {"--log-interval", "1"});
        },
        std::string(name) + " single device", 8);
    const std::vector<std::string> tp2 = {"--tensor-model-parallel-size", "2",
                                          "--sequence-parallel", "--world-size", "2"};
    const Run ep1 = corpus.Train(std::string(name) + " tp2 sp ep1", With(base, tp2), 8);
    const Run ep2 = corpus.Train(
        std::string(name) + " tp2 sp ep2",
        With(base, With(tp2, {"--expert-model-parallel-size", "2",
                              "--expert-tensor-parallel-size", "1",
                              "--moe-token-dispatcher-type", "alltoall"})),
        8);
    CheckClose(single, ep1, w0, 1e-5, 1e-3);
    CheckClose(single, ep2, w0, 1e-5, 1e-3);
    // Batch invariance through training: the first forward is the same bits.
    REQUIRE(!ep1.summary.train_losses.empty());
    REQUIRE(!ep2.summary.train_losses.empty());
    CHECK(ep2.summary.train_losses[0] == ep1.summary.train_losses[0]);
    const std::string counts = FirstTokensPerExpert(ep1.log, 0);
    CHECK(!counts.empty());
    CHECK(FirstTokensPerExpert(ep2.log, 0) == counts);
    // At EP 2 a TP rank holds 2 of the 4 experts of every MoE layer.
    CHECK(RankParameters(ep1.log) - RankParameters(ep2.log) == 2 * per_expert * moe_layers);
    const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
        {"ep2 tp2 sp pp2 dp2 allgather",
         {"--tensor-model-parallel-size", "2", "--sequence-parallel",
          "--pipeline-model-parallel-size", "2", "--world-size", "8",
          "--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"}},
        {"ep4 tp4 sp alltoall",
         {"--tensor-model-parallel-size", "4", "--sequence-parallel", "--world-size", "4",
          "--expert-model-parallel-size", "4", "--expert-tensor-parallel-size", "1",
          "--moe-token-dispatcher-type", "alltoall"}},
        {"ep2 tp2 sp dp2 distopt overlap hierarchical",
         {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--world-size", "4",
          "--use-distributed-optimizer", "--overlap-grad-reduce",
          "--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "1",
          "--moe-token-dispatcher-type", "hierarchical"}},
        {"ep2 tp2 sp pp2 zb-h1",
         {"--tensor-model-parallel-size", "2", "--sequence-parallel",
          "--pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-h1",
          "--world-size", "4", "--expert-model-parallel-size", "2",
          "--expert-tensor-parallel-size", "1"}},
    };
    for (const auto& [label, layout] : layouts) {
      const Run run = corpus.Train(std::string(name) + " " + label, With(base, layout), 8);
      CheckClose(single, run, w0, 1e-5, 1e-3);
      CHECK(run.log.find("moe layer 0 | tokens per expert") != std::string::npos);
    }
  }
}

// MoE with context parallelism: each CP rank routes its two chunks of every sequence; the
// CP group (TP x CP with EP and SP) is the token group (aux-loss counts, z-loss coefficient
// / group size, metrics), the router's gradients summed over CP by the dp-cp buckets.
// Against one device within the same bounds (the ring attention's order differs from the
// unsharded kernel's by fp32 rounding: context_parallel_parity_test.cc).
// Expert parallelism across data-parallel replicas (EP = k x TP, k > 1): an EP group spans
// k DP replicas, whose tokens it exchanges; the experts sit in their own arena region whose
// gradients are summed over the expert-data-parallel group (DP / k replicas) instead of
// the DP buckets, counted once in the grad norm and checkpointed by EDP rank 0 (the
// weights compared here are read back from each run's checkpoint). Bounds as above.
TEST_CASE("MoE GPT: expert parallelism across data-parallel ranks gives the EP 1 run") {
  for (const auto& [name, router] : {std::pair{"A", kMoERouterA}, std::pair{"C", kRouterC}}) {
    ParityCorpus corpus(std::string("moe_ep_dp_parity_") + name);
    const auto& [base, w0, single] = DrawMoEReference(
        corpus, [&, r = router] { return MoEBaseArgs(corpus, r); },
        std::string(name) + " single device", 8);
    const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
        {"ep2 dp2 (EDP 1) alltoall",
         {"--expert-model-parallel-size", "2", "--world-size", "2",
          "--moe-token-dispatcher-type", "alltoall"}},
        {"ep4 tp2 sp dp2 (EDP 1) allgather",
         {"--expert-model-parallel-size", "4", "--tensor-model-parallel-size", "2",
          "--sequence-parallel", "--expert-tensor-parallel-size", "1", "--world-size", "4"}},
        {"ep2 pp2 dp4 (EDP 2) alltoall overlap",
         {"--expert-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
          "--world-size", "8", "--moe-token-dispatcher-type", "alltoall",
          "--overlap-grad-reduce"}},
    };
    for (const auto& [label, layout] : layouts) {
      const Run run = corpus.Train(std::string(name) + " " + label, With(base, layout), 8);
      CheckClose(single, run, w0, 1e-5, 1e-3);
    }
  }
}

TEST_CASE("MoE GPT with context parallelism (CP x EP x TP x PP x DP) gives the one-device run") {
  for (const auto& [name, router] : {std::pair{"A", kMoERouterA}, std::pair{"C", kRouterC}}) {
    ParityCorpus corpus(std::string("moe_cp_parity_") + name);
    const auto& [base, w0, single] = DrawMoEReference(
        corpus,
        [&, r = router] {
          return With(MoEBaseArgs(corpus, r), {"--attention-dropout", "0"});
        },
        std::string(name) + " single device", 8);
    const std::vector<std::pair<std::string, std::vector<std::string>>> layouts = {
        {"cp2", {"--context-parallel-size", "2", "--world-size", "2"}},
        {"cp2 tp2 sp pp2",
         {"--context-parallel-size", "2", "--tensor-model-parallel-size", "2",
          "--sequence-parallel", "--pipeline-model-parallel-size", "2", "--world-size", "8"}},
        {"cp2 ep2 tp2 sp dp2",
         {"--context-parallel-size", "2", "--tensor-model-parallel-size", "2",
          "--sequence-parallel", "--world-size", "8", "--expert-model-parallel-size", "2",
          "--expert-tensor-parallel-size", "1", "--moe-token-dispatcher-type", "alltoall"}},
    };
    for (const auto& [label, layout] : layouts) {
      const Run run = corpus.Train(std::string(name) + " " + label, With(base, layout), 8);
      CheckClose(single, run, w0, 1e-5, 1e-3);
      // The routing lines count every token once (the metrics are summed over the token
      // group and reported by its first rank): the first line's totals equal one device's.
      const std::string one = FirstTokensPerExpert(single.log, 0);
      const std::string got = FirstTokensPerExpert(run.log, 0);
      int64_t sum_one = 0, sum_got = 0;
      for (absl::string_view v : absl::StrSplit(one, ' ', absl::SkipEmpty())) {
        sum_one += std::stoll(std::string(v));
      }
      for (absl::string_view v : absl::StrSplit(got, ' ', absl::SkipEmpty())) {
        sum_got += std::stoll(std::string(v));
      }
      CHECK(sum_one > 0);
      CHECK(sum_got == sum_one);
    }
  }
}

TEST_CASE("MoE expert-parallel layouts this version does not run are clear errors") {
  ParityCorpus corpus("moe_ep_errors");
  const std::vector<std::string> base = MoEBaseArgs(corpus, kMoERouterA);
  CheckTrainErrors(base, {
           // EP not a multiple of TP.
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "4",
             "--sequence-parallel", "--expert-tensor-parallel-size", "1", "--world-size", "4"},
            "--expert-model-parallel-size 2 with --tensor-model-parallel-size 4"},
           // EP across DP replicas with the distributed optimizer.
           {{"--expert-model-parallel-size", "2", "--world-size", "2",
             "--use-distributed-optimizer"},
            "with --use-distributed-optimizer is not implemented"},
           // Megatron's default ETP = TP: expert tensor parallelism.
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
             "--sequence-parallel", "--world-size", "4"},
            "--expert-tensor-parallel-size 2"},
           // ... whose expert grid does not tile the world (Megatron's check).
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
             "--sequence-parallel", "--world-size", "2"},
            "expert tensor (2) x expert (2)"},
           // MoE with TP needs SP.
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
             "--expert-tensor-parallel-size", "1", "--world-size", "2"},
            "--sequence-parallel"},
           // Experts not divisible by EP.
           {{"--num-experts", "6", "--expert-model-parallel-size", "4",
             "--tensor-model-parallel-size", "4", "--sequence-parallel",
             "--expert-tensor-parallel-size", "1", "--world-size", "4"},
            "--num-experts"},
           // The dynamic policy decides per stage actor; TP ranks must post alike.
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
             "--sequence-parallel", "--expert-tensor-parallel-size", "1", "--world-size", "2",
             "--pipeline-schedule", "zb-h1", "--dynamic-pipeline"},
            "--dynamic-pipeline with --tensor-model-parallel-size 2"},
           // Megatron's flex dispatcher (DeepEP) is not implemented.
           {{"--expert-model-parallel-size", "2", "--tensor-model-parallel-size", "2",
             "--sequence-parallel", "--expert-tensor-parallel-size", "1", "--world-size", "2",
             "--moe-token-dispatcher-type", "flex"},
            "flex"}});
}

}  // namespace
}  // namespace mxmaca::testing
