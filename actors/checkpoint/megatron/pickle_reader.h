// actors/checkpoint/megatron/pickle_reader.h: a restricted unpickler for the data.pkl of
// a torch.save archive holding a Megatron checkpoint. It interprets pickle opcodes of
// protocols 2-4 (Python's Lib/pickletools.py documents each) into a PyValue tree and
// never runs code from the file: a GLOBAL / STACK_GLOBAL naming anything outside the
// allow-list below is an error naming the class, and every allowed callable is rebuilt
// here by its known meaning, not called.
//
// Allowed (what torch.save of Megatron's state dict contains; docs/CHECKPOINTS.md):
//   collections.OrderedDict                  -> dict
//   torch._utils._rebuild_tensor_v2 / _rebuild_parameter -> TorchTensor
//   torch.{Float,Double,Half,BFloat16,Long,Int,Short,Char,Byte,Bool}Storage
//                                            (persistent ids ('storage', type, key,
//                                             location, numel) -> TorchStorage)
//   torch.Size                               -> tuple
//   torch.<dtype> (float32, bfloat16, float16, float64, int64, int32, int16, int8,
//                  uint8, bool and their aliases float, half, double, long, int)
//                                            -> global (args.params_dtype & co.)
//   argparse.Namespace, types.SimpleNamespace -> object with an attribute dict ('args')
//   builtins.set / frozenset                 -> set
//   builtins.getattr(<allowed enum class>, name) -> the enum member (see below)
//   _codecs.encode(str, 'latin1')            -> bytes (protocol 2's bytes)
//   copyreg._reconstructor(cls, object, None) for an allowed class
//   numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype (and numpy._core.*)
//                                            -> object (rng_state's np_rng_state)
//   _io.BytesIO                              -> object (Transformer Engine _extra_state)
//   Megatron's enums, as object(cls, [value]) (REDUCE(cls, (value,))) or object(cls) with
//     s = the member's name (getattr(cls, name), Python >= 3.11): megatron.core.enums.ModelType;
//     megatron.core.transformer.enums.{AttnBackend, AttnMaskType, AttnType, LayerType,
//     CudaGraphModule, CudaGraphScope, InferenceCudaGraphScope};
//     megatron.core.rerun_state_machine.{RerunMode, RerunState, RerunDiagnostic,
//     RerunValidationStatus}
// Safety limits: values nest at most 256 deep; a container can be changed only while no
// other value holds it (so no cycles can be built); lengths are checked against the
// remaining input.
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_READER_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "actors/checkpoint/megatron/pickle_value.h"

namespace mxmaca::actors::checkpoint::megatron {

// Unpickle: the value `data` (a whole pickle ending in STOP) holds. `what` names the
// file (and entry) in messages. Errors: DataLoss "<what>: <problem> at byte N" for a
// malformed or truncated pickle, an unknown opcode, a bad persistent id or tensor
// arguments; InvalidArgument "<what>: class <module.name> is not allowed ..." for a
// global outside the allow-list.
absl::StatusOr<PyRef> Unpickle(absl::string_view data, const std::string& what);

// IsAllowedGlobal: whether `module`.`name` is on the allow-list above.
bool IsAllowedGlobal(absl::string_view module, absl::string_view name);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_READER_H_
