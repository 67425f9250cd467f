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
// Rank layout: Megatron-Core's RankGenerator order tp-cp-ep-dp-pp (docs/ARCHITECTURE.md): TP varies
// fastest, so a TP group is `tp` consecutive ranks (stride 1), a CP group has stride tp,
// a DP group stride tp*cp, a PP group stride tp*cp*dp. With gpus_per_node G and ranks
// numbered node by node, a group of `size` ranks with `stride` stays inside one node iff
// stride * size <= G (for the power-of-two sizes Megatron uses, G divisible by stride *
// size); otherwise it crosses nodes and runs at the network's speed (the slowest hop of a
// ring sets its pace).
//
// Expert layers use a second grid over the same ranks (Megatron-Core's "MoE parallel
// folding", docs/ARCHITECTURE.md): etp-ep-edp-pp, ETP fastest, with ETP x EP x EDP = TP x CP x DP.
// An EP group is `ep` ranks `etp` apart; an expert-data-parallel (EDP) group `edp` ranks
// etp x ep apart. An all-to-all over a group that spans nodes is modelled as the pairwise
// exchange it is: each rank sends bytes / n to every peer at once, the peers in its own
// node over NVLink and the others over the network, so the time is the slower of the two
// shares (AllToAllOnClusterSeconds); inside one node it is AllToAllSeconds on NVLink.
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

// ExpertParallelGroups: the strides of the expert grid's groups (etp, ep, edp, pp).
struct ExpertParallelGroups {
  int64_t etp = 1, ep = 1, edp = 1, pp = 1;
  int64_t etp_stride() const { return 1; }
  int64_t ep_stride() const { return etp; }
  int64_t edp_stride() const { return etp * ep; }
};

// GroupRanksPerNode: how many ranks of a group of `size` ranks spaced `stride` apart share
// one node of `gpus_per_node` GPUs: min(size, max(1, gpus_per_node / stride)).
int64_t GroupRanksPerNode(int64_t stride, int64_t size, int64_t gpus_per_node);

// AllToAllOnClusterSeconds: an all-to-all of `bytes` per rank (its whole send buffer,
// including the share it keeps) over a group of `n` ranks spaced `stride` apart on
// `cluster`. With r = GroupRanksPerNode(stride, n) ranks per node:
//   max((r - 1)/n bytes / beta_nvlink, (n - r)/n bytes / beta_network) + (n - 1) alpha
// where alpha is the network's latency when the group spans nodes (r < n), else NVLink's;
// beta = nominal bandwidth x link_efficiency. r = n gives AllToAllSeconds on NVLink.
double AllToAllOnClusterSeconds(const ClusterSpec& cluster, double bytes, int64_t stride,
                                int64_t n);

// PipelineNeighbourLink: the link between pipeline stage s and s + 1 (ranks pp_stride
// apart): NVLink when both ranks share a node (pp_stride * 2 <= gpus_per_node for the
// power-of-two layouts), else the network.
LinkCost PipelineNeighbourLink(const ClusterSpec& cluster, const ParallelGroups& groups);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_COLLECTIVE_COST_H_
