// actors/checkpoint/checkpoint_format.cc: names, tensor index (JSON + coverage check),
// safetensors header encode/parse.
#include "actors/checkpoint/checkpoint_format.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace mxmaca::actors::checkpoint {
namespace {

using nlohmann::json;

// kMaxHeaderBytes: safetensors' own limit on the JSON header (MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// kMaxBytes: element counts are kept so that byte sizes fit in int64 with room to add.
constexpr int64_t kMaxBytes = int64_t{1} << 62;

bool IsNameChar(char c, bool allow_slash_colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return true;
  }
  if (c == '_' || c == '.' || c == '-') return true;
  return allow_slash_colon && (c == '/' || c == ':');
}

std::string BoxToString(const ShardEntry& s) {
  return absl::StrCat("(file ", s.file, ", key '", s.key, "', offsets ",
                      ShapeToString(s.offsets), ", shape ", ShapeToString(s.shape), ")");
}

bool BoxEmpty(absl::Span<const int64_t> shape) {
  return std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d == 0; });
}

bool BoxesOverlap(const ShardEntry& a, const ShardEntry& b) {
  if (BoxEmpty(a.shape) || BoxEmpty(b.shape)) return false;
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.shape[d]) return false;
    if (b.offsets[d] >= a.offsets[d] + a.shape[d]) return false;
  }
  return true;
}

bool BoxContains(const ShardEntry& s, const std::vector<int64_t>& point) {
  for (size_t d = 0; d < point.size(); ++d) {
    if (point[d] < s.offsets[d] || point[d] >= s.offsets[d] + s.shape[d]) return false;
  }
  return true;
}

// FindUncovered: the first (in C order over a grid of shard boundaries) element of the
// full tensor in no shard, into *point; false when all are covered or when the search
// would be too costly (many shards of a high-rank tensor).
// Cells of the grid whose lower corner is covered are covered entirely, because every
// shard boundary is a grid line.
bool FindUncovered(const TensorEntry& t, std::vector<int64_t>* point) {
  const size_t rank = t.full_shape.size();
  std::vector<std::vector<int64_t>> lines(rank);
  double cells = 1.0;
  for (size_t d = 0; d < rank; ++d) {
    std::set<int64_t> s = {0, t.full_shape[d]};
    for (const ShardEntry& e : t.shards) {
      s.insert(e.offsets[d]);
      s.insert(e.offsets[d] + e.shape[d]);
    }
    lines[d].assign(s.begin(), s.end());
    cells *= static_cast<double>(lines[d].size() - 1);
  }
  if (cells * static_cast<double>(t.shards.size()) > 5e7) return false;
  std::vector<size_t> cell(rank, 0);
  point->assign(rank, 0);
  while (true) {
    for (size_t d = 0; d < rank; ++d) (*point)[d] = lines[d][cell[d]];
    bool covered = std::any_of(t.shards.begin(), t.shards.end(), [&](const ShardEntry& e) {
      return !BoxEmpty(e.shape) && BoxContains(e, *point);
    });
    if (!covered) return true;
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++cell[d] + 1 < lines[d].size()) break;
      cell[d] = 0;
      if (d == 0) return false;
    }
    if (rank == 0) return false;
  }
}

absl::Status ValidateTensorEntry(const std::string& name, const TensorEntry& t) {
  const std::string what =
      absl::StrCat("checkpoint tensor '", name, "' ", ShapeToString(t.full_shape));
  auto numel_or = NumElements(t.full_shape, what);
  if (!numel_or.ok()) return absl::FailedPreconditionError(numel_or.status().message());
  if (t.shards.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": has no shards"));
  }
  for (const ShardEntry& s : t.shards) {
    absl::Status geometry = ValidateShardGeometry(name, t.full_shape, s.offsets, s.shape);
    if (!geometry.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(geometry.message(), " in shard ", BoxToString(s)));
    }
  }
  // Overlap: sweep over shards sorted by their start in dim 0.
  std::vector<const ShardEntry*> order;
  for (const ShardEntry& s : t.shards) order.push_back(&s);
  if (!t.full_shape.empty()) {
    std::sort(order.begin(), order.end(), [](const ShardEntry* a, const ShardEntry* b) {
      return a->offsets[0] < b->offsets[0];
    });
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (size_t j = i + 1; j < order.size(); ++j) {
      if (!t.full_shape.empty() &&
          order[j]->offsets[0] >= order[i]->offsets[0] + order[i]->shape[0]) {
        break;
      }
      if (BoxesOverlap(*order[i], *order[j])) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": shard ", BoxToString(*order[i]), " overlaps shard ",
                         BoxToString(*order[j]), " (each element must be stored once)"));
      }
    }
  }
  // Summed only now: each box lies inside the full shape (at most 2^60 elements) and no
  // two overlap, so the sum is at most the tensor's size. (Summed before the overlap
  // check, 8 boxes of a 2^60-element tensor overflowed int64: UBSan, checkpoint_format_fuzz.)
  int64_t stored = 0;
  for (const ShardEntry& s : t.shards) stored += *NumElements(s.shape, name);
  if (stored != *numel_or) {
    std::string where;
    std::vector<int64_t> point;
    if (FindUncovered(t, &point)) {
      where = absl::StrCat("; element ", ShapeToString(point), " is in no shard");
    }
    return absl::FailedPreconditionError(absl::StrCat(what, ": shards cover ", stored, " of ",
                                                      *numel_or, " elements", where));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> GetDims(const json& j, absl::string_view file,
                                             const std::string& path) {
  if (!j.is_array()) {
    return absl::DataLossError(
        absl::StrCat(file, ": ", path, " must be an array of integers, got ", j.dump()));
  }
  std::vector<int64_t> dims;
  for (const json& v : j) {
    if (!v.is_number_integer()) {
      return absl::DataLossError(
          absl::StrCat(file, ": ", path, " must be an array of integers, got ", j.dump()));
    }
    dims.push_back(v.get<int64_t>());
  }
  return dims;
}

absl::StatusOr<std::string> GetString(const json& obj, const char* field,
                                      absl::string_view file, const std::string& path) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_string()) {
    return absl::DataLossError(
        absl::StrCat(file, ": ", path, ".", field, " must be a string"));
  }
  return it->get<std::string>();
}

}  // namespace

std::string IterDirName(int64_t iteration) {
  return absl::StrFormat("iter_%07d", iteration);
}

std::string ShardFileName(absl::string_view writer_name) {
  return absl::StrCat("shard_", writer_name, ".safetensors");
}

absl::Status ValidateWriterName(absl::string_view writer_name) {
  bool ok = !writer_name.empty() && writer_name.size() <= 128 && writer_name[0] != '.';
  for (char c : writer_name) ok = ok && IsNameChar(c, /*allow_slash_colon=*/false);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint writer name '", writer_name,
        "' must be 1..128 characters from [A-Za-z0-9_.-], not starting with '.'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTensorName(absl::string_view name) {
  bool ok = !name.empty() && name.size() <= 1024;
  for (char c : name) ok = ok && IsNameChar(c, /*allow_slash_colon=*/true);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint tensor name '", name,
        "' must be 1..1024 characters from [A-Za-z0-9_.:/-]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape, absl::string_view what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dimension in shape ", ShapeToString(shape)));
    }
    if (d != 0 && n > kMaxBytes / 4 / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape ", ShapeToString(shape), " is too large"));
    }
    n *= d;
  }
  return n;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ValidateShardGeometry(absl::string_view name,
                                   absl::Span<const int64_t> full_shape,
                                   absl::Span<const int64_t> offsets,
                                   absl::Span<const int64_t> shape) {
  if (offsets.size() != full_shape.size() || shape.size() != full_shape.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' has full shape ", ShapeToString(full_shape),
        " (rank ", full_shape.size(), ") but shard offsets ", ShapeToString(offsets),
        " and shard shape ", ShapeToString(shape)));
  }
  for (size_t d = 0; d < full_shape.size(); ++d) {
    if (full_shape[d] < 0 || offsets[d] < 0 || shape[d] < 0 ||
        offsets[d] > full_shape[d] || shape[d] > full_shape[d] - offsets[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' ", ShapeToString(full_shape), ": shard offsets ",
          ShapeToString(offsets), " shape ", ShapeToString(shape),
          " is not inside the full shape (dim ", d, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTensorIndex(const TensorIndex& index) {
  std::set<std::pair<std::string, std::string>> file_keys;
  for (const auto& [name, entry] : index) {
    absl::Status name_ok = ValidateTensorName(name);
    if (!name_ok.ok()) return absl::FailedPreconditionError(name_ok.message());
    for (const ShardEntry& s : entry.shards) {
      if (!file_keys.insert({s.file, s.key}).second) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint index uses key '", s.key, "' of file ", s.file, " twice"));
      }
    }
    absl::Status st = ValidateTensorEntry(name, entry);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

json TensorIndexToJson(const TensorIndex& index) {
  json tensors = json::object();
  for (const auto& [name, entry] : index) {
    // In a canonical order (offsets, file, key): the ranks of a multi-process job report
    // their shards in whatever order they finish, and metadata.json must not depend on it.
    std::vector<const ShardEntry*> ordered;
    for (const ShardEntry& s : entry.shards) ordered.push_back(&s);
    std::sort(ordered.begin(), ordered.end(), [](const ShardEntry* a, const ShardEntry* b) {
      return std::tie(a->offsets, a->file, a->key) < std::tie(b->offsets, b->file, b->key);
    });
    json shards = json::array();
    for (const ShardEntry* p : ordered) {
      const ShardEntry& s = *p;
      shards.push_back({{"file", s.file},
                        {"key", s.key},
                        {"offsets", s.offsets},
                        {"shape", s.shape},
                        {"crc32c", s.crc32c}});
    }
    tensors[name] = {{"dtype", kDtypeF32}, {"shape", entry.full_shape}, {"shards", shards}};
  }
  return tensors;
}

absl::StatusOr<TensorIndex> TensorIndexFromJson(const json& tensors, absl::string_view file) {
  if (!tensors.is_object()) {
    return absl::DataLossError(absl::StrCat(file, ": \"tensors\" must be an object"));
  }
  TensorIndex index;
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const std::string path = absl::StrCat("tensors[\"", it.key(), "\"]");
    const json& t = it.value();
    if (!t.is_object()) {
      return absl::DataLossError(absl::StrCat(file, ": ", path, " must be an object"));
    }
    auto dtype = GetString(t, "dtype", file, path);
    if (!dtype.ok()) return dtype.status();
    if (*dtype != kDtypeF32) {
      return absl::DataLossError(absl::StrCat(file, ": ", path, ".dtype is '", *dtype,
                                              "', only F32 is supported"));
    }
    TensorEntry entry;
    auto shape_it = t.find("shape");
    if (shape_it == t.end()) {
      return absl::DataLossError(absl::StrCat(file, ": ", path, ".shape is missing"));
    }
    auto full = GetDims(*shape_it, file, path + ".shape");
    if (!full.ok()) return full.status();
    entry.full_shape = std::move(*full);
    auto shards_it = t.find("shards");
    if (shards_it == t.end() || !shards_it->is_array()) {
      return absl::DataLossError(absl::StrCat(file, ": ", path, ".shards must be an array"));
    }
    for (size_t i = 0; i < shards_it->size(); ++i) {
      const json& s = (*shards_it)[i];
      const std::string spath = absl::StrCat(path, ".shards[", i, "]");
      if (!s.is_object() || !s.contains("offsets") || !s.contains("shape")) {
        return absl::DataLossError(absl::StrCat(
            file, ": ", spath, " must be an object with file, key, offsets, shape, crc32c"));
      }
      ShardEntry shard;
      auto f = GetString(s, "file", file, spath);
      if (!f.ok()) return f.status();
      auto k = GetString(s, "key", file, spath);
      if (!k.ok()) return k.status();
      auto offsets = GetDims(s["offsets"], file, spath + ".offsets");
      if (!offsets.ok()) return offsets.status();
      auto shape = GetDims(s["shape"], file, spath + ".shape");
      if (!shape.ok()) return shape.status();
      auto crc = s.find("crc32c");
      if (crc == s.end() || !crc->is_number_unsigned() ||
          crc->get<uint64_t>() > 0xFFFFFFFFu) {
        return absl::DataLossError(absl::StrCat(
            file, ": ", spath, ".crc32c must be an unsigned 32-bit integer"));
      }
      shard.crc32c = static_cast<uint32_t>(crc->get<uint64_t>());
      shard.file = std::move(*f);
      shard.key = std::move(*k);
      shard.offsets = std::move(*offsets);
      shard.shape = std::move(*shape);
      // The file name must stay inside the iter dir.
      if (!absl::StartsWith(shard.file, "shard_") ||
          !ValidateWriterName(shard.file).ok()) {
        return absl::DataLossError(absl::StrCat(file, ": ", spath, ".file '", shard.file,
                                                "' is not a shard file name"));
      }
      entry.shards.push_back(std::move(shard));
    }
    index.emplace(it.key(), std::move(entry));
  }
  return index;
}

std::string EncodeSafetensorsHeader(absl::Span<const SafetensorsEntry> entries,
                                    const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  for (const SafetensorsEntry& e : entries) {
    header[e.key] = {{"dtype", kDtypeF32},
                     {"shape", e.shape},
                     {"data_offsets", {e.begin, e.end}}};
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);  // little-endian host (static_assert in the header)
  out += text;
  return out;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view prefix,
                                                         uint64_t file_size,
                                                         absl::string_view path) {
  if (file_size < 8 || prefix.size() < 8) {
    return absl::DataLossError(absl::StrCat(
        "safetensors file ", path, " is truncated: ", file_size,
        " bytes, shorter than the 8-byte header length"));
  }
  uint64_t n = 0;
  std::memcpy(&n, prefix.data(), 8);
  if (n > kMaxHeaderBytes) {
    return absl::DataLossError(absl::StrCat("safetensors file ", path,
                                            ": header length field is ", n,
                                            " bytes (limit ", kMaxHeaderBytes,
                                            "); the file is corrupt or not safetensors"));
  }
  if (n > file_size - 8 || prefix.size() < 8 + n) {
    return absl::DataLossError(absl::StrCat("safetensors file ", path,
                                            " is truncated: header length field says ",
                                            n, " bytes of JSON, file has ", file_size,
                                            " bytes in all"));
  }
  json header;
  try {
    header = json::parse(prefix.substr(8, n));
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("safetensors file ", path,
                                            ": header is not valid JSON (", e.what(), ")"));
  }
  if (!header.is_object()) {
    return absl::DataLossError(
        absl::StrCat("safetensors file ", path, ": header must be a JSON object"));
  }
  SafetensorsHeader out;
  out.data_start = 8 + n;
  std::vector<const SafetensorsEntry*> by_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) {
        return absl::DataLossError(absl::StrCat("safetensors file ", path,
                                                ": __metadata__ must be an object"));
      }
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return absl::DataLossError(absl::StrCat("safetensors file ", path,
                                                  ": __metadata__ values must be strings"));
        }
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = absl::StrCat("safetensors file ", path, ", tensor '",
                                           it.key(), "'");
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      return absl::DataLossError(
          absl::StrCat(where, ": expected an object with dtype, shape, data_offsets"));
    }
    if (!v["dtype"].is_string() || v["dtype"].get<std::string>() != kDtypeF32) {
      return absl::DataLossError(absl::StrCat(where, ": dtype is ", v["dtype"].dump(),
                                              ", only \"F32\" is supported"));
    }
    SafetensorsEntry e;
    e.key = it.key();
    auto shape = GetDims(v["shape"], path, absl::StrCat("tensor '", e.key, "'.shape"));
    if (!shape.ok()) return shape.status();
    e.shape = std::move(*shape);
    auto numel = NumElements(e.shape, where);
    if (!numel.ok()) return absl::DataLossError(numel.status().message());
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      return absl::DataLossError(absl::StrCat(
          where, ": data_offsets must be [begin, end] (non-negative), got ", off.dump()));
    }
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin || e.end - e.begin != static_cast<uint64_t>(*numel) * 4) {
      return absl::DataLossError(absl::StrCat(
          where, ": data_offsets ", off.dump(), " do not hold ", *numel,
          " F32 values of shape ", ShapeToString(e.shape)));
    }
    auto [pos, inserted] = out.entries.emplace(e.key, std::move(e));
    by_offset.push_back(&pos->second);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
              return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
            });
  uint64_t expected = 0;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->begin != expected) {
      return absl::DataLossError(absl::StrCat(
          "safetensors file ", path, ", tensor '", e->key, "': data starts at byte ",
          e->begin, " of the data buffer, expected ", expected,
          " (entries must tile the buffer without holes or overlap)"));
    }
    expected = e->end;
  }
  const uint64_t available = file_size - out.data_start;
  if (available != expected) {
    return absl::DataLossError(absl::StrCat(
        "safetensors file ", path, (available < expected ? " is truncated" : " is corrupt"),
        ": header says the data buffer has ", expected, " bytes, the file holds ",
        available, " bytes after the ", out.data_start, "-byte header"));
  }
  return out;
}

}  // namespace mxmaca::actors::checkpoint
