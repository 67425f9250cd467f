// api/convert/hf_safetensors.h: Hugging Face checkpoints' tensor files — model.safetensors,
// or shards named by model.safetensors.index.json — read and written as fp32 in memory.
//
// Format (https://github.com/huggingface/safetensors, README "Format"): u64 LE header
// length N, N bytes of JSON {"<name>": {"dtype", "shape", "data_offsets": [b, e]}, ...,
// "__metadata__": {str: str}}, then the raw little-endian data. The index
// (transformers' sharded save): {"metadata": {"total_size": bytes}, "weight_map":
// {"<name>": "<shard file>"}}. Shard names: model-00001-of-00003.safetensors.
#ifndef MXMACA_API_CONVERT_HF_SAFETENSORS_H_
#define MXMACA_API_CONVERT_HF_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::api::convert {

// HfDtype: the element types written (F32, BF16) and read (also F16).
enum class HfDtype { kF32, kBf16, kF16 };

// HfTensor: one tensor by its Hugging Face name; `values` holds prod(shape) fp32 values in
// C order (bf16 / f16 files are widened exactly).
struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// HfTensors: name -> tensor, as a model's state dict.
using HfTensors = std::map<std::string, HfTensor>;

// ReadHfSafetensors: every tensor of the Hugging Face model in `dir`: the files named by
// model.safetensors.index.json when it exists, else model.safetensors. Errors naming the
// file (and key): NotFound when neither exists or a shard is missing; DataLoss for a
// truncated file, bad JSON, an entry whose data_offsets disagree with its dtype and shape
// or lie outside the file, a name stored twice, or an index naming a tensor its shard
// lacks; Unimplemented for another dtype (F64, I64, ...).
absl::StatusOr<HfTensors> ReadHfSafetensors(const std::string& dir);

// WriteHfSafetensors: writes `tensors` (in the order of `names`) into `dir` as `dtype`
// (kF32 or kBf16; bf16 rounds to nearest even): one model.safetensors, or, when the data
// exceed `max_shard_bytes` (> 0), shards model-0000i-of-0000n.safetensors of at most that
// many data bytes each (a tensor larger than the limit gets a shard of its own) plus
// model.safetensors.index.json. __metadata__ is {"format": "pt"}, as transformers writes.
// Errors: InvalidArgument for a name in `names` missing from `tensors` or a values/shape
// mismatch; the file system's error naming the path.
absl::Status WriteHfSafetensors(const std::string& dir, const HfTensors& tensors,
                                const std::vector<std::string>& names, HfDtype dtype,
                                int64_t max_shard_bytes);

}  // namespace mxmaca::api::convert

#endif  // MXMACA_API_CONVERT_HF_SAFETENSORS_H_
