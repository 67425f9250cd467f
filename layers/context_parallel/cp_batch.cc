// layers/context_parallel/cp_batch.cc: see cp_batch.h.
#include "layers/context_parallel/cp_batch.h"

#include <array>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "layers/context_parallel/pending_transfers.h"

namespace mxmaca::layers::cp {
namespace {

absl::Status CheckLength(const char* name, size_t got, int64_t want, bool may_be_empty) {
  if (may_be_empty && got == 0) return absl::OkStatus();
  if (static_cast<int64_t>(got) != want) {
    return absl::InvalidArgumentError(absl::StrCat("context parallel: micro-batch ", name, " has ",
                                                   got, " elements, expected b * s = ", want));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<data::GptMicroBatch> SliceMicroBatchForCpRank(const CpLayout& layout, int64_t rank,
                                                             const data::GptMicroBatch& batch) {
  if (batch.s != layout.seq) {
    return absl::InvalidArgumentError(absl::StrCat("context parallel: micro-batch sequence length ",
                                                   batch.s, " differs from the layout's ",
                                                   layout.seq));
  }
  if (batch.b < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: micro-batch size must be >= 1, got ", batch.b));
  }
  const int64_t n = batch.b * batch.s;
  absl::Status st = CheckLength("tokens", batch.tokens.size(), n, false);
  if (st.ok()) st = CheckLength("labels", batch.labels.size(), n, false);
  if (st.ok()) st = CheckLength("loss_mask", batch.loss_mask.size(), n, false);
  if (st.ok()) st = CheckLength("position_ids", batch.position_ids.size(), n, false);
  if (st.ok()) st = CheckLength("doc_start", batch.doc_start.size(), n, true);
  if (!st.ok()) return st;
  auto part = SliceBatchForCpRank(layout, rank, batch.b, batch.tokens.data(), batch.labels.data(),
                                  batch.loss_mask.data(), batch.position_ids.data(),
                                  batch.doc_start.empty() ? nullptr : batch.doc_start.data());
  if (!part.ok()) return part.status();
  data::GptMicroBatch out;
  out.b = batch.b;
  out.s = layout.LocalSeq();
  out.tokens = std::move(part->tokens);
  out.labels = std::move(part->labels);
  out.position_ids = std::move(part->position_ids);
  out.doc_start = std::move(part->doc_start);
  out.loss_mask = std::move(part->loss_mask);
  return out;
}

absl::StatusOr<CpLossPart> LocalLossPart(const std::vector<float>& per_token_loss,
                                         const std::vector<float>& loss_mask) {
  if (per_token_loss.size() != loss_mask.size()) {
    return absl::InvalidArgumentError(absl::StrCat("context parallel loss: ", per_token_loss.size(),
                                                   " losses but ", loss_mask.size(),
                                                   " loss-mask values"));
  }
  CpLossPart part;
  for (size_t i = 0; i < loss_mask.size(); ++i) {
    const float m = loss_mask[i];
    if (!std::isfinite(m) || m < 0.0f) {
      return absl::InvalidArgumentError(absl::StrCat("context parallel loss: loss_mask[", i,
                                                     "] = ", m, ", expected a finite value >= 0"));
    }
    if (m == 0.0f) continue;
    part.loss_sum += static_cast<double>(per_token_loss[i]) * m;
    part.tokens += m;
  }
  return part;
}

CpLossPart ReduceCpLossParts(const std::vector<CpLossPart>& parts) {
  CpLossPart total;
  for (const CpLossPart& p : parts) {
    total.loss_sum += p.loss_sum;
    total.tokens += p.tokens;
  }
  return total;
}

absl::StatusOr<CpLossPart> AllReduceCpLoss(transport::Communicator* comm,
                                           const transport::ProcessGroup& group,
                                           const CpLossPart& part, absl::Duration timeout) {
  if (comm == nullptr) return absl::InvalidArgumentError("AllReduceCpLoss: null communicator");
  // The buffer is shared with the completion callback, so a completion that arrives
  // after a timeout writes into memory that is still alive.
  auto buf = std::make_shared<std::array<float, 2>>(
      std::array<float, 2>{static_cast<float>(part.loss_sum), static_cast<float>(part.tokens)});
  PendingTransfers pending;
  transport::DoneCallback done =
      pending.Track(absl::StrCat("all-reduce of [loss_sum, tokens] on ", group.name()));
  comm->AllReduceSum(group, buf->data(), buf->data(), 2,
                     [buf, done](const transport::CollectiveInfo& info, absl::Status st) {
                       done(info, std::move(st));
                     });
  absl::Status st = pending.Wait(timeout);
  if (!st.ok()) return st;
  CpLossPart total;
  total.loss_sum = (*buf)[0];
  total.tokens = (*buf)[1];
  return total;
}

}  // namespace mxmaca::layers::cp
