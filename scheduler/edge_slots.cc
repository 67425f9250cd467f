// scheduler/edge_slots.cc: see edge_slots.h.
#include "scheduler/edge_slots.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
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

absl::StatusOr<EdgeSlots> UnthrottledEdgeSlots(const PipelineSchedule& schedule) {
  const int32_t p = schedule.num_stages;
  if (p < 1 || static_cast<int32_t>(schedule.stages.size()) != p) {
    return absl::InvalidArgumentError("UnthrottledEdgeSlots: schedule has no stages");
  }
  // Nodes: every op; node id = base[stage] + index in the stage's list.
  std::vector<int32_t> base(p + 1, 0);
  for (int32_t st = 0; st < p; ++st) {
    base[st + 1] = base[st] + static_cast<int32_t>(schedule.stages[st].size());
  }
  const int32_t n = base[p];
  auto stage_of_node = [&](int32_t node) {
    return static_cast<int32_t>(std::upper_bound(base.begin(), base.end(), node) - base.begin()) - 1;
  };
  // Message edges producer -> consumer, matched by (forward?, receiving virtual stage, mb).
  std::map<std::tuple<bool, int32_t, int32_t>, int32_t> producer_of;
  for (int32_t st = 0; st < p; ++st) {
    for (size_t i = 0; i < schedule.stages[st].size(); ++i) {
      const PipelineOp& op = schedule.stages[st][i];
      const int32_t k = VirtualStage(schedule, op.chunk, st);
      const int32_t last = p * schedule.num_chunks - 1;
      if (op.kind == OpKind::kForward && k < last) {
        producer_of[{true, k + 1, op.microbatch}] = base[st] + static_cast<int32_t>(i);
      } else if (op.kind == OpKind::kBackwardInput && k > 0) {
        producer_of[{false, k - 1, op.microbatch}] = base[st] + static_cast<int32_t>(i);
      }
    }
  }
  std::vector<int32_t> message_to(n, -1), indegree(n, 0);
  // Sends per channel in the sender's order: (producer op index, consumer node).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> sends(2 * p);
  for (int32_t st = 0; st < p; ++st) {
    for (size_t i = 0; i < schedule.stages[st].size(); ++i) {
      const int32_t node = base[st] + static_cast<int32_t>(i);
      if (i + 1 < schedule.stages[st].size()) ++indegree[node + 1];
      const OpIo io = IoOf(schedule, st, schedule.stages[st][i]);
      if (!io.receives) continue;
      const PipelineOp& op = schedule.stages[st][i];
      auto it = producer_of.find({io.recv_forward, VirtualStage(schedule, op.chunk, st),
                                  op.microbatch});
      if (it == producer_of.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "schedule '", schedule.name, "': stage ", st, " op ", i, " (", ToString(op),
            ") receives a message no op sends"));
      }
      message_to[it->second] = node;
      ++indegree[node];
    }
  }
  // Topological order (Kahn).
  std::vector<int32_t> order, ready;
  for (int32_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) ready.push_back(v);
  }
  while (!ready.empty()) {
    const int32_t v = ready.back();
    ready.pop_back();
    order.push_back(v);
    const int32_t st = stage_of_node(v);
    for (int32_t w : {v + 1 < base[st + 1] ? v + 1 : -1, message_to[v]}) {
      if (w >= 0 && --indegree[w] == 0) ready.push_back(w);
    }
  }
  if (static_cast<int32_t>(order.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule '", schedule.name, "' has a circular wait (run ValidateSchedule)"));
  }
  // earliest[v * p + S]: the first op index on stage S that depends on op v (its
  // descendants on a stage are a suffix of that stage's list); INT32_MAX if none.
  std::vector<int32_t> earliest(static_cast<size_t>(n) * p, INT32_MAX);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int32_t v = *it, st = stage_of_node(v);
    int32_t* e = &earliest[static_cast<size_t>(v) * p];
    e[st] = v - base[st];
    for (int32_t w : {v + 1 < base[st + 1] ? v + 1 : -1, message_to[v]}) {
      if (w < 0) continue;
      const int32_t* f = &earliest[static_cast<size_t>(w) * p];
      for (int32_t x = 0; x < p; ++x) e[x] = std::min(e[x], f[x]);
    }
  }
  for (int32_t st = 0; st < p; ++st) {
    for (size_t i = 0; i < schedule.stages[st].size(); ++i) {
      const OpIo io = IoOf(schedule, st, schedule.stages[st][i]);
      const int32_t node = base[st] + static_cast<int32_t>(i);
      if (io.sends && message_to[node] >= 0) {
        sends[io.send_channel].push_back({static_cast<int32_t>(i), message_to[node]});
      }
    }
  }
  // While message j is unconsumed, the sender can have started every later send whose op
  // does not depend on the consumer's op for j (make that op arbitrarily slow).
  std::vector<int32_t> most(2 * p, 0);
  for (int32_t c = 0; c < 2 * p; ++c) {
    const int32_t sender = c / 2;
    const auto& list = sends[c];
    for (size_t j = 0; j < list.size(); ++j) {
      const int32_t limit = earliest[static_cast<size_t>(list[j].second) * p + sender];
      size_t k = j + 1;
      while (k < list.size() && list[k].first < limit) ++k;
      most[c] = std::max<int32_t>(most[c], static_cast<int32_t>(k - j));
    }
  }
  return ToEdgeSlots(most, p);
}

absl::StatusOr<EdgeSlots> EdgeQuotas(const PipelineSchedule& schedule,
                                     std::optional<int32_t> cap) {
  absl::StatusOr<EdgeSlots> minimum = MinimumEdgeSlots(schedule);
  if (!minimum.ok()) return minimum.status();
  absl::StatusOr<EdgeSlots> free = UnthrottledEdgeSlots(schedule);
  if (!free.ok()) return free.status();
  for (size_t s = 0; s < minimum->forward.size(); ++s) {
    for (auto [q, f] : {std::make_pair(&minimum->forward[s], free->forward[s]),
                        std::make_pair(&minimum->backward[s], free->backward[s])}) {
      const int32_t want = cap ? std::min(f, *cap) : f;
      *q = std::max(*q, want);
    }
  }
  return minimum;
}

}  // namespace mxmaca::scheduler
