// tests/gpu/gpu_check_main.cc: the self-contained GPU check of kernels/cuda (issue 8).
//
// Usage: gpu_check [--numerics-only | --perf-only | --training-only] [--no-throughput]
//                  [--quick] [--reference FILE]
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
// Built by tests/gpu/build_gpu_check.sh with nvcc alone (no Bazel, Abseil or oneDNN).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "tests/gpu/check_util.h"
#include "tests/gpu/gpu_check_graphs.h"
#include "tests/gpu/gpu_check_training.h"

int main(int argc, char** argv) {
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
    } else if (std::strcmp(argv[i], "--no-throughput") == 0) {
      training_options.throughput = false;
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--reference") == 0 && i + 1 < argc) {
      training_options.reference_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--numerics-only | --perf-only | --training-only] "
                   "[--no-throughput] [--quick] [--reference FILE]\n",
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
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaRuntimeGetVersion(&runtime) != cudaSuccess ||
      cudaDriverGetVersion(&driver) != cudaSuccess) {
    std::printf("FAIL: cannot query device 0\n");
    return 1;
  }
  std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d, driver %d\n\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / 1073741824.0, runtime, driver);
  mxmaca::gpu_check::Table table;
  if (numerics) {
    std::printf("== numerics: kernels/cuda vs fp64 reference ==\n");
    mxmaca::gpu_check::RunNumericChecks(&table);
    mxmaca::gpu_check::RunGraphChecks(&table);
    std::printf("numerics: %zu checks, %d failed\n\n", table.rows.size(), table.failures);
  }
  if (perf) {
    std::printf("== throughput ==\n");
    mxmaca::gpu_check::RunPerf(quick);
  }
  if (training) {
    const int before = table.failures;
    mxmaca::gpu_check::RunTrainingChecks(&table, training_options);
    std::printf("training sections: %d failed\n", table.failures - before);
  }
  const cudaError_t last = cudaDeviceSynchronize();
  if (last != cudaSuccess) {
    std::printf("\nRESULT: FAIL (device error at exit: %s)\n", cudaGetErrorName(last));
    return 1;
  }
  if (table.failures > 0) {
    std::printf("\nRESULT: FAIL (%d checks failed)\n", table.failures);
    return 1;
  }
  std::printf("\nRESULT: PASS\n");
  return 0;
}
