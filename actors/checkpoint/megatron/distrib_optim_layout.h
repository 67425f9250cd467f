// actors/checkpoint/megatron/distrib_optim_layout.h: where Megatron-Core's distributed
// optimizer keeps each parameter's state in distrib_optim.pt (--use-distributed-optimizer
// with --ckpt-format torch), from megatron/core/optimizer/distrib_optimizer.py at
// core_v0.19.0 (_compute_per_buffer_param_layout, get_parameter_state_dp_zero) and
// megatron/core/optimizer/param_layout.py (pad_param_start, pad_bucket_end).
//
// One gradient buffer per model chunk (and dtype; experts in their own): its parameters in
// reverse named_parameters order, each start padded to a multiple of 64 elements; a bucket
// closes once it holds >= bucket_size elements, and around a parameter marked
// shared_embedding (the tied word embedding / output layer of a pipeline's first and last
// stage), its end padded to a multiple of lcm(dp, 128) (lcm(dp, 128, 2^16) with
// --ddp-pad-buckets-for-high-nccl-busbw). distrib_optim.pt holds, per buffer, "param",
// "exp_avg" and "exp_avg_sq" as flat fp32 tensors of the buckets' unpadded parts laid end
// to end ("buckets_coalesced": True): a parameter's state starts at the unpadded sizes of
// the buckets before its own plus its offset in its bucket.
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_DISTRIB_OPTIM_LAYOUT_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_DISTRIB_OPTIM_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace mxmaca::actors::checkpoint::megatron {

// DistOptParam: one parameter of a buffer, in named_parameters order.
struct DistOptParam {
  int64_t numel = 0;              // elements of this rank's shard
  bool shared_embedding = false;  // Megatron's param.shared_embedding
};

// CoalescedLayout: per parameter (same order), the first element of its state in the
// buffer's coalesced tensors, and their length (Megatron's numel_unpadded).
struct CoalescedLayout {
  std::vector<int64_t> offset;
  int64_t numel_unpadded = 0;
};

// CoalescedBufferLayout: the layout above for `params` with `bucket_size` elements per
// bucket (nullopt: one bucket, Megatron's None), padding for a data-parallel (x context-
// parallel) group of `dp_size` >= 1 ranks.
CoalescedLayout CoalescedBufferLayout(const std::vector<DistOptParam>& params,
                                      std::optional<int64_t> bucket_size, int64_t dp_size,
                                      bool pad_for_high_nccl_busbw);

// DistOptBucketSize: the bucket size Megatron's get_model gives a model chunk
// (megatron/training/training.py resolve_ddp_bucket_size and the per-chunk rules): nullopt
// without --overlap-grad-reduce, for chunks after the first, with
// --overlap-param-gather-with-optimizer-step or on pipeline ranks > 0; else
// --ddp-bucket-size, default max(4e7, 1e6 x dp_size).
std::optional<int64_t> DistOptBucketSize(bool overlap_grad_reduce,
                                         std::optional<int64_t> ddp_bucket_size, int64_t dp_size,
                                         int chunk, int pipeline_rank,
                                         bool overlap_param_gather_with_optimizer_step);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_DISTRIB_OPTIM_LAYOUT_H_
