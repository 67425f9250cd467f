// api/args/fuzz/megatron_args_fuzz.cc: libFuzzer target for the Megatron-compatible flag
// parser (ParseMegatronArgs) and Megatron's cross-flag validation (ValidateAndDeriveArgs).
//
// Input: byte 0 selects the world size (1 + byte % 16); the rest is argv, one element per
// '\n'-separated line (so a seed is a flag line from examples/train_kjv.sh, one token a
// line). Checks:
//   - ParseMegatronArgs and ValidateAndDeriveArgs return a Status, never crash, abort,
//     throw, read out of bounds (ASan) or hit undefined behaviour (UBSan);
//   - parsing is deterministic: the same argv gives the same values and notices;
//   - argparse's "a repeated flag's last value wins": when argv parses, argv followed by
//     argv again parses too, to the same values (FormatMegatronArgs and ChangedArgs);
//   - FormatMegatronArgs, ChangedArgs and MegatronArgRepr of every bound dest run on
//     the validated args (every bound dest has a repr).
// Built two ways like data/fuzz's targets: by run_megatron_args_fuzz.sh with clang++
// -fsanitize=fuzzer,address,undefined (-DMXMACA_LIBFUZZER), and by Bazel as a plain binary
// replaying the files named on its command line.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "api/args/megatron_args.h"

namespace {

using mxmaca::api::MegatronArgs;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "megatron_args_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

std::vector<std::string> SplitLines(const char* data, size_t size) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(data[i]);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

void Exercise(const MegatronArgs& args, const std::vector<std::string>& dests) {
  (void)mxmaca::api::FormatMegatronArgs(args);
  (void)mxmaca::api::ChangedArgs(args);
  for (const std::string& d : dests) {
    Check(mxmaca::api::MegatronArgRepr(args, d).has_value(), "every bound dest has a repr");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const std::vector<std::string> dests = mxmaca::api::MegatronArgsBoundDests();
  const int world_size = 1 + data[0] % 16;
  const std::vector<std::string> argv =
      SplitLines(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (argv.size() > 512) return 0;
  absl::StatusOr<MegatronArgs> args = mxmaca::api::ParseMegatronArgs(argv);
  if (!args.ok()) {
    Check(!args.status().message().empty(), "a parse error has a message");
    return 0;
  }
  const std::string block = mxmaca::api::FormatMegatronArgs(*args);
  absl::StatusOr<MegatronArgs> again = mxmaca::api::ParseMegatronArgs(argv);
  Check(again.ok() && again->notices == args->notices &&
            mxmaca::api::ChangedArgs(*again) == mxmaca::api::ChangedArgs(*args),
        "parsing is deterministic");

  std::vector<std::string> twice = argv;
  twice.insert(twice.end(), argv.begin(), argv.end());
  absl::StatusOr<MegatronArgs> doubled = mxmaca::api::ParseMegatronArgs(twice);
  if (!doubled.ok()) std::fprintf(stderr, "%s\n", doubled.status().ToString().c_str());
  Check(doubled.ok(), "argv repeated parses (last value wins)");
  Check(mxmaca::api::FormatMegatronArgs(*doubled) == block &&
            mxmaca::api::ChangedArgs(*doubled) == mxmaca::api::ChangedArgs(*args),
        "argv repeated gives the same values");

  MegatronArgs validated = *args;
  absl::Status valid = mxmaca::api::ValidateAndDeriveArgs(&validated, world_size);
  if (!valid.ok()) {
    Check(!valid.message().empty(), "a validation error has a message");
    return 0;
  }
  Exercise(validated, dests);
  return 0;
}

#ifndef MXMACA_LIBFUZZER
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::printf("%s: ok\n", argv[i]);
  }
  return 0;
}
#endif
