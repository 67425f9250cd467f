// api/simulate/moe_cost.h: the cost model of a Mixture-of-Experts layer's MLP block for
// the step simulator (step_model.h): router, token dispatch and combine over the expert
// grid, the routed experts' GEMMs, the shared expert, the stash they leave and the
// parameters each rank holds. docs/SIMULATOR.md ("Mixture of Experts") lists the formulas.
//
// Shape legend: T = b s / c tokens per rank and micro-batch before the TP split,
// t = TP, Tn = T / t tokens a rank holds at the MoE block (sequence parallelism is required
// with TP > 1, as Megatron-Core requires it for MoE with TP), h = hidden, E = experts,
// k = --moe-router-topk, fm = --moe-ffn-hidden-size (fm1 = 2 fm with SwiGLU), fs =
// --moe-shared-expert-intermediate-size (fs1 likewise), etp / ep / edp = the expert grid
// (scheduler/collective_cost.h ExpertParallelGroups), lambda = the effective load factor
// (MoeEffectiveLoad). Activations bf16, router logits and probabilities fp32.
//
// Sources: Megatron-Core megatron/core/transformer/moe/token_dispatcher.py
// (MoEAllGatherTokenDispatcher: all-gather of the hidden states over the ETP x EP group,
// reduce-scatter to combine; MoEAlltoAllTokenDispatcher: permute, all-to-all over EP, then
// an all-gather over the ETP group; combine in reverse), experts.py (TEGroupedMLP: local
// experts as one grouped GEMM, fc1 / fc2 split over ETP), shared_experts.py (the shared
// expert is a TP-parallel MLP), router.py (TopKRouter: a [h, E] GEMM).
#ifndef MXMACA_API_SIMULATE_MOE_COST_H_
#define MXMACA_API_SIMULATE_MOE_COST_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "api/simulate/op_time.h"
#include "layers/gpt_config.h"
#include "layers/moe/moe_layer.h"
#include "scheduler/cluster.h"
#include "scheduler/collective_cost.h"

namespace mxmaca::api {

// MoeDispatcher: --moe-token-dispatcher-type. kFlex (Megatron's DeepEP dispatcher) is
// costed as kAllToAll inside a node and with per-node deduplication across nodes;
// kHierarchical is MXMACA's per-node dispatcher (layers/moe/dispatch/README.md).
enum class MoeDispatcher { kAllGather, kAllToAll, kFlex, kHierarchical };

// ParseMoeDispatcher: "allgather" | "alltoall" | "alltoall_seq" (= alltoall) | "flex" |
// "hierarchical". Errors: InvalidArgument naming the value and the choices.
absl::StatusOr<MoeDispatcher> ParseMoeDispatcher(const std::string& value);

// MoeDispatcherName: "allgather", "alltoall", "flex", "hierarchical".
const char* MoeDispatcherName(MoeDispatcher d);

// MoeParallelOptions: the expert grid and the routing assumptions of a simulated MoE job.
struct MoeParallelOptions {
  int64_t expert_model_parallel_size = 1;   // ep, --expert-model-parallel-size
  int64_t expert_tensor_parallel_size = 1;  // etp, --expert-tensor-parallel-size (= TP default)
  MoeDispatcher dispatcher = MoeDispatcher::kAllGather;  // Megatron's default
  // --moe-load-imbalance: max / mean tokens per expert (>= 1), the "max/mean load" that
  // `mxmaca train` logs per MoE layer. The busiest EP rank's expert GEMMs, activation
  // kernels, stash and all-to-all bytes scale with it (the step waits for the slowest).
  double load_imbalance = 1.0;
};

// MoeEffectiveLoad: lambda, the factor on the busiest rank's routed rows: load_imbalance
// without a capacity factor (dropless); min(load_imbalance, C) with
// --moe-expert-capacity-factor C (tokens beyond capacity are dropped before the
// exchange); C with --moe-pad-expert-input-to-capacity (every expert padded to capacity).
double MoeEffectiveLoad(const layers::moe::MoELayerConfig& moe, const MoeParallelOptions& p);

// ExpectedNodesPerToken: the expected number of distinct nodes a token's top-k experts
// lie on, with `experts` spread evenly over `nodes` and k distinct experts drawn uniformly:
// N (1 - prod_{i<k} (E - E/N - i) / (E - i)).
double ExpectedNodesPerToken(double experts, double topk, double nodes);

// MoeBlockInputs: what MoeMlpBlockOps needs, resolved by the step model.
struct MoeBlockInputs {
  double T = 0;              // b s / c tokens per rank and micro-batch
  int64_t tp = 1;            // t (with t > 1 sequence parallelism is on)
  double flops_per_s = 1;    // peak x gemm_efficiency
  double hbm_bytes_per_s = 1;  // HBM x hbm_efficiency
  double tp_exchange_seconds = 0;  // one block's TP exchange of a [T, h] activation (with
                                   // SP an all-gather + a reduce-scatter)
  const scheduler::ClusterSpec* cluster = nullptr;
  MoeParallelOptions parallel;
};

// MoeMlpBlockOps: F, B, W of one MoE layer's MLP block (what replaces the dense MLP:
// router, permute, dispatch, routed experts, combine, unpermute, shared expert) per
// micro-batch on the busiest rank. GEMM FLOPs (F; B and W the same):
//   router 2 Tn h E; routed experts 2 lambda Tn k (h fm1 + fm h); shared 2 Tn (h fs1 + fs h).
// Memory-bound (F; B twice): permute + unpermute 2 (Tn h + Tn k h) bf16 reads and writes,
// router softmax / top-k 3 passes over Tn E fp32, expert activation lambda Tn k (fm1 + fm)
// bf16, shared activation Tn (fs1 + fs) bf16. Communication per F (B the same):
//   alltoall (and flex with the EP group inside a node): dispatch and combine all-to-all
//     of lambda Tn k h bf16 per rank over the EP group (AllToAllOnClusterSeconds, stride
//     etp), and with etp > 1 an all-gather and a reduce-scatter of the etp lambda Tn k h
//     routed rows over the ETP group;
//   flex with the EP group over N nodes (r EP ranks per node): DeepEP's internode kernels
//     send a token once to each remote node holding one of its experts and forward it
//     over NVLink there, so per direction max(lambda Tn h x D (N - 1) / N bf16 / beta_net,
//     lambda Tn k h (r - 1) / r bf16 / beta_nvlink) + (N - 1) alpha_net + (r - 1)
//     alpha_nvlink, with D = ExpectedNodesPerToken(E, k, N) (group-limited routing, which
//     would lower D, is not modelled);
//   hierarchical (MXMACA's): per direction, sequentially, the r - 1 members of a node send
//     their lambda Tn k h bf16 rows to the node's leader over NVLink ((r - 1) x the buffer
//     through the leader's link), the leader sends the node's remote share, r x the buffer
//     x (ep - r) / ep, over its own network link (one message per node pair: (N - 1)
//     network latencies), and scatters back over NVLink as it gathered; plus the ETP
//     gather / scatter as alltoall's;
//   allgather: all-gather and reduce-scatter of (etp ep) Tn h bf16 over the ETP x EP
//     group (stride 1), independent of the load;
//   shared expert (fs > 0): one block's TP exchange (all-gather + reduce-scatter with
//     SP), as the dense MLP's.
std::array<OpTime, 3> MoeMlpBlockOps(const layers::GptConfig& model, const MoeBlockInputs& in);

// MoeMlpBlockStashBytes: activation bytes one micro-batch leaves for B and W in a MoE
// layer's MLP block on the busiest rank: the block input 2 Tn h, the dropout mask Tn h,
// router logits and probabilities 8 Tn E, per routed row (lambda Tn k etp rows) its
// gathered input 2 h and fc1 / activation outputs 2 (fm1 + fm) / etp, and the shared
// expert's input and fc1 / activation outputs 2 Tn (h + fs1 + fs).
double MoeMlpBlockStashBytes(const layers::GptConfig& model, const MoeBlockInputs& in);

// DenseMlpParameters: elements of one dense MLP (linear_fc1, linear_fc2 with biases when
// add_bias_linear), as layers::CountStageParameters counts it per layer.
int64_t DenseMlpParameters(const layers::GptConfig& model);

// MoeNonExpertParameters: elements of one MoE layer's MLP block outside the experts: the
// router [E, h] and the shared expert (fc1, fc2, biases); whole (not sharded).
int64_t MoeNonExpertParameters(const layers::GptConfig& model);

// MoeSharedExpertParameters: the shared expert's part of MoeNonExpertParameters (TP-sharded
// like a dense MLP; the router is replicated on the TP ranks).
int64_t MoeSharedExpertParameters(const layers::GptConfig& model);

// MoeExpertParametersPerRank: elements of one MoE layer's routed experts on one rank:
// E / ep experts, each (h fm1 + fm h + biases) / etp.
double MoeExpertParametersPerRank(const layers::GptConfig& model, const MoeParallelOptions& p);

}  // namespace mxmaca::api

#endif  // MXMACA_API_SIMULATE_MOE_COST_H_
