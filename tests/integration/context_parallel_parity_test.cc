// Context parallelism in `mxmaca train` (issue 9): --context-parallel-size 2 and 4, CP 2
// composed with TP 2 (+ sequence parallelism) and PP 2, CP 4 x TP 2 (+ SP) with PP 1 and 2, CP 2 x DP 2 with the distributed
// optimizer, and CP with selective / full recomputation, against the CP = 1 run on the same weights and batches, for a
// Llama-like GPT (RoPE, GQA, RMSNorm, SwiGLU, untied) and a GPT-2-like one (learned
// positions, LayerNorm, GELU, tied embeddings) trained on packed documents with
// --reset-position-ids --reset-attention-mask --eod-mask-loss (document masks across CP
// chunks, original position ids after slicing, masked tokens in the CP loss rule).
// Hidden dropout 0.1 (its masks are keyed by unsharded positions, so they do not depend
// on CP); attention dropout 0, which CP needs (cp_setup.h).
//
// Tolerances (docs/ARCHITECTURE.md "Numerics"): per-step training loss and the evaluation loss within
// 1e-5 relative over 10 steps; per-tensor weight change within 1e-3 relative, norm-wise.
// In fp32, CP changes summation orders only: the attention softmax is accumulated block
// by block around the ring (online, in ring order) instead of over the whole row, each
// weight gradient is a sum over CP ranks of partial sums over their s/CP tokens, and the
// loss numerator is summed over CP ranks (as an fp32 pair) — each a few 2^-24 relative
// (~1e-7 .. 4e-6 for sums of <= 64 terms), which the loss, a mean over 256 tokens per
// step, does not amplify; Adam normalises each update, so the gradients' relative error
// carries into the weight change (the TP parity test's argument). A wrong chunk, a RoPE
// angle at a local instead of the original position, a lost or doubled CP contribution or
// a gradient averaged over CP instead of summed are O(1e-2 .. 1) errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "api/train/train_command.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

struct Model {
  const char* name;
  std::vector<std::string> args;
};

const Model kLlama{"llama",
                   {"--hidden-size", "64", "--num-attention-heads", "8", "--normalization",
                    "RMSNorm", "--swiglu", "--position-embedding-type", "rope",
                    "--group-query-attention", "--num-query-groups", "4",
                    "--untie-embeddings-and-output-weights", "--disable-bias-linear"}};
const Model kGpt2{"gpt2", {"--hidden-size", "32", "--num-attention-heads", "4"}};

std::vector<std::string> Base(const ParityCorpus& corpus, const Model& m) {
  std::vector<std::string> a = {
      "--num-layers", "4", "--seq-length", "32", "--max-position-embeddings", "32",
      "--micro-batch-size", "1", "--global-batch-size", "8", "--train-iters", "10", "--lr",
      "3e-3", "--min-lr", "3e-4", "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
      "--weight-decay", "0.1", "--clip-grad", "1.0", "--hidden-dropout", "0.1",
      "--attention-dropout", "0", "--eval-interval", "5", "--eval-iters", "2",
      "--reset-position-ids", "--reset-attention-mask", "--eod-mask-loss"};
  a.insert(a.end(), m.args.begin(), m.args.end());
  const std::vector<std::string> common = corpus.CommonArgs(1000);
  a.insert(a.end(), common.begin(), common.end());
  return a;
}

struct Layout {
  int cp, tp, pp, dp;
  bool sp, dist;
  std::vector<std::string> extra = {};  // e.g. recomputation (numerics unchanged at CP 1)
  std::string Label() const {
    std::string l = "cp" + std::to_string(cp) + " tp" + std::to_string(tp) + (sp ? " sp" : "") +
                    " pp" + std::to_string(pp) + " dp" + std::to_string(dp) +
                    (dist ? " distopt" : "");
    for (const std::string& e : extra) l += " " + e;
    return l;
  }
};

std::vector<std::string> With(std::vector<std::string> a, const Layout& l) {
  a.insert(a.end(), {"--context-parallel-size", std::to_string(l.cp),
                     "--tensor-model-parallel-size", std::to_string(l.tp),
                     "--pipeline-model-parallel-size", std::to_string(l.pp), "--world-size",
                     std::to_string(l.cp * l.tp * l.pp * l.dp)});
  if (l.sp) a.push_back("--sequence-parallel");
  if (l.dist) a.push_back("--use-distributed-optimizer");
  a.insert(a.end(), l.extra.begin(), l.extra.end());
  return a;
}

void CheckValidLosses(const Run& ref, const Run& run) {
  INFO(run.label << " vs " << ref.label);
  REQUIRE(run.summary.valid_losses.size() == ref.summary.valid_losses.size());
  REQUIRE(!ref.summary.valid_losses.empty());
  for (size_t i = 0; i < ref.summary.valid_losses.size(); ++i) {
    const double a = ref.summary.valid_losses[i].second, b = run.summary.valid_losses[i].second;
    CHECK(run.summary.valid_losses[i].first == ref.summary.valid_losses[i].first);
    CHECK(std::isfinite(b));
    CHECK(std::fabs(a - b) <= 1e-5 * std::fabs(a));
  }
}

TEST_CASE("CP {2,4}, CP {2,4} x TP2 x PP2, CP4 x TP2 and CP2 x DP2: the same run as CP 1") {
  for (const Model& m : {kLlama, kGpt2}) {
    ParityCorpus corpus(std::string("cp_parity_") + m.name);
    const std::vector<std::string> base = Base(corpus, m);
    const Weights w0 = corpus.InitialWeights(base, 1000);
    const Run single = corpus.Train(std::string(m.name) + " cp1", base, 10);
    const std::vector<Layout> layouts = {{2, 1, 1, 1, false, false},
                                         {4, 1, 1, 1, false, false},
                                         {2, 2, 2, 1, true, false},
                                         {4, 2, 1, 1, true, false},
                                         {4, 2, 2, 1, true, false},  // 16 ranks
                                         {2, 1, 1, 2, false, true},
                                         // B reruns the ring forward (selective) or the
                                         // whole layers (full) on every CP rank alike.
                                         {4, 1, 1, 1, false, false,
                                          {"--recompute-granularity", "selective"}},
                                         {2, 1, 2, 1, false, false,
                                          {"--recompute-granularity", "full",
                                           "--recompute-method", "uniform",
                                           "--recompute-num-layers", "1"}}};
    for (const Layout& l : layouts) {
      const Run run = corpus.Train(std::string(m.name) + " " + l.Label(), With(base, l), 10);
      CheckClose(single, run, w0, 1e-5, 1e-3);
      CheckValidLosses(single, run);
    }
  }
}

TEST_CASE("CP with --calculate-per-token-loss, and a CP 2 checkpoint resumed at CP 4") {
  ParityCorpus corpus("cp_per_token_resume");
  std::vector<std::string> base = Base(corpus, kLlama);
  const Weights w0 = corpus.InitialWeights(base, 1000);
  {
    std::vector<std::string> per_token = base;
    per_token.push_back("--calculate-per-token-loss");
    const Run single = corpus.Train("per-token cp1", per_token, 10);
    const Run cp2 = corpus.Train("per-token cp2 dp2", With(per_token, {2, 1, 1, 2, false, false}),
                                 10);
    CheckClose(single, cp2, w0, 1e-5, 1e-3);
    CheckValidLosses(single, cp2);
  }
  // Saved at CP 2 x DP 2 with the distributed optimizer (its shards cut over dp x CP),
  // resumed at CP 4 and at CP 1: the steps after the resume equal the uninterrupted run's.
  const Run uninterrupted = corpus.Train("cp1, 10 steps", base, 10);
  const std::string ckpt = corpus.dir() + "/cp_relayout";
  std::vector<std::string> first = With(base, {2, 1, 1, 2, false, true});
  first.insert(first.end(), {"--save", ckpt, "--save-interval", "5", "--exit-interval", "5"});
  (void)corpus.Train("cp2 dp2 distopt, 5 steps", first, 5);
  for (const Layout& l : {Layout{4, 1, 1, 1, false, false}, Layout{1, 1, 1, 1, false, false}}) {
    std::vector<std::string> resume = With(base, l);
    resume.insert(resume.end(), {"--load", ckpt});
    const Run rest = corpus.Train("resumed at " + l.Label(), resume, 5);
    INFO(rest.label);
    REQUIRE(rest.summary.first_iteration == 5);
    for (size_t i = 0; i < 5; ++i) {
      INFO("iteration " << 6 + i);
      const double a = uninterrupted.summary.train_losses[5 + i], b = rest.summary.train_losses[i];
      CHECK(std::fabs(a - b) <= 1e-5 * std::fabs(a));
    }
    Run last = rest;
    last.summary.train_losses.assign(uninterrupted.summary.train_losses.begin(),
                                     uninterrupted.summary.train_losses.end());
    CheckClose(uninterrupted, last, w0, 1e-5, 1e-3);
  }
}

TEST_CASE("mxmaca train rejects CP layouts it cannot run, naming the flags") {
  ParityCorpus corpus("cp_errors");
  const std::vector<std::string> base = Base(corpus, kLlama);
  struct Case {
    std::vector<std::string> extra;
    const char* expect;
  } cases[] = {
      {{"--context-parallel-size", "3", "--world-size", "3"}, "--context-parallel-size"},
      {{"--context-parallel-size", "4", "--tensor-model-parallel-size", "2",
        "--sequence-parallel", "--seq-length", "40", "--max-position-embeddings", "40",
        "--world-size", "8"},
       "2 x --context-parallel-size x --tensor-model-parallel-size"},
      {{"--context-parallel-size", "2", "--attention-dropout", "0.1", "--world-size", "2"},
       "--attention-dropout 0"},
      {{"--context-parallel-size", "2", "--dynamic-pipeline", "--world-size", "2"},
       "--dynamic-pipeline"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    std::string log;
    auto s = api::Train(args, [&](const std::string& line) { log += line + "\n"; });
    INFO(c.expect << "\n" << log);
    REQUIRE_FALSE(s.ok());
    INFO(s.status().message());
    CHECK(std::string(s.status().message()).find(c.expect) != std::string::npos);
  }
}

}  // namespace
}  // namespace mxmaca::testing
