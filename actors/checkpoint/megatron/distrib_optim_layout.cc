// actors/checkpoint/megatron/distrib_optim_layout.cc: see distrib_optim_layout.h.
#include "actors/checkpoint/megatron/distrib_optim_layout.h"

#include <algorithm>
#include <numeric>

namespace mxmaca::actors::checkpoint::megatron {
namespace {

int64_t PadTo(int64_t value, int64_t divisor) { return (value + divisor - 1) / divisor * divisor; }

}  // namespace

CoalescedLayout CoalescedBufferLayout(const std::vector<DistOptParam>& params,
                                      std::optional<int64_t> bucket_size, int64_t dp_size,
                                      bool pad_for_high_nccl_busbw) {
  int64_t divisor = std::lcm<int64_t>(std::max<int64_t>(dp_size, 1), 128);
  if (pad_for_high_nccl_busbw) divisor = std::lcm<int64_t>(divisor, int64_t{1} << 16);
  const size_t n = params.size();
  std::vector<int64_t> start(n, 0), bucket_of(n, 0);
  std::vector<int64_t> bucket_start, bucket_unpadded;
  int64_t param_start = 0, current_bucket_start = 0, param_end = 0;
  int64_t in_bucket = 0;
  // _finalize_bucket: records the bucket's unpadded size; returns the padded end.
  auto finalize = [&](int64_t end) {
    bucket_start.push_back(current_bucket_start);
    bucket_unpadded.push_back(end - current_bucket_start);
    return PadTo(end, divisor);
  };
  for (size_t j = n; j-- > 0;) {  // params[::-1]
    const DistOptParam& p = params[j];
    param_start = PadTo(param_start, 64);
    if (p.shared_embedding && in_bucket > 0) {
      current_bucket_start = finalize(param_start);
      in_bucket = 0;
      param_start = current_bucket_start;
    }
    param_end = param_start + p.numel;
    start[j] = param_start;
    bucket_of[j] = static_cast<int64_t>(bucket_start.size());
    ++in_bucket;
    if ((bucket_size.has_value() && param_end - current_bucket_start >= *bucket_size) ||
        p.shared_embedding) {
      current_bucket_start = finalize(param_end);
      in_bucket = 0;
      param_start = current_bucket_start;
    } else {
      param_start = param_end;
    }
  }
  if (in_bucket > 0) finalize(param_end);
  // get_parameter_state_dp_zero: bucket b's unpadded part follows those of buckets < b.
  std::vector<int64_t> coalesced_start(bucket_start.size(), 0);
  CoalescedLayout out;
  for (size_t b = 0; b < bucket_start.size(); ++b) {
    coalesced_start[b] = out.numel_unpadded;
    out.numel_unpadded += bucket_unpadded[b];
  }
  out.offset.resize(n);
  for (size_t j = 0; j < n; ++j) {
    const size_t b = static_cast<size_t>(bucket_of[j]);
    out.offset[j] = coalesced_start[b] + (start[j] - bucket_start[b]);
  }
  return out;
}

std::optional<int64_t> DistOptBucketSize(bool overlap_grad_reduce,
                                         std::optional<int64_t> ddp_bucket_size, int64_t dp_size,
                                         int chunk, int pipeline_rank,
                                         bool overlap_param_gather_with_optimizer_step) {
  if (!overlap_grad_reduce || chunk > 0 || pipeline_rank > 0 ||
      overlap_param_gather_with_optimizer_step) {
    return std::nullopt;
  }
  if (ddp_bucket_size.has_value()) return ddp_bucket_size;
  return std::max<int64_t>(40000000, 1000000 * dp_size);
}

}  // namespace mxmaca::actors::checkpoint::megatron
