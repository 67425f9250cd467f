// api/simulate/simulate_command_test.cc: `mxmaca simulate` end to end — a GPT-3 175B-like
// run on 1,024 H100s gives finite, plausible numbers quickly; one row of Megatron-LM's
// published table compared (error printed, generous bound justified below); step-model
// invariants on hand-computable cases; flag errors.
#include "api/simulate/simulate_command.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace mxmaca::api {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// GPT-3 175B (Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, 2048
// context) on 1,024 GPUs as TP 8 x PP 8 x DP 16, interleaved-free 1F1B.
const char* kGpt3Flags =
    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
    "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 1536 "
    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --sequence-parallel "
    "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --bf16 "
    "--recompute-activations --world-size 1024 --cluster h100-sxm";

TEST_CASE("GPT-3 175B on 1,024 H100s: finite, plausible, fast", "[simulate]") {
  const auto t0 = std::chrono::steady_clock::now();
  auto job = PrepareSimulation(Split(kGpt3Flags));
  REQUIRE(job.ok());
  auto r = SimulateStep(job->inputs);
  REQUIRE(r.ok());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s", FormatReport(*job, *r).c_str());
  std::printf("simulated in %.3f s\n", wall);
  CHECK(wall < 10);
  CHECK(r->world_size == 1024);
  CHECK(std::isfinite(r->step_seconds));
  // Plausibility bounds (not targets): published H100 runs of GPT-3 175B report 35-55%
  // MFU; a roofline model with 0.7 GEMM efficiency cannot exceed 70% and a sane layout
  // should not fall below 20%.
  CHECK(r->mfu > 0.2);
  CHECK(r->mfu < 0.7);
  // 1F1B bubble (p - 1) / (m + p - 1) = 7 / 103 = 6.8% for equal stages; the embedding
  // and loss head make the ends slower, so a bit more, never less than half of it.
  CHECK(r->bubble_fraction > 0.5 * 7.0 / 103.0);
  CHECK(r->bubble_fraction < 0.3);
  // Memory: 175B / (8 x 8) = 2.7B params per rank x (6 + 12 / 16) bytes = 18 GB plus
  // activations; must fit in 80 GiB and exceed the weight state alone.
  CHECK(r->peak_memory_bytes / std::pow(2.0, 30) > 15);
  CHECK(r->peak_memory_bytes / std::pow(2.0, 30) < 80);
  // Tokens/s x step = tokens per step.
  CHECK(r->tokens_per_second * r->step_seconds == Approx(1536.0 * 2048));
}

// Megatron-LM, Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", arXiv 2104.04473), Table 1: GPT models with V 51,200
// and s 2048 on up to 3,072 A100 80GB GPUs (Selene, 312 TFLOP/s 16-bit peak); columns:
// heads, hidden, layers, TP, PP, GPUs, batch, achieved TFLOP/s per GPU. The paper counts
// FLOPs with its eq. 3, which "assumes activation recomputation and takes into account the
// floating-point operations associated with the extra forward pass":
// 96 B s l h^2 (1 + s / (6h) + V / (16 l h)). The predicted TFLOP/s per GPU is that count
// over the simulated step and the GPUs, compared with the published figure.
// Configured as the paper's own scripts ran them (NVIDIA/Megatron-LM
// examples/sc21/run_table_1.sh and CONFIG.sh): micro-batch 16/16/16/8/4/2/2/1/1/1;
// --activations-checkpoint-method uniform (full recomputation of every layer, one per
// group); the interleaved schedule where the script sets
// --num-layers-per-virtual-pipeline-stage (76B and 145B: 5, 310B: 3, 530B: 1; §5.1: "we
// use the interleaved pipeline schedule"); --DDP-impl torch (gradient all-reduce
// overlapped with the backward: --overlap-grad-reduce) for the PP 1 rows, local (after the
// backward) for the others; no SP, no distributed optimizer (neither existed then);
// attention materialised as Megatron's DotProductAttention did it before flash attention
// (--attention-backend local: full s x s score GEMMs, fused scale-mask-softmax, attention
// dropout 0.1 — Megatron's defaults, which CONFIG.sh does not change).
// Not modelled: --fp16 (the simulator reduces fp32 gradients, the runs fp16 ones: DP sync
// bytes x2) and the scatter/gather of pipeline sends (cross-node bytes / t).
// Bound: 15% on TFLOP/s, every row — issue 11's acceptance bound (docs/SIMULATOR.md lists
// every row's error; the largest is +9.1%, the 1.7B row). The roofline uses one GEMM
// efficiency for every shape and ignores kernel launch gaps, the data loader and logging,
// so the bound is the issue's, not a tolerance derived from arithmetic.
struct PublishedRow {
  double billions;
  int heads, hidden, layers, tp, pp, gpus, batch;
  double tflops;
  int micro_batch;
  int layers_per_virtual_stage;  // 0: plain 1F1B
  bool torch_ddp;                // --DDP-impl torch: the all-reduce overlaps the backward
};
constexpr PublishedRow kTable1[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, 0, true},
    {3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, 0, true},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, 0, true},
    {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 0, true},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 0, false},
    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 5, false},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 5, false},
    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 3, false},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 1, false},
    {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 0, false},
};

std::string TableRowFlags(const PublishedRow& r) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "--num-layers %d --hidden-size %d --num-attention-heads %d --seq-length 2048 "
                "--max-position-embeddings 2048 --micro-batch-size %d --global-batch-size %d "
                "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d --bf16 "
                "--recompute-granularity full --recompute-method uniform "
                "--recompute-num-layers 1 --tokenizer-type NullTokenizer --vocab-size 51199 "
                "--attention-backend local --world-size %d --cluster a100-sxm-80gb",
                r.layers, r.hidden, r.heads, r.micro_batch, r.batch, r.tp, r.pp, r.gpus);
  std::string flags = buf;
  if (r.layers_per_virtual_stage > 0) {
    flags += " --num-layers-per-virtual-pipeline-stage " +
             std::to_string(r.layers_per_virtual_stage);
  }
  if (r.torch_ddp) flags += " --overlap-grad-reduce";
  return flags;
}

// Issue 11: "the simulator at 16,384 GPUs in under a minute". GPT-3 175B as TP 8 x PP 8 x
// DP 256 (global batch 8,192 = 32 micro-batches per replica): the simulator runs one
// pipeline replica's schedule and costs the DP collectives over 256 ranks.
TEST_CASE("GPT-3 175B on 16,384 H100s: simulated in under a minute", "[simulate]") {
  std::string flags = kGpt3Flags;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"--world-size 1024",
                                                                      "--world-size 16384"},
                                 {"--global-batch-size 1536", "--global-batch-size 8192"}}) {
    flags.replace(flags.find(from), from.size(), to);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto job = PrepareSimulation(Split(flags));
  REQUIRE(job.ok());
  auto r = SimulateStep(job->inputs);
  REQUIRE(r.ok());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("16,384 GPUs: step %.3f s, MFU %.1f%%, simulated in %.3f s\n", r->step_seconds,
              100.0 * r->mfu, wall);
  CHECK(r->world_size == 16384);
  CHECK(std::isfinite(r->step_seconds));
  CHECK(r->mfu > 0.2);
  CHECK(r->mfu < 0.7);
  CHECK(wall < 60);
}

TEST_CASE("Megatron-LM 2021 Table 1 on A100s", "[simulate][validation]") {
  for (const PublishedRow& row : kTable1) {
    auto job = PrepareSimulation(Split(TableRowFlags(row)));
    REQUIRE(job.ok());
    CHECK(job->inputs.model.padded_vocab_size == 51200);
    CHECK(job->inputs.micro_batch_size == row.micro_batch);
    auto r = SimulateStep(job->inputs);
    REQUIRE(r.ok());
    if (row.gpus == 1024) std::printf("%s", FormatReport(*job, *r).c_str());
    const double B = row.batch, s = 2048, l = row.layers, h = row.hidden, V = 51200;
    const double paper_flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    const double paper_step = paper_flops / (row.tflops * 1e12 * row.gpus);
    const double predicted = paper_flops / (r->step_seconds * row.gpus) / 1e12;
    const double error = predicted / row.tflops - 1;
    std::printf(
        "validation: Megatron-LM 2021 Table 1 %.1fB TP %d PP %d v %lld mbs %d m %lld on %d "
        "A100: published %.0f TFLOP/s/GPU (eq. 3; step %.2f s), simulated step %.2f s = "
        "%.1f TFLOP/s/GPU by eq. 3 (bubble %.1f%%), error %+.1f%%\n",
        row.billions, row.tp, row.pp,
        static_cast<long long>(job->inputs.schedule.num_chunks), row.micro_batch,
        static_cast<long long>(job->inputs.schedule.num_microbatches), row.gpus, row.tflops,
        paper_step, r->step_seconds, predicted, 100 * r->bubble_fraction, 100 * error);
    CHECK(std::abs(error) < 0.15);
  }
}

// Megatron-LM README, "Training Speed and Scalability" (github.com/NVIDIA/Megatron-LM,
// README.md at commit 0010ab74; the per-model table itself is an image,
// images/model_table.png, whose rows were not readable offline): GPT-3 175B with the
// 131,072-token vocabulary, strong-scaled "from 96 H100 GPUs to 4608 GPUs, using the same
// batch size of 1152 sequences throughout ... a reduction in MFU from 47% to 42%", with
// --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap. Sequence 4096 (the text's
// "all models use ... a sequence length of 4096"). Not stated, assumed: TP 8 with SP and
// PP 12 (96 GPUs = one replica of 8 x 12; 4608 = DP 48 of it), interleaved with 2 layers
// per virtual stage (v 4), micro-batch 1, distributed optimizer, no recomputation.
// --tp-comm-overlap is not modelled (TP exchanges counted as exposed). Bound: issue 11's
// 15% on TFLOP/s per GPU (published = MFU x 989); the layout is assumed
// (docs/SIMULATOR.md lists the errors: +6.5% at 96 GPUs, -0.6% at 4,608).
TEST_CASE("Megatron-LM README: GPT-3 175B strong scaling on H100", "[simulate][validation]") {
  struct Point {
    int gpus;
    double mfu;
  };
  for (const Point& pt : {Point{96, 0.47}, Point{4608, 0.42}}) {
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 4096 "
                  "--max-position-embeddings 4096 --tokenizer-type NullTokenizer --vocab-size "
                  "131071 --global-batch-size 1152 --micro-batch-size 1 --bf16 "
                  "--tensor-model-parallel-size 8 --sequence-parallel "
                  "--pipeline-model-parallel-size 12 --num-layers-per-virtual-pipeline-stage 2 "
                  "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
                  "--cluster h100-sxm --world-size %d",
                  pt.gpus);
    auto job = PrepareSimulation(Split(buf));
    REQUIRE(job.ok());
    CHECK(job->inputs.model.padded_vocab_size == 131072);
    auto r = SimulateStep(job->inputs);
    REQUIRE(r.ok());
    const double published = pt.mfu * 989;
    const double error = r->tflops_per_gpu / published - 1;
    std::printf(
        "validation: Megatron-LM README GPT-3 175B (V 131072, s 4096, batch 1152) on %d H100: "
        "published MFU %.0f%% = %.0f TFLOP/s/GPU, simulated %.1f TFLOP/s/GPU (MFU %.1f%%, "
        "bubble %.1f%%), error %+.1f%%\n",
        pt.gpus, 100 * pt.mfu, published, r->tflops_per_gpu, 100 * r->mfu,
        100 * r->bubble_fraction, 100 * error);
    CHECK(std::abs(error) < 0.15);
  }
}

TEST_CASE("step model invariants on a small layout", "[simulate]") {
  const std::string base =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 64 "
      "--cluster h100-sxm ";
  auto one = PrepareSimulation(Split(base + "--world-size 1"));
  REQUIRE(one.ok());
  auto r1 = SimulateStep(one->inputs);
  REQUIRE(r1.ok());
  // One GPU: no bubble, no communication, step = m (F + B + W) + optimizer.
  CHECK(r1->bubble_fraction == Approx(0).margin(1e-12));
  CHECK(r1->exposed_comm_seconds == 0);
  const StageResult& st = r1->stages[0];
  CHECK(r1->step_seconds ==
        Approx(32 * (st.op[0].total() + st.op[1].total() + st.op[2].total()) + st.optimizer)
            .epsilon(1e-9));
  // W is the linears' weight gradients: same GEMM FLOPs as F minus core attention.
  CHECK(st.op[2].gemm < st.op[0].gemm);
  CHECK(st.op[1].gemm > st.op[0].gemm);

  // Doubling DP (world 2) halves micro-batches per replica; the step gets shorter but
  // adds an all-reduce of the fp32 gradients over NVLink.
  auto two = PrepareSimulation(Split(base + "--world-size 2"));
  REQUIRE(two.ok());
  auto r2 = SimulateStep(two->inputs);
  REQUIRE(r2.ok());
  CHECK(r2->step_seconds < r1->step_seconds);
  CHECK(r2->stages[0].dp_grad_sync > 0);
  // all-reduce of P x 4 bytes over 2 ranks on 450 GB/s x 0.8: 2 (1/2) 4P / 360e9 + 2 us,
  // or the tree's 2 x 4P / 360e9 + 2 us, whichever is smaller (the ring).
  const double P = static_cast<double>(r2->stages[0].parameters);
  CHECK(r2->stages[0].dp_grad_sync == Approx(4 * P / 360e9 + 2 * 2e-6).epsilon(1e-9));

  // Pipeline of 4 with 1F1B: a bubble appears and per-stage memory stashes p - s
  // micro-batches.
  auto pp = PrepareSimulation(Split(base + "--world-size 4 --pipeline-model-parallel-size 4"));
  REQUIRE(pp.ok());
  auto r4 = SimulateStep(pp->inputs);
  REQUIRE(r4.ok());
  CHECK(r4->bubble_fraction > 0);
  CHECK(r4->stages[0].stashed_microbatches == 4);
  CHECK(r4->stages[3].stashed_microbatches == 1);
}

TEST_CASE("GEMM work of a step equals Megatron's FLOPs formula", "[simulate]") {
  // Without recomputation, the GEMM FLOPs the model times (F + B + W of every micro-batch,
  // chunk and rank) must add up to layers/flops.h's count for the global batch: an
  // independent check of the per-layer formulas (shard sizes, causal attention, SwiGLU,
  // GQA, logits). Layout TP 2 x PP 2 (interleaved, v 2) x DP 2, s 512.
  auto job = PrepareSimulation(Split(
      "--num-layers 8 --hidden-size 768 --num-attention-heads 12 --group-query-attention "
      "--num-query-groups 4 --swiglu --ffn-hidden-size 2048 --seq-length 512 "
      "--max-position-embeddings 512 --micro-batch-size 2 --global-batch-size 32 "
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
      "--num-layers-per-virtual-pipeline-stage 2 --world-size 8 --cluster h100-sxm"));
  REQUIRE(job.ok());
  auto r = SimulateStep(job->inputs);
  REQUIRE(r.ok());
  REQUIRE(job->inputs.schedule.num_chunks == 2);
  const double flops_per_s = 989e12 * 0.7;
  const double ops = job->inputs.schedule.num_microbatches * 2.0;  // m x v per rank
  double flops = 0;
  for (const StageResult& st : r->stages) {
    for (int k = 0; k < 3; ++k) flops += st.op[k].gemm * flops_per_s * ops;
  }
  flops *= 2 /* TP ranks */ * 2 /* DP replicas */;
  // Tolerance: relative 1e-9 (sums of a few hundred doubles).
  CHECK(flops == Approx(r->model_flops).epsilon(1e-9));
}

TEST_CASE("TP communication per layer: SP's all-gather + reduce-scatter = the all-reduce",
          "[simulate]") {
  // Megatron with SP runs, per layer and F, an all-gather before linear_qkv and linear_fc1
  // and a reduce-scatter after linear_proj and linear_fc2 (B: the conjugates); without SP
  // an all-reduce after linear_proj and linear_fc2. Under the ring model AG + RS moves the
  // bytes of a ring all-reduce, so at a bandwidth-bound size both must cost, by hand from
  // the alpha-beta formulas (docs/SIMULATOR.md, "Collectives"), per layer and F (and B):
  //   2 blocks x (2 (t-1)/t x bytes / beta + 2 (t-1) alpha)
  // with bytes = b s h x 2 (bf16), t = 8 on NVLink: beta = 450e9 x 0.8, alpha = 2 us.
  // b 4, s 2048, h 4096: 67 MB, where the ring (1.75 x 67e6 / 360e9 + 28 us = 354 us)
  // beats the tree (2 x 67e6 / 360e9 + 6 us = 379 us). The old accounting charged one
  // all-gather per block with SP, half of this.
  const std::string base =
      "--num-layers 8 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 "
      "--max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 64 "
      "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --world-size 32 "
      "--cluster h100-sxm ";
  auto plain = SimulateStep(PrepareSimulation(Split(base))->inputs);
  auto sp = SimulateStep(PrepareSimulation(Split(base + "--sequence-parallel"))->inputs);
  REQUIRE(plain.ok());
  REQUIRE(sp.ok());
  const double bytes = 4.0 * 2048 * 4096 * 2, t = 8, beta = 450e9 * 0.8, alpha = 2e-6;
  const double ring = 2 * (t - 1) / t * bytes / beta + 2 * (t - 1) * alpha;
  REQUIRE(ring < 2 * bytes / beta + 2 * 3 * alpha);  // bandwidth-bound: the ring is used
  const double per_layer = 2 * ring;
  // Stage 1 of 4 holds 2 layers and neither embedding nor loss head.
  for (const StepResult* r : {&*plain, &*sp}) {
    const StageResult& st = r->stages[1];
    CHECK(st.op[0].tp_comm == Approx(2 * per_layer).epsilon(1e-9));
    CHECK(st.op[1].tp_comm == Approx(2 * per_layer).epsilon(1e-9));
    CHECK(st.op[2].tp_comm == 0);
  }
  // With SP the embedding's reduce-scatter (F) and all-gather (B), the loss head's
  // all-gather (F) and reduce-scatter (B) are one (t-1)/t x bytes / beta + (t-1) alpha each.
  const double one = (t - 1) / t * bytes / beta + (t - 1) * alpha;
  CHECK(sp->stages[0].op[1].tp_comm == Approx(2 * per_layer + one).epsilon(1e-9));
  CHECK(sp->stages[0].op[0].tp_comm == Approx(2 * per_layer + one).epsilon(1e-9));
}

TEST_CASE("materialised attention (--attention-backend local) costed by hand", "[simulate]") {
  // S = b a s^2 = 2 x 16 x 1024^2 score elements per layer (TP 1), d 64, on h100-sxm:
  // GEMM rate 989e12 x 0.7, HBM 3350e9 x 0.8. Flash: 2 GEMMs x 2 S d x 1/2 in F, twice in
  // B, no s x s bytes. Materialised: each score GEMM max(2 S d / rate, 2 S bytes / HBM) (2
  // in F, 4 in B) over all S; F memory + softmax 4 S + dropout 5 S bytes, B 6 S + 5 S.
  const std::string base =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 "
      "--pipeline-model-parallel-size 4 --world-size 4 --cluster h100-sxm ";
  auto flash = SimulateStep(PrepareSimulation(Split(base))->inputs);
  auto local =
      SimulateStep(PrepareSimulation(Split(base + "--attention-backend local"))->inputs);
  REQUIRE(flash.ok());
  REQUIRE(local.ok());
  const double S = 2.0 * 16 * 1024 * 1024, d = 64, rate = 989e12 * 0.7, hbm = 3350e9 * 0.8;
  const double gemm = std::max(2 * S * d / rate, 2 * S / hbm);
  CHECK(gemm == 2 * S / hbm);  // at d 64 the score GEMMs are bandwidth-bound
  const StageResult &a = flash->stages[1], &b = local->stages[1];  // 2 layers
  CHECK(b.op[0].gemm - a.op[0].gemm == Approx(2 * (2 * gemm - 2 * S * d / rate)).epsilon(1e-9));
  CHECK(b.op[1].gemm - a.op[1].gemm == Approx(2 * (4 * gemm - 4 * S * d / rate)).epsilon(1e-9));
  CHECK(b.op[2].gemm == Approx(a.op[2].gemm).epsilon(1e-12));
  CHECK(b.op[0].memory - a.op[0].memory == Approx(2 * 9 * S / hbm).epsilon(1e-9));
  CHECK(b.op[1].memory - a.op[1].memory == Approx(2 * 11 * S / hbm).epsilon(1e-9));
  // The stash keeps the scores: Korthikanti et al.'s 5 a s^2 b bytes per layer.
  CHECK(b.activation_bytes - a.activation_bytes ==
        Approx(b.stashed_microbatches * 2 * 5 * S).epsilon(1e-9));
  auto bad = PrepareSimulation(Split(base + "--attention-backend cudnn"));
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("--attention-backend") != std::string::npos);
}

TEST_CASE("recomputation trades B time for activation memory", "[simulate]") {
  const std::string base =
      "--num-layers 16 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
      "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 32 "
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --world-size 8 "
      "--cluster h100-sxm ";
  auto none = SimulateStep(PrepareSimulation(Split(base))->inputs);
  auto full = SimulateStep(
      PrepareSimulation(Split(base + "--recompute-granularity full --recompute-method uniform "
                                     "--recompute-num-layers 1"))
          ->inputs);
  REQUIRE(none.ok());
  REQUIRE(full.ok());
  const StageResult &a = none->stages[1], &b = full->stages[1];  // a middle stage: layers only
  // Full recomputation reruns F inside B: B grows by exactly F.
  CHECK(b.op[1].total() == Approx(a.op[1].total() + a.op[0].total()).epsilon(1e-12));
  CHECK(b.op[0].total() == Approx(a.op[0].total()).epsilon(1e-12));
  CHECK(b.activation_bytes < a.activation_bytes / 5);
  CHECK(full->step_seconds > none->step_seconds);
}

TEST_CASE("trace file has one track per stage and F/B/W spans", "[simulate]") {
  auto job = PrepareSimulation(Split(
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 16 "
      "--world-size 4 --pipeline-model-parallel-size 4 --pipeline-schedule zb-h1 "
      "--cluster b200"));
  REQUIRE(job.ok());
  auto r = SimulateStep(job->inputs);
  REQUIRE(r.ok());
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                                                   : "/tmp") +
                           "/sim_trace.json";
  REQUIRE(WriteSimulatedTrace(*job, *r, path).ok());
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int spans = 0, names = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "compute") ++spans;
    if (e["ph"] == "M") ++names;
  }
  CHECK(spans == 4 * 16 * 3);  // p stages x m micro-batches x {F, B, W}
  CHECK(names >= 4);
}

TEST_CASE("simulate flag errors", "[simulate]") {
  const std::string model =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
      "--max-position-embeddings 32 --micro-batch-size 1 ";
  auto no_cluster = PrepareSimulation(Split(model + "--world-size 1"));
  REQUIRE_FALSE(no_cluster.ok());
  CHECK(std::string(no_cluster.status().message()).find("--cluster") != std::string::npos);
  auto no_world = PrepareSimulation(Split(model + "--cluster h100-sxm"));
  REQUIRE_FALSE(no_world.ok());
  CHECK(std::string(no_world.status().message()).find("--world-size") != std::string::npos);
  auto bad_cluster = PrepareSimulation(Split(model + "--world-size 1 --cluster /no/such/file"));
  REQUIRE_FALSE(bad_cluster.ok());
  CHECK(std::string(bad_cluster.status().message()).find("/no/such/file") != std::string::npos);
  // MoE is modelled (moe_step_test); an expert grid that does not tile the ranks is not.
  auto moe = PrepareSimulation(Split(model + "--world-size 1 --cluster b200 --num-experts 8"));
  CHECK(moe.ok());
  auto bad_ep = PrepareSimulation(Split(model + "--world-size 2 --cluster b200 --num-experts 8 "
                                                "--expert-model-parallel-size 4"));
  REQUIRE_FALSE(bad_ep.ok());
}

}  // namespace
}  // namespace mxmaca::api
