// api/train/stage_ranks.cc: see stage_ranks.h.
#include "api/train/stage_ranks.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/gpt_stage_program.h"
#include "base/status_macros.h"
#include "layers/context_parallel/cp_context.h"
#include "layers/device/cuda_graph_runner.h"
#include "layers/gpt_stage.h"
#include "layers/tensor_parallel.h"
#include "transport/rank_grid.h"

namespace mxmaca::api {

namespace {

// ShardName: how a --memory-cap-per-shard error names the rank.
std::string ShardName(int32_t rank, int32_t pp, int32_t t, int32_t c, int32_t r) {
  return absl::StrCat("rank ", rank, " (pipeline stage ", pp, ", tensor rank ", t,
                      ", context rank ", c, ", data rank ", r, ")");
}

// BuildDeviceRank: a rank of the device backends (device_setup.h): the rank's own
// DeviceKernels (its CUDA stream), a GptStage per chunk built on it (CreateOnDevice) with
// host master weights initialised as on the CPU backend (same names, same seed), and the
// same buckets and AdamW over the host store as the CPU backend.
absl::Status BuildDeviceRank(const layers::GptConfig& model,
                             const std::vector<layers::StageLayout>& layouts,
                             const StageRankOptions& options, int64_t arena_multiple,
                             int64_t bucket_elements, int32_t grad_group, int32_t shard_rank,
                             const layers::TensorParallelContext* tp, const std::string& shard,
                             StageRank* sr) {
  MXMACA_ASSIGN_OR_RETURN(
      std::unique_ptr<layers::device::DeviceKernels> kernels,
      MakeDeviceKernels(options.device, options.gpu, model.num_threads, model.precision));
  layers::DeviceStageOptions device_options;
  device_options.micro_batch_size = options.micro_batch_size;
  device_options.arena_multiple = arena_multiple;
  device_options.gradient_accumulation_fusion = options.gradient_accumulation_fusion;
  device_options.fused_attention =
      options.fused_attention && kernels->has_fused_attention(model.head_dim());
  std::shared_ptr<layers::device::CudaGraphs> graphs;
  // CUDA graphs: not with TP, whose collectives pass through host memory with synchronous
  // copies inside the segments (TensorParallelContext::device).
  const bool tensor_parallel = tp != nullptr && tp->size > 1;
  if (options.device == Device::kCuda && !tensor_parallel &&
      options.cuda_graphs.mode != kernels::CudaGraphMode::kNone) {
    MXMACA_ASSIGN_OR_RETURN(graphs, layers::device::MakeCudaGraphs(options.cuda_graphs));
  }
  std::vector<std::unique_ptr<layers::GptStage>> chunks;
  for (const layers::StageLayout& layout : layouts) {
    MXMACA_ASSIGN_OR_RETURN(
        std::unique_ptr<layers::GptStage> stage,
        layers::GptStage::CreateOnDevice(model, layout, kernels.get(), device_options, tp));
    if (options.memory_cap_bytes > 0) stage->SetMemoryCap(options.memory_cap_bytes, shard);
    layers::ParameterStore& store = stage->parameters();
    sr->num_parameters += store.num_elements();
    MXMACA_ASSIGN_OR_RETURN(layers::DataParallelBuckets buckets,
                            layers::BuildDataParallelBuckets(store, grad_group, bucket_elements));
    std::vector<layers::OptimizerTensor> tensors =
        options.distributed_optimizer
            ? layers::DistributedOptimizerTensors(store, buckets, shard_rank)
            : store.OptimizerTensors();
    sr->optimizers.push_back(
        std::make_shared<layers::AdamWOptimizer>(options.adam, std::move(tensors)));
    sr->buckets.push_back(std::move(buckets));
    if (graphs) {
      MXMACA_ASSIGN_OR_RETURN(layers::device::SegmentRunner runner,
                              layers::device::MakeCudaGraphRunner(
                                  graphs, kernels.get(), static_cast<int>(chunks.size())));
      stage->set_segment_runner(std::move(runner));
    }
    chunks.push_back(std::move(stage));
  }
  auto program = std::make_shared<actors::GptStageProgram>(std::move(kernels), std::move(chunks),
                                                           options.num_microbatches,
                                                           options.reset_attention_mask);
  program->set_cuda_graphs(std::move(graphs));
  bool state_on_device = options.state_on_device && !options.distributed_optimizer && !model.moe;
  // The tied embedding's sum across stages runs on a host copy of that gradient; both
  // ends on this rank's chunks (ZB-V) are summed on the host arenas: not on the device.
  int tied_chunks = 0;
  for (int c = 0; c < program->num_chunks(); ++c) {
    if (program->tied_embedding_parameter(c) >= 0) ++tied_chunks;
  }
  if (tied_chunks > 1) state_on_device = false;
  program->set_state_on_backend(state_on_device);
  sr->program = std::move(program);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<StageRank>> BuildStageRanks(const layers::GptConfig& model,
                                                       const layers::PipelinePlacement& placement,
                                                       const StageRankOptions& options) {
  const int32_t p = static_cast<int32_t>(placement.pipeline_model_parallel_size);
  const int32_t dp = options.data_parallel_size, tp = options.tensor_parallel_size,
                cp = options.context_parallel_size;
  if (dp < 1 || tp < 1 || cp < 1) {
    return absl::InvalidArgumentError("data, context and tensor parallel sizes must be >= 1");
  }
  if ((tp > 1 || cp > 1) && options.hub == nullptr && options.communicator == nullptr) {
    return absl::InvalidArgumentError("tensor or context parallelism needs an in-process hub");
  }
  const int32_t world = p * dp * cp * tp;
  if ((options.only_rank >= 0) != (options.communicator != nullptr) ||
      options.only_rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BuildStageRanks: only_rank ", options.only_rank, " of ", world,
        " ranks needs a communicator (and a communicator needs only_rank)"));
  }
  // Expert parallelism (MoE, --expert-model-parallel-size > 1): the expert grid with
  // ETP = 1 (transport/rank_grid.h); api/train/moe_setup.cc admits EP = TP only.
  const int ep = model.moe ? static_cast<int>(model.moe->expert_model_parallel_size) : 1;
  // --moe-router-enable-expert-bias: the counts are summed over each stage's TP x CP x DP
  // ranks (Megatron: get_tensor_and_data_parallel_group(with_context_parallel=True)).
  const bool expert_bias_reduce =
      model.moe && model.moe->router.enable_expert_bias && tp * dp * cp > 1;
  std::optional<transport::RankGrid> grid;
  if (tp > 1 || cp > 1 || ep > 1 || expert_bias_reduce) {
    MXMACA_ASSIGN_OR_RETURN(grid, transport::RankGrid::Create(world, tp, p, cp, ep,
                                                              /*etp=*/ep > 1 ? 1 : 0));
  }
  if ((ep > 1 || expert_bias_reduce) && options.hub == nullptr &&
      options.communicator == nullptr) {
    return absl::InvalidArgumentError("expert parallelism / expert bias need an in-process hub");
  }
  // Gradients are reduced (and the distributed optimizer sharded) over dp x CP ranks.
  const int32_t grad_group = dp * cp;
  // megatron/core/distributed/distributed_data_parallel_config.py: bucket_size default
  // max(40000000, 1000000 * data_parallel_size) elements.
  const int64_t bucket_elements = options.bucket_elements > 0
                                      ? options.bucket_elements
                                      : std::max<int64_t>(40000000, 1000000LL * grad_group);
  std::vector<StageRank> ranks;
  for (int32_t rank = 0; rank < world; ++rank) {
    if (options.only_rank >= 0 && rank != options.only_rank) continue;
    const int32_t pp = rank / (dp * cp * tp), r = (rank / (cp * tp)) % dp,
                  c = (rank / tp) % cp, t = rank % tp;
    StageRank sr;
    sr.rank = rank;
    sr.pipeline_rank = pp;
    sr.data_parallel_rank = r;
    sr.tensor_parallel_rank = t;
    sr.context_parallel_rank = c;
    std::optional<layers::TensorParallelContext> tp_context;
    std::optional<layers::cp::ContextParallelContext> cp_context;
    std::optional<layers::ExpertParallelContext> ep_context;
    std::optional<layers::TensorParallelContext> bias_group;  // TP x DP (expert bias counts)
    if (grid) {
      MXMACA_ASSIGN_OR_RETURN(transport::RankView view, grid->ForRank(sr.rank));
      transport::Communicator* comm =
          options.communicator ? options.communicator : options.hub->ForRank(sr.rank);
      if (tp > 1) {
        tp_context = layers::TensorParallelContextFor(view, comm, options.sequence_parallel);
      }
      if (cp > 1) cp_context = layers::cp::ContextParallelContextFor(view, comm);
      if (ep > 1) {
        ep_context = layers::ExpertParallelContext{comm, view.expert_model_parallel_group(),
                                                   std::max(1, options.ranks_per_node)};
        if (cp > 1) {
          ep_context->tensor_and_context_parallel_group = view.tensor_and_context_parallel_group();
        }
        if (ep > tp) {  // the EP group reaches across DP ranks: experts reduce over EDP
          ep_context->expert_data_parallel_group = view.expert_data_parallel_group();
        }
      }
      if (expert_bias_reduce) {
        bias_group = layers::GroupContext(
            comm, view.tensor_and_data_parallel_group(/*with_context_parallel=*/true));
      }
    }
    if (options.device != Device::kCpu) {
      MXMACA_RETURN_IF_ERROR(BuildDeviceRank(
          model, placement.layouts[pp], options, 16LL * grad_group, bucket_elements, grad_group,
          r * cp + c, tp_context ? &*tp_context : nullptr, ShardName(rank, pp, t, c, r), &sr));
      ranks.push_back(std::move(sr));
      continue;
    }
    std::vector<std::unique_ptr<layers::GptStage>> chunks;
    for (const layers::StageLayout& layout : placement.layouts[pp]) {
      MXMACA_ASSIGN_OR_RETURN(
          std::unique_ptr<layers::GptStage> stage,
          layers::GptStage::Create(model, layout, 16LL * grad_group,
                                   tp_context ? &*tp_context : nullptr,
                                   ep_context ? &*ep_context : nullptr,
                                   cp_context ? &*cp_context : nullptr));
      stage->InitializeParameters();
      if (options.memory_cap_bytes > 0) {
        stage->SetMemoryCap(options.memory_cap_bytes, ShardName(rank, pp, t, c, r));
      }
      layers::ParameterStore& store = stage->parameters();
      sr.num_parameters += store.num_elements();
      // The buckets end where a stage's expert region starts (EP across DP ranks: the
      // experts are reduced over the expert-data-parallel group instead).
      MXMACA_ASSIGN_OR_RETURN(
          layers::DataParallelBuckets buckets,
          layers::BuildDataParallelBuckets(store, grad_group, bucket_elements,
                                           stage->has_expert_region()
                                               ? stage->expert_region_begin()
                                               : -1));
      std::vector<layers::OptimizerTensor> tensors =
          options.distributed_optimizer
              ? layers::DistributedOptimizerTensors(store, buckets, r * cp + c)
              : store.OptimizerTensors();
      sr.optimizers.push_back(
          std::make_shared<layers::AdamWOptimizer>(options.adam, std::move(tensors)));
      sr.buckets.push_back(std::move(buckets));
      chunks.push_back(std::move(stage));
    }
    auto program = std::make_shared<actors::GptStageProgram>(std::move(chunks),
                                                             options.reset_attention_mask);
    if (bias_group) {
      const layers::TensorParallelContext g = *bias_group;
      program->SetExpertBiasReduction(
          [g](float* data, int64_t n) { return layers::AllReduceSum(g, data, n); });
    }
    sr.program = std::move(program);
    ranks.push_back(std::move(sr));
  }
  return ranks;
}

}  // namespace mxmaca::api
