// scheduler/collective_cost.cc: see collective_cost.h.
#include "scheduler/collective_cost.h"

#include <algorithm>
#include <cmath>

namespace mxmaca::scheduler {

double RingAllReduceSeconds(double bytes, int64_t n, const LinkCost& link) {
  if (n <= 1) return 0;
  const double nd = static_cast<double>(n);
  return 2.0 * (nd - 1) / nd * bytes / link.bytes_per_s + 2.0 * (nd - 1) * link.latency_s;
}

double TreeAllReduceSeconds(double bytes, int64_t n, const LinkCost& link) {
  if (n <= 1) return 0;
  const double steps = std::ceil(std::log2(static_cast<double>(n)));
  return 2.0 * bytes / link.bytes_per_s + 2.0 * steps * link.latency_s;
}

double AllReduceSeconds(double bytes, int64_t n, const LinkCost& link) {
  return std::min(RingAllReduceSeconds(bytes, n, link), TreeAllReduceSeconds(bytes, n, link));
}

double AllGatherSeconds(double bytes, int64_t n, const LinkCost& link) {
  if (n <= 1) return 0;
  const double nd = static_cast<double>(n);
  return (nd - 1) / nd * bytes / link.bytes_per_s + (nd - 1) * link.latency_s;
}

double ReduceScatterSeconds(double bytes, int64_t n, const LinkCost& link) {
  return AllGatherSeconds(bytes, n, link);
}

double AllToAllSeconds(double bytes, int64_t n, const LinkCost& link) {
  return AllGatherSeconds(bytes, n, link);
}

double SendRecvSeconds(double bytes, const LinkCost& link) {
  return bytes / link.bytes_per_s + link.latency_s;
}

bool GroupFitsInNode(int64_t stride, int64_t size, int64_t gpus_per_node) {
  return stride * size <= gpus_per_node;
}

LinkCost GroupLink(const ClusterSpec& cluster, int64_t stride, int64_t size) {
  LinkCost link;
  link.intra_node = GroupFitsInNode(stride, size, cluster.gpus_per_node);
  const double gb = link.intra_node ? cluster.nvlink_gb_per_s : cluster.internode_gb_per_s;
  link.bytes_per_s = gb * 1e9 * cluster.link_efficiency;
  link.latency_s =
      (link.intra_node ? cluster.nvlink_latency_us : cluster.internode_latency_us) * 1e-6;
  return link;
}

int64_t GroupRanksPerNode(int64_t stride, int64_t size, int64_t gpus_per_node) {
  const int64_t per_node = std::max<int64_t>(1, gpus_per_node / std::max<int64_t>(1, stride));
  return std::min(size, per_node);
}

double AllToAllOnClusterSeconds(const ClusterSpec& cluster, double bytes, int64_t stride,
                                int64_t n) {
  if (n <= 1) return 0;
  const int64_t r = GroupRanksPerNode(stride, n, cluster.gpus_per_node);
  const LinkCost nvlink = GroupLink(cluster, 1, 1);
  if (r == n) return AllToAllSeconds(bytes, n, nvlink);
  const LinkCost network = GroupLink(cluster, cluster.gpus_per_node, 2);
  const double nd = static_cast<double>(n);
  const double inside = static_cast<double>(r - 1) / nd * bytes / nvlink.bytes_per_s;
  const double outside = static_cast<double>(n - r) / nd * bytes / network.bytes_per_s;
  return std::max(inside, outside) + (nd - 1) * network.latency_s;
}

LinkCost PipelineNeighbourLink(const ClusterSpec& cluster, const ParallelGroups& groups) {
  return GroupLink(cluster, groups.pp_stride(), 2);
}

}  // namespace mxmaca::scheduler
