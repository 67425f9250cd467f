// scheduler/schedule_simulator.cc: see schedule_simulator.h.
#include "scheduler/schedule_simulator.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::scheduler {
namespace {

constexpr double kNotYet = -1;

// Flat index of (kind, virtual stage, micro-batch) into arrays of size 3 * K * m.
struct OpIndex {
  int32_t num_virtual_stages = 0;  // K = v * p
  int32_t num_microbatches = 0;    // m
  size_t operator()(OpKind kind, int32_t virtual_stage, int32_t mb) const {
    return (static_cast<size_t>(kind) * num_virtual_stages + virtual_stage) *
               static_cast<size_t>(num_microbatches) +
           mb;
  }
  size_t size() const { return 3 * static_cast<size_t>(num_virtual_stages) * num_microbatches; }
};

// An input an op waits for: op `kind` of micro-batch `mb` on virtual stage `virtual_stage`;
// `message` when it arrives from another virtual stage (latency applies), else a local
// ordering constraint on the same stage.
struct Input {
  OpKind kind;
  int32_t virtual_stage;
  int32_t mb;
  bool message;
};

// Inputs: what `op` on stage `stage` needs, in the order they are reported.
std::vector<Input> Inputs(const PipelineSchedule& schedule, const PipelineOp& op, int32_t stage,
                          int32_t num_virtual_stages) {
  const int32_t k = VirtualStage(schedule, op.chunk, stage);
  std::vector<Input> inputs;
  switch (op.kind) {
    case OpKind::kForward:
      if (k > 0) inputs.push_back({OpKind::kForward, k - 1, op.microbatch, true});
      break;
    case OpKind::kBackwardInput:
      if (k + 1 < num_virtual_stages) {
        inputs.push_back({OpKind::kBackwardInput, k + 1, op.microbatch, true});
      }
      inputs.push_back({OpKind::kForward, k, op.microbatch, false});
      break;
    case OpKind::kBackwardWeight:
      inputs.push_back({OpKind::kBackwardInput, k, op.microbatch, false});
      break;
  }
  return inputs;
}

std::string Describe(const Input& input, const PipelineSchedule& schedule) {
  const StageChunk at = StageChunkOf(input.virtual_stage, schedule.num_stages, schedule.placement);
  return ToString(PipelineOp{input.kind, input.mb, at.chunk});
}

}  // namespace

OpCosts OpCosts::Uniform(int32_t num_stages, double forward, double backward_input,
                         double backward_weight, double comm_latency, bool fused_backward) {
  OpCosts costs;
  costs.per_stage.assign(std::max(num_stages, 0),
                         std::array<double, 3>{forward, backward_input, backward_weight});
  costs.comm_latency = comm_latency;
  costs.fused_backward = fused_backward;
  return costs;
}

absl::StatusOr<ScheduleTiming> SimulateSchedule(const PipelineSchedule& schedule,
                                                const OpCosts& costs) {
  const int32_t p = schedule.num_stages;
  absl::Status status = CheckScheduleDimensions(schedule.name.empty() ? "schedule" : schedule.name,
                                                p, schedule.num_chunks, schedule.num_microbatches);
  if (!status.ok()) return status;
  if (schedule.stages.size() != static_cast<size_t>(p)) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule has ", schedule.stages.size(), " stage lists, expected p = ", p));
  }
  if (costs.per_stage.size() != static_cast<size_t>(p)) {
    return absl::InvalidArgumentError(
        absl::StrCat("op costs given for ", costs.per_stage.size(), " stages, expected p = ", p));
  }
  for (int32_t s = 0; s < p; ++s) {
    for (int kind = 0; kind < 3; ++kind) {
      if (!(costs.per_stage[s][kind] >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("stage ", s, ": op time of kind ", kind,
                                                       " must be >= 0, got ",
                                                       costs.per_stage[s][kind]));
      }
    }
  }
  if (!(costs.comm_latency >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm latency must be >= 0, got ", costs.comm_latency));
  }

  const OpIndex index{schedule.num_chunks * p, schedule.num_microbatches};
  // listed[i]: the op appears in some stage's list; finish[i]: when it ended;
  // output_ready[i]: when its outgoing message leaves (F, B); fused_with_next[i]: B's
  // gradient leaves with the W right after it.
  std::vector<char> listed(index.size(), 0), fused_with_next(index.size(), 0);
  std::vector<double> finish(index.size(), kNotYet), output_ready(index.size(), kNotYet);
  for (int32_t s = 0; s < p; ++s) {
    const StageSchedule& ops = schedule.stages[s];
    for (size_t i = 0; i < ops.size(); ++i) {
      const PipelineOp& op = ops[i];
      const int kind = static_cast<int>(op.kind);
      if (kind < 0 || kind > 2 || op.microbatch < 0 || op.microbatch >= schedule.num_microbatches ||
          op.chunk < 0 || op.chunk >= schedule.num_chunks) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, ": op ", i, " (kind ", kind, ", micro-batch ", op.microbatch, ", chunk ",
            op.chunk, ") is out of range: kind in [0, 3), micro-batch in [0, ",
            schedule.num_microbatches, "), chunk in [0, ", schedule.num_chunks, ")"));
      }
      const size_t id = index(op.kind, VirtualStage(schedule, op.chunk, s), op.microbatch);
      if (listed[id]) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", s, ": duplicate ", ToString(op), " at op ", i));
      }
      listed[id] = 1;
      if (costs.fused_backward && op.kind == OpKind::kBackwardInput && i + 1 < ops.size() &&
          ops[i + 1] == PipelineOp{OpKind::kBackwardWeight, op.microbatch, op.chunk}) {
        fused_with_next[id] = 1;
      }
    }
  }

  ScheduleTiming timing;
  timing.busy.assign(p, 0);
  timing.ops.resize(p);
  for (int32_t s = 0; s < p; ++s) timing.ops[s].resize(schedule.stages[s].size());
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  const int32_t num_virtual_stages = index.num_virtual_stages;
  for (bool progress = true; progress;) {
    progress = false;
    for (int32_t s = 0; s < p; ++s) {
      const StageSchedule& ops = schedule.stages[s];
      while (next[s] < ops.size()) {
        const PipelineOp& op = ops[next[s]];
        double start = free_at[s];
        bool ready = true;
        for (const Input& in : Inputs(schedule, op, s, num_virtual_stages)) {
          const size_t dep = index(in.kind, in.virtual_stage, in.mb);
          const double t = in.message ? output_ready[dep] : finish[dep];
          if (t == kNotYet) {
            ready = false;
            break;
          }
          start = std::max(start, in.message ? t + costs.comm_latency : t);
        }
        if (!ready) break;
        const int32_t k = VirtualStage(schedule, op.chunk, s);
        const size_t id = index(op.kind, k, op.microbatch);
        const double duration = costs.per_stage[s][static_cast<int>(op.kind)];
        finish[id] = start + duration;
        if (op.kind != OpKind::kBackwardWeight && !fused_with_next[id]) {
          output_ready[id] = finish[id];
        }
        if (op.kind == OpKind::kBackwardWeight) {
          const size_t b = index(OpKind::kBackwardInput, k, op.microbatch);
          if (fused_with_next[b]) output_ready[b] = finish[id];
        }
        timing.ops[s][next[s]] = {start, finish[id]};
        timing.busy[s] += duration;
        timing.makespan = std::max(timing.makespan, finish[id]);
        free_at[s] = finish[id];
        ++next[s];
        progress = true;
      }
    }
  }

  std::vector<std::string> stuck;
  bool unsatisfiable = false;
  for (int32_t s = 0; s < p; ++s) {
    const StageSchedule& ops = schedule.stages[s];
    if (next[s] == ops.size()) continue;
    const PipelineOp& op = ops[next[s]];
    for (const Input& in : Inputs(schedule, op, s, num_virtual_stages)) {
      const size_t dep = index(in.kind, in.virtual_stage, in.mb);
      if ((in.message ? output_ready[dep] : finish[dep]) != kNotYet) continue;
      const int32_t from = StageChunkOf(in.virtual_stage, p, schedule.placement).stage;
      std::string what = absl::StrCat("stage ", s, " waits at ", ToString(op), " (op ", next[s],
                                      ") for ", Describe(in, schedule));
      if (in.message) {
        absl::StrAppend(&what, " from stage ", from);
      } else {
        absl::StrAppend(&what, " on its own list");
      }
      if (!listed[dep]) {
        unsatisfiable = true;
        absl::StrAppend(&what, ", which stage ", from, " never runs");
      }
      stuck.push_back(std::move(what));
      break;
    }
  }
  if (!stuck.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        unsatisfiable ? "unsatisfiable input: " : "circular wait: ", absl::StrJoin(stuck, "; ")));
  }

  timing.idle.resize(p);
  double idle_sum = 0;
  for (int32_t s = 0; s < p; ++s) {
    timing.idle[s] = timing.makespan - timing.busy[s];
    idle_sum += timing.idle[s];
  }
  timing.bubble_fraction = timing.makespan > 0 ? idle_sum / (p * timing.makespan) : 0;
  return timing;
}

std::vector<int32_t> PeakStashedMicrobatches(const PipelineSchedule& schedule) {
  std::vector<int32_t> peaks(schedule.stages.size(), 0);
  if (schedule.forward_only) return peaks;
  for (size_t s = 0; s < schedule.stages.size(); ++s) {
    int32_t held = 0;
    for (const PipelineOp& op : schedule.stages[s]) {
      if (op.kind == OpKind::kForward) peaks[s] = std::max(peaks[s], ++held);
      if (op.kind == OpKind::kBackwardWeight) --held;
    }
  }
  return peaks;
}

}  // namespace mxmaca::scheduler
