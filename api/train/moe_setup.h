// api/train/moe_setup.h: the MoE part of the model config from Megatron's MoE flags
// (megatron/training/arguments.py _add_moe_args; layers/moe/moe_layer.h).
#ifndef MXMACA_API_TRAIN_MOE_SETUP_H_
#define MXMACA_API_TRAIN_MOE_SETUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "layers/gpt_config.h"

namespace mxmaca::api {

// ParseMoeLayerFreq: --moe-layer-freq for L layers: an int N (every N-th layer from layer 0
// is MoE: l % N == 0, Megatron's default 1 = all) or a Python list of 0/1 with L entries
// ("[1,0,1,0]"; also Megatron's "([1]*1+[0]*1)*2" pattern form: a list literal, optionally
// multiplied, lists concatenated with +). Errors: InvalidArgument naming the value.
absl::StatusOr<std::vector<bool>> ParseMoeLayerFreq(const std::string& value, int64_t num_layers);

// AddMoEConfig: with --num-experts, fills config->moe (router, experts, shared expert) and
// config->moe_layers. Errors (InvalidArgument naming the flag and value): an unknown score
// function, load-balancing type (one type only) or drop policy; the router's and experts'
// validation (layers/moe/router.h ValidateRouterConfig: top-k > experts, groups, sinkhorn
// with an aux coefficient, ...); --expert-model-parallel-size > 1 or
// --expert-tensor-parallel-size other than the TP size or 1 (expert parallelism runs in
// one process over the EP group: not in this version); --moe-router-dtype fp64.
// Without --num-experts: nothing.
absl::Status AddMoEConfig(const MegatronArgs& args, layers::GptConfig* config);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_MOE_SETUP_H_
