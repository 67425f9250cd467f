// tests/parity/gpt_parity_driver.cc: trains a tiny GPT with layers::GptStage and the
// trainer's optimizer pieces, exporting everything gpt_reference.py needs to repeat the
// run in PyTorch.
//
// Usage: gpt_parity_driver --preset {gpt2|llama|eod|gpt2_vocab|qwen} --out DIR [--steps N]
// (qwen: the llama preset with --add-qkv-bias; layernorm_1p / rmsnorm_1p: the gpt2 /
// llama presets with --apply-layernorm-1p; rope_interleaved: llama with --rotary-interleaved;
// qk_layernorm / qk_layernorm_ln: llama / gpt2 with --qk-layernorm)
// Writes into DIR:
//   config.json             model and training settings (the reference builds from these)
//   init_weights.safetensors every parameter before training, under its Megatron name
//   batches.safetensors      "tokens" int32 [steps, micro_batches, b, s + 1] (inputs are
//                            [..., :s], labels [..., 1:])
//   step1_grads.safetensors  every parameter's gradient of iteration 1 (before clipping)
//   result.json              per-iteration loss, grad norm and learning rate
// Batches with --eod-mask-loss / --reset-position-ids / --reset-attention-mask follow
// Megatron's _get_ltor_masks_and_position_ids (megatron/core/datasets/gpt_dataset.py);
// the reference recomputes them itself from the tokens.
// Loss: Megatron's default, each micro-batch's sum(loss * mask) / sum(mask) averaged over
// the micro-batches (gradient scale 1 / (tokens_mb * num_microbatches)); the "eod" preset
// uses --calculate-per-token-loss (scale 1 / tokens of the global batch).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/gpt_stage.h"
#include "layers/grad_clip.h"
#include "layers/lr_schedule.h"
#include "layers/optimizer.h"
#include "tests/parity/tensor_file.h"

namespace mxmaca::parity {
namespace {

using layers::GptConfig;

struct Preset {
  GptConfig model;
  int64_t micro_batch_size = 2;
  int64_t num_microbatches = 2;
  int64_t steps = 20;
  double lr = 3e-3, min_lr = 3e-4;
  int64_t warmup_iters = 4;
  double weight_decay = 0.1;
  double clip_grad = 1.0;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  bool eod_mask_loss = false, reset_position_ids = false, reset_attention_mask = false;
  bool calculate_per_token_loss = false;
  int32_t eod_token = 0;
  double eod_probability = 0.0;  // chance of each token being replaced by eod
};

absl::StatusOr<Preset> MakePreset(const std::string& name) {
  Preset p;
  GptConfig& c = p.model;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.ffn_hidden_size = 256;
  c.seq_length = 32;
  c.max_position_embeddings = 32;
  c.vocab_size = 1000;
  c.padded_vocab_size = 1024;
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  c.init_method_std = 0.02f;
  c.seed = 1234;
  c.apply_layernorm_1p = name == "layernorm_1p" || name == "rmsnorm_1p";
  c.qk_layernorm = name == "qk_layernorm" || name == "qk_layernorm_ln";
  if (name == "gpt2" || name == "gpt2_vocab" || name == "eod" || name == "layernorm_1p" ||
      name == "qk_layernorm_ln") {
    // GPT-2 layout: learned positions, LayerNorm, GELU, biases, tied embeddings.
    if (name == "gpt2_vocab") {
      c.vocab_size = 50257;
      c.padded_vocab_size = 50304;
      p.steps = 5;  // keeps the test under ~30 s on 2 loaded cores
    }
    if (name == "eod") {
      p.eod_mask_loss = p.reset_position_ids = p.reset_attention_mask = true;
      p.calculate_per_token_loss = true;
      p.eod_token = static_cast<int32_t>(c.vocab_size - 1);
      p.eod_probability = 0.08;
      c.gelu_tanh_approximation = true;  // Megatron's fused bias-GELU
    }
    if (name == "qk_layernorm_ln") {
      // RoPE: with learned positions the k_layernorm bias gradient is exactly 0 (a bias
      // shared by all keys shifts every score of a query equally), so its relative error
      // would compare rounding noise; rotated per position it is not.
      c.position_embedding_type = layers::PositionEmbeddingType::kRope;
    }
    return p;
  }
  if (name == "llama" || name == "qwen" || name == "rmsnorm_1p" || name == "rope_interleaved" ||
      name == "qk_layernorm") {
    // RoPE, RMSNorm, SwiGLU, untied, no biases, GQA (4 heads in 2 groups).
    c.position_embedding_type = layers::PositionEmbeddingType::kRope;
    c.normalization = layers::Normalization::kRmsNorm;
    c.swiglu = true;
    c.ffn_hidden_size = 128;
    c.untie_embeddings_and_output_weights = true;
    c.add_bias_linear = false;
    c.num_query_groups = 2;
    c.rotary_percent = 0.5f;
    // Qwen2: a bias on linear_qkv only (--disable-bias-linear --add-qkv-bias). The bias
    // starts at zero, so its effect on the loss shows from iteration 2 on.
    c.add_qkv_bias = name == "qwen";
    c.rotary_interleaved = name == "rope_interleaved";
    return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--preset: got '", name, "', expected gpt2, llama, eod, gpt2_vocab, qwen, layernorm_1p, rmsnorm_1p, rope_interleaved, qk_layernorm or qk_layernorm_ln"));
}

// Megatron's _get_ltor_masks_and_position_ids for one row of s input tokens.
void RowMasks(const Preset& p, const int32_t* tokens, int64_t s, int32_t* positions,
              int32_t* doc_start, float* loss_mask) {
  int32_t start = 0;
  for (int64_t i = 0; i < s; ++i) {
    // Token i belongs to the document that began after the last eod before i.
    doc_start[i] = p.reset_attention_mask ? start : 0;
    positions[i] = static_cast<int32_t>(p.reset_position_ids ? i - start : i);
    loss_mask[i] = (p.eod_mask_loss && tokens[i] == p.eod_token) ? 0.0f : 1.0f;
    if (tokens[i] == p.eod_token && (p.reset_attention_mask || p.reset_position_ids)) {
      start = static_cast<int32_t>(i + 1);
    }
  }
}

nlohmann::json ConfigJson(const Preset& p) {
  const GptConfig& c = p.model;
  nlohmann::json j;
  j["num_layers"] = c.num_layers;
  j["hidden_size"] = c.hidden_size;
  j["ffn_hidden_size"] = c.ffn_hidden_size;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_query_groups"] = c.query_groups();
  j["kv_channels"] = c.head_dim();
  j["seq_length"] = c.seq_length;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["vocab_size"] = c.vocab_size;
  j["padded_vocab_size"] = c.padded_vocab_size;
  j["position_embedding_type"] =
      c.position_embedding_type == layers::PositionEmbeddingType::kRope   ? "rope"
      : c.position_embedding_type == layers::PositionEmbeddingType::kNone ? "none"
                                                                          : "learned_absolute";
  j["rotary_base"] = c.rotary_base;
  j["rotary_percent"] = c.rotary_percent;
  j["rotary_interleaved"] = c.rotary_interleaved;
  j["normalization"] = c.normalization == layers::Normalization::kRmsNorm ? "RMSNorm" : "LayerNorm";
  j["norm_epsilon"] = c.norm_epsilon;
  j["apply_layernorm_1p"] = c.apply_layernorm_1p;
  j["qk_layernorm"] = c.qk_layernorm;
  j["swiglu"] = c.swiglu;
  j["gelu_tanh_approximation"] = c.gelu_tanh_approximation;
  j["untie_embeddings_and_output_weights"] = c.untie_embeddings_and_output_weights;
  j["add_bias_linear"] = c.add_bias_linear;
  j["add_qkv_bias"] = c.add_qkv_bias;
  j["micro_batch_size"] = p.micro_batch_size;
  j["num_microbatches"] = p.num_microbatches;
  j["train_iters"] = p.steps;
  j["lr"] = p.lr;
  j["min_lr"] = p.min_lr;
  j["lr_warmup_iters"] = p.warmup_iters;
  j["lr_decay_iters"] = p.steps;
  j["lr_decay_style"] = "cosine";
  j["weight_decay"] = p.weight_decay;
  j["clip_grad"] = p.clip_grad;
  j["adam_beta1"] = p.beta1;
  j["adam_beta2"] = p.beta2;
  j["adam_eps"] = p.eps;
  j["eod_mask_loss"] = p.eod_mask_loss;
  j["reset_position_ids"] = p.reset_position_ids;
  j["reset_attention_mask"] = p.reset_attention_mask;
  j["calculate_per_token_loss"] = p.calculate_per_token_loss;
  j["eod_token"] = p.eod_token;
  return j;
}

void AddParameters(layers::ParameterStore& store, bool grads, TensorFileWriter* w) {
  for (int i = 0; i < store.size(); ++i) {
    const layers::ParameterInfo& info = store.info(i);
    w->AddF32(info.spec.name, info.spec.shape, grads ? store.grad(i) : store.param(i));
  }
}

absl::Status Run(const std::string& preset_name, const std::string& out, int64_t steps) {
  MXMACA_ASSIGN_OR_RETURN(Preset p, MakePreset(preset_name));
  if (steps > 0) p.steps = steps;
  const GptConfig& c = p.model;
  MXMACA_ASSIGN_OR_RETURN(auto stage, layers::GptStage::Create(c, {0, c.num_layers, true, true}));
  stage->InitializeParameters();
  layers::ParameterStore& store = stage->parameters();
  {
    std::ofstream f(out + "/config.json");
    f << ConfigJson(p).dump(2) << "\n";
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", out, "/config.json"));
  }
  {
    TensorFileWriter w;
    AddParameters(store, false, &w);
    MXMACA_RETURN_IF_ERROR(w.Write(out + "/init_weights.safetensors"));
  }

  // Fresh random batches (seeded), some tokens replaced by eod.
  const int64_t b = p.micro_batch_size, s = c.seq_length, m = p.num_microbatches;
  std::vector<int32_t> data(p.steps * m * b * (s + 1));
  std::mt19937_64 rng(20240611u + std::hash<std::string>()(preset_name) % 1000);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.vocab_size) - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // A random first-order Markov chain with 4 successors per token, so the model has
  // something to learn and the loss falls over the run (random tokens would keep it at
  // ln V and make the per-iteration comparison uninformative).
  std::vector<int32_t> successors(c.vocab_size * 4);
  for (int32_t& t : successors) t = token(rng);
  for (size_t i = 0; i < data.size(); ++i) {
    const bool row_start = i % (s + 1) == 0;
    int32_t t = row_start ? token(rng) : successors[data[i - 1] * 4 + rng() % 4];
    if (unit(rng) < p.eod_probability) t = p.eod_token;
    data[i] = t;
  }
  {
    TensorFileWriter w;
    w.AddI32("tokens", {p.steps, m, b, s + 1}, data.data());
    MXMACA_RETURN_IF_ERROR(w.Write(out + "/batches.safetensors"));
  }

  // The trainer's optimizer pieces.
  const int64_t global_batch = b * m;
  layers::OptimizerParamSchedulerConfig sc;
  sc.init_lr = 0.0;
  sc.max_lr = p.lr;
  sc.min_lr = p.min_lr;
  sc.lr_warmup_steps = p.warmup_iters * global_batch;
  sc.lr_decay_steps = p.steps * global_batch;
  sc.lr_decay_style = layers::LrDecayStyle::kCosine;
  sc.start_wd = sc.end_wd = p.weight_decay;
  sc.wd_incr_steps = p.steps * global_batch;
  MXMACA_ASSIGN_OR_RETURN(auto scheduler, layers::OptimizerParamScheduler::Create(sc));
  layers::AdamWOptimizer optimizer(
      {static_cast<float>(p.beta1), static_cast<float>(p.beta2), static_cast<float>(p.eps)},
      store.OptimizerTensors());
  kernels::ExecContext ctx;
  const std::vector<layers::GradSpan> spans = store.GradSpans();

  nlohmann::json result;
  result["loss"] = nlohmann::json::array();
  result["grad_norm"] = nlohmann::json::array();
  result["lr"] = nlohmann::json::array();
  for (int64_t it = 0; it < p.steps; ++it) {
    store.ZeroGrads();
    struct Mb {
      std::vector<int32_t> tokens, labels, positions, doc_start;
      std::vector<float> mask;
    };
    std::vector<Mb> mbs(m);
    double global_tokens = 0;
    for (int64_t k = 0; k < m; ++k) {
      Mb& mb = mbs[k];
      for (int64_t r = 0; r < b; ++r) {
        const int32_t* row = &data[((it * m + k) * b + r) * (s + 1)];
        mb.tokens.insert(mb.tokens.end(), row, row + s);
        mb.labels.insert(mb.labels.end(), row + 1, row + s + 1);
      }
      mb.positions.resize(b * s);
      mb.doc_start.resize(b * s);
      mb.mask.resize(b * s);
      for (int64_t r = 0; r < b; ++r) {
        RowMasks(p, &mb.tokens[r * s], s, &mb.positions[r * s], &mb.doc_start[r * s],
                 &mb.mask[r * s]);
      }
      for (float x : mb.mask) global_tokens += x;
    }
    double loss_report = 0, loss_sum = 0;
    for (int64_t k = 0; k < m; ++k) {
      const Mb& mb = mbs[k];
      layers::MicroBatchInput in;
      in.micro_batch_id = it * m + k;
      in.iteration = it + 1;
      in.micro_batch_size = b;
      in.seq_length = s;
      in.tokens = mb.tokens;
      in.position_ids = mb.positions;
      if (p.reset_attention_mask) in.doc_start = mb.doc_start;
      in.labels = mb.labels;
      in.loss_mask = mb.mask;
      layers::StageOutput o;
      MXMACA_RETURN_IF_ERROR(stage->Forward(in, &o));
      loss_report += o.loss_sum / o.num_tokens / m;
      loss_sum += o.loss_sum;
      const double scale =
          p.calculate_per_token_loss ? 1.0 / global_tokens : 1.0 / (o.num_tokens * m);
      MXMACA_RETURN_IF_ERROR(
          stage->Backward(in.micro_batch_id, {}, static_cast<float>(scale), nullptr));
    }
    if (p.calculate_per_token_loss) loss_report = loss_sum / global_tokens;
    if (it == 0) {
      TensorFileWriter w;
      AddParameters(store, true, &w);
      MXMACA_RETURN_IF_ERROR(w.Write(out + "/step1_grads.safetensors"));
    }
    const double norm = std::sqrt(layers::GradNormSquared(ctx, spans));
    layers::ClipGradsByTotalNorm(ctx, spans, norm, p.clip_grad);
    result["loss"].push_back(loss_report);
    result["grad_norm"].push_back(norm);
    result["lr"].push_back(scheduler.lr());
    optimizer.Step(ctx, scheduler.lr(), scheduler.weight_decay());
    scheduler.Step(global_batch);
  }
  std::ofstream f(out + "/result.json");
  f << result.dump(2) << "\n";
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", out, "/result.json"));
  return absl::OkStatus();
}

}  // namespace
}  // namespace mxmaca::parity

int main(int argc, char** argv) {
  std::string preset, out;
  int64_t steps = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--preset") {
      preset = argv[i + 1];
    } else if (flag == "--out") {
      out = argv[i + 1];
    } else if (flag == "--steps") {
      steps = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (preset.empty() || out.empty()) {
    std::fprintf(stderr, "usage: %s --preset NAME --out DIR [--steps N]\n", argv[0]);
    return 2;
  }
  const absl::Status status = mxmaca::parity::Run(preset, out, steps);
  if (!status.ok()) {
    std::fprintf(stderr, "gpt_parity_driver: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
