// actors/checkpoint/checkpoint_writer.cc: temp dir, shard files, metadata, publication.
#include "actors/checkpoint/checkpoint_writer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "actors/checkpoint/checkpoint_format.h"
#include "actors/checkpoint/crc32c.h"
#include "actors/checkpoint/file_util.h"
#include "actors/checkpoint/shard_snapshot.h"
#include "actors/checkpoint/temp_dirs.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// UniqueSuffix: distinct across hosts, processes (pid), threads and calls (counter) and
// restarts of a process with a recycled pid (time); temp_dirs.h reads it back.
std::string UniqueSuffix() { return TempSuffix(); }

absl::Status FsError(const std::error_code& ec, absl::string_view op,
                     const std::string& path) {
  return ErrnoStatus(ec.value(), op, path);
}

// IndexForeignShard: adds the shards of <dir>/<file> (written by an attached writer in
// another process) to `index`, from the file's safetensors header and its
// "mxmaca.shards" metadata ({key: {name, full_shape, offsets, crc32c}}).
absl::Status IndexForeignShard(const std::string& dir, const std::string& file,
                               TensorIndex* index) {
  const std::string path = absl::StrCat(dir, "/", file);
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(path));
  MXMACA_ASSIGN_OR_RETURN(
      SafetensorsHeader header,
      ParseSafetensorsHeader(absl::string_view(mapped->data(), mapped->size()),
                             mapped->size(), path));
  auto meta = header.metadata.find("mxmaca.shards");
  json info;
  if (meta != header.metadata.end()) {
    try {
      info = json::parse(meta->second);
    } catch (const json::exception& e) {
      return absl::DataLossError(absl::StrCat(
          path, ": __metadata__ mxmaca.shards is not valid JSON: ", e.what()));
    }
  }
  for (const auto& [key, entry] : header.entries) {
    auto it = info.is_object() ? info.find(key) : info.end();
    if (!info.is_object() || it == info.end() || !it->is_object() ||
        !(*it)["name"].is_string()) {
      return absl::DataLossError(absl::StrCat(
          path, ": __metadata__ mxmaca.shards has no entry {name, full_shape, offsets} for '",
          key, "'"));
    }
    const std::string name = (*it)["name"].get<std::string>();
    TensorIndex one;
    MXMACA_ASSIGN_OR_RETURN(
        one, TensorIndexFromJson(
                 json::object({{name,
                                {{"dtype", kDtypeF32},
                                 {"shape", (*it)["full_shape"]},
                                 {"shards", json::array({{{"file", file},
                                                          {"key", key},
                                                          {"offsets", (*it)["offsets"]},
                                                          {"shape", entry.shape},
                                                          {"crc32c", (*it)["crc32c"]}}})}}}}),
                 path));
    TensorEntry& t = (*index)[name];
    TensorEntry& add = one.begin()->second;
    if (!t.shards.empty() && t.full_shape != add.full_shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": tensor '", name, "' has full shape ", ShapeToString(add.full_shape),
          " but another shard gave ", ShapeToString(t.full_shape)));
    }
    t.full_shape = add.full_shape;
    t.shards.push_back(std::move(add.shards.front()));
  }
  return absl::OkStatus();
}

// RenderMetadata: metadata.json's text: the JSON object {format, version, iteration, args,
// state, tensors}, laid out for people: args and state indented, one line per tensor.
// Throws nlohmann::json::type_error for strings that are not UTF-8.
std::string RenderMetadata(int64_t iteration, const json& args, const json& state,
                           const json& tensors) {
  auto indented = [](const json& j) {
    return absl::StrReplaceAll(j.dump(1), {{"\n", "\n "}});
  };
  std::string out = absl::StrCat("{\n \"format\": ", json(kFormatName).dump(),
                                 ",\n \"version\": ", kFormatVersion,
                                 ",\n \"iteration\": ", iteration,
                                 ",\n \"args\": ", indented(args),
                                 ",\n \"state\": ", indented(state),
                                 ",\n \"tensors\": {");
  const char* sep = "\n  ";
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    absl::StrAppend(&out, sep, json(it.key()).dump(), ": ", it.value().dump());
    sep = ",\n  ";
  }
  absl::StrAppend(&out, "\n }\n}\n");
  return out;
}

}  // namespace

struct CheckpointWriter::State {
  std::string save_dir;
  std::string temp_dir;
  std::string final_dir;
  int64_t iteration = 0;
  bool owner = true;  // made by Begin (commits, cleans up) rather than Attach
  std::vector<std::string> removed_stale;  // Begin: stale temp entries it removed

  absl::Mutex mu;
  std::set<std::string> writers ABSL_GUARDED_BY(mu);
  TensorIndex index ABSL_GUARDED_BY(mu);
  std::vector<std::string> failures ABSL_GUARDED_BY(mu);
  bool committed ABSL_GUARDED_BY(mu) = false;
  // DeferWrites: WriteShard snapshots instead of writing; WriteDeferred writes them.
  bool deferred ABSL_GUARDED_BY(mu) = false;
  std::vector<ShardSnapshot> snapshots ABSL_GUARDED_BY(mu);
  std::set<std::string> snapshot_writers ABSL_GUARDED_BY(mu);
  int64_t deferred_bytes ABSL_GUARDED_BY(mu) = 0;
};

CheckpointWriter::CheckpointWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
CheckpointWriter::CheckpointWriter(CheckpointWriter&&) noexcept = default;
CheckpointWriter& CheckpointWriter::operator=(CheckpointWriter&&) noexcept = default;

CheckpointWriter::~CheckpointWriter() {
  if (state_ == nullptr || !state_->owner) return;
  bool committed;
  {
    absl::MutexLock lock(&state_->mu);
    committed = state_->committed;
  }
  if (!committed) {
    std::error_code ec;
    fs::remove_all(state_->temp_dir, ec);  // best effort; readers ignore temp dirs
  }
}

int64_t CheckpointWriter::iteration() const { return state_->iteration; }
const std::string& CheckpointWriter::temp_dir() const { return state_->temp_dir; }
const std::string& CheckpointWriter::final_dir() const { return state_->final_dir; }
const std::vector<std::string>& CheckpointWriter::removed_stale() const {
  return state_->removed_stale;
}

absl::StatusOr<CheckpointWriter> CheckpointWriter::Begin(const std::string& save_dir,
                                                         int64_t iteration) {
  if (save_dir.empty()) {
    return absl::InvalidArgumentError("checkpoint save directory is empty");
  }
  if (iteration < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint iteration must be >= 0, got ", iteration));
  }
  std::error_code ec;
  const bool created = fs::create_directories(save_dir, ec);
  if (ec) return FsError(ec, "cannot create checkpoint directory", save_dir);
  if (created) {
    // Make the new save dir's own entry durable (Commit fsyncs its contents).
    fs::path parent = fs::absolute(save_dir, ec).parent_path();
    if (!ec) MXMACA_RETURN_IF_ERROR(FsyncDir(parent.string()));
  }
  if (!fs::is_directory(save_dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint save path ", save_dir, " is not a directory"));
  }
  auto state = std::make_unique<State>();
  // Temp entries of earlier saves whose writer is gone (killed mid-save) would otherwise
  // stay for ever, one per fault. Best effort: a save is not failed for leftovers.
  absl::StatusOr<std::vector<TempEntry>> removed =
      RemoveStaleTempEntries(save_dir, /*exclusive=*/false);
  if (removed.ok()) {
    for (const TempEntry& e : *removed) state->removed_stale.push_back(e.Describe());
  }
  state->save_dir = save_dir;
  state->iteration = iteration;
  state->final_dir = absl::StrCat(save_dir, "/", IterDirName(iteration));
  state->temp_dir = absl::StrCat(state->final_dir, kTempMarker, UniqueSuffix());
  if (!fs::create_directory(state->temp_dir, ec)) {
    if (!ec) ec = std::make_error_code(std::errc::file_exists);
    return FsError(ec, "cannot create checkpoint temp directory", state->temp_dir);
  }
  return CheckpointWriter(std::move(state));
}

absl::StatusOr<CheckpointWriter> CheckpointWriter::Attach(const std::string& save_dir,
                                                          int64_t iteration,
                                                          const std::string& temp_dir) {
  const fs::path temp(temp_dir);
  const std::string prefix = absl::StrCat(IterDirName(iteration), kTempMarker);
  if (iteration < 0 || !absl::StartsWith(temp.filename().string(), prefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint Attach: ", temp_dir, " is not a temp dir of iteration ", iteration,
        " (expected <save_dir>/", prefix, "*)"));
  }
  std::error_code ec;
  if (!fs::is_directory(temp, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "checkpoint Attach: temp dir ", temp_dir, " does not exist (was the save begun?)"));
  }
  auto state = std::make_unique<State>();
  state->save_dir = save_dir;
  state->iteration = iteration;
  state->final_dir = absl::StrCat(save_dir, "/", IterDirName(iteration));
  state->temp_dir = temp_dir;
  state->owner = false;
  return CheckpointWriter(std::move(state));
}

void CheckpointWriter::DeferWrites() {
  absl::MutexLock lock(&state_->mu);
  state_->deferred = true;
}

int64_t CheckpointWriter::deferred_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->deferred_bytes;
}

absl::Status CheckpointWriter::WriteShard(const std::string& writer_name,
                                          absl::Span<const TensorShardView> tensors) {
  bool deferred;
  {
    absl::MutexLock lock(&state_->mu);
    deferred = state_->deferred;
  }
  if (!deferred) return WriteShardNow(writer_name, tensors);
  MXMACA_RETURN_IF_ERROR(ValidateWriterName(writer_name));
  MXMACA_ASSIGN_OR_RETURN(ShardSnapshot snapshot, ShardSnapshot::Take(writer_name, tensors));
  absl::MutexLock lock(&state_->mu);
  if (state_->committed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "WriteShard(", writer_name, ") after Commit of ", state_->final_dir));
  }
  if (!state_->snapshot_writers.insert(writer_name).second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint writer name '", writer_name, "' is used twice in one checkpoint"));
  }
  state_->deferred_bytes += snapshot.bytes();
  state_->snapshots.push_back(std::move(snapshot));
  return absl::OkStatus();
}

absl::Status CheckpointWriter::WriteDeferred() {
  std::vector<ShardSnapshot> snapshots;
  {
    absl::MutexLock lock(&state_->mu);
    snapshots.swap(state_->snapshots);
  }
  absl::Status first;
  for (ShardSnapshot& s : snapshots) {
    absl::Status written = WriteShardNow(s.writer_name(), s.views());
    if (first.ok() && !written.ok()) first = written;
  }
  return first;  // the snapshots are freed here
}

absl::Status CheckpointWriter::WriteShardNow(const std::string& writer_name,
                                             absl::Span<const TensorShardView> tensors) {
  MXMACA_RETURN_IF_ERROR(ValidateWriterName(writer_name));
  const std::string file_name = ShardFileName(writer_name);

  // Check the views and assign safetensors keys and data offsets (C order, tiling).
  std::vector<SafetensorsEntry> entries;
  std::vector<ShardEntry> shards;
  std::map<std::string, int> seen;  // name -> shards of it so far in this file
  std::map<std::string, const std::vector<int64_t>*> full_shapes;
  uint64_t data_bytes = 0;
  for (const TensorShardView& v : tensors) {
    MXMACA_RETURN_IF_ERROR(ValidateTensorName(v.name));
    MXMACA_RETURN_IF_ERROR(
        ValidateShardGeometry(v.name, v.full_shape, v.offsets, v.shard_shape));
    auto [first, inserted] = full_shapes.emplace(v.name, &v.full_shape);
    if (!inserted && *first->second != v.full_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WriteShard(", writer_name, "): tensor '", v.name, "' is given with full shapes ",
          ShapeToString(*first->second), " and ", ShapeToString(v.full_shape)));
    }
    MXMACA_ASSIGN_OR_RETURN(int64_t numel, NumElements(v.full_shape, v.name));
    MXMACA_ASSIGN_OR_RETURN(numel, NumElements(v.shard_shape, v.name));
    if (numel > 0 && v.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WriteShard(", writer_name, "): tensor '", v.name, "' shard ",
          ShapeToString(v.shard_shape), " has null data"));
    }
    const int k = seen[v.name]++;
    SafetensorsEntry e;
    e.key = k == 0 ? v.name : absl::StrCat(v.name, "#", k);
    e.shape = v.shard_shape;
    e.begin = data_bytes;
    data_bytes += static_cast<uint64_t>(numel) * sizeof(float);
    e.end = data_bytes;
    shards.push_back({file_name, e.key, v.offsets, v.shard_shape,
                      Crc32c(v.data, static_cast<size_t>(numel) * sizeof(float))});
    entries.push_back(std::move(e));
  }

  {
    absl::MutexLock lock(&state_->mu);
    if (state_->committed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "WriteShard(", writer_name, ") after Commit of ", state_->final_dir));
    }
    for (const TensorShardView& v : tensors) {
      auto it = state_->index.find(v.name);
      if (it != state_->index.end() && it->second.full_shape != v.full_shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "WriteShard(", writer_name, "): tensor '", v.name, "' has full shape ",
            ShapeToString(v.full_shape), " but another shard gave ",
            ShapeToString(it->second.full_shape)));
      }
    }
    if (!state_->writers.insert(writer_name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint writer name '", writer_name, "' is used twice in one checkpoint"));
    }
  }

  // File I/O outside the lock. The __metadata__ makes each file self-describing: for
  // every key, the logical tensor, its full shape and the shard's offsets.
  json shard_info = json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    shard_info[entries[i].key] = {{"name", tensors[i].name},
                                  {"full_shape", tensors[i].full_shape},
                                  {"offsets", tensors[i].offsets},
                                  {"crc32c", shards[i].crc32c}};
  }
  const std::string header = EncodeSafetensorsHeader(
      entries, {{"format", "pt"},
                {"mxmaca.format", kFormatName},
                {"mxmaca.iteration", absl::StrCat(state_->iteration)},
                {"mxmaca.shards", shard_info.dump()}});
  const std::string path = absl::StrCat(state_->temp_dir, "/", file_name);
  const std::string partial = absl::StrCat(path, ".partial");
  absl::Status io = [&]() -> absl::Status {
    MXMACA_ASSIGN_OR_RETURN(DurableFile file, DurableFile::Create(partial));
    MXMACA_RETURN_IF_ERROR(file.Append(header.data(), header.size()));
    for (size_t i = 0; i < tensors.size(); ++i) {
      MXMACA_RETURN_IF_ERROR(file.Append(tensors[i].data, entries[i].end - entries[i].begin));
    }
    MXMACA_RETURN_IF_ERROR(file.Close());
    // No-replace: a writer name used by another process (Attach) fails here.
    return RenameNoReplace(partial, path);
  }();
  if (!io.ok()) {
    std::error_code ec;
    fs::remove(partial, ec);
  }

  absl::MutexLock lock(&state_->mu);
  if (!io.ok()) {
    state_->failures.push_back(absl::StrCat("WriteShard(", writer_name, "): ", io.message()));
    return io;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorEntry& t = state_->index[tensors[i].name];
    t.full_shape = tensors[i].full_shape;
    t.shards.push_back(std::move(shards[i]));
  }
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Commit(const json& args, const json& state) {
  if (!args.is_object() || !state.is_object()) {
    return absl::InvalidArgumentError(
        "checkpoint Commit: args and state must be JSON objects");
  }
  if (!state_->owner) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint Commit on an attached writer: only the process that called Begin "
        "commits ", state_->final_dir));
  }
  std::string metadata;
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->committed) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", state_->final_dir, " is already committed"));
    }
    if (!state_->failures.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", state_->final_dir, " not committed: ", state_->failures.front()));
    }
    // Shard files written by attached writers (other processes) are indexed from their
    // headers; this process's own files are in state_->index already. A copy, so that a
    // failed Commit can be retried.
    TensorIndex index = state_->index;
    std::error_code ec;
    for (fs::directory_iterator it(state_->temp_dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (!absl::StartsWith(file, "shard_") || !absl::EndsWith(file, ".safetensors")) continue;
      const std::string writer = file.substr(6, file.size() - 6 - 12);
      if (state_->writers.count(writer)) continue;
      MXMACA_RETURN_IF_ERROR(IndexForeignShard(state_->temp_dir, file, &index));
    }
    if (ec) return FsError(ec, "cannot list checkpoint temp dir", state_->temp_dir);
    absl::Status valid = ValidateTensorIndex(index);
    if (!valid.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", state_->final_dir, " not committed: ", valid.message()));
    }
    try {
      metadata = RenderMetadata(state_->iteration, args, state, TensorIndexToJson(index));
    } catch (const json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint Commit: args/state cannot be written: ", e.what()));
    }
  }

  // 1. metadata.json last inside the temp dir, then make the dir's entries durable.
  const std::string& temp_dir = state_->temp_dir;
  const std::string& final_dir = state_->final_dir;
  const std::string& save_dir = state_->save_dir;
  const std::string meta_path = absl::StrCat(temp_dir, "/", kMetadataFileName);
  std::error_code ec;
  fs::remove(meta_path, ec);  // left by an earlier, failed Commit of this writer
  MXMACA_RETURN_IF_ERROR(WriteFileDurably(meta_path, metadata));
  MXMACA_RETURN_IF_ERROR(FsyncDir(temp_dir));

  // 2. Publish the directory. If iter_{:07d} exists (saving the same iteration again),
  // swap it atomically with the temp dir, so that the name always holds a complete
  // checkpoint; the old one then sits under the temp name and is removed.
  absl::Status renamed = RenameNoReplace(temp_dir, final_dir);
  bool swapped = false;
  if (absl::IsAlreadyExists(renamed)) {
    absl::Status exchanged = ExchangeDirs(temp_dir, final_dir);
    if (absl::IsUnimplemented(exchanged)) {
      // No RENAME_EXCHANGE on this file system: move the old one aside first (a crash
      // between the two renames leaves it under iter_{:07d}.tmp-old-*).
      const std::string aside = absl::StrCat(final_dir, kTempMarker, "old-", UniqueSuffix());
      MXMACA_RETURN_IF_ERROR(RenameReplace(final_dir, aside));
      exchanged = RenameNoReplace(temp_dir, final_dir);
      if (exchanged.ok()) exchanged = RenameReplace(aside, temp_dir);
    }
    MXMACA_RETURN_IF_ERROR(exchanged);
    swapped = true;
  } else {
    MXMACA_RETURN_IF_ERROR(renamed);
  }
  {
    absl::MutexLock lock(&state_->mu);
    state_->committed = true;
  }
  MXMACA_RETURN_IF_ERROR(FsyncDir(save_dir));

  // 3. Point latest_checkpointed_iteration.txt at it (temp file + atomic rename).
  const std::string latest = absl::StrCat(save_dir, "/", kLatestFileName);
  const std::string latest_tmp = absl::StrCat(latest, kTempMarker, UniqueSuffix());
  MXMACA_RETURN_IF_ERROR(WriteFileDurably(latest_tmp, absl::StrCat(state_->iteration)));
  MXMACA_RETURN_IF_ERROR(RenameReplace(latest_tmp, latest));
  MXMACA_RETURN_IF_ERROR(FsyncDir(save_dir));

  if (swapped) {
    fs::remove_all(temp_dir, ec);
    if (ec) return FsError(ec, "cannot remove replaced checkpoint", temp_dir);
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::actors::checkpoint
