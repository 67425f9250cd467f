// layers/moe/dispatch/token_dispatcher.cc: the shared Dispatch / Combine sequencing, the
// all-gather count exchange and the blocking helpers.
#include "layers/moe/dispatch/token_dispatcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace mxmaca::layers::moe::dispatch {

absl::Status ValidateDispatcherOptions(const DispatcherOptions& options) {
  if (options.comm == nullptr) return absl::InvalidArgumentError("MoE dispatcher: comm is null");
  const transport::ProcessGroup& g = options.ep_group;
  if (g.size() < 1 || g.rank_in_group < 0 || g.rank_in_group >= g.size()) {
    return absl::InvalidArgumentError(absl::StrCat("MoE dispatcher: ep_group ", g.name(), " has ",
                                                   g.size(), " ranks and rank_in_group ",
                                                   g.rank_in_group));
  }
  if (options.num_experts < 1 || options.num_experts % g.size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE dispatcher: --num-experts ", options.num_experts,
                     " is not a positive multiple of --expert-model-parallel-size ", g.size()));
  }
  if (options.comm->rank() != g.global_rank()) {
    return absl::InvalidArgumentError(absl::StrCat("MoE dispatcher: communicator of rank ",
                                                   options.comm->rank(), " but ep_group ", g.name(),
                                                   " is the view of rank ", g.global_rank()));
  }
  return absl::OkStatus();
}

void TokenDispatcher::Dispatch(const float* rows, int64_t num_rows, int64_t hidden,
                               const std::vector<int64_t>& tokens_per_expert, DispatchDone done) {
  absl::Status local =
      ValidateLocalInput(rows, num_rows, hidden, tokens_per_expert, options_.num_experts);
  std::vector<int64_t> header =
      MakeCountHeader(local.ok(), hidden, tokens_per_expert, options_.num_experts);
  const int me = ep_rank();
  ExchangeCounts(
      std::move(header), [this, rows, me, local, done = std::move(done)](
                             absl::StatusOr<std::shared_ptr<const DispatchLayout>> layout) mutable {
        if (!local.ok()) {
          done(absl::InvalidArgumentError(
              absl::StrCat("MoE dispatch on EP rank ", me, ": ", local.message())));
          return;
        }
        if (!layout.ok()) {
          done(layout.status());
          return;
        }
        std::shared_ptr<const DispatchLayout> shared = *std::move(layout);
        MoveToExperts(shared, rows,
                      [shared, me, done = std::move(done)](absl::StatusOr<std::vector<float>> out) {
                        if (!out.ok()) {
                          done(out.status());
                          return;
                        }
                        DispatchResult result;
                        result.rows = *std::move(out);
                        result.tokens_per_local_expert = shared->TokensPerLocalExpert(me);
                        result.layout = shared;
                        done(std::move(result));
                      });
      });
}

namespace {

absl::Status CheckLayout(const DispatchLayout* layout, const transport::ProcessGroup& group,
                         int64_t num_rows, int64_t expected, const char* what) {
  if (layout == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("MoE ", what, ": layout is null"));
  }
  if (layout->group_id() != group.id || layout->ep_rank() != group.rank_in_group ||
      layout->ep_size() != group.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MoE ", what, ": layout of group ", layout->group_id(), " EP rank ", layout->ep_rank(),
        " used on ", group.name(), " (group ", group.id, ") EP rank ", group.rank_in_group));
  }
  if (num_rows != expected) {
    return absl::FailedPreconditionError(absl::StrCat("MoE ", what, " on EP rank ",
                                                      group.rank_in_group, ": got ", num_rows,
                                                      " rows, the layout says ", expected));
  }
  return absl::OkStatus();
}

}  // namespace

void TokenDispatcher::Combine(const std::shared_ptr<const DispatchLayout>& layout,
                              const float* expert_rows, int64_t num_rows, RowsDone done) {
  const int64_t expected = layout ? layout->OutputRows(ep_rank()) : 0;
  absl::Status s = CheckLayout(layout.get(), options_.ep_group, num_rows, expected, "combine");
  if (!s.ok()) {
    done(s);
    return;
  }
  MoveFromExperts(layout, expert_rows, std::move(done));
}

void TokenDispatcher::CombineBackward(const std::shared_ptr<const DispatchLayout>& layout,
                                      const float* grad, int64_t num_rows, RowsDone done) {
  const int64_t expected = layout ? layout->InputRows(ep_rank()) : 0;
  absl::Status s =
      CheckLayout(layout.get(), options_.ep_group, num_rows, expected, "combine backward");
  if (!s.ok()) {
    done(s);
    return;
  }
  MoveToExperts(layout, grad, std::move(done));
}

void TokenDispatcher::ExchangeCountsByAllGather(std::vector<int64_t> header, LayoutDone done) {
  struct State {
    std::vector<int64_t> header;
    std::vector<int64_t> gathered;
  };
  auto st = std::make_shared<State>();
  st->header = std::move(header);
  st->gathered.resize(st->header.size() * ep_size());
  const DispatcherOptions& o = options_;
  std::vector<internal::Step> steps;
  steps.push_back([st, &o](internal::StepContext& ctx) {
    o.comm->AllGather(o.ep_group, st->header.data(), st->gathered.data(),
                      static_cast<int64_t>(st->header.size()), transport::DataType::kInt64,
                      ctx.Done());
    return absl::OkStatus();
  });
  const int P = ep_size(), E = o.num_experts, me = ep_rank();
  const int64_t group_id = o.ep_group.id;
  internal::RunSteps(
      std::move(steps),
      [st, P, E, me, group_id, done = std::move(done)](absl::Status status) {
        if (!status.ok()) {
          done(status);
          return;
        }
        absl::StatusOr<DispatchLayout> layout =
            DispatchLayout::Create(P, E, me, group_id, st->gathered);
        if (!layout.ok()) {
          done(layout.status());
          return;
        }
        done(std::make_shared<const DispatchLayout>(*std::move(layout)));
      },
      o.executor);
}

namespace {

// Waiter: a result slot shared with the callback, so a callback that fires after the
// waiter gave up writes into memory that is still alive.
template <typename T>
struct Waiter {
  absl::Notification notification;
  absl::StatusOr<T> result = absl::UnknownError("not completed");
};

template <typename T>
absl::StatusOr<T> Await(const std::shared_ptr<Waiter<T>>& w, absl::Duration timeout,
                        const char* what) {
  if (!w->notification.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("MoE ", what, ": no completion within ", absl::FormatDuration(timeout)));
  }
  return std::move(w->result);
}

}  // namespace

absl::StatusOr<DispatchResult> DispatchAndWait(TokenDispatcher& dispatcher, const float* rows,
                                               int64_t num_rows, int64_t hidden,
                                               const std::vector<int64_t>& tokens_per_expert,
                                               absl::Duration timeout) {
  auto w = std::make_shared<Waiter<DispatchResult>>();
  dispatcher.Dispatch(rows, num_rows, hidden, tokens_per_expert,
                      [w](absl::StatusOr<DispatchResult> r) {
                        w->result = std::move(r);
                        w->notification.Notify();
                      });
  return Await(w, timeout, "dispatch");
}

absl::StatusOr<std::vector<float>> CombineAndWait(
    TokenDispatcher& dispatcher, const std::shared_ptr<const DispatchLayout>& layout,
    const float* expert_rows, int64_t num_rows, absl::Duration timeout) {
  auto w = std::make_shared<Waiter<std::vector<float>>>();
  dispatcher.Combine(layout, expert_rows, num_rows, [w](absl::StatusOr<std::vector<float>> r) {
    w->result = std::move(r);
    w->notification.Notify();
  });
  return Await(w, timeout, "combine");
}

absl::StatusOr<std::vector<float>> DispatchBackwardAndWait(
    TokenDispatcher& dispatcher, const std::shared_ptr<const DispatchLayout>& layout,
    const float* grad, int64_t num_rows, absl::Duration timeout) {
  auto w = std::make_shared<Waiter<std::vector<float>>>();
  dispatcher.DispatchBackward(layout, grad, num_rows, [w](absl::StatusOr<std::vector<float>> r) {
    w->result = std::move(r);
    w->notification.Notify();
  });
  return Await(w, timeout, "dispatch backward");
}

absl::StatusOr<std::vector<float>> CombineBackwardAndWait(
    TokenDispatcher& dispatcher, const std::shared_ptr<const DispatchLayout>& layout,
    const float* grad, int64_t num_rows, absl::Duration timeout) {
  auto w = std::make_shared<Waiter<std::vector<float>>>();
  dispatcher.CombineBackward(layout, grad, num_rows, [w](absl::StatusOr<std::vector<float>> r) {
    w->result = std::move(r);
    w->notification.Notify();
  });
  return Await(w, timeout, "combine backward");
}

}  // namespace mxmaca::layers::moe::dispatch
