// actors/step_backup.h: exact copies of what one optimizer step changes on a stage, for
// the rollback of --optimizer-post-validation (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, section 4 and appendix C).
//
// The paper notes that a rollback can also be computed by inverting the update; MXMACA
// keeps copies instead, because the redone step must give the bits of the synchronous
// step (docs/ARCHITECTURE.md "Numerics") and inverse arithmetic is not exact in fp32. Cost: per model
// chunk, one copy of the parameter and gradient arenas and of AdamW's exp_avg /
// exp_avg_sq (4 x the parameter bytes), held from the optimistic step to its validation.
#ifndef MXMACA_ACTORS_STEP_BACKUP_H_
#define MXMACA_ACTORS_STEP_BACKUP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "actors/stage_program.h"
#include "layers/optimizer.h"

namespace mxmaca::actors {

// StepBackup: see the file comment. Not thread-safe: use it from the stage's strand.
class StepBackup {
 public:
  // Save: copies, for every chunk c of `program`, parameters(c)'s parameter and gradient
  // arenas (fp32, whole arenas) and optimizers[c]'s moments and step count.
  // InvalidArgument when optimizers.size() != program.num_chunks() or one is null.
  absl::Status Save(StageProgram& program,
                    const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers);

  // Restore: writes the copies back (the same program and optimizers as Save).
  // FailedPrecondition without a Save; InvalidArgument when an arena or moment size no
  // longer matches (the program was replaced in between).
  absl::Status Restore(StageProgram& program,
                       const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers) const;

  // bytes: the memory the copies hold.
  int64_t bytes() const;

 private:
  struct Chunk {
    std::vector<float> params, grads;
    std::vector<std::vector<float>> exp_avg, exp_avg_sq;
    int64_t step = 0;
  };
  bool saved_ = false;
  std::vector<Chunk> chunks_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STEP_BACKUP_H_
