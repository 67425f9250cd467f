// actors/checkpoint/checkpoint_format.h: the on-disk format of MXMACA checkpoints —
// names, the tensor index kept in metadata.json, its validation (exact coverage), and
// the safetensors shard-file header. Shared by CheckpointWriter and CheckpointReader.
//
// Layout (docs/CHECKPOINTS.md has the full description and the atomicity argument):
//   <save>/latest_checkpointed_iteration.txt   the iteration, decimal, no newline
//                                              (Megatron's convention,
//                                              megatron/training/checkpointing.py)
//   <save>/iter_{:07d}/shard_<writer>.safetensors   one per writer (safetensors format)
//   <save>/iter_{:07d}/metadata.json           written last: version, iteration, args,
//                                              training state, tensor index
//
// A logical tensor is a parameter or optimizer state under its global name with its full
// (unsharded) shape. Each writer stores boxes ("shards") of it: a shard is the region
// [offsets, offsets + shape) of the full tensor, stored C-order as its own safetensors
// entry. The index in metadata.json lists, per logical tensor, every shard with its file,
// safetensors key, offsets and shape; a valid index covers every element exactly once, so
// any other sharding can be assembled from it.
#ifndef MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_FORMAT_H_
#define MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include <nlohmann/json.hpp>

namespace mxmaca::actors::checkpoint {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint files are little-endian and written from host memory as is");

// kFormatName / kFormatVersion: the "format" and "version" fields of metadata.json.
// Readers accept exactly this version; a later incompatible change bumps it.
inline constexpr char kFormatName[] = "mxmaca-checkpoint";
inline constexpr int64_t kFormatVersion = 1;

// kLatestFileName: Megatron's tracker file in the save directory.
inline constexpr char kLatestFileName[] = "latest_checkpointed_iteration.txt";
// kMetadataFileName: the index file inside iter_{:07d}/, written last.
inline constexpr char kMetadataFileName[] = "metadata.json";
// kTempMarker: iter_{:07d}<kTempMarker><unique> is a save in progress (or abandoned).
inline constexpr char kTempMarker[] = ".tmp-";
// kDtypeF32: the only element type stored (fp32 master weights and optimizer states).
inline constexpr char kDtypeF32[] = "F32";

// IterDirName: "iter_{:07d}" for `iteration` >= 0 (wider if it has more digits), as
// Megatron's get_checkpoint_name.
std::string IterDirName(int64_t iteration);

// ShardFileName: "shard_<writer_name>.safetensors".
std::string ShardFileName(absl::string_view writer_name);

// ValidateWriterName: a writer name becomes part of a file name: 1..128 characters from
// [A-Za-z0-9_.-], not starting with '.'. InvalidArgument otherwise.
absl::Status ValidateWriterName(absl::string_view writer_name);

// ValidateTensorName: logical tensor names are 1..1024 characters from
// [A-Za-z0-9_.:/-] (e.g. "optimizer/exp_avg/decoder.layers.3.mlp.linear_fc1.weight").
// '#' is reserved for safetensors keys of a second shard of one tensor in one file.
absl::Status ValidateTensorName(absl::string_view name);

// NumElements: product of `shape` (1 for a scalar, shape []); InvalidArgument if a dim is
// negative or the byte size (4 * product) would exceed 2^62. `what` names the tensor in
// the message.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape, absl::string_view what);

// ShapeToString: "[768, 256]".
std::string ShapeToString(absl::Span<const int64_t> shape);

// ShardEntry: one stored box of a logical tensor.
struct ShardEntry {
  std::string file;              // shard file name inside the iter dir
  std::string key;               // safetensors key inside `file`
  std::vector<int64_t> offsets;  // start of the box in the full tensor, per dim
  std::vector<int64_t> shape;    // extent of the box, per dim (same rank as the tensor)
  uint32_t crc32c = 0;           // CRC-32C of the box's bytes as stored (crc32c.h)
};

// TensorEntry: a logical tensor: dtype F32, its full shape and the shards that tile it.
struct TensorEntry {
  std::vector<int64_t> full_shape;
  std::vector<ShardEntry> shards;
};

// TensorIndex: logical name -> entry, ordered by name.
using TensorIndex = std::map<std::string, TensorEntry>;

// ValidateShardGeometry: the box [offsets, offsets + shape) lies in `full_shape`, ranks
// agree and no extent is negative. InvalidArgument naming `name` otherwise.
absl::Status ValidateShardGeometry(absl::string_view name,
                                   absl::Span<const int64_t> full_shape,
                                   absl::Span<const int64_t> offsets,
                                   absl::Span<const int64_t> shape);

// ValidateTensorIndex: every tensor has a valid name, at least one shard, shards inside the
// full shape, no two shards overlapping, and the shards covering every element (so each
// element is stored exactly once); each (file, key) is used once. FailedPrecondition with
// the tensor, the shards involved and (for gaps) an uncovered element otherwise.
absl::Status ValidateTensorIndex(const TensorIndex& index);

// TensorIndexToJson: {"<name>": {"dtype": "F32", "shape": [...], "shards": [{"file",
// "key", "offsets", "shape", "crc32c"}, ...]}, ...}; crc32c is a JSON number.
nlohmann::json TensorIndexToJson(const TensorIndex& index);

// TensorIndexFromJson: the inverse of TensorIndexToJson; DataLoss naming `file` and the
// JSON path of the first malformed field. Does not check coverage (ValidateTensorIndex).
absl::StatusOr<TensorIndex> TensorIndexFromJson(const nlohmann::json& tensors,
                                                absl::string_view file);

// SafetensorsEntry: one tensor of a safetensors file; [begin, end) are byte offsets into
// the data buffer that follows the header.
struct SafetensorsEntry {
  std::string key;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// EncodeSafetensorsHeader: the first bytes of a safetensors file: u64 LE length N, then N
// bytes of JSON {"<key>": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]}, ...,
// "__metadata__": {...}} padded with spaces so that N is a multiple of 8 (so the data
// buffer is 8-byte aligned). `metadata` values are strings, as the spec requires.
// Spec: https://github.com/huggingface/safetensors (README, "Format").
std::string EncodeSafetensorsHeader(absl::Span<const SafetensorsEntry> entries,
                                    const std::map<std::string, std::string>& metadata);

// SafetensorsHeader: a parsed header. Data of entry e is at file bytes
// [data_start + e.begin, data_start + e.end).
struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
};

// ParseSafetensorsHeader: parses and validates the header of a file whose first bytes are
// `prefix` and whose total size is `file_size` bytes (`prefix` holds at least the 8-byte
// length and the JSON if the file is that long). Checks: length field within the file and
// under 100 MB, valid JSON object, every entry has dtype F32, a shape of non-negative
// dims, data_offsets with end - begin = 4 * numel, entries tiling the data buffer without
// holes or overlap, and the file size equal to data_start + data end. DataLoss naming
// `path` otherwise ("truncated" when the file is shorter than the header says).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view prefix,
                                                         uint64_t file_size,
                                                         absl::string_view path);

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_FORMAT_H_
