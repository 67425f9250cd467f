// api/train/params_norm.h: Megatron's params norm (--log-params-norm) over the ranks of this
// process.
//
// Source: calc_params_l2_norm (core_v0.19.0 megatron/training/utils/common_utils.py), which
// train() calls after train_step: the L2 norm of every model parameter counted once in the
// job (tensor-parallel duplicates dropped, shared parameters such as the last stage's tied
// word embedding left out, experts once per expert-data-parallel group), read from the fp32
// main (master) weights after the optimizer step of the iteration.
#ifndef MXMACA_API_TRAIN_PARAMS_NORM_H_
#define MXMACA_API_TRAIN_PARAMS_NORM_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "actors/stage_program.h"
#include "api/train/stage_ranks.h"
#include "kernels/exec_context.h"
#include "layers/grad_buckets.h"

namespace mxmaca::api {

// RankParamsNormSquared: this rank's share of the squared norm (fp64): in each chunk, the
// bucket shards the rank owns among the `grad_group_rank`-th of its data(-context)-parallel
// group (DataParallelBuckets::ShardOf: the replicas hold equal parameters, and with the
// distributed optimizer the shard is the part this rank updated), counting the tensors
// program.counts_toward_grad_norm counts (as the grad norm does); plus, on expert-data-
// parallel rank 0, the expert region (layers/gpt_stage.h). Summed as ShardGradNormSquared
// sums gradients (kernels::cpu::SumSquares per piece, in arena order).
double RankParamsNormSquared(const kernels::ExecContext& exec, actors::StageProgram& program,
                             const std::vector<layers::DataParallelBuckets>& buckets,
                             int grad_group_rank);

// RankGradZeros: this rank's share of Megatron's num-zeros (count_zeros_fp32, core_v0.19.0
// megatron/core/optimizer/clip_grads.py): the gradient elements equal to 0 over the same
// pieces RankParamsNormSquared reads (each logical gradient element once in the job), read
// after the gradients were reduced and before the step.
int64_t RankGradZeros(actors::StageProgram& program,
                      const std::vector<layers::DataParallelBuckets>& buckets, int grad_group_rank);

// GradZerosOf: a function summing RankGradZeros over `ranks` (CoordinatorConfig::
// num_zeros_in_grad); between the ranks' reports and their optimizer step only.
std::function<int64_t()> GradZerosOf(const std::vector<StageRank>& ranks,
                                     int32_t context_parallel_size);

// ParamsNormSquaredOf: a function summing RankParamsNormSquared over `ranks` in rank order
// (CoordinatorConfig::params_norm_squared); it reads the ranks' parameters, so it runs
// between iterations only. `context_parallel_size`: the grad group rank is
// data_parallel_rank x cp + context_parallel_rank.
std::function<double()> ParamsNormSquaredOf(const std::vector<StageRank>& ranks,
                                            int32_t context_parallel_size,
                                            const kernels::ExecContext& exec);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_PARAMS_NORM_H_
