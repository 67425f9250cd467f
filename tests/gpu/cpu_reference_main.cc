// tests/gpu/cpu_reference_main.cc: writes the CPU backend's per-step losses of the GPU
// check's training runs (training_loop.h: both model variants, fp32 and bf16 GEMM
// inputs, 20 steps of 2 micro-batches) in reference_losses.h's format, for the GPU check
// binary to compare against (tests/gpu/build_gpu_check.sh runs it).
// Usage: cpu_reference OUTPUT_FILE
// Exit status: 0 written, 1 a run failed or the file could not be written.
#include <cstdio>
#include <string>

#include "tests/gpu/cpu_reference_loop.h"
#include "tests/gpu/reference_losses.h"
#include "tests/gpu/training_loop.h"

int main(int argc, char** argv) {
  using namespace mxmaca::gpu_check;  // NOLINT: a small tool
  using mxmaca::kernels::Precision;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_FILE\n", argv[0]);
    return 1;
  }
  const TrainingLoopOptions options;
  std::string text =
      "# MXMACA GPU check: CPU backend (layers::GptStage, kernels/cpu) per-step losses and\n"
      "# gradient norms of tests/gpu/training_loop.h's runs, written by tests/gpu:cpu_reference\n";
  for (ModelVariant v : {ModelVariant::kGpt2, ModelVariant::kLlama}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16}) {
      const mxmaca::layers::GptConfig config = SmallGptConfig(v, p);
      auto steps = RunCpuReference(config, options);
      if (!steps.ok()) {
        std::fprintf(stderr, "%s: %s\n", ReferenceKey(v, p).c_str(),
                     std::string(steps.status().message()).c_str());
        return 1;
      }
      text += FormatReferenceRun(v, p, ReferenceRun{RunFingerprint(config, options), *steps});
      std::printf("%s: loss %.4f -> %.4f over %zu steps\n", ReferenceKey(v, p).c_str(),
                  steps->front().loss, steps->back().loss, steps->size());
    }
  }
  std::FILE* f = std::fopen(argv[1], "w");
  if (f == nullptr || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
