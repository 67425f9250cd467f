// layers/device/kernel_args.cc: argument checks shared by the DeviceKernels backends.
#include "layers/device/kernel_args.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace mxmaca::layers::device {

absl::Status CheckSizes(const char* call, std::initializer_list<NamedSize> sizes) {
  for (const NamedSize& s : sizes) {
    if (s.value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(call, ": ", s.name, " = ", s.value, " is negative"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGemmArgs(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                           int64_t ldb, int64_t ldc) {
  absl::Status s = CheckSizes("Gemm", {{"m", m}, {"n", n}, {"k", k}});
  if (!s.ok()) return s;
  struct Ld {
    const char* name;
    int64_t value, row;
    const char* layout;
  };
  const Ld lds[] = {
      {"lda", lda, trans_a ? m : k, trans_a ? "A^T stored [k, m]" : "A stored [m, k]"},
      {"ldb", ldb, trans_b ? k : n, trans_b ? "B^T stored [n, k]" : "B stored [k, n]"},
      {"ldc", ldc, n, "C stored [m, n]"},
  };
  for (const Ld& ld : lds) {
    const int64_t need = ld.row > 1 ? ld.row : 1;
    if (ld.value < need) {
      return absl::InvalidArgumentError(absl::StrCat("Gemm: ", ld.name, " = ", ld.value,
                                                     " is less than a row of ", ld.layout, " (",
                                                     need, " elements)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDropoutP(const char* call, float p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": dropout probability ", p, " is outside [0, 1)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRows(const char* call, int64_t n, int64_t h) {
  if (n < 0 || h < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": expected n >= 0 rows of h >= 1 columns, got n = ", n, ", h = ", h));
  }
  return absl::OkStatus();
}

absl::Status CheckCrossEntropyArgs(const char* call, int64_t n, int64_t vp, int64_t v) {
  if (n < 0 || v < 1 || v > vp) {
    return absl::InvalidArgumentError(absl::StrCat(
        call, ": expected n >= 0 and 1 <= v <= vp, got n = ", n, ", vp = ", vp, ", v = ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckAttentionDims(const char* call, const AttentionDims& d) {
  if (d.b < 1 || d.s < 1 || d.heads < 1 || d.groups < 1 || d.head_dim < 1 ||
      d.heads % d.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        call, ": expected positive dims with heads % groups == 0, got b = ", d.b, ", s = ", d.s,
        ", heads = ", d.heads, ", groups = ", d.groups, ", head_dim = ", d.head_dim));
  }
  if (d.dropout_heads != 0 &&
      (d.dropout_head_offset < 0 || d.dropout_head_offset + d.heads > d.dropout_heads)) {
    return absl::InvalidArgumentError(absl::StrCat(
        call, ": heads [", d.dropout_head_offset, ", ", d.dropout_head_offset + d.heads,
        ") do not lie within the ", d.dropout_heads, " dropout heads"));
  }
  return absl::OkStatus();
}

absl::Status CheckRopeArgs(const char* call, int64_t b, int64_t s, int64_t heads, int64_t d,
                           int64_t rotary_dim, const kernels::RopeFrequencies& f) {
  const float base = f.base;
  absl::Status st = CheckSizes(call, {{"b", b}, {"s", s}, {"heads", heads}});
  if (!st.ok()) return st;
  if (d < 1 || rotary_dim < 2 || rotary_dim % 2 != 0 || rotary_dim > d) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": expected an even rotary_dim in [2, d], got rotary_dim = ", rotary_dim,
                     ", d = ", d));
  }
  if (!(base > 0.0f) || !std::isfinite(base)) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": rotary base ", base, " is not a positive number"));
  }
  if (f.llama3_scaling && !(f.scaling_factor > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": RoPE scaling factor ", f.scaling_factor, " is not positive"));
  }
  if (!(f.seq_len_interpolation_factor >= 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": RoPE seq-len interpolation factor ",
                                                   f.seq_len_interpolation_factor,
                                                   " is negative"));
  }
  return absl::OkStatus();
}

absl::Status CheckAdamWArgs(int64_t n, int64_t step) {
  if (n < 0 || step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamWStep: expected n >= 0 and step >= 1, got n = ", n, ", step = ", step));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AttentionElements(const AttentionDims& d) {
  absl::Status s = CheckAttentionDims("AttentionElements", d);
  if (!s.ok()) return s;
  // Products in double first: exact enough to detect int64 overflow of the fp32 bytes.
  const double elements = static_cast<double>(d.b) * static_cast<double>(d.heads) *
                          static_cast<double>(d.s) * static_cast<double>(d.s);
  if (elements * sizeof(float) >= static_cast<double>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("attention probabilities [b, heads, s, s] = [",
                                                   d.b, ", ", d.heads, ", ", d.s, ", ", d.s,
                                                   "] do not fit in int64 bytes"));
  }
  return d.b * d.heads * d.s * d.s;
}

}  // namespace mxmaca::layers::device
