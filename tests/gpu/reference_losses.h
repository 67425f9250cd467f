// tests/gpu/reference_losses.h: the text file that carries the CPU backend's per-step
// losses from this machine (tests/gpu:cpu_reference) to the GPU check binary
// (tests/gpu/bin/cpu_reference_losses.txt). One run per (variant, precision):
//
//   # comment lines
//   run <variant> <precision> <fingerprint (training_loop.h RunFingerprint)>
//   step <variant> <precision> <step> <loss> <grad_norm>      (%.17g: exact doubles)
//
// Steps of a run follow its `run` line in order 0, 1, ...
#ifndef MXMACA_TESTS_GPU_REFERENCE_LOSSES_H_
#define MXMACA_TESTS_GPU_REFERENCE_LOSSES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/gpu/training_loop.h"

namespace mxmaca::gpu_check {

// ReferenceRun: one run's fingerprint and per-step records.
struct ReferenceRun {
  std::string fingerprint;
  std::vector<StepRecord> steps;
};

// ReferenceKey: "<variant>/<precision>", e.g. "gpt2/fp32".
std::string ReferenceKey(ModelVariant variant, kernels::Precision precision);

// FormatReferenceRun: the `run` line and the `step` lines of one run.
std::string FormatReferenceRun(ModelVariant variant, kernels::Precision precision,
                               const ReferenceRun& run);

// ParseReferenceLosses: the runs of a file's text, by ReferenceKey. InvalidArgument naming
// `source`, the line number and what was expected for a malformed line, a step out of
// order, a step before its run line, or a run given twice.
absl::StatusOr<std::map<std::string, ReferenceRun>> ParseReferenceLosses(
    const std::string& text, const std::string& source);

// ReadReferenceLosses: ParseReferenceLosses of the file at `path`; NotFound naming the path
// when it cannot be read.
absl::StatusOr<std::map<std::string, ReferenceRun>> ReadReferenceLosses(const std::string& path);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_REFERENCE_LOSSES_H_
