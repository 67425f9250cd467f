// layers/moe/dispatch/all_gather_dispatcher.cc: padded all-gather + select, and the
// -0.0-filled reduce-scatter.
#include "layers/moe/dispatch/all_gather_dispatcher.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "layers/moe/dispatch/internal/step_chain.h"

namespace mxmaca::layers::moe::dispatch {

absl::StatusOr<std::unique_ptr<AllGatherDispatcher>> AllGatherDispatcher::Create(
    DispatcherOptions options) {
  absl::Status s = ValidateDispatcherOptions(options);
  if (!s.ok()) return s;
  return std::unique_ptr<AllGatherDispatcher>(new AllGatherDispatcher(std::move(options)));
}

namespace {

struct Call {
  std::shared_ptr<const DispatchLayout> layout;
  std::vector<float> padded;    // [Tmax, h] this rank's rows (dispatch)
  std::vector<float> gathered;  // [P * Tmax, h] (dispatch: all rows; combine: scattered)
  std::vector<float> out;
};

void Finish(const std::shared_ptr<Call>& call, const RowsDone& done, absl::Status status) {
  if (!status.ok()) {
    done(status);
    return;
  }
  done(std::move(call->out));
}

}  // namespace

void AllGatherDispatcher::MoveToExperts(std::shared_ptr<const DispatchLayout> layout,
                                        const float* rows, RowsDone done) {
  auto call = std::make_shared<Call>();
  call->layout = std::move(layout);
  const DispatchLayout& l = *call->layout;
  const int me = ep_rank(), P = ep_size();
  const int64_t h = l.hidden(), tmax = l.MaxInputRows();
  std::shared_ptr<BufferPool> pool = pool_;
  call->out = pool->Take(l.OutputRows(me) * h);
  const DispatcherOptions& o = options_;
  std::vector<internal::Step> steps;
  if (tmax > 0) {  // every rank computes the same tmax, so all skip together
    steps.push_back([call, rows, me, P, h, tmax, pool, &o](internal::StepContext& ctx) {
      const int64_t mine = call->layout->InputRows(me) * h;
      call->padded = pool->Take(tmax * h);
      if (mine > 0) std::memcpy(call->padded.data(), rows, mine * sizeof(float));
      std::fill(call->padded.begin() + mine, call->padded.end(), 0.0f);  // padding rows
      call->gathered = pool->Take(P * tmax * h);
      o.comm->AllGather(o.ep_group, call->padded.data(), call->gathered.data(), tmax * h,
                        transport::DataType::kFloat32, ctx.Done());
      return absl::OkStatus();
    });
    steps.push_back([call, me, P, h, tmax, pool](internal::StepContext&) {
      const DispatchLayout& l = *call->layout;
      const int L = l.num_local_experts();
      for (int s = 0; s < P; ++s) {
        for (int e = me * L; e < (me + 1) * L; ++e) {
          const int64_t c = l.Count(s, e);
          if (c == 0) continue;
          std::memcpy(call->out.data() + l.OutputOffset(s, e) * h,
                      call->gathered.data() + (s * tmax + l.InputOffset(s, e)) * h,
                      c * h * sizeof(float));
        }
      }
      pool->Give(std::move(call->gathered));
      pool->Give(std::move(call->padded));
      return absl::OkStatus();
    });
  }
  internal::RunSteps(
      std::move(steps),
      [call, done = std::move(done)](absl::Status status) { Finish(call, done, status); },
      o.executor);
}

void AllGatherDispatcher::MoveFromExperts(std::shared_ptr<const DispatchLayout> layout,
                                          const float* rows, RowsDone done) {
  auto call = std::make_shared<Call>();
  call->layout = std::move(layout);
  const DispatchLayout& l = *call->layout;
  const int me = ep_rank(), P = ep_size();
  const int64_t h = l.hidden(), tmax = l.MaxInputRows();
  std::shared_ptr<BufferPool> pool = pool_;
  const DispatcherOptions& o = options_;
  std::vector<internal::Step> steps;
  if (tmax > 0) {
    steps.push_back([call, rows, me, P, h, tmax, pool, &o](internal::StepContext& ctx) {
      const DispatchLayout& l = *call->layout;
      const int L = l.num_local_experts();
      // -0.0f is the exact additive identity (see the header).
      call->gathered = pool->Take(P * tmax * h);
      std::fill(call->gathered.begin(), call->gathered.end(), -0.0f);
      for (int s = 0; s < P; ++s) {
        for (int e = me * L; e < (me + 1) * L; ++e) {
          const int64_t c = l.Count(s, e);
          if (c == 0) continue;
          std::memcpy(call->gathered.data() + (s * tmax + l.InputOffset(s, e)) * h,
                      rows + l.OutputOffset(s, e) * h, c * h * sizeof(float));
        }
      }
      call->out = pool->Take(tmax * h);
      o.comm->ReduceScatterSum(o.ep_group, call->gathered.data(), call->out.data(), tmax * h,
                               ctx.Done());
      return absl::OkStatus();
    });
  }
  const int64_t keep = l.InputRows(me) * h;
  internal::RunSteps(
      std::move(steps),
      [call, keep, pool, done = std::move(done)](absl::Status status) {
        pool->Give(std::move(call->gathered));
        call->out.resize(keep);  // drop the padding rows (and size 0 when nothing moved)
        Finish(call, done, status);
      },
      o.executor);
}

}  // namespace mxmaca::layers::moe::dispatch
