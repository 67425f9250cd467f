// api/train/cp_setup.h: the checks `mxmaca train --context-parallel-size N` makes before
// anything is built (issue 9), with messages that name the flags.
//
// How CP trains (the pieces live elsewhere): every CP rank of a data-parallel replica
// reads the same micro-batch and keeps its two chunks (actors/gpt_stage_program.cc,
// layers/context_parallel/cp_batch.h); the layers run ring attention over the CP group and
// sum the loss over it (layers/gpt_stage.h); the runtime treats TP x CP ranks as one
// stage's width and reduces gradients over the data-parallel x context-parallel group
// (actors/stage_actor.h, actors/pipeline_runtime.h, api/train/stage_ranks.h).
#ifndef MXMACA_API_TRAIN_CP_SETUP_H_
#define MXMACA_API_TRAIN_CP_SETUP_H_

#include "absl/status/status.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {

// CheckContextParallelArgs: OK when --context-parallel-size is 1, or when the other flags
// work with it. Errors (naming the flags and values):
//   InvalidArgument  --seq-length not divisible by 2 x CP (x TP with --sequence-parallel
//                    and TP > 1; Megatron's 2 x CP chunk layout); --attention-dropout
//                    > 0 (Megatron's default is 0.1: pass 0; the ring attention has no
//                    dropout — hidden dropout is fine);
//   Unimplemented    --dynamic-pipeline (every CP rank of a
//                    stage must run its ops in the same order: the ring pairs them),
//                    --rebalance-threshold / --force-layer-move.
absl::Status CheckContextParallelArgs(const MegatronArgs& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_CP_SETUP_H_
