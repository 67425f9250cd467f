// mxmaca/trainer_options.h (api/public/): what a training job does besides the model and the layout
// (public API): batch, sequence, iterations, learning-rate schedule, optimizer, data,
// tokenizer, checkpoints, logging, evaluation, seed, threads, trace.
//
// Each field names the Megatron-LM pretrain_gpt.py flag it becomes and keeps Megatron's
// default (megatron/training/arguments.py, core_v0.19.0); a field left at Megatron's
// default produces no flag. Combinations are checked when the job runs, by the same
// code as `mxmaca train` (ValidateAndDeriveArgs in api/args/megatron_args.h).
#ifndef MXMACA_API_PUBLIC_TRAINER_OPTIONS_H_
#define MXMACA_API_PUBLIC_TRAINER_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mxmaca {

// LearningRateSchedule: Megatron's OptimizerParamScheduler (warmup, then decay).
struct LearningRateSchedule {
  std::optional<double> lr;               // --lr (peak); required by the runtime
  double min_lr = 0.0;                    // --min-lr (floor after decay)
  std::string decay_style = "linear";     // --lr-decay-style: constant|linear|cosine
  std::optional<int64_t> decay_iters;     // --lr-decay-iters; empty = train_iters
  int64_t warmup_iters = 0;               // --lr-warmup-iters
  std::optional<double> warmup_fraction;  // --lr-warmup-fraction (of decay_iters)
  double warmup_init = 0.0;               // --lr-warmup-init (lr at step 0 of warmup)
};

// OptimizerOptions: AdamW (Megatron's "adam" is AdamW) with global-norm clipping.
struct OptimizerOptions {
  std::string name = "adam";   // --optimizer (adam only today)
  double adam_beta1 = 0.9;     // --adam-beta1
  double adam_beta2 = 0.999;   // --adam-beta2
  double adam_eps = 1e-8;      // --adam-eps
  double weight_decay = 0.01;  // --weight-decay (decoupled; not on biases and norms)
  double clip_grad = 1.0;      // --clip-grad: max global L2 norm of the gradients; 0 = off
};

// TokenizerOptions: the tokenizer fixes the vocabulary size V and the end-of-document id.
struct TokenizerOptions {
  // --tokenizer-type: "GPT2BPETokenizer" (pretrain_gpt's default; needs vocab_file and
  // merge_file), "HuggingFaceTokenizer", "SentencePieceTokenizer",
  // "GPTSentencePieceTokenizer", "Llama2Tokenizer" (need tokenizer_model), "TikTokenizer"
  // (needs tokenizer_model and tiktoken_pattern) or "NullTokenizer" (ids are the text;
  // needs vocab_size). See data/tokenizer_factory.h.
  std::string type = "GPT2BPETokenizer";
  std::string vocab_file;        // --vocab-file (GPT-2 encoder.json)
  std::string merge_file;        // --merge-file (GPT-2 vocab.bpe)
  std::string tokenizer_model;   // --tokenizer-model (tokenizer.json folder, .model, .json)
  std::string tiktoken_pattern;  // --tiktoken-pattern v1|v2 (TikTokenizer)
  // --vocab-size (NullTokenizer): ids 0..vocab_size-1, eod = vocab_size, so V =
  // vocab_size + 1. 0 = derived from EmbeddingSpec::vocab_size (V - 1). TikTokenizer:
  // its vocab size (0 = Megatron's default 131072).
  int64_t vocab_size = 0;
};

// TrainerOptions: everything but the model and the layout.
struct TrainerOptions {
  // ---- Batch and length ----
  int64_t micro_batch_size = 1;   // --micro-batch-size (b, sequences per micro-batch)
  int64_t global_batch_size = 0;  // --global-batch-size; 0 = b x data (one micro-batch per rank)
  int64_t seq_length = 0;         // --seq-length (s, tokens); required
  int64_t train_iters = 0;        // --train-iters; required (> 0)

  LearningRateSchedule lr;
  OptimizerOptions optimizer;

  // ---- Data ----
  // --data-path: Megatron's blend ("weight prefix ..." or "prefix ..."), prefixes of
  // .bin/.idx files (MEGATRON_FORMATS.md). Empty = mock data (Megatron's MockGPTDataset).
  std::vector<std::string> data_path;
  std::string split;            // --split ("969, 30, 1" style); "" = Megatron's default
  bool mock_data = false;       // --mock-data (explicit; also implied by no data_path)
  std::string data_cache_path;  // --data-cache-path (index cache folder); "" = next to the data
  TokenizerOptions tokenizer;

  // ---- Checkpoints (Megatron's torch_dist-compatible layout, docs/CHECKPOINTS.md) ----
  std::string save;           // --save (folder); "" = never save
  int64_t save_interval = 0;  // --save-interval (iterations); 0 = only at the end
  std::string load;           // --load (folder); "" = start from the initial weights

  // ---- Logging and evaluation ----
  int64_t log_interval = 100;    // --log-interval (iterations per log line)
  // --eval-interval (iterations between validations); 0 = None, Megatron-Core 0.19's
  // default: no validation during training, only the final one.
  int64_t eval_interval = 0;
  int64_t eval_iters = 100;      // --eval-iters (batches per validation); 0 = no validation

  // ---- Initialisation, precision, runtime ----
  int64_t seed = 1234;            // --seed (weights and dropout masks)
  double init_method_std = 0.02;  // --init-method-std (normal init's std)
  bool bf16 = false;              // --bf16 (bf16 GEMM inputs, fp32 master weights)
  int num_threads = 0;            // --num-threads; 0 = Runtime's default (cores)
  std::string trace_file;         // --trace-file (Chrome/Perfetto JSON); "" = none

  // Further pretrain_gpt.py flags, appended verbatim after the translated ones (an escape
  // hatch for flags this struct does not name, e.g. {"--eod-mask-loss"}). The runtime
  // rejects unknown or unhonoured flags by name.
  std::vector<std::string> extra_megatron_args;
};

}  // namespace mxmaca

#endif  // MXMACA_API_PUBLIC_TRAINER_OPTIONS_H_
