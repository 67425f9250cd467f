// The parity matrix of pipeline and data parallelism (issue: "Pipeline and data
// parallelism on the actor runtime"): for the same global batch and seed, with dropout
// on, every combination of PP in {1, 2, 4}, DP in {1, 2}, schedule in {GPipe, 1F1B,
// interleaved 1F1B (v = 2), ZB-H1, ZB-H2, ZB-V (two chunks in a V)} and the distributed
// optimizer off/on gives the same run as PP = DP = 1:
//  - BIT-IDENTICAL (losses, grad norms and final weights) wherever the arithmetic order is
//    the same: any PP under any schedule against PP = 1 at equal DP, and the distributed
//    optimizer on vs off. Why the order is the same: dropout masks are a function of
//    (seed, layer, iteration, global micro-batch); each stage accumulates weight
//    gradients in micro-batch order whatever order W ran in (layers/gpt_stage.h); the DP
//    reduction sums replicas in rank order, and reduce-scatter + all-gather produce the
//    same bits as all-reduce (transport/inprocess_communicator.h); the grad norm sums each
//    rank's shard in a fixed order and the ranks in rank order (layers/grad_buckets.h),
//    and the clip factor is a float of it. These runs use untied embeddings: with tied
//    ones the two copies' gradients are summed at the end (Megatron's embedding group),
//    a different association than one stage adding both per micro-batch.
//  - Within tolerance where it is not: DP 2 against DP 1 (each replica sums its own
//    micro-batches, then the replicas are added; DP 1 sums all in one order) — per-step
//    loss within 1e-5 relative over 10 steps and, per parameter tensor, the change from
//    the initial weights (w10 - w0) within 1e-3 relative norm-wise (docs/ARCHITECTURE.md
//    "Numerics"): fp32 reassociation of ~8 micro-batch terms moves gradients by a few
//    ulp (~1e-7 relative); Adam's update divides by sqrt(v) ~ |g|, so it carries that
//    relative error into the step, and 10 steps of a chaotic optimiser grow it by at most
//    a few orders of magnitude — well inside 1e-3 of the total change, while a wrong
//    scaling (a missing 1/dp, a double-counted tensor) is an O(1) error. Tied embeddings
//    across stages are checked the same way.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tests/integration/parity_fixture.h"
#include "tests/integration/tiny_corpus.h"

namespace mxmaca::testing {
namespace {

struct Layout {
  int pp = 1, dp = 1;
  int micro_batch_size = 1;
  bool dropout = true;
  std::string schedule = "1f1b";  // "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v"
  bool distributed_optimizer = false;
  bool tied = false;
  bool dynamic = false;  // --dynamic-pipeline with a 3x slower stage 1 from iteration 2
  std::string Label() const {
    return "pp" + std::to_string(pp) + " dp" + std::to_string(dp) + " mbs" +
           std::to_string(micro_batch_size) + " " + schedule +
           (distributed_optimizer ? " dist-opt" : "") + (tied ? " tied" : " untied") +
           (dynamic ? " dynamic" : "");
  }
};

// ParityFixture: the 8-layer, hidden-32 GPT of these tests under a Layout.
class ParityFixture {
 public:
  ParityFixture() : corpus_("pipeline_parity") {}

  std::vector<std::string> Args(const Layout& l) const {
    std::vector<std::string> a = {
        "--num-layers", "8", "--hidden-size", "32", "--num-attention-heads", "4",
        "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size",
        std::to_string(l.micro_batch_size),
        "--global-batch-size", "8", "--train-iters", "10", "--lr", "3e-3", "--min-lr", "3e-4",
        "--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--weight-decay", "0.1",
        "--clip-grad", "1.0", "--hidden-dropout", l.dropout ? "0.1" : "0.0",
        "--attention-dropout", l.dropout ? "0.1" : "0.0", "--eval-interval", "5",
        "--eval-iters", "1", "--pipeline-model-parallel-size", std::to_string(l.pp),
        "--world-size", std::to_string(l.pp * l.dp)};
    const std::vector<std::string> common = corpus_.CommonArgs(kTinyVocab);
    a.insert(a.end(), common.begin(), common.end());
    if (!l.tied) a.push_back("--untie-embeddings-and-output-weights");
    if (l.pp > 1) {
      a.insert(a.end(), {"--pipeline-schedule", l.schedule});
      if (l.schedule == "interleaved-1f1b") {
        a.insert(a.end(), {"--num-layers-per-virtual-pipeline-stage", std::to_string(8 / l.pp / 2)});
      }
      if (l.schedule == "zb-v") a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", "2"});
    }
    if (l.distributed_optimizer) a.push_back("--use-distributed-optimizer");
    if (l.dynamic) a.insert(a.end(), {"--dynamic-pipeline", "--inject-stage-slowdown", "1:3:2"});
    return a;
  }

  Run Train(const Layout& l) { return corpus_.Train(l.Label(), Args(l), 10); }

  // The initial weights: a function of (seed, name) (layers/parameter_store.h).
  Weights InitialWeights(bool tied) const {
    Layout l;
    l.tied = tied;
    return corpus_.InitialWeights(Args(l), kTinyVocab);
  }

 private:
  ParityCorpus corpus_;
};

TEST_CASE("PP x DP x schedule x distributed optimizer: the same run as one device") {
  ParityFixture f;
  const Weights w0 = f.InitialWeights(/*tied=*/false);
  std::map<int, Run> reference;  // PP 1, no distributed optimizer, by DP
  for (int dp : {1, 2}) {
    Layout l;
    l.dp = dp;
    reference.emplace(dp, f.Train(l));
  }
  // The untrained and trained weights differ (the comparison below is not vacuous).
  CHECK(reference.at(1).weights.at("decoder.layers.0.mlp.linear_fc1.weight") !=
        w0.at("decoder.layers.0.mlp.linear_fc1.weight"));
  CheckClose(reference.at(1), reference.at(2), w0);

  for (int dp : {1, 2}) {
    for (int pp : {1, 2, 4}) {
      for (const char* schedule :
           {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v"}) {
        if (pp == 1 && std::string(schedule) != "1f1b") continue;  // one schedule at p = 1
        for (bool dist : {false, true}) {
          Layout l;
          l.pp = pp;
          l.dp = dp;
          l.schedule = schedule;
          l.distributed_optimizer = dist;
          if (pp == 1 && !dist) continue;  // the reference itself
          CheckBitIdentical(reference.at(dp), f.Train(l));
        }
      }
    }
  }
}

TEST_CASE("the dynamic policy (ready W and the next F run early) gives the static run's bits") {
  // Stage 1 is made 3x slower from iteration 2, so the stages after it wait and the
  // dynamic policy actually reorders their W (and F) ops; W accumulates in micro-batch
  // order whatever order it runs in, and channel orders are kept, so every bit matches.
  ParityFixture f;
  std::map<int, Run> reference;
  for (int dp : {1, 2}) {
    Layout l;
    l.dp = dp;
    reference.emplace(dp, f.Train(l));
  }
  for (int dp : {1, 2}) {
    for (const char* schedule : {"1f1b", "zb-h1", "interleaved-1f1b"}) {
      Layout l;
      l.pp = 4;
      l.dp = dp;
      l.schedule = schedule;
      l.dynamic = true;
      l.distributed_optimizer = dp == 2;
      CheckBitIdentical(reference.at(dp), f.Train(l));
    }
  }
}

TEST_CASE("tied embeddings across stages: copies summed, counted once, same run") {
  ParityFixture f;
  const Weights w0 = f.InitialWeights(/*tied=*/true);
  Layout single;
  single.tied = true;
  const Run ref = f.Train(single);
  // zb-v puts both ends of the tied embeddings on stage 0 (summed locally).
  for (auto [pp, dp, schedule] :
       {std::tuple{2, 1, "1f1b"}, {2, 1, "zb-v"}, {2, 2, "1f1b"}, {2, 2, "zb-v"},
        {4, 1, "1f1b"}, {4, 1, "zb-v"}, {4, 2, "1f1b"}, {4, 2, "zb-v"}}) {
    Layout l;
    l.tied = true;
    l.pp = pp;
    l.dp = dp;
    l.schedule = schedule;
    l.distributed_optimizer = dp == 2;
    const Run run = f.Train(l);
    CheckClose(ref, run, w0);
    // The grad norm counts the shared weight once: the single-device norm (where it is
    // one tensor) is matched; counting the copy too would add |g_emb|^2 (O(1) change).
    for (size_t i = 0; i < ref.summary.grad_norms.size(); ++i) {
      INFO(run.label << " step " << i + 1);
      CHECK(std::fabs(run.summary.grad_norms[i] - ref.summary.grad_norms[i]) <=
            1e-4 * ref.summary.grad_norms[i]);
    }
  }
}

TEST_CASE("the grad norm does not depend on how the global batch is split") {
  // Every micro-batch has the same number of unmasked tokens (b x s, no EOD masking), so
  // the per-micro-batch means averaged over micro-batches and replicas equal the global
  // mean: the first step's gradient, hence its norm, is the same for any (micro batch,
  // DP) split up to fp32 reassociation of <= 8 terms (~1e-7 relative, accumulated in fp64
  // for the norm); 1e-6 leaves margin. Dropout is off: its masks are keyed by the
  // micro-batch id, which a different split changes.
  ParityFixture f;
  std::vector<double> norms;
  std::vector<std::string> labels;
  for (auto [mbs, dp, pp] : {std::tuple{8, 1, 1}, {1, 1, 1}, {2, 1, 2}, {1, 2, 1},
                             {2, 2, 2}, {1, 4, 1}, {2, 4, 1}}) {
    Layout l;
    l.micro_batch_size = mbs;
    l.dp = dp;
    l.pp = pp;
    l.dropout = false;
    const Run run = f.Train(l);
    norms.push_back(run.summary.grad_norms.at(0));
    labels.push_back(run.label);
  }
  for (size_t i = 1; i < norms.size(); ++i) {
    INFO(labels[i] << " vs " << labels[0] << ": " << norms[i] << " vs " << norms[0]);
    CHECK(std::fabs(norms[i] - norms[0]) <= 1e-6 * norms[0]);
  }
}

}  // namespace
}  // namespace mxmaca::testing
