// Fails when the committed docs/FLAGS.md is not what the flag table generates.
#include "api/args/flags_doc.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

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

TEST_CASE("RenderTrainUsage lists the honoured flags only") {
  const std::string usage = RenderTrainUsage();
  CHECK(usage.rfind("usage: mxmaca train", 0) == 0);
  CHECK(usage.find("  --num-layers INT  (default None)\n") != std::string::npos);
  CHECK(usage.find("  --normalization {LAYERNORM,RMSNORM}") == std::string::npos);
  CHECK(usage.find("  --normalization {LayerNorm,RMSNorm}  (default 'LayerNorm')") !=
        std::string::npos);
  CHECK(usage.find("  --swiglu  (default False)") != std::string::npos);
  CHECK(usage.find("--use-flash-attn") == std::string::npos);  // a notice flag
  CHECK(usage.find("--fp16") == std::string::npos);            // unsupported
  CHECK(usage.find("MXMACA's own:\n  --max-consecutive-nan-iterations INT") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
