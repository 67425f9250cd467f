// scheduler/edge_slots.cc: see edge_slots.h.
#include "scheduler/edge_slots.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::scheduler {
namespace {

// What one op receives and sends. Channels: 2 * stage (forward), 2 * stage + 1 (backward).
struct OpIo {
  bool receives = false;
  int32_t recv_virtual_stage = 0;  // message key: (direction, virtual stage, micro-batch)
  bool recv_forward = true;
  int32_t recv_channel = -1;       // the sender's channel (slot returned when the op ran)
  bool sends = false;
  int32_t send_channel = -1;
};

OpIo IoOf(const PipelineSchedule& s, int32_t stage, const PipelineOp& op) {
  const int32_t p = s.num_stages, last = s.num_stages * s.num_chunks - 1;
  const int32_t k = VirtualStage(s, op.chunk, stage);
  auto stage_of = [&](int32_t virtual_stage) {
    return StageChunkOf(virtual_stage, p, s.placement).stage;
  };
  OpIo io;
  if (op.kind == OpKind::kForward) {
    if (k > 0) {
      io.receives = true;
      io.recv_virtual_stage = k;
      io.recv_forward = true;
      const int32_t from = stage_of(k - 1);
      // A hand-over between chunks of one stage (p = 1, or the V's turn on stage p - 1)
      // stays local: no channel, no slot.
      io.recv_channel = from == stage ? -1 : 2 * from;
    }
    if (k < last && stage_of(k + 1) != stage) {
      io.sends = true;
      io.send_channel = 2 * stage;
    }
  } else if (op.kind == OpKind::kBackwardInput) {
    if (k < last) {
      io.receives = true;
      io.recv_virtual_stage = k;
      io.recv_forward = false;
      const int32_t from = stage_of(k + 1);
      io.recv_channel = from == stage ? -1 : 2 * from + 1;
    }
    if (k > 0 && stage_of(k - 1) != stage) {
      io.sends = true;
      io.send_channel = 2 * stage + 1;
    }
  }
  return io;
}

EdgeSlots ToEdgeSlots(const std::vector<int32_t>& per_channel, int32_t p) {
  EdgeSlots e;
  for (int32_t s = 0; s < p; ++s) {
    e.forward.push_back(per_channel[2 * s]);
    e.backward.push_back(per_channel[2 * s + 1]);
  }
  return e;
}

}  // namespace

absl::StatusOr<EdgeSlots> MinimumEdgeSlots(const PipelineSchedule& schedule) {
  const int32_t p = schedule.num_stages;
  if (p < 1 || static_cast<int32_t>(schedule.stages.size()) != p) {
    return absl::InvalidArgumentError("MinimumEdgeSlots: schedule has no stages");
  }
  std::vector<int32_t> quota(2 * p, 0), in_flight(2 * p, 0);
  for (int32_t s = 0; s < p; ++s) {
    for (const PipelineOp& op : schedule.stages[s]) {
      const OpIo io = IoOf(schedule, s, op);
      if (io.sends) quota[io.send_channel] = 1;
    }
  }
  // Messages delivered and not yet consumed: (forward?, virtual stage, micro-batch).
  std::set<std::tuple<bool, int32_t, int32_t>> delivered;
  std::vector<size_t> next(p, 0);
  size_t remaining = 0;
  for (const StageSchedule& ops : schedule.stages) remaining += ops.size();
  while (remaining > 0) {
    bool progress = false;
    std::vector<int32_t> slot_blocked;
    for (int32_t s = 0; s < p; ++s) {
      while (next[s] < schedule.stages[s].size()) {
        const PipelineOp& op = schedule.stages[s][next[s]];
        const OpIo io = IoOf(schedule, s, op);
        const int32_t k = VirtualStage(schedule, op.chunk, s);
        const auto want = std::make_tuple(io.recv_forward, k, op.microbatch);
        if (io.receives && delivered.count(want) == 0) break;
        if (io.sends && in_flight[io.send_channel] >= quota[io.send_channel]) {
          slot_blocked.push_back(io.send_channel);
          break;
        }
        if (io.receives) {
          delivered.erase(want);
          if (io.recv_channel >= 0) --in_flight[io.recv_channel];
        }
        if (io.sends) ++in_flight[io.send_channel];
        // The output goes to the next (F) or previous (B) virtual stage, over a channel or
        // handed over locally between chunks of this stage.
        const int32_t last = p * schedule.num_chunks - 1;
        if (op.kind == OpKind::kForward && k < last) delivered.emplace(true, k + 1, op.microbatch);
        if (op.kind == OpKind::kBackwardInput && k > 0) {
          delivered.emplace(false, k - 1, op.microbatch);
        }
        ++next[s];
        --remaining;
        progress = true;
      }
    }
    if (remaining == 0 || progress) continue;
    if (slot_blocked.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule '", schedule.name, "' cannot complete even with unbounded channels "
          "(run ValidateSchedule for the circular wait)"));
    }
    for (int32_t c : slot_blocked) ++quota[c];
  }
  return ToEdgeSlots(quota, p);
}

absl::StatusOr<EdgeSlots> UnitTimeEdgeSlots(const PipelineSchedule& schedule) {
  const int32_t p = schedule.num_stages;
  absl::StatusOr<ScheduleTiming> timing =
      SimulateSchedule(schedule, OpCosts::Uniform(p, 1.0, 1.0, 1.0));
  if (!timing.ok()) return timing.status();
  // Slot intervals per channel: [sender start, receiver finish).
  std::map<std::tuple<bool, int32_t, int32_t>, std::pair<int32_t, double>> sent;  // -> (channel, start)
  std::vector<std::vector<std::pair<double, int>>> events(2 * p);
  for (int32_t s = 0; s < p; ++s) {
    for (size_t i = 0; i < schedule.stages[s].size(); ++i) {
      const PipelineOp& op = schedule.stages[s][i];
      const OpIo io = IoOf(schedule, s, op);
      if (!io.sends) continue;
      const int32_t k = VirtualStage(schedule, op.chunk, s);
      const bool forward = op.kind == OpKind::kForward;
      sent[{forward, forward ? k + 1 : k - 1, op.microbatch}] = {io.send_channel,
                                                                timing->ops[s][i].start};
    }
  }
  for (int32_t s = 0; s < p; ++s) {
    for (size_t i = 0; i < schedule.stages[s].size(); ++i) {
      const PipelineOp& op = schedule.stages[s][i];
      const OpIo io = IoOf(schedule, s, op);
      if (!io.receives || io.recv_channel < 0) continue;
      const int32_t k = VirtualStage(schedule, op.chunk, s);
      auto it = sent.find({io.recv_forward, k, op.microbatch});
      if (it == sent.end()) continue;
      events[it->second.first].push_back({it->second.second, +1});
      events[it->second.first].push_back({timing->ops[s][i].finish, -1});
    }
  }
  std::vector<int32_t> most(2 * p, 0);
  for (int c = 0; c < 2 * p; ++c) {
    // Releases before acquisitions at equal times (a slot freed at t can be reused at t).
    std::sort(events[c].begin(), events[c].end());
    int32_t live = 0;
    for (const auto& e : events[c]) {
      live += e.second;
      most[c] = std::max(most[c], live);
    }
  }
  return ToEdgeSlots(most, p);
}

absl::StatusOr<EdgeSlots> EdgeQuotas(const PipelineSchedule& schedule) {
  absl::StatusOr<EdgeSlots> minimum = MinimumEdgeSlots(schedule);
  if (!minimum.ok()) return minimum.status();
  absl::StatusOr<EdgeSlots> unit = UnitTimeEdgeSlots(schedule);
  if (!unit.ok()) return unit.status();
  for (size_t s = 0; s < minimum->forward.size(); ++s) {
    minimum->forward[s] = std::max(minimum->forward[s], unit->forward[s]);
    minimum->backward[s] = std::max(minimum->backward[s], unit->backward[s]);
  }
  return minimum;
}

}  // namespace mxmaca::scheduler
