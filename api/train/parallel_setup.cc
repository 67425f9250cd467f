// api/train/parallel_setup.cc: see parallel_setup.h.
#include "api/train/parallel_setup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "layers/stage_memory.h"
#include "layers/stage_memory_tp.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::api {

std::string ParallelSetup::Describe() const {
  std::string out = absl::StrFormat(
      " > parallel layout: tensor %d%s x%s pipeline %d x data parallel %d (ranks: "
      "%d), %d model chunk%s per pipeline rank, %d micro-batches per replica, schedule %s\n",
      tensor_parallel_size,
      sequence_parallel && tensor_parallel_size > 1 ? " (sequence parallel)" : "",
      context_parallel_size > 1 ? absl::StrCat(" context ", context_parallel_size, " x") : "",
      pipeline_size, data_parallel_size,
      tensor_parallel_size * context_parallel_size * pipeline_size * data_parallel_size,
      virtual_size, virtual_size == 1 ? "" : "s", num_microbatches, train_schedule.name);
  absl::StrAppend(&out, " > pipeline placement (--pipeline-model-parallel-layout \"",
                  placement.ToLayoutString(), "\"):\n", placement.Describe());
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

absl::StatusOr<ParallelSetup> BuildParallelSetup(const MegatronArgs& args,
                                                 const layers::GptConfig& model) {
  ParallelSetup setup;
  setup.pipeline_size = static_cast<int32_t>(args.pipeline_model_parallel_size);
  setup.data_parallel_size = static_cast<int32_t>(args.data_parallel_size);
  setup.tensor_parallel_size = static_cast<int32_t>(args.tensor_model_parallel_size);
  setup.context_parallel_size = static_cast<int32_t>(args.context_parallel_size);
  setup.sequence_parallel = args.sequence_parallel;
  const int64_t per_step = *args.micro_batch_size * args.data_parallel_size;
  if (*args.global_batch_size % per_step != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global-batch-size ", *args.global_batch_size,
        " is not divisible by --micro-batch-size ", *args.micro_batch_size,
        " x data-parallel size ", args.data_parallel_size));
  }
  setup.num_microbatches = static_cast<int32_t>(*args.global_batch_size / per_step);
  setup.eval_num_microbatches = static_cast<int32_t>(
      args.eval_global_batch_size.value_or(*args.global_batch_size) / per_step);

  layers::PipelinePlacementConfig pc;
  pc.num_layers = model.num_layers;
  pc.pipeline_model_parallel_size = args.pipeline_model_parallel_size;
  pc.num_layers_per_virtual_pipeline_stage = args.num_layers_per_virtual_pipeline_stage;
  pc.num_virtual_stages_per_pipeline_rank = args.num_virtual_stages_per_pipeline_rank;
  pc.decoder_first_pipeline_num_layers = args.decoder_first_pipeline_num_layers;
  pc.decoder_last_pipeline_num_layers = args.decoder_last_pipeline_num_layers;
  pc.account_for_embedding_in_pipeline_split = args.account_for_embedding_in_pipeline_split;
  pc.account_for_loss_in_pipeline_split = args.account_for_loss_in_pipeline_split;
  pc.pipeline_model_parallel_layout = args.pipeline_model_parallel_layout;
  MXMACA_ASSIGN_OR_RETURN(setup.placement, layers::BuildPipelinePlacement(pc));
  setup.virtual_size = static_cast<int32_t>(setup.placement.virtual_pipeline_model_parallel_size);

  scheduler::ScheduleOptions so;
  if (args.pipeline_schedule) {
    MXMACA_ASSIGN_OR_RETURN(so.kind, scheduler::ParseScheduleKind(*args.pipeline_schedule));
  } else {
    so.kind = setup.virtual_size > 1 ? scheduler::ScheduleKind::kInterleaved1F1B
                                     : scheduler::ScheduleKind::kOneFOneB;
  }
  if (so.kind == scheduler::ScheduleKind::kZeroBubbleV) {
    // ZB-V places the two chunks in a V: the same layer split, another (rank, chunk) map.
    MXMACA_ASSIGN_OR_RETURN(setup.placement, layers::ToVShape(setup.placement));
  }
  so.num_stages = setup.pipeline_size;
  so.num_chunks = setup.virtual_size;
  so.num_microbatches = setup.num_microbatches;
  absl::StatusOr<scheduler::PipelineSchedule> train = scheduler::BuildSchedule(so);
  if (!train.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline schedule for --pipeline-model-parallel-size ", setup.pipeline_size, ", ",
        setup.virtual_size, " model chunk(s) per rank and ", setup.num_microbatches,
        " micro-batches per replica (global batch / (micro batch x data parallel)): ",
        train.status().message()));
  }
  setup.train_schedule = std::move(*train);
  so.forward_only = true;
  so.num_microbatches = setup.eval_num_microbatches;
  MXMACA_ASSIGN_OR_RETURN(setup.eval_schedule, scheduler::BuildSchedule(so));
  return setup;
}

std::vector<std::string> MemoryReport(const ParallelSetup& setup, const layers::GptConfig& model,
                                      const std::vector<StageRank>& ranks,
                                      const MegatronArgs& args) {
  std::vector<std::string> lines;
  const std::vector<int32_t> stashed = scheduler::PeakStashedMicrobatches(setup.train_schedule);
  lines.push_back(absl::StrCat(" > memory per rank at start-up (estimate; schedule ",
                               setup.train_schedule.name,
                               setup.tensor_parallel_size > 1 ? "; tensor-parallel rank 0" : "",
                               setup.context_parallel_size > 1
                                   ? "; context-parallel rank 0, s/CP tokens, attention as if "
                                     "unsharded (an overestimate)"
                                   : "",
                               "; stashes from F to B, one micro-batch's B transients not "
                               "counted):"));
  for (const StageRank& r : ranks) {
    if (r.data_parallel_rank != 0 || r.tensor_parallel_rank != 0 || r.context_parallel_rank != 0) {
      continue;
    }
    const auto& layouts = setup.placement.layouts[static_cast<size_t>(r.pipeline_rank)];
    int64_t stash = 0;
    for (const layers::StageLayout& l : layouts) {
      // CP: a rank holds s/CP tokens (its attention stash is then an overestimate: the
      // ring keeps a log-sum-exp per query, not [s/CP, s/CP] probabilities).
      layers::GptConfig local = model;
      local.seq_length = model.seq_length / std::max(1, setup.context_parallel_size);
      stash = std::max(stash, layers::StashBytesPerMicroBatchTp(
                                  local, l, *args.micro_batch_size, setup.tensor_parallel_size,
                                  setup.sequence_parallel, args.reset_attention_mask));
    }
    layers::StageMemoryEstimate e = layers::EstimateStageMemory(
        model, layouts.front(), r.num_parameters, *args.micro_batch_size, 0,
        setup.data_parallel_size, args.use_distributed_optimizer);
    e.stashed_microbatches = stashed[static_cast<size_t>(r.pipeline_rank)];
    e.activation_bytes = e.stashed_microbatches * stash;
    lines.push_back("   " + layers::FormatStageMemory(r.pipeline_rank,
                                                      static_cast<int>(layouts.size()), e));
  }
  return lines;
}

}  // namespace mxmaca::api
