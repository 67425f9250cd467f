// api/args/subcommand_flags.h: walking the own flags of a small subcommand (convert,
// generate, inspect-checkpoint, inspect-data, launch, plot): each flag as "--name value" or
// "--name=value", as argparse accepts them for Megatron's scripts. `mxmaca train` parses
// with the flag table instead (megatron_args.h).
#ifndef MXMACA_API_ARGS_SUBCOMMAND_FLAGS_H_
#define MXMACA_API_ARGS_SUBCOMMAND_FLAGS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::api {

// FlagCursor: for (FlagCursor c(args); c.Next();) { if (c.flag() == "--load") ... }.
// `args` must outlive the cursor.
class FlagCursor {
 public:
  explicit FlagCursor(const std::vector<std::string>& args) : args_(args) {}

  // Next: moves to the argument after the current one (and after a value Value() took);
  // false when there is none left.
  bool Next();
  // flag: the current argument, without "=value" when it starts with "--" and holds '='
  // ("--load=dir" -> "--load"); any other argument as it is ("-h", "dir", "--").
  const std::string& flag() const { return flag_; }
  // arg: the current argument exactly as given.
  const std::string& arg() const { return args_[index_]; }
  // has_inline_value: the current argument was "--name=value".
  bool has_inline_value() const { return inline_value_; }
  // Value: the current flag's value: the inline one, else the next argument, which it
  // consumes. InvalidArgument "<flag> needs a value" when there is no next argument.
  absl::StatusOr<std::string> Value();
  // index: the position of the current argument in `args`.
  size_t index() const { return index_; }

 private:
  const std::vector<std::string>& args_;
  size_t next_ = 0;
  size_t index_ = 0;
  std::string flag_;
  std::string value_;
  bool inline_value_ = false;
};

}  // namespace mxmaca::api

#endif  // MXMACA_API_ARGS_SUBCOMMAND_FLAGS_H_
