// layers/context_parallel/cp_layout.h: Megatron's load-balanced context-parallel split of
// a sequence (the 2 x CP chunk layout) and the slicing / gathering of per-token tensors.
//
// Source: megatron/core/utils.py get_batch_on_this_cp_rank. With CP ranks 0..CP-1 the
// sequence of length s is cut into 2 CP chunks of c = s / (2 CP) tokens; CP rank r holds
// chunk r followed by chunk 2 CP - 1 - r, i.e. s_local = 2 c tokens:
//   local index t in [0, c)       <-> original position r c + t
//   local index t in [c, 2 c)     <-> original position (2 CP - 1 - r) c + (t - c)
// Under a causal mask chunk k needs the keys of chunks 0..k, so pairing an early chunk
// with its mirror gives every rank the same attention work (Megatron's load balancing).
// CP = 1 gives chunks 0 and 1 in order: the unsplit sequence.
//
// Per-token tensors are viewed as [outer, s, inner] (outer = b for [b, s, ...] token
// tensors, labels and loss masks; outer = b * np for head-major [b, np, s, hn]); slicing
// keeps the values, so position ids, document-start ids (layers/transformer_layer.h
// doc_start, --reset-attention-mask) and labels computed on the full sequence keep their
// ORIGINAL positions after slicing — which is what RoPE, the document mask and the loss
// need.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_CP_LAYOUT_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_CP_LAYOUT_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::layers::cp {

// CpLayout: the chunk layout of one sequence length over a CP group. Built by
// MakeCpLayout (which validates it); plain value type.
struct CpLayout {
  int64_t seq = 0;      // s: the full sequence length
  int64_t cp_size = 1;  // CP: the context-parallel world size
  int64_t chunk = 0;    // c = s / (2 CP)

  // LocalSeq: s_local = 2 c, the tokens one CP rank holds.
  int64_t LocalSeq() const { return 2 * chunk; }
  // NumChunks: 2 CP.
  int64_t NumChunks() const { return 2 * cp_size; }
  // ChunkOf: the global chunk index of rank `rank`'s half `half` (0: chunk rank, 1: chunk
  // 2 CP - 1 - rank). Requires 0 <= rank < CP, half in {0, 1}.
  int64_t ChunkOf(int64_t rank, int half) const {
    return half == 0 ? rank : 2 * cp_size - 1 - rank;
  }
  // GlobalPosition: the original position of rank `rank`'s local index t in [0, 2c).
  int64_t GlobalPosition(int64_t rank, int64_t t) const {
    return t < chunk ? rank * chunk + t : (2 * cp_size - 1 - rank) * chunk + (t - chunk);
  }
};

// MakeCpLayout: validates and builds the layout for sequence length `seq` on `cp_size`
// ranks. tp_size and sequence_parallel describe the tensor-parallel group the CP group is
// composed with: with sequence parallelism (and tp_size > 1) each rank's 2 chunks are
// further split over TP, so s must be divisible by 2 x CP x TP (issue 9's rule).
// Errors: InvalidArgument naming the values when seq <= 0, cp_size < 1, tp_size < 1, or s
// is not divisible by 2 x CP (x TP with sequence parallelism).
absl::StatusOr<CpLayout> MakeCpLayout(int64_t seq, int64_t cp_size, int64_t tp_size = 1,
                                      bool sequence_parallel = false);

// LocalPositions: the original positions of rank `rank`'s s_local tokens, int32
// [s_local] (the position ids of a batch without --reset-position-ids).
// Errors: InvalidArgument when rank is outside [0, CP).
absl::StatusOr<std::vector<int32_t>> LocalPositions(const CpLayout& layout, int64_t rank);

// SliceSequence: copies rank `rank`'s tokens of full [outer, s, inner] into
// local [outer, s_local, inner] (elements of type T, trivially copyable; any dtype).
// Errors: InvalidArgument when rank is outside [0, CP) or outer/inner < 0.
template <typename T>
absl::Status SliceSequence(const CpLayout& layout, int64_t rank, int64_t outer,
                           int64_t inner, const T* full, T* local);

// GatherSequence: the inverse of SliceSequence for one rank: writes rank `rank`'s
// local [outer, s_local, inner] into its positions of full [outer, s, inner] (the other
// ranks' positions are left as they are; call once per rank to rebuild the whole
// sequence). Errors: as SliceSequence.
template <typename T>
absl::Status GatherSequence(const CpLayout& layout, int64_t rank, int64_t outer,
                            int64_t inner, const T* local, T* full);

// CpRankBatch: one CP rank's part of a micro-batch of b sequences (what
// get_batch_on_this_cp_rank returns), every tensor [b, s_local].
struct CpRankBatch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> labels;
  std::vector<float> loss_mask;
  std::vector<int32_t> position_ids;  // original positions (sliced, never renumbered)
  std::vector<int32_t> doc_start;     // empty unless the batch has document masks
};

// SliceBatchForCpRank: slices the full-sequence batch tensors ([b, s] each, row-major)
// for rank `rank`. position_ids may be nullptr (then LocalPositions per row);
// doc_start may be nullptr (no --reset-attention-mask; the result's doc_start is empty).
// Errors: InvalidArgument when rank is outside [0, CP), b < 1, or tokens, labels or
// loss_mask is nullptr.
absl::StatusOr<CpRankBatch> SliceBatchForCpRank(const CpLayout& layout, int64_t rank,
                                                int64_t b, const int32_t* tokens,
                                                const int32_t* labels,
                                                const float* loss_mask,
                                                const int32_t* position_ids,
                                                const int32_t* doc_start);

namespace cp_layout_internal {
// CheckRank / CheckDims: the argument checks of the templates below.
absl::Status CheckRank(const CpLayout& layout, int64_t rank);
absl::Status CheckDims(int64_t outer, int64_t inner);
}  // namespace cp_layout_internal

// ---- implementation of the templates ---------------------------------------------------

template <typename T>
absl::Status SliceSequence(const CpLayout& layout, int64_t rank, int64_t outer,
                           int64_t inner, const T* full, T* local) {
  absl::Status st = cp_layout_internal::CheckRank(layout, rank);
  if (st.ok()) st = cp_layout_internal::CheckDims(outer, inner);
  if (!st.ok()) return st;
  const int64_t c = layout.chunk;
  const size_t chunk_bytes = static_cast<size_t>(c * inner) * sizeof(T);
  for (int64_t o = 0; o < outer; ++o) {
    for (int half = 0; half < 2; ++half) {
      const int64_t g = layout.ChunkOf(rank, half);
      std::memcpy(local + (o * 2 * c + half * c) * inner,
                  full + (o * layout.seq + g * c) * inner, chunk_bytes);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status GatherSequence(const CpLayout& layout, int64_t rank, int64_t outer,
                            int64_t inner, const T* local, T* full) {
  absl::Status st = cp_layout_internal::CheckRank(layout, rank);
  if (st.ok()) st = cp_layout_internal::CheckDims(outer, inner);
  if (!st.ok()) return st;
  const int64_t c = layout.chunk;
  const size_t chunk_bytes = static_cast<size_t>(c * inner) * sizeof(T);
  for (int64_t o = 0; o < outer; ++o) {
    for (int half = 0; half < 2; ++half) {
      const int64_t g = layout.ChunkOf(rank, half);
      std::memcpy(full + (o * layout.seq + g * c) * inner,
                  local + (o * 2 * c + half * c) * inner, chunk_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_CP_LAYOUT_H_
