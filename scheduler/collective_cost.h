// scheduler/collective_cost.h: time of collectives and point-to-point messages under the
// standard alpha-beta cost model, and which link a Megatron process group uses.
//
// A link has a latency alpha (seconds per step) and a bandwidth beta (bytes per second,
// per GPU per direction). For n ranks and a buffer of `bytes` (the full, unsplit buffer:
// the all-reduce's input, the all-gather's output, the reduce-scatter's input):
//   ring all-reduce      2 (n-1)/n bytes / beta + 2 (n-1) alpha   (reduce-scatter + all-gather)
//   tree all-reduce      2 bytes / beta + 2 ceil(log2 n) alpha    (reduce up, broadcast down,
//                                                                 pipelined: NCCL's tree)
//   all-reduce           min(ring, tree): NCCL picks the tree for small messages
//   all-gather           (n-1)/n bytes / beta + (n-1) alpha       (ring)
//   reduce-scatter       (n-1)/n bytes / beta + (n-1) alpha       (ring)
//   all-to-all           (n-1)/n bytes / beta + (n-1) alpha       (pairwise exchange)
//   send/recv            bytes / beta + alpha
// n = 1 costs 0. Source: Thakur, Rabenseifner, Gropp, "Optimization of collective
// communication operations in MPICH" (2005); NCCL's tuning model (ring vs tree).
//
// Rank layout: Megatron-Core's RankGenerator order tp-cp-ep-dp-pp (DESIGN.md): TP varies
// fastest, so a TP group is `tp` consecutive ranks (stride 1), a CP group has stride tp,
// a DP group stride tp*cp, a PP group stride tp*cp*dp. With gpus_per_node G and ranks
// numbered node by node, a group of `size` ranks with `stride` stays inside one node iff
// stride * size <= G (for the power-of-two sizes Megatron uses, G divisible by stride *
// size); otherwise it crosses nodes and runs at the network's speed (the slowest hop of a
// ring sets its pace).
#ifndef MXMACA_SCHEDULER_COLLECTIVE_COST_H_
#define MXMACA_SCHEDULER_COLLECTIVE_COST_H_

#include <cstdint>

#include "scheduler/cluster.h"

namespace mxmaca::scheduler {

// LinkCost: one link's alpha-beta parameters.
struct LinkCost {
  double bytes_per_s = 1;  // beta: achieved bandwidth per GPU per direction, > 0
  double latency_s = 0;    // alpha: per step
  bool intra_node = true;  // NVLink (true) or the network (false); for reports
};

// RingAllReduceSeconds, TreeAllReduceSeconds, AllReduceSeconds, AllGatherSeconds,
// ReduceScatterSeconds, AllToAllSeconds, SendRecvSeconds: the formulas above for `bytes`
// (>= 0) over `n` (>= 1) ranks on `link`.
double RingAllReduceSeconds(double bytes, int64_t n, const LinkCost& link);
double TreeAllReduceSeconds(double bytes, int64_t n, const LinkCost& link);
double AllReduceSeconds(double bytes, int64_t n, const LinkCost& link);
double AllGatherSeconds(double bytes, int64_t n, const LinkCost& link);
double ReduceScatterSeconds(double bytes, int64_t n, const LinkCost& link);
double AllToAllSeconds(double bytes, int64_t n, const LinkCost& link);
double SendRecvSeconds(double bytes, const LinkCost& link);

// GroupFitsInNode: whether a group of `size` ranks spaced `stride` apart lies inside one
// node of `gpus_per_node` GPUs (stride * size <= gpus_per_node).
bool GroupFitsInNode(int64_t stride, int64_t size, int64_t gpus_per_node);

// GroupLink: the link a group of `size` ranks spaced `stride` apart uses on `cluster`:
// NVLink when it fits in a node, else the network; bandwidth x cluster.link_efficiency.
LinkCost GroupLink(const ClusterSpec& cluster, int64_t stride, int64_t size);

// ParallelGroups: the strides of Megatron's groups for a (tp, cp, dp, pp) grid.
struct ParallelGroups {
  int64_t tp = 1, cp = 1, dp = 1, pp = 1;
  int64_t tp_stride() const { return 1; }
  int64_t cp_stride() const { return tp; }
  int64_t dp_stride() const { return tp * cp; }
  int64_t pp_stride() const { return tp * cp * dp; }
};

// PipelineNeighbourLink: the link between pipeline stage s and s + 1 (ranks pp_stride
// apart): NVLink when both ranks share a node (pp_stride * 2 <= gpus_per_node for the
// power-of-two layouts), else the network.
LinkCost PipelineNeighbourLink(const ClusterSpec& cluster, const ParallelGroups& groups);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_COLLECTIVE_COST_H_
