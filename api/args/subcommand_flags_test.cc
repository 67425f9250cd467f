// api/args/subcommand_flags_test.cc: FlagCursor's two spellings, values, and errors.
#include "api/args/subcommand_flags.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::api {
namespace {

TEST_CASE("FlagCursor: --name value, --name=value, bare arguments, a missing value") {
  const std::vector<std::string> args = {"--load", "dir", "--to=hf", "-h", "pos", "--x=",
                                         "--a=b=c", "--last"};
  FlagCursor c(args);
  REQUIRE(c.Next());
  CHECK(c.flag() == "--load");
  CHECK_FALSE(c.has_inline_value());
  CHECK(*c.Value() == "dir");
  REQUIRE(c.Next());
  CHECK(c.flag() == "--to");
  CHECK(c.has_inline_value());
  CHECK(c.arg() == "--to=hf");
  CHECK(*c.Value() == "hf");
  REQUIRE(c.Next());
  CHECK(c.flag() == "-h");
  REQUIRE(c.Next());
  CHECK(c.flag() == "pos");
  CHECK(c.index() == 4);
  REQUIRE(c.Next());
  CHECK(c.flag() == "--x");
  CHECK(*c.Value() == "");  // an empty inline value is a value
  REQUIRE(c.Next());
  CHECK(c.flag() == "--a");
  CHECK(*c.Value() == "b=c");  // split at the first '='
  REQUIRE(c.Next());
  CHECK(c.flag() == "--last");
  const absl::StatusOr<std::string> missing = c.Value();
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "--last needs a value");
  CHECK_FALSE(c.Next());
}

TEST_CASE("FlagCursor: a value that looks like a flag is still the value") {
  const std::vector<std::string> args = {"--prompt", "--not-a-flag", "--n", "3"};
  FlagCursor c(args);
  REQUIRE(c.Next());
  CHECK(*c.Value() == "--not-a-flag");
  REQUIRE(c.Next());
  CHECK(c.flag() == "--n");
  CHECK(*c.Value() == "3");
  CHECK_FALSE(c.Next());
}

}  // namespace
}  // namespace mxmaca::api
