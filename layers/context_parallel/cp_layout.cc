// layers/context_parallel/cp_layout.cc: see cp_layout.h.
#include "layers/context_parallel/cp_layout.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::layers::cp {

namespace cp_layout_internal {

absl::Status CheckRank(const CpLayout& layout, int64_t rank) {
  if (rank < 0 || rank >= layout.cp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: CP rank ", rank, " is outside [0, ",
                     layout.cp_size, ") (context-parallel-size ", layout.cp_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckDims(int64_t outer, int64_t inner) {
  if (outer < 0 || inner < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: tensor dims must be >= 0, got outer ", outer,
                     " inner ", inner));
  }
  return absl::OkStatus();
}

}  // namespace cp_layout_internal

absl::StatusOr<CpLayout> MakeCpLayout(int64_t seq, int64_t cp_size, int64_t tp_size,
                                      bool sequence_parallel) {
  if (cp_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: context-parallel-size must be >= 1, got ", cp_size));
  }
  if (tp_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: tensor-model-parallel-size must be >= 1, got ",
                     tp_size));
  }
  if (seq <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: sequence length must be > 0, got ", seq));
  }
  const bool split_tp = sequence_parallel && tp_size > 1;
  const int64_t divisor = 2 * cp_size * (split_tp ? tp_size : 1);
  if (seq % divisor != 0) {
    if (split_tp) {
      return absl::InvalidArgumentError(absl::StrCat(
          "context parallel: sequence length ", seq,
          " is not divisible by 2 x context-parallel-size x tensor-model-parallel-size = 2 x ",
          cp_size, " x ", tp_size, " = ", divisor,
          " (each CP rank holds 2 chunks, split again over TP by sequence parallelism)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "context parallel: sequence length ", seq,
        " is not divisible by 2 x context-parallel-size = 2 x ", cp_size, " = ", divisor,
        " (the sequence is cut into 2 x CP chunks)"));
  }
  CpLayout layout;
  layout.seq = seq;
  layout.cp_size = cp_size;
  layout.chunk = seq / (2 * cp_size);
  return layout;
}

absl::StatusOr<std::vector<int32_t>> LocalPositions(const CpLayout& layout, int64_t rank) {
  absl::Status st = cp_layout_internal::CheckRank(layout, rank);
  if (!st.ok()) return st;
  std::vector<int32_t> pos(layout.LocalSeq());
  for (int64_t t = 0; t < layout.LocalSeq(); ++t) {
    pos[t] = static_cast<int32_t>(layout.GlobalPosition(rank, t));
  }
  return pos;
}

absl::StatusOr<CpRankBatch> SliceBatchForCpRank(const CpLayout& layout, int64_t rank,
                                                int64_t b, const int32_t* tokens,
                                                const int32_t* labels,
                                                const float* loss_mask,
                                                const int32_t* position_ids,
                                                const int32_t* doc_start) {
  absl::Status st = cp_layout_internal::CheckRank(layout, rank);
  if (!st.ok()) return st;
  if (b < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: micro-batch size must be >= 1, got ", b));
  }
  if (tokens == nullptr || labels == nullptr || loss_mask == nullptr) {
    return absl::InvalidArgumentError(
        "context parallel: SliceBatchForCpRank needs tokens, labels and loss_mask");
  }
  const int64_t n = b * layout.LocalSeq();
  CpRankBatch out;
  out.tokens.resize(n);
  out.labels.resize(n);
  out.loss_mask.resize(n);
  out.position_ids.resize(n);
  st = SliceSequence(layout, rank, b, 1, tokens, out.tokens.data());
  if (st.ok()) st = SliceSequence(layout, rank, b, 1, labels, out.labels.data());
  if (st.ok()) st = SliceSequence(layout, rank, b, 1, loss_mask, out.loss_mask.data());
  if (!st.ok()) return st;
  if (position_ids != nullptr) {
    st = SliceSequence(layout, rank, b, 1, position_ids, out.position_ids.data());
    if (!st.ok()) return st;
  } else {
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t t = 0; t < layout.LocalSeq(); ++t) {
        out.position_ids[bi * layout.LocalSeq() + t] =
            static_cast<int32_t>(layout.GlobalPosition(rank, t));
      }
    }
  }
  if (doc_start != nullptr) {
    out.doc_start.resize(n);
    st = SliceSequence(layout, rank, b, 1, doc_start, out.doc_start.data());
    if (!st.ok()) return st;
  }
  return out;
}

}  // namespace mxmaca::layers::cp
