// data/gpt_dataset_test_util.h: helpers shared by the GPT dataset parity tests (test
// only): run a Python reference script under /usr/bin/python3 with JSON in and out, and
// make scratch directories.
#ifndef MXMACA_DATA_GPT_DATASET_TEST_UTIL_H_
#define MXMACA_DATA_GPT_DATASET_TEST_UTIL_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace mxmaca::data::testing {

// MakeScratchDir: a fresh empty directory under $TEST_TMPDIR (or /tmp) whose name
// starts with `tag`. Errors: the OS error of mkdtemp.
absl::StatusOr<std::string> MakeScratchDir(const std::string& tag);

// RunPythonJson: writes `input` to a file, runs
// `/usr/bin/python3 <script> <input.json> <output.json> [extra_args]` from the test's
// working directory (the runfiles root, so `script` is a workspace-relative path such as
// "data/tests/gpt_dataset_reference/numpy_rng_reference.py") and parses the output.
// Errors: Internal with the exit status and the script's stderr tail if it fails.
absl::StatusOr<nlohmann::json> RunPythonJson(const std::string& script, const nlohmann::json& input,
                                             const std::string& extra_args = "");

}  // namespace mxmaca::data::testing

#endif  // MXMACA_DATA_GPT_DATASET_TEST_UTIL_H_
