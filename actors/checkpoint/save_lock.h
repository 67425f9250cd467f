// actors/checkpoint/save_lock.h: one job at a time writes a --save directory (issue 22:
// "a rescheduled job on the same --save has two writers").
//
// The lock is the file <save>/mxmaca-save.lock, held with flock(2) (LOCK_EX) for as long as
// the SaveLock lives, and holding a JSON line that names the holder:
//   {"host": "node01", "pid": 4242, "start_ticks": 123456, "started": "2026-12-02 05:31:07 UTC"}
// (start_ticks: field 22 of the holder's /proc/<pid>/stat, so that a recycled pid is not
// taken for it). The kernel drops a flock when its process dies, however it dies, so a lock
// left by a killed job never blocks the next one; the file's old contents then say whose
// it was, and Acquire reports that it took it over. As a second guard, for file systems
// that do not carry flock between clients, a lock whose named holder is alive on this host
// refuses even if flock succeeded. (Across hosts on a file system without working flock,
// nothing is detected: docs/CHECKPOINTS.md.)
//
// In a multi-process job only global rank 0 takes the lock (api/train/save_guard.h) and
// tells the other ranks whether it got it; the file is never removed (removing it would
// let a third job lock a new file while the second still holds the old one).
#ifndef MXMACA_ACTORS_CHECKPOINT_SAVE_LOCK_H_
#define MXMACA_ACTORS_CHECKPOINT_SAVE_LOCK_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mxmaca::actors::checkpoint {

// kSaveLockFileName: the lock file inside the save directory.
inline constexpr char kSaveLockFileName[] = "mxmaca-save.lock";

// SaveLockHolder: who holds (or last held) a save directory.
struct SaveLockHolder {
  std::string host;
  pid_t pid = 0;
  uint64_t start_ticks = 0;
  std::string started;  // the holder's start, "YYYY-MM-DD HH:MM:SS UTC"
  // Describe: "host node01, pid 4242, started 2026-12-02 05:31:07 UTC".
  std::string Describe() const;
};

// ReadSaveLockHolder: what <save_dir>/mxmaca-save.lock says; nullopt when the file is
// missing or empty (never locked, or released cleanly). Errors: DataLoss for contents that
// are not a holder line (naming the file); the file system's.
absl::StatusOr<std::optional<SaveLockHolder>> ReadSaveLockHolder(const std::string& save_dir);

// SaveLockHeld: whether a live process holds the lock now (probed with a non-blocking
// flock, released at once). Errors: the file system's.
absl::StatusOr<bool> SaveLockHeld(const std::string& save_dir);

class SaveLock {
 public:
  // Acquire: creates `save_dir` if needed and takes its lock for this process.
  // `taken_over` (may be null) receives the holder a previous, dead job left in the file
  // (else is reset). Errors: FailedPrecondition when another live job holds it:
  //   --save directory D is in use by another job (host node01, pid 4242, started ...;
  //   lock file D/mxmaca-save.lock): two jobs writing one directory would overwrite each
  //   other's checkpoints; stop that job or give this one another --save
  // the file system's otherwise (naming the path).
  static absl::StatusOr<SaveLock> Acquire(const std::string& save_dir,
                                          std::optional<SaveLockHolder>* taken_over = nullptr);

  SaveLock(SaveLock&& other) noexcept;
  SaveLock& operator=(SaveLock&& other) noexcept;
  SaveLock(const SaveLock&) = delete;
  SaveLock& operator=(const SaveLock&) = delete;
  // ~SaveLock: empties the file (a clean release names nobody) and releases the lock.
  ~SaveLock();

  const std::string& save_dir() const { return save_dir_; }

 private:
  SaveLock(std::string save_dir, int fd) : save_dir_(std::move(save_dir)), fd_(fd) {}
  void Release();
  std::string save_dir_;
  int fd_ = -1;
  bool held_ = false;  // the holder line is ours (Acquire succeeded)
};

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_SAVE_LOCK_H_
