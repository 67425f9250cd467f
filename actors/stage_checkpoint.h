// actors/stage_checkpoint.h: a stage's parameters and Adam state to and from a checkpoint
// of logical tensors (actors/checkpoint).
//
// Names: "model/<logical name>", "optimizer/exp_avg/<logical name>",
// "optimizer/exp_avg_sq/<logical name>", each with the tensor's full shape and the
// offsets of the shard this stage holds (ParameterInfo), so the same checkpoint loads on
// any layout that can name and slice the same logical tensors.
#ifndef MXMACA_ACTORS_STAGE_CHECKPOINT_H_
#define MXMACA_ACTORS_STAGE_CHECKPOINT_H_

#include <string>

#include "absl/status/status.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "layers/optimizer.h"
#include "layers/parameter_store.h"

namespace mxmaca::actors {

// WriteStageShard: writes shard "<writer_name>" with every parameter (and, when
// `optimizer` is non-null, its exp_avg / exp_avg_sq). Errors: the writer's.
absl::Status WriteStageShard(checkpoint::CheckpointWriter& writer, const std::string& writer_name,
                             const layers::ParameterStore& params,
                             layers::AdamWOptimizer* optimizer);

// LoadStageParameters: fills every parameter's shard from the checkpoint. Errors:
// NotFound naming a tensor the checkpoint lacks; InvalidArgument when its full shape
// differs from the model's ("checkpoint has X [a, b], model expects [c, d]").
absl::Status LoadStageParameters(const checkpoint::CheckpointReader& reader,
                                 layers::ParameterStore& params);

// LoadOptimizerState: fills exp_avg / exp_avg_sq of every tensor (same errors).
absl::Status LoadOptimizerState(const checkpoint::CheckpointReader& reader,
                                layers::AdamWOptimizer& optimizer,
                                const layers::ParameterStore& params);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STAGE_CHECKPOINT_H_
