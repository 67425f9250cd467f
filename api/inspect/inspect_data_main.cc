// api/inspect/inspect_data_main.cc: `inspect_data_main [flags]`, the inspect-data
// subcommand as its own binary (for tests; `mxmaca inspect-data` runs the same code).
#include <iostream>
#include <string>
#include <vector>

#include "api/inspect/inspect_data_command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const absl::Status status = mxmaca::api::RunInspectData(args);
  if (!status.ok()) {
    std::cerr << "inspect-data: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
