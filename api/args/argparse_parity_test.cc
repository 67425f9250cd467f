// Parity of ParseMegatronArgs with Python's argparse (api/args/argparse_parity.py): the
// same flag table, the same random command lines (seeded), the same verdict (accepted
// or an error) and, for every implemented flag given, the same value (compared as
// Python repr). Flags classified kUnsupported are left out (argparse would accept them;
// MXMACA rejects them on purpose), as is -h/--help.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/args/flag_table.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {
namespace {

using Argv = std::vector<std::string>;

nlohmann::json TableJson() {
  nlohmann::json flags = nlohmann::json::array();
  for (const FlagSpec& flag : AllFlags()) {
    nlohmann::json options = nlohmann::json::array({flag.name});
    for (const std::string& option : flag.OptionStrings()) {
      const bool negative_form = flag.action == FlagAction::kBooleanOptional && option != flag.name;
      if (option != flag.name && !negative_form) options.push_back(option);
    }
    flags.push_back({{"options", options},
                     {"dest", flag.Dest()},
                     {"action", FlagActionName(flag.action)},
                     {"nargs", FlagNargsName(flag.nargs)},
                     {"type", FlagTypeName(flag.type)},
                     {"choices", flag.ChoiceList()}});
  }
  return flags;
}

// Values chosen to probe argparse's corners: negative numbers (which argparse reads
// as values only in plain decimal form), Python's int()/float() syntax, empty text.
// Not generated: ints beyond int64 (Python's int has no limit; MXMACA reports them).
std::string RandomValue(const FlagSpec& flag, std::mt19937* rng) {
  auto pick = [rng](const std::vector<std::string>& from) { return from[(*rng)() % from.size()]; };
  const std::vector<std::string> choices = flag.ChoiceList();
  if (!choices.empty() && (*rng)() % 5 != 0) return pick(choices);
  switch (flag.type) {
    case FlagType::kInt:
      return pick({"3", "-2", "0", "12x", "1.5", "", "+4", " 7", "1_000", "1__0", "017", "-0"});
    case FlagType::kFloat:
      return pick({"0.5", "-0.25", "1e-3", "-1e-3", ".5", "-.5", "abc", "inf", "1_0.5", "nan",
                   "0x10", " 2.5", "3", "1e16", "1e15", "0.0001", "1e-05", "-0.0"});
    default:
      return pick({"abc", "path/to/prefix_text_document", "-x", "", "a b", "it's", "0.3"});
  }
}

// RandomArgv: 1-5 flags, half of them drawn from the implemented ones (whose values
// are compared), the rest from all accepted flags.
Argv RandomArgv(const std::vector<const FlagSpec*>& flags,
                const std::vector<const FlagSpec*>& implemented, std::mt19937* rng) {
  Argv argv;
  const int count = 1 + (*rng)() % 5;
  for (int i = 0; i < count; ++i) {
    const std::vector<const FlagSpec*>& from = (*rng)() % 2 == 0 ? implemented : flags;
    const FlagSpec& flag = *from[(*rng)() % from.size()];
    std::string option = flag.OptionStrings()[(*rng)() % flag.OptionStrings().size()];
    if (flag.action != FlagAction::kStore) {
      argv.push_back((*rng)() % 10 == 0 ? option + "=1" : option);
      continue;
    }
    if (flag.nargs == FlagNargs::kOne || (*rng)() % 4 == 0) {
      const std::string value = RandomValue(flag, rng);
      if ((*rng)() % 2 == 0) {
        argv.push_back(option + "=" + value);
      } else {
        argv.push_back(option);
        argv.push_back(value);
      }
      continue;
    }
    argv.push_back(option);
    const int n = (*rng)() % 4;
    for (int k = 0; k < n; ++k) argv.push_back(RandomValue(flag, rng));
  }
  const int extra = (*rng)() % 20;
  if (extra == 0) argv.push_back("--num-layer");  // unknown (no abbreviations)
  if (extra == 1) argv.push_back("stray");        // a value no flag takes
  if (extra == 2) argv.push_back("-5");           // a negative number, stray
  return argv;
}

TEST_CASE("ParseMegatronArgs agrees with argparse on random command lines") {
  std::vector<const FlagSpec*> flags, implemented;
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.cls != FlagClass::kUnsupported) flags.push_back(&flag);
    if (flag.cls == FlagClass::kImplemented) implemented.push_back(&flag);
  }
  std::mt19937 rng(15062024);
  std::vector<Argv> cases;
  for (int i = 0; i < 3000; ++i) cases.push_back(RandomArgv(flags, implemented, &rng));

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string in_path = dir + "/argparse_parity_in.json";
  const std::string out_path = dir + "/argparse_parity_out.json";
  {
    std::ofstream in(in_path);
    in << nlohmann::json{{"flags", TableJson()}, {"cases", cases}}.dump();
  }
  const std::string command =
      absl::StrCat("/usr/bin/python3 api/args/argparse_parity.py ", in_path, " ", out_path);
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream out(out_path);
  const nlohmann::json results = nlohmann::json::parse(out);
  REQUIRE(results.size() == cases.size());

  int accepted = 0, rejected = 0, values_compared = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string shown;
    for (const std::string& a : cases[i]) absl::StrAppend(&shown, " [", a, "]");
    INFO("case " << i << ":" << shown << "\nargparse: " << results[i].dump());
    const absl::StatusOr<MegatronArgs> ours = ParseMegatronArgs(cases[i]);
    INFO("ours: " << (ours.ok() ? "ok" : ours.status().ToString()));
    REQUIRE(ours.ok() == results[i]["ok"].get<bool>());
    if (!ours.ok()) {
      ++rejected;
      continue;
    }
    ++accepted;
    std::set<std::string> given;
    for (const std::string& token : cases[i]) {
      const FlagSpec* flag = FindFlag(token.substr(0, token.find('=')));
      if (flag != nullptr && flag->cls == FlagClass::kImplemented) given.insert(flag->Dest());
    }
    for (const std::string& dest : given) {
      INFO("dest " << dest);
      CHECK(*MegatronArgRepr(*ours, dest) == results[i]["values"][dest].get<std::string>());
      ++values_compared;
    }
  }
  // Both verdicts must be well represented for the comparison to mean something.
  CHECK(accepted > 500);
  CHECK(rejected > 500);
  CHECK(values_compared > 1000);
}

}  // namespace
}  // namespace mxmaca::api
