// actors/checkpoint/checkpoint_reader.h: loads a checkpoint written by CheckpointWriter
// into any sharding (docs/ARCHITECTURE.md "Checkpoints store logical tensors"; format in
// checkpoint_format.h and docs/CHECKPOINTS.md).
//
// Usage:
//   MXMACA_ASSIGN_OR_RETURN(CheckpointReader r, CheckpointReader::Open(load_dir));
//   // each stage actor, for each tensor it holds ([rows, cols] shard of [R, C]):
//   MXMACA_RETURN_IF_ERROR(r.ReadShard(name, {R, C}, {row0, 0}, {rows, C}, buf));
// Shard files are memory-mapped; ReadSlice copies from the mapping, so concurrent reads
// from several threads are safe.
#ifndef MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_READER_H_
#define MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include <nlohmann/json.hpp>

namespace mxmaca::actors::checkpoint {

class MappedFile;

// CheckpointReader: an opened, validated checkpoint. Move-only; const methods are
// thread-safe.
class CheckpointReader {
 public:
  // Open: `load_dir` is the --load directory. Without `iteration`, reads
  // latest_checkpointed_iteration.txt (a decimal number; surrounding whitespace is
  // accepted). Opens iter_{:07d}/metadata.json, checks its format/version/iteration, its
  // args/state objects and its tensor index (exact coverage, as Commit checks), then maps
  // every shard file and checks its safetensors header (F32, sizes, offsets inside the file,
  // shapes equal to the index's).
  // Errors, each naming the file or directory:
  //   NotFound: load_dir missing; latest file missing; iter dir missing (the message says
  //     when only a temp dir of an interrupted save exists);
  //   DataLoss: garbled latest file; iter dir without metadata.json (half-written); bad
  //     JSON or fields in metadata.json; truncated or corrupt shard file; index/header
  //     mismatch;
  //   Unimplemented: Megatron's "release" marker, torch-format checkpoints, or a format
  //     version other than kFormatVersion.
  // Open does not read tensor data (see VerifyChecksums). The mappings stay valid even if
  // the directory is replaced or removed afterwards (a later save of the same iteration).
  static absl::StatusOr<CheckpointReader> Open(const std::string& load_dir,
                                               std::optional<int64_t> iteration = {});

  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;
  ~CheckpointReader();

  // iteration: the checkpoint's iteration.
  int64_t iteration() const { return iteration_; }
  // args / state: the JSON objects given to CheckpointWriter::Commit.
  const nlohmann::json& args() const { return args_; }
  const nlohmann::json& state() const { return state_; }
  // dir: the iter_{:07d} directory that was opened.
  const std::string& dir() const { return dir_; }

  // TensorNames: every logical tensor name, sorted.
  std::vector<std::string> TensorNames() const;
  // HasTensor: whether `name` is in the checkpoint.
  bool HasTensor(const std::string& name) const;
  // FullShape: the full shape of `name`; NotFound if it is not in the checkpoint.
  absl::StatusOr<std::vector<int64_t>> FullShape(const std::string& name) const;

  // ReadSlice: fills `out` (prod(shape) fp32 values, C order over `shape`) with the region
  // [offsets, offsets + shape) of logical tensor `name`, assembled from whichever stored
  // shards cover it, bit for bit. Errors: NotFound for an unknown name; InvalidArgument if
  // the rank differs or the region is outside the tensor ("checkpoint has <name> [768, 256],
  // requested region offsets [0, 0] shape [1536, 256]").
  absl::Status ReadSlice(const std::string& name, absl::Span<const int64_t> offsets,
                         absl::Span<const int64_t> shape, float* out) const;

  // VerifyChecksums: recomputes the CRC-32C of every stored box and compares it with the
  // one recorded at save time, so silent corruption of tensor data (which Open's header
  // checks cannot see) is found. Reads every byte of the checkpoint once (about as long
  // as loading it; the pages are then warm for ReadSlice). DataLoss naming the file, the
  // tensor and both checksums for the first mismatch. Call it after Open on resume.
  absl::Status VerifyChecksums() const;

  // ReadShard: ReadSlice after checking that the checkpoint's full shape of `name` equals
  // `expected_full_shape` (the model's), so a model of another size fails with
  // "checkpoint has <name> [768, 256], model expects [1536, 256]" (InvalidArgument) even
  // when the requested region happens to fit.
  absl::Status ReadShard(const std::string& name,
                         absl::Span<const int64_t> expected_full_shape,
                         absl::Span<const int64_t> offsets, absl::Span<const int64_t> shape,
                         float* out) const;

 private:
  // StoredShard: one box of a tensor inside a mapped shard file.
  struct StoredShard {
    const MappedFile* file = nullptr;
    uint64_t byte_offset = 0;  // of the box's first value in the file
    uint64_t byte_size = 0;
    std::vector<int64_t> offsets;
    std::vector<int64_t> shape;
    std::string key;      // safetensors key in `file`
    uint32_t crc32c = 0;  // recorded at save time
  };
  struct StoredTensor {
    std::vector<int64_t> full_shape;
    std::vector<StoredShard> shards;
  };

  CheckpointReader() = default;

  int64_t iteration_ = 0;
  std::string dir_;
  nlohmann::json args_;
  nlohmann::json state_;
  std::map<std::string, StoredTensor> tensors_;
  std::vector<std::unique_ptr<MappedFile>> files_;
};

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_READER_H_
