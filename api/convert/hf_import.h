// api/convert/hf_import.h: a Hugging Face model directory as an MXMACA checkpoint
// (`mxmaca convert --from hf`).
//
// Reads config.json (hf_config.h) and model.safetensors / model.safetensors.index.json
// (F32, BF16 or F16, widened to fp32), and writes an MXMACA checkpoint of iteration 0 into
// --save: the parameters under their Megatron-Core names (vocabulary tensors as their V
// rows; `mxmaca train` re-pads them to its padded vocabulary), no optimizer state
// (state.has_optimizer_state false), and args whose argv is the equivalent `mxmaca train`
// model flags (MegatronArgvFromHfConfig), so ModelConfigFromCheckpointArgs reconstructs
// the model. Load it with `mxmaca train --load DIR --finetune` (Megatron's convention for
// a converted checkpoint: iteration and optimizer start afresh), or `mxmaca generate`.
// The tokenizer recorded is NullTokenizer with the model's vocabulary size; tokenizer
// files found in the Hugging Face directory are copied to DIR/tokenizer/ (pass them to
// train / generate with --tokenizer-type HuggingFaceTokenizer --tokenizer-model
// DIR/tokenizer/tokenizer.json).
#ifndef MXMACA_API_CONVERT_HF_IMPORT_H_
#define MXMACA_API_CONVERT_HF_IMPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::api::convert {

// HfImportOptions: the flags of `mxmaca convert --from hf`.
struct HfImportOptions {
  std::string load;        // --load: the Hugging Face directory
  std::string save;        // --save: the MXMACA checkpoint directory
  int64_t seq_length = 0;  // --seq-length recorded in the args (0: min(max positions, 4096))
};

// ImportFromHuggingFace: converts; returns lines to print. Errors: config.json missing
// (NotFound) or not JSON (DataLoss) naming the file; MegatronArgvFromHfConfig's refusals;
// ReadHfSafetensors' errors (naming the file and key); FromHfTensors' (a missing tensor,
// a wrong shape, an unexpected key); the checkpoint writer's.
absl::StatusOr<std::vector<std::string>> ImportFromHuggingFace(const HfImportOptions& options);

}  // namespace mxmaca::api::convert

#endif  // MXMACA_API_CONVERT_HF_IMPORT_H_
