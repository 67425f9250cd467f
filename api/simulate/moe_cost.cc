// api/simulate/moe_cost.cc: see moe_cost.h.
#include "api/simulate/moe_cost.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mxmaca::api {
namespace {

constexpr double kBf16 = 2, kFp32 = 4;

// The per-rank sizes every formula uses.
struct Sizes {
  double Tn, h, E, k, fm, fm1, fs, fs1, etp, ep, lambda;
};

Sizes MakeSizes(const layers::GptConfig& m, const MoeBlockInputs& in) {
  const layers::moe::MoELayerConfig& moe = *m.moe;
  Sizes z;
  z.Tn = in.T / static_cast<double>(in.tp);
  z.h = static_cast<double>(m.hidden_size);
  z.E = static_cast<double>(moe.router.num_experts);
  z.k = static_cast<double>(moe.router.topk);
  z.fm = static_cast<double>(moe.expert.ffn_hidden_size);
  z.fm1 = static_cast<double>(moe.expert.fc1_size());
  z.fs = static_cast<double>(moe.shared_expert_ffn_hidden_size);
  z.fs1 = moe.expert.swiglu ? 2 * z.fs : z.fs;
  z.etp = static_cast<double>(in.parallel.expert_tensor_parallel_size);
  z.ep = static_cast<double>(in.parallel.expert_model_parallel_size);
  z.lambda = MoeEffectiveLoad(moe, in.parallel);
  return z;
}

}  // namespace

absl::StatusOr<MoeDispatcher> ParseMoeDispatcher(const std::string& value) {
  if (value == "allgather") return MoeDispatcher::kAllGather;
  if (value == "alltoall" || value == "alltoall_seq") return MoeDispatcher::kAllToAll;
  if (value == "flex") return MoeDispatcher::kFlex;
  if (value == "hierarchical") return MoeDispatcher::kHierarchical;
  return absl::InvalidArgumentError(absl::StrCat(
      "--moe-token-dispatcher-type '", value,
      "': expected allgather, alltoall, alltoall_seq, flex or hierarchical"));
}

const char* MoeDispatcherName(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllGather:
      return "allgather";
    case MoeDispatcher::kAllToAll:
      return "alltoall";
    case MoeDispatcher::kFlex:
      return "flex";
    case MoeDispatcher::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

double ExpectedNodesPerToken(double experts, double topk, double nodes) {
  if (nodes <= 1) return nodes;
  const double per_node = experts / nodes;
  double none_on_node = 1;  // P(no expert of a given node among the k picks)
  for (int i = 0; i < static_cast<int>(topk); ++i) {
    none_on_node *= std::max(0.0, experts - per_node - i) / (experts - i);
  }
  return nodes * (1 - none_on_node);
}

double MoeEffectiveLoad(const layers::moe::MoELayerConfig& moe, const MoeParallelOptions& p) {
  const double lambda = std::max(1.0, p.load_imbalance);
  if (!moe.router.capacity_factor.has_value()) return lambda;
  const double capacity = *moe.router.capacity_factor;
  return moe.router.pad_to_capacity ? capacity : std::min(lambda, capacity);
}

std::array<OpTime, 3> MoeMlpBlockOps(const layers::GptConfig& m, const MoeBlockInputs& in) {
  const Sizes z = MakeSizes(m, in);
  const double router = 2 * z.Tn * z.h * z.E;
  const double routed_rows = z.lambda * z.Tn * z.k;  // per rank, over its etp shards
  const double experts = 2 * routed_rows * (z.h * z.fm1 + z.fm * z.h);
  const double shared = 2 * z.Tn * (z.h * z.fs1 + z.fs * z.h);
  const double gemm = (router + experts + shared) / in.flops_per_s;
  const double memory_bytes = 2 * (z.Tn * z.h + z.Tn * z.k * z.h) * kBf16 +
                              3 * z.Tn * z.E * kFp32 + routed_rows * (z.fm1 + z.fm) * kBf16 +
                              z.Tn * (z.fs1 + z.fs) * kBf16;
  const double memory = memory_bytes / in.hbm_bytes_per_s;

  // Communication of one direction (F; B moves the gradients the same way).
  const scheduler::ClusterSpec& c = *in.cluster;
  const int64_t ep = in.parallel.expert_model_parallel_size;
  const int64_t etp = in.parallel.expert_tensor_parallel_size;
  double comm = 0;
  if (in.parallel.dispatcher == MoeDispatcher::kAllGather) {
    const int64_t n = etp * ep;
    const double gathered = static_cast<double>(n) * z.Tn * z.h * kBf16;
    const scheduler::LinkCost link = scheduler::GroupLink(c, 1, n);
    comm = scheduler::AllGatherSeconds(gathered, n, link) +
           scheduler::ReduceScatterSeconds(gathered, n, link);
  } else {
    const double rows_bytes = routed_rows * z.h * kBf16;
    const scheduler::ExpertParallelGroups g{etp, ep, 1, 1};
    const int64_t per_node = scheduler::GroupRanksPerNode(g.ep_stride(), ep, c.gpus_per_node);
    if (in.parallel.dispatcher == MoeDispatcher::kHierarchical) {
      // Gather to the node's leader, leader to leader, scatter from the leader; in sequence.
      const scheduler::LinkCost nvlink = scheduler::GroupLink(c, 1, 1);
      const scheduler::LinkCost network = scheduler::GroupLink(c, c.gpus_per_node, 2);
      const double members = static_cast<double>(per_node - 1);
      const double gather = members * rows_bytes / nvlink.bytes_per_s + members * nvlink.latency_s;
      double between = 0;
      if (per_node < ep) {
        const double nodes = static_cast<double>((ep + per_node - 1) / per_node);
        between = static_cast<double>(per_node) * rows_bytes *
                      static_cast<double>(ep - per_node) / static_cast<double>(ep) /
                      network.bytes_per_s +
                  (nodes - 1) * network.latency_s;
      }
      comm = 2 * (2 * gather + between);
    } else if (in.parallel.dispatcher == MoeDispatcher::kFlex && per_node < ep) {
      // DeepEP across nodes: a token crosses the network once per remote node that holds
      // one of its experts, then fans out over NVLink inside that node.
      const double nodes = static_cast<double>(ep / per_node);
      const double remote_nodes =
          ExpectedNodesPerToken(z.E, z.k, nodes) * (nodes - 1) / nodes;
      const double network_bytes = z.lambda * z.Tn * remote_nodes * z.h * kBf16;
      const double nvlink_bytes = rows_bytes * static_cast<double>(per_node - 1) /
                                  static_cast<double>(per_node);
      const scheduler::LinkCost nvlink = scheduler::GroupLink(c, 1, 1);
      const scheduler::LinkCost network = scheduler::GroupLink(c, c.gpus_per_node, 2);
      comm = 2 * (std::max(network_bytes / network.bytes_per_s,
                           nvlink_bytes / nvlink.bytes_per_s) +
                  (nodes - 1) * network.latency_s +
                  static_cast<double>(per_node - 1) * nvlink.latency_s);
    } else {
      comm = 2 * scheduler::AllToAllOnClusterSeconds(c, rows_bytes, g.ep_stride(), ep);
    }
    if (etp > 1) {
      const scheduler::LinkCost link = scheduler::GroupLink(c, g.etp_stride(), etp);
      const double gathered = static_cast<double>(etp) * rows_bytes;
      comm += scheduler::AllGatherSeconds(gathered, etp, link) +
              scheduler::ReduceScatterSeconds(gathered, etp, link);
    }
  }
  const double shared_tp = z.fs > 0 && in.tp > 1 ? in.tp_exchange_seconds : 0;

  std::array<OpTime, 3> op;
  op[0].gemm = op[1].gemm = op[2].gemm = gemm;
  op[0].memory = memory;
  op[1].memory = 2 * memory;
  op[0].ep_comm = op[1].ep_comm = comm;
  op[0].tp_comm = op[1].tp_comm = shared_tp;
  return op;
}

double MoeMlpBlockStashBytes(const layers::GptConfig& m, const MoeBlockInputs& in) {
  const Sizes z = MakeSizes(m, in);
  const double rows = z.lambda * z.Tn * z.k * z.etp;  // gathered rows on the rank
  double bytes = 2 * z.Tn * z.h + z.Tn * z.h + 2 * kFp32 * z.Tn * z.E;
  bytes += rows * (z.h * kBf16 + (z.fm1 + z.fm) / z.etp * kBf16);
  if (z.fs > 0) bytes += z.Tn * (z.h + z.fs1 + z.fs) * kBf16;
  return bytes;
}

int64_t DenseMlpParameters(const layers::GptConfig& m) {
  const int64_t h = m.hidden_size;
  const bool bias = m.add_bias_linear;
  return m.fc1_size() * h + (bias ? m.fc1_size() : 0) + h * m.ffn_hidden_size + (bias ? h : 0);
}

int64_t MoeSharedExpertParameters(const layers::GptConfig& m) {
  const layers::moe::MoELayerConfig& moe = *m.moe;
  const int64_t h = m.hidden_size, fs = moe.shared_expert_ffn_hidden_size;
  if (fs == 0) return 0;
  const int64_t fs1 = moe.expert.swiglu ? 2 * fs : fs;
  const bool bias = moe.expert.add_bias;
  return fs1 * h + (bias ? fs1 : 0) + h * fs + (bias ? h : 0);
}

int64_t MoeNonExpertParameters(const layers::GptConfig& m) {
  return m.moe->router.num_experts * m.hidden_size + MoeSharedExpertParameters(m);
}

double MoeExpertParametersPerRank(const layers::GptConfig& m, const MoeParallelOptions& p) {
  const layers::moe::MoELayerConfig& moe = *m.moe;
  const double h = static_cast<double>(m.hidden_size);
  const double fm = static_cast<double>(moe.expert.ffn_hidden_size);
  const double fm1 = static_cast<double>(moe.expert.fc1_size());
  const double per_expert = h * fm1 + fm * h + (moe.expert.add_bias ? fm1 + h : 0);
  const double local_experts = static_cast<double>(moe.router.num_experts) /
                               static_cast<double>(p.expert_model_parallel_size);
  return local_experts * per_expert / static_cast<double>(p.expert_tensor_parallel_size);
}

}  // namespace mxmaca::api
