// Tests OptimizerParamScheduler against Megatron's formulas, evaluated independently
// here in closed form (megatron/core/optimizer_param_scheduler.py get_lr / get_wd).
#include "layers/lr_schedule.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

namespace mxmaca::layers {
namespace {

OptimizerParamSchedulerConfig Cfg(LrDecayStyle style) {
  OptimizerParamSchedulerConfig c;
  c.init_lr = 0.0;
  c.max_lr = 6e-4;
  c.min_lr = 6e-5;
  c.lr_warmup_steps = 8 * 10;   // 10 iterations of global batch 8
  c.lr_decay_steps = 8 * 100;   // 100 iterations
  c.lr_decay_style = style;
  c.start_wd = c.end_wd = 0.1;
  c.wd_incr_steps = 8 * 100;
  return c;
}

TEST_CASE("iteration 1 runs at the step-0 learning rate, as Megatron constructs it") {
  auto s = OptimizerParamScheduler::Create(Cfg(LrDecayStyle::kCosine));
  REQUIRE(s.ok());
  CHECK(s->num_steps() == 0);
  CHECK(s->lr() == 0.0);  // init_lr during warmup
  s->Step(8);
  CHECK(s->lr() == Approx(6e-4 * 8.0 / 80.0).epsilon(1e-15));
}

TEST_CASE("warmup, cosine and linear decay, and the floor follow Megatron's get_lr") {
  std::mt19937 rng(1234);
  for (LrDecayStyle style : {LrDecayStyle::kLinear, LrDecayStyle::kCosine}) {
    auto s = OptimizerParamScheduler::Create(Cfg(style));
    REQUIRE(s.ok());
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 1000)(rng);
      double expect;
      if (n <= 80) {
        expect = 6e-4 * n / 80.0;
      } else if (n > 800) {
        expect = 6e-5;
      } else {
        const double ratio = (n - 80) / 720.0;
        const double coeff = style == LrDecayStyle::kLinear ? 1.0 - ratio
                                                            : 0.5 * (std::cos(M_PI * ratio) + 1.0);
        expect = 6e-5 + coeff * (6e-4 - 6e-5);
      }
      INFO("num_steps " << n);
      CHECK(s->LrAt(n) == Approx(expect).epsilon(1e-12));
    }
  }
}

TEST_CASE("constant style ignores decay after warmup") {
  auto s = OptimizerParamScheduler::Create(Cfg(LrDecayStyle::kConstant));
  REQUIRE(s.ok());
  CHECK(s->LrAt(40) == Approx(3e-4));
  CHECK(s->LrAt(5000) == 6e-4);
}

TEST_CASE("weight decay increments linearly and cosine-wise") {
  auto c = Cfg(LrDecayStyle::kLinear);
  c.start_wd = 0.0;
  c.end_wd = 0.1;
  c.wd_incr_style = WdIncrStyle::kLinear;
  auto s = OptimizerParamScheduler::Create(c);
  REQUIRE(s.ok());
  CHECK(s->WeightDecayAt(400) == Approx(0.05));
  CHECK(s->WeightDecayAt(900) == 0.1);
  c.wd_incr_style = WdIncrStyle::kCosine;
  auto s2 = OptimizerParamScheduler::Create(c);
  CHECK(s2->WeightDecayAt(200) == Approx(0.1 * 0.5 * (std::cos(M_PI * 0.75) + 1.0)));
}

TEST_CASE("SetNumSteps restores the same state as stepping") {
  auto a = OptimizerParamScheduler::Create(Cfg(LrDecayStyle::kCosine));
  auto b = OptimizerParamScheduler::Create(Cfg(LrDecayStyle::kCosine));
  for (int i = 0; i < 37; ++i) a->Step(8);
  b->SetNumSteps(37 * 8);
  CHECK(a->lr() == b->lr());
  CHECK(a->weight_decay() == b->weight_decay());
}

TEST_CASE("bad schedules are rejected with the values named") {
  auto c = Cfg(LrDecayStyle::kCosine);
  c.min_lr = 1.0;
  auto s = OptimizerParamScheduler::Create(c);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("--min-lr 1") != std::string::npos);
  c = Cfg(LrDecayStyle::kLinear);
  c.lr_warmup_steps = 900;
  REQUIRE_FALSE(OptimizerParamScheduler::Create(c).ok());
  REQUIRE_FALSE(ParseLrDecayStyle("exponential").ok());
  CHECK(ParseLrDecayStyle("exponential").status().message().find("exponential") !=
        std::string::npos);
}

TEST_CASE("the decoupled group follows the same schedule between its own bounds") {
  // Megatron's get_lr(param_group) with the group's max_lr = --decoupled-lr and min_lr =
  // --decoupled-min-lr (or --min-lr): the same warmup from init_lr and the same decay.
  OptimizerParamSchedulerConfig c = Cfg(LrDecayStyle::kCosine);
  c.decoupled_lr = 3e-3;
  c.decoupled_min_lr = 3e-4;
  auto s = OptimizerParamScheduler::Create(c);
  REQUIRE(s.ok());
  for (int64_t n : {0, 40, 80, 81, 300, 799, 800, 801, 5000}) {
    s->SetNumSteps(n);
    double expected = 0.0;
    double main = 0.0;
    if (n <= 80) {
      expected = 3e-3 * n / 80.0;
      main = 6e-4 * n / 80.0;
    } else if (n > 800) {
      expected = 3e-4;
      main = 6e-5;
    } else {
      const double coeff = 0.5 * (std::cos(M_PI * (n - 80) / 720.0) + 1.0);
      expected = 3e-4 + coeff * (3e-3 - 3e-4);
      main = 6e-5 + coeff * (6e-4 - 6e-5);
    }
    INFO("samples " << n);
    CHECK(s->decoupled_lr() == Approx(expected).epsilon(1e-13));
    CHECK(s->lr() == Approx(main).epsilon(1e-13));
  }
  // Unset --decoupled-min-lr: the main --min-lr is the floor.
  c.decoupled_min_lr.reset();
  auto t = OptimizerParamScheduler::Create(c);
  REQUIRE(t.ok());
  t->SetNumSteps(900);
  CHECK(t->decoupled_lr() == 6e-5);
  // Without --decoupled-lr the group has the main learning rate.
  auto u = OptimizerParamScheduler::Create(Cfg(LrDecayStyle::kLinear));
  REQUIRE(u.ok());
  u->SetNumSteps(300);
  CHECK(u->decoupled_lr() == u->lr());
  // Bad bounds name the flag.
  c.decoupled_min_lr = 1.0;
  CHECK(std::string(OptimizerParamScheduler::Create(c).status().message())
            .find("--decoupled-min-lr 1") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::layers
