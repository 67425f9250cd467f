// api/convert/hf_export.h: an MXMACA checkpoint as a Hugging Face model directory
// (`mxmaca convert --to hf`).
//
// Writes into --save: model.safetensors (or model-0000i-of-0000n.safetensors +
// model.safetensors.index.json above --max-shard-size), config.json (hf_config.h), and
// the run's tokenizer files when the checkpoint's args name them: GPT2BPETokenizer's
// --vocab-file / --merge-file as vocab.json / merges.txt; HuggingFaceTokenizer's
// --tokenizer-model (a tokenizer.json file, or a directory whose tokenizer*.json,
// special_tokens_map.json and tokenizer.model are copied). The weights are the fp32
// masters (parameters only: Adam state and the training state are not exported);
// vocabulary tensors are exported as their V true rows. MoE checkpoints (any expert-parallel
// size: the experts are stored under their global index) are exported as Mixtral.
#ifndef MXMACA_API_CONVERT_HF_EXPORT_H_
#define MXMACA_API_CONVERT_HF_EXPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/convert/hf_safetensors.h"

namespace mxmaca::api::convert {

// HfExportOptions: the flags of `mxmaca convert --to hf`.
struct HfExportOptions {
  std::string load;                            // --load: the MXMACA checkpoint directory
  std::optional<int64_t> iteration;            // --ckpt-step (default: the tracker's latest)
  std::string save;                            // --save: the Hugging Face directory (created)
  std::string model_type = "auto";  // --model-type auto|gpt2|llama|mistral|qwen2|qwen3|mixtral
  HfDtype dtype = HfDtype::kF32;               // --dtype fp32|bf16
  int64_t max_shard_bytes = int64_t{5} << 30;  // --max-shard-size-mb (0: one file)
};

// ExportToHuggingFace: converts; returns lines to print (what was written, what was
// not). Errors: the checkpoint's (CheckpointReader::Open, VerifyChecksums: DataLoss naming
// the file), a stored tensor of another shape than the stored args describe
// (InvalidArgument naming the tensor and both shapes), ChooseHfModelType's refusals, and
// file-system errors naming the path.
absl::StatusOr<std::vector<std::string>> ExportToHuggingFace(const HfExportOptions& options);

}  // namespace mxmaca::api::convert

#endif  // MXMACA_API_CONVERT_HF_EXPORT_H_
