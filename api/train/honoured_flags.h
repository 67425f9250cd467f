// api/train/honoured_flags.h: which MegatronArgs fields `mxmaca train` acts on. Every
// implemented flag of the flag table (docs/FLAGS.md) must be one of them
// (//api/train:honoured_flags_test): "implemented" means the run honours it.
#ifndef MXMACA_API_TRAIN_HONOURED_FLAGS_H_
#define MXMACA_API_TRAIN_HONOURED_FLAGS_H_

#include <string_view>

#include "absl/status/status.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {

// IsHonouredField: whether MegatronArgs field `field` (a MegatronArgsBoundDests() name) is
// acted on by `mxmaca train`.
bool IsHonouredField(std::string_view field);

// CheckHonouredFlags: Unimplemented naming every flag set to a non-default value whose
// field the training path does not act on ("mxmaca train does not honour --x yet ..."):
// never accepted and silently ignored. OK otherwise.
absl::Status CheckHonouredFlags(const MegatronArgs& a);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_HONOURED_FLAGS_H_
