// actors/stage_actor.cc: see stage_actor.h.
#include "actors/stage_actor.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <tuple>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/elementwise.h"
#include "layers/grad_clip.h"

namespace mxmaca::actors {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs `fn` and turns an exception into an error status (tasks must not throw).
template <typename Fn>
absl::Status RunGuarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exception: ", e.what()));
  } catch (...) {
    return absl::InternalError("unknown exception");
  }
}

// (iteration, eval, micro-batch) -> that micro-batch's data.
using BatchKey = std::tuple<int64_t, bool, int32_t>;

struct StageState {
  StageActorConfig cfg;
  bool active = false;         // an iteration's schedule is in progress
  bool finishing = false;      // all ops done, waiting for the grad-norm task
  RunStageIteration run;
  size_t next_op = 0;
  bool op_running = false;
  std::map<BatchKey, std::shared_ptr<const data::GptMicroBatch>> batches;
  std::map<int32_t, double> microbatch_tokens;  // last stage: unmasked tokens per mb
  double loss_sum = 0.0;
  double num_tokens = 0.0;
  double busy_seconds = 0.0;
  Clock::time_point start;
  std::vector<TraceSpan> spans;  // with cfg.trace

  std::string Name() const { return absl::StrCat("stage ", cfg.stage); }
};

using StagePointer = StageActorHandle::stateful_pointer<StageState>;

void Fail(StagePointer self, int64_t iteration, int32_t microbatch, const std::string& op,
          const std::string& message) {
  auto& st = self->state;
  self->send(st.cfg.coordinator,
             StageFailed{st.Name(), iteration, microbatch, op, message});
}

MicroBatchKey KeyFor(const StageState& st, const scheduler::PipelineOp& op) {
  MicroBatchKey key;
  key.iteration = st.run.iteration;
  key.microbatch = op.microbatch;
  key.chunk = op.chunk;
  key.global_microbatch = st.run.first_global_microbatch + op.microbatch;
  key.eval = st.run.eval;
  return key;
}

// Builds the report of the iteration in progress (grad statistics filled by the caller).
StageIterationDone MakeReport(const StageState& st) {
  StageIterationDone done;
  done.stage = st.cfg.stage;
  done.iteration = st.run.iteration;
  done.eval = st.run.eval;
  done.loss_sum = st.loss_sum;
  done.num_tokens = st.num_tokens;
  done.busy_seconds = st.busy_seconds;
  done.wall_seconds = SecondsSince(st.start);
  done.peak_activation_bytes = st.cfg.program->peak_activation_bytes();
  return done;
}

// Moves the recorded spans into a report (MakeReport copies nothing big).
void AttachSpans(StageState& st, StageIterationDone* done) {
  done->spans = std::move(st.spans);
  st.spans.clear();
}

// After the last op: eval reports at once; training first computes the gradient
// statistics on the strand (after the last W) and reports in the GradNormFinished handler.
void FinishIteration(StagePointer self) {
  auto& st = self->state;
  if (st.run.eval) {
    st.active = false;
    StageIterationDone done = MakeReport(st);
    AttachSpans(st, &done);
    self->send(st.cfg.coordinator, std::move(done));
    return;
  }
  st.finishing = true;
  auto program = st.cfg.program;
  auto exec = st.cfg.exec;
  StageActorHandle me = self;
  const int64_t iteration = st.run.iteration;
  st.cfg.strand->Post([program, exec, me, iteration] {
    std::vector<layers::GradSpan> spans = program->parameters().GradSpans();
    const double sq = layers::GradNormSquared(exec, spans);
    caf::anon_send(me, GradNormFinished{iteration, sq, std::isfinite(sq)});
  });
}

void TryAdvance(StagePointer self) {
  auto& st = self->state;
  if (!st.active || st.op_running || st.finishing) return;
  if (st.next_op == st.run.schedule.size()) {
    FinishIteration(self);
    return;
  }
  const scheduler::PipelineOp op = st.run.schedule[st.next_op];
  const MicroBatchKey key = KeyFor(st, op);
  const size_t op_index = st.next_op;
  const int64_t iteration = st.run.iteration;
  auto program = st.cfg.program;
  StageActorHandle me = self;

  // Runs `body` on the strand, timed, and reports OpFinished to this actor.
  auto post = [&](auto body) {
    st.op_running = true;
    st.cfg.strand->Post([me, op_index, iteration, body] {
      OpFinished msg;
      msg.iteration = iteration;
      msg.op_index = op_index;
      msg.start_us = TraceClockMicros();
      const auto t0 = Clock::now();
      absl::Status s = RunGuarded([&] { return body(&msg); });
      msg.seconds = SecondsSince(t0);
      msg.ok = s.ok();
      if (!s.ok()) msg.error = std::string(s.message());
      caf::anon_send(me, std::move(msg));
    });
  };

  switch (op.kind) {
    case scheduler::OpKind::kForward: {
      std::shared_ptr<const data::GptMicroBatch> batch;
      if (st.cfg.is_first || st.cfg.is_last) {
        auto it = st.batches.find(BatchKey{iteration, st.run.eval, op.microbatch});
        if (it == st.batches.end()) return;  // wait for the data
        batch = it->second;
      }
      post([program, key, batch](OpFinished* msg) {
        static const data::GptMicroBatch kEmpty;
        return program->Forward(key, batch ? *batch : kEmpty, nullptr, &msg->forward);
      });
      return;
    }
    case scheduler::OpKind::kBackwardInput: {
      float scale = 1.0f;
      if (st.cfg.is_last && !st.run.calculate_per_token_loss) {
        // Megatron (schedules.py forward_step): each micro-batch's loss is divided by its
        // token count and by the number of micro-batches.
        const double tokens = std::max(1.0, st.microbatch_tokens[op.microbatch]);
        scale = static_cast<float>(1.0 / (tokens * st.run.num_microbatches));
      }
      post([program, key, scale](OpFinished*) {
        Activation d_input;
        return program->BackwardInput(key, nullptr, scale, &d_input);
      });
      return;
    }
    case scheduler::OpKind::kBackwardWeight:
      post([program, key](OpFinished*) { return program->BackwardWeight(key); });
      return;
  }
}

StageActorHandle::behavior_type StageBehavior(StagePointer self, StageActorConfig config) {
  self->state.cfg = std::move(config);
  return {
      [=](RunStageIteration& run) {
        auto& st = self->state;
        if (st.active) {
          Fail(self, run.iteration, -1, "run",
               absl::StrCat("iteration ", run.iteration, " started while iteration ",
                            st.run.iteration, " is still running"));
          return;
        }
        st.run = std::move(run);
        st.active = true;
        st.finishing = false;
        st.next_op = 0;
        st.loss_sum = 0.0;
        st.num_tokens = 0.0;
        st.busy_seconds = 0.0;
        st.microbatch_tokens.clear();
        st.start = Clock::now();
        st.cfg.program->ResetPeakActivationBytes();
        TryAdvance(self);
      },
      [=](MicroBatchData& d) {
        auto& st = self->state;
        if (!d.batch) {
          Fail(self, d.iteration, d.microbatch, "data", "micro-batch message without data");
          return;
        }
        st.batches[BatchKey{d.iteration, d.eval, d.microbatch}] = std::move(d.batch);
        TryAdvance(self);
      },
      [=](OpFinished& f) {
        auto& st = self->state;
        if (!st.active || f.iteration != st.run.iteration || f.op_index != st.next_op) {
          Fail(self, f.iteration, -1, "op",
               absl::StrCat("unexpected completion of op ", f.op_index, " of iteration ",
                            f.iteration, " (running op ", st.next_op, " of iteration ",
                            st.run.iteration, ")"));
          return;
        }
        const scheduler::PipelineOp op = st.run.schedule[f.op_index];
        st.op_running = false;
        st.busy_seconds += f.seconds;
        if (!f.ok) {
          st.active = false;
          Fail(self, f.iteration, op.microbatch, scheduler::ToString(op), f.error);
          return;
        }
        if (st.cfg.trace) {
          TraceSpan span;
          span.name = (st.run.eval ? "eval " : "") + scheduler::ToString(op);
          span.category = st.run.eval ? "eval" : "compute";
          span.track = st.cfg.stage;
          span.start_us = f.start_us;
          span.duration_us = static_cast<int64_t>(f.seconds * 1e6);
          span.iteration = f.iteration;
          span.microbatch = op.microbatch;
          st.spans.push_back(std::move(span));
        }
        const BatchKey bkey{st.run.iteration, st.run.eval, op.microbatch};
        if (op.kind == scheduler::OpKind::kForward) {
          st.loss_sum += f.forward.loss_sum;
          st.num_tokens += f.forward.num_tokens;
          st.microbatch_tokens[op.microbatch] = f.forward.num_tokens;
          if (st.run.eval) st.batches.erase(bkey);
        } else if (op.kind == scheduler::OpKind::kBackwardWeight) {
          st.batches.erase(bkey);
        }
        ++st.next_op;
        TryAdvance(self);
      },
      [=](GradNormFinished& g) {
        auto& st = self->state;
        StageIterationDone done = MakeReport(st);
        done.grad_norm_sq = g.grad_norm_sq;
        done.grads_finite = g.finite;
        AttachSpans(st, &done);
        st.active = false;
        st.finishing = false;
        self->send(st.cfg.coordinator, done);
      },
      [=](ApplyOptimizerStep& step) {
        auto& st = self->state;
        auto program = st.cfg.program;
        auto optimizer = st.cfg.optimizer;
        auto exec = st.cfg.exec;
        StageActorHandle me = self;
        st.cfg.strand->Post([program, optimizer, exec, me, step] {
          StepFinished msg;
          msg.iteration = step.iteration;
          msg.start_us = TraceClockMicros();
          absl::Status s = RunGuarded([&]() -> absl::Status {
            layers::ParameterStore& params = program->parameters();
            if (!step.skip) {
              std::vector<layers::GradSpan> spans = params.GradSpans();
              for (const double factor : {step.grad_scale, step.clip_coeff}) {
                if (factor == 1.0) continue;
                for (const layers::GradSpan& g : spans) {
                  kernels::cpu::Scale(exec, g.grad, g.numel, static_cast<float>(factor));
                }
              }
              optimizer->Step(exec, step.lr, step.weight_decay);
            }
            params.ZeroGrads();
            return absl::OkStatus();
          });
          msg.duration_us = TraceClockMicros() - msg.start_us;
          msg.ok = s.ok();
          if (!s.ok()) msg.error = std::string(s.message());
          caf::anon_send(me, std::move(msg));
        });
      },
      [=](StepFinished& f) {
        auto& st = self->state;
        if (!f.ok) {
          Fail(self, f.iteration, -1, "optimizer", f.error);
          return;
        }
        StageStepDone done{st.cfg.stage, f.iteration, {}};
        if (st.cfg.trace) {
          done.spans.push_back(TraceSpan{"optimizer", "optimizer", st.cfg.stage, f.start_us,
                                         f.duration_us, f.iteration, -1});
        }
        self->send(st.cfg.coordinator, std::move(done));
      },
      [=](SaveCheckpointShard& save) {
        auto& st = self->state;
        auto program = st.cfg.program;
        auto optimizer = st.cfg.optimizer;
        const int32_t stage = st.cfg.stage;
        CoordinatorActor coordinator = st.cfg.coordinator;
        st.cfg.strand->Post([program, optimizer, stage, coordinator, save] {
          absl::Status s =
              RunGuarded([&] { return save.write_shard(stage, *program, *optimizer); });
          ShardSaved msg{stage, save.iteration, s.ok(), std::string(s.message())};
          caf::anon_send(coordinator, std::move(msg));
        });
      },
  };
}

}  // namespace

StageActorHandle SpawnStageActor(caf::actor_system& system, StageActorConfig config) {
  return system.spawn(StageBehavior, std::move(config));
}

}  // namespace mxmaca::actors
