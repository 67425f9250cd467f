// layers/moe/dispatch/dispatch_layout.h: DispatchLayout, the agreed split sizes of one
// expert-parallel token exchange (the "stash" a dispatch leaves for its combine and for
// both backward passes).
//
// Shape legend: P = expert-model-parallel size (EP), E = number of experts (global),
// L = E / P local experts per EP rank, h = hidden size, T_s = rows EP rank s dispatches
// (its locally permuted rows, sum of its tokens_per_expert), N_d = rows EP rank d
// receives for its experts.
//
// Expert e lives on EP rank e / L as its local expert e % L (Megatron-Core:
// local_expert_indices = [ep_rank * L, (ep_rank + 1) * L)).
//
// Orders (Megatron-Core megatron/core/transformer/moe/token_dispatcher.py,
// MoEAlltoAllTokenDispatcher):
//   input of rank s   global-expert-major: the rows for expert 0, then expert 1, ...,
//                     expert E-1 (what the local permute produces); chunk (s, e) starts
//                     at InputOffset(s, e) and has Count(s, e) rows.
//   output of rank d  local-expert-major, source-rank-minor: for l = 0..L-1, for
//                     s = 0..P-1, the rows rank s routed to expert d*L + l, in s's order
//                     (the order after Megatron's sort_chunks_by_idxs with
//                     sort_input_by_local_experts); chunk (s, e) starts at
//                     OutputOffset(s, e) of the output of rank e / L.
// Combine moves every chunk back: rank d's rows at OutputOffset(s, e) return to rank s at
// InputOffset(s, e).
#ifndef MXMACA_LAYERS_MOE_DISPATCH_DISPATCH_LAYOUT_H_
#define MXMACA_LAYERS_MOE_DISPATCH_DISPATCH_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::layers::moe::dispatch {

// CountHeader: what each EP rank contributes to the count exchange, int64 [E + 2]:
//   [0]      kHeaderValid, or kHeaderInvalid when this rank's own input was rejected
//            (so every other rank fails at once instead of waiting for rows)
//   [1]      h, the hidden size of this rank's rows
//   [2 + e]  tokens_per_expert[e] of this rank
// kCountHeaderExtra: the two leading fields.
inline constexpr int64_t kHeaderValid = 1;
inline constexpr int64_t kHeaderInvalid = -1;
inline constexpr int kCountHeaderExtra = 2;

// MakeCountHeader: the header [E + 2] of one rank. `valid` false gives kHeaderInvalid
// (hidden and counts are then zeros).
std::vector<int64_t> MakeCountHeader(bool valid, int64_t hidden,
                                     const std::vector<int64_t>& tokens_per_expert,
                                     int num_experts);

// ValidateLocalInput: checks one rank's dispatch input before any communication.
//   rows               [num_rows, hidden] fp32, row-major (may be null when num_rows == 0)
//   tokens_per_expert  [num_experts] int64, >= 0, summing to num_rows
// Errors: InvalidArgument naming the field, index and value.
absl::Status ValidateLocalInput(const float* rows, int64_t num_rows, int64_t hidden,
                                const std::vector<int64_t>& tokens_per_expert, int num_experts);

// DispatchLayout: the gathered counts of every EP rank and the offsets derived from them.
// Immutable after Create; every EP rank builds the same matrix, so all agree on every
// split size without further messages.
class DispatchLayout {
 public:
  // Create: from the gathered headers `headers` [P, E + 2] (row s = EP rank s's
  // CountHeader). group_id is the EP ProcessGroup's id (checked again by combine).
  // Errors: FailedPrecondition when some rank flagged its input invalid (names the ranks),
  // when the ranks' hidden sizes differ (names each rank's value), or a count is negative
  // (names rank, expert, value); InvalidArgument when P < 1, E < 1, E % P != 0, ep_rank
  // is outside [0, P) or headers has the wrong size.
  static absl::StatusOr<DispatchLayout> Create(int ep_size, int num_experts, int ep_rank,
                                               int64_t group_id,
                                               const std::vector<int64_t>& headers);

  int ep_size() const { return ep_size_; }
  int num_experts() const { return num_experts_; }
  int num_local_experts() const { return num_experts_ / ep_size_; }
  int ep_rank() const { return ep_rank_; }
  int64_t group_id() const { return group_id_; }
  int64_t hidden() const { return hidden_; }

  // Count: rows EP rank s sends to expert e (rank s's tokens_per_expert[e]).
  int64_t Count(int s, int e) const { return counts_[static_cast<size_t>(s) * num_experts_ + e]; }
  // InputOffset: first row of chunk (s, e) in rank s's input (rows of experts < e).
  int64_t InputOffset(int s, int e) const {
    return input_offsets_[static_cast<size_t>(s) * (num_experts_ + 1) + e];
  }
  // OutputOffset: first row of chunk (s, e) in the output of EP rank e / L.
  int64_t OutputOffset(int s, int e) const {
    return output_offsets_[static_cast<size_t>(s) * num_experts_ + e];
  }
  // InputRows: T_s. OutputRows: N_d.
  int64_t InputRows(int s) const { return InputOffset(s, num_experts_); }
  int64_t OutputRows(int d) const { return output_rows_[d]; }
  // RowsBetween: rows EP rank s sends to EP rank d (all of d's local experts); they are
  // contiguous in s's input from InputOffset(s, d * L).
  int64_t RowsBetween(int s, int d) const;
  // TokensPerLocalExpert: [L] rows EP rank d receives for each local expert.
  std::vector<int64_t> TokensPerLocalExpert(int d) const;
  // TokensPerExpert: [E] rows each expert receives from all ranks (for load metrics).
  std::vector<int64_t> TokensPerExpert() const;
  // ExpertLoadImbalance: max / mean of TokensPerExpert() (1.0 when balanced or empty), the
  // "max/mean load imbalance" of the per-layer MoE metrics.
  double ExpertLoadImbalance() const;
  // MaxInputRows: max over s of T_s (the all-gather dispatcher's padded block).
  int64_t MaxInputRows() const;

  // DebugString: "DispatchLayout(P=2, E=4, h=8, counts=[[1,0,2,3],[0,0,0,5]])".
  std::string DebugString() const;

 private:
  DispatchLayout() = default;

  int ep_size_ = 1;
  int num_experts_ = 1;
  int ep_rank_ = 0;
  int64_t group_id_ = 0;
  int64_t hidden_ = 0;
  std::vector<int64_t> counts_;          // [P, E]
  std::vector<int64_t> input_offsets_;   // [P, E + 1]
  std::vector<int64_t> output_offsets_;  // [P, E]
  std::vector<int64_t> output_rows_;     // [P]
};

// GatherExpertInputs: the local regroup after an exchange. `by_source` holds, for
// s = 0..P-1 in order, the RowsBetween(s, d) rows rank s sent to rank d (each block in s's
// global-expert-major order); writes rank d's output [N_d, h] (local-expert-major,
// source-minor) to `out`. ScatterExpertOutputs is its inverse (out -> by_source).
// Megatron: sort_chunks_by_idxs(sort_input_by_local_experts) and
// (restore_output_by_local_experts).
void GatherExpertInputs(const DispatchLayout& layout, int d, const float* by_source, float* out);
void ScatterExpertOutputs(const DispatchLayout& layout, int d, const float* expert_rows,
                          float* by_source);

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_DISPATCH_LAYOUT_H_
