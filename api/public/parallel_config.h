// mxmaca/parallel_config.h (api/public/): how a model is laid out over ranks (public API).
//
// ParallelConfig holds the sizes of Megatron's parallel dimensions and the pipeline
// schedule. World size = tensor x context x data x pipeline; ranks are ordered
// tp-cp-ep-dp-pp as in Megatron-Core's RankGenerator (docs/ARCHITECTURE.md, "Rank layout"). A rank
// is an actor's place in that grid, not necessarily a process. Each field names the
// Megatron flag it becomes (megatron/training/arguments.py, core_v0.19.0); whether a
// layout is accepted is decided by the runtime when the job runs (the same checks as
// `mxmaca train`: e.g. layers divisible by the pipeline size, global batch divisible by
// micro-batch x data).
#ifndef MXMACA_API_PUBLIC_PARALLEL_CONFIG_H_
#define MXMACA_API_PUBLIC_PARALLEL_CONFIG_H_

#include <cstdint>
#include <string>

namespace mxmaca {

// ParallelConfig: all sizes >= 1 (0 only where a field says so).
struct ParallelConfig {
  int64_t tensor = 1;    // --tensor-model-parallel-size (TP)
  int64_t pipeline = 1;  // --pipeline-model-parallel-size (PP)
  // Interleaved (virtual) pipeline: at most one of the two, 0 = not interleaved.
  // --num-layers-per-virtual-pipeline-stage: transformer layers per model chunk.
  int64_t layers_per_virtual_stage = 0;
  // --num-virtual-stages-per-pipeline-rank: model chunks per pipeline rank.
  int64_t virtual_stages_per_rank = 0;
  // DP: data-parallel replicas. Megatron derives DP as world / (TP x PP x CP); the job
  // passes the world size TP x CP x DP x PP as MXMACA's --world-size (in-process ranks)
  // when DP > 1.
  int64_t data = 1;
  int64_t context = 1;             // --context-parallel-size (CP)
  int64_t expert = 1;              // --expert-model-parallel-size (EP; MoE models only)
  bool sequence_parallel = false;  // --sequence-parallel (with TP > 1)
  // --pipeline-schedule (MXMACA's flag; scheduler/schedule_factory.h): "" = Megatron's
  // choice (interleaved 1F1B with virtual stages, else 1F1B); "1f1b"; "interleaved" (or
  // "interleaved-1f1b", needs virtual stages); "gpipe"; "zb-h1" (zero bubble H1). Any
  // other name is InvalidArgument at CreateJob; a schedule that does not fit the layout
  // is an error from Job::Run.
  std::string schedule;
  // --use-distributed-optimizer: optimizer state (and the fp32 master weights) sharded
  // over the data-parallel ranks (ZeRO-1); bit-identical to the unsharded optimizer.
  bool distributed_optimizer = false;
  // --ddp-bucket-size: elements per data-parallel gradient bucket; 0 = Megatron's default
  // (max(40M, 1M x DP)).
  int64_t ddp_bucket_size = 0;

  // WorldSize: tensor x context x data x pipeline (the number of ranks).
  int64_t WorldSize() const { return tensor * context * data * pipeline; }
};

}  // namespace mxmaca

#endif  // MXMACA_API_PUBLIC_PARALLEL_CONFIG_H_
