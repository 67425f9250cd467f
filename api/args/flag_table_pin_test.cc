// The flag table is pinned to Megatron-LM core_v0.19.0: every row of origin kMegatron
// equals, in option strings, dest, action, nargs, type, default and choices, the action
// Megatron's own parser holds for it, and every action of that parser has its row.
// api/args/testdata/megatron_core_v0.19.0_flags.json is the dump of that parser, with the
// flags pretrain_gpt.py adds when NVIDIA Model Optimizer is installed (add_modelopt_args)
// (tools/megatron_flags/dump_megatron_flags.py run on the core_v0.19.0 tree); the table
// was written from it, and a sample of its rows was read by hand from the Python sources
// (flag_table_test's "a sample of rows matches arguments.py").
//
// Deliberate differences, each listed here and nowhere else:
// - enum-typed flags (type=enum_type_handler: --attention-backend, --exit-signal) show
//   their default as "Enum.member" and their choices as the member names a user types,
//   where the dump holds Python's repr "<Enum.member: 5>";
// - MXMACA's extra choice "hierarchical" for --moe-token-dispatcher-type (its
//   hierarchical all-to-all dispatcher);
// - --tiktoken-special-tokens (removed in 0.19) is an alias of --tokenizer-special-tokens;
// - the "kitchen" group, which Megatron adds only when NVIDIA's Kitchen library imports.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "api/args/flag_table.h"

namespace mxmaca::api {
namespace {

constexpr const char* kDump = "api/args/testdata/megatron_core_v0.19.0_flags.json";

// Row: one flag in the table's terms (FlagSpec's text fields).
struct Row {
  std::vector<std::string> options;  // name first, then aliases (no BooleanOptional --no-x)
  std::string dest, action, nargs, type, default_repr, choices, group;
};

bool operator==(const Row& a, const Row& b) {
  return a.options == b.options && a.dest == b.dest && a.action == b.action && a.nargs == b.nargs &&
         a.type == b.type && a.default_repr == b.default_repr && a.choices == b.choices &&
         a.group == b.group;
}

std::ostream& operator<<(std::ostream& os, const Row& r) {
  return os << "{" << absl::StrJoin(r.options, " ") << " dest=" << r.dest << " " << r.action
            << " nargs='" << r.nargs << "' type=" << r.type << " default=" << r.default_repr
            << " choices='" << r.choices << "' group='" << r.group << "'}";
}

// EnumMember: "Signals.SIGTERM" and "SIGTERM" for Python's repr "<Signals.SIGTERM: 15>".
bool EnumMember(const std::string& repr, std::string* qualified, std::string* member) {
  static const std::regex kEnum(R"(<(\w+)\.(\w+): -?\d+>)");
  std::smatch m;
  if (!std::regex_match(repr, m, kEnum)) return false;
  *qualified = m[1].str() + "." + m[2].str();
  *member = m[2].str();
  return true;
}

// FromDump: a dumped argparse action as the table spells it.
Row FromDump(const nlohmann::json& a) {
  Row r;
  const std::string action = a.at("action");
  r.action = action == "_StoreAction"            ? "store"
             : action == "_StoreTrueAction"      ? "store_true"
             : action == "_StoreFalseAction"     ? "store_false"
             : action == "BooleanOptionalAction" ? "BooleanOptional"
                                                 : "?" + action;
  for (const std::string& option : a.at("options")) r.options.push_back(option);
  if (r.action == "BooleanOptional") {
    const std::string negative = "--no-" + r.options.front().substr(2);
    r.options.erase(std::remove(r.options.begin(), r.options.end(), negative), r.options.end());
  }
  r.dest = a.at("dest");
  const nlohmann::json& nargs = a.at("nargs");
  if (nargs.is_string()) r.nargs = nargs.get<std::string>();
  if (nargs.is_number() && nargs.get<int>() > 0) r.nargs = std::to_string(nargs.get<int>());
  const nlohmann::json& type = a.at("type");
  if (r.action != "store") {
    r.type = "";
  } else if (type.is_null() || type == "str") {
    r.type = "str";
  } else if (type == "int" || type == "float" || type == "bool") {
    r.type = type.get<std::string>();
  } else {
    r.type = "custom";
  }
  std::string qualified, member;
  r.default_repr = a.at("default");
  if (EnumMember(r.default_repr, &qualified, &member)) r.default_repr = qualified;
  std::vector<std::string> choices;
  if (!a.at("choices").is_null()) {
    for (std::string c : a.at("choices")) {
      if (c.size() >= 2 && (c.front() == '\'' || c.front() == '"') && c.back() == c.front()) {
        c = c.substr(1, c.size() - 2);
      }
      if (EnumMember(c, &qualified, &member)) c = member;
      choices.push_back(c);
    }
  }
  r.choices = absl::StrJoin(choices, " ");
  r.group = a.at("group");
  return r;
}

// FromTable: a row of the table.
Row FromTable(const FlagSpec& f) {
  Row r;
  r.options = {f.name};
  for (const std::string& option : f.OptionStrings()) {
    const bool negative = f.action == FlagAction::kBooleanOptional && option != f.name &&
                          option == "--no-" + std::string(f.name).substr(2);
    if (option != f.name && !negative) r.options.push_back(option);
  }
  r.dest = f.Dest();
  r.action = FlagActionName(f.action);
  r.nargs = FlagNargsName(f.nargs);
  r.type = FlagTypeName(f.type);
  r.default_repr = f.megatron_default;
  r.choices = f.choices;
  r.group = f.group;
  return r;
}

nlohmann::json ReadDump() {
  std::ifstream in(kDump);
  REQUIRE(in.good());
  nlohmann::json dump = nlohmann::json::parse(in);
  REQUIRE(dump.is_array());
  return dump;
}

TEST_CASE("every Megatron row equals core_v0.19.0's parser, and every flag of it has a row") {
  const nlohmann::json dump = ReadDump();
  // add_megatron_arguments at core_v0.19.0 without Kitchen (807), then add_modelopt_args (21).
  REQUIRE(dump.size() == 828);
  std::map<std::string, Row> expected;  // by primary option string
  std::vector<std::string> order;
  for (const nlohmann::json& action : dump) {
    Row row = FromDump(action);
    if (row.options.front() == "--moe-token-dispatcher-type") row.choices += " hierarchical";
    if (row.options.front() == "--tokenizer-special-tokens") {
      row.options.push_back("--tiktoken-special-tokens");
    }
    order.push_back(row.options.front());
    REQUIRE(expected.emplace(row.options.front(), row).second);
  }
  std::vector<std::string> table_order;
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.origin != FlagOrigin::kMegatron || std::string(flag.group) == "kitchen") continue;
    INFO(flag.name);
    auto it = expected.find(flag.name);
    REQUIRE(it != expected.end());
    CHECK(FromTable(flag) == it->second);
    table_order.push_back(flag.name);
  }
  // Same flags, in the parser's order (docs/FLAGS.md lists them so).
  CHECK(table_order == order);
}

TEST_CASE("the flags kept from before core_v0.19.0 are not in its parser") {
  const nlohmann::json dump = ReadDump();
  std::set<std::string> options;
  for (const nlohmann::json& action : dump) {
    for (const std::string& option : action.at("options")) options.insert(option);
  }
  int removed = 0;
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.origin == FlagOrigin::kMxmaca || std::string(flag.group) == "kitchen") {
      for (const std::string& option : flag.OptionStrings()) {
        INFO(option << " of MXMACA's own or Kitchen's flags clashes with a Megatron flag");
        CHECK(options.count(option) == 0);
      }
    }
    if (flag.origin != FlagOrigin::kMegatronRemoved) continue;
    ++removed;
    for (const std::string& option : flag.OptionStrings()) {
      INFO(option);
      CHECK(options.count(option) == 0);
    }
  }
  CHECK(removed == 39);  // 37 removed since commit 000c4ac, 2 since commit 07659f9
}

}  // namespace
}  // namespace mxmaca::api
