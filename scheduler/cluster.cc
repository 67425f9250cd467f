// scheduler/cluster.cc: see cluster.h.
#include "scheduler/cluster.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mxmaca::scheduler {
namespace {

// Presets. Sources (public spec sheets; dense = without 2:4 sparsity, which the sheets
// list as the headline and which is 2x these numbers):
//   A100 SXM4 80GB: NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOP/s dense, HBM2e
//     2,039 GB/s, 80 GB; NVLink 3: 600 GB/s bidirectional = 300 per direction. Network as
//     on Selene / DGX A100: one 200 Gb/s HDR InfiniBand HCA per GPU = 25 GB/s.
//   H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet: BF16 1,979 TFLOP/s with sparsity =
//     989 dense, HBM3 3.35 TB/s, 80 GB; NVLink 4: 900 GB/s bidirectional = 450 per
//     direction. DGX H100: one 400 Gb/s NDR ConnectX-7 per GPU = 50 GB/s.
//   H200 SXM: NVIDIA H200 datasheet: same compute as H100 (989 dense bf16), HBM3e
//     4.8 TB/s, 141 GB; NVLink 4 (450 per direction); NDR 400 Gb/s per GPU.
//   B200 (HGX B200): NVIDIA HGX B200 spec: FP16/BF16 36 PFLOP/s sparse per 8 GPUs =
//     2,250 TFLOP/s dense per GPU, HBM3e 8 TB/s, 192 GB (later sheets list 180 GB usable);
//     NVLink 5: 1.8 TB/s bidirectional = 900 per direction; DGX B200: 400 Gb/s per GPU.
// Latencies are not on spec sheets: 2 us per NCCL step inside a node and 5 us between
// nodes are typical measured small-message figures (nccl-tests all-reduce at 8 bytes is
// ~10-30 us over ~4-8 steps); override them in a cluster file.
ClusterSpec Make(const char* name, const char* gpu, double tflops, double hbm_gb_s,
                 double hbm_gib, double nvlink, double network) {
  ClusterSpec c;
  c.name = name;
  c.gpu = {gpu, tflops, hbm_gb_s, hbm_gib};
  c.gpus_per_node = 8;
  c.nvlink_gb_per_s = nvlink;
  c.nvlink_latency_us = 2;
  c.internode_gb_per_s = network;
  c.internode_latency_us = 5;
  return c;
}

const std::map<std::string, ClusterSpec>& Presets() {
  static const auto* presets = new std::map<std::string, ClusterSpec>{
      {"a100-sxm-80gb", Make("a100-sxm-80gb", "NVIDIA A100 SXM4 80GB", 312, 2039, 80, 300, 25)},
      {"h100-sxm", Make("h100-sxm", "NVIDIA H100 SXM5", 989, 3350, 80, 450, 50)},
      {"h200-sxm", Make("h200-sxm", "NVIDIA H200 SXM", 989, 4800, 141, 450, 50)},
      {"b200", Make("b200", "NVIDIA B200", 2250, 8000, 192, 900, 50)},
  };
  return *presets;
}

absl::Status LineError(const std::string& file, int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ":", line, ": ", what));
}

// ParseNumber: a whole-string double; InvalidArgument otherwise.
bool ParseNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

enum class Range { kPositive, kNonNegative, kFraction, kCount, kCountOrZero };

const char* RangeText(Range r) {
  switch (r) {
    case Range::kPositive: return "a number > 0";
    case Range::kNonNegative: return "a number >= 0";
    case Range::kFraction: return "a number in (0, 1]";
    case Range::kCount: return "an integer >= 1";
    case Range::kCountOrZero: return "an integer >= 0";
  }
  return "";
}

bool InRange(double v, Range r) {
  switch (r) {
    case Range::kPositive: return v > 0;
    case Range::kNonNegative: return v >= 0;
    case Range::kFraction: return v > 0 && v <= 1;
    case Range::kCount: return v >= 1 && v == std::floor(v) && v < 1e9;
    case Range::kCountOrZero: return v >= 0 && v == std::floor(v) && v < 1e9;
  }
  return false;
}

struct NumericKey {
  Range range;
  bool required;
  double* (*field)(ClusterSpec*);
};

const std::map<std::string, NumericKey>& NumericKeys() {
  static const auto* keys = new std::map<std::string, NumericKey>{
      {"gpu.bf16_dense_tflops",
       {Range::kPositive, true, [](ClusterSpec* c) { return &c->gpu.bf16_dense_tflops; }}},
      {"gpu.hbm_gb_per_s",
       {Range::kPositive, true, [](ClusterSpec* c) { return &c->gpu.hbm_gb_per_s; }}},
      {"gpu.hbm_gib", {Range::kPositive, true, [](ClusterSpec* c) { return &c->gpu.hbm_gib; }}},
      {"nvlink_gb_per_s",
       {Range::kPositive, true, [](ClusterSpec* c) { return &c->nvlink_gb_per_s; }}},
      {"nvlink_latency_us",
       {Range::kNonNegative, true, [](ClusterSpec* c) { return &c->nvlink_latency_us; }}},
      {"internode_gb_per_s",
       {Range::kPositive, true, [](ClusterSpec* c) { return &c->internode_gb_per_s; }}},
      {"internode_latency_us",
       {Range::kNonNegative, true, [](ClusterSpec* c) { return &c->internode_latency_us; }}},
      {"gemm_efficiency",
       {Range::kFraction, false, [](ClusterSpec* c) { return &c->gemm_efficiency; }}},
      {"hbm_efficiency",
       {Range::kFraction, false, [](ClusterSpec* c) { return &c->hbm_efficiency; }}},
      {"link_efficiency",
       {Range::kFraction, false, [](ClusterSpec* c) { return &c->link_efficiency; }}},
  };
  return *keys;
}

std::string KnownKeys() {
  std::vector<std::string> keys = {"preset", "gpu.name", "gpus_per_node", "nodes"};
  for (const auto& [k, _] : NumericKeys()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return absl::StrJoin(keys, ", ");
}

}  // namespace

std::vector<std::string> ClusterPresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, _] : Presets()) names.push_back(name);
  return names;
}

absl::StatusOr<ClusterSpec> ClusterPreset(const std::string& name) {
  auto it = Presets().find(std::string(name));
  if (it == Presets().end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown cluster preset '", name,
                                                   "' (presets: ",
                                                   absl::StrJoin(ClusterPresetNames(), ", "),
                                                   ")"));
  }
  return it->second;
}

absl::StatusOr<ClusterSpec> ParseClusterFile(const std::string& text, const std::string& file_name) {
  ClusterSpec spec;
  spec.name = std::string(file_name);
  bool has_preset = false, seen_other_key = false;
  std::map<std::string, bool> given;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::string line(raw.substr(0, raw.find('#')));
    absl::StripAsciiWhitespace(&line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return LineError(file_name, line_no, absl::StrCat("expected 'key = value', got '", line, "'"));
    }
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    absl::StripAsciiWhitespace(&key);
    absl::StripAsciiWhitespace(&value);
    if (key.empty()) return LineError(file_name, line_no, "empty key before '='");
    if (value.empty()) return LineError(file_name, line_no, absl::StrCat("empty value for ", key));
    if (key == "preset") {
      if (seen_other_key) {
        return LineError(file_name, line_no, "'preset' must come before every other key");
      }
      auto preset = ClusterPreset(value);
      if (!preset.ok()) return LineError(file_name, line_no, std::string(preset.status().message()));
      spec = *preset;
      spec.name = absl::StrCat(file_name, " (preset ", value, ")");
      has_preset = true;
      continue;
    }
    seen_other_key = true;
    given[key] = true;
    if (key == "gpu.name") {
      spec.gpu.name = value;
      continue;
    }
    double v = 0;
    if (key == "gpus_per_node" || key == "nodes") {
      const Range r = key == "nodes" ? Range::kCountOrZero : Range::kCount;
      if (!ParseNumber(value, &v) || !InRange(v, r)) {
        return LineError(file_name, line_no,
                         absl::StrCat(key, " = '", value, "': expected ", RangeText(r)));
      }
      (key == "nodes" ? spec.nodes : spec.gpus_per_node) = static_cast<int64_t>(v);
      continue;
    }
    auto it = NumericKeys().find(key);
    if (it == NumericKeys().end()) {
      return LineError(file_name, line_no,
                       absl::StrCat("unknown key '", key, "' (known: ", KnownKeys(), ")"));
    }
    if (!ParseNumber(value, &v) || !InRange(v, it->second.range)) {
      return LineError(file_name, line_no,
                       absl::StrCat(key, " = '", value, "': expected ",
                                    RangeText(it->second.range)));
    }
    *it->second.field(&spec) = v;
  }
  if (!has_preset) {
    std::vector<std::string> required = {"gpu.name", "gpus_per_node"};
    for (const auto& [k, nk] : NumericKeys()) {
      if (nk.required) required.push_back(k);
    }
    for (const std::string& k : required) {
      if (!given.count(k)) {
        return absl::InvalidArgumentError(
            absl::StrCat(file_name, ": missing ", k, " (no preset given)"));
      }
    }
  }
  return spec;
}

absl::StatusOr<ClusterSpec> LoadCluster(const std::string& name_or_path) {
  if (Presets().count(name_or_path)) return ClusterPreset(name_or_path);
  std::ifstream in(name_or_path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--cluster ", name_or_path,
                                            ": neither a preset (",
                                            absl::StrJoin(ClusterPresetNames(), ", "),
                                            ") nor a readable file"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseClusterFile(buffer.str(), name_or_path);
}

std::string DescribeCluster(const ClusterSpec& c) {
  return absl::StrFormat(
      "%s: %d x %s per node (%g TFLOP/s bf16 dense, %g GB/s HBM, %g GiB), NVLink %g GB/s "
      "%g us, network %g GB/s %g us; efficiencies GEMM %g, HBM %g, links %g",
      c.name, c.gpus_per_node, c.gpu.name, c.gpu.bf16_dense_tflops, c.gpu.hbm_gb_per_s,
      c.gpu.hbm_gib, c.nvlink_gb_per_s, c.nvlink_latency_us, c.internode_gb_per_s,
      c.internode_latency_us, c.gemm_efficiency, c.hbm_efficiency, c.link_efficiency);
}

}  // namespace mxmaca::scheduler
