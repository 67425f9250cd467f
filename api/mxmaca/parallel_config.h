// mxmaca/parallel_config.h: how a model is laid out over ranks (public API).
//
// ParallelConfig holds the sizes of Megatron's parallel dimensions and the pipeline
// schedule. World size = tensor x context x data x pipeline; ranks are ordered
// tp-cp-ep-dp-pp as in Megatron-Core's RankGenerator (DESIGN.md, "Rank layout"). A rank
// is an actor's place in that grid, not necessarily a process. Each field names the
// Megatron flag it becomes (megatron/training/arguments.py, core_v0.15.0); whether a
// layout is accepted is decided by the runtime when the job runs (the same checks as
// `mxmaca train`: e.g. layers divisible by the pipeline size, global batch divisible by
// micro-batch x data).
#ifndef MXMACA_API_MXMACA_PARALLEL_CONFIG_H_
#define MXMACA_API_MXMACA_PARALLEL_CONFIG_H_

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
  // DP: data-parallel replicas. Megatron derives it as world / (TP x PP x CP); the job
  // passes the world size TP x CP x DP x PP to the runtime (MXMACA's --world-size flag,
  // in-process ranks). DP > 1 is an error when this build's flag table has no such flag.
  int64_t data = 1;
  int64_t context = 1;  // --context-parallel-size (CP)
  int64_t expert = 1;   // --expert-model-parallel-size (EP; MoE models only)
  bool sequence_parallel = false;  // --sequence-parallel (with TP > 1)
  // Pipeline schedule: "" = Megatron's (1F1B, interleaved 1F1B when virtual stages are
  // set); "1f1b" and "interleaved" name Megatron's explicitly (they must agree with the
  // virtual-stage fields). "gpipe" and "zb-h1" are MXMACA's schedules (scheduler/); they
  // need MXMACA's --pipeline-schedule flag, and are an error while the flag table lacks it.
  std::string schedule;
  // --use-distributed-optimizer: optimizer state (and the fp32 master weights) sharded
  // over the data-parallel ranks (ZeRO-1); bit-identical to the unsharded optimizer.
  bool distributed_optimizer = false;

  // WorldSize: tensor x context x data x pipeline (the number of ranks).
  int64_t WorldSize() const { return tensor * context * data * pipeline; }
};

}  // namespace mxmaca

#endif  // MXMACA_API_MXMACA_PARALLEL_CONFIG_H_
