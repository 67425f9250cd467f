// tests/integration/model_flags_train_test.cc: `mxmaca train` with Megatron's
// model-architecture flags that change the parameters or the maths of a layer (the maths
// itself is checked against PyTorch in tests/parity and layer by layer under TP in
// layers:gpt_stage_tp_test). Here: each flag is honoured (no "does not honour" error),
// registers Megatron-Core's tensors under their checkpoint names, changes the run where
// it should, and TP 2 gives the TP 1 run within the TP parity tolerance (1e-5 relative per
// step, 1e-3 on the weight change; tensor_parallel_parity_test argues it); where the
// device backend runs the flag, --device device-on-cpu gives the CPU run likewise.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "api/train/train_command.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

constexpr int64_t kVocab = 1000;

std::vector<std::string> Args(const ParityCorpus& corpus, std::vector<std::string> extra) {
  std::vector<std::string> a = {
      "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
      "--group-query-attention", "--num-query-groups", "2", "--position-embedding-type",
      "rope", "--normalization", "RMSNorm", "--swiglu", "--untie-embeddings-and-output-weights",
      "--disable-bias-linear", "--seq-length", "32", "--max-position-embeddings", "32",
      "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4", "--lr",
      "3e-3", "--hidden-dropout", "0", "--attention-dropout", "0", "--eval-interval", "100",
      "--eval-iters", "0",
      // Adam's eps above the rounding level of the smallest gradients: with eps 1e-8 an
      // element whose gradient is ~0 moves by +-lr on the sign of its rounding error, and
      // TP's different summation order then flips it (the corpus seed is random per run),
      // which the 1e-3 weight-change check would see in 4 iterations.
      "--adam-eps", "1e-4"};
  const std::vector<std::string> common = corpus.CommonArgs(kVocab);
  a.insert(a.end(), common.begin(), common.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> Tp2(std::vector<std::string> a) {
  a.insert(a.end(), {"--tensor-model-parallel-size", "2", "--world-size", "2"});
  return a;
}

double MaxRelDiff(const Run& a, const Run& b) {
  double worst = 0;
  REQUIRE(a.summary.train_losses.size() == b.summary.train_losses.size());
  for (size_t i = 0; i < a.summary.train_losses.size(); ++i) {
    const double x = a.summary.train_losses[i], y = b.summary.train_losses[i];
    worst = std::max(worst, std::abs(x - y) / std::abs(y));
  }
  return worst;
}

int Count(const Weights& w, const std::string& needle) {
  int n = 0;
  for (const auto& [name, v] : w) n += name.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

TEST_CASE("mxmaca train honours --add-qkv-bias (linear_qkv bias only, Qwen2)") {
  ParityCorpus corpus("add_qkv_bias");
  const std::vector<std::string> args = Args(corpus, {"--add-qkv-bias"});
  const Weights w0 = corpus.InitialWeights(args, kVocab);
  const Run plain = corpus.Train("no bias", Args(corpus, {}), 4);
  const Run tp1 = corpus.Train("qkv bias tp1", args, 4);
  // Megatron-Core's names: decoder.layers.N.self_attention.linear_qkv.bias, [(np + 2 ng) hn]
  // = [(4 + 2 * 2) * 8]; no other linear has a bias.
  CHECK(Count(plain.weights, ".bias") == 0);
  CHECK(Count(tp1.weights, ".bias") == 2);
  for (const char* n : {"decoder.layers.0.self_attention.linear_qkv.bias",
                        "decoder.layers.1.self_attention.linear_qkv.bias"}) {
    INFO(n);
    REQUIRE(tp1.weights.count(n) == 1);
    CHECK(tp1.weights.at(n).size() == 64);
    double sq = 0;
    for (float x : tp1.weights.at(n)) sq += double(x) * x;
    CHECK(sq > 0);  // it trained (it starts at zero)
  }
  // Zero-initialised, so iteration 1 is the same; later ones differ.
  CHECK(tp1.summary.train_losses[0] == plain.summary.train_losses[0]);
  CHECK(MaxRelDiff(tp1, plain) > 0);
  const Run tp2 = corpus.Train("qkv bias tp2", Tp2(args), 4);
  CheckClose(tp1, tp2, w0);
  // The device backend's code path (on the CPU kernels) runs the bias too. Not bit for bit:
  // the device backends default to gradient-accumulation fusion (the weight GEMMs add into
  // the main gradient with beta = 1, which oneDNN rounds differently from the CPU backend's
  // separate add once the tensors are large, here the vocabulary tables), so device-on-cpu
  // differs from the CPU run by ~1e-8 relative from iteration 2 with or without the flag;
  // with --no-gradient-accumulation-fusion it is bit for bit (device_backend_test). Hence
  // the TP tolerance.
  std::vector<std::string> dev = args;
  dev.insert(dev.end(), {"--device", "device-on-cpu"});
  CheckClose(tp1, corpus.Train("qkv bias device-on-cpu", dev, 4), w0);
}

TEST_CASE("mxmaca train honours --apply-layernorm-1p (zero-centred norm weights)") {
  ParityCorpus corpus("layernorm_1p");
  for (const char* norm : {"RMSNorm", "LayerNorm"}) {
    INFO(norm);
    const std::vector<std::string> args =
        Args(corpus, {"--apply-layernorm-1p", "--normalization", norm});
    const Weights w0 = corpus.InitialWeights(args, kVocab);
    const Run plain = corpus.Train(std::string(norm), Args(corpus, {"--normalization", norm}), 4);
    const Run tp1 = corpus.Train(std::string(norm) + " 1p tp1", args, 4);
    // Same names as without the flag (Megatron keeps them); weights start at 0, not 1.
    REQUIRE(tp1.weights.size() == plain.weights.size());
    int norms = 0;
    for (const auto& [name, w] : w0) {
      if (name.find("layernorm.weight") == std::string::npos) continue;
      ++norms;
      for (float x : w) CHECK(x == 0.0f);
    }
    CHECK(norms == 5);  // 2 per layer + final
    // gamma = 1 + w starts at 1 like the plain run's gamma, and norm weights get no weight
    // decay (1-D), so the two runs are the same model up to fp32 rounding: losses agree
    // closely and the trained w equals the plain run's gamma - 1. (A flag that were
    // ignored would start w at 1 and fail the zero check above.)
    for (size_t i = 0; i < plain.summary.train_losses.size(); ++i) {
      CHECK(std::abs(tp1.summary.train_losses[i] - plain.summary.train_losses[i]) <=
            1e-5 * std::abs(plain.summary.train_losses[i]));
    }
    for (const auto& [name, w] : tp1.weights) {
      if (name.find("layernorm.weight") == std::string::npos) continue;
      INFO(name);
      const std::vector<float>& g = plain.weights.at(name);
      REQUIRE(g.size() == w.size());
      double moved = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        CHECK(std::abs((1.0 + w[i]) - g[i]) <= 1e-4);
        moved = std::max(moved, std::abs(double(w[i])));
      }
      CHECK(moved > 1e-4);  // it trained
    }
    const Run tp2 = corpus.Train(std::string(norm) + " 1p tp2", Tp2(args), 4);
    CheckClose(tp1, tp2, w0);
  }
  // A checkpoint's norm weights mean gamma - 1 or gamma: resuming across the flag is refused.
  const std::string ckpt = corpus.dir() + "/ckpt_1p";
  (void)corpus.Train("1p save", Args(corpus, {"--apply-layernorm-1p", "--save", ckpt, "--save-interval", "4"}),
                     4);
  std::vector<std::string> load = Args(corpus, {"--load", ckpt, "--train-iters", "6"});
  auto s = api::Train(load, [](const std::string&) {});
  const std::string e = !s.ok() ? std::string(s.status().message()) : s->ok ? "" : s->error;
  INFO(e);
  CHECK(e.find("--apply-layernorm-1p") != std::string::npos);
}

TEST_CASE("mxmaca train honours --rotary-interleaved") {
  ParityCorpus corpus("rotary_interleaved");
  const std::vector<std::string> args = Args(corpus, {"--rotary-interleaved"});
  const Weights w0 = corpus.InitialWeights(args, kVocab);
  const Run plain = corpus.Train("half-split rope", Args(corpus, {}), 4);
  const Run tp1 = corpus.Train("interleaved tp1", args, 4);
  // Same tensors; a different rotation changes every loss.
  CHECK(tp1.weights.size() == plain.weights.size());
  CHECK(tp1.summary.train_losses[0] != plain.summary.train_losses[0]);
  const Run tp2 = corpus.Train("interleaved tp2", Tp2(args), 4);
  CheckClose(tp1, tp2, w0);
  // Context parallelism: the same rotation at the original positions.
  std::vector<std::string> cp = args;
  cp.insert(cp.end(), {"--context-parallel-size", "2", "--world-size", "2"});
  const Run cp2 = corpus.Train("interleaved cp2", cp, 4);
  CHECK(MaxRelDiff(cp2, tp1) <= 1e-5);
}

TEST_CASE("mxmaca train honours --qk-layernorm") {
  ParityCorpus corpus("qk_layernorm");
  for (const char* norm : {"RMSNorm", "LayerNorm"}) {
    INFO(norm);
    const std::vector<std::string> args = Args(corpus, {"--qk-layernorm", "--normalization", norm});
    const Weights w0 = corpus.InitialWeights(args, kVocab);
    const Run plain = corpus.Train(std::string(norm), Args(corpus, {"--normalization", norm}), 4);
    const Run tp1 = corpus.Train(std::string(norm) + " qk tp1", args, 4);
    // Megatron-Core's names, [hn] = [8] each; the bias only for LayerNorm.
    const bool ln = std::string(norm) == "LayerNorm";
    CHECK(tp1.weights.size() == plain.weights.size() + 2 * (ln ? 4 : 2));
    for (const char* n : {"decoder.layers.1.self_attention.q_layernorm.weight",
                          "decoder.layers.1.self_attention.k_layernorm.weight"}) {
      INFO(n);
      REQUIRE(tp1.weights.count(n) == 1);
      CHECK(tp1.weights.at(n).size() == 8);
    }
    CHECK(tp1.weights.count("decoder.layers.0.self_attention.k_layernorm.bias") == (ln ? 1 : 0));
    CHECK(tp1.summary.train_losses[0] != plain.summary.train_losses[0]);
    const Run tp2 = corpus.Train(std::string(norm) + " qk tp2", Tp2(args), 4);
    CheckClose(tp1, tp2, w0);
  }
  // Context parallelism: the per-token norms on each rank's share of the sequence.
  std::vector<std::string> cp = Args(corpus, {"--qk-layernorm"});
  const Run cp1 = corpus.Train("qk cp1", cp, 4);
  cp.insert(cp.end(), {"--context-parallel-size", "2", "--world-size", "2"});
  const Run cp2 = corpus.Train("qk cp2", cp, 4);
  CHECK(MaxRelDiff(cp2, cp1) <= 1e-5);
}

TEST_CASE("mxmaca train takes --no-position-embedding as Megatron does") {
  ParityCorpus corpus("no_position_embedding");
  // With rope Megatron accepts it (backward compatibility) and it changes nothing: the
  // embedding adds a position table only for learned_absolute.
  const Run plain = corpus.Train("rope", Args(corpus, {}), 4);
  const Run flag = corpus.Train("rope --no-position-embedding",
                                Args(corpus, {"--no-position-embedding"}), 4);
  CheckBitIdentical(plain, flag);
  CHECK(Count(flag.weights, "position_embeddings") == 0);
  // Otherwise validate_args' RuntimeError, word for word.
  std::vector<std::string> learned = Args(corpus, {"--no-position-embedding"});
  for (size_t i = 0; i + 1 < learned.size(); ++i) {
    if (learned[i] == "--position-embedding-type") learned[i + 1] = "learned_absolute";
  }
  auto s = api::Train(learned, [](const std::string&) {});
  const std::string e = !s.ok() ? std::string(s.status().message()) : s->ok ? "" : s->error;
  CHECK(e.find("--no-position-embedding is deprecated, use --position-embedding-type") !=
        std::string::npos);
}

}  // namespace
}  // namespace mxmaca::testing
