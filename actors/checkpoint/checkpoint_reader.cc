// actors/checkpoint/checkpoint_reader.cc: open + validate, then assemble regions.
#include "actors/checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/checkpoint_format.h"
#include "actors/checkpoint/crc32c.h"
#include "actors/checkpoint/file_util.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxMetadataBytes = size_t{1} << 30;

// TempDirsOf: names of temp dirs of interrupted saves of `iter_dir_name` in `load_dir`.
std::vector<std::string> TempDirsOf(const std::string& load_dir,
                                    const std::string& iter_dir_name) {
  std::vector<std::string> found;
  std::error_code ec;
  const std::string prefix = absl::StrCat(iter_dir_name, kTempMarker);
  for (fs::directory_iterator it(load_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (absl::StartsWith(name, prefix)) found.push_back(std::move(name));
  }
  std::sort(found.begin(), found.end());
  return found;
}

// CompleteIterDirs: "iter_XXXXXXX" dirs holding a metadata.json, for hints.
std::vector<std::string> CompleteIterDirs(const std::string& load_dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(load_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (absl::StartsWith(name, "iter_") && !absl::StrContains(name, kTempMarker) &&
        fs::exists(it->path() / kMetadataFileName, ec)) {
      found.push_back(std::move(name));
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

bool LooksLikeMegatronTorchCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "common.pt", ec) ||
      fs::exists(fs::path(dir) / ".metadata", ec)) {
    return true;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (absl::StartsWith(it->path().filename().string(), "mp_rank_")) return true;
  }
  return false;
}

absl::StatusOr<int64_t> ReadLatestIteration(const std::string& load_dir) {
  const std::string latest = absl::StrCat(load_dir, "/", kLatestFileName);
  std::error_code ec;
  if (!fs::exists(latest, ec)) {
    std::vector<std::string> complete = CompleteIterDirs(load_dir);
    std::string hint = complete.empty()
                           ? " and no complete iter_* checkpoint is there"
                           : absl::StrCat("; complete checkpoints there: ",
                                          absl::StrJoin(complete, ", "),
                                          " (pass an explicit iteration to load one)");
    return absl::NotFoundError(absl::StrCat("checkpoint tracker file ", latest,
                                            " does not exist", hint));
  }
  MXMACA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(latest, 64));
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  if (value == "release") {
    return absl::UnimplementedError(absl::StrCat(
        latest, " says 'release' (a Megatron release checkpoint); MXMACA loads only its own "
                "iter_XXXXXXX checkpoints"));
  }
  int64_t iteration = -1;
  if (!absl::SimpleAtoi(value, &iteration) || iteration < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint tracker file ", latest,
                                            " is garbled: it holds '",
                                            absl::CHexEscape(value.substr(0, 32)),
                                            "', expected a non-negative iteration number"));
  }
  return iteration;
}

absl::Status CheckField(const json& meta, const char* field, const std::string& path,
                        bool (json::*is_type)() const noexcept, const char* type) {
  auto it = meta.find(field);
  if (it == meta.end() || !((*it).*is_type)()) {
    return absl::DataLossError(
        absl::StrCat(path, ": field \"", field, "\" must be ", type));
  }
  return absl::OkStatus();
}

}  // namespace

CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() = default;

absl::StatusOr<CheckpointReader> CheckpointReader::Open(const std::string& load_dir,
                                                         std::optional<int64_t> iteration) {
  std::error_code ec;
  if (load_dir.empty() || !fs::is_directory(load_dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint load directory '", load_dir, "' does not exist"));
  }
  int64_t it_number;
  if (iteration.has_value()) {
    if (*iteration < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint iteration must be >= 0, got ", *iteration));
    }
    it_number = *iteration;
  } else {
    MXMACA_ASSIGN_OR_RETURN(it_number, ReadLatestIteration(load_dir));
  }

  const std::string iter_name = IterDirName(it_number);
  const std::string dir = absl::StrCat(load_dir, "/", iter_name);
  if (!fs::is_directory(dir, ec)) {
    std::vector<std::string> temps = TempDirsOf(load_dir, iter_name);
    if (!temps.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "checkpoint ", dir, " does not exist; only ", absl::StrJoin(temps, ", "),
          " (a save interrupted before it committed) is there"));
    }
    return absl::NotFoundError(absl::StrCat("checkpoint ", dir, " does not exist"));
  }
  const std::string meta_path = absl::StrCat(dir, "/", kMetadataFileName);
  if (!fs::exists(meta_path, ec)) {
    if (LooksLikeMegatronTorchCheckpoint(dir)) {
      return absl::UnimplementedError(absl::StrCat(
          dir, " is a Megatron torch/torch_dist checkpoint; MXMACA reads only its own "
               "format (docs/CHECKPOINTS.md)"));
    }
    return absl::DataLossError(absl::StrCat(
        "half-written checkpoint: ", dir, " has no ", kMetadataFileName,
        " (the save did not complete; metadata.json is written last)"));
  }

  MXMACA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(meta_path, kMaxMetadataBytes));
  json meta;
  try {
    meta = json::parse(text);
  } catch (const json::exception& e) {
    return absl::DataLossError(
        absl::StrCat(meta_path, " is not valid JSON: ", e.what()));
  }
  if (!meta.is_object()) {
    return absl::DataLossError(absl::StrCat(meta_path, " must hold a JSON object"));
  }
  MXMACA_RETURN_IF_ERROR(CheckField(meta, "format", meta_path, &json::is_string, "a string"));
  if (meta["format"] != kFormatName) {
    return absl::DataLossError(absl::StrCat(meta_path, ": format is ",
                                            meta["format"].dump(), ", expected \"",
                                            kFormatName, "\""));
  }
  MXMACA_RETURN_IF_ERROR(
      CheckField(meta, "version", meta_path, &json::is_number_integer, "an integer"));
  if (meta["version"].get<int64_t>() != kFormatVersion) {
    return absl::UnimplementedError(absl::StrCat(meta_path, ": format version ",
                                                 meta["version"].dump(), ", this build reads ",
                                                 kFormatVersion));
  }
  MXMACA_RETURN_IF_ERROR(
      CheckField(meta, "iteration", meta_path, &json::is_number_integer, "an integer"));
  if (meta["iteration"].get<int64_t>() != it_number) {
    return absl::DataLossError(absl::StrCat(meta_path, ": iteration is ",
                                            meta["iteration"].dump(), ", the directory says ",
                                            it_number));
  }
  MXMACA_RETURN_IF_ERROR(CheckField(meta, "args", meta_path, &json::is_object, "an object"));
  MXMACA_RETURN_IF_ERROR(CheckField(meta, "state", meta_path, &json::is_object, "an object"));
  MXMACA_RETURN_IF_ERROR(
      CheckField(meta, "tensors", meta_path, &json::is_object, "an object"));
  MXMACA_ASSIGN_OR_RETURN(TensorIndex index, TensorIndexFromJson(meta["tensors"], meta_path));
  absl::Status valid = ValidateTensorIndex(index);
  if (!valid.ok()) return absl::DataLossError(absl::StrCat(meta_path, ": ", valid.message()));

  CheckpointReader reader;
  reader.iteration_ = it_number;
  reader.dir_ = dir;
  reader.args_ = std::move(meta["args"]);
  reader.state_ = std::move(meta["state"]);

  // Map every shard file once and check its header against the index.
  std::map<std::string, std::pair<const MappedFile*, SafetensorsHeader>> files;
  for (const auto& [name, entry] : index) {
    for (const ShardEntry& s : entry.shards) {
      if (files.count(s.file)) continue;
      const std::string path = absl::StrCat(dir, "/", s.file);
      auto mapped = MappedFile::Open(path);
      if (!mapped.ok()) {
        return absl::DataLossError(absl::StrCat("shard file listed in ", meta_path,
                                                " cannot be read: ",
                                                mapped.status().message()));
      }
      const MappedFile* file = mapped->get();
      reader.files_.push_back(std::move(*mapped));
      MXMACA_ASSIGN_OR_RETURN(
          SafetensorsHeader header,
          ParseSafetensorsHeader(absl::string_view(file->data(), file->size()), file->size(),
                                 path));
      files.emplace(s.file, std::make_pair(file, std::move(header)));
    }
  }
  for (auto& [name, entry] : index) {
    StoredTensor& t = reader.tensors_[name];
    t.full_shape = entry.full_shape;
    for (ShardEntry& s : entry.shards) {
      const auto& [file, header] = files.at(s.file);
      auto e = header.entries.find(s.key);
      if (e == header.entries.end()) {
        return absl::DataLossError(absl::StrCat(file->path(), " has no tensor '", s.key,
                                                "' that ", meta_path, " lists for '", name,
                                                "'"));
      }
      if (e->second.shape != s.shape) {
        return absl::DataLossError(absl::StrCat(
            file->path(), ": tensor '", s.key, "' has shape ", ShapeToString(e->second.shape),
            ", ", meta_path, " says ", ShapeToString(s.shape)));
      }
      t.shards.push_back({file, header.data_start + e->second.begin,
                          e->second.end - e->second.begin, std::move(s.offsets),
                          std::move(s.shape), s.key, s.crc32c});
    }
  }
  return reader;
}

std::vector<std::string> CheckpointReader::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

bool CheckpointReader::HasTensor(const std::string& name) const {
  return tensors_.count(name) > 0;
}

absl::StatusOr<std::vector<int64_t>> CheckpointReader::FullShape(
    const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir_, " has no tensor '", name, "'"));
  }
  return it->second.full_shape;
}

absl::Status CheckpointReader::VerifyChecksums() const {
  for (const auto& [name, t] : tensors_) {
    for (const StoredShard& s : t.shards) {
      const uint32_t crc = Crc32c(s.file->data() + s.byte_offset, s.byte_size);
      if (crc != s.crc32c) {
        return absl::DataLossError(absl::StrCat(
            "checkpoint data corrupt: ", s.file->path(), ", tensor '", s.key, "' (of ", name,
            " at offsets ", ShapeToString(s.offsets), "): CRC-32C is ",
            absl::Hex(crc, absl::kZeroPad8), ", metadata.json recorded ",
            absl::Hex(s.crc32c, absl::kZeroPad8)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::ReadShard(const std::string& name,
                                         absl::Span<const int64_t> expected_full_shape,
                                         absl::Span<const int64_t> offsets,
                                         absl::Span<const int64_t> shape, float* out) const {
  MXMACA_ASSIGN_OR_RETURN(std::vector<int64_t> full, FullShape(name));
  if (absl::Span<const int64_t>(full) != expected_full_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint has ", name, " ", ShapeToString(full), ", model expects ",
        ShapeToString(expected_full_shape), " (", dir_, ")"));
  }
  return ReadSlice(name, offsets, shape, out);
}

absl::Status CheckpointReader::ReadSlice(const std::string& name,
                                         absl::Span<const int64_t> offsets,
                                         absl::Span<const int64_t> shape, float* out) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir_, " has no tensor '", name, "'"));
  }
  const StoredTensor& t = it->second;
  const size_t rank = t.full_shape.size();
  bool inside = offsets.size() == rank && shape.size() == rank;
  for (size_t d = 0; inside && d < rank; ++d) {
    inside = offsets[d] >= 0 && shape[d] >= 0 && offsets[d] <= t.full_shape[d] &&
             shape[d] <= t.full_shape[d] - offsets[d];
  }
  if (!inside) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint has ", name, " ", ShapeToString(t.full_shape),
        ", requested region offsets ", ShapeToString(offsets), " shape ",
        ShapeToString(shape), " is not inside it (", dir_, ")"));
  }
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d == 0; })) {
    return absl::OkStatus();
  }
  if (out == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("ReadSlice(", name, "): out is null"));
  }

  // C-order strides of the output region.
  std::vector<int64_t> dst_stride(rank, 1), src_stride(rank, 1), lo(rank), ext(rank);
  for (size_t d = rank; d-- > 1;) dst_stride[d - 1] = dst_stride[d] * shape[d];

  for (const StoredShard& s : t.shards) {
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) {
      lo[d] = std::max(offsets[d], s.offsets[d]);
      const int64_t hi = std::min(offsets[d] + shape[d], s.offsets[d] + s.shape[d]);
      ext[d] = hi - lo[d];
      empty = empty || ext[d] <= 0;
    }
    if (empty) continue;
    for (size_t d = rank; d-- > 1;) src_stride[d - 1] = src_stride[d] * s.shape[d];
    // Merge trailing dims that are contiguous in both source and destination into one run.
    size_t outer = rank == 0 ? 0 : rank - 1;
    int64_t run = rank == 0 ? 1 : ext[rank - 1];
    while (outer > 0 && ext[outer] == s.shape[outer] && ext[outer] == shape[outer]) {
      --outer;
      run *= ext[outer];
    }
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < rank; ++d) {
      src += (lo[d] - s.offsets[d]) * src_stride[d];
      dst += (lo[d] - offsets[d]) * dst_stride[d];
    }
    const char* base = s.file->data() + s.byte_offset;
    const size_t run_bytes = static_cast<size_t>(run) * sizeof(float);
    std::vector<int64_t> idx(outer, 0);  // counter over dims [0, outer)
    bool done = false;
    while (!done) {
      std::memcpy(out + dst, base + src * static_cast<int64_t>(sizeof(float)), run_bytes);
      done = true;
      for (size_t d = outer; d-- > 0;) {
        src += src_stride[d];
        dst += dst_stride[d];
        if (++idx[d] < ext[d]) {
          done = false;
          break;
        }
        src -= src_stride[d] * ext[d];
        dst -= dst_stride[d] * ext[d];
        idx[d] = 0;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::actors::checkpoint
