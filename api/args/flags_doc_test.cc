// Fails when the committed docs/FLAGS.md is not what the flag table generates.
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "api/args/flags_doc.h"

namespace mxmaca::api {
namespace {

TEST_CASE("docs/FLAGS.md is up to date with the flag table") {
  // The test runs in the runfiles root of the workspace (`data` brings the file).
  std::ifstream file("docs/FLAGS.md", std::ios::binary);
  REQUIRE(file.good());
  std::stringstream committed;
  committed << file.rdbuf();
  const std::string expected = RenderFlagsMarkdown();
  if (committed.str() != expected) {
    // Name the first differing line so the failure says what changed.
    std::istringstream a(committed.str()), b(expected);
    std::string line_a, line_b;
    int line = 1;
    while (std::getline(a, line_a) && std::getline(b, line_b) && line_a == line_b) ++line;
    FAIL("docs/FLAGS.md is out of date (first difference at line "
         << line << "); regenerate it with `bazel run //api/args:flags_doc`.\n  committed: "
         << line_a << "\n  generated: " << line_b);
  }
  // The document covers every flag (a sanity check that cannot pass on an empty table).
  CHECK(expected.find("| `--num-layers` |") != std::string::npos);
  CHECK(expected.find("`--max-consecutive-nan-iterations` *(MXMACA)*") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
