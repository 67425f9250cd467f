// tests/bench/gpt_stage_bench.cc: time of one micro-batch's F, B and W on a single-stage
// GPT (the benchmark config: 6 layers, hidden 256, 8 heads, seq 256, micro-batch 8,
// GPT-2 vocab padded to 50304), per thread count and precision, and peak stash bytes
// per recompute setting. Ratios are against fp32 / 1 thread / no recompute in the same run.
//   bazel run -c opt //tests/bench:gpt_stage_bench [-- --iters N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "layers/gpt_stage.h"

namespace {

using mxmaca::layers::GptConfig;
using mxmaca::layers::GptStage;

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  GptConfig c;
  c.num_layers = 6;
  c.hidden_size = 256;
  c.ffn_hidden_size = 1024;
  c.num_attention_heads = 8;
  c.seq_length = 256;
  c.max_position_embeddings = 256;
  c.vocab_size = 50257;
  c.padded_vocab_size = 50304;
  c.hidden_dropout = 0.1f;
  c.attention_dropout = 0.1f;
  const int64_t b = 8, s = c.seq_length, t = b * s;
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(t), labels(t);
  for (int64_t i = 0; i < t; ++i) {
    tokens[i] = static_cast<int32_t>(rng() % c.vocab_size);
    labels[i] = static_cast<int32_t>(rng() % c.vocab_size);
  }
  double base = 0;
  std::printf("%-28s %9s %9s %9s %10s %8s %12s\n", "setting", "F ms", "B ms", "W ms", "tokens/s",
              "ratio", "peak stash");
  struct Setting {
    const char* name;
    int threads;
    mxmaca::kernels::Precision precision;
    mxmaca::layers::RecomputeGranularity recompute;
  };
  using mxmaca::kernels::Precision;
  using mxmaca::layers::RecomputeGranularity;
  for (const Setting& set :
       {Setting{"fp32, 1 thread", 1, Precision::kFp32, RecomputeGranularity::kNone},
        Setting{"fp32, 2 threads", 2, Precision::kFp32, RecomputeGranularity::kNone},
        Setting{"bf16, 2 threads", 2, Precision::kBf16, RecomputeGranularity::kNone},
        Setting{"fp32, 2 thr, selective", 2, Precision::kFp32, RecomputeGranularity::kSelective},
        Setting{"fp32, 2 thr, full", 2, Precision::kFp32, RecomputeGranularity::kFull}}) {
    GptConfig cs = c;
    cs.num_threads = set.threads;
    cs.precision = set.precision;
    cs.recompute_granularity = set.recompute;
    auto stage = GptStage::Create(cs, {0, cs.num_layers, true, true});
    if (!stage.ok()) {
      std::fprintf(stderr, "%s\n", stage.status().ToString().c_str());
      return 1;
    }
    (*stage)->InitializeParameters();
    double tf = 0, tb = 0, tw = 0;
    for (int it = 0; it <= iters; ++it) {  // iteration 0 warms up
      mxmaca::layers::MicroBatchInput in;
      in.micro_batch_id = it;
      in.iteration = it;
      in.micro_batch_size = b;
      in.seq_length = s;
      in.tokens = tokens;
      in.labels = labels;
      mxmaca::layers::StageOutput out;
      auto t0 = std::chrono::steady_clock::now();
      if (!(*stage)->Forward(in, &out).ok()) return 1;
      auto t1 = std::chrono::steady_clock::now();
      if (!(*stage)->BackwardInput(it, {}, 1.0f / t, nullptr).ok()) return 1;
      auto t2 = std::chrono::steady_clock::now();
      if (!(*stage)->BackwardWeight(it).ok()) return 1;
      auto t3 = std::chrono::steady_clock::now();
      if (it > 0) {
        tf += Seconds(t0, t1);
        tb += Seconds(t1, t2);
        tw += Seconds(t2, t3);
      }
    }
    const double per = (tf + tb + tw) / iters;
    const double tps = t / per;
    if (base == 0) base = tps;
    std::printf("%-28s %9.1f %9.1f %9.1f %10.0f %8.2f %12lld\n", set.name, 1e3 * tf / iters,
                1e3 * tb / iters, 1e3 * tw / iters, tps, tps / base,
                static_cast<long long>((*stage)->peak_activation_bytes()));
  }
  return 0;
}
