// tests/gpu/training_loop.cc
#include "tests/gpu/training_loop.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::gpu_check {

namespace {

using layers::GptConfig;
using layers::GptStage;
using layers::MicroBatchInput;
using layers::StageOutput;

// SplitMix64 (Steele, Lea, Flood 2014): a fixed, portable 64-bit mix.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t h = Mix(seed);
  for (uint64_t v : {a, b, c, d}) h = Mix(h ^ v);
  return h;
}

}  // namespace

const char* VariantName(ModelVariant variant) {
  return variant == ModelVariant::kGpt2 ? "gpt2" : "llama";
}

const char* PrecisionName(kernels::Precision precision) {
  return precision == kernels::Precision::kFp32 ? "fp32" : "bf16";
}

GptConfig SmallGptConfig(ModelVariant variant, kernels::Precision precision) {
  GptConfig c;
  c.num_layers = 4;
  c.hidden_size = 128;
  c.ffn_hidden_size = 512;
  c.num_attention_heads = 4;
  c.seq_length = 128;
  c.max_position_embeddings = 128;
  c.vocab_size = 1000;
  c.padded_vocab_size = 1024;
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  c.seed = 1234;
  c.precision = precision;
  if (variant == ModelVariant::kLlama) {
    c.normalization = layers::Normalization::kRmsNorm;
    c.swiglu = true;
    c.ffn_hidden_size = 352;
    c.position_embedding_type = layers::PositionEmbeddingType::kRope;
    c.num_query_groups = 2;
    c.add_bias_linear = false;
    c.untie_embeddings_and_output_weights = true;
  }
  return c;
}

float LearningRate(const TrainingLoopOptions& options, int step) {
  if (step < options.lr_warmup_steps) {
    return options.lr * static_cast<float>(step + 1) / static_cast<float>(options.lr_warmup_steps);
  }
  return options.lr;
}

double ClipCoefficient(double total_norm, double clip_grad) {
  if (clip_grad <= 0.0 || !std::isfinite(total_norm)) return 1.0;
  const double coeff = clip_grad / (total_norm + 1.0e-6);
  return coeff < 1.0 ? coeff : 1.0;
}

TokenBatch MakeTokenBatch(const GptConfig& config, const TrainingLoopOptions& options, int step,
                          int micro_batch) {
  constexpr uint64_t kA = 37, kC = 11;
  const uint64_t v = static_cast<uint64_t>(config.vocab_size);
  TokenBatch bt;
  bt.b = options.micro_batch_size;
  bt.s = config.seq_length;
  bt.tokens.resize(bt.b * bt.s);
  bt.labels.resize(bt.b * bt.s);
  bt.loss_mask.assign(bt.b * bt.s, 1.0f);
  for (int64_t r = 0; r < bt.b; ++r) {
    uint64_t x = Hash(options.data_seed, step, micro_batch, r, 0) % v;
    for (int64_t i = 0; i < bt.s; ++i) {
      const uint64_t h = Hash(options.data_seed, step, micro_batch, r, i + 1);
      // Top 24 bits: uniform in [0, 1) for the branch; the rest: the random token.
      const bool follow = (h >> 40) < static_cast<uint64_t>(0.9 * (1 << 24));
      const uint64_t next = follow ? (kA * x + kC) % v : (h & 0xFFFFFFFFFFull) % v;
      bt.tokens[r * bt.s + i] = static_cast<int32_t>(x);
      bt.labels[r * bt.s + i] = static_cast<int32_t>(next);
      x = next;
    }
  }
  return bt;
}

MicroBatchInput TrainingInput(const TokenBatch& batch, const TrainingLoopOptions& options,
                              int step, int micro_batch) {
  MicroBatchInput in;
  in.micro_batch_id = static_cast<int64_t>(step) * options.num_micro_batches + micro_batch;
  in.iteration = step;
  in.micro_batch_size = batch.b;
  in.seq_length = batch.s;
  in.tokens = batch.tokens;
  in.labels = batch.labels;
  in.loss_mask = batch.loss_mask;
  return in;
}

double StepTokens(const GptConfig& config, const TrainingLoopOptions& options, int step) {
  double n = 0.0;
  for (int m = 0; m < options.num_micro_batches; ++m) {
    for (float x : MakeTokenBatch(config, options, step, m).loss_mask) n += x;
  }
  return n;
}

absl::StatusOr<std::vector<StepRecord>> RunDeviceStage(
    layers::device::DeviceKernels& kernels, const GptConfig& config,
    const TrainingLoopOptions& options, layers::DeviceStageOptions stage_options,
    const layers::device::SegmentRunner& runner) {
  stage_options.micro_batch_size = std::max(stage_options.micro_batch_size, options.micro_batch_size);
  const layers::StageLayout layout{0, config.num_layers, true, true};
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<GptStage> stage,
                          GptStage::CreateOnDevice(config, layout, &kernels, stage_options));
  if (runner) stage->set_segment_runner(runner);
  std::vector<StepRecord> records;
  for (int step = 0; step < options.steps; ++step) {
    const double tokens = StepTokens(config, options, step);
    const float loss_grad_scale = static_cast<float>(1.0 / tokens);
    double loss_sum = 0.0;
    for (int m = 0; m < options.num_micro_batches; ++m) {
      const TokenBatch bt = MakeTokenBatch(config, options, step, m);
      const MicroBatchInput in = TrainingInput(bt, options, step, m);
      StageOutput out;
      MXMACA_RETURN_IF_ERROR(stage->Forward(in, &out));
      loss_sum += out.loss_sum;
      std::vector<float> unused;
      MXMACA_RETURN_IF_ERROR(stage->BackwardInput(in.micro_batch_id, {}, loss_grad_scale, &unused));
      MXMACA_RETURN_IF_ERROR(stage->BackwardWeight(in.micro_batch_id));
    }
    MXMACA_ASSIGN_OR_RETURN(const double norm_sq, stage->GradNormSquared(nullptr));
    StepRecord rec{loss_sum / tokens, std::sqrt(norm_sq)};
    if (!std::isfinite(rec.loss) || !std::isfinite(rec.grad_norm)) {
      return absl::InternalError(absl::StrCat("device loop on ", kernels.name(), ": step ", step,
                                              " loss ", rec.loss, ", grad norm ", rec.grad_norm));
    }
    const double clip = ClipCoefficient(rec.grad_norm, options.clip_grad);
    if (clip != 1.0) MXMACA_RETURN_IF_ERROR(stage->ScaleGrads(static_cast<float>(clip)));
    MXMACA_RETURN_IF_ERROR(stage->AdamWStep(LearningRate(options, step), options.weight_decay,
                                            0.9f, 0.999f, 1e-8f, step + 1));
    MXMACA_RETURN_IF_ERROR(stage->ZeroGrads());
    MXMACA_RETURN_IF_ERROR(kernels.Synchronize());
    records.push_back(rec);
  }
  return records;
}

std::string RunFingerprint(const GptConfig& c, const TrainingLoopOptions& o) {
  return absl::StrCat(
      "L=", c.num_layers, " h=", c.hidden_size, " ffn=", c.ffn_hidden_size, " np=",
      c.num_attention_heads, " ng=", c.query_groups(), " s=", c.seq_length, " V=", c.vocab_size,
      " Vp=", c.padded_vocab_size, " norm=",
      c.normalization == layers::Normalization::kLayerNorm ? "layernorm" : "rmsnorm",
      " swiglu=", c.swiglu, " rope=",
      c.position_embedding_type == layers::PositionEmbeddingType::kRope, " bias=",
      c.add_bias_linear, " tied=", c.tied_embeddings(), " seed=", c.seed, " prec=",
      PrecisionName(c.precision), " steps=", o.steps, " mbs=", o.num_micro_batches, "x",
      o.micro_batch_size, " lr=", o.lr, " warmup=", o.lr_warmup_steps, " wd=", o.weight_decay,
      " clip=", o.clip_grad, " data_seed=", o.data_seed);
}

}  // namespace mxmaca::gpu_check
