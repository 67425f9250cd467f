// Tests which scalars TensorBoardLogger writes for Megatron's switches (the tag list of
// tensorboard_logger.h, read from training.py core_v0.19.0) and the JSONL objects.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "actors/metrics/metrics_jsonl.h"
#include "actors/metrics/tensorboard_logger.h"

namespace mxmaca::actors::metrics {
namespace {

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(t != nullptr ? t : "/tmp") + "/metrics_sinks_test/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Scalar {
  std::string tag;
  int64_t step = 0;
  float value = 0;
};

uint64_t Varint(const std::string& s, size_t* at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(s.at((*at)++));
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
}

// Scalars: the (tag, step, value) of every summary event of a file (the test's own minimal
// reader of the wire format; the framing CRCs are checked by tensorboard_events_test).
std::vector<Scalar> Scalars(const std::string& path) {
  const std::string file = ReadFile(path);
  std::vector<Scalar> out;
  size_t at = 0;
  while (at + 12 <= file.size()) {
    uint64_t length = 0;
    std::memcpy(&length, file.data() + at, 8);
    const std::string event = file.substr(at + 12, length);
    at += 16 + length;
    Scalar s;
    bool summary = false;
    for (size_t p = 0; p < event.size();) {
      const uint64_t key = Varint(event, &p);
      if (key == 0x09) {
        p += 8;
      } else if (key == 0x10) {
        s.step = static_cast<int64_t>(Varint(event, &p));
      } else if (key == 0x2A) {  // summary -> value -> tag, simple_value
        summary = true;
        Varint(event, &p);  // summary length
        REQUIRE(Varint(event, &p) == 0x0A);
        Varint(event, &p);  // value length
        REQUIRE(Varint(event, &p) == 0x0A);
        const uint64_t n = Varint(event, &p);
        s.tag = event.substr(p, n);
        p += n;
        REQUIRE(Varint(event, &p) == 0x15);
        std::memcpy(&s.value, event.data() + p, 4);
        p += 4;
      } else {
        REQUIRE(key == 0x1A);  // file_version
        p += Varint(event, &p);
      }
    }
    if (summary) out.push_back(s);
  }
  return out;
}

std::vector<std::string> Tags(const std::vector<Scalar>& scalars) {
  std::vector<std::string> tags;
  for (const Scalar& s : scalars) tags.push_back(s.tag);
  return tags;
}

IterationLogRecord Record(int64_t iteration) {
  IterationLogRecord r;
  r.now = absl::FromUnixSeconds(1700000000);
  r.iteration = iteration;
  r.train_iters = 10;
  r.consumed_samples = 8 * iteration;
  r.elapsed_ms_per_iteration = 250.0;
  r.tflops_per_device = 0.5;
  r.learning_rate = 1e-4 * iteration;
  r.global_batch_size = 8;
  r.lm_loss = 10.0 - iteration;
  r.grad_norm = 2.0;
  r.tokens_per_second = 1000.0;
  r.model_gflops_per_second = 500.0;
  r.gemm_peak_gflops = 1000.0;
  r.peak_activation_mb = 2.0;
  return r;
}

TEST_CASE("default switches: Megatron's per-iteration scalars and their 'vs samples' twins") {
  TensorBoardOptions o;
  o.dir = TempDir("defaults");
  auto tb = TensorBoardLogger::Create(o);
  REQUIRE(tb.ok());
  REQUIRE((*tb)->OnIteration(Record(1)).ok());
  REQUIRE((*tb)->OnLogInterval(Record(1)).ok());  // nothing more without the timer switches
  ValidationLogRecord v{absl::Now(), 1, 8, "iteration 1", 2.5};
  REQUIRE((*tb)->OnValidation(v).ok());
  const std::vector<Scalar> s = Scalars((*tb)->path());  // flushed by the two calls
  CHECK(Tags(s) == std::vector<std::string>{
                       "learning-rate", "learning-rate vs samples", "batch-size",
                       "batch-size vs samples", "lm loss", "lm loss vs samples", "loss-scale",
                       "loss-scale vs samples", "grad-norm", "grad-norm vs samples",
                       "lm loss validation", "lm loss validation vs samples"});
  CHECK(s[4].step == 1);
  CHECK(s[4].value == 9.0f);
  CHECK(s[5].step == 8);  // consumed samples
  CHECK(s[0].value == 1e-4f);
  CHECK(s[11].value == 2.5f);
  CHECK(s[11].step == 8);
  REQUIRE((*tb)->Close().ok());
}

TEST_CASE("the optional switches and the TensorBoard interval") {
  TensorBoardOptions o;
  o.dir = TempDir("switches");
  o.log_interval = 2;
  o.log_learning_rate = false;
  o.log_loss_scale = false;
  o.log_world_size = true;
  o.world_size = 4;
  o.log_timers = true;
  o.log_throughput = true;
  o.log_memory = true;
  o.log_validation_ppl = true;
  auto tb = TensorBoardLogger::Create(o);
  REQUIRE(tb.ok());
  for (int64_t it = 1; it <= 2; ++it) {
    REQUIRE((*tb)->OnIteration(Record(it)).ok());
    REQUIRE((*tb)->OnLogInterval(Record(it)).ok());
  }
  REQUIRE((*tb)->OnValidation(ValidationLogRecord{absl::Now(), 2, 16, "iteration 2", 30.0}).ok());
  REQUIRE((*tb)->Close().ok());
  const std::vector<Scalar> s = Scalars((*tb)->path());
  // Iteration 1: not a TensorBoard iteration, and the run's first (no iteration-time).
  CHECK(Tags(s) == std::vector<std::string>{
                       "throughput", "mem-peak-activation-bytes", "batch-size",
                       "batch-size vs samples", "lm loss", "lm loss vs samples", "world-size",
                       "world-size vs samples", "grad-norm", "grad-norm vs samples",
                       "iteration-time", "throughput", "mem-peak-activation-bytes",
                       "lm loss validation", "lm loss validation vs samples",
                       "lm loss validation ppl", "lm loss validation ppl vs samples"});
  CHECK(s[0].step == 1);
  CHECK(s[0].value == 0.5f);
  CHECK(s[1].value == 2.0f * 1024 * 1024);
  CHECK(s[6].value == 4.0f);
  CHECK(s[10].value == 0.25f);                               // seconds
  CHECK(s[15].value == static_cast<float>(std::exp(20.0)));  // the exponent is capped at 20
}

TEST_CASE("bad TensorBoard settings are errors naming the flag") {
  TensorBoardOptions o;
  o.dir = TempDir("bad");
  o.log_interval = 0;
  auto tb = TensorBoardLogger::Create(o);
  REQUIRE(!tb.ok());
  CHECK(std::string(tb.status().message()).find("--tensorboard-log-interval 0") !=
        std::string::npos);
}

TEST_CASE("the JSONL file has one object per log line and evaluation") {
  const std::string dir = TempDir("jsonl");
  const std::string path = dir + "/sub/metrics.jsonl";
  {
    auto w = MetricsJsonlWriter::Create(path, false);
    REQUIRE(w.ok());
    IterationLogRecord r = Record(3);
    r.stage_bubble_fraction = {0.25, 0.75};
    r.stage_busy_ms = {30.0, 10.0};
    r.moe_losses = {{"load_balancing_loss", 1.5}};
    r.grad_norm = std::nan("");
    REQUIRE((*w)->OnLogInterval(r).ok());
    REQUIRE((*w)->OnValidation(ValidationLogRecord{r.now, 3, 24, "iteration 3", 2.0}).ok());
    REQUIRE((*w)->Close().ok());
  }
  std::ifstream f(path);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(f, line)) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 2);
  const nlohmann::json& t = lines[0];
  CHECK(t["type"] == "train");
  CHECK(t["iteration"] == 3);
  CHECK(t["consumed_samples"] == 24);
  CHECK(t["lm_loss"].get<double>() == 7.0);
  CHECK(t["learning_rate"].get<double>() == Approx(3e-4));
  CHECK(t["grad_norm"].is_null());  // NaN
  CHECK(t["bubble_percent"].get<double>() == 50.0);
  CHECK(t["stage_busy_ms"][0].get<double>() == 30.0);
  CHECK(t["mfu"].get<double>() == 0.5);
  CHECK(t["load_balancing_loss"].get<double>() == 1.5);
  CHECK(t["time"].get<double>() == 1700000000.0);
  const nlohmann::json& v = lines[1];
  CHECK(v["type"] == "validation");
  CHECK(v["lm_loss_ppl"].get<double>() == Approx(std::exp(2.0)));
  // Appending (a resumed run) keeps what is there.
  {
    auto w = MetricsJsonlWriter::Create(path, true);
    REQUIRE(w.ok());
    REQUIRE((*w)->OnLogInterval(Record(4)).ok());
  }
  std::ifstream g(path);
  int n = 0;
  while (std::getline(g, line)) ++n;
  CHECK(n == 3);
  auto bad = MetricsJsonlWriter::Create(dir + "/sub/metrics.jsonl/x", false);
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("--metrics-jsonl") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::actors::metrics
