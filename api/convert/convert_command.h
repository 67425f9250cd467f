// api/convert/convert_command.h: `mxmaca convert`, checkpoints to and from the Hugging
// Face format (docs/CHECKPOINTS.md "Hugging Face checkpoints").
//
//   mxmaca convert --to hf --load CKPT_DIR --save HF_DIR [--model-type auto|gpt2|llama|mistral]
//                  [--dtype fp32|bf16] [--max-shard-size-mb N] [--ckpt-step N]
//   mxmaca convert --from hf --load HF_DIR --save CKPT_DIR [--seq-length N]
#ifndef MXMACA_API_CONVERT_CONVERT_COMMAND_H_
#define MXMACA_API_CONVERT_CONVERT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::api {

// kConvertUsage: the `mxmaca convert --help` text.
extern const char kConvertUsage[];

// RunConvert: parses `args` (flags after `convert`), converts, prints what was written to
// stdout. Errors: InvalidArgument for unknown flags, a missing --load / --save, neither or
// both of --to hf / --from hf, bad values (named); ExportToHuggingFace's /
// ImportFromHuggingFace's errors.
absl::Status RunConvert(const std::vector<std::string>& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_CONVERT_CONVERT_COMMAND_H_
