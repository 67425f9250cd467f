// actors/checkpoint/megatron/torch_file.h: files in torch.save's zip format
// (torch/serialization.py _save / _load, PyTorch >= 1.6): a zip archive with
//   <archive>/data.pkl      the pickled object (protocol 2; tensors as persistent ids)
//   <archive>/data/<key>    one entry per storage: numel elements, little-endian
//   <archive>/version       "3\n"
//   <archive>/byteorder     "little" (PyTorch >= 2.1 writes it; we write it too)
// <archive> is the file name without its extension for PyTorch 1.13 ("model_optim_rng");
// any single top-level folder is accepted on read.
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_TORCH_FILE_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_TORCH_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "actors/checkpoint/megatron/pickle_value.h"
#include "actors/checkpoint/megatron/zip_archive.h"

namespace mxmaca::actors::checkpoint { class MappedFile; }

namespace mxmaca::actors::checkpoint::megatron {

// TorchFile: an opened torch.save file: the unpickled object and its storages, mapped.
// Move-only; the mapping lives as long as the object.
class TorchFile {
 public:
  // Open: maps `path`, reads the zip directory, checks the version record (1 to 3) and a
  // byteorder record if present ("little"), unpickles data.pkl with the restricted
  // unpickler, and checks that every storage the pickle names is an entry holding at
  // least numel x element-size bytes. Errors name `path` (and the key): DataLoss for a
  // truncated or malformed archive or pickle, "storage <key> too short"; InvalidArgument
  // for a class outside the unpickler's allow-list; the file system's error otherwise.
  static absl::StatusOr<TorchFile> Open(const std::string& path);
  TorchFile(TorchFile&&) noexcept;
  TorchFile& operator=(TorchFile&&) noexcept;
  ~TorchFile();

  const PyValue& root() const { return *root_; }
  PyRef root_ref() const { return root_; }
  const std::string& path() const { return path_; }
  const ZipReader& zip() const { return *zip_; }

  // StorageBytes: the bytes of `storage` (numel x element size).
  absl::string_view StorageBytes(const TorchStorage& storage) const;

  // ReadFloat: the elements of `t` in C order over t.size, converted to fp32 (from fp32,
  // bf16, fp16, fp64 exactly or by rounding to nearest; integer types by value).
  // `what` names the tensor (its key) in errors.
  absl::StatusOr<std::vector<float>> ReadFloat(const TorchTensor& t, const std::string& what) const;

  // VerifyCrcs: checks the CRC-32 of every entry (DataLoss naming the entry).
  absl::Status VerifyCrcs() const;

 private:
  TorchFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::unique_ptr<ZipReader> zip_;
  std::string prefix_;  // "<archive>/"
  PyRef root_;
};

// TorchFileWriter: builds a torch.save file. Tensors are added first (their data is
// referenced, not copied: it must stay alive until Write returns), then Write pickles a
// root that refers to them.
class TorchFileWriter {
 public:
  // AddTensor: a contiguous tensor of `shape` with `dtype` elements at `data`
  // (prod(shape) x ElementSize(dtype) bytes); returns the tensor value to place in the
  // tree (its own storage, key "0", "1", ... in order of addition).
  PyRef AddTensor(ScalarType dtype, std::vector<int64_t> shape, const void* data);
  // AddOwnedTensor: the same, the writer keeping `bytes` alive.
  PyRef AddOwnedTensor(ScalarType dtype, std::vector<int64_t> shape, std::string bytes);

  // Write: creates `path` (must not exist; written completely, then fsynced) holding
  // `root`: <archive>/data.pkl, <archive>/byteorder, <archive>/data/<key>...,
  // <archive>/version, <archive> = the file name without extension; every storage entry
  // 64-byte aligned. Errors: the pickler's and the file system's, naming `path`.
  absl::Status Write(const std::string& path, const PyValue& root) const;

 private:
  struct Storage {
    std::string key;
    absl::string_view bytes;
  };
  std::vector<Storage> storages_;
  std::vector<std::unique_ptr<std::string>> owned_;
};

// BFloat16FromFloat: round-to-nearest-even fp32 -> bf16 bits (as torch's .to(bfloat16)).
uint16_t BFloat16FromFloat(float f);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_TORCH_FILE_H_
