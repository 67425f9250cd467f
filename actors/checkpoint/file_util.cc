// actors/checkpoint/file_util.cc: POSIX implementations (Linux).
#include "actors/checkpoint/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace mxmaca::actors::checkpoint {

absl::Status ErrnoStatus(int errno_value, absl::string_view op, absl::string_view path) {
  std::string message = absl::StrCat(op, " ", path, ": ", strerror(errno_value));
  switch (errno_value) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EEXIST:
    case ENOTEMPTY:
      return absl::AlreadyExistsError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<DurableFile> DurableFile::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", path);
  return DurableFile(path, fd);
}

DurableFile::DurableFile(DurableFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

DurableFile& DurableFile::operator=(DurableFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status DurableFile::Append(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; larger requests return short counts.
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot write", path_);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status DurableFile::Close() {
  int fd = std::exchange(fd_, -1);
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoStatus(e, "cannot fsync", path_);
  }
  if (::close(fd) != 0) return ErrnoStatus(errno, "cannot close", path_);
  return absl::OkStatus();
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view contents) {
  auto file = DurableFile::Create(path);
  if (!file.ok()) return file.status();
  absl::Status st = file->Append(contents.data(), contents.size());
  if (!st.ok()) return st;
  return file->Close();
}

absl::Status FsyncDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open directory", path);
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoStatus(e, "cannot fsync directory", path);
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot rename ", from, " to"), to);
  }
  return absl::OkStatus();
}

absl::Status RenameReplace(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot rename ", from, " to"), to);
  }
  return absl::OkStatus();
}

absl::Status ExchangeDirs(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    int e = errno;
    if (e == EINVAL || e == ENOSYS) {
      return absl::UnimplementedError(
          absl::StrCat("atomic exchange of ", a, " and ", b, " is not supported here"));
    }
    return ErrnoStatus(e, absl::StrCat("cannot exchange ", a, " with"), b);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return ErrnoStatus(e, "cannot read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat(path, " is larger than the expected ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return out;
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoStatus(e, "cannot stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const char* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return ErrnoStatus(e, "cannot mmap", path);
    }
    data = static_cast<const char*>(p);
  }
  ::close(fd);  // the mapping keeps the file referenced
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace mxmaca::actors::checkpoint
