// api/train/cp_setup.cc: see cp_setup.h.
#include "api/train/cp_setup.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::api {

absl::Status CheckContextParallelArgs(const MegatronArgs& a) {
  const int64_t cp = a.context_parallel_size;
  if (cp <= 1) return absl::OkStatus();
  const std::string flag = absl::StrCat("--context-parallel-size ", cp);
  const int64_t tp = a.tensor_model_parallel_size;
  const bool split_tp = a.sequence_parallel && tp > 1;
  const int64_t divisor = 2 * cp * (split_tp ? tp : 1);
  const int64_t seq = a.seq_length.value_or(0);
  if (seq <= 0 || seq % divisor != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--seq-length ", seq, " is not divisible by 2 x --context-parallel-size",
        split_tp ? " x --tensor-model-parallel-size" : "", " = 2 x ", cp,
        split_tp ? absl::StrCat(" x ", tp) : "", " = ", divisor,
        " (each context-parallel rank holds 2 chunks of every sequence",
        split_tp ? ", split again over TP by --sequence-parallel" : "", ")"));
  }
  if (a.attention_dropout > 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " needs --attention-dropout 0 (got ", a.attention_dropout,
        "; Megatron's default is 0.1): the ring attention has no dropout"));
  }
  if (a.dynamic_pipeline) {
    return absl::UnimplementedError(absl::StrCat(
        flag, " with --dynamic-pipeline: the CP ranks of a stage must run their ops in the "
              "same order (the attention ring pairs them); drop --dynamic-pipeline"));
  }
  if (a.rebalance_threshold || a.force_layer_move) {
    return absl::UnimplementedError(
        absl::StrCat(flag, " with --rebalance-threshold / --force-layer-move"));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::api
