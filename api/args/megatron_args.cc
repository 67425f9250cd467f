// api/args/megatron_args.cc: placeholder while the flag table lands.
#include "api/args/megatron_args.h"

namespace mxmaca::api {

absl::StatusOr<MegatronArgs> ParseMegatronArgs(const std::vector<std::string>& argv) {
  (void)argv;
  return absl::UnimplementedError("ParseMegatronArgs: not implemented yet");
}

absl::Status ValidateAndDeriveArgs(MegatronArgs* args, int world_size) {
  (void)args;
  (void)world_size;
  return absl::UnimplementedError("ValidateAndDeriveArgs: not implemented yet");
}

int64_t PaddedVocabSize(int64_t vocab_size, int64_t divisible_by, int64_t tp) {
  const int64_t multiple = divisible_by * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace mxmaca::api
