// tests/gpu/reference_losses_test.cc: the reference-loss file round-trips exactly and its
// parser names the file, line and expectation of a malformed line.
#include "tests/gpu/reference_losses.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>

namespace mxmaca::gpu_check {
namespace {

using kernels::Precision;

TEST_CASE("reference losses round-trip bit for bit", "[reference]") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.1, 10.0);
  ReferenceRun a{"L=4 h=128 prec=fp32", {}}, b{"L=4 h=128 prec=bf16", {}};
  for (int i = 0; i < 20; ++i) a.steps.push_back({u(rng), u(rng)});
  for (int i = 0; i < 3; ++i) b.steps.push_back({u(rng) / 3.0, u(rng) * 1e-7});
  const std::string text = "# header\n" + FormatReferenceRun(ModelVariant::kGpt2, Precision::kFp32, a) +
                           FormatReferenceRun(ModelVariant::kLlama, Precision::kBf16, b);
  auto runs = ParseReferenceLosses(text, "ref.txt");
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  const ReferenceRun& ra = runs->at(ReferenceKey(ModelVariant::kGpt2, Precision::kFp32));
  const ReferenceRun& rb = runs->at("llama/bf16");
  CHECK(ra.fingerprint == a.fingerprint);
  CHECK(rb.fingerprint == b.fingerprint);
  REQUIRE(ra.steps.size() == 20);
  REQUIRE(rb.steps.size() == 3);
  for (int i = 0; i < 20; ++i) {
    CHECK(ra.steps[i].loss == a.steps[i].loss);  // %.17g is exact for doubles
    CHECK(ra.steps[i].grad_norm == a.steps[i].grad_norm);
  }
  CHECK(rb.steps[2].grad_norm == b.steps[2].grad_norm);
}

TEST_CASE("malformed reference files name the line", "[reference]") {
  auto error = [](const std::string& text) {
    auto r = ParseReferenceLosses(text, "ref.txt");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  CHECK(error("step gpt2 fp32 0 1.0 2.0\n").find("ref.txt:1") != std::string::npos);
  CHECK(error("run gpt2 fp32 x\nstep gpt2 fp32 1 1.0 2.0\n").find("step 0 of gpt2/fp32") !=
        std::string::npos);
  CHECK(error("run gpt2 fp32 x\nstep gpt2 fp32 0 one 2.0\n").find("ref.txt:2") !=
        std::string::npos);
  CHECK(error("run gpt2 fp32 x\nrun gpt2 fp32 y\n").find("again") != std::string::npos);
  CHECK(error("loss 1\n").find("'run' or 'step'") != std::string::npos);
  CHECK(ReadReferenceLosses("/nonexistent/ref.txt").status().code() ==
        absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mxmaca::gpu_check
