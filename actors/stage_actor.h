// actors/stage_actor.h: StageActor, one pipeline stage of one data-parallel replica.
//
// DESIGN.md: an actor owns its parameters, its optimizer state and its device stream
// (here a compute Strand of the process's ComputePool). It executes exactly the op list
// (F/B/W per micro-batch) the coordinator hands it for an iteration: an op starts when it
// is next in the list and its inputs have arrived (the micro-batch's data; later, the
// neighbouring stages' activations and gradients); it runs on the strand and reports back
// by message, so the CAF worker never blocks on compute. After its last op the stage
// reports its loss and gradient statistics to the coordinator and waits for the optimizer
// decision (step, or skip on NaN/Inf).
#ifndef MXMACA_ACTORS_STAGE_ACTOR_H_
#define MXMACA_ACTORS_STAGE_ACTOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "actors/compute_pool.h"
#include "actors/messages.h"
#include "actors/stage_program.h"
#include "kernels/exec_context.h"
#include "layers/optimizer.h"

namespace mxmaca::actors {

// StageActorConfig: what a StageActor is spawned with.
struct StageActorConfig {
  int32_t stage = 0;                 // pipeline rank
  bool is_first = true;              // owns the embedding (consumes tokens)
  bool is_last = true;               // owns the loss head (consumes labels)
  kernels::ExecContext exec;         // passed to the optimizer kernels
  CoordinatorActor coordinator;
  std::shared_ptr<Strand> strand;
  // program and optimizer: shared with the strand's tasks (which may outlive a message).
  std::shared_ptr<StageProgram> program;
  std::shared_ptr<layers::AdamWOptimizer> optimizer;
  // trace: record a span per op (and optimizer step) and send them with the reports.
  bool trace = false;
};

// SpawnStageActor: spawns the actor in `system`.
StageActorHandle SpawnStageActor(caf::actor_system& system, StageActorConfig config);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STAGE_ACTOR_H_
