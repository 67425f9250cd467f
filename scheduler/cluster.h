// scheduler/cluster.h: the machine a simulated training step runs on — GPU model, node
// size and links — for the cost-model simulator (`mxmaca simulate`, docs/SIMULATOR.md).
//
// Units: bandwidths in GB/s of 1e9 bytes per second, one direction, per GPU (what one GPU
// can send while it also receives the same amount); latencies in microseconds; peak in
// TFLOP/s of 1e12 dense bf16 FLOPs per second (no 2:4 sparsity); HBM size in GiB.
//
// Cluster file format (docs/SIMULATOR.md): UTF-8 text, one `key = value` per line;
// `#` starts a comment (to the end of the line); blank lines are ignored; keys may appear
// in any order, a repeated key's last value wins. `preset = NAME` (if present, it must
// come first) starts from a preset and the other lines override its fields; without a
// preset every field marked "required" below must be given. Keys:
//   preset                 a ClusterPreset name (h100-sxm, h200-sxm, b200, a100-sxm-80gb)
//   gpu.name               text (required)
//   gpu.bf16_dense_tflops  > 0 (required)
//   gpu.hbm_gb_per_s       > 0 (required)
//   gpu.hbm_gib            > 0 (required)
//   gpus_per_node          integer >= 1 (required)
//   nodes                  integer >= 0; 0 = as many as the world size needs
//   nvlink_gb_per_s        > 0 (required): intra-node link, per GPU per direction
//   nvlink_latency_us      >= 0 (required)
//   internode_gb_per_s     > 0 (required): network, per GPU per direction
//   internode_latency_us   >= 0 (required)
//   gemm_efficiency        (0, 1]: achieved / peak for GEMMs (default 0.7)
//   hbm_efficiency         (0, 1]: achieved / peak HBM bandwidth (default 0.8)
//   link_efficiency        (0, 1]: achieved / nominal link bandwidth (default 0.8)
#ifndef MXMACA_SCHEDULER_CLUSTER_H_
#define MXMACA_SCHEDULER_CLUSTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::scheduler {

// GpuSpec: one GPU model from its public spec sheet.
struct GpuSpec {
  std::string name;
  double bf16_dense_tflops = 0;  // dense bf16 tensor-core peak, TFLOP/s
  double hbm_gb_per_s = 0;       // HBM bandwidth, GB/s
  double hbm_gib = 0;            // HBM capacity, GiB
};

// ClusterSpec: a homogeneous cluster of nodes with gpus_per_node GPUs each.
struct ClusterSpec {
  std::string name;  // the preset or file it came from
  GpuSpec gpu;
  int64_t gpus_per_node = 8;
  int64_t nodes = 0;  // 0 = as many as needed for the world size
  double nvlink_gb_per_s = 0;      // intra-node, per GPU per direction
  double nvlink_latency_us = 0;    // per message hop inside a node
  double internode_gb_per_s = 0;   // network, per GPU per direction
  double internode_latency_us = 0; // per message hop between nodes
  double gemm_efficiency = 0.7;    // achieved GEMM FLOP/s / peak
  double hbm_efficiency = 0.8;     // achieved / peak HBM bandwidth (memory-bound kernels)
  double link_efficiency = 0.8;    // achieved / nominal bus bandwidth of collectives
};

// ClusterPresetNames: the names ClusterPreset accepts, sorted.
std::vector<std::string> ClusterPresetNames();

// ClusterPreset: a cluster of 8-GPU nodes of a public GPU model ("h100-sxm", "h200-sxm",
// "b200", "a100-sxm-80gb"); numbers and their sources in cluster.cc. Errors:
// InvalidArgument naming the value and listing the presets.
absl::StatusOr<ClusterSpec> ClusterPreset(const std::string& name);

// ParseClusterFile: the cluster described by `text` (the format above); `file_name` only
// names the source in errors and in ClusterSpec::name. Errors (InvalidArgument,
// "FILE:LINE: ..."): a line without '=', an empty key or value, an unknown key (the known
// keys are listed), a number that does not parse or is out of range (the range is
// named), `preset` after another key or naming no preset, a required key missing when
// there is no preset ("FILE: missing gpu.hbm_gb_per_s (no preset given)").
absl::StatusOr<ClusterSpec> ParseClusterFile(const std::string& text, const std::string& file_name);

// LoadCluster: ClusterPreset(`name_or_path`) when it names a preset, else reads the file
// at that path and parses it. Errors: the preset's or parser's, or NotFound naming the
// path when the file cannot be read.
absl::StatusOr<ClusterSpec> LoadCluster(const std::string& name_or_path);

// DescribeCluster: one line, e.g. "h100-sxm: 8 x NVIDIA H100 SXM per node (989 TFLOP/s
// bf16, 3350 GB/s HBM, 80 GiB), NVLink 450 GB/s 1 us, network 50 GB/s 5 us".
std::string DescribeCluster(const ClusterSpec& cluster);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_CLUSTER_H_
