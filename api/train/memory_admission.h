// api/train/memory_admission.h: memory admission for `mxmaca train` (issue 22): before
// anything is allocated, the start-up estimate of every rank this process holds (the
// per-rank estimate of layers/stage_memory.h that MemoryReport prints: parameters,
// gradients, Adam state, the activations the schedule stashes at its peak) is summed and
// checked against what the process may use — the cgroup's memory limit (v2
// memory.max, v1 memory.limit_in_bytes) or the physical memory, whichever is smaller; with
// --device cuda also the device-resident part against the GPU's free memory. A run that
// cannot fit fails at once with the estimate, the limit and the flags that drive it,
// instead of aborting in std::bad_alloc or training until the kernel's OOM killer ends it.
//
// The estimate is a LOWER bound of what the run needs (the B pass's transient gradient
// buffers, layer scratch, the data pipeline and the runtime are not counted; with MoE the
// MLPs of every layer are left out, with context parallelism the attention probabilities,
// which the ring does not keep), so a refused run certainly does not fit; a run that passes
// can still run out, and then fails with OutOfMemoryError's message rather than aborting.
// `--memory-admission off` (or MXMACA_MEMORY_ADMISSION=off in the environment) skips the
// check for users who know better (e.g. memory that the kernel overcommits and never
// touches).
#ifndef MXMACA_API_TRAIN_MEMORY_ADMISSION_H_
#define MXMACA_API_TRAIN_MEMORY_ADMISSION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "api/train/parallel_setup.h"
#include "layers/gpt_config.h"

namespace mxmaca::api {

// MemoryLimit: bytes a process (or a GPU) may use, and where the number comes from
// ("cgroup v2 /sys/fs/cgroup/memory.max", "physical memory", "cuda device 0 free memory").
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;
};

// HostMemoryLimitFrom: the smallest of `physical_bytes` and the cgroup limits found under
// `cgroup_root` (normally /sys/fs/cgroup): cgroup v2 `memory.max` of the root and of this
// process's cgroup (the "0::<path>" line of `self_cgroup_file`, normally
// /proc/self/cgroup), and cgroup v1 `memory/memory.limit_in_bytes` (also under the
// "memory" controller's path). "max", missing or unreadable files, and v1's "unlimited"
// (values of 2^60 and more) are no limit. Pure apart from reading those files.
MemoryLimit HostMemoryLimitFrom(const std::string& cgroup_root, const std::string& self_cgroup_file,
                                int64_t physical_bytes);

// HostMemoryLimit: HostMemoryLimitFrom("/sys/fs/cgroup", "/proc/self/cgroup", physical
// memory from sysconf(_SC_PHYS_PAGES) x page size).
MemoryLimit HostMemoryLimit();

// ProcessMemoryEstimate: the start-up estimate of the ranks one process holds, in bytes.
struct ProcessMemoryEstimate {
  int ranks = 0;               // ranks of this process
  double host_bytes = 0;       // what lives in host memory
  double device_bytes = 0;     // --device cuda: what lives on the GPU (else 0)
  double parameter_bytes = 0;  // parts of the total (host + device), for the message
  double gradient_bytes = 0;
  double optimizer_bytes = 0;
  double activation_bytes = 0;
  int64_t stashed_microbatches = 0;  // the largest peak of any rank
};

// EstimateProcessMemory: the estimate for the ranks of this process: every rank of the
// job when `only_rank` < 0 (one process; the ranks share its memory, so their estimates
// add up), else rank `only_rank` (one process per rank). Per rank: its pipeline rank's
// chunks as MemoryReport counts them (parameters / TP, gradients, Adam state / (DP x CP)
// with --use-distributed-optimizer, peak stashed micro-batches x the largest chunk's stash
// of a TP rank; --max-stashed-microbatches caps the peak). With `cuda` the activations and
// a working copy of the parameters (2 bytes each with --bf16, else 4) and the gradients are
// on the device, the fp32 master weights and Adam state on the host. Computed in double
// precision (no overflow for impossible sizes).
ProcessMemoryEstimate EstimateProcessMemory(const ParallelSetup& setup,
                                            const layers::GptConfig& model,
                                            const MegatronArgs& args, int only_rank, bool cuda);

// MemoryAdmissionEnabled: false with --memory-admission off or MXMACA_MEMORY_ADMISSION=off
// (the flag, when given, wins). InvalidArgument for another value of either.
absl::StatusOr<bool> MemoryAdmissionEnabled(const MegatronArgs& args);

// CheckMemoryAdmission: OK when the estimate fits `host` (and `device`, when given);
// else ResourceExhausted: "the start-up memory estimate of this process's N ranks is
// X GiB (parameters .., gradients .., optimizer .., activations .. for M stashed
// micro-batches), more than the Y GiB the process may use (SOURCE); the estimate grows
// with --hidden-size H, --num-layers L, --seq-length S, --micro-batch-size B, ... and
// shrinks with more ranks ...; --memory-admission off skips this check".
absl::Status CheckMemoryAdmission(const ProcessMemoryEstimate& estimate, const MemoryLimit& host,
                                  const std::optional<MemoryLimit>& device,
                                  const MegatronArgs& args);

// OutOfMemoryError: ResourceExhausted for an allocation that failed anyway (std::bad_alloc
// while building the model, its training state or a pool): names `what`, the same flags
// as CheckMemoryAdmission's message and, when known, the estimate and the host limit.
absl::Status OutOfMemoryError(const std::string& what, const MegatronArgs& args,
                              const std::optional<ProcessMemoryEstimate>& estimate,
                              const std::optional<MemoryLimit>& host);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_MEMORY_ADMISSION_H_
