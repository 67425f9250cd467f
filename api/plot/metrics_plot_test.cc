// Tests the plot's tick choice, reading and errors; the SVG itself is checked by an
// independent parser (python3's xml.etree) in //tests/integration:metrics_test.
#include "api/plot/metrics_plot.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

namespace mxmaca::api {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(t != nullptr ? t : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("nice ticks cover the range with steps of 1, 2 or 5 x 10^k") {
  CHECK(NiceTicks(0, 10) == std::vector<double>{0, 2, 4, 6, 8, 10});
  CHECK(NiceTicks(1, 300) == std::vector<double>{0, 100, 200, 300});
  const std::vector<double> t = NiceTicks(8.3131, 8.3252);
  CHECK(t.front() <= 8.3131);
  CHECK(t.back() >= 8.3252);
  CHECK(t[1] - t[0] == Approx(0.005));  // range / 5 = 0.00242: the next of 1, 2, 5 x 10^-3
  // A flat series gets a range around its value.
  const std::vector<double> flat = NiceTicks(5, 5);
  CHECK(flat.front() < 5);
  CHECK(flat.back() > 5);
}

TEST_CASE("a metrics file's series, with nulls left out") {
  const std::string path =
      TempFile("metrics_plot_test.jsonl",
               "{\"type\":\"train\",\"iteration\":1,\"lm_loss\":9.5,\"tokens_per_second\":100}\n"
               "{\"type\":\"train\",\"iteration\":2,\"lm_loss\":null,\"tokens_per_second\":120,"
               "\"bubble_percent\":40}\n"
               "\n"
               "{\"type\":\"validation\",\"iteration\":2,\"lm_loss\":9.0}\n");
  auto s = ReadMetricsJsonl(path);
  REQUIRE(s.ok());
  CHECK(s->lm_loss.size() == 1);
  CHECK(s->tokens_per_second.size() == 2);
  CHECK(s->bubble_percent.size() == 1);
  CHECK(s->validation_loss.size() == 1);
  const std::string svg = RenderMetricsSvg(*s, "t");
  CHECK(svg.find("data-series=\"validation_lm_loss\"") != std::string::npos);
  CHECK(svg.find("<g class=\"panel\" id=\"bubble\">") != std::string::npos);
}

TEST_CASE("bad plot input is an error naming it") {
  auto missing = ReadMetricsJsonl("/nonexistent/metrics.jsonl");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  auto bad = ReadMetricsJsonl(TempFile("bad.jsonl", "{\"iteration\":1}\nnot json\n"));
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("line 2") != std::string::npos);
  auto usage = RunPlot({"--metrics", "x.jsonl"});
  CHECK(std::string(usage.message()).find("--output") != std::string::npos);
  auto unknown = RunPlot({"--metrics", "x", "--output", "y", "--colour", "red"});
  CHECK(std::string(unknown.message()).find("--colour") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
