// api/train/memory_admission.cc: see memory_admission.h.
#include "api/train/memory_admission.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "layers/stage_memory.h"
#include "layers/stage_memory_tp.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::api {
namespace {

// v1 reports "no limit" as a huge page-rounded number (e.g. 9223372036854771712).
constexpr int64_t kNoLimit = int64_t{1} << 60;

// ReadLimit: the byte count in `path` ("max", missing, unreadable or >= 2^60: none).
std::optional<int64_t> ReadLimit(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) || value <= 0 ||
      value >= kNoLimit) {
    return std::nullopt;
  }
  return value;
}

std::string GiB(double bytes) { return absl::StrFormat("%.2f GiB", bytes / 1073741824.0); }

// The flags that drive the estimate, with their values.
std::string DrivingFlags(const MegatronArgs& a) {
  return absl::StrCat(
      "--hidden-size ", a.hidden_size.value_or(0), ", --num-layers ", a.num_layers.value_or(0),
      ", --ffn-hidden-size ", a.ffn_hidden_size.value_or(0), ", --seq-length ",
      a.seq_length.value_or(0), ", --micro-batch-size ", a.micro_batch_size.value_or(0),
      ", --global-batch-size ", a.global_batch_size.value_or(0),
      a.padded_vocab_size ? absl::StrCat(", padded vocabulary ", *a.padded_vocab_size) : "",
      "; it shrinks with --tensor-model-parallel-size (", a.tensor_model_parallel_size,
      "), --pipeline-model-parallel-size (", a.pipeline_model_parallel_size,
      "), --use-distributed-optimizer", a.recompute_granularity ? "" : ", --recompute-granularity",
      " or one process per rank (mxmaca launch)");
}

}  // namespace

MemoryLimit HostMemoryLimitFrom(const std::string& cgroup_root, const std::string& self_cgroup_file,
                                int64_t physical_bytes) {
  MemoryLimit limit{physical_bytes, "physical memory"};
  auto consider = [&limit](const std::string& path, const char* kind) {
    std::optional<int64_t> v = ReadLimit(path);
    if (v && *v < limit.bytes) limit = {*v, absl::StrCat("cgroup ", kind, " ", path)};
  };
  consider(cgroup_root + "/memory.max", "v2");
  consider(cgroup_root + "/memory/memory.limit_in_bytes", "v1");
  std::ifstream in(self_cgroup_file);
  std::string line;
  while (std::getline(in, line)) {
    // "hierarchy-ID:controllers:path": v2 is "0::/path", v1 memory is "N:memory:/path".
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || parts[2].empty() || parts[2] == "/") continue;
    if (parts[0] == "0" && parts[1].empty()) consider(cgroup_root + parts[2] + "/memory.max", "v2");
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == "memory") {
        consider(cgroup_root + "/memory" + parts[2] + "/memory.limit_in_bytes", "v1");
      }
    }
  }
  return limit;
}

MemoryLimit HostMemoryLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const int64_t physical =
      pages > 0 && page > 0 ? static_cast<int64_t>(pages) * static_cast<int64_t>(page) : kNoLimit;
  return HostMemoryLimitFrom("/sys/fs/cgroup", "/proc/self/cgroup", physical);
}

ProcessMemoryEstimate EstimateProcessMemory(const ParallelSetup& setup,
                                            const layers::GptConfig& model,
                                            const MegatronArgs& args, int only_rank, bool cuda) {
  ProcessMemoryEstimate out;
  const int tp = std::max(1, setup.tensor_parallel_size);
  const int cp = std::max(1, setup.context_parallel_size);
  const int dp = std::max(1, setup.data_parallel_size);
  const int64_t b = args.micro_batch_size.value_or(1);
  const std::vector<int32_t> peak = scheduler::PeakStashedMicrobatches(setup.train_schedule);
  // The lower bound's model: MoE leaves the MLPs out (an expert layer holds E/EP experts of
  // another width), CP the attention probabilities (the ring keeps a log-sum-exp per
  // query); each rank holds s / CP tokens of every sequence.
  layers::GptConfig local = model;
  if (model.moe) local.ffn_hidden_size = 0;
  local.seq_length = model.seq_length / cp;
  if (cp > 1 && local.recompute_granularity == layers::RecomputeGranularity::kNone) {
    local.recompute_granularity = layers::RecomputeGranularity::kSelective;
  }
  const double h = static_cast<double>(local.hidden_size);
  const double s = static_cast<double>(local.seq_length);
  const double vp = static_cast<double>(local.padded_vocab_size);
  const double weight_copy = model.precision == kernels::Precision::kBf16 ? 2.0 : 4.0;
  const int ranks_per_pipeline_rank = dp * cp * tp;
  for (int p = 0; p < setup.pipeline_size; ++p) {
    const int rank_count = only_rank < 0 ? ranks_per_pipeline_rank
                                         : (only_rank / ranks_per_pipeline_rank == p ? 1 : 0);
    if (rank_count == 0) continue;
    const auto& layouts = setup.placement.layouts[static_cast<size_t>(p)];
    // Double-precision sizes of the largest terms first: the 64-bit formulas of
    // layers/stage_memory*.h overflow for impossible sizes (--hidden-size 10^9).
    double linear = 0, probs = 0;
    for (const layers::StageLayout& l : layouts) {
      const double layer_params = static_cast<double>(local.qkv_size()) * h +
                                  h * static_cast<double>(local.attention_projection_size()) +
                                  static_cast<double>(local.fc1_size()) * h +
                                  h * static_cast<double>(local.ffn_hidden_size);
      linear += static_cast<double>(l.num_layers()) * layer_params +
                (l.has_embedding ? vp * h : 0) +
                (l.has_loss_head && (!local.tied_embeddings() || !l.has_embedding) ? vp * h : 0);
      if (local.recompute_granularity == layers::RecomputeGranularity::kNone) {
        probs = std::max(probs, static_cast<double>(l.num_layers()) * static_cast<double>(b) *
                                    static_cast<double>(local.num_attention_heads) * s * s);
      }
    }
    double params = 0, stash = 0, optimizer = 0;
    int64_t stashed = std::max<int64_t>(1, peak[static_cast<size_t>(p)]);
    if (args.max_stashed_microbatches) {
      stashed = std::min<int64_t>(stashed, std::max<int64_t>(1, *args.max_stashed_microbatches));
    }
    if (linear * 16 + probs * 4 * static_cast<double>(stashed) < static_cast<double>(kNoLimit)) {
      int64_t count = 0;
      int64_t per_microbatch = 0;
      for (const layers::StageLayout& l : layouts) {
        count += layers::CountStageParameters(local, l);
        per_microbatch = std::max(per_microbatch, layers::StashBytesPerMicroBatchTp(
                                                      local, l, b, tp, setup.sequence_parallel,
                                                      args.reset_attention_mask));
      }
      params = static_cast<double>(count) / tp;  // norms are replicated: a lower bound
      stash = static_cast<double>(stashed) * static_cast<double>(per_microbatch);
    } else {
      // Only the linears' parameters and one micro-batch's probabilities: still a lower bound.
      params = linear / tp;
      stash = probs / tp * 4;
    }
    optimizer = 8 * (args.use_distributed_optimizer ? params / (dp * cp) : params);
    const double n = rank_count;
    out.ranks += rank_count;
    out.parameter_bytes += n * 4 * params;
    out.gradient_bytes += n * 4 * params;
    out.optimizer_bytes += n * optimizer;
    out.activation_bytes += n * stash;
    out.stashed_microbatches = std::max(out.stashed_microbatches, stashed);
    if (cuda) {
      // Device: the activations, a working copy of the weights and the gradients; host:
      // the fp32 master weights and Adam's moments (with the state on the device, the
      // host copies that checkpoints are written from).
      out.device_bytes += n * (stash + params * (weight_copy + 4));
      // Training state on the device (stage_ranks.h state_on_device): Adam's moments there
      // too (counted for every rank of such a layout, also the stages of a tied embedding
      // split across stages, which step on the host: an upper bound).
      const bool state_on_device = !args.optimizer_cpu_offload && dp * cp == 1 &&
                                   !args.use_distributed_optimizer && !args.num_experts;
      if (state_on_device) out.device_bytes += n * optimizer;
      out.host_bytes += n * (4 * params + optimizer);
    } else {
      out.host_bytes += n * (8 * params + optimizer + stash);
    }
  }
  return out;
}

absl::StatusOr<bool> MemoryAdmissionEnabled(const MegatronArgs& args) {
  std::string value = "on";
  std::string source = "--memory-admission";
  if (args.memory_admission) {
    value = *args.memory_admission;
  } else if (const char* env = std::getenv("MXMACA_MEMORY_ADMISSION");
             env != nullptr && *env != '\0') {
    value = env;
    source = "MXMACA_MEMORY_ADMISSION";
  }
  if (value == "on") return true;
  if (value == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(source, " ", value, ": expected on (the default) or off"));
}

absl::Status CheckMemoryAdmission(const ProcessMemoryEstimate& e, const MemoryLimit& host,
                                  const std::optional<MemoryLimit>& device,
                                  const MegatronArgs& args) {
  const std::string parts =
      absl::StrCat("parameters ", GiB(e.parameter_bytes), ", gradients ", GiB(e.gradient_bytes),
                   ", optimizer state ", GiB(e.optimizer_bytes), ", activations ",
                   GiB(e.activation_bytes), " for up to ", e.stashed_microbatches,
                   " stashed micro-batch", e.stashed_microbatches == 1 ? "" : "es", " per rank");
  auto refuse = [&](double need, const MemoryLimit& limit, const char* where) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the start-up memory estimate of this process's ", e.ranks, " rank",
                     e.ranks == 1 ? "" : "s", " needs at least ", GiB(need), where, " (", parts,
                     "), more than the ", GiB(static_cast<double>(limit.bytes)), " it may use (",
                     limit.source, "); the estimate grows with ", DrivingFlags(args),
                     "; --memory-admission off (or MXMACA_MEMORY_ADMISSION=off) skips this check"));
  };
  if (e.host_bytes > static_cast<double>(host.bytes))
    return refuse(e.host_bytes, host, " of host memory");
  if (device && e.device_bytes > static_cast<double>(device->bytes)) {
    return refuse(e.device_bytes, *device, " of GPU memory");
  }
  return absl::OkStatus();
}

absl::Status OutOfMemoryError(const std::string& what, const MegatronArgs& args,
                              const std::optional<ProcessMemoryEstimate>& estimate,
                              const std::optional<MemoryLimit>& host) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory ", what, " (std::bad_alloc)",
      estimate
          ? absl::StrCat("; the start-up estimate of this process's ", estimate->ranks, " rank",
                         estimate->ranks == 1 ? "" : "s", " was ", GiB(estimate->host_bytes),
                         " of host memory",
                         estimate->device_bytes > 0
                             ? absl::StrCat(" and ", GiB(estimate->device_bytes), " of GPU memory")
                             : "",
                         " (a lower bound)")
          : "",
      host ? absl::StrCat(", the limit ", GiB(static_cast<double>(host->bytes)), " (", host->source,
                          ")")
           : "",
      "; the memory needed grows with ", DrivingFlags(args)));
}

}  // namespace mxmaca::api
