// layers/device/kernel_args_test.cc: each check accepts its boundary values and rejects
// the first value past them with kInvalidArgument naming the call and the value.
#include "layers/device/kernel_args.h"

#include <catch2/catch.hpp>
#include <string>

namespace mxmaca::layers::device {
namespace {

bool Invalid(const absl::Status& s, const std::string& fragment) {
  return s.code() == absl::StatusCode::kInvalidArgument &&
         s.message().find(fragment) != std::string::npos;
}

TEST_CASE("CheckSizes names the negative size") {
  CHECK(CheckSizes("Add", {{"n", 0}, {"m", 5}}).ok());
  CHECK(Invalid(CheckSizes("Add", {{"n", 3}, {"m", -2}}), "Add: m = -2 is negative"));
}

TEST_CASE("CheckGemmArgs: leading dimensions cover a row of each stored operand") {
  // A [3, 4] (lda >= 4), A^T stored [4, 3] (lda >= 3); B [4, 5] or [5, 4]; C [3, 5].
  CHECK(CheckGemmArgs(false, false, 3, 5, 4, 4, 5, 5).ok());
  CHECK(CheckGemmArgs(true, true, 3, 5, 4, 3, 4, 5).ok());
  CHECK(Invalid(CheckGemmArgs(false, false, 3, 5, 4, 3, 5, 5), "lda = 3"));
  CHECK(Invalid(CheckGemmArgs(true, false, 3, 5, 4, 2, 5, 5), "lda = 2"));
  CHECK(Invalid(CheckGemmArgs(false, true, 3, 5, 4, 4, 3, 5), "ldb = 3"));
  CHECK(Invalid(CheckGemmArgs(false, false, 3, 5, 4, 4, 5, 4), "ldc = 4"));
  CHECK(Invalid(CheckGemmArgs(false, false, -1, 5, 4, 4, 5, 5), "m = -1"));
  CHECK(CheckGemmArgs(false, false, 0, 0, 0, 1, 1, 1).ok());
  CHECK(Invalid(CheckGemmArgs(false, false, 0, 0, 0, 0, 1, 1), "lda = 0"));
}

TEST_CASE("dropout, rows, cross-entropy, AdamW bounds") {
  CHECK(CheckDropoutP("DropoutForward", 0.0f).ok());
  CHECK(CheckDropoutP("DropoutForward", 0.999f).ok());
  CHECK(Invalid(CheckDropoutP("DropoutForward", 1.0f), "DropoutForward: dropout"));
  CHECK(Invalid(CheckDropoutP("DropoutForward", -0.1f), "outside [0, 1)"));
  CHECK(CheckRows("RmsNormForward", 0, 1).ok());
  CHECK(Invalid(CheckRows("RmsNormForward", 4, 0), "h = 0"));
  CHECK(CheckCrossEntropyArgs("CE", 3, 8, 8).ok());
  CHECK(Invalid(CheckCrossEntropyArgs("CE", 3, 8, 9), "v = 9"));
  CHECK(Invalid(CheckCrossEntropyArgs("CE", 3, 8, 0), "v = 0"));
  CHECK(CheckAdamWArgs(0, 1).ok());
  CHECK(Invalid(CheckAdamWArgs(10, 0), "step = 0"));
}

TEST_CASE("attention and RoPE shapes") {
  CHECK(CheckAttentionDims("A", AttentionDims{1, 1, 4, 2, 8}).ok());
  CHECK(Invalid(CheckAttentionDims("A", AttentionDims{1, 1, 4, 3, 8}), "groups = 3"));
  CHECK(Invalid(CheckAttentionDims("A", AttentionDims{1, 0, 4, 2, 8}), "s = 0"));
  const auto elements = AttentionElements(AttentionDims{2, 10, 4, 2, 8});
  REQUIRE(elements.ok());
  CHECK(*elements == 2 * 4 * 10 * 10);
  CHECK(
      Invalid(AttentionElements(AttentionDims{1 << 20, 1 << 20, 64, 8, 8}).status(), "do not fit"));
  using kernels::RopeFrequencies;
  CHECK(CheckRopeArgs("R", 1, 2, 3, 16, 16, RopeFrequencies{10000.0f}).ok());
  CHECK(Invalid(CheckRopeArgs("R", 1, 2, 3, 16, 18, RopeFrequencies{10000.0f}), "rotary_dim = 18"));
  CHECK(Invalid(CheckRopeArgs("R", 1, 2, 3, 16, 5, RopeFrequencies{10000.0f}), "rotary_dim = 5"));
  CHECK(Invalid(CheckRopeArgs("R", 1, 2, 3, 16, 8, RopeFrequencies{0.0f}), "rotary base 0"));
  RopeFrequencies scaled;
  scaled.llama3_scaling = true;
  scaled.scaling_factor = -1.0f;
  CHECK(Invalid(CheckRopeArgs("R", 1, 2, 3, 16, 8, scaled), "scaling factor -1"));
  RopeFrequencies interpolated;
  interpolated.seq_len_interpolation_factor = -2.0f;
  CHECK(Invalid(CheckRopeArgs("R", 1, 2, 3, 16, 8, interpolated), "interpolation factor -2"));
  AttentionDims tp{1, 4, 2, 2, 8};
  tp.dropout_heads = 4;
  tp.dropout_head_offset = 2;
  CHECK(CheckAttentionDims("A", tp).ok());
  tp.dropout_head_offset = 3;
  CHECK(Invalid(CheckAttentionDims("A", tp), "heads [3, 5) do not lie within the 4"));
}

}  // namespace
}  // namespace mxmaca::layers::device
