// actors/checkpoint/file_util.h: the POSIX file operations checkpoints need, as Status-
// returning calls: durable writes (write + fsync), directory fsync, atomic renames, and
// read-only memory mapping. Package-private helpers of actors/checkpoint.
#ifndef MXMACA_ACTORS_CHECKPOINT_FILE_UTIL_H_
#define MXMACA_ACTORS_CHECKPOINT_FILE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mxmaca::actors::checkpoint {

// ErrnoStatus: a Status for a failed system call: "<op> <path>: <strerror(errno)>", with
// the code NotFound for ENOENT, PermissionDenied for EACCES/EPERM, ResourceExhausted for
// ENOSPC/EDQUOT, else Internal.
absl::Status ErrnoStatus(int errno_value, absl::string_view op, absl::string_view path);

// DurableFile: a new file written sequentially and fsynced on Close. Create fails if the
// file exists (O_EXCL). Not thread-safe; one writer per file.
class DurableFile {
 public:
  static absl::StatusOr<DurableFile> Create(const std::string& path);
  DurableFile(DurableFile&& other) noexcept;
  DurableFile& operator=(DurableFile&& other) noexcept;
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  ~DurableFile();  // closes without fsync if Close was not called

  // Append: writes all `size` bytes (retrying short writes and EINTR).
  absl::Status Append(const void* data, size_t size);
  // Close: fsync, then close. The file's contents are on stable storage when it returns OK
  // (its directory entry needs FsyncDir of the parent).
  absl::Status Close();

 private:
  DurableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// WriteFileDurably: creates `path` (must not exist) holding `contents`, fsynced.
absl::Status WriteFileDurably(const std::string& path, absl::string_view contents);

// FsyncDir: fsyncs directory `path`, making creations and renames inside it durable.
absl::Status FsyncDir(const std::string& path);

// RenameNoReplace: renames `from` to `to`; fails (AlreadyExists) if `to` exists.
absl::Status RenameNoReplace(const std::string& from, const std::string& to);

// RenameReplace: renames `from` to `to`, atomically replacing a regular file `to`.
absl::Status RenameReplace(const std::string& from, const std::string& to);

// ExchangeDirs: atomically swaps the directories `a` and `b` (Linux renameat2 with
// RENAME_EXCHANGE): afterwards `a` names what `b` named and vice versa, and at every
// instant both names exist. Unimplemented if the file system does not support it.
absl::Status ExchangeDirs(const std::string& a, const std::string& b);

// ReadSmallFile: the whole contents of `path` (up to `max_bytes`; larger is an error).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes);

// MappedFile: a read-only, private memory mapping of a whole file. Move-only; unmaps on
// destruction. An empty file maps to size() == 0 and data() == nullptr.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const char* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_FILE_UTIL_H_
