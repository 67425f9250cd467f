// actors/checkpoint/temp_dirs.cc: see temp_dirs.h.
#include "actors/checkpoint/temp_dirs.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "actors/checkpoint/checkpoint_format.h"
#include "actors/checkpoint/file_util.h"
#include "base/process_info.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string SafeHostName() {
  std::string host = base::HostName();
  for (char& c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return host;
}

// ParseSuffix: "<pid>-<counter>-<hex time>[-<host>]" into `e`; false if it is not one.
bool ParseSuffix(absl::string_view suffix, TempEntry* e) {
  std::vector<std::string> parts = absl::StrSplit(suffix, absl::MaxSplits('-', 3));
  if (parts.size() < 3) return false;
  int pid = 0;
  uint64_t counter = 0, ns = 0;
  if (!absl::SimpleAtoi(parts[0], &pid) || pid <= 0 || !absl::SimpleAtoi(parts[1], &counter) ||
      !absl::SimpleHexAtoi(parts[2], &ns)) {
    return false;
  }
  e->pid = static_cast<pid_t>(pid);
  e->created = absl::FromUnixNanos(static_cast<int64_t>(ns));
  if (parts.size() == 4) e->host = parts[3];
  return true;
}

// Classify: the temp entry `name` names, if any.
std::optional<TempEntry> Classify(const std::string& save_dir, const std::string& name) {
  TempEntry e;
  e.name = name;
  e.path = absl::StrCat(save_dir, "/", name);
  const size_t marker = name.find(kTempMarker);
  if (marker == std::string::npos) return std::nullopt;
  absl::string_view head = absl::string_view(name).substr(0, marker);
  absl::string_view suffix = absl::string_view(name).substr(marker + strlen(kTempMarker));
  if (head == kLatestFileName) {
    e.kind = TempEntry::Kind::kTracker;
  } else if (absl::StartsWith(head, "iter_") && absl::SimpleAtoi(head.substr(5), &e.iteration) &&
             e.iteration >= 0) {
    e.kind = TempEntry::Kind::kSave;
    if (absl::ConsumePrefix(&suffix, "old-")) e.kind = TempEntry::Kind::kAside;
  } else {
    return std::nullopt;
  }
  if (!ParseSuffix(suffix, &e)) {
    // A temp name we did not write (or cannot read): its writer cannot be judged.
    e.pid = 0;
    e.writer_alive = true;
    return e;
  }
  static const std::string here = SafeHostName();
  if (!e.host.empty() && e.host != here) {
    e.writer_alive = true;  // another host's process: not checkable from here
  } else {
    std::optional<absl::Time> started = base::ProcessStartTime(e.pid);
    // The writer named the entry after it started; a process with its pid that started
    // later is another one (a recycled pid). Two seconds of margin: the boot time that
    // start times are computed from is whole seconds.
    e.writer_alive = base::ProcessAlive(e.pid) && started.has_value() &&
                     *started <= e.created + absl::Seconds(2);
  }
  return e;
}

// OwnEntry: written by this very process (its pid, this host, after it started).
bool OwnEntry(const TempEntry& e) {
  static const std::string here = SafeHostName();
  if (e.pid != ::getpid() || (!e.host.empty() && e.host != here)) return false;
  std::optional<absl::Time> started = base::ProcessStartTime(::getpid());
  return started.has_value() && *started <= e.created + absl::Seconds(2);
}

}  // namespace

std::string TempSuffix() {
  static std::atomic<uint64_t> counter{0};
  static const std::string host = SafeHostName();
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return absl::StrFormat("%d-%d-%x-%s", static_cast<int>(::getpid()), counter.fetch_add(1),
                         std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), host);
}

std::string TempEntry::Describe() const {
  std::string what;
  switch (kind) {
    case Kind::kSave:
      what = absl::StrCat("a save of iteration ", iteration);
      break;
    case Kind::kAside:
      what = absl::StrCat("iteration ", iteration,
                          "'s previous checkpoint moved aside (kept: it may be the only copy)");
      break;
    case Kind::kTracker:
      what = "a tracker file not yet renamed";
      break;
  }
  if (pid == 0) return absl::StrCat(name, " (", what, ", writer unknown)");
  const std::string by = absl::StrCat(
      " by pid ", pid, host.empty() ? "" : absl::StrCat(" on ", host),
      created == absl::InfinitePast()
          ? ""
          : absl::StrCat(", begun ",
                         absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", created, absl::UTCTimeZone())));
  return absl::StrCat(name, " (", what, by,
                      writer_alive ? ", writer may be running" : ", writer gone", ")");
}

absl::StatusOr<std::vector<TempEntry>> ListTempEntries(const std::string& save_dir) {
  std::vector<TempEntry> out;
  std::error_code ec;
  if (!fs::exists(save_dir, ec)) return out;
  for (fs::directory_iterator it(save_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::optional<TempEntry> e = Classify(save_dir, it->path().filename().string());
    if (e) out.push_back(std::move(*e));
  }
  if (ec) return ErrnoStatus(ec.value(), "cannot list checkpoint directory", save_dir);
  std::sort(out.begin(), out.end(),
            [](const TempEntry& a, const TempEntry& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<std::vector<TempEntry>> RemoveStaleTempEntries(const std::string& save_dir,
                                                              bool exclusive) {
  absl::StatusOr<std::vector<TempEntry>> all = ListTempEntries(save_dir);
  if (!all.ok()) return all.status();
  std::vector<TempEntry> removed;
  for (TempEntry& e : *all) {
    if (e.kind == TempEntry::Kind::kAside || OwnEntry(e)) continue;
    if (e.writer_alive && !exclusive) continue;
    std::error_code ec;
    fs::remove_all(e.path, ec);
    if (ec) return ErrnoStatus(ec.value(), "cannot remove stale checkpoint temp entry", e.path);
    e.writer_alive = false;
    removed.push_back(std::move(e));
  }
  return removed;
}

}  // namespace mxmaca::actors::checkpoint
