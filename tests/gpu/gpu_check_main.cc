// tests/gpu/gpu_check_main.cc: the self-contained GPU check of kernels/cuda (issue 8).
//
// Usage: gpu_check [--numerics-only | --perf-only | --training-only | --throughput-only]
//                  [--no-throughput] [--quick] [--reference FILE]
// Prints (1) a table of every CUDA kernel against an fp64 reference (norm-wise relative
// error; fp32 paths < 1e-5, bf16 paths <= 2x the bf16-emulated reference's error, exact
// where bits are promised), (2) throughput against the cuBLASLt bf16 peak and the
// device copy bandwidth measured in the same run, and (3) the model sections of
// gpu_check_training.h: 20 training steps vs the CPU backend's losses (FILE, default
// cpu_reference_losses.txt beside this binary), a 2-stage pipeline with CUDA graphs off
// and on, and GPT (h 2048, 24 layers) training throughput and MFU (--no-throughput skips
// that last part).
// Exit status: 0 all checks pass, 1 a check failed or a call errored, 2 no GPU (the
// reason printed, e.g. "no GPU: cudaGetDeviceCount returned cudaErrorInsufficientDriver").
// First-run robustness: stdout is line-buffered (a run killed by `timeout` keeps every
// line printed so far), each section prints a start line and its elapsed seconds, a failed
// call or exception ends only its check group, and after each section the device is
// synchronised: a sticky error (illegal address, launch failure: the CUDA context is lost)
// stops the run there with the sections not run named, exit 1. SIGTERM/SIGINT/SIGSEGV/
// SIGABRT print the section that was running. run_gpu_checks.sh runs the sections as
// separate processes, each under its own timeout, so one lost context or hang does not
// take the others with it.
// Built by tests/gpu/build_gpu_check.sh with nvcc alone (no Bazel, Abseil or oneDNN).
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "tests/gpu/check_util.h"
#include "tests/gpu/gpu_check_graphs.h"
#include "tests/gpu/gpu_check_training.h"

namespace {

using Clock = std::chrono::steady_clock;

// The running section's name, for the signal handler (a string literal, never freed).
const char* volatile g_section = "start-up";

void WriteAll(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  while (n > 0) {
    const ssize_t w = write(STDOUT_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// OnSignal: names the section a kill (timeout's SIGTERM) or crash interrupted, then
// dies of the same signal (async-signal-safe calls only).
extern "C" void OnSignal(int sig) {
  WriteAll("\n*** gpu_check stopped by signal ");
  WriteAll(sig == SIGTERM ? "SIGTERM (timeout?)"
           : sig == SIGINT ? "SIGINT"
           : sig == SIGSEGV ? "SIGSEGV"
           : sig == SIGABRT ? "SIGABRT"
                            : "?");
  WriteAll(" during section: ");
  WriteAll(g_section);
  WriteAll("\n");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// DeviceUsable: synchronises the device after `section`; clears a non-sticky error
// (reported); false when the error is sticky (the context is lost).
bool DeviceUsable(const char* section) {
  const cudaError_t sync = cudaDeviceSynchronize();
  const cudaError_t last = cudaGetLastError();
  if (sync == cudaSuccess) {
    if (last != cudaSuccess) {
      std::printf("  (note: a stale %s was left after section %s; cleared)\n",
                  cudaGetErrorName(last), section);
    }
    return true;
  }
  const cudaError_t again = cudaDeviceSynchronize();
  (void)cudaGetLastError();
  if (again == cudaSuccess) {
    std::printf("  (note: cudaDeviceSynchronize after section %s returned %s once; cleared)\n",
                section, cudaGetErrorName(sync));
    return true;
  }
  std::printf("\nDEVICE LOST after section %s: cudaDeviceSynchronize returned %s (%s); the "
              "CUDA context is unusable\n",
              section, cudaGetErrorName(again), cudaGetErrorString(again));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a pipe (tee) would otherwise buffer 4 KiB
  for (int sig : {SIGTERM, SIGINT, SIGSEGV, SIGABRT}) std::signal(sig, OnSignal);
  const Clock::time_point start = Clock::now();
  bool numerics = true, perf = true, training = true, quick = false;
  mxmaca::gpu_check::TrainingCheckOptions training_options;
  {
    // The reference losses lie beside the binary (build_gpu_check.sh writes both).
    const std::string self = argv[0];
    const size_t slash = self.find_last_of('/');
    training_options.reference_path =
        (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) +
        "/cpu_reference_losses.txt";
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--numerics-only") == 0) {
      perf = training = false;
    } else if (std::strcmp(argv[i], "--perf-only") == 0) {
      numerics = training = false;
    } else if (std::strcmp(argv[i], "--training-only") == 0) {
      numerics = perf = false;
    } else if (std::strcmp(argv[i], "--throughput-only") == 0) {
      numerics = perf = false;
      training_options.training = training_options.pipeline = false;
      training_options.throughput = true;
    } else if (std::strcmp(argv[i], "--no-throughput") == 0) {
      training_options.throughput = false;
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--reference") == 0 && i + 1 < argc) {
      training_options.reference_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--numerics-only | --perf-only | --training-only | "
                   "--throughput-only] [--no-throughput] [--quick] [--reference FILE]\n",
                   argv[0]);
      return 1;
    }
  }
  training_options.quick = quick;
  const mxmaca::kernels::cuda::CudaStatus probe = mxmaca::kernels::cuda::ProbeDevice();
  if (!probe.ok()) {
    std::printf("SKIP: %s\n", probe.message().c_str());
    return 2;
  }
  cudaDeviceProp prop;
  int runtime = 0, driver = 0;
  g_section = "device query";
  const cudaError_t query = cudaGetDeviceProperties(&prop, 0);
  if (query != cudaSuccess || cudaRuntimeGetVersion(&runtime) != cudaSuccess ||
      cudaDriverGetVersion(&driver) != cudaSuccess) {
    std::printf("FAIL: cannot query device 0 (%s)\n", cudaGetErrorName(query));
    return 1;
  }
  std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d, driver %d\n\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / 1073741824.0, runtime, driver);
  mxmaca::gpu_check::Table table;
  // The sections in order; each runs only if the device is still usable.
  struct Section {
    const char* name;
    bool enabled;
    void (*run)(mxmaca::gpu_check::Table*, const mxmaca::gpu_check::TrainingCheckOptions&);
  };
  const Section sections[] = {
      {"numerics", numerics,
       [](mxmaca::gpu_check::Table* t, const mxmaca::gpu_check::TrainingCheckOptions&) {
         std::printf("== numerics: kernels/cuda vs fp64 reference ==\n");
         mxmaca::gpu_check::RunNumericChecks(t);
       }},
      {"graph cache", numerics,
       [](mxmaca::gpu_check::Table* t, const mxmaca::gpu_check::TrainingCheckOptions&) {
         std::printf("== CUDA graph cache ==\n");
         mxmaca::gpu_check::RunGraphChecks(t);
         std::printf("numerics: %zu checks, %d failed\n", t->rows.size(), t->failures);
       }},
      {"throughput (kernels)", perf,
       [](mxmaca::gpu_check::Table*, const mxmaca::gpu_check::TrainingCheckOptions& o) {
         std::printf("== throughput ==\n");
         mxmaca::gpu_check::RunPerf(o.quick);
       }},
      {"training (a)", training && training_options.training,
       [](mxmaca::gpu_check::Table* t, const mxmaca::gpu_check::TrainingCheckOptions& o) {
         mxmaca::gpu_check::TrainingCheckOptions only = o;
         only.pipeline = only.throughput = false;
         mxmaca::gpu_check::RunTrainingChecks(t, only);
       }},
      {"pipeline (b)", training && training_options.pipeline,
       [](mxmaca::gpu_check::Table* t, const mxmaca::gpu_check::TrainingCheckOptions& o) {
         mxmaca::gpu_check::TrainingCheckOptions only = o;
         only.training = only.throughput = false;
         mxmaca::gpu_check::RunTrainingChecks(t, only);
       }},
      {"model throughput (c)", training && training_options.throughput,
       [](mxmaca::gpu_check::Table* t, const mxmaca::gpu_check::TrainingCheckOptions& o) {
         mxmaca::gpu_check::TrainingCheckOptions only = o;
         only.training = only.pipeline = false;
         mxmaca::gpu_check::RunTrainingChecks(t, only);
       }},
  };
  std::string not_run;
  bool lost = false;
  for (const Section& section : sections) {
    if (!section.enabled) continue;
    if (lost) {
      not_run += std::string(not_run.empty() ? "" : ", ") + section.name;
      continue;
    }
    g_section = section.name;
    const int before = table.failures;
    const Clock::time_point t0 = Clock::now();
    std::printf("---- section %s: start at %.1f s ----\n", section.name, Since(start));
    mxmaca::gpu_check::ClearStaleError();
    try {
      section.run(&table, training_options);
    } catch (const std::exception& e) {  // a check group let one through: a failed row
      table.Error(std::string("section ") + section.name, e.what());
    }
    std::printf("---- section %s: %.1f s, %d failed ----\n\n", section.name, Since(t0),
                table.failures - before);
    lost = !DeviceUsable(section.name);
  }
  g_section = "exit";
  if (!table.rows.empty() && table.failures > 0) {
    std::printf("failed rows:\n");
    for (const auto& row : table.rows) {
      if (!row.pass) std::printf("  %s  %s  %s\n", row.kernel.c_str(), row.shape.c_str(), row.path.c_str());
    }
  }
  std::printf("total %.1f s\n", Since(start));
  if (lost) {
    std::printf("\nRESULT: FAIL (device context lost; sections not run: %s)\n",
                not_run.empty() ? "none" : not_run.c_str());
    return 1;
  }
  if (table.failures > 0) {
    std::printf("\nRESULT: FAIL (%d checks failed)\n", table.failures);
    return 1;
  }
  std::printf("\nRESULT: PASS\n");
  return 0;
}
