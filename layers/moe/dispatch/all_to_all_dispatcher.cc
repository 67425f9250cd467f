// layers/moe/dispatch/all_to_all_dispatcher.cc: splits, all-to-all-v and regroup.
#include "layers/moe/dispatch/all_to_all_dispatcher.h"

#include <utility>

#include "layers/moe/dispatch/internal/step_chain.h"

namespace mxmaca::layers::moe::dispatch {

absl::StatusOr<std::unique_ptr<AllToAllDispatcher>> AllToAllDispatcher::Create(
    DispatcherOptions options) {
  absl::Status s = ValidateDispatcherOptions(options);
  if (!s.ok()) return s;
  return std::unique_ptr<AllToAllDispatcher>(new AllToAllDispatcher(std::move(options)));
}

namespace {

// Splits: element counts and displacements for one all-to-all-v, per EP rank.
struct Splits {
  std::vector<int64_t> counts, displs;
};

// ToExperts: what rank `me` sends (its input, in place) and receives (source-major blocks).
void ToExpertSplits(const DispatchLayout& l, int me, Splits* send, Splits* recv) {
  const int P = l.ep_size(), L = l.num_local_experts();
  const int64_t h = l.hidden();
  send->counts.resize(P);
  send->displs.resize(P);
  recv->counts.resize(P);
  recv->displs.resize(P);
  int64_t offset = 0;
  for (int j = 0; j < P; ++j) {
    send->counts[j] = l.RowsBetween(me, j) * h;
    send->displs[j] = l.InputOffset(me, j * L) * h;
    recv->counts[j] = l.RowsBetween(j, me) * h;
    recv->displs[j] = offset;
    offset += recv->counts[j];
  }
}

// Buffers of one call, alive until its `done` ran.
struct Call {
  std::shared_ptr<const DispatchLayout> layout;
  Splits to_experts_send, to_experts_recv;  // the dispatch direction's splits
  std::vector<float> staging;               // source-major blocks (L > 1)
  std::vector<float> out;
};

}  // namespace

void AllToAllDispatcher::MoveToExperts(std::shared_ptr<const DispatchLayout> layout,
                                       const float* rows, RowsDone done) {
  auto call = std::make_shared<Call>();
  call->layout = std::move(layout);
  const DispatchLayout& l = *call->layout;
  const int me = ep_rank();
  ToExpertSplits(l, me, &call->to_experts_send, &call->to_experts_recv);
  const int64_t n = l.OutputRows(me) * l.hidden();
  const bool regroup = l.num_local_experts() > 1;
  std::shared_ptr<BufferPool> pool = pool_;
  call->out = pool->Take(n);
  if (regroup) call->staging = pool->Take(n);
  const DispatcherOptions& o = options_;
  std::vector<internal::Step> steps;
  steps.push_back([call, rows, regroup, &o](internal::StepContext& ctx) {
    float* recv = regroup ? call->staging.data() : call->out.data();
    o.comm->AllToAllV(o.ep_group, rows, call->to_experts_send.counts, call->to_experts_send.displs,
                      recv, call->to_experts_recv.counts, call->to_experts_recv.displs,
                      transport::DataType::kFloat32, ctx.Done());
    return absl::OkStatus();
  });
  if (regroup) {
    steps.push_back([call, me, pool](internal::StepContext&) {
      GatherExpertInputs(*call->layout, me, call->staging.data(), call->out.data());
      pool->Give(std::move(call->staging));
      return absl::OkStatus();
    });
  }
  internal::RunSteps(
      std::move(steps),
      [call, done = std::move(done)](absl::Status status) {
        if (!status.ok()) {
          done(status);
          return;
        }
        done(std::move(call->out));
      },
      o.executor);
}

void AllToAllDispatcher::MoveFromExperts(std::shared_ptr<const DispatchLayout> layout,
                                         const float* rows, RowsDone done) {
  auto call = std::make_shared<Call>();
  call->layout = std::move(layout);
  const DispatchLayout& l = *call->layout;
  const int me = ep_rank();
  // The reverse exchange: send what was received, receive what was sent.
  ToExpertSplits(l, me, &call->to_experts_send, &call->to_experts_recv);
  const bool regroup = l.num_local_experts() > 1;
  std::shared_ptr<BufferPool> pool = pool_;
  call->out = pool->Take(l.InputRows(me) * l.hidden());
  const DispatcherOptions& o = options_;
  std::vector<internal::Step> steps;
  steps.push_back([call, rows, regroup, me, pool, &o](internal::StepContext& ctx) {
    const float* send = rows;
    if (regroup) {
      const DispatchLayout& l = *call->layout;
      call->staging = pool->Take(l.OutputRows(me) * l.hidden());
      ScatterExpertOutputs(l, me, rows, call->staging.data());
      send = call->staging.data();
    }
    o.comm->AllToAllV(o.ep_group, send, call->to_experts_recv.counts, call->to_experts_recv.displs,
                      call->out.data(), call->to_experts_send.counts, call->to_experts_send.displs,
                      transport::DataType::kFloat32, ctx.Done());
    return absl::OkStatus();
  });
  internal::RunSteps(
      std::move(steps),
      [call, pool, done = std::move(done)](absl::Status status) {
        pool->Give(std::move(call->staging));
        if (!status.ok()) {
          done(status);
          return;
        }
        done(std::move(call->out));
      },
      o.executor);
}

}  // namespace mxmaca::layers::moe::dispatch
