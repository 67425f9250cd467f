// api/calibrate/cost_table_test.cc: the cost table's file format and its lookup rule.
#include "api/calibrate/cost_table.h"

#include <catch2/catch.hpp>

#include <random>

namespace mxmaca::api {
namespace {

OpShape Shape(int64_t b) {
  OpShape x;
  x.b = b;
  x.s = 64;
  x.h = 128;
  x.a = 4;
  x.g = 4;
  x.d = 32;
  x.f = 512;
  x.f1 = 512;
  x.V = 1024;
  return x;
}

CostEntry Entry(CostOpKind op, const OpShape& shape, std::array<double, 3> seconds,
                int concurrency = 1) {
  CostEntry e;
  e.op = op;
  e.tp = shape.t;
  e.sp = shape.sp;
  e.concurrency = concurrency;
  e.work = WorkOf(op, shape);
  e.seconds = seconds;
  e.shape = shape.ToString();
  return e;
}

CostTable RandomTable(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(1e-4, 1e-2);
  CostTable t;
  t.host = "host";
  t.measured_at = "2026-11-30T10:00:00Z";
  t.load_average_1m = 1.5;
  t.cores = 2;
  t.threads_per_op = 1;
  t.gemm_gflops = 140;
  for (CostOpKind op : {CostOpKind::kLayer, CostOpKind::kEmbedding, CostOpKind::kLossHead}) {
    t.ops.push_back(Entry(op, Shape(2), {u(rng), u(rng), u(rng)}));
  }
  t.optimizer_seconds_per_parameter = u(rng) * 1e-6;
  t.allreduce = {u(rng), u(rng) * 1e-6};
  t.p2p = {u(rng), 0};
  t.op_overhead_s = u(rng);
  t.step_overhead_s = u(rng);
  return t;
}

TEST_CASE("cost table: JSON round trip keeps every field") {
  const CostTable t = RandomTable(7);
  auto back = ParseCostTable(CostTableToJson(t), "t.json");
  REQUIRE(back.ok());
  CHECK(back->host == t.host);
  CHECK(back->measured_at == t.measured_at);
  CHECK(back->cores == 2);
  CHECK(back->ops.size() == 3);
  for (size_t i = 0; i < t.ops.size(); ++i) {
    CHECK(back->ops[i].op == t.ops[i].op);
    for (int k = 0; k < 3; ++k) {
      CHECK(back->ops[i].seconds[k] == t.ops[i].seconds[k]);  // JSON doubles round-trip
      CHECK(back->ops[i].work[k] == t.ops[i].work[k]);
    }
  }
  CHECK(back->allreduce.seconds_per_byte == t.allreduce.seconds_per_byte);
  CHECK(back->p2p.latency_s == t.p2p.latency_s);
  CHECK(back->step_overhead_s == t.step_overhead_s);
}

TEST_CASE("cost table: errors name the file and the field") {
  CHECK(ParseCostTable("[1]", "t.json").status().message() == "t.json: not a JSON object");
  auto no_format = ParseCostTable("{\"format\": \"x\"}", "t.json");
  CHECK(no_format.status().message().find("\"format\" must be") != std::string::npos);
  CostTable bad = RandomTable(1);
  bad.ops[0].seconds[0] = -1;  // written as is; the parser must refuse it
  const std::string text = CostTableToJson(bad);
  auto negative = ParseCostTable(text, "t.json");
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.status().message().find("ops[0]: \"seconds\"[0]") != std::string::npos);
  CHECK(LoadCostTable("/nonexistent/t.json").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("cost table: one point scales in proportion to work") {
  CostTable t = RandomTable(3);
  const auto& layer = t.ops[0].seconds;
  // A layer at micro-batch 4 has exactly twice the FLOPs of micro-batch 2 (every term is
  // linear in b at fixed s), so every op takes twice as long.
  auto at4 = t.OpSeconds(CostOpKind::kLayer, Shape(4), 1);
  REQUIRE(at4.ok());
  for (int k = 0; k < 3; ++k) CHECK((*at4)[k] == Approx(2 * layer[k]).epsilon(1e-12));
  // Embedding work is T h: micro-batch 1 is half.
  auto emb = t.OpSeconds(CostOpKind::kEmbedding, Shape(1), 1);
  REQUIRE(emb.ok());
  CHECK((*emb)[2] == Approx(0.5 * t.ops[1].seconds[2]).epsilon(1e-12));
  // No entry for TP 2.
  OpShape tp2 = Shape(2);
  tp2.t = 2;
  CHECK(t.OpSeconds(CostOpKind::kLayer, tp2, 1).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("cost table: interpolates between measured points and picks the concurrency") {
  CostTable t = RandomTable(5);
  t.ops.clear();
  t.ops.push_back(Entry(CostOpKind::kLayer, Shape(2), {1.0, 2.0, 3.0}));
  t.ops.push_back(Entry(CostOpKind::kLayer, Shape(6), {5.0, 6.0, 9.0}));
  t.ops.push_back(Entry(CostOpKind::kLayer, Shape(2), {1.5, 2.5, 3.5}, 2));
  // b 4 lies halfway in work between b 2 and b 6 (work linear in b): the mean.
  auto mid = t.OpSeconds(CostOpKind::kLayer, Shape(4), 1);
  REQUIRE(mid.ok());
  CHECK((*mid)[0] == Approx(3.0));
  CHECK((*mid)[1] == Approx(4.0));
  CHECK((*mid)[2] == Approx(6.0));
  // Beyond the largest point: proportional from it (b 12 = 2 x b 6).
  auto big = t.OpSeconds(CostOpKind::kLayer, Shape(12), 1);
  REQUIRE(big.ok());
  CHECK((*big)[2] == Approx(18.0));
  // Concurrency 2 uses the entry measured with 2 copies; 3 falls back to it; 1 does not.
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 2))[0] == Approx(1.5));
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 3))[0] == Approx(1.5));
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 1))[0] == Approx(1.0));
}

TEST_CASE("cost table: layer entries are picked by the nearest measured stage depth") {
  CostTable t = RandomTable(9);
  t.ops.clear();
  CostEntry shallow = Entry(CostOpKind::kLayer, Shape(2), {1.0, 1.0, 1.0});
  shallow.stage_layers = 2;
  CostEntry deep = Entry(CostOpKind::kLayer, Shape(2), {1.3, 1.2, 1.1});
  deep.stage_layers = 8;
  t.ops = {shallow, deep};
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 1, 1))[0] == Approx(1.0));
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 1, 4))[0] == Approx(1.0));  // 4: nearer 2
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 1, 6))[0] == Approx(1.3));
  CHECK((*t.OpSeconds(CostOpKind::kLayer, Shape(2), 1, 32))[2] == Approx(1.1));
  // The depth survives the file.
  auto back = ParseCostTable(CostTableToJson(t), "t.json");
  REQUIRE(back.ok());
  CHECK(back->ops[1].stage_layers == 8);
}

}  // namespace
}  // namespace mxmaca::api
