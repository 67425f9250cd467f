// api/args/flag_table.cc: lookup over the flag table (rows in flag_table_*.cc).
#include "api/args/flag_table.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"
#include "api/args/flag_rows.h"

namespace mxmaca::api {
namespace {

struct OptionIndex {
  // option string -> (row index, is the "--no-" form of a BooleanOptional flag)
  absl::flat_hash_map<std::string, std::pair<size_t, bool>> by_option;
};

const OptionIndex& Index() {
  static const OptionIndex* index = [] {
    auto* idx = new OptionIndex;
    const std::vector<FlagSpec>& flags = AllFlags();
    for (size_t i = 0; i < flags.size(); ++i) {
      for (const std::string& option : flags[i].OptionStrings()) {
        const bool negated =
            flags[i].action == FlagAction::kBooleanOptional && option != flags[i].name;
        // First row wins on a (table bug) duplicate; flag_table_test rejects those.
        idx->by_option.emplace(option, std::make_pair(i, negated));
      }
    }
    return idx;
  }();
  return *index;
}

std::vector<std::string> SplitSpaces(const char* text) {
  return absl::StrSplit(text, ' ', absl::SkipEmpty());
}

}  // namespace

std::string FlagSpec::Dest() const {
  if (dest != nullptr && dest[0] != '\0') return dest;
  std::string out(name);
  if (out.rfind("--", 0) == 0) out.erase(0, 2);
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

std::vector<std::string> FlagSpec::OptionStrings() const {
  std::vector<std::string> out = {name};
  for (std::string& alias : SplitSpaces(aliases)) out.push_back(std::move(alias));
  if (action == FlagAction::kBooleanOptional) {
    out.push_back("--no-" + std::string(name).substr(2));
  }
  return out;
}

std::vector<std::string> FlagSpec::ChoiceList() const { return SplitSpaces(choices); }

const std::vector<FlagSpec>& AllFlags() {
  static const std::vector<FlagSpec>* flags = [] {
    auto* out = new std::vector<FlagSpec>;
    flag_rows::AppendTransformerConfigGroup(out);
    flag_rows::AppendTrainingGroups(out);
    flag_rows::AppendSystemGroups(out);
    return out;
  }();
  return *flags;
}

const FlagSpec* FindFlag(std::string_view option, bool* negated) {
  const OptionIndex& index = Index();
  auto it = index.by_option.find(std::string(option));
  if (it == index.by_option.end()) return nullptr;
  if (negated != nullptr) *negated = it->second.second;
  return &AllFlags()[it->second.first];
}

std::vector<std::string> AllOptionStrings() {
  std::vector<std::string> out;
  for (const FlagSpec& flag : AllFlags()) {
    for (std::string& option : flag.OptionStrings()) out.push_back(std::move(option));
  }
  return out;
}

const char* FlagClassName(FlagClass c) {
  switch (c) {
    case FlagClass::kImplemented:
      return "implemented";
    case FlagClass::kNotice:
      return "notice";
    case FlagClass::kUnsupported:
      return "unsupported";
  }
  return "?";
}

const char* FlagActionName(FlagAction a) {
  switch (a) {
    case FlagAction::kStore:
      return "store";
    case FlagAction::kStoreTrue:
      return "store_true";
    case FlagAction::kStoreFalse:
      return "store_false";
    case FlagAction::kBooleanOptional:
      return "BooleanOptional";
  }
  return "?";
}

const char* FlagTypeName(FlagType t) {
  switch (t) {
    case FlagType::kNone:
      return "";
    case FlagType::kString:
      return "str";
    case FlagType::kInt:
      return "int";
    case FlagType::kFloat:
      return "float";
    case FlagType::kBool:
      return "bool";
    case FlagType::kCustom:
      return "custom";
  }
  return "?";
}

const char* FlagNargsName(FlagNargs n) {
  switch (n) {
    case FlagNargs::kOne:
      return "";
    case FlagNargs::kOneOrMore:
      return "+";
    case FlagNargs::kZeroOrMore:
      return "*";
    case FlagNargs::kThree:
      return "3";
  }
  return "?";
}

}  // namespace mxmaca::api
