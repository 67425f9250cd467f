// actors/checkpoint/save_lock.cc: see save_lock.h.
#include "actors/checkpoint/save_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "actors/checkpoint/file_util.h"
#include "base/process_info.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string LockPath(const std::string& save_dir) {
  return absl::StrCat(save_dir, "/", kSaveLockFileName);
}

// ReadAll: the contents of open file `fd` (a few hundred bytes).
absl::StatusOr<std::string> ReadAll(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot read", path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
    if (out.size() > (1 << 16)) break;
  }
  return out;
}

absl::StatusOr<std::optional<SaveLockHolder>> ParseHolder(const std::string& text,
                                                          const std::string& path) {
  if (text.find_first_not_of(" \n\t") == std::string::npos) return std::nullopt;
  try {
    const json j = json::parse(text);
    SaveLockHolder h;
    h.host = j.at("host").get<std::string>();
    h.pid = static_cast<pid_t>(j.at("pid").get<int64_t>());
    h.start_ticks = j.at("start_ticks").get<uint64_t>();
    h.started = j.value("started", std::string());
    return h;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(path,
                                            ": not a save lock holder line ({host, pid, "
                                            "start_ticks, started}): ",
                                            e.what()));
  }
}

std::string HolderLine(const SaveLockHolder& h) {
  return json({{"host", h.host},
               {"pid", static_cast<int64_t>(h.pid)},
               {"start_ticks", h.start_ticks},
               {"started", h.started}})
             .dump() +
         "\n";
}

SaveLockHolder Me() {
  SaveLockHolder h;
  h.host = base::HostName();
  h.pid = ::getpid();
  h.start_ticks = base::ProcessStartTicks(h.pid).value_or(0);
  const absl::Time started = base::ProcessStartTime(h.pid).value_or(absl::Now());
  h.started = absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", started, absl::UTCTimeZone());
  return h;
}

absl::Status InUse(const std::string& save_dir, const std::optional<SaveLockHolder>& holder) {
  return absl::FailedPreconditionError(absl::StrCat(
      "--save directory ", save_dir, " is in use by another job (",
      holder ? holder->Describe() : std::string("holder not recorded yet"), "; lock file ",
      LockPath(save_dir),
      "): two jobs writing one directory would overwrite each other's checkpoints; stop "
      "that job or give this one another --save"));
}

}  // namespace

std::string SaveLockHolder::Describe() const {
  return absl::StrCat("host ", host, ", pid ", pid, started.empty() ? "" : ", started ", started);
}

absl::StatusOr<std::optional<SaveLockHolder>> ReadSaveLockHolder(const std::string& save_dir) {
  const std::string path = LockPath(save_dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return ErrnoStatus(errno, "cannot open", path);
  }
  absl::StatusOr<std::string> text = ReadAll(fd, path);
  ::close(fd);
  if (!text.ok()) return text.status();
  return ParseHolder(*text, path);
}

absl::StatusOr<bool> SaveLockHeld(const std::string& save_dir) {
  const std::string path = LockPath(save_dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    return ErrnoStatus(errno, "cannot open", path);
  }
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // drops our probe's lock, if it got one
  return held;
}

absl::StatusOr<SaveLock> SaveLock::Acquire(const std::string& save_dir,
                                           std::optional<SaveLockHolder>* taken_over) {
  if (taken_over != nullptr) taken_over->reset();
  if (save_dir.empty()) return absl::InvalidArgumentError("--save directory is empty");
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) return ErrnoStatus(ec.value(), "cannot create checkpoint directory", save_dir);
  const std::string path = LockPath(save_dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot open save lock", path);
  SaveLock lock(save_dir, fd);  // closes fd on every error path below
  absl::StatusOr<std::string> text = ReadAll(fd, path);
  if (!text.ok()) return text.status();
  // A garbled file (e.g. a crash mid-write on a file system without ordering) names nobody.
  absl::StatusOr<std::optional<SaveLockHolder>> previous = ParseHolder(*text, path);
  std::optional<SaveLockHolder> before = previous.ok() ? *previous : std::nullopt;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return ErrnoStatus(errno, "cannot lock", path);
    // Re-read: the holder may have written its line after our first read.
    text = ReadAll(fd, path);
    previous = text.ok() ? ParseHolder(*text, path) : text.status();
    return InUse(save_dir, previous.ok() ? *previous : before);
  }
  text = ReadAll(fd, path);
  if (!text.ok()) return text.status();
  previous = ParseHolder(*text, path);
  before = previous.ok() ? *previous : std::nullopt;
  const SaveLockHolder me = Me();
  if (before && before->host == me.host && before->pid != me.pid &&
      base::ProcessAlive(before->pid, before->start_ticks)) {
    // Its flock did not stop us (a file system without flock between clients?), but the
    // named holder is alive here: it is still writing.
    return InUse(save_dir, before);
  }
  const std::string line = HolderLine(me);
  if (::ftruncate(fd, 0) != 0) return ErrnoStatus(errno, "cannot truncate", path);
  if (::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    return ErrnoStatus(errno, "cannot write", path);
  }
  if (::fsync(fd) != 0) return ErrnoStatus(errno, "cannot fsync", path);
  if (taken_over != nullptr && before && before->pid != me.pid) *taken_over = before;
  lock.held_ = true;
  return lock;
}

SaveLock::SaveLock(SaveLock&& other) noexcept
    : save_dir_(std::move(other.save_dir_)),
      fd_(std::exchange(other.fd_, -1)),
      held_(std::exchange(other.held_, false)) {}

SaveLock& SaveLock::operator=(SaveLock&& other) noexcept {
  if (this != &other) {
    Release();
    save_dir_ = std::move(other.save_dir_);
    fd_ = std::exchange(other.fd_, -1);
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

SaveLock::~SaveLock() { Release(); }

void SaveLock::Release() {
  if (fd_ < 0) return;
  // Only the lock's holder empties the file: an fd that never got the lock (an error
  // path of Acquire) must not erase the holder's line.
  if (held_ && ::ftruncate(fd_, 0) == 0) ::fsync(fd_);
  ::close(fd_);
  fd_ = -1;
  held_ = false;
}

}  // namespace mxmaca::actors::checkpoint
