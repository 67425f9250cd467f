// api/inspect/checkpoint_dir_report.cc: see checkpoint_dir_report.h.
#include "api/inspect/checkpoint_dir_report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actors/checkpoint/checkpoint_format.h"

namespace mxmaca::api {
namespace {

namespace fs = std::filesystem;
namespace ckpt = actors::checkpoint;

std::string Bytes(uint64_t b) {
  if (b < (1u << 20)) return absl::StrCat(b, " bytes");
  return absl::StrCat(static_cast<double>(b) / (1 << 20), " MiB");
}

}  // namespace

absl::StatusOr<CheckpointDirReport> InspectCheckpointDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("checkpoint directory ", dir, " does not exist",
                                            fs::exists(dir, ec) ? " (it is not a directory)" : ""));
  }
  CheckpointDirReport r;
  r.dir = dir;
  const std::string tracker = absl::StrCat(dir, "/", ckpt::kLatestFileName);
  if (fs::exists(tracker, ec)) {
    std::ifstream in(tracker);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    r.tracker = std::string(absl::StripAsciiWhitespace(text.substr(0, 256)));
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    CheckpointDirReport::Iteration i;
    if (!absl::StartsWith(name, "iter_") || absl::StrContains(name, ckpt::kTempMarker) ||
        !absl::SimpleAtoi(name.substr(5), &i.iteration) || !it->is_directory(ec)) {
      continue;
    }
    i.name = name;
    i.complete = fs::exists(it->path() / ckpt::kMetadataFileName, ec);
    for (fs::directory_iterator f(it->path(), ec), fend; !ec && f != fend; f.increment(ec)) {
      const std::string file = f->path().filename().string();
      if (absl::StartsWith(file, "shard_") && absl::EndsWith(file, ".safetensors")) ++i.shard_files;
      if (f->is_regular_file(ec)) i.bytes += f->file_size(ec);
    }
    r.iterations.push_back(std::move(i));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::sort(r.iterations.begin(), r.iterations.end(),
            [](const auto& a, const auto& b) { return a.iteration < b.iteration; });
  absl::StatusOr<std::optional<ckpt::SaveLockHolder>> holder = ckpt::ReadSaveLockHolder(dir);
  if (holder.ok()) r.lock_holder = *holder;
  absl::StatusOr<bool> held = ckpt::SaveLockHeld(dir);
  r.lock_held = held.ok() && *held;
  absl::StatusOr<std::vector<ckpt::TempEntry>> temps = ckpt::ListTempEntries(dir);
  if (!temps.ok()) return temps.status();
  r.temp_entries = std::move(*temps);
  return r;
}

std::string RenderCheckpointDirReport(const CheckpointDirReport& r) {
  std::string out = absl::StrCat("checkpoint directory ", r.dir, "\n");
  int64_t latest = -1;
  if (!r.tracker) {
    absl::StrAppend(&out, "tracker ", ckpt::kLatestFileName, ": none\n");
  } else if (absl::SimpleAtoi(*r.tracker, &latest)) {
    const bool present = std::any_of(r.iterations.begin(), r.iterations.end(), [&](const auto& i) {
      return i.iteration == latest && i.complete;
    });
    absl::StrAppend(&out, "tracker ", ckpt::kLatestFileName, ": iteration ", latest,
                    present ? "" : " (no complete iter directory for it)", "\n");
  } else {
    absl::StrAppend(&out, "tracker ", ckpt::kLatestFileName, ": \"", *r.tracker,
                    "\" (not an iteration number)\n");
  }
  absl::StrAppend(&out, "iterations: ", r.iterations.size(), "\n");
  for (const auto& i : r.iterations) {
    absl::StrAppend(&out, "  ", i.name, "  ",
                    i.complete ? "complete" : "half-written (no metadata.json)", ", ",
                    i.shard_files, " shard file", i.shard_files == 1 ? "" : "s", ", ",
                    Bytes(i.bytes), i.iteration == latest ? "  <- latest" : "", "\n");
  }
  absl::StrAppend(&out, "save lock ", ckpt::kSaveLockFileName, ": ");
  if (r.lock_held) {
    absl::StrAppend(&out, "held by a running job (",
                    r.lock_holder ? r.lock_holder->Describe() : std::string("holder not recorded"),
                    ")\n");
  } else if (r.lock_holder) {
    absl::StrAppend(&out, "free; last held by a job that is gone (", r.lock_holder->Describe(),
                    "): the next job takes it over\n");
  } else {
    absl::StrAppend(&out, "free\n");
  }
  absl::StrAppend(&out, "temp entries (saves that did not commit): ", r.temp_entries.size(), "\n");
  for (const auto& e : r.temp_entries) {
    const bool removable = e.kind != ckpt::TempEntry::Kind::kAside && !e.writer_alive;
    absl::StrAppend(&out, "  ", e.Describe(), removable ? ": the next save removes it" : "", "\n");
  }
  return out;
}

}  // namespace mxmaca::api
