// api/train/synthetic_train.cc: see synthetic_train.h.
#include "api/train/synthetic_train.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/train/metrics_setup.h"
#include "api/train/train_setup.h"
#include "base/status_macros.h"
#include "layers/lr_schedule.h"
#include "scheduler/schedule_factory.h"
#include "transport/ucx/launch_env.h"

namespace mxmaca::api {
namespace {

// Dests that change a synthetic run (see the file comment of synthetic_train.h).
constexpr std::string_view kSyntheticEffective[] = {
    "synthetic_op_ms", "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "world_size", "num_layers",
    "num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
    "pipeline_schedule", "dynamic_pipeline", "max_stashed_microbatches",
    "optimizer_post_validation", "inject_stage_slowdown", "pipeline_channel_slots",
    "micro_batch_size", "global_batch_size", "train_iters", "train_samples", "log_interval",
    "trace_file", "use_distributed_optimizer", "overlap_grad_reduce", "clip_grad", "lr",
    "min_lr", "lr_decay_style", "lr_decay_iters", "lr_decay_samples", "lr_warmup_fraction",
    "lr_warmup_iters", "lr_warmup_samples", "lr_warmup_init", "weight_decay",
    "start_weight_decay", "end_weight_decay", "weight_decay_incr_style", "seq_length",
    "hidden_size", "help",
    // --tensorboard-dir / --metrics-jsonl (api/train/metrics_setup.h): the synthetic run's
    // log-line numbers (its loss is synthetic; its timings and bubble are the point).
    "tensorboard_dir", "tensorboard_log_interval", "tensorboard_queue_size",
    "log_timers_to_tensorboard", "log_loss_scale_to_tensorboard", "log_memory_to_tensorboard",
    "log_world_size_to_tensorboard", "log_throughput", "log_learning_rate_to_tensorboard",
    "metrics_jsonl"};

// Dests a synthetic run cannot honour: checkpoints, exits, layer moves and MoE need a real
// model; uneven or explicit layouts change layers per chunk, which per-chunk op times
// ignore (--inject-stage-slowdown makes a stage slower).
constexpr std::string_view kSyntheticRejected[] = {
    "save", "load", "finetune", "exit_interval", "exit_duration_in_mins", "exit_signal_handler",
    "rebalance_threshold", "force_layer_move", "num_experts",
    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout", "ckpt_step", "use_checkpoint_args",
    "non_persistent_save_interval"};

std::string FlagName(std::string dest) {
  std::replace(dest.begin(), dest.end(), '_', '-');
  return "--" + dest;
}

template <size_t N>
bool Contains(const std::string_view (&list)[N], const std::string& dest) {
  return std::find(std::begin(list), std::end(list), dest) != std::end(list);
}

// SortFlags: the changed flags the synthetic backend rejects (an error) and those it
// accepts without effect (a notice).
void SortFlags(const MegatronArgs& args, std::vector<std::string>* rejected,
               std::vector<std::string>* inert) {
  for (const std::string& dest : ChangedArgs(args)) {
    if (Contains(kSyntheticRejected, dest)) {
      rejected->push_back(FlagName(dest));
    } else if (!Contains(kSyntheticEffective, dest)) {
      inert->push_back(FlagName(dest));
    }
  }
}

// FillModelPlaceholders: values for the model flags Megatron's checks require, where not
// given: heads = tp, hidden = 16 x heads, seq = 8 x tp, max positions = seq, layers =
// pp x v (one per virtual stage); a NullTokenizer of 1024 ids when no tokenizer is named
// and no GPT-2 files are given; --lr 1e-4. Only the declared activation shape and the
// log's learning rate see them.
absl::Status FillModelPlaceholders(MegatronArgs* a) {
  const int64_t tp = std::max<int64_t>(1, a->tensor_model_parallel_size);
  if (!a->num_attention_heads) a->num_attention_heads = tp;
  if (!a->hidden_size) a->hidden_size = 16 * *a->num_attention_heads;
  if (!a->seq_length) a->seq_length = 8 * tp;
  if (!a->max_position_embeddings) a->max_position_embeddings = a->seq_length;
  if (!a->num_layers) {
    if (a->num_layers_per_virtual_pipeline_stage) {
      return absl::InvalidArgumentError(
          "--synthetic-op-ms with --num-layers-per-virtual-pipeline-stage needs --num-layers "
          "(or give --num-virtual-stages-per-pipeline-rank)");
    }
    a->num_layers = a->pipeline_model_parallel_size *
                    std::max<int64_t>(1, a->num_virtual_stages_per_pipeline_rank.value_or(1));
  }
  if (!a->tokenizer_type && !a->vocab_file && !a->merge_file) {
    a->tokenizer_type = "NullTokenizer";
    if (!a->vocab_size) a->vocab_size = 1024;
  }
  if (!a->lr) a->lr = 1.0e-4;
  return absl::OkStatus();
}

// PositiveInt32: a flag value that must be in [1, 2^31).
absl::StatusOr<int32_t> PositiveInt32(const char* flag, int64_t value) {
  if (value < 1 || value > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", value, ": expected >= 1"));
  }
  return static_cast<int32_t>(value);
}

}  // namespace

absl::StatusOr<SyntheticOpTimes> ParseSyntheticOpMs(const std::string& value) {
  const auto bad = [&value](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--synthetic-op-ms '", value, "': ", why,
        "; expected F,B,W or F,B,W,OPT: milliseconds per forward, input-gradient and "
        "weight-gradient op (per micro-batch and model chunk) and per optimizer step, each a "
        "finite number >= 0"));
  };
  const std::vector<std::string> parts = absl::StrSplit(value, ',');
  if (parts.size() != 3 && parts.size() != 4) {
    return bad(absl::StrCat(parts.size(), " value", parts.size() == 1 ? "" : "s",
                            " given, 3 or 4 expected"));
  }
  double ms[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part(absl::StripAsciiWhitespace(parts[i]));
    if (!absl::SimpleAtod(part, &ms[i]) || !std::isfinite(ms[i]) || ms[i] < 0) {
      static constexpr const char* kNames[] = {"F", "B", "W", "OPT"};
      return bad(absl::StrCat(kNames[i], " = '", part, "' is not a finite number >= 0"));
    }
  }
  if (ms[0] + ms[1] + ms[2] <= 0) return bad("F + B + W must be > 0");
  SyntheticOpTimes t;
  t.op = actors::SyntheticOpSeconds{ms[0] * 1e-3, ms[1] * 1e-3, ms[2] * 1e-3};
  t.optimizer_seconds = ms[3] * 1e-3;
  return t;
}

absl::StatusOr<actors::TrainingSummary> TrainSynthetic(
    MegatronArgs args, const std::function<void(const std::string&)>& print,
    std::function<void(const actors::IterationLogRecord&)> on_iteration) {
  if (!args.synthetic_op_ms) {
    return absl::InvalidArgumentError("TrainSynthetic needs --synthetic-op-ms");
  }
  MXMACA_ASSIGN_OR_RETURN(const SyntheticOpTimes times, ParseSyntheticOpMs(*args.synthetic_op_ms));
  std::vector<std::string> rejected, inert;
  SortFlags(args, &rejected, &inert);
  if (!rejected.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        absl::StrJoin(rejected, ", "),
        " cannot be honoured with --synthetic-op-ms (the synthetic backend has no model "
        "layers, checkpoints or experts); remove ", rejected.size() == 1 ? "it" : "them"));
  }
  MXMACA_ASSIGN_OR_RETURN(const transport::ucx::LaunchEnv launch,
                          transport::ucx::DetectLaunchEnv());
  if (launch.world_size > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "--synthetic-op-ms runs every rank in this process, but this process was launched as "
        "one of ", launch.world_size, " (", launch.ToString(),
        "); run it without a launcher and give --world-size N"));
  }
  const int64_t world_size = args.world_size_flag.value_or(
      args.tensor_model_parallel_size * args.pipeline_model_parallel_size *
      args.context_parallel_size);
  if (world_size < 1 || world_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world-size ", world_size, ": expected 1 ... 4096 in-process ranks"));
  }
  MXMACA_RETURN_IF_ERROR(FillModelPlaceholders(&args));
  MXMACA_RETURN_IF_ERROR(ValidateAndDeriveArgs(&args, static_cast<int>(world_size)));
  if (args.context_parallel_size != 1 || args.expert_model_parallel_size != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "--synthetic-op-ms runs tensor, pipeline and data parallelism only; got "
        "--context-parallel-size ", args.context_parallel_size,
        " and --expert-model-parallel-size ", args.expert_model_parallel_size));
  }
  for (const std::string& n : args.notices) print(n);
  if (!inert.empty()) {
    print(absl::StrCat(" notice: ", absl::StrJoin(inert, ", "),
                       " accepted and without effect on the synthetic backend (no model, "
                       "tokenizer or data)"));
  }

  actors::SyntheticJobOptions o;
  o.pipeline_size = static_cast<int32_t>(args.pipeline_model_parallel_size);
  o.data_parallel_size = static_cast<int32_t>(args.data_parallel_size);
  o.tensor_parallel_size = static_cast<int32_t>(args.tensor_model_parallel_size);
  o.num_chunks = static_cast<int32_t>(args.virtual_pipeline_model_parallel_size.value_or(1));
  o.num_microbatches = static_cast<int32_t>(
      *args.global_batch_size / (*args.micro_batch_size * args.data_parallel_size));
  if (args.pipeline_schedule) {
    MXMACA_ASSIGN_OR_RETURN(o.schedule, scheduler::ParseScheduleKind(*args.pipeline_schedule));
  } else {  // Megatron's choice
    o.schedule = o.num_chunks > 1 ? scheduler::ScheduleKind::kInterleaved1F1B
                                  : scheduler::ScheduleKind::kOneFOneB;
  }
  // The schedule is built again by RunSyntheticJob; built here first so that a layout it
  // does not fit fails before any actor starts, with the sizes named.
  scheduler::ScheduleOptions so;
  so.kind = o.schedule;
  so.num_stages = o.pipeline_size;
  so.num_chunks = o.num_chunks;
  so.num_microbatches = o.num_microbatches;
  if (absl::StatusOr<scheduler::PipelineSchedule> s = scheduler::BuildSchedule(so); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline schedule ", scheduler::ScheduleKindName(o.schedule),
        " for --pipeline-model-parallel-size ", o.pipeline_size, ", ", o.num_chunks,
        " model chunk(s) per rank and ", o.num_microbatches,
        " micro-batches per replica (global batch / (micro batch x data parallel)): ",
        s.status().message()));
  }
  o.train_iters = TrainIters(args);
  o.uniform = times.op;
  o.optimizer_seconds = times.optimizer_seconds;
  o.micro_batch_size = *args.micro_batch_size;
  o.seq_length = *args.seq_length;
  o.hidden_size = *args.hidden_size;
  o.distributed_optimizer = args.use_distributed_optimizer;
  o.overlap_grad_reduce = args.overlap_grad_reduce;
  // One strand thread per rank: a sleeping op uses no CPU, and TP ranks of a stage sleep
  // side by side as their devices would compute.
  o.compute_threads = o.pipeline_size * o.data_parallel_size * o.tensor_parallel_size;
  if (args.pipeline_channel_slots) {
    MXMACA_ASSIGN_OR_RETURN(o.channel_slots, PositiveInt32("--pipeline-channel-slots",
                                                           *args.pipeline_channel_slots));
  }
  o.dynamic = args.dynamic_pipeline;
  if (args.max_stashed_microbatches) {
    MXMACA_ASSIGN_OR_RETURN(o.max_stashed_microbatches,
                            PositiveInt32("--max-stashed-microbatches",
                                          *args.max_stashed_microbatches));
  }
  o.optimizer_post_validation = args.optimizer_post_validation;
  if (args.inject_stage_slowdown) {
    MXMACA_RETURN_IF_ERROR(ParseStageSlowdown(*args.inject_stage_slowdown, o.pipeline_size,
                                              &o.slowdown_stage, &o.slowdown_factor,
                                              &o.slowdown_from_iteration));
  }
  o.trace_file = args.trace_file;
  o.print = print;
  o.log_interval = args.log_interval;
  o.on_iteration = std::move(on_iteration);
  MXMACA_ASSIGN_OR_RETURN(o.metrics, MetricsSinksFromArgs(args, world_size, 0, /*in_process=*/true,
                                                          /*start_iteration=*/0, print));
  o.clip_grad = args.clip_grad;
  MXMACA_ASSIGN_OR_RETURN(layers::OptimizerParamSchedulerConfig sched_config,
                          SchedulerConfigFromArgs(args));
  MXMACA_ASSIGN_OR_RETURN(o.scheduler, layers::OptimizerParamScheduler::Create(sched_config));

  print(absl::StrFormat(
      " > synthetic backend (--synthetic-op-ms %s): F %g ms, B %g ms, W %g ms per micro-batch "
      "and model chunk, optimizer step %g ms; no model, tokenizer or data",
      *args.synthetic_op_ms, times.op.forward * 1e3, times.op.backward_input * 1e3,
      times.op.backward_weight * 1e3, times.optimizer_seconds * 1e3));
  print(absl::StrFormat(
      " > parallel layout: tensor %d x pipeline %d x data parallel %d (ranks: %d), %d model "
      "chunk%s per pipeline rank, %d micro-batches per replica, schedule %s%s%s",
      o.tensor_parallel_size, o.pipeline_size, o.data_parallel_size, world_size, o.num_chunks,
      o.num_chunks == 1 ? "" : "s", o.num_microbatches, scheduler::ScheduleKindName(o.schedule),
      o.dynamic ? " with --dynamic-pipeline" : "",
      o.optimizer_post_validation ? " and --optimizer-post-validation" : ""));
  print(absl::StrFormat(
      "training ... (iterations 1 to %d, global batch %d = %d micro-batches of %d x %d "
      "data-parallel replicas)",
      o.train_iters, *args.global_batch_size, o.num_microbatches, o.micro_batch_size,
      o.data_parallel_size));
  MXMACA_ASSIGN_OR_RETURN(actors::TrainingSummary summary, actors::RunSyntheticJob(o));
  if (!summary.ok) return summary;
  if (summary.last_iteration > summary.first_iteration) {
    print(absl::StrFormat(
        "[after training is done] iterations %d..%d, skipped %d, mean %.0f tokens/s, peak "
        "activation memory %.1f MB",
        summary.first_iteration + 1, summary.last_iteration, summary.skipped_iterations,
        summary.mean_tokens_per_second, summary.peak_activation_bytes / 1048576.0));
  }
  if (!summary.stage_bubble_fraction.empty()) {
    std::string line = absl::StrFormat(" > bubble per stage over iterations %d..%d:",
                                       summary.first_iteration + 2, summary.last_iteration);
    double sum = 0;
    for (double b : summary.stage_bubble_fraction) {
      absl::StrAppendFormat(&line, " %.1f%%", 100.0 * b);
      sum += b;
    }
    absl::StrAppendFormat(&line, " | mean %.1f%%",
                          100.0 * sum / static_cast<double>(summary.stage_bubble_fraction.size()));
    print(line);
  }
  return summary;
}

}  // namespace mxmaca::api
