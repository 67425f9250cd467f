// api/generate/generate_command.h: `mxmaca generate`, text from a checkpoint.
//
//   mxmaca generate --load DIR --prompt TEXT [--max-new-tokens N] [--top-k K]
//                   [--temperature T] [--seed S] [--vocab-file F --merge-file F]
//                   [--num-threads N]
//
// Loads the model described by the checkpoint's stored arguments, encodes the prompt with
// the GPT-2 tokenizer the run used (or the files given), and extends it token by token:
// greedy (--top-k 1, the default) or sampling among the K most likely tokens at
// temperature T (the padded vocabulary entries are never chosen). Each step runs the
// model over the last --seq-length tokens (no KV cache: this is a check of what the model
// learned, not a serving path). Stops at N tokens or <|endoftext|>.
#ifndef MXMACA_API_GENERATE_GENERATE_COMMAND_H_
#define MXMACA_API_GENERATE_GENERATE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::api {

// RunGenerate: prints the prompt followed by the generated text to stdout. Errors:
// unknown flags or bad values (named), a missing/half-written/corrupt checkpoint, a
// missing tokenizer file, an empty prompt.
absl::Status RunGenerate(const std::vector<std::string>& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_GENERATE_GENERATE_COMMAND_H_
