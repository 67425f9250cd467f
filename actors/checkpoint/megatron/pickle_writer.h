// actors/checkpoint/megatron/pickle_writer.h: writes a PyValue tree as a pickle of
// protocol 2, the protocol torch.save uses (torch/serialization.py,
// DEFAULT_PROTOCOL = 2), with the opcodes CPython's pickler emits for each kind
// (Lib/pickle.py): dicts as EMPTY_DICT + SETITEMS (OrderedDicts as
// REDUCE(collections.OrderedDict, ()) + SETITEMS), argparse.Namespace as NEWOBJ + BUILD,
// enums as REDUCE(cls, (value,)), bytes as _codecs.encode(latin-1 str, 'latin1'), tensors
// as REDUCE(torch._utils._rebuild_tensor_v2, (BINPERSID ('storage', torch.<T>Storage,
// key, 'cpu', numel), offset, size, stride, requires_grad, OrderedDict())).
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_WRITER_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_WRITER_H_

#include <string>

#include "absl/status/statusor.h"
#include "actors/checkpoint/megatron/pickle_value.h"

namespace mxmaca::actors::checkpoint::megatron {

// Pickle: the pickle bytes of `root`. InvalidArgument for a value that protocol 2 cannot
// express here (a kObject whose class is not "module.name", an unset value, nesting
// deeper than 256).
absl::StatusOr<std::string> Pickle(const PyValue& root);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_PICKLE_WRITER_H_
