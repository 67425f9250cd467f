// The control plane at scale (issue "Scale beyond the machine"): 512 ranks — TP 8 x PP 8
// x DP 8 — as stage actors in one process on the synthetic backend (zero-time ops): the
// rank grid and its groups, schedule validation and channel quotas, the coordinator, the
// data actor, pipeline messages, DP gradient all-reduces over 64 groups of 8, and a few
// iterations, in bounded memory. Asserts completion, the reported loss and a memory bound;
// prints the time taken.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>

#include "actors/synthetic_stage_program.h"

namespace mxmaca::actors {
namespace {

TEST_CASE("512 ranks (TP8 x PP8 x DP8) run a few iterations in one process") {
  SyntheticJobOptions o;
  o.schedule = scheduler::ScheduleKind::kOneFOneB;
  o.pipeline_size = 8;
  o.data_parallel_size = 8;
  o.tensor_parallel_size = 8;
  o.num_microbatches = 8;
  o.train_iters = 3;
  o.uniform = {0.0, 0.0, 0.0};
  o.loss_per_token = 2.5;
  o.compute_threads = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = RunSyntheticJob(o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(summary.ok());
  INFO(summary->error);
  REQUIRE(summary->ok);
  REQUIRE(summary->train_losses.size() == 3);
  // Each TP rank of the last stage computes the same loss; it is counted once.
  for (double loss : summary->train_losses) CHECK(loss == Approx(2.5).epsilon(1e-12));
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_mib = usage.ru_maxrss / 1024.0;
  std::printf("512 ranks: 3 iterations in %.2f s, peak RSS %.0f MiB\n", seconds, peak_mib);
  // 512 actors, 512 strand threads (stacks are virtual memory), tiny parameter stores:
  // a few hundred MiB; 2 GiB would mean per-rank state grows out of bounds.
  CHECK(peak_mib < 2048.0);
}

}  // namespace
}  // namespace mxmaca::actors
