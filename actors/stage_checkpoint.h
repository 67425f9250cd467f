// actors/stage_checkpoint.h: a stage's parameters and Adam state to and from a checkpoint
// of logical tensors (actors/checkpoint).
//
// Names: "model/<logical name>", "optimizer/exp_avg/<logical name>",
// "optimizer/exp_avg_sq/<logical name>", each with the tensor's full shape and the
// offsets of the shard this stage holds (ParameterInfo), so the same checkpoint loads on
// any layout that can name and slice the same logical tensors.
//
// Padded vocabulary (issue 22): a tensor whose rows are the vocabulary
// (ParameterSpec::vocab_rows = V: the word embeddings and the output layer, padded to
// V_pad by --make-vocab-size-divisible-by x TP) is stored as its logical rows [0, V)
// (full shape [V, h]; with save_padding_rows, --softmax-over-padded-vocab, all V_pad
// rows), parameters and Adam moments alike, the way Megatron's checkpoint converter
// keeps the true vocabulary size. Loading reads every row when the stored full shape is
// the model's (the same padded size, bit for bit, padding included: checkpoints written
// before this stored [V_pad, h]), else rows [0, V) of any stored tensor of >= V rows;
// the padding rows [V, V_pad) keep what the loading store holds — the (seed, name)
// initial values of a fresh run at this layout (layers/parameter_store.h) and Adam's
// zero moments. With the padded logits masked (the default) the padding rows get no
// gradient and never reach the loss, so re-padding changes no loss or gradient.
//
// Distributed optimizer (layers/grad_buckets.h): a DP rank's optimizer holds flat pieces
// of tensors (OptimizerTensor::flat_offset / numel), which cut rows. A piece is stored as
// the boxes of its flat range (actors/checkpoint/flat_range.h), each a separate view of
// the same logical name; the writer's Commit requires every logical tensor to be covered
// exactly once, so the pieces of all DP ranks together must be written (each rank its own
// writer name, only one of them with `parameters`). Loading reads each piece's boxes from
// whatever slices the checkpoint holds, so dp=N pieces load into whole-tensor optimizers,
// whole tensors into pieces, and dp=N into dp=M.
#ifndef MXMACA_ACTORS_STAGE_CHECKPOINT_H_
#define MXMACA_ACTORS_STAGE_CHECKPOINT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "layers/optimizer.h"
#include "layers/parameter_store.h"

namespace mxmaca::actors {

// StageShardOptions: what WriteStageShard writes. The default is every parameter and,
// with an optimizer, its whole state.
struct StageShardOptions {
  // parameters: write "model/<name>" for every parameter not skipped (false on DP ranks
  // other than the one that saves the replicated parameters).
  bool parameters = true;
  // optimizer_state: write exp_avg / exp_avg_sq of every optimizer entry (whole tensor or
  // piece) whose parameter is not skipped; ignored without an optimizer.
  bool optimizer_state = true;
  // skip_parameter: when set and true for a parameter, nothing of it is written (neither
  // model nor optimizer entries), e.g. the last stage's tied copy of the word embeddings,
  // which the first stage saves.
  std::function<bool(const layers::ParameterInfo&)> skip_parameter;
};

// WriteStageShard: writes shard "<writer_name>" with, per parameter in registration order,
// "model/<name>" and (when `optimizer` is non-null) the exp_avg / exp_avg_sq of each of
// its optimizer entries, as `options` selects. Optimizer entries are matched to parameters
// by name; an entry covering the whole held shard (flat_offset 0, numel = the shard's) is
// one view at the shard's offsets, a piece is one view per box of its flat range.
// Errors: InvalidArgument for an optimizer entry whose name is not a parameter of
// `params` or whose [flat_offset, flat_offset + numel) is outside the tensor; the
// writer's otherwise.
absl::Status WriteStageShard(checkpoint::CheckpointWriter& writer, const std::string& writer_name,
                             const layers::ParameterStore& params,
                             layers::AdamWOptimizer* optimizer,
                             const StageShardOptions& options = {});

// LoadStageParameters: fills every parameter's shard from the checkpoint (vocab-padded
// tensors re-padded, above). Errors: NotFound naming a tensor the checkpoint lacks;
// InvalidArgument when its full shape differs from the model's ("checkpoint has X [a, b],
// model expects [c, d]"), for a vocab-padded tensor when it has fewer than V rows or
// other columns.
absl::Status LoadStageParameters(const checkpoint::CheckpointReader& reader,
                                 layers::ParameterStore& params);

// LoadPersistentBuffers: fills each buffer (logical name, values sized to the tensor) from
// the checkpoint's "buffers/<name>" (Megatron's persistent buffers, e.g. the MoE routers'
// expert_bias; replicated, saved once). A buffer the checkpoint lacks is NotFound naming it
// when `required` (inference needs every buffer), else left as it is and its checkpoint
// name appended to `missing` (training warns and starts it from its initial value). Errors
// of ReadShard (a shape that differs).
absl::Status LoadPersistentBuffers(
    const checkpoint::CheckpointReader& reader,
    const std::vector<std::pair<std::string, std::vector<float>*>>& buffers, bool required,
    std::vector<std::string>* missing = nullptr);

// LoadOptimizerState: fills exp_avg / exp_avg_sq of every optimizer entry (whole tensor
// or piece, matched to its parameter by name) from the checkpoint, whichever layout of
// slices wrote them. Errors: as LoadStageParameters, and InvalidArgument for an entry
// whose name is not a parameter of `params` or whose flat range is outside the tensor.
absl::Status LoadOptimizerState(const checkpoint::CheckpointReader& reader,
                                layers::AdamWOptimizer& optimizer,
                                const layers::ParameterStore& params);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STAGE_CHECKPOINT_H_
