// layers/device/kernel_args.h: the argument checks DeviceKernels implementations run
// before they call a kernel (device_kernels.h, "kInvalidArgument for a violated size
// precondition"). The kernels/cpu functions do not validate (a negative size there is
// undefined behaviour) and the kernels/cuda ones report violations as CudaStatus, which
// the adapter maps to kInternal; checking here gives both backends the same
// kInvalidArgument with a message naming the call, the argument and its value.
//
// Only host-visible arguments are checked (sizes, probabilities, strides): the contents
// of device memory (ids, targets, positions) cannot be read without a synchronisation.
#ifndef MXMACA_LAYERS_DEVICE_KERNEL_ARGS_H_
#define MXMACA_LAYERS_DEVICE_KERNEL_ARGS_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/rope_frequencies.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::layers::device {

// NamedSize: one size argument of a call, for CheckSizes' message.
struct NamedSize {
  const char* name;
  int64_t value;
};

// CheckSizes: every value >= 0; else kInvalidArgument "<call>: <name> = <value> is
// negative".
absl::Status CheckSizes(const char* call, std::initializer_list<NamedSize> sizes);

// CheckGemmArgs: m, n, k >= 0 and the row-major leading dimensions cover a row:
// lda >= (trans_a ? m : k), ldb >= (trans_b ? k : n), ldc >= n (each at least 1).
absl::Status CheckGemmArgs(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                           int64_t ldb, int64_t ldc);

// CheckDropoutP: 0 <= p < 1 (inverted dropout scales by 1 / (1 - p)).
absl::Status CheckDropoutP(const char* call, float p);

// CheckRows: n >= 0 rows of h > 0 columns (norms: a row of zero width has no mean).
absl::Status CheckRows(const char* call, int64_t n, int64_t h);

// CheckCrossEntropyArgs: n >= 0 and 1 <= v <= vp.
absl::Status CheckCrossEntropyArgs(const char* call, int64_t n, int64_t vp, int64_t v);

// CheckAttentionDims: b, s, heads, groups, head_dim > 0, heads % groups == 0, and with
// dropout_heads > 0 the rank's heads [dropout_head_offset, + heads) within dropout_heads.
absl::Status CheckAttentionDims(const char* call, const AttentionDims& d);

// CheckRopeArgs: b, s, heads >= 0, d > 0, rotary_dim even with 0 < rotary_dim <= d,
// f.base > 0, f.scaling_factor > 0 with Llama-3 scaling, f.seq_len_interpolation_factor
// >= 0.
absl::Status CheckRopeArgs(const char* call, int64_t b, int64_t s, int64_t heads, int64_t d,
                           int64_t rotary_dim, const kernels::RopeFrequencies& f);

// CheckAdamWArgs: n >= 0 and step >= 1 (1-based, after incrementing).
absl::Status CheckAdamWArgs(int64_t n, int64_t step);

// AttentionElements: b * heads * s * s (the [B, NH, S, S] probabilities), or
// kInvalidArgument when that count overflows int64 (or bytes of it, as fp32).
absl::StatusOr<int64_t> AttentionElements(const AttentionDims& d);

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_KERNEL_ARGS_H_
