// Back-pressure on pipeline channels (docs/ARCHITECTURE.md "Each edge has a slot quota"): with a slow
// consumer, a producer stage may run at most `quota` payloads ahead on a channel. With
// --pipeline-channel-slots 2, GPipe's forward channels get 2 slots (scheduler/edge_slots.h:
// GPipe could otherwise put all m in flight), so on stage 0, F(j) starts only after
// stage 1 has finished F(j - 2) (whose input slot it frees) — checked on the
// --trace-file timeline of a synthetic-time pipeline whose stage 1 forward takes 15x as
// long as stage 0's.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "actors/synthetic_stage_program.h"
#include "scheduler/edge_slots.h"
#include "scheduler/schedule_factory.h"

namespace mxmaca::actors {
namespace {

TEST_CASE("a producer runs at most its channel quota ahead of a slow consumer") {
  const int m = 6;
  scheduler::ScheduleOptions so;
  so.kind = scheduler::ScheduleKind::kGPipe;
  so.num_stages = 2;
  so.num_microbatches = m;
  auto schedule = scheduler::BuildSchedule(so);
  REQUIRE(schedule.ok());
  auto quotas = scheduler::EdgeQuotas(*schedule, 2);
  REQUIRE(quotas.ok());
  const int quota = quotas->forward[0];
  REQUIRE(quota == 2);

  SyntheticJobOptions o;
  o.schedule = scheduler::ScheduleKind::kGPipe;
  o.pipeline_size = 2;
  o.num_microbatches = m;
  o.train_iters = 1;
  o.channel_slots = 2;
  o.op_seconds = {{SyntheticOpSeconds{0.002, 0.001, 0.001}},
                  {SyntheticOpSeconds{0.030, 0.001, 0.001}}};
  o.trace_file = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                 "/backpressure_trace_" + std::to_string(std::random_device{}()) + ".json";
  auto summary = RunSyntheticJob(o);
  REQUIRE(summary.ok());
  INFO(summary->error);
  REQUIRE(summary->ok);

  std::ifstream in(*o.trace_file);
  const nlohmann::json trace = nlohmann::json::parse(in);
  // (track, "F<j>") -> (start, finish) in µs.
  std::map<std::pair<int, std::string>, std::pair<double, double>> span;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
    span[{e.at("tid").get<int>(), e.at("name").get<std::string>()}] = {ts, ts + dur};
  }
  for (int j = quota; j < m; ++j) {
    INFO("F" << j);
    const auto produce = span.at({0, "F" + std::to_string(j)});
    const auto consumed = span.at({1, "F" + std::to_string(j - quota)});
    // The slot is released after the consumer's op ends (then a message to the
    // producer), so the producer's op starts no earlier. Trace times are whole µs.
    CHECK(produce.first >= consumed.second - 1.0);
  }
  // Without the quota stage 0 would run its six 2 ms forwards back to back (~12 ms); with
  // it, F5 waits for stage 1's F3, i.e. for four 30 ms forwards.
  CHECK(span.at({0, "F5"}).first - span.at({0, "F0"}).first > 4 * 30000.0 * 0.9);
}

}  // namespace
}  // namespace mxmaca::actors
