// api/simulate/shared_worker_replay.cc: see shared_worker_replay.h.
#include "api/simulate/shared_worker_replay.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace mxmaca::api {
namespace {

using scheduler::OpKind;
using scheduler::PipelineOp;

constexpr double kNotYet = -1;

}  // namespace

absl::StatusOr<SharedWorkerTiming> ReplayOnSharedWorkers(const scheduler::PipelineSchedule& schedule,
                                                         const scheduler::OpCosts& costs,
                                                         int replicas, int workers) {
  const int32_t p = schedule.num_stages;
  if (workers < 1 || replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shared-worker replay: workers ", workers,
                                                   " and replicas ", replicas, " must be >= 1"));
  }
  if (static_cast<int32_t>(costs.per_stage.size()) != p ||
      static_cast<int32_t>(schedule.stages.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("shared-worker replay: ", costs.per_stage.size(),
                                                   " stage costs and ", schedule.stages.size(),
                                                   " stage lists for p = ", p));
  }
  for (const auto& c : costs.per_stage) {
    for (double x : c) {
      if (!(x >= 0)) return absl::InvalidArgumentError("shared-worker replay: negative op time");
    }
  }
  const int32_t K = p * schedule.num_chunks, m = schedule.num_microbatches;
  const auto id = [&](int r, OpKind kind, int32_t k, int32_t mb) {
    return ((static_cast<size_t>(r) * 3 + static_cast<size_t>(kind)) * K + k) * m + mb;
  };
  const size_t n = static_cast<size_t>(replicas) * 3 * K * m;
  std::vector<double> finish(n, kNotYet), output(n, kNotYet);
  std::vector<char> fused(n, 0);
  for (int r = 0; r < replicas; ++r) {
    for (int32_t s = 0; s < p; ++s) {
      const auto& ops = schedule.stages[s];
      for (size_t i = 0; i + 1 < ops.size(); ++i) {
        const PipelineOp& op = ops[i];
        if (op.microbatch < 0 || op.microbatch >= m || op.chunk < 0 ||
            op.chunk >= schedule.num_chunks) {
          return absl::InvalidArgumentError(
              absl::StrCat("shared-worker replay: stage ", s, " op ", i, " out of range"));
        }
        if (costs.fused_backward && op.kind == OpKind::kBackwardInput &&
            ops[i + 1] == PipelineOp{OpKind::kBackwardWeight, op.microbatch, op.chunk}) {
          fused[id(r, op.kind, scheduler::VirtualStage(schedule, op.chunk, s), op.microbatch)] = 1;
        }
      }
    }
  }
  const int strands = replicas * p;
  std::vector<size_t> next(static_cast<size_t>(strands), 0);
  std::vector<double> strand_free(static_cast<size_t>(strands), 0);
  std::vector<double> worker_free(static_cast<size_t>(workers), 0);
  SharedWorkerTiming out;
  out.stage_finish.assign(static_cast<size_t>(p), 0);
  out.ops.resize(static_cast<size_t>(p));
  for (int32_t s = 0; s < p; ++s) out.ops[s].resize(schedule.stages[s].size());
  size_t remaining = 0;
  for (int32_t s = 0; s < p; ++s) remaining += schedule.stages[s].size();
  remaining *= static_cast<size_t>(replicas);

  // ReadyTime: when strand x's next op can start (kNotYet while an input is unknown).
  const auto ready_time = [&](int x) {
    const int r = x / p;
    const int32_t s = x % p;
    const PipelineOp& op = schedule.stages[s][next[static_cast<size_t>(x)]];
    const int32_t k = scheduler::VirtualStage(schedule, op.chunk, s);
    double t = strand_free[static_cast<size_t>(x)];
    const auto need = [&](OpKind kind, int32_t kk, bool message) {
      const size_t d = id(r, kind, kk, op.microbatch);
      const double at = message ? output[d] : finish[d];
      if (at == kNotYet) return false;
      t = std::max(t, message ? at + costs.comm_latency : at);
      return true;
    };
    bool ok = true;
    switch (op.kind) {
      case OpKind::kForward:
        if (k > 0) ok = need(OpKind::kForward, k - 1, true);
        break;
      case OpKind::kBackwardInput:
        if (k + 1 < K) ok = need(OpKind::kBackwardInput, k + 1, true);
        ok = ok && need(OpKind::kForward, k, false);
        break;
      case OpKind::kBackwardWeight:
        ok = need(OpKind::kBackwardInput, k, false);
        break;
    }
    return ok ? t : kNotYet;
  };

  while (remaining > 0) {
    int best = -1;
    double best_ready = std::numeric_limits<double>::infinity();
    for (int x = 0; x < strands; ++x) {
      if (next[static_cast<size_t>(x)] >= schedule.stages[x % p].size()) continue;
      const double t = ready_time(x);
      if (t != kNotYet && t < best_ready) {
        best_ready = t;
        best = x;
      }
    }
    if (best < 0) {
      for (int x = 0; x < strands; ++x) {
        const size_t i = next[static_cast<size_t>(x)];
        if (i < schedule.stages[x % p].size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "shared-worker replay: stuck: replica ", x / p, " stage ", x % p, " waits at ",
              scheduler::ToString(schedule.stages[x % p][i]), " (op ", i, ")"));
        }
      }
    }
    const auto w = std::min_element(worker_free.begin(), worker_free.end());
    const int r = best / p;
    const int32_t s = best % p;
    const size_t i = next[static_cast<size_t>(best)];
    const PipelineOp& op = schedule.stages[s][i];
    const int32_t k = scheduler::VirtualStage(schedule, op.chunk, s);
    const double duration = costs.per_stage[s][static_cast<int>(op.kind)];
    const double start = std::max(best_ready, *w);
    const double end = start + duration;
    *w = end;
    strand_free[static_cast<size_t>(best)] = end;
    const size_t me = id(r, op.kind, k, op.microbatch);
    finish[me] = end;
    if (op.kind != OpKind::kBackwardWeight && !fused[me]) output[me] = end;
    if (op.kind == OpKind::kBackwardWeight) {
      const size_t b = id(r, OpKind::kBackwardInput, k, op.microbatch);
      if (fused[b]) output[b] = end;
    }
    if (r == 0) out.ops[s][i] = {start, end};
    out.stage_finish[s] = std::max(out.stage_finish[s], end);
    out.makespan = std::max(out.makespan, end);
    out.busy += duration;
    ++next[static_cast<size_t>(best)];
    --remaining;
  }
  return out;
}

}  // namespace mxmaca::api
