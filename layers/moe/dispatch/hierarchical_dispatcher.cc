// layers/moe/dispatch/hierarchical_dispatcher.cc: node-grouped exchange through leaders.
#include "layers/moe/dispatch/hierarchical_dispatcher.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "layers/moe/dispatch/internal/step_chain.h"

namespace mxmaca::layers::moe::dispatch {

using transport::DataType;

absl::StatusOr<NodeTopology> NodeTopology::Create(const transport::ProcessGroup& group,
                                                  int ranks_per_node) {
  if (ranks_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MoE hierarchical dispatcher: ranks_per_node is ", ranks_per_node, ", expected >= 1"));
  }
  NodeTopology t;
  int last_node_id = -1;
  for (int i = 0; i < group.size(); ++i) {
    const int node_id = group.ranks[i] / ranks_per_node;
    if (node_id != last_node_id) {
      t.members.emplace_back();
      last_node_id = node_id;
    }
    t.members.back().push_back(i);
    t.node_of.push_back(t.num_nodes() - 1);
  }
  return t;
}

absl::StatusOr<std::unique_ptr<HierarchicalDispatcher>> HierarchicalDispatcher::Create(
    DispatcherOptions options, int ranks_per_node) {
  absl::Status s = ValidateDispatcherOptions(options);
  if (!s.ok()) return s;
  absl::StatusOr<NodeTopology> t = NodeTopology::Create(options.ep_group, ranks_per_node);
  if (!t.ok()) return t.status();
  return std::unique_ptr<HierarchicalDispatcher>(
      new HierarchicalDispatcher(std::move(options), *std::move(t)));
}

namespace {

void CopyRows(float* dst, const float* src, int64_t rows, int64_t h) {
  if (rows > 0) std::memcpy(dst, src, static_cast<size_t>(rows * h) * sizeof(float));
}

// MessagePlan: where block (s, d) sits in the message between node(s) and node(d) (rows),
// and each ordered node pair's message size (rows). Same in both directions.
struct MessagePlan {
  std::vector<int64_t> block_offset;  // [P * P], index s * P + d
  std::vector<int64_t> message_rows;  // [K * K], index a * K + b (sources a, dests b)
};

MessagePlan PlanMessages(const DispatchLayout& l, const NodeTopology& t) {
  const int P = l.ep_size(), K = t.num_nodes();
  MessagePlan plan;
  plan.block_offset.assign(static_cast<size_t>(P) * P, 0);
  plan.message_rows.assign(static_cast<size_t>(K) * K, 0);
  for (int a = 0; a < K; ++a) {
    for (int b = 0; b < K; ++b) {
      int64_t offset = 0;
      for (int d : t.members[b]) {
        for (int s : t.members[a]) {
          plan.block_offset[s * P + d] = offset;
          offset += l.RowsBetween(s, d);
        }
      }
      plan.message_rows[a * K + b] = offset;
    }
  }
  return plan;
}

// Call: the buffers of one hierarchical call, alive until its `done` ran.
struct Call {
  std::shared_ptr<const DispatchLayout> layout;
  MessagePlan plan;
  // Leader only, indexed by EP rank of this node: received member buffers.
  std::vector<std::vector<float>> from_member;
  std::vector<const float*> member_rows;  // [P]: this node's member data (own: caller's)
  std::vector<std::vector<float>> to_node, from_node;  // [K] inter-node messages
  std::vector<std::vector<float>> to_member;           // [P] assembled member results
  std::vector<float> out;
};

}  // namespace

void HierarchicalDispatcher::ExchangeCounts(std::vector<int64_t> header, LayoutDone done) {
  struct State {
    std::vector<int64_t> header;
    std::vector<int64_t> matrix;  // [P, W]
  };
  const DispatcherOptions& o = options_;
  const NodeTopology& t = topology_;
  const int P = ep_size(), E = o.num_experts, me = ep_rank();
  const int my_node = t.node_of[me], leader = t.leader(my_node);
  const int64_t W = E + kCountHeaderExtra;
  auto st = std::make_shared<State>();
  st->header = std::move(header);
  st->matrix.assign(P * W, 0);
  std::vector<internal::Step> steps;
  // C1: headers to the leader.
  steps.push_back([st, &o, &t, me, my_node, leader, W](internal::StepContext& ctx) {
    if (me != leader) {
      o.comm->Send(o.ep_group, leader, st->header.data(), W, DataType::kInt64, ctx.Done());
      return absl::OkStatus();
    }
    std::memcpy(st->matrix.data() + me * W, st->header.data(), W * sizeof(int64_t));
    for (int m : t.members[my_node]) {
      if (m == me) continue;
      o.comm->Recv(o.ep_group, m, st->matrix.data() + m * W, W, DataType::kInt64, ctx.Done());
    }
    return absl::OkStatus();
  });
  // C2: node headers between leaders.
  steps.push_back([st, &o, &t, me, my_node, leader, W](internal::StepContext& ctx) {
    if (me != leader) return absl::OkStatus();
    const std::vector<int>& mine = t.members[my_node];
    for (int k = 0; k < t.num_nodes(); ++k) {
      if (k == my_node) continue;
      o.comm->Send(o.ep_group, t.leader(k), st->matrix.data() + mine.front() * W,
                   static_cast<int64_t>(mine.size()) * W, DataType::kInt64, ctx.Done());
      o.comm->Recv(o.ep_group, t.leader(k), st->matrix.data() + t.members[k].front() * W,
                   static_cast<int64_t>(t.members[k].size()) * W, DataType::kInt64, ctx.Done());
    }
    return absl::OkStatus();
  });
  // C3: the full matrix to the members.
  steps.push_back([st, &o, &t, me, my_node, leader, P, W](internal::StepContext& ctx) {
    if (me != leader) {
      o.comm->Recv(o.ep_group, leader, st->matrix.data(), P * W, DataType::kInt64, ctx.Done());
      return absl::OkStatus();
    }
    for (int m : t.members[my_node]) {
      if (m == me) continue;
      o.comm->Send(o.ep_group, m, st->matrix.data(), P * W, DataType::kInt64, ctx.Done());
    }
    return absl::OkStatus();
  });
  const int64_t group_id = o.ep_group.id;
  internal::RunSteps(
      std::move(steps),
      [st, P, E, me, group_id, done = std::move(done)](absl::Status status) {
        if (!status.ok()) {
          done(status);
          return;
        }
        absl::StatusOr<DispatchLayout> layout =
            DispatchLayout::Create(P, E, me, group_id, st->matrix);
        if (!layout.ok()) {
          done(layout.status());
          return;
        }
        done(std::make_shared<const DispatchLayout>(*std::move(layout)));
      },
      o.executor);
}

namespace {

// The three steps of a row exchange, in one direction.
//   gather_rows(m):  rows member m hands its leader (D1: T_m; R1: N_m)
//   result_rows(m):  rows member m gets back (D3: N_m; R3: T_m)
//   pack(call, a, b, msg): fill the message from node a's leader to node b's
//   assemble(call, m, dst): build member m's result from member_rows and from_node
struct Direction {
  std::function<int64_t(const DispatchLayout&, int)> gather_rows;
  std::function<int64_t(const DispatchLayout&, int)> result_rows;
  // message_rows(plan, from, to, K)
  std::function<int64_t(const MessagePlan&, int, int, int)> message_rows;
  std::function<void(const Call&, const NodeTopology&, int, int, float*)> pack;
  std::function<void(const Call&, const NodeTopology&, int, float*)> assemble;
};

// Dispatch direction: message (a -> b) carries blocks (s in a, d in b) from s's input.
Direction ToExpertsDirection() {
  Direction dir;
  dir.gather_rows = [](const DispatchLayout& l, int m) { return l.InputRows(m); };
  dir.result_rows = [](const DispatchLayout& l, int m) { return l.OutputRows(m); };
  dir.message_rows = [](const MessagePlan& p, int from, int to, int K) {
    return p.message_rows[from * K + to];
  };
  dir.pack = [](const Call& c, const NodeTopology& t, int a, int b, float* msg) {
    const DispatchLayout& l = *c.layout;
    const int P = l.ep_size(), L = l.num_local_experts();
    const int64_t h = l.hidden();
    for (int d : t.members[b]) {
      for (int s : t.members[a]) {
        CopyRows(msg + c.plan.block_offset[s * P + d] * h,
                 c.member_rows[s] + l.InputOffset(s, d * L) * h, l.RowsBetween(s, d), h);
      }
    }
  };
  dir.assemble = [](const Call& c, const NodeTopology& t, int d, float* dst) {
    const DispatchLayout& l = *c.layout;
    const int P = l.ep_size(), L = l.num_local_experts();
    const int64_t h = l.hidden();
    const int my_node = t.node_of[d];
    for (int l_idx = 0; l_idx < L; ++l_idx) {
      const int e = d * L + l_idx;
      for (int s = 0; s < P; ++s) {
        const int64_t rows = l.Count(s, e);
        if (rows == 0) continue;
        const float* src;
        if (t.node_of[s] == my_node) {
          src = c.member_rows[s] + l.InputOffset(s, e) * h;
        } else {
          src =
              c.from_node[t.node_of[s]].data() +
              (c.plan.block_offset[s * P + d] + l.InputOffset(s, e) - l.InputOffset(s, d * L)) * h;
        }
        CopyRows(dst + l.OutputOffset(s, e) * h, src, rows, h);
      }
    }
  };
  return dir;
}

// Combine direction: message (b -> a) carries blocks (s in a, d in b) of d's expert outputs.
Direction FromExpertsDirection() {
  Direction dir;
  dir.gather_rows = [](const DispatchLayout& l, int m) { return l.OutputRows(m); };
  dir.result_rows = [](const DispatchLayout& l, int m) { return l.InputRows(m); };
  dir.message_rows = [](const MessagePlan& p, int from, int to, int K) {
    return p.message_rows[to * K + from];  // sources live on `to`, experts on `from`
  };
  dir.pack = [](const Call& c, const NodeTopology& t, int b, int a, float* msg) {
    const DispatchLayout& l = *c.layout;
    const int P = l.ep_size(), L = l.num_local_experts();
    const int64_t h = l.hidden();
    for (int d : t.members[b]) {
      for (int s : t.members[a]) {
        const int64_t block = c.plan.block_offset[s * P + d] - l.InputOffset(s, d * L);
        for (int e = d * L; e < (d + 1) * L; ++e) {
          CopyRows(msg + (block + l.InputOffset(s, e)) * h,
                   c.member_rows[d] + l.OutputOffset(s, e) * h, l.Count(s, e), h);
        }
      }
    }
  };
  dir.assemble = [](const Call& c, const NodeTopology& t, int s, float* dst) {
    const DispatchLayout& l = *c.layout;
    const int P = l.ep_size(), L = l.num_local_experts();
    const int64_t h = l.hidden();
    const int my_node = t.node_of[s];
    for (int d = 0; d < P; ++d) {
      if (t.node_of[d] == my_node) {
        for (int e = d * L; e < (d + 1) * L; ++e) {
          CopyRows(dst + l.InputOffset(s, e) * h, c.member_rows[d] + l.OutputOffset(s, e) * h,
                   l.Count(s, e), h);
        }
      } else {  // the whole block is contiguous on both sides
        CopyRows(dst + l.InputOffset(s, d * L) * h,
                 c.from_node[t.node_of[d]].data() + c.plan.block_offset[s * P + d] * h,
                 l.RowsBetween(s, d), h);
      }
    }
  };
  return dir;
}

void RunDirection(const DispatcherOptions& o, const NodeTopology& t,
                  std::shared_ptr<BufferPool> pool, int me,
                  std::shared_ptr<const DispatchLayout> layout, const float* rows,
                  std::shared_ptr<const Direction> dir, RowsDone done) {
  auto call = std::make_shared<Call>();
  call->layout = std::move(layout);
  call->plan = PlanMessages(*call->layout, t);
  const DispatchLayout& l = *call->layout;
  const int P = l.ep_size(), K = t.num_nodes();
  const int64_t h = l.hidden();
  const int my_node = t.node_of[me], leader = t.leader(my_node);
  call->out = pool->Take(dir->result_rows(l, me) * h);
  call->member_rows.assign(P, nullptr);
  call->member_rows[me] = rows;
  std::vector<internal::Step> steps;
  // 1: members' rows to the leader.
  steps.push_back([call, dir, pool, &o, &t, me, my_node, leader, h](internal::StepContext& ctx) {
    const DispatchLayout& l = *call->layout;
    if (me != leader) {
      o.comm->Send(o.ep_group, leader, call->member_rows[me], dir->gather_rows(l, me) * h,
                   DataType::kFloat32, ctx.Done());
      return absl::OkStatus();
    }
    call->from_member.resize(l.ep_size());
    for (int m : t.members[my_node]) {
      if (m == me) continue;
      call->from_member[m] = pool->Take(dir->gather_rows(l, m) * h);
      call->member_rows[m] = call->from_member[m].data();
      o.comm->Recv(o.ep_group, m, call->from_member[m].data(), dir->gather_rows(l, m) * h,
                   DataType::kFloat32, ctx.Done());
    }
    return absl::OkStatus();
  });
  // 2: one message per ordered pair of leaders.
  steps.push_back([call, dir, pool, &o, &t, me, my_node, leader, h, K](internal::StepContext& ctx) {
    if (me != leader) return absl::OkStatus();
    call->to_node.resize(K);
    call->from_node.resize(K);
    for (int k = 0; k < K; ++k) {
      if (k == my_node) continue;
      call->to_node[k] = pool->Take(dir->message_rows(call->plan, my_node, k, K) * h);
      dir->pack(*call, t, my_node, k, call->to_node[k].data());
      call->from_node[k] = pool->Take(dir->message_rows(call->plan, k, my_node, K) * h);
      o.comm->Send(o.ep_group, t.leader(k), call->to_node[k].data(),
                   static_cast<int64_t>(call->to_node[k].size()), DataType::kFloat32, ctx.Done());
      o.comm->Recv(o.ep_group, t.leader(k), call->from_node[k].data(),
                   static_cast<int64_t>(call->from_node[k].size()), DataType::kFloat32, ctx.Done());
    }
    return absl::OkStatus();
  });
  // 3: every member's result, assembled by the leader.
  steps.push_back([call, dir, pool, &o, &t, me, my_node, leader, h](internal::StepContext& ctx) {
    const DispatchLayout& l = *call->layout;
    if (me != leader) {
      o.comm->Recv(o.ep_group, leader, call->out.data(), static_cast<int64_t>(call->out.size()),
                   DataType::kFloat32, ctx.Done());
      return absl::OkStatus();
    }
    call->to_member.resize(l.ep_size());
    for (int m : t.members[my_node]) {
      if (m == me) continue;
      call->to_member[m] = pool->Take(dir->result_rows(l, m) * h);
      dir->assemble(*call, t, m, call->to_member[m].data());
      o.comm->Send(o.ep_group, m, call->to_member[m].data(),
                   static_cast<int64_t>(call->to_member[m].size()), DataType::kFloat32, ctx.Done());
    }
    dir->assemble(*call, t, me, call->out.data());
    return absl::OkStatus();
  });
  internal::RunSteps(
      std::move(steps),
      [call, pool, done = std::move(done)](absl::Status status) {
        for (auto* buffers :
             {&call->from_member, &call->to_node, &call->from_node, &call->to_member}) {
          for (std::vector<float>& b : *buffers) pool->Give(std::move(b));
          buffers->clear();
        }
        if (!status.ok()) {
          done(status);
          return;
        }
        done(std::move(call->out));
      },
      o.executor);
}

}  // namespace

void HierarchicalDispatcher::MoveToExperts(std::shared_ptr<const DispatchLayout> layout,
                                           const float* rows, RowsDone done) {
  RunDirection(options_, topology_, pool_, ep_rank(), std::move(layout), rows,
               std::make_shared<const Direction>(ToExpertsDirection()), std::move(done));
}

void HierarchicalDispatcher::MoveFromExperts(std::shared_ptr<const DispatchLayout> layout,
                                             const float* rows, RowsDone done) {
  RunDirection(options_, topology_, pool_, ep_rank(), std::move(layout), rows,
               std::make_shared<const Direction>(FromExpertsDirection()), std::move(done));
}

}  // namespace mxmaca::layers::moe::dispatch
