// Tests SimulateSchedule and PeakStashedMicrobatches: event times of a tiny pipeline worked
// out by hand; the closed-form bubble fractions of GPipe and 1F1B ((p-1)/(m+p-1)) and of
// interleaved 1F1B ((p-1)/(v*m+p-1)) over p in {1,2,4,8}, m in {p,2p,4p,8p}, v in {1,2,3};
// GPipe's makespan with communication latency; 1F1B's stash bound min(p - s, m).
#include "scheduler/schedule_simulator.h"

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "scheduler/forward_only.h"
#include "scheduler/gpipe.h"
#include "scheduler/interleaved_1f1b.h"
#include "scheduler/one_f_one_b.h"

namespace mxmaca::scheduler {
namespace {

// Op times are small integers, so every event time below is an exact sum in double; the
// only rounding is the final division forming the bubble fraction, hence 1e-12 relative.
constexpr double kFractionTolerance = 1e-12;

TEST_CASE("event times of a two-stage, one-micro-batch pipeline match a hand computation") {
  auto s = OneFOneBSchedule(2, 1);
  REQUIRE(s.ok());
  // F = 1, B = 2, W = 3, latency 0.5, gradient sent after B:
  // stage 0 F0 [0,1]; stage 1 F0 [1.5,2.5] B0 [2.5,4.5] W0 [4.5,7.5];
  // stage 0 B0 [5,7] W0 [7,10].
  auto t = SimulateSchedule(*s, OpCosts::Uniform(2, 1, 2, 3, 0.5, false));
  REQUIRE(t.ok());
  CHECK(t->makespan == 10);
  CHECK(t->ops[1][0].start == 1.5);
  CHECK(t->ops[1][2].finish == 7.5);
  CHECK(t->ops[0][1].start == 5);
  CHECK(t->busy[0] == 6);
  CHECK(t->idle[0] == 4);
  CHECK(t->idle[1] == 4);  // idle before 1.5 and after 7.5
  CHECK(t->bubble_fraction == Approx(8.0 / 20).epsilon(kFractionTolerance));
  // Fused backward: stage 1's gradient leaves with W0 at 7.5, so stage 0 B0 runs [8,10]
  // and W0 [10,13].
  auto fused = SimulateSchedule(*s, OpCosts::Uniform(2, 1, 2, 3, 0.5, true));
  REQUIRE(fused.ok());
  CHECK(fused->ops[0][1].start == 8);
  CHECK(fused->makespan == 13);
}

TEST_CASE("GPipe and 1F1B bubble is (p-1)/(m+p-1) with a fused backward") {
  for (int p : {1, 2, 4, 8}) {
    for (int factor : {1, 2, 4, 8}) {
      const int m = factor * p;
      INFO("p=" << p << " m=" << m);
      auto gpipe = GPipeSchedule(p, m);
      auto one = OneFOneBSchedule(p, m);
      REQUIRE((gpipe.ok() && one.ok()));
      const double expected = static_cast<double>(p - 1) / (m + p - 1);
      // Equal F, B, W times, and an unequal mix (F=2, B=3, W=1): the closed form only
      // needs the same times on every stage.
      for (auto [f, b, w] : {std::array<double, 3>{1, 1, 1}, std::array<double, 3>{2, 3, 1}}) {
        INFO("f=" << f << " b=" << b << " w=" << w);
        const OpCosts costs = OpCosts::Uniform(p, f, b, w, 0, true);
        for (const PipelineSchedule* s : {&*gpipe, &*one}) {
          INFO(s->name);
          auto t = SimulateSchedule(*s, costs);
          REQUIRE(t.ok());
          CHECK(t->makespan == (m + p - 1) * (f + b + w));
          CHECK(t->bubble_fraction == Approx(expected).margin(kFractionTolerance));
          for (int st = 0; st < p; ++st) CHECK(t->busy[st] == m * (f + b + w));
          // Sending the gradient before W can only shorten the step.
          auto split = SimulateSchedule(*s, OpCosts::Uniform(p, f, b, w, 0, false));
          REQUIRE(split.ok());
          CHECK(split->makespan <= t->makespan);
        }
      }
    }
  }
}

TEST_CASE("interleaved bubble is (p-1)/(v*m+p-1) with a fused backward") {
  for (int p : {1, 2, 4, 8}) {
    for (int factor : {1, 2, 4, 8}) {
      const int m = factor * p;
      for (int v : {1, 2, 3}) {
        INFO("p=" << p << " m=" << m << " v=" << v);
        auto s = Interleaved1F1BSchedule(p, v, m);
        REQUIRE(s.ok());
        // Per-chunk op times: a chunk holds 1/v of the stage's layers.
        auto t = SimulateSchedule(*s, OpCosts::Uniform(p, 1, 1, 1, 0, true));
        REQUIRE(t.ok());
        CHECK(t->makespan == 3.0 * (v * m + p - 1));
        CHECK(t->bubble_fraction ==
              Approx(static_cast<double>(p - 1) / (v * m + p - 1)).margin(kFractionTolerance));
      }
    }
  }
}

TEST_CASE("GPipe pays the link latency once per hop each way") {
  // Forwards reach the last stage after (p-1) hops, gradients return after (p-1) more;
  // within a stage ops stay back to back, so makespan = (m+p-1)(f+b+w) + 2(p-1)L.
  for (int p : {2, 4}) {
    for (int m : {p, 4 * p}) {
      auto s = GPipeSchedule(p, m);
      REQUIRE(s.ok());
      auto t = SimulateSchedule(*s, OpCosts::Uniform(p, 1, 1, 1, 0.25, true));
      REQUIRE(t.ok());
      CHECK(t->makespan == 3.0 * (m + p - 1) + 2 * (p - 1) * 0.25);
    }
  }
}

TEST_CASE("peak stashed micro-batches: 1F1B min(p - s, m), GPipe m, forward-only 0") {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, p, 2 * p, 8 * p}) {
      INFO("p=" << p << " m=" << m);
      auto one = OneFOneBSchedule(p, m);
      auto gpipe = GPipeSchedule(p, m);
      auto eval = ForwardOnlyPipelineSchedule(p, 1, m);
      REQUIRE((one.ok() && gpipe.ok() && eval.ok()));
      const auto one_peaks = PeakStashedMicrobatches(*one);
      const auto gpipe_peaks = PeakStashedMicrobatches(*gpipe);
      const auto eval_peaks = PeakStashedMicrobatches(*eval);
      for (int s = 0; s < p; ++s) {
        CHECK(one_peaks[s] == std::min(p - s, m));
        CHECK(gpipe_peaks[s] == m);
        CHECK(eval_peaks[s] == 0);
      }
    }
  }
}

TEST_CASE("forward-only schedules simulate with forwards only") {
  auto s = ForwardOnlyPipelineSchedule(4, 1, 8);
  REQUIRE(s.ok());
  auto t = SimulateSchedule(*s, OpCosts::Uniform(4, 1, 5, 5));
  REQUIRE(t.ok());
  CHECK(t->makespan == 8 + 3);  // m forwards plus p - 1 hops of fill
}

TEST_CASE("interleaved stage s stashes min(warm-up + 1, v*m) chunk activations at peak") {
  // Megatron's warm-up w = (p - s - 1) * 2 + (v - 1) * p forwards are all held when the
  // first steady-state F runs, and each later F is matched by a B W before the next.
  for (int p : {2, 4, 8}) {
    for (int m : {p, 4 * p}) {
      for (int v : {2, 3}) {
        auto s = Interleaved1F1BSchedule(p, v, m);
        REQUIRE(s.ok());
        const auto peaks = PeakStashedMicrobatches(*s);
        for (int st = 0; st < p; ++st) {
          INFO("p=" << p << " m=" << m << " v=" << v << " stage " << st);
          CHECK(peaks[st] == std::min((p - st - 1) * 2 + (v - 1) * p + 1, v * m));
        }
      }
    }
  }
}

TEST_CASE("every simulated op starts exactly when its stage and inputs allow") {
  // Random per-stage F/B/W times and latency (seeded); the test re-derives each op's
  // inputs from the virtual-stage layout and checks start = max(stage free, input ready
  // [+ latency for messages]) and finish = start + cost, i.e. no idle time without cause
  // and no dependency violated. Compared exactly: both sides form each time by the same
  // single addition and max, so they round identically.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.25, 3.0);
  for (int trial = 0; trial < 40; ++trial) {
    const int p = 1 + static_cast<int>(rng() % 5);
    const int m = p * (1 + static_cast<int>(rng() % 3));
    const int v = 1 + static_cast<int>(rng() % 3);
    auto s = trial % 3 == 0   ? GPipeSchedule(p, m)
             : trial % 3 == 1 ? OneFOneBSchedule(p, m)
                              : Interleaved1F1BSchedule(p, v, m);
    REQUIRE(s.ok());
    OpCosts costs;
    for (int st = 0; st < p; ++st) costs.per_stage.push_back({time(rng), time(rng), time(rng)});
    costs.comm_latency = time(rng) / 4;
    auto t = SimulateSchedule(*s, costs);
    REQUIRE(t.ok());
    // (kind, virtual stage, micro-batch) -> finish time.
    std::map<std::tuple<int, int, int>, double> finish;
    for (int st = 0; st < p; ++st) {
      for (size_t i = 0; i < s->stages[st].size(); ++i) {
        const PipelineOp& op = s->stages[st][i];
        finish[{static_cast<int>(op.kind), op.chunk * p + st, op.microbatch}] =
            t->ops[st][i].finish;
      }
    }
    const int num_virtual = p * s->num_chunks;
    double max_busy = 0;
    for (int st = 0; st < p; ++st) {
      max_busy = std::max(max_busy, t->busy[st]);
      double free_at = 0;
      for (size_t i = 0; i < s->stages[st].size(); ++i) {
        const PipelineOp& op = s->stages[st][i];
        const int k = op.chunk * p + st;
        double ready = free_at;
        auto need = [&](OpKind kind, int vs, double latency) {
          ready = std::max(ready, finish.at({static_cast<int>(kind), vs, op.microbatch}) + latency);
        };
        if (op.kind == OpKind::kForward && k > 0) need(OpKind::kForward, k - 1, costs.comm_latency);
        if (op.kind == OpKind::kBackwardInput) {
          need(OpKind::kForward, k, 0);
          if (k + 1 < num_virtual) need(OpKind::kBackwardInput, k + 1, costs.comm_latency);
        }
        if (op.kind == OpKind::kBackwardWeight) need(OpKind::kBackwardInput, k, 0);
        INFO(s->name << " p=" << p << " v=" << s->num_chunks << " m=" << m << " stage " << st
                     << " op " << i);
        CHECK(t->ops[st][i].start == ready);
        CHECK(t->ops[st][i].finish == ready + costs.per_stage[st][static_cast<int>(op.kind)]);
        free_at = t->ops[st][i].finish;
      }
    }
    CHECK(t->makespan >= max_busy);
  }
}

TEST_CASE("bad costs are rejected") {
  auto s = OneFOneBSchedule(2, 2);
  REQUIRE(s.ok());
  CHECK_THAT(std::string(SimulateSchedule(*s, OpCosts::Uniform(3, 1, 1, 1)).status().message()),
             Catch::Contains("op costs given for 3 stages, expected p = 2"));
  CHECK_THAT(std::string(SimulateSchedule(*s, OpCosts::Uniform(2, 1, -1, 1)).status().message()),
             Catch::Contains("stage 0: op time of kind 1 must be >= 0, got -1"));
  CHECK(!SimulateSchedule(*s, OpCosts::Uniform(2, 1, 1, 1, -0.5)).ok());
  CHECK(!SimulateSchedule(*s, OpCosts::Uniform(2, NAN, 1, 1)).ok());
  s->stages[0].pop_back();  // W1 never runs: still simulates (completeness is the validator's)
  CHECK(SimulateSchedule(*s, OpCosts::Uniform(2, 1, 1, 1)).ok());
  s->stages[1].erase(s->stages[1].begin() + 4);  // stage 1's B1 gone: stage 0 cannot finish
  CHECK_THAT(std::string(SimulateSchedule(*s, OpCosts::Uniform(2, 1, 1, 1)).status().message()),
             Catch::Contains("unsatisfiable input: stage 0 waits at B1 (op 4) for B1 from "
                             "stage 1, which stage 1 never runs"));
}

}  // namespace
}  // namespace mxmaca::scheduler
