// Every implemented flag of the flag table is honoured by `mxmaca train`: its MegatronArgs
// field is one the training path acts on (api/train/honoured_flags.h), so "implemented" in
// docs/FLAGS.md never means "parsed, then refused".
#include "api/train/honoured_flags.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "api/args/flag_table.h"

namespace mxmaca::api {
namespace {

TEST_CASE("every implemented flag's field is honoured") {
  int implemented = 0;
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.cls != FlagClass::kImplemented) continue;
    ++implemented;
    INFO(flag.name << " (field " << MegatronArgsField(flag.Dest()) << ")");
    CHECK(IsHonouredField(MegatronArgsField(flag.Dest())));
  }
  CHECK(implemented > 150);
  for (const std::string& field : MegatronArgsBoundDests()) {
    INFO(field);
    CHECK(IsHonouredField(field));
  }
  CHECK(!IsHonouredField("no_such_field"));
}

}  // namespace
}  // namespace mxmaca::api
