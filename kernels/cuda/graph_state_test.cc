// Tests for kernels/cuda/graph_state.h (host only, no GPU needed): warm-up counting,
// capture / replay / eager-only transitions, invalidation, statistics.
#include "kernels/cuda/graph_state.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::kernels::cuda {
namespace {

using A = SegmentAction;

SegmentKey Key(const std::string& op, int64_t s, std::vector<int64_t> extra = {}) {
  return SegmentKey{op, 0, 4, s, std::move(extra)};
}

// Drive: one run of `key` as CudaGraphCache does it (a capture succeeds unless `fail`).
A Drive(GraphStateTable& t, const SegmentKey& key, bool fail = false) {
  const A a = t.Next(key);
  if (a == A::kEager) {
    t.RecordEager(key);
  } else if (a == A::kReplay) {
    t.RecordReplay(key);
  } else if (fail) {
    t.RecordCaptureFailure(key, "cudaErrorStreamCaptureUnsupported");
    t.RecordEager(key);  // the fallback run
  } else {
    t.RecordCaptured(key);
  }
  return a;
}

TEST_CASE("warm-up runs precede one capture, then replays", "[graph_state]") {
  for (int warmup : {0, 1, 3}) {
    GraphStateTable t(CudaGraphMode::kLocal, warmup);
    const SegmentKey k = Key("F", 128);
    for (int i = 0; i < warmup; ++i) CHECK(Drive(t, k) == A::kEager);
    CHECK(Drive(t, k) == A::kCapture);
    for (int i = 0; i < 5; ++i) CHECK(Drive(t, k) == A::kReplay);
    const SegmentStats* s = t.Stats(k);
    REQUIRE(s != nullptr);
    CHECK(s->eager_runs == warmup);
    CHECK(s->captures == 1);
    CHECK(s->launches == 6);
    CHECK(t.num_captured() == 1);
  }
}

TEST_CASE("mode none: always eager, nothing captured", "[graph_state]") {
  GraphStateTable t(CudaGraphMode::kNone, 1);
  for (int i = 0; i < 4; ++i) CHECK(Drive(t, Key("B", 64)) == A::kEager);
  CHECK(t.Totals().captures == 0);
  CHECK(t.Totals().eager_runs == 4);
}

TEST_CASE("a new shape is a new segment; the old graph stays", "[graph_state]") {
  GraphStateTable t(CudaGraphMode::kLocal, 1);
  const SegmentKey s128 = Key("F", 128), s256 = Key("F", 256);
  Drive(t, s128);
  CHECK(Drive(t, s128) == A::kCapture);
  CHECK(Drive(t, s256) == A::kEager);
  CHECK(Drive(t, s256) == A::kCapture);
  CHECK(Drive(t, s128) == A::kReplay);
  CHECK(t.num_captured() == 2);
  // Keys differ in every field, extra included.
  CHECK(Key("F", 128, {1}) < Key("F", 128, {2}));
  CHECK_FALSE(Key("F", 128) == Key("B", 128));
  CHECK(Key("W", 8, {3, 4}).ToString() == "W chunk 0 b 4 s 8 extra [3,4]");
}

TEST_CASE("failed capture: eager-only with the reason until invalidated", "[graph_state]") {
  GraphStateTable t(CudaGraphMode::kLocal, 1);
  const SegmentKey k = Key("step", 0);
  Drive(t, k);
  CHECK(Drive(t, k, /*fail=*/true) == A::kCapture);
  for (int i = 0; i < 3; ++i) CHECK(Drive(t, k) == A::kEager);
  const SegmentStats* s = t.Stats(k);
  CHECK(s->eager_only);
  CHECK(s->eager_only_reason == "cudaErrorStreamCaptureUnsupported");
  CHECK(s->capture_failures == 1);
  CHECK(s->eager_runs == 5);
  CHECK(t.Report().find("eager-only: cudaErrorStreamCaptureUnsupported") != std::string::npos);
  CHECK_FALSE(t.Invalidate(k));  // no graph to drop, but the key warms up again
  CHECK_FALSE(t.Stats(k)->eager_only);
  CHECK(Drive(t, k) == A::kEager);
  CHECK(Drive(t, k) == A::kCapture);
}

TEST_CASE("MarkEagerOnly keeps dynamic-shape work out of graphs", "[graph_state]") {
  GraphStateTable t(CudaGraphMode::kLocal, 0);
  const SegmentKey k = Key("F", 128, {7});
  t.MarkEagerOnly(k, "dropless MoE: token counts vary");
  for (int i = 0; i < 3; ++i) CHECK(Drive(t, k) == A::kEager);
  CHECK(t.Totals().captures == 0);
}

TEST_CASE("Invalidate drops every graph and restarts warm-up", "[graph_state]") {
  GraphStateTable t(CudaGraphMode::kLocal, 2);
  const std::vector<SegmentKey> keys = {Key("F", 128), Key("B", 128), Key("W", 128)};
  for (int round = 0; round < 3; ++round) {
    for (const auto& k : keys) Drive(t, k);
  }
  CHECK(t.num_captured() == 3);
  CHECK(t.Invalidate() == 3);
  CHECK(t.num_captured() == 0);
  CHECK(t.Invalidate() == 0);
  for (const auto& k : keys) {
    CHECK(Drive(t, k) == A::kEager);
    CHECK(Drive(t, k) == A::kEager);
    CHECK(Drive(t, k) == A::kCapture);
    CHECK(t.Stats(k)->invalidations == 1);
    CHECK(t.Stats(k)->captures == 2);
  }
  CHECK(t.Invalidate(keys[1]));
  CHECK(t.num_captured() == 2);
  CHECK(t.Stats(Key("F", 999)) == nullptr);
}

// Random runs, invalidations and failures against a count-based model: since its last
// reset a key is eager for its first W runs, captured on run W+1 (eager forever after a
// failed capture), replayed afterwards.
TEST_CASE("random schedule matches a count-based model", "[graph_state]") {
  std::mt19937_64 rng(2026);
  const int warmup = 2;
  GraphStateTable t(CudaGraphMode::kLocal, warmup);
  std::vector<SegmentKey> keys;
  for (const char* op : {"F", "B", "W"}) {
    for (int64_t s : {64, 128}) keys.push_back(Key(op, s));
  }
  struct Model {
    int runs = 0;  // since reset
    bool failed = false;
    int64_t launches = 0, eager = 0;
  };
  std::map<SegmentKey, Model> model;
  for (int step = 0; step < 5000; ++step) {
    const int r = static_cast<int>(rng() % 100);
    const SegmentKey& k = keys[rng() % keys.size()];
    if (r == 0) {
      t.Invalidate();
      for (auto& [key, m] : model) m.runs = 0, m.failed = false;
      continue;
    }
    if (r == 1) {
      t.Invalidate(k);
      model[k].runs = 0;
      model[k].failed = false;
      continue;
    }
    const bool fail = r < 10;
    Model& m = model[k];
    A want;
    if (m.failed || m.runs < warmup) {
      want = A::kEager;
    } else if (m.runs == warmup) {
      want = A::kCapture;
    } else {
      want = A::kReplay;
    }
    REQUIRE(Drive(t, k, fail) == want);
    if (want == A::kCapture && fail) m.failed = true;
    if (want == A::kEager || (want == A::kCapture && fail)) {
      ++m.eager;
    } else {
      ++m.launches;
    }
    ++m.runs;
  }
  for (const auto& [key, m] : model) {
    CHECK(t.Stats(key)->launches == m.launches);
    CHECK(t.Stats(key)->eager_runs == m.eager);
  }
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
