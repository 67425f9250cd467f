// Tests ValidateSchedule on hand-made lists: an unusual but valid schedule passes; a
// missing W, a duplicate op, a wrong stage-local order, crossed sends (FIFO violation), a
// circular wait, out-of-range ids and a bad shape are each rejected with a message that
// names the stage and op.
#include "scheduler/schedule_validator.h"

#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "scheduler/gpipe.h"
#include "scheduler/interleaved_1f1b.h"
#include "scheduler/one_f_one_b.h"
#include "scheduler/zero_bubble_h1.h"

namespace mxmaca::scheduler {
namespace {

constexpr OpKind F = OpKind::kForward;
constexpr OpKind B = OpKind::kBackwardInput;
constexpr OpKind W = OpKind::kBackwardWeight;

PipelineSchedule TwoStages(StageSchedule stage0, StageSchedule stage1, int m) {
  PipelineSchedule s;
  s.name = "hand-made";
  s.num_stages = 2;
  s.num_chunks = 1;
  s.num_microbatches = m;
  s.stages = {std::move(stage0), std::move(stage1)};
  return s;
}

std::string Message(const PipelineSchedule& s) {
  return std::string(ValidateSchedule(s).message());
}

TEST_CASE("an unusual but valid hand-written schedule passes") {
  // W deferred and in reverse order on stage 0; stage 1 runs 1F1B with deferred W.
  PipelineSchedule s = TwoStages({{F, 0}, {F, 1}, {B, 0}, {B, 1}, {W, 1}, {W, 0}},
                                 {{F, 0}, {B, 0}, {F, 1}, {B, 1}, {W, 0}, {W, 1}}, 2);
  CHECK(ValidateSchedule(s).ok());
  PipelineSchedule single;
  single.num_stages = 1;
  single.num_microbatches = 3;
  single.stages = {SingleStageSchedule(3)};
  CHECK(ValidateSchedule(single).ok());
}

TEST_CASE("a missing W is rejected") {
  PipelineSchedule s = TwoStages({{F, 0}, {F, 1}, {B, 0}, {W, 0}, {B, 1}},
                                 {{F, 0}, {B, 0}, {W, 0}, {F, 1}, {B, 1}, {W, 1}}, 2);
  CHECK_THAT(Message(s), Catch::Contains("stage 0: missing W1"));
}

TEST_CASE("a duplicate op is rejected") {
  auto s = OneFOneBSchedule(2, 3);
  REQUIRE(s.ok());
  s->stages[1].push_back({F, 2});
  CHECK_THAT(Message(*s), Catch::Contains("stage 1: duplicate F2 at ops 6 and 9"));
}

TEST_CASE("B before its F, or W before its B, is rejected") {
  PipelineSchedule s = TwoStages({{F, 0}, {F, 1}, {B, 0}, {W, 0}, {B, 1}, {W, 1}},
                                 {{B, 0}, {F, 0}, {W, 0}, {F, 1}, {B, 1}, {W, 1}}, 2);
  CHECK_THAT(Message(s), Catch::Contains("stage 1: B0 (op 0) before F0 (op 1)"));
  PipelineSchedule t = TwoStages({{F, 0}, {F, 1}, {B, 0}, {W, 1}, {W, 0}, {B, 1}},
                                 {{F, 0}, {B, 0}, {W, 0}, {F, 1}, {B, 1}, {W, 1}}, 2);
  CHECK_THAT(Message(t), Catch::Contains("stage 0: W1 (op 3) before B1 (op 5)"));
}

TEST_CASE("crossed sends (a FIFO violation) are rejected even without a deadlock") {
  // Stage 0 sends F1's activation before F0's; stage 1 consumes F0 first. With
  // matching by id this would run; on a FIFO channel stage 1 would get the wrong tensor.
  PipelineSchedule s = TwoStages({{F, 1}, {F, 0}, {B, 0}, {W, 0}, {B, 1}, {W, 1}},
                                 {{F, 0}, {B, 0}, {W, 0}, {F, 1}, {B, 1}, {W, 1}}, 2);
  CHECK_THAT(Message(s),
             Catch::Contains("crossed sends on channel stage 0 -> stage 1 (activations): "
                             "message 0 sent is F1's output (stage 0 op 0) but stage 1 "
                             "consumes F0 (op 0) first"));
  // The same on the gradient channel.
  PipelineSchedule g = TwoStages({{F, 0}, {F, 1}, {B, 0}, {W, 0}, {B, 1}, {W, 1}},
                                 {{F, 0}, {F, 1}, {B, 1}, {W, 1}, {B, 0}, {W, 0}}, 2);
  CHECK_THAT(Message(g), Catch::Contains("channel stage 1 -> stage 0 (gradients)"));
}

TEST_CASE("a circular wait is rejected, naming each stuck stage") {
  // Stage 0 wants B0 before sending F1; stage 1 wants F1 before running B0.
  PipelineSchedule s = TwoStages({{F, 0}, {B, 0}, {W, 0}, {F, 1}, {B, 1}, {W, 1}},
                                 {{F, 0}, {F, 1}, {B, 0}, {W, 0}, {B, 1}, {W, 1}}, 2);
  CHECK(Message(s) ==
        "circular wait: stage 0 waits at B0 (op 1) for B0 from stage 1; "
        "stage 1 waits at F1 (op 1) for F1 from stage 0");
  // With v = 2 (virtual stages 0..3 on stages 0, 1, 0, 1) both stages run chunk 0's
  // backward before chunk 1's forward: B0 on virtual stage 1 needs chunk 1's gradient,
  // which needs chunk 1's forward, which stage 0 lists after its own B0. The lists are
  // complete, locally ordered and FIFO-consistent; only the replay finds the cycle.
  PipelineSchedule t;
  t.num_stages = 2;
  t.num_chunks = 2;
  t.num_microbatches = 1;
  t.stages = {{{F, 0, 0}, {B, 0, 0}, {W, 0, 0}, {F, 0, 1}, {B, 0, 1}, {W, 0, 1}},
              {{F, 0, 0}, {B, 0, 0}, {W, 0, 0}, {F, 0, 1}, {B, 0, 1}, {W, 0, 1}}};
  CHECK(Message(t) ==
        "circular wait: stage 0 waits at B0 (op 1) for B0 from stage 1; "
        "stage 1 waits at B0 (op 1) for B0.c1 from stage 0");
}

TEST_CASE("out-of-range ids, forward-only violations and bad shapes are rejected") {
  PipelineSchedule s = TwoStages({{F, 0}, {F, 2}}, {{F, 0}, {F, 1}}, 2);
  CHECK_THAT(Message(s), Catch::Contains("stage 0: op 1 (kind 0, micro-batch 2, chunk 0) is "
                                         "out of range"));
  PipelineSchedule c = TwoStages({{F, 0, 1}}, {{F, 0}}, 1);
  CHECK_THAT(Message(c), Catch::Contains("chunk in [0, 1)"));
  PipelineSchedule e = TwoStages({{F, 0}, {F, 1}}, {{F, 0}, {B, 1}}, 2);
  e.forward_only = true;
  CHECK_THAT(Message(e), Catch::Contains("stage 1: B1 (op 1) in a forward-only schedule"));
  PipelineSchedule fo = TwoStages({{F, 0}, {F, 1}}, {{F, 0}}, 2);
  fo.forward_only = true;
  CHECK_THAT(Message(fo), Catch::Contains("stage 1: missing F1"));
  PipelineSchedule shape = TwoStages({}, {}, 1);
  shape.num_stages = 3;
  CHECK_THAT(Message(shape), Catch::Contains("2 stage lists, expected p = 3"));
  PipelineSchedule empty = TwoStages({}, {}, 0);
  CHECK_THAT(Message(empty), Catch::Contains("micro-batches m must be >= 1, got 0"));
}

// RunWithQueues: an independent model of how stage actors run a (complete) schedule:
// each stage takes its ops in order; an op that needs a message takes the head of the FIFO
// queue from the producing stage, which must be that op's input; B needs the stage's own
// F, W its own B. Returns "ok", "crossed" (wrong message at a queue head), "local" (a
// stage-local input that can never come) or "deadlock" (no stage can move).
std::string RunWithQueues(const PipelineSchedule& s) {
  const int p = s.num_stages, num_virtual = s.num_stages * s.num_chunks;
  std::map<std::tuple<int, int, int>, std::deque<PipelineOp>> queues;  // (from, to, dir)
  std::set<std::tuple<int, int, int, int>> done;                       // (stage, kind, mb, c)
  std::vector<size_t> next(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int st = 0; st < p; ++st) {
      while (next[st] < s.stages[st].size()) {
        const PipelineOp op = s.stages[st][next[st]];
        const int k = op.chunk * p + st;
        if (op.kind != OpKind::kForward &&
            !done.count({st, static_cast<int>(op.kind) - 1, op.microbatch, op.chunk})) {
          return "local";
        }
        std::deque<PipelineOp>* in = nullptr;
        if (op.kind == OpKind::kForward && k > 0) in = &queues[{(k - 1) % p, st, 0}];
        if (op.kind == OpKind::kBackwardInput && k + 1 < num_virtual) {
          in = &queues[{(k + 1) % p, st, 1}];
        }
        if (in != nullptr) {
          if (in->empty()) break;
          if (!(in->front() == op)) return "crossed";
          in->pop_front();
        }
        done.insert({st, static_cast<int>(op.kind), op.microbatch, op.chunk});
        if (op.kind == OpKind::kForward && k + 1 < num_virtual) {
          queues[{st, (k + 1) % p, 0}].push_back({OpKind::kForward, op.microbatch, (k + 1) / p});
        }
        if (op.kind == OpKind::kBackwardInput && k > 0) {
          queues[{st, (k - 1) % p, 1}].push_back(
              {OpKind::kBackwardInput, op.microbatch, (k - 1) / p});
        }
        ++next[st];
        progress = true;
      }
    }
  }
  for (int st = 0; st < p; ++st) {
    if (next[st] < s.stages[st].size()) return "deadlock";
  }
  return "ok";
}

TEST_CASE("validator agrees with a FIFO-queue execution on randomly perturbed schedules") {
  // Random adjacent swaps keep a schedule complete but may break local order, FIFO order
  // or liveness; the validator must accept exactly the lists the queue model runs.
  std::mt19937 rng(20261130);
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int p = 2 + static_cast<int>(rng() % 3);
    const int m = p * (1 + static_cast<int>(rng() % 2));  // interleaving needs m % p == 0 here
    absl::StatusOr<PipelineSchedule> s;
    switch (rng() % 4) {
      case 0:
        s = GPipeSchedule(p, m);
        break;
      case 1:
        s = OneFOneBSchedule(p, m);
        break;
      case 2:
        s = ZeroBubbleH1Schedule(p, m);
        break;
      default:
        s = Interleaved1F1BSchedule(p, 2, m);
    }
    REQUIRE(s.ok());
    const int swaps = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < swaps; ++i) {
      StageSchedule& ops = s->stages[rng() % p];
      const size_t at = rng() % (ops.size() - 1);
      std::swap(ops[at], ops[at + 1]);
    }
    const absl::Status status = ValidateSchedule(*s);
    const std::string run = RunWithQueues(*s);
    INFO(ToString(*s) << status << " / queue model: " << run);
    CHECK(status.ok() == (run == "ok"));
    (status.ok() ? accepted : rejected)++;
  }
  // Both outcomes must be well represented, or the test proves little.
  CHECK(accepted > 300);
  CHECK(rejected > 300);
}

}  // namespace
}  // namespace mxmaca::scheduler
