// actors/checkpoint/megatron/zip_archive.h: the subset of the ZIP format that torch.save
// writes (PKWARE APPNOTE 6.3.x): STORED (uncompressed) entries, zip64 records for archives
// or entries past 4 GiB, CRC-32 per entry. A reader over bytes in memory (a mapped file)
// and a streaming writer whose entries' data start at 64-byte aligned file offsets, as
// PyTorch's PyTorchStreamWriter (caffe2/serialize/inline_container.cc, kFieldAlignment)
// pads them with an extra field in the local header. Debian's torch 1.13 reads any
// STORED archive through miniz and checks each entry's CRC-32.
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_ZIP_ARCHIVE_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_ZIP_ARCHIVE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mxmaca::actors::checkpoint::megatron {

// Crc32: the CRC-32 of ZIP and zlib (polynomial 0xEDB88320 reflected, init and final
// xor 0xFFFFFFFF; check value Crc32("123456789") = 0xCBF43926), continuing from `crc`
// (0 for a fresh start).
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

// ZipEntry: one stored member of an archive.
struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // of the first data byte, from the archive's start
  uint64_t size = 0;         // bytes (compressed size = uncompressed size: STORED)
  uint32_t crc32 = 0;        // as recorded in the central directory
};

// ZipReader: the central directory of an archive held in memory (not owned; must outlive
// the reader). Entries are checked on Open: every entry STORED, not encrypted, its local
// header present with the same name, its data inside the archive.
class ZipReader {
 public:
  // Open: parses the end-of-central-directory record (zip64 when present), the central
  // directory and each local header. DataLoss naming `path` (the file name for messages)
  // and what is wrong: "not a zip archive", "truncated" (a record or an entry's data past
  // the end), a compressed or encrypted entry (with its name and method), duplicate names.
  static absl::StatusOr<ZipReader> Open(const char* data, uint64_t size, std::string path);

  // entries: in central-directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // Find: the entry named `name`, or nullptr.
  const ZipEntry* Find(absl::string_view name) const;
  // Data: the entry's bytes (a view into the archive).
  absl::string_view Data(const ZipEntry& e) const {
    return absl::string_view(data_ + e.data_offset, e.size);
  }
  // VerifyCrc: DataLoss naming the archive and entry if the data's CRC-32 differs from
  // the recorded one.
  absl::Status VerifyCrc(const ZipEntry& e) const;
  const std::string& path() const { return path_; }

 private:
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// ZipWriter: writes an archive sequentially to a new file (DurableFile: O_EXCL, fsynced
// on Finish). Each entry's data starts at a multiple of 64 bytes; zip64 extra fields are
// written for sizes or offsets past 0xFFFFFFFF and a zip64 end record when needed.
class ZipWriter {
 public:
  // Create: the file must not exist. The file system's error naming the path otherwise.
  static absl::StatusOr<ZipWriter> Create(const std::string& path);
  ZipWriter(ZipWriter&&) noexcept;
  ZipWriter& operator=(ZipWriter&&) noexcept;
  ~ZipWriter();

  // Add: one STORED entry `name` holding the concatenation of `pieces` (written as given,
  // no copy). InvalidArgument for an empty or duplicate name; FailedPrecondition after
  // Finish; the file system's error otherwise.
  absl::Status Add(const std::string& name, const std::vector<absl::string_view>& pieces);
  absl::Status Add(const std::string& name, absl::string_view data) {
    return Add(name, std::vector<absl::string_view>{data});
  }
  // Finish: writes the central directory and end records, fsyncs and closes the file.
  absl::Status Finish();

 private:
  struct State;
  explicit ZipWriter(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_ZIP_ARCHIVE_H_
