// api/train/stage_ranks.h: the model state of every in-process rank of a PP x DP job.
//
// For each global rank (Megatron's tp-cp-ep-dp-pp order: rank =
// ((pipeline_rank * dp + data_parallel_rank) * cp + context_parallel_rank) * tp +
// tensor_parallel_rank) the GptStage of
// every model chunk the placement gives its pipeline rank — holding this TP rank's shards
// (layers/tensor_parallel.h), initialised from (seed, parameter name) so every layout
// starts from the same weights — the chunk's data-parallel gradient buckets
// (layers/grad_buckets.h) and its AdamW optimizer — over whole tensors, or over this
// rank's pieces with the distributed optimizer. With context parallelism (CP > 1) the
// stage holds CP rank c's sequence shard (layers/context_parallel/cp_context.h) and the
// gradient buckets and optimizer shards are cut over the data-parallel x
// context-parallel group (dp x CP ranks, index data_parallel_rank * CP + c), over which
// the runtime reduces the gradients (Megatron's dp-cp group).
#ifndef MXMACA_API_TRAIN_STAGE_RANKS_H_
#define MXMACA_API_TRAIN_STAGE_RANKS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/gpt_stage_program.h"
#include "actors/stage_program.h"
#include "api/train/device_setup.h"
#include "layers/gpt_config.h"
#include "layers/grad_buckets.h"
#include "layers/optimizer.h"
#include "layers/pipeline_placement.h"
#include "transport/communicator.h"
#include "transport/inprocess_communicator.h"

namespace mxmaca::api {

// StageRank: one rank's program (chunks), optimizers and buckets (one per chunk).
struct StageRank {
  int32_t rank = 0;
  int32_t pipeline_rank = 0;
  int32_t data_parallel_rank = 0;
  int32_t tensor_parallel_rank = 0;
  int32_t context_parallel_rank = 0;
  // GptStageProgram (on the CPU backend, or with --device cuda / device-on-cpu on the
  // rank's own device).
  std::shared_ptr<actors::StageProgram> program;
  std::vector<std::shared_ptr<layers::AdamWOptimizer>> optimizers;
  std::vector<layers::DataParallelBuckets> buckets;
  int64_t num_parameters = 0;  // over the rank's chunks
};

// StageRankOptions: how to build the ranks.
struct StageRankOptions {
  int32_t data_parallel_size = 1;
  int32_t tensor_parallel_size = 1;
  int32_t context_parallel_size = 1;  // --context-parallel-size
  bool sequence_parallel = false;
  // hub: the in-process communicator the TP and CP collectives of the layers use
  // (required when tensor_parallel_size or context_parallel_size > 1; the same hub must be
  // given to RunPipelineJob).
  transport::InProcessHub* hub = nullptr;
  // Multi-process jobs: build only rank `only_rank` (its parameters are initialised exactly
  // as in the one-process job), whose TP collectives go over `communicator` (UCX) instead
  // of `hub`. Both unset: every rank, over `hub`.
  int32_t only_rank = -1;
  transport::Communicator* communicator = nullptr;
  bool distributed_optimizer = false;
  // Elements per gradient bucket (--ddp-bucket-size); <= 0: Megatron's default
  // max(40,000,000, 1,000,000 x dp).
  int64_t bucket_elements = 0;
  layers::AdamWOptions adam;
  bool reset_attention_mask = false;
  // ranks_per_node: the hierarchical MoE dispatcher's node size (processes per node in a
  // multi-process job; 1 in one process).
  int ranks_per_node = 1;
  // --memory-cap-per-shard in bytes (0: none): GptStage::SetMemoryCap of every stage,
  // naming the rank and its grid coordinates.
  int64_t memory_cap_bytes = 0;
  // --device (api/train/device_setup.h): the device backends build each rank's chunks as
  // GptStages on a DeviceKernels of its own (GPU `gpu`; GptStage::CreateOnDevice), with `num_microbatches`
  // per iteration (when its gradients are final) and micro_batch_size (slot size).
  Device device = Device::kCpu;
  int gpu = 0;
  int64_t num_microbatches = 1;
  int64_t micro_batch_size = 1;
  // --no-gradient-accumulation-fusion clears it (Megatron's default is fused);
  // fused_attention: the fused kernel where the device has one for the model's head dim
  // (otherwise the materialised [b, np, s, s] path).
  bool gradient_accumulation_fusion = true;
  bool fused_attention = true;
  // CUDA graphs (device_setup.h CudaGraphConfigFor): with --device cuda and mode local each
  // rank's actor owns a graph cache and its graph-safe chunks run through it.
  kernels::CudaGraphConfig cuda_graphs;
  // state_on_device: on the device backends, keep each rank's parameters, gradients and
  // AdamW moments on the device between iterations (actors::GptStageProgram
  // set_state_on_backend) where the step needs no host-side optimizer state: no
  // distributed optimizer, no MoE, and not both ends of a tied embedding on this rank's
  // chunks (ZB-V; summed on the host arenas). The tied embedding's sum across stages copies
  // that one gradient to the host and back; with a gradient group (DP x CP) > 1 the bucket
  // reduction runs on host copies of all gradients (down after the chunk's backward, the
  // sums up before the grad norm; the weights and moments stay on the device). Other ranks
  // keep the host optimizer. The caller clears it for --optimizer-cpu-offload and for the
  // features that read or write the host stores during training (post-validation,
  // rebalancing, --log-params-norm, --log-num-zeros-in-grad): api/train/train_command.cc.
  bool state_on_device = false;
};

// BuildStageRanks: placement.pipeline_model_parallel_size x data_parallel_size x
// context_parallel_size x tensor_parallel_size ranks, in rank order. Errors: the layers'
// (invalid config, layout, tensor-parallel split or context-parallel split, naming the
// field or flag).
absl::StatusOr<std::vector<StageRank>> BuildStageRanks(const layers::GptConfig& model,
                                                       const layers::PipelinePlacement& placement,
                                                       const StageRankOptions& options);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_STAGE_RANKS_H_
