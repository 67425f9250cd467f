// api/args/subcommand_flags.cc: see subcommand_flags.h.
#include "api/args/subcommand_flags.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::api {

bool FlagCursor::Next() {
  if (next_ >= args_.size()) return false;
  index_ = next_++;
  const std::string& a = args_[index_];
  const size_t eq = a.find('=');
  inline_value_ = a.rfind("--", 0) == 0 && eq != std::string::npos;
  flag_ = inline_value_ ? a.substr(0, eq) : a;
  value_ = inline_value_ ? a.substr(eq + 1) : std::string();
  return true;
}

absl::StatusOr<std::string> FlagCursor::Value() {
  if (inline_value_) return value_;
  if (next_ >= args_.size()) return absl::InvalidArgumentError(absl::StrCat(flag_, " needs a value"));
  return args_[next_++];
}

}  // namespace mxmaca::api
