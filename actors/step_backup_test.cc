// Tests of StepBackup: a rollback restores every bit an optimizer step changed, and a step
// redone after a rollback gives the bits of the same step taken without the detour (the
// property --optimizer-post-validation relies on).
#include "actors/step_backup.h"

#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include "actors/synthetic_stage_program.h"
#include "kernels/exec_context.h"
#include "layers/optimizer.h"

namespace mxmaca::actors {
namespace {

using Optimizers = std::vector<std::shared_ptr<layers::AdamWOptimizer>>;

// Stage: a two-chunk synthetic program with random parameters and gradients (seeded) and
// one AdamW per chunk.
struct Stage {
  std::unique_ptr<SyntheticStageProgram> program;
  Optimizers optimizers;
};

Stage MakeStage(uint32_t seed) {
  SyntheticStageOptions o;
  o.pipeline_size = 2;
  o.chunks = {SyntheticOpSeconds{}, SyntheticOpSeconds{}};
  o.parameters_per_chunk = 37;
  auto program = SyntheticStageProgram::Create(o);
  REQUIRE(program.ok());
  Stage s;
  s.program = std::move(*program);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int c = 0; c < s.program->num_chunks(); ++c) {
    layers::ParameterStore& store = s.program->parameters(c);
    for (float& x : store.params_arena()) x = normal(rng);
    for (float& g : store.grads_arena()) g = normal(rng);
    s.optimizers.push_back(std::make_shared<layers::AdamWOptimizer>(
        layers::AdamWOptions{}, store.OptimizerTensors()));
  }
  return s;
}

// Everything a step changes, flattened.
std::vector<float> Snapshot(Stage& s) {
  std::vector<float> out;
  for (int c = 0; c < s.program->num_chunks(); ++c) {
    layers::ParameterStore& store = s.program->parameters(c);
    out.insert(out.end(), store.params_arena().begin(), store.params_arena().end());
    out.insert(out.end(), store.grads_arena().begin(), store.grads_arena().end());
    layers::AdamWOptimizer& opt = *s.optimizers[c];
    for (size_t i = 0; i < opt.tensors().size(); ++i) {
      out.insert(out.end(), opt.exp_avg(i).begin(), opt.exp_avg(i).end());
      out.insert(out.end(), opt.exp_avg_sq(i).begin(), opt.exp_avg_sq(i).end());
    }
    out.push_back(static_cast<float>(opt.step()));
  }
  return out;
}

// Step: what the stage actor's optimizer step does: scale the gradients, AdamW, zero them.
void Step(Stage& s, float scale, double lr) {
  kernels::ExecContext exec;
  for (int c = 0; c < s.program->num_chunks(); ++c) {
    layers::ParameterStore& store = s.program->parameters(c);
    for (float& g : store.grads_arena()) g *= scale;
    s.optimizers[c]->Step(exec, lr, 0.1);
    store.ZeroGrads();
  }
}

TEST_CASE("StepBackup restores every bit a step changed") {
  Stage s = MakeStage(7);
  Step(s, 1.0f, 1e-2);  // non-zero moments and step count before the backup
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int c = 0; c < 2; ++c) {
    for (float& g : s.program->parameters(c).grads_arena()) g = normal(rng);
  }
  const std::vector<float> before = Snapshot(s);
  StepBackup backup;
  REQUIRE(backup.Save(*s.program, s.optimizers).ok());
  CHECK(backup.bytes() > 0);
  Step(s, 1.0f, 3e-2);
  Step(s, 0.5f, 3e-2);
  REQUIRE(Snapshot(s) != before);  // the steps changed something
  REQUIRE(backup.Restore(*s.program, s.optimizers).ok());
  CHECK(Snapshot(s) == before);
}

TEST_CASE("a step redone after a rollback equals the step taken directly") {
  // Two identical stages: one takes the optimistic step (clip coefficient 1), rolls it
  // back and redoes it clipped; the other takes the clipped step at once. Bit equality is
  // required: the redo must be the synchronous step's arithmetic on the same inputs.
  Stage a = MakeStage(3), b = MakeStage(3);
  REQUIRE(Snapshot(a) == Snapshot(b));
  StepBackup backup;
  REQUIRE(backup.Save(*a.program, a.optimizers).ok());
  Step(a, 1.0f, 1e-2);
  REQUIRE(backup.Restore(*a.program, a.optimizers).ok());
  Step(a, 0.25f, 1e-2);
  Step(b, 0.25f, 1e-2);
  CHECK(Snapshot(a) == Snapshot(b));
}

TEST_CASE("StepBackup errors") {
  Stage s = MakeStage(5);
  StepBackup backup;
  CHECK(backup.Restore(*s.program, s.optimizers).code() ==
        absl::StatusCode::kFailedPrecondition);
  Optimizers one = {s.optimizers[0]};
  CHECK(backup.Save(*s.program, one).code() == absl::StatusCode::kInvalidArgument);
  Optimizers with_null = {s.optimizers[0], nullptr};
  CHECK(backup.Save(*s.program, with_null).code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(backup.Save(*s.program, s.optimizers).ok());
  SyntheticStageOptions o;
  o.pipeline_size = 2;
  o.chunks = {SyntheticOpSeconds{}, SyntheticOpSeconds{}};
  o.parameters_per_chunk = 100;  // larger arenas: a replaced program
  auto bigger = SyntheticStageProgram::Create(o);
  REQUIRE(bigger.ok());
  Optimizers bigger_opts;
  for (int c = 0; c < 2; ++c) {
    bigger_opts.push_back(std::make_shared<layers::AdamWOptimizer>(
        layers::AdamWOptions{}, (*bigger)->parameters(c).OptimizerTensors()));
  }
  CHECK(backup.Restore(**bigger, bigger_opts).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::actors
