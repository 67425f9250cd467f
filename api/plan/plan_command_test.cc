// api/plan/plan_command_test.cc: `mxmaca plan` — the best layout is the maximum of an
// exhaustive list the test builds itself (its own loops and argv, PrepareSimulation +
// SimulateStep called directly); the memory limit filters; GPT-3 175B on 1,024 H100s
// finishes quickly with at least one layout; flag errors.
#include "api/plan/plan_command.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>

#include "api/simulate/simulate_command.h"

namespace mxmaca::api {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// A small GPT on 16 H100s: 8 layers, 16 heads, global batch 32.
const char* kSmallModel =
    "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
    "--max-position-embeddings 1024";
constexpr int kSmallWorld = 16, kSmallBatch = 32, kSmallLayers = 8;

// One simulated point of the test's own exhaustive list.
struct Point {
  std::string flags;
  double tokens_per_second = 0;
  double peak_bytes = 0;
  int tp = 0, pp = 0, v = 0, mbs = 0;
  std::string recompute, schedule;
};

// ExhaustiveList: every layout of the search space the task defines, enumerated here
// independently of EnumerateLayouts (flags spelt by hand), each simulated directly.
std::vector<Point> ExhaustiveList(int* rejected) {
  std::vector<Point> out;
  *rejected = 0;
  const char* recompute_flags[] = {
      "", "--recompute-activations",
      "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"};
  const char* recompute_names[] = {"none", "selective", "full"};
  for (int tp = 1; tp <= 8; tp *= 2) {
    if (16 % tp != 0) continue;  // heads
    for (int pp = 1; pp <= kSmallLayers; ++pp) {
      if (kSmallLayers % pp != 0 || kSmallWorld % (tp * pp) != 0) continue;
      const int dp = kSmallWorld / (tp * pp);
      for (int v = 1; v <= 4; v *= 2) {
        if ((v > 1 && pp == 1) || kSmallLayers % (pp * v) != 0) continue;
        for (int mbs = 1; mbs <= 4; mbs *= 2) {
          if (kSmallBatch % (mbs * dp) != 0) continue;
          for (int rc = 0; rc < 3; ++rc) {
            for (const std::string schedule : {"1f1b", "zb-h1", "interleaved-1f1b"}) {
              if ((v > 1) != (schedule == "interleaved-1f1b")) continue;
              std::string flags = std::string(kSmallModel) + " --bf16";
              flags += " --tensor-model-parallel-size " + std::to_string(tp);
              if (tp > 1) flags += " --sequence-parallel";
              flags += " --pipeline-model-parallel-size " + std::to_string(pp);
              if (v > 1) {
                flags += " --num-layers-per-virtual-pipeline-stage " +
                         std::to_string(kSmallLayers / (pp * v));
              }
              flags += " --pipeline-schedule " + schedule;
              flags += " --micro-batch-size " + std::to_string(mbs) + " " + recompute_flags[rc];
              flags += " --use-distributed-optimizer --overlap-grad-reduce "
                       "--overlap-param-gather --global-batch-size " +
                       std::to_string(kSmallBatch) + " --cluster h100-sxm --world-size " +
                       std::to_string(kSmallWorld);
              auto job = PrepareSimulation(Split(flags));
              if (!job.ok()) {
                ++*rejected;
                continue;
              }
              auto r = SimulateStep(job->inputs);
              if (!r.ok()) {
                ++*rejected;
                continue;
              }
              out.push_back({flags, r->tokens_per_second, r->peak_memory_bytes, tp, pp, v, mbs,
                             recompute_names[rc], schedule});
            }
          }
        }
      }
    }
  }
  return out;
}

PlanOptions SmallOptions(const std::string& extra) {
  auto o = ParsePlanArgs(Split(std::string(kSmallModel) + " --global-batch-size " +
                               std::to_string(kSmallBatch) + " --cluster h100-sxm --world-size " +
                               std::to_string(kSmallWorld) + " " + extra));
  REQUIRE(o.ok());
  return *o;
}

TEST_CASE("plan: best layout is the maximum of an exhaustive list", "[plan]") {
  int rejected = 0;
  const std::vector<Point> all = ExhaustiveList(&rejected);
  REQUIRE(all.size() > 20);
  const Point* best = &all[0];
  for (const Point& p : all) {
    if (p.tokens_per_second > best->tokens_per_second) best = &p;
  }
  // Every point fits in 80 GiB (a 300M-parameter model): no memory filtering here.
  for (const Point& p : all) REQUIRE(p.peak_bytes < 80.0 * (1 << 30));

  auto plan = Plan(SmallOptions("--top 3"));
  REQUIRE(plan.ok());
  std::printf("%s", FormatPlan(SmallOptions("--top 3"), *plan).c_str());
  CHECK(plan->enumerated == static_cast<int64_t>(all.size()) + rejected);
  CHECK(plan->rejected == rejected);
  CHECK(plan->fitting == static_cast<int64_t>(all.size()));
  REQUIRE(plan->best.size() == 3);
  // Same code path, same inputs: the same double, so exact equality.
  CHECK(plan->best[0].result.tokens_per_second == best->tokens_per_second);
  const Layout& l = plan->best[0].layout;
  std::printf("exhaustive best: %s (%.0f tokens/s)\n", best->flags.c_str(),
              best->tokens_per_second);
  // With ties the planner keeps its enumeration order: compare the layout itself only
  // when the maximum is unique.
  int ties = 0;
  for (const Point& p : all) ties += p.tokens_per_second == best->tokens_per_second;
  if (ties == 1) {
    CHECK(l.tp == best->tp);
    CHECK(l.pp == best->pp);
    CHECK(l.vpp == best->v);
    CHECK(l.mbs == best->mbs);
    CHECK(std::string(RecomputeName(l.recompute)) == best->recompute);
    CHECK(l.schedule == best->schedule);
  }
  // Descending order, and nothing outside the top 3 beats the third.
  CHECK(plan->best[0].result.tokens_per_second >= plan->best[1].result.tokens_per_second);
  CHECK(plan->best[1].result.tokens_per_second >= plan->best[2].result.tokens_per_second);
  int above_third = 0;
  for (const Point& p : all) {
    above_third += p.tokens_per_second > plan->best[2].result.tokens_per_second;
  }
  CHECK(above_third <= 2);
}

TEST_CASE("plan: the memory limit drops layouts over it", "[plan]") {
  int rejected = 0;
  const std::vector<Point> all = ExhaustiveList(&rejected);
  REQUIRE(!all.empty());
  // A limit at the median peak memory: about half the layouts must go.
  std::vector<double> peaks;
  for (const Point& p : all) peaks.push_back(p.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  const double limit = peaks[peaks.size() / 2];
  const double limit_gib = limit / (1 << 30);
  int64_t over = 0;
  double best_fit = 0;
  for (const Point& p : all) {
    if (p.peak_bytes > limit) {
      ++over;
    } else {
      best_fit = std::max(best_fit, p.tokens_per_second);
    }
  }
  REQUIRE(over > 0);
  char buf[64];
  std::snprintf(buf, sizeof buf, "--memory-limit-gib %.17g --top 100", limit_gib);
  auto plan = Plan(SmallOptions(buf));
  REQUIRE(plan.ok());
  // The limit round-trips through text (%.17g) and GiB: a layout exactly at the limit may
  // land on either side by one ulp, so count within one.
  CHECK(std::abs(plan->over_memory - over) <= 1);
  for (const PlanEntry& e : plan->best) {
    CHECK(e.result.peak_memory_bytes <= plan->memory_limit_bytes);
  }
  CHECK(plan->best[0].result.tokens_per_second == best_fit);

  // A limit nothing fits in: an error that says so.
  auto none = Plan(SmallOptions("--memory-limit-gib 0.001"));
  REQUIRE_FALSE(none.ok());
  CHECK(std::string(none.status().message()).find("no layout fits") != std::string::npos);
}

TEST_CASE("plan: GPT-3 175B on 1,024 H100s", "[plan]") {
  // Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, context 2048; batch
  // 1536 sequences (3.2M tokens in the paper; 1536 x 2048 = 3.1M).
  auto parsed = ParsePlanArgs(Split(
      "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
      "--max-position-embeddings 2048 --global-batch-size 1536 --cluster h100-sxm "
      "--world-size 1024 --top 5"));
  REQUIRE(parsed.ok());
  auto plan = Plan(*parsed);
  REQUIRE(plan.ok());
  std::printf("%s", FormatPlan(*parsed, *plan).c_str());
  REQUIRE(!plan->best.empty());
  std::printf("GPT-3 175B / 1,024 H100: best MFU %.1f%%, search %.2f s\n",
              100 * plan->best[0].result.mfu, plan->seconds);
  CHECK(plan->seconds < 60);
  // Plausibility (the simulator's own test uses the same bounds for this model): MFU in
  // (20%, 70%); the memory of every listed layout within the H100's 80 GiB.
  CHECK(plan->best[0].result.mfu > 0.2);
  CHECK(plan->best[0].result.mfu < 0.7);
  for (const PlanEntry& e : plan->best) {
    CHECK(e.result.peak_memory_bytes <= 80.0 * (1 << 30));
  }
  // The MFU breakdown: the replay's busy time is the ops' parts (m v (F + B + W)), the
  // parts add up to the step, and efficiency x useful / step is the reported MFU.
  // Tolerance 1e-9 relative: sums of ~10^3 doubles.
  const PlanEntry& top = plan->best[0];
  const MfuBreakdown b =
      BreakDownMfu(plan->cluster, top.result, OpsPerStage(top.layout, 1536));
  CHECK(b.busy == Approx(b.useful_gemm + b.extra_gemm + b.memory + b.tp_cp_comm).epsilon(1e-9));
  CHECK(b.step_seconds == Approx(b.busy + b.pipeline_idle + b.dp_grad_exposed +
                                 b.param_gather_exposed + b.optimizer)
                              .epsilon(1e-9));
  CHECK(b.gemm_efficiency * b.useful_gemm / b.step_seconds == Approx(top.result.mfu).epsilon(1e-9));
  // extra_gemm may be negative: the slowest rank can be one with less GEMM work than the
  // average (stage 0 has no logits GEMM and finishes last under 1F1B-like schedules).
  CHECK(b.pipeline_idle >= 0);
}

TEST_CASE("plan: enumeration rules and flag errors", "[plan]") {
  // 12 layers, 12 heads, 8 GPUs per node, world 48, batch 96.
  const auto layouts = EnumerateLayouts({12, 12, 8}, 48, 96);
  for (const Layout& l : layouts) {
    CHECK(12 % l.tp == 0);
    CHECK(l.tp != 8);  // 12 heads are not divisible by 8
    CHECK(12 % (l.pp * l.vpp) == 0);
    CHECK(l.tp * l.pp * l.dp == 48);
    CHECK(96 % (l.mbs * l.dp) == 0);
    CHECK((l.vpp > 1) == (l.schedule == "interleaved-1f1b"));
  }
  CHECK(!layouts.empty());

  auto layout_flag = ParsePlanArgs(Split(
      "--num-layers 2 --global-batch-size 8 --cluster b200 --world-size 8 "
      "--tensor-model-parallel-size 2"));
  REQUIRE_FALSE(layout_flag.ok());
  CHECK(std::string(layout_flag.status().message()).find("--tensor-model-parallel-size") !=
        std::string::npos);
  auto no_world = ParsePlanArgs(Split("--num-layers 2 --global-batch-size 8 --cluster b200"));
  REQUIRE_FALSE(no_world.ok());
  CHECK(std::string(no_world.status().message()).find("--world-size") != std::string::npos);
  auto bad_top = ParsePlanArgs(
      Split("--num-layers 2 --global-batch-size 8 --cluster b200 --world-size 8 --top 0"));
  REQUIRE_FALSE(bad_top.ok());
}

TEST_CASE("plan: MoE models search EP and ETP", "[plan][moe]") {
  // 8 experts on 16 GPUs, 8 heads: for TP 2 x DP 8 (PP 1) the expert grids are EP in
  // {1, 2, 4, 8} (divisors of 8 dividing 16) x ETP in {1, 2} with ETP x EP dividing 16.
  const auto layouts = EnumerateLayouts({8, 8, 8, 8}, 16, 32);
  std::set<std::pair<int64_t, int64_t>> grids;
  for (const Layout& l : layouts) {
    CHECK(l.ep >= 1);
    CHECK(8 % l.ep == 0);
    CHECK((l.tp * l.dp) % (l.ep * l.etp) == 0);
    CHECK((l.etp == 1 || l.etp == l.tp));
    if (l.tp == 2 && l.pp == 1) grids.insert({l.ep, l.etp});
  }
  CHECK(grids == std::set<std::pair<int64_t, int64_t>>{
                     {1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {8, 2}});
  // A dense model gets no expert grid (and no expert flags).
  for (const Layout& l : EnumerateLayouts({8, 8, 8, 0}, 16, 32)) CHECK(l.ep == 0);

  const std::string moe =
      "--num-layers 4 --hidden-size 1024 --ffn-hidden-size 3584 --num-attention-heads 8 "
      "--swiglu --seq-length 1024 --max-position-embeddings 1024 --num-experts 8 "
      "--moe-router-topk 2 --global-batch-size 32 --cluster h100-sxm --world-size 16 --top 3 "
      "--moe-load-imbalance 1.2";
  auto options = ParsePlanArgs(Split(moe));
  REQUIRE(options.ok());
  CHECK(options->moe_load_imbalance == std::optional<std::string>("1.2"));
  auto plan = Plan(*options);
  REQUIRE(plan.ok());
  const std::string report = FormatPlan(*options, *plan);
  std::printf("%s", report.c_str());
  const PlanEntry& top = plan->best[0];
  CHECK(top.layout.ep >= 1);
  CHECK(report.find("--expert-model-parallel-size") != std::string::npos);
  CHECK(report.find("--moe-load-imbalance") == std::string::npos);  // simulator-only flag
  // The best beats every EP of its own (TP, PP, VPP, mbs, recompute, schedule) simulated
  // directly through `mxmaca simulate`'s path; the imbalance reaches the simulation.
  for (int64_t ep : {1, 2, 4, 8}) {
    Layout l = top.layout;
    l.ep = ep;
    if ((l.tp * l.dp) % (l.ep * l.etp) != 0) continue;  // not a grid of these ranks
    std::vector<std::string> argv = SimulateArgv(*options, l, 4);
    CHECK(std::find(argv.begin(), argv.end(), "--moe-load-imbalance") != argv.end());
    auto job = PrepareSimulation(argv);
    INFO(job.status().message());
    REQUIRE(job.ok());
    CHECK(job->inputs.moe.load_imbalance == 1.2);
    CHECK(job->inputs.moe.expert_model_parallel_size == ep);
    auto r = SimulateStep(job->inputs);
    REQUIRE(r.ok());
    if (r->peak_memory_bytes <= plan->memory_limit_bytes) {
      CHECK(r->tokens_per_second <= top.result.tokens_per_second);
    }
  }
  // MFU breakdown with the EP part: busy = GEMM + memory + TP/CP + EP (1e-9 relative).
  const MfuBreakdown b = BreakDownMfu(plan->cluster, top.result, OpsPerStage(top.layout, 32));
  CHECK(b.busy == Approx(b.useful_gemm + b.extra_gemm + b.memory + b.tp_cp_comm + b.ep_comm)
                      .epsilon(1e-9));
  auto etp_flag = ParsePlanArgs(Split(moe + " --expert-tensor-parallel-size 1"));
  REQUIRE_FALSE(etp_flag.ok());
  CHECK(std::string(etp_flag.status().message()).find("--expert-tensor-parallel-size") !=
        std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
