// api/preprocess/preprocess_main.cc: standalone `preprocess_main ARGS...`, the same as
// `mxmaca preprocess ARGS...` (for tests and benchmarks).
#include <cstdio>
#include <string>
#include <vector>

#include "api/preprocess/preprocess_command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const absl::Status status = mxmaca::api::RunPreprocess(args);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
