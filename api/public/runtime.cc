// api/public/runtime.cc: see runtime.h. The translation ModelSpec + ParallelConfig +
// TrainerOptions -> pretrain_gpt.py flags lives here; a field at Megatron's default (a
// default-constructed api::MegatronArgs) produces no flag, so the command line is short.
#include "mxmaca/runtime.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/messages.h"
#include "actors/training_log.h"
#include "api/args/megatron_args.h"
#include "api/train/train_command.h"
#include "base/status_macros.h"

namespace mxmaca {
namespace {

// FormatDouble: the shortest "%g" text that parses back to exactly `v`.
std::string FormatDouble(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// FlagList: appends flags, skipping values equal to Megatron's default.
class FlagList {
 public:
  void Bool(const char* flag, bool set) {
    if (set) args_.emplace_back(flag);
  }
  void Value(const char* flag, std::string value) {
    args_.emplace_back(flag);
    args_.push_back(std::move(value));
  }
  void Int(const char* flag, int64_t v) { Value(flag, absl::StrCat(v)); }
  void Int(const char* flag, int64_t v, int64_t megatron_default) {
    if (v != megatron_default) Int(flag, v);
  }
  void Double(const char* flag, double v) { Value(flag, FormatDouble(v)); }
  void Double(const char* flag, double v, double megatron_default) {
    if (v != megatron_default) Double(flag, v);
  }
  void String(const char* flag, const std::string& v, const std::string& megatron_default) {
    if (v != megatron_default) Value(flag, v);
  }
  void List(const char* flag, const std::vector<std::string>& values) {
    if (values.empty()) return;
    args_.emplace_back(flag);
    args_.insert(args_.end(), values.begin(), values.end());
  }
  std::vector<std::string> Take() { return std::move(args_); }

 private:
  std::vector<std::string> args_;
};

absl::Status CheckPositive(const char* field, int64_t v, int64_t min) {
  if (v >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " is ", v, "; it must be >= ", min));
}

void AddModelFlags(const ModelSpec& model, const TrainerOptions& o, FlagList& f) {
  const api::MegatronArgs d;  // Megatron's defaults
  const EmbeddingSpec e = model.Embedding();
  const TransformerLayerSpec t = model.Layer();
  f.Int("--num-layers", model.NumTransformerLayers());
  f.Int("--hidden-size", t.hidden_size);
  f.Int("--num-attention-heads", t.num_attention_heads);
  if (t.num_query_groups > 0 && t.num_query_groups != t.num_attention_heads) {
    f.Bool("--group-query-attention", true);
    f.Int("--num-query-groups", t.num_query_groups);
  }
  if (t.kv_channels > 0) f.Int("--kv-channels", t.kv_channels);
  if (t.ffn_hidden_size > 0) f.Int("--ffn-hidden-size", t.ffn_hidden_size);
  f.Int("--max-position-embeddings",
        e.max_position_embeddings > 0 ? e.max_position_embeddings : o.seq_length);
  switch (e.position_embedding) {
    case PositionEmbedding::kLearnedAbsolute:
      break;
    case PositionEmbedding::kRope:
      f.Value("--position-embedding-type", "rope");
      f.Int("--rotary-base", e.rotary_base, d.rotary_base);
      f.Double("--rotary-percent", e.rotary_percent, d.rotary_percent);
      break;
    case PositionEmbedding::kNone:
      f.Value("--position-embedding-type", "none");
      break;
  }
  f.Int("--make-vocab-size-divisible-by", e.make_vocab_size_divisible_by,
        d.make_vocab_size_divisible_by);
  if (t.normalization == Normalization::kRmsNorm) f.Value("--normalization", "RMSNorm");
  f.Double("--norm-epsilon", t.norm_epsilon, d.norm_epsilon);
  f.Bool("--swiglu", t.activation == Activation::kSwiGlu);
  // Exact GELU: Megatron computes it when the bias-GELU fusion is off, or without biases.
  f.Bool("--no-bias-gelu-fusion", t.activation == Activation::kGelu && t.add_bias_linear);
  f.Double("--hidden-dropout", t.hidden_dropout, d.hidden_dropout);
  f.Double("--attention-dropout", t.attention_dropout, d.attention_dropout);
  f.Bool("--disable-bias-linear", !t.add_bias_linear);
  f.Bool("--untie-embeddings-and-output-weights", !model.Output().tied);
  f.Bool("--calculate-per-token-loss", model.Loss().calculate_per_token_loss);
}

absl::Status AddParallelFlags(const ParallelConfig& p, FlagList& f) {
  MXMACA_RETURN_IF_ERROR(CheckPositive("ParallelConfig::tensor", p.tensor, 1));
  MXMACA_RETURN_IF_ERROR(CheckPositive("ParallelConfig::pipeline", p.pipeline, 1));
  MXMACA_RETURN_IF_ERROR(CheckPositive("ParallelConfig::data", p.data, 1));
  MXMACA_RETURN_IF_ERROR(CheckPositive("ParallelConfig::context", p.context, 1));
  MXMACA_RETURN_IF_ERROR(CheckPositive("ParallelConfig::expert", p.expert, 1));
  MXMACA_RETURN_IF_ERROR(CheckPositive("ParallelConfig::ddp_bucket_size", p.ddp_bucket_size, 0));
  MXMACA_RETURN_IF_ERROR(
      CheckPositive("ParallelConfig::layers_per_virtual_stage", p.layers_per_virtual_stage, 0));
  MXMACA_RETURN_IF_ERROR(
      CheckPositive("ParallelConfig::virtual_stages_per_rank", p.virtual_stages_per_rank, 0));
  if (p.layers_per_virtual_stage > 0 && p.virtual_stages_per_rank > 0) {
    return absl::InvalidArgumentError(
        "ParallelConfig: set layers_per_virtual_stage or virtual_stages_per_rank, not both "
        "(Megatron's --num-layers-per-virtual-pipeline-stage and "
        "--num-virtual-stages-per-pipeline-rank are exclusive)");
  }
  // The schedule's name as --pipeline-schedule spells it (scheduler::ParseScheduleKind);
  // whether it fits the layout (e.g. interleaved needs virtual stages) is Train's check.
  std::string schedule = p.schedule == "interleaved" ? "interleaved-1f1b" : p.schedule;
  if (!schedule.empty() && schedule != "1f1b" && schedule != "interleaved-1f1b" &&
      schedule != "gpipe" && schedule != "zb-h1") {
    return absl::InvalidArgumentError(
        absl::StrCat("ParallelConfig::schedule \"", p.schedule,
                     "\": expected \"\" (Megatron's choice), \"1f1b\", \"interleaved\", \"gpipe\" "
                     "or \"zb-h1\""));
  }

  f.Int("--tensor-model-parallel-size", p.tensor, 1);
  f.Int("--pipeline-model-parallel-size", p.pipeline, 1);
  if (p.layers_per_virtual_stage > 0) {
    f.Int("--num-layers-per-virtual-pipeline-stage", p.layers_per_virtual_stage);
  }
  if (p.virtual_stages_per_rank > 0) {
    f.Int("--num-virtual-stages-per-pipeline-rank", p.virtual_stages_per_rank);
  }
  f.Int("--context-parallel-size", p.context, 1);
  f.Int("--expert-model-parallel-size", p.expert, 1);
  f.Bool("--sequence-parallel", p.sequence_parallel);
  f.Bool("--use-distributed-optimizer", p.distributed_optimizer);
  if (p.ddp_bucket_size > 0) f.Int("--ddp-bucket-size", p.ddp_bucket_size);
  if (!schedule.empty()) f.Value("--pipeline-schedule", schedule);
  // --world-size defaults to TP x PP x CP (DP 1), so it is needed only for DP > 1.
  if (p.data > 1) f.Int("--world-size", p.WorldSize());
  return absl::OkStatus();
}

absl::Status AddTokenizerFlags(const ModelSpec& model, const TokenizerOptions& t, FlagList& f) {
  const int64_t model_vocab = model.Embedding().vocab_size;
  f.Value("--tokenizer-type", t.type);
  if (t.type == "NullTokenizer") {
    int64_t null_vocab = t.vocab_size;
    if (null_vocab == 0 && model_vocab > 0) null_vocab = model_vocab - 1;
    if (null_vocab <= 0) {
      return absl::InvalidArgumentError(
          "NullTokenizer needs TokenizerOptions::vocab_size or EmbeddingSpec::vocab_size "
          "(>= 2)");
    }
    if (model_vocab > 0 && model_vocab != null_vocab + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "EmbeddingSpec::vocab_size ", model_vocab, " does not match the NullTokenizer's ",
          null_vocab + 1, " (TokenizerOptions::vocab_size ", t.vocab_size, " + the eod id)"));
    }
    f.Int("--vocab-size", null_vocab);
  } else {
    if (model_vocab > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "EmbeddingSpec::vocab_size ", model_vocab, " with tokenizer ", t.type,
          ": the vocabulary is the tokenizer's; leave vocab_size 0 (an explicit size needs "
          "the NullTokenizer)"));
    }
    if (t.vocab_size > 0) f.Int("--vocab-size", t.vocab_size);
  }
  if (!t.vocab_file.empty()) f.Value("--vocab-file", t.vocab_file);
  if (!t.merge_file.empty()) f.Value("--merge-file", t.merge_file);
  if (!t.tokenizer_model.empty()) f.Value("--tokenizer-model", t.tokenizer_model);
  if (!t.tiktoken_pattern.empty()) f.Value("--tiktoken-pattern", t.tiktoken_pattern);
  return absl::OkStatus();
}

// CheckTrainerOptions: the sizes every job needs, before anything is derived from them.
absl::Status CheckTrainerOptions(const TrainerOptions& o) {
  MXMACA_RETURN_IF_ERROR(CheckPositive("TrainerOptions::micro_batch_size", o.micro_batch_size, 1));
  MXMACA_RETURN_IF_ERROR(
      CheckPositive("TrainerOptions::global_batch_size", o.global_batch_size, 0));
  MXMACA_RETURN_IF_ERROR(CheckPositive("TrainerOptions::seq_length", o.seq_length, 1));
  MXMACA_RETURN_IF_ERROR(CheckPositive("TrainerOptions::train_iters", o.train_iters, 1));
  return CheckPositive("TrainerOptions::num_threads", o.num_threads, 0);
}

void AddTrainerFlags(const TrainerOptions& o, int default_threads, FlagList& f) {
  const api::MegatronArgs d;
  f.Int("--micro-batch-size", o.micro_batch_size);
  if (o.global_batch_size > 0) f.Int("--global-batch-size", o.global_batch_size);
  f.Int("--seq-length", o.seq_length);
  f.Int("--train-iters", o.train_iters);

  const LearningRateSchedule& lr = o.lr;
  if (lr.lr) f.Double("--lr", *lr.lr);
  f.Double("--min-lr", lr.min_lr, d.min_lr);
  f.String("--lr-decay-style", lr.decay_style, d.lr_decay_style);
  if (lr.decay_iters) f.Int("--lr-decay-iters", *lr.decay_iters);
  f.Int("--lr-warmup-iters", lr.warmup_iters, d.lr_warmup_iters);
  if (lr.warmup_fraction) f.Double("--lr-warmup-fraction", *lr.warmup_fraction);
  f.Double("--lr-warmup-init", lr.warmup_init, d.lr_warmup_init);

  const OptimizerOptions& opt = o.optimizer;
  f.String("--optimizer", opt.name, d.optimizer);
  f.Double("--adam-beta1", opt.adam_beta1, d.adam_beta1);
  f.Double("--adam-beta2", opt.adam_beta2, d.adam_beta2);
  f.Double("--adam-eps", opt.adam_eps, d.adam_eps);
  f.Double("--weight-decay", opt.weight_decay, d.weight_decay);
  f.Double("--clip-grad", opt.clip_grad, d.clip_grad);

  f.List("--data-path", o.data_path);
  if (!o.split.empty()) f.Value("--split", o.split);
  f.Bool("--mock-data", o.mock_data);
  if (!o.data_cache_path.empty()) f.Value("--data-cache-path", o.data_cache_path);

  if (!o.save.empty()) f.Value("--save", o.save);
  if (o.save_interval > 0) f.Int("--save-interval", o.save_interval);
  if (!o.load.empty()) f.Value("--load", o.load);

  f.Int("--log-interval", o.log_interval, d.log_interval);
  if (o.eval_interval > 0) f.Int("--eval-interval", o.eval_interval);
  f.Int("--eval-iters", o.eval_iters, d.eval_iters);

  f.Int("--seed", o.seed, d.seed);
  f.Double("--init-method-std", o.init_method_std, d.init_method_std);
  f.Bool("--bf16", o.bf16);
  const int threads = o.num_threads > 0 ? o.num_threads : default_threads;
  if (threads > 0) f.Int("--num-threads", threads);
  if (!o.trace_file.empty()) f.Value("--trace-file", o.trace_file);
}

IterationMetrics ToMetrics(const actors::IterationLogRecord& r) {
  IterationMetrics m;
  m.iteration = r.iteration;
  m.train_iters = r.train_iters;
  m.consumed_samples = r.consumed_samples;
  m.lm_loss = r.lm_loss;
  m.grad_norm = r.grad_norm;
  m.learning_rate = r.learning_rate;
  m.tokens_per_second = r.tokens_per_second;
  m.elapsed_ms = r.elapsed_ms_per_iteration;
  m.skipped = r.skipped_iterations > 0;
  return m;
}

JobResult ToResult(const actors::TrainingSummary& s) {
  JobResult r;
  r.first_iteration = s.first_iteration;
  r.last_iteration = s.last_iteration;
  r.skipped_iterations = s.skipped_iterations;
  r.train_losses = s.train_losses;
  r.grad_norms = s.grad_norms;
  for (const auto& [iteration, loss] : s.valid_losses) r.valid_losses.push_back({iteration, loss});
  r.mean_tokens_per_second = s.mean_tokens_per_second;
  r.peak_activation_bytes = s.peak_activation_bytes;
  return r;
}

// ShellQuote: `s` as one POSIX shell word.
std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_-+=./:,@%") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

absl::StatusOr<Job> Job::FromMegatronArgs(std::vector<std::string> args) {
  MXMACA_RETURN_IF_ERROR(api::ParseMegatronArgs(args).status());
  return Job(std::move(args));
}

std::string Job::CommandLine() const {
  std::string out = "mxmaca train";
  for (const std::string& a : args_) absl::StrAppend(&out, " ", ShellQuote(a));
  return out;
}

absl::StatusOr<JobResult> Job::Run(const MetricsCallback& on_iteration) const {
  std::function<void(const actors::IterationLogRecord&)> forward;
  if (on_iteration) {
    forward = [&on_iteration](const actors::IterationLogRecord& r) { on_iteration(ToMetrics(r)); };
  }
  MXMACA_ASSIGN_OR_RETURN(actors::TrainingSummary summary,
                          api::Train(args_, log_sink_, std::move(forward)));
  if (!summary.ok) return absl::AbortedError(summary.error);
  return ToResult(summary);
}

absl::StatusOr<Job> Runtime::CreateJob(const ModelSpec& model, const ParallelConfig& parallel,
                                       const TrainerOptions& options) const {
  MXMACA_RETURN_IF_ERROR(model.Validate());
  MXMACA_RETURN_IF_ERROR(CheckTrainerOptions(options));
  FlagList flags;
  AddModelFlags(model, options, flags);
  MXMACA_RETURN_IF_ERROR(AddParallelFlags(parallel, flags));
  AddTrainerFlags(options, options_.num_threads, flags);
  MXMACA_RETURN_IF_ERROR(AddTokenizerFlags(model, options.tokenizer, flags));
  std::vector<std::string> args = flags.Take();
  args.insert(args.end(), options.extra_megatron_args.begin(), options.extra_megatron_args.end());
  MXMACA_ASSIGN_OR_RETURN(Job job, Job::FromMegatronArgs(std::move(args)));
  job.set_log_sink(options_.log_sink);
  return job;
}

}  // namespace mxmaca
