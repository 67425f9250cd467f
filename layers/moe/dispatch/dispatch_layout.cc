// layers/moe/dispatch/dispatch_layout.cc: count headers, validation and offsets.
#include "layers/moe/dispatch/dispatch_layout.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::layers::moe::dispatch {

std::vector<int64_t> MakeCountHeader(bool valid, int64_t hidden,
                                     const std::vector<int64_t>& tokens_per_expert,
                                     int num_experts) {
  std::vector<int64_t> header(num_experts + kCountHeaderExtra, 0);
  if (!valid) {
    header[0] = kHeaderInvalid;
    return header;
  }
  header[0] = kHeaderValid;
  header[1] = hidden;
  for (int e = 0; e < num_experts; ++e) header[kCountHeaderExtra + e] = tokens_per_expert[e];
  return header;
}

absl::Status ValidateLocalInput(const float* rows, int64_t num_rows, int64_t hidden,
                                const std::vector<int64_t>& tokens_per_expert, int num_experts) {
  if (hidden < 1)
    return absl::InvalidArgumentError(absl::StrCat("hidden size is ", hidden, ", expected >= 1"));
  if (num_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_rows is ", num_rows, ", expected >= 0"));
  }
  if (static_cast<int64_t>(tokens_per_expert.size()) != num_experts) {
    return absl::InvalidArgumentError(absl::StrCat("tokens_per_expert has ",
                                                   tokens_per_expert.size(), " entries, expected ",
                                                   num_experts, " (num_experts)"));
  }
  int64_t sum = 0;
  for (int e = 0; e < num_experts; ++e) {
    if (tokens_per_expert[e] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens_per_expert[", e, "] is ", tokens_per_expert[e], ", expected >= 0"));
    }
    sum += tokens_per_expert[e];
  }
  if (sum != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens_per_expert sums to ", sum, " but num_rows is ", num_rows));
  }
  if (num_rows > 0 && rows == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("rows is null with num_rows ", num_rows));
  }
  return absl::OkStatus();
}

absl::StatusOr<DispatchLayout> DispatchLayout::Create(int ep_size, int num_experts, int ep_rank,
                                                      int64_t group_id,
                                                      const std::vector<int64_t>& headers) {
  if (ep_size < 1 || num_experts < 1 || num_experts % ep_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_experts ", num_experts,
                                                   " must be a positive multiple of the expert "
                                                   "model parallel size ",
                                                   ep_size));
  }
  if (ep_rank < 0 || ep_rank >= ep_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("ep_rank ", ep_rank, " outside [0, ", ep_size, ")"));
  }
  const size_t width = num_experts + kCountHeaderExtra;
  if (headers.size() != width * ep_size) {
    return absl::InvalidArgumentError(absl::StrCat("count headers have ", headers.size(),
                                                   " entries, expected ", width * ep_size));
  }
  std::vector<int> invalid;
  for (int s = 0; s < ep_size; ++s) {
    if (headers[s * width] != kHeaderValid) invalid.push_back(s);
  }
  if (!invalid.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("MoE dispatch: EP ranks [", absl::StrJoin(invalid, ", "),
                     "] rejected their own input (see their errors); nothing was exchanged"));
  }
  DispatchLayout layout;
  layout.ep_size_ = ep_size;
  layout.num_experts_ = num_experts;
  layout.ep_rank_ = ep_rank;
  layout.group_id_ = group_id;
  layout.hidden_ = headers[1];
  for (int s = 1; s < ep_size; ++s) {
    if (headers[s * width + 1] != layout.hidden_) {
      std::vector<std::string> each;
      for (int r = 0; r < ep_size; ++r) {
        each.push_back(absl::StrCat("rank ", r, ": ", headers[r * width + 1]));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "MoE dispatch: EP ranks disagree on the hidden size (", absl::StrJoin(each, ", "), ")"));
    }
  }
  const int E = num_experts;
  const int L = num_experts / ep_size;
  layout.counts_.resize(static_cast<size_t>(ep_size) * E);
  layout.input_offsets_.resize(static_cast<size_t>(ep_size) * (E + 1));
  for (int s = 0; s < ep_size; ++s) {
    int64_t offset = 0;
    for (int e = 0; e < E; ++e) {
      const int64_t c = headers[s * width + kCountHeaderExtra + e];
      if (c < 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("MoE dispatch: EP rank ", s, " sent tokens_per_expert[", e, "] = ", c));
      }
      layout.counts_[static_cast<size_t>(s) * E + e] = c;
      layout.input_offsets_[static_cast<size_t>(s) * (E + 1) + e] = offset;
      offset += c;
    }
    layout.input_offsets_[static_cast<size_t>(s) * (E + 1) + E] = offset;
  }
  layout.output_offsets_.resize(static_cast<size_t>(ep_size) * E);
  layout.output_rows_.assign(ep_size, 0);
  for (int d = 0; d < ep_size; ++d) {
    int64_t offset = 0;
    for (int l = 0; l < L; ++l) {
      const int e = d * L + l;
      for (int s = 0; s < ep_size; ++s) {
        layout.output_offsets_[static_cast<size_t>(s) * E + e] = offset;
        offset += layout.Count(s, e);
      }
    }
    layout.output_rows_[d] = offset;
  }
  return layout;
}

int64_t DispatchLayout::RowsBetween(int s, int d) const {
  const int L = num_local_experts();
  return InputOffset(s, (d + 1) * L) - InputOffset(s, d * L);
}

std::vector<int64_t> DispatchLayout::TokensPerLocalExpert(int d) const {
  const int L = num_local_experts();
  std::vector<int64_t> out(L, 0);
  for (int l = 0; l < L; ++l) {
    for (int s = 0; s < ep_size_; ++s) out[l] += Count(s, d * L + l);
  }
  return out;
}

std::vector<int64_t> DispatchLayout::TokensPerExpert() const {
  std::vector<int64_t> out(num_experts_, 0);
  for (int s = 0; s < ep_size_; ++s) {
    for (int e = 0; e < num_experts_; ++e) out[e] += Count(s, e);
  }
  return out;
}

double DispatchLayout::ExpertLoadImbalance() const {
  const std::vector<int64_t> per_expert = TokensPerExpert();
  int64_t total = 0, max = 0;
  for (int64_t c : per_expert) {
    total += c;
    max = std::max(max, c);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(max) * num_experts_ / static_cast<double>(total);
}

int64_t DispatchLayout::MaxInputRows() const {
  int64_t m = 0;
  for (int s = 0; s < ep_size_; ++s) m = std::max(m, InputRows(s));
  return m;
}

std::string DispatchLayout::DebugString() const {
  std::vector<std::string> rows;
  for (int s = 0; s < ep_size_; ++s) {
    rows.push_back(absl::StrCat(
        "[",
        absl::StrJoin(counts_.begin() + static_cast<size_t>(s) * num_experts_,
                      counts_.begin() + static_cast<size_t>(s + 1) * num_experts_, ","),
        "]"));
  }
  return absl::StrCat("DispatchLayout(P=", ep_size_, ", E=", num_experts_, ", h=", hidden_,
                      ", counts=[", absl::StrJoin(rows, ","), "])");
}

namespace {

// CopyRows: memcpy of `rows` rows of `hidden` floats; nothing when rows == 0 (pointers may
// then be null).
void CopyRows(float* dst, const float* src, int64_t rows, int64_t hidden) {
  if (rows > 0) std::memcpy(dst, src, static_cast<size_t>(rows * hidden) * sizeof(float));
}

}  // namespace

void GatherExpertInputs(const DispatchLayout& layout, int d, const float* by_source, float* out) {
  const int L = layout.num_local_experts();
  const int64_t h = layout.hidden();
  int64_t block = 0;  // first row of source s's block in by_source
  for (int s = 0; s < layout.ep_size(); ++s) {
    const int64_t base = layout.InputOffset(s, d * L);
    for (int l = 0; l < L; ++l) {
      const int e = d * L + l;
      CopyRows(out + layout.OutputOffset(s, e) * h,
               by_source + (block + layout.InputOffset(s, e) - base) * h, layout.Count(s, e), h);
    }
    block += layout.RowsBetween(s, d);
  }
}

void ScatterExpertOutputs(const DispatchLayout& layout, int d, const float* expert_rows,
                          float* by_source) {
  const int L = layout.num_local_experts();
  const int64_t h = layout.hidden();
  int64_t block = 0;
  for (int s = 0; s < layout.ep_size(); ++s) {
    const int64_t base = layout.InputOffset(s, d * L);
    for (int l = 0; l < L; ++l) {
      const int e = d * L + l;
      CopyRows(by_source + (block + layout.InputOffset(s, e) - base) * h,
               expert_rows + layout.OutputOffset(s, e) * h, layout.Count(s, e), h);
    }
    block += layout.RowsBetween(s, d);
  }
}

}  // namespace mxmaca::layers::moe::dispatch
