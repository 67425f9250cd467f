// layers/moe/dispatch/hierarchical_dispatcher.h: HierarchicalDispatcher, an expert-parallel
// token exchange that crosses node boundaries with ONE message per (source node,
// destination node) pair and step (issue 7: "groups tokens per destination node before
// crossing the network"), built on Send/Recv of the EP group only.
//
// Nodes. A member of the EP group with global rank r is on node r / ranks_per_node (the
// launcher's node rank when every node runs ranks_per_node processes; docs/ARCHITECTURE.md "Rank
// layout"). The EP members of one node are contiguous in the group (ranks ascend); the
// first of them is the node's leader. K = number of nodes the EP group spans.
//
// Message of the node pair (a -> b), dispatch direction: for each destination rank d of
// node b (ascending), for each source rank s of node a (ascending), the block of
// RowsBetween(s, d) rows s routes to d's experts, in s's global-expert-major order. The
// combine message b -> a carries the expert outputs of the same rows in the same layout.
//
// Steps (each waits for the previous one; "intra" messages stay inside a node):
//   count exchange (int64)
//     C1 intra  every non-leader sends its CountHeader [E + 2] to its leader
//     C2 inter  each leader sends its node's headers [m_a, E + 2] to every other leader
//     C3 intra  each leader sends the full matrix [P, E + 2] to its members
//   dispatch rows (fp32)
//     D1 intra  every non-leader sends its rows [T, h] to its leader
//     D2 inter  each leader sends message (a -> b) to the leader of every other node b
//     D3 intra  each leader assembles every member's expert input [N_d, h] in final order
//               (local-expert-major, source-minor) and sends it
//   combine rows (fp32): the reverse
//     R1 intra  every non-leader sends its expert outputs [N_d, h] to its leader
//     R2 inter  each leader sends message (b -> a) to every other leader
//     R3 intra  each leader assembles every member's [T_s, h] in original order, sends it
// Messages that cross a node boundary: exactly one per ordered node pair in C2, D2 and R2
// (K * (K - 1) each; sent even when empty, so the protocol does not depend on the routing),
// none elsewhere, and no collective spans nodes. A single node (K = 1) sends nothing
// between leaders; ranks_per_node = 1 makes every rank a leader and D2 / R2 a pairwise
// exchange.
//
// The count matrix takes a separate inter-node step (C2) because a Recv must know its size
// before the rows arrive: the rows message D2 is sized from the counts of C2.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_HIERARCHICAL_DISPATCHER_H_
#define MXMACA_LAYERS_MOE_DISPATCH_HIERARCHICAL_DISPATCHER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/moe/dispatch/token_dispatcher.h"

namespace mxmaca::layers::moe::dispatch {

// NodeTopology: how the members of an EP group fall onto nodes.
struct NodeTopology {
  std::vector<int> node_of;               // [P] node index (0..K-1) of each EP member
  std::vector<std::vector<int>> members;  // [K] EP indices of each node, ascending
  int num_nodes() const { return static_cast<int>(members.size()); }
  int leader(int node) const { return members[node].front(); }

  // Create: from the group's global ranks. Errors: InvalidArgument when ranks_per_node < 1.
  static absl::StatusOr<NodeTopology> Create(const transport::ProcessGroup& group,
                                             int ranks_per_node);
};

class HierarchicalDispatcher : public TokenDispatcher {
 public:
  // Create: options as every dispatcher, plus ranks_per_node (>= 1: processes per node;
  // a launcher's --nproc-per-node). Errors: ValidateDispatcherOptions's, NodeTopology's.
  static absl::StatusOr<std::unique_ptr<HierarchicalDispatcher>> Create(DispatcherOptions options,
                                                                        int ranks_per_node);

  const char* name() const override { return "hierarchical"; }
  const NodeTopology& topology() const { return topology_; }

 protected:
  void ExchangeCounts(std::vector<int64_t> header, LayoutDone done) override;
  void MoveToExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                     RowsDone done) override;
  void MoveFromExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                       RowsDone done) override;

 private:
  HierarchicalDispatcher(DispatcherOptions options, NodeTopology topology)
      : TokenDispatcher(std::move(options)), topology_(std::move(topology)) {}

  NodeTopology topology_;
};

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_HIERARCHICAL_DISPATCHER_H_
