// api/args/flags_doc_main.cc: writes docs/FLAGS.md.
//
//   bazel run //api/args:flags_doc            # rewrites <workspace>/docs/FLAGS.md
//   bazel run //api/args:flags_doc -- -       # prints it to stdout instead
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "api/args/flags_doc.h"

int main(int argc, char** argv) {
  const std::string text = mxmaca::api::RenderFlagsMarkdown();
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if ((argc > 1 && std::strcmp(argv[1], "-") == 0) || workspace == nullptr) {
    std::cout << text;
    return 0;
  }
  const std::string path = std::string(workspace) + "/docs/FLAGS.md";
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  if (!file.good()) {
    std::fprintf(stderr, "flags_doc: cannot write %s\n", path.c_str());
    return 1;
  }
  std::fprintf(stderr, "flags_doc: wrote %s (%zu bytes)\n", path.c_str(), text.size());
  return 0;
}
