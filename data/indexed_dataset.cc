// data/indexed_dataset.cc: Megatron indexed dataset writer and mmap reader.
#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .idx/.bin format is little-endian; this reader copies raw bytes");

namespace mxmaca::data {
namespace {

// _INDEX_HEADER in indexed_dataset.py.
constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kMagicSize = 9;
constexpr int64_t kVersionOffset = 9;
constexpr int64_t kDTypeOffset = 17;
constexpr int64_t kSequenceCountOffset = 18;
constexpr int64_t kDocumentCountOffset = 26;
constexpr int64_t kHeaderSize = 34;  // magic 9 + version 8 + dtype 1 + N 8 + D 8
constexpr size_t kWriteBufferBytes = 1 << 20;

absl::Status ErrnoStatus(const std::string& what, const std::string& path) {
  const int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

template <typename T>
T LoadUnaligned(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Maps `path` read-only. Sets *data (nullptr for an empty file) and *size.
absl::Status MapFile(const std::string& path, const uint8_t** data, int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status status = ErrnoStatus("cannot stat", path);
    ::close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  *size = static_cast<int64_t>(st.st_size);
  *data = nullptr;
  if (*size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(*size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      absl::Status status = ErrnoStatus("cannot mmap", path);
      ::close(fd);
      return status;
    }
    *data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid
  return absl::OkStatus();
}

void Unmap(const uint8_t* data, int64_t size) {
  if (data != nullptr) ::munmap(const_cast<uint8_t*>(data), static_cast<size_t>(size));
}

template <typename T>
bool FitsInto(int32_t value) {
  return value >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         value <= static_cast<int64_t>(std::numeric_limits<T>::max());
}

// Converts `tokens` to T into `out`; returns the index of the first token that does
// not fit, or -1.
template <typename T>
int64_t ConvertTokens(absl::Span<const int32_t> tokens, std::vector<char>* out) {
  out->resize(tokens.size() * sizeof(T));
  T* dst = reinterpret_cast<T*>(out->data());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!FitsInto<T>(tokens[i])) return static_cast<int64_t>(i);
    dst[i] = static_cast<T>(tokens[i]);
  }
  return -1;
}

std::string UniqueSuffix() {
  static std::atomic<int64_t> counter{0};
  return absl::StrCat(".tmp.", ::getpid(), ".", counter.fetch_add(1));
}

}  // namespace

bool IsValidDTypeCode(uint8_t code) { return code >= 1 && code <= 8; }

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kUint16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;  // unreachable for valid codes
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUint8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat64: return "float64";
    case DType::kFloat32: return "float32";
    case DType::kUint16: return "uint16";
  }
  return "invalid";
}

DType DTypeForVocab(int64_t vocab_size) {
  return vocab_size < 65500 ? DType::kUint16 : DType::kInt32;
}

std::string IndexPath(const std::string& prefix) { return prefix + ".idx"; }
std::string BinPath(const std::string& prefix) { return prefix + ".bin"; }

// ---------------------------------------------------------------------------------
// IndexedDatasetBuilder

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string prefix, DType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype), document_indices_{0} {}

absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> IndexedDatasetBuilder::Create(
    const std::string& prefix, DType dtype) {
  if (!IsValidDTypeCode(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dtype code ", static_cast<int>(dtype), " for ", prefix));
  }
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IndexedDatasetBuilder writes integer tokens; dtype ", DTypeName(dtype),
        " requested for ", prefix));
  }
  std::unique_ptr<IndexedDatasetBuilder> builder(new IndexedDatasetBuilder(prefix, dtype));
  const std::string suffix = UniqueSuffix();
  builder->bin_tmp_path_ = BinPath(prefix) + suffix;
  builder->idx_tmp_path_ = IndexPath(prefix) + suffix;
  builder->bin_file_ = std::fopen(builder->bin_tmp_path_.c_str(), "wb");
  if (builder->bin_file_ == nullptr) {
    return ErrnoStatus("cannot create", builder->bin_tmp_path_);
  }
  std::setvbuf(builder->bin_file_, nullptr, _IOFBF, kWriteBufferBytes);
  return builder;
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (!finalized_) RemoveTemporaries();
}

void IndexedDatasetBuilder::RemoveTemporaries() {
  if (bin_file_ != nullptr) {
    std::fclose(bin_file_);
    bin_file_ = nullptr;
  }
  ::unlink(bin_tmp_path_.c_str());
  ::unlink(idx_tmp_path_.c_str());
}

absl::Status IndexedDatasetBuilder::WriteBin(const void* data, size_t size) {
  if (size == 0) return absl::OkStatus();
  if (std::fwrite(data, 1, size, bin_file_) != size) {
    return ErrnoStatus("cannot write", bin_tmp_path_);
  }
  bin_bytes_ += static_cast<int64_t>(size);
  return absl::OkStatus();
}

absl::Status IndexedDatasetBuilder::AddItem(absl::Span<const int32_t> tokens) {
  if (finalized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("AddItem after Finalize for ", prefix_));
  }
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence of ", tokens.size(), " tokens exceeds the int32 length field of ",
        IndexPath(prefix_)));
  }
  int64_t bad = -1;
  switch (dtype_) {
    case DType::kUint8: bad = ConvertTokens<uint8_t>(tokens, &convert_buffer_); break;
    case DType::kInt8: bad = ConvertTokens<int8_t>(tokens, &convert_buffer_); break;
    case DType::kInt16: bad = ConvertTokens<int16_t>(tokens, &convert_buffer_); break;
    case DType::kUint16: bad = ConvertTokens<uint16_t>(tokens, &convert_buffer_); break;
    case DType::kInt32: bad = ConvertTokens<int32_t>(tokens, &convert_buffer_); break;
    case DType::kInt64: bad = ConvertTokens<int64_t>(tokens, &convert_buffer_); break;
    case DType::kFloat32:
    case DType::kFloat64:
      return absl::InternalError("float dtype in builder");  // rejected by Create
  }
  if (bad >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token ", tokens[bad], " at position ", bad, " of sequence ",
        sequence_lengths_.size(), " does not fit dtype ", DTypeName(dtype_), " of ",
        BinPath(prefix_)));
  }
  MXMACA_RETURN_IF_ERROR(WriteBin(convert_buffer_.data(), convert_buffer_.size()));
  sequence_lengths_.push_back(static_cast<int32_t>(tokens.size()));
  return absl::OkStatus();
}

void IndexedDatasetBuilder::EndDocument() {
  document_indices_.push_back(static_cast<int64_t>(sequence_lengths_.size()));
}

absl::Status IndexedDatasetBuilder::AddDocument(absl::Span<const int32_t> tokens,
                                                absl::Span<const int32_t> lengths) {
  int64_t total = 0;
  for (int32_t length : lengths) {
    if (length < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative sequence length ", length, " for ", prefix_));
    }
    total += length;
  }
  if (total != static_cast<int64_t>(tokens.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence lengths sum to ", total, " but the document has ", tokens.size(),
        " tokens (", prefix_, ")"));
  }
  size_t begin = 0;
  for (int32_t length : lengths) {
    MXMACA_RETURN_IF_ERROR(AddItem(tokens.subspan(begin, static_cast<size_t>(length))));
    begin += static_cast<size_t>(length);
  }
  EndDocument();
  return absl::OkStatus();
}

absl::Status IndexedDatasetBuilder::AddIndex(const std::string& other_prefix) {
  if (finalized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("AddIndex after Finalize for ", prefix_));
  }
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> other,
                          IndexedDataset::Open(other_prefix));
  if (other->dtype() != dtype_) {
    return absl::InvalidArgumentError(absl::StrCat(
        IndexPath(other_prefix), " has dtype ", DTypeName(other->dtype()),
        ", expected ", DTypeName(dtype_), " to merge into ", prefix_));
  }
  // Megatron recomputes the merged pointers from the lengths, so the other .bin must be
  // exactly its sequences, back to back.
  const int64_t item = DTypeSize(dtype_);
  int64_t expected_pointer = 0;
  for (int64_t i = 0; i < other->num_sequences(); ++i) {
    if (other->sequence_pointer(i) != expected_pointer) {
      return absl::InvalidArgumentError(absl::StrCat(
          IndexPath(other_prefix), ": sequence ", i, " starts at .bin byte ",
          other->sequence_pointer(i), ", expected ", expected_pointer,
          " (sequences must be contiguous to merge)"));
    }
    expected_pointer += static_cast<int64_t>(other->sequence_length(i)) * item;
  }
  if (expected_pointer != other->bin_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        BinPath(other_prefix), " has ", other->bin_size(), " bytes, but its sequences cover ",
        expected_pointer, " (cannot merge)"));
  }
  const int64_t offset = num_sequences();
  sequence_lengths_.reserve(sequence_lengths_.size() + other->num_sequences());
  for (int64_t i = 0; i < other->num_sequences(); ++i) {
    sequence_lengths_.push_back(other->sequence_length(i));
  }
  for (int64_t i = 1; i <= other->num_documents(); ++i) {
    document_indices_.push_back(offset + other->document_index(i));
  }
  return WriteBin(other->bin_data(), static_cast<size_t>(other->bin_size()));
}

absl::Status IndexedDatasetBuilder::WriteIndexFile(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus("cannot create", path);
  std::setvbuf(f, nullptr, _IOFBF, kWriteBufferBytes);
  bool ok = true;
  auto put = [&](const void* data, size_t size) {
    if (ok && size > 0 && std::fwrite(data, 1, size, f) != size) ok = false;
  };
  const uint64_t version = 1;
  const uint8_t code = static_cast<uint8_t>(dtype_);
  const uint64_t sequence_count = sequence_lengths_.size();
  const uint64_t document_count = document_indices_.size();
  put(kMagic, kMagicSize);
  put(&version, sizeof(version));
  put(&code, sizeof(code));
  put(&sequence_count, sizeof(sequence_count));
  put(&document_count, sizeof(document_count));
  put(sequence_lengths_.data(), sequence_lengths_.size() * sizeof(int32_t));
  // _IndexWriter._sequence_pointers: running int64 sum of length * itemsize.
  const int64_t item = DTypeSize(dtype_);
  constexpr size_t kChunk = 1 << 16;
  std::vector<int64_t> pointers;
  pointers.reserve(std::min(kChunk, sequence_lengths_.size()));
  int64_t pointer = 0;
  for (int32_t length : sequence_lengths_) {
    pointers.push_back(pointer);
    pointer += static_cast<int64_t>(length) * item;
    if (pointers.size() == kChunk) {
      put(pointers.data(), pointers.size() * sizeof(int64_t));
      pointers.clear();
    }
  }
  put(pointers.data(), pointers.size() * sizeof(int64_t));
  put(document_indices_.data(), document_indices_.size() * sizeof(int64_t));
  if (!ok) {
    absl::Status status = ErrnoStatus("cannot write", path);
    std::fclose(f);
    return status;
  }
  if (std::fclose(f) != 0) return ErrnoStatus("cannot close", path);
  return absl::OkStatus();
}

absl::Status IndexedDatasetBuilder::Finalize() {
  if (finalized_) {
    return absl::FailedPreconditionError(absl::StrCat("Finalize called twice for ", prefix_));
  }
  if (std::fclose(bin_file_) != 0) {
    bin_file_ = nullptr;
    return ErrnoStatus("cannot close", bin_tmp_path_);
  }
  bin_file_ = nullptr;
  MXMACA_RETURN_IF_ERROR(WriteIndexFile(idx_tmp_path_));
  if (std::rename(bin_tmp_path_.c_str(), BinPath(prefix_).c_str()) != 0) {
    return ErrnoStatus("cannot rename to", BinPath(prefix_));
  }
  if (std::rename(idx_tmp_path_.c_str(), IndexPath(prefix_).c_str()) != 0) {
    return ErrnoStatus("cannot rename to", IndexPath(prefix_));
  }
  finalized_ = true;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------
// IndexedDataset

IndexedDataset::~IndexedDataset() {
  Unmap(idx_data_, idx_size_);
  Unmap(bin_data_, bin_size_);
}

absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(
    const std::string& prefix) {
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  ds->idx_path_ = IndexPath(prefix);
  ds->bin_path_ = BinPath(prefix);
  MXMACA_RETURN_IF_ERROR(MapFile(ds->idx_path_, &ds->idx_data_, &ds->idx_size_));
  const std::string& path = ds->idx_path_;
  const uint8_t* p = ds->idx_data_;
  const int64_t size = ds->idx_size_;
  if (size < kHeaderSize) {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated header: file has ", size, " bytes, the header needs ",
        kHeaderSize));
  }
  if (std::memcmp(p, kMagic, kMagicSize) != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": bad magic at byte 0: expected \"MMIDIDX\\0\\0\" (a Megatron mmap "
        "indexed dataset index)"));
  }
  const uint64_t version = LoadUnaligned<uint64_t>(p + kVersionOffset);
  if (version != 1) {
    return absl::DataLossError(absl::StrCat(path, ": version ", version, " at byte ",
                                            kVersionOffset, ", expected 1"));
  }
  const uint8_t code = p[kDTypeOffset];
  if (!IsValidDTypeCode(code)) {
    return absl::DataLossError(absl::StrCat(path, ": unknown dtype code ",
                                            static_cast<int>(code), " at byte ",
                                            kDTypeOffset, ", expected 1..8"));
  }
  ds->dtype_ = static_cast<DType>(code);
  const uint64_t n = LoadUnaligned<uint64_t>(p + kSequenceCountOffset);
  const uint64_t d = LoadUnaligned<uint64_t>(p + kDocumentCountOffset);
  const uint64_t remaining = static_cast<uint64_t>(size - kHeaderSize);
  // 12 bytes per sequence (int32 length + int64 pointer), 8 per document index.
  if (n > remaining / 12 || d > (remaining - 12 * n) / 8) {
    const unsigned __int128 needed =
        static_cast<unsigned __int128>(n) * 12 + static_cast<unsigned __int128>(d) * 8;
    const std::string needed_str =
        needed > std::numeric_limits<uint64_t>::max()
            ? std::string("more than 2^64")
            : absl::StrCat(static_cast<uint64_t>(needed));
    return absl::DataLossError(absl::StrCat(
        path, ": truncated: the header (bytes 18..33) says ", n, " sequences and ", d,
        " document indices, which need ", needed_str, " bytes after byte ", kHeaderSize,
        ", but the file has ", remaining));
  }
  if (d == 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": document index count 0 at byte ", kDocumentCountOffset,
        ", expected at least 1 (the leading 0)"));
  }
  const uint64_t trailing = remaining - 12 * n - 8 * d;
  ds->num_sequences_ = static_cast<int64_t>(n);
  ds->num_document_indices_ = static_cast<int64_t>(d);
  ds->lengths_offset_ = kHeaderSize;
  ds->pointers_offset_ = kHeaderSize + 4 * ds->num_sequences_;
  ds->doc_indices_offset_ = ds->pointers_offset_ + 8 * ds->num_sequences_;
  ds->modes_offset_ = ds->doc_indices_offset_ + 8 * ds->num_document_indices_;
  if (trailing != 0) {
    if (trailing != n) {
      return absl::DataLossError(absl::StrCat(
          path, ": ", trailing, " unexpected bytes after the document indices at byte ",
          ds->modes_offset_, ", expected 0 (or ", n, " for multimodal modes)"));
    }
    ds->has_modes_ = true;
  }
  MXMACA_RETURN_IF_ERROR(MapFile(ds->bin_path_, &ds->bin_data_, &ds->bin_size_));
  MXMACA_RETURN_IF_ERROR(ds->Validate());
  return ds;
}

absl::Status IndexedDataset::Validate() const {
  const int64_t n = num_sequences_;
  const int64_t item = DTypeSize(dtype_);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t length = sequence_length(i);
    const int64_t pointer = sequence_pointer(i);
    if (length < 0) {
      return absl::DataLossError(absl::StrCat(idx_path_, ": sequence ", i, " has length ",
                                              length, " at byte ", lengths_offset_ + 4 * i,
                                              ", expected >= 0"));
    }
    if (pointer < 0 || pointer % item != 0) {
      return absl::DataLossError(absl::StrCat(
          idx_path_, ": sequence ", i, " has pointer ", pointer, " at byte ",
          pointers_offset_ + 8 * i, ", expected a non-negative multiple of ", item,
          " (dtype ", DTypeName(dtype_), ")"));
    }
    if (pointer > bin_size_ || static_cast<int64_t>(length) * item > bin_size_ - pointer) {
      return absl::DataLossError(absl::StrCat(
          idx_path_, ": sequence ", i, " (pointer ", pointer, " at byte ",
          pointers_offset_ + 8 * i, ", length ", length, " at byte ",
          lengths_offset_ + 4 * i, ") ends at byte ",
          pointer + static_cast<int64_t>(length) * item, ", past the end of ", bin_path_,
          " (", bin_size_, " bytes)"));
    }
  }
  int64_t previous = 0;
  for (int64_t i = 0; i < num_document_indices_; ++i) {
    const int64_t index = document_index(i);
    const int64_t at = doc_indices_offset_ + 8 * i;
    if (i == 0 && index != 0) {
      return absl::DataLossError(absl::StrCat(idx_path_, ": document index 0 is ", index,
                                              " at byte ", at, ", expected 0"));
    }
    if (index < previous) {
      return absl::DataLossError(absl::StrCat(
          idx_path_, ": document index ", i, " is ", index, " at byte ", at,
          ", expected >= the previous one (", previous, ")"));
    }
    previous = index;
  }
  if (previous != n) {
    return absl::DataLossError(absl::StrCat(
        idx_path_, ": the last document index is ", previous, " at byte ",
        doc_indices_offset_ + 8 * (num_document_indices_ - 1), ", expected ", n,
        " (the sequence count)"));
  }
  return absl::OkStatus();
}

int32_t IndexedDataset::sequence_length(int64_t i) const {
  if (i < 0 || i >= num_sequences_) std::abort();
  return LoadUnaligned<int32_t>(idx_data_ + lengths_offset_ + 4 * i);
}

int64_t IndexedDataset::sequence_pointer(int64_t i) const {
  if (i < 0 || i >= num_sequences_) std::abort();
  return LoadUnaligned<int64_t>(idx_data_ + pointers_offset_ + 8 * i);
}

int64_t IndexedDataset::document_index(int64_t i) const {
  if (i < 0 || i >= num_document_indices_) std::abort();
  return LoadUnaligned<int64_t>(idx_data_ + doc_indices_offset_ + 8 * i);
}

int8_t IndexedDataset::sequence_mode(int64_t i) const {
  if (i < 0 || i >= num_sequences_) std::abort();
  if (!has_modes_) return 0;
  return static_cast<int8_t>(idx_data_[modes_offset_ + i]);
}

std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<int32_t> out(num_sequences_);
  if (!out.empty()) std::memcpy(out.data(), idx_data_ + lengths_offset_, 4 * out.size());
  return out;
}

std::vector<int64_t> IndexedDataset::sequence_pointers() const {
  std::vector<int64_t> out(num_sequences_);
  if (!out.empty()) std::memcpy(out.data(), idx_data_ + pointers_offset_, 8 * out.size());
  return out;
}

std::vector<int64_t> IndexedDataset::document_indices() const {
  std::vector<int64_t> out(num_document_indices_);
  std::memcpy(out.data(), idx_data_ + doc_indices_offset_, 8 * out.size());
  return out;
}

const void* IndexedDataset::SequenceData(int64_t seq_index) const {
  if (bin_data_ == nullptr) return nullptr;  // empty .bin: all sequences are empty
  return bin_data_ + sequence_pointer(seq_index);
}

absl::Status IndexedDataset::GetInto(int64_t seq_index, int64_t offset,
                                     absl::Span<int32_t> out) const {
  if (seq_index < 0 || seq_index >= num_sequences_) {
    return absl::OutOfRangeError(absl::StrCat("sequence index ", seq_index,
                                              " outside [0, ", num_sequences_, ") of ",
                                              idx_path_));
  }
  const int64_t sequence_length = this->sequence_length(seq_index);
  const int64_t length = static_cast<int64_t>(out.size());
  if (offset < 0 || offset > sequence_length || length > sequence_length - offset) {
    return absl::OutOfRangeError(absl::StrCat(
        "tokens [", offset, ", ", offset, " + ", length, ") outside sequence ", seq_index,
        " of length ", sequence_length, " in ", idx_path_));
  }
  if (length == 0) return absl::OkStatus();
  const uint8_t* src = bin_data_ + sequence_pointer(seq_index) + offset * DTypeSize(dtype_);
  int32_t* dst = out.data();
  switch (dtype_) {
    case DType::kUint8:
      for (int64_t i = 0; i < length; ++i) dst[i] = src[i];
      break;
    case DType::kInt8:
      for (int64_t i = 0; i < length; ++i) dst[i] = static_cast<int8_t>(src[i]);
      break;
    case DType::kInt16: {
      const int16_t* s = reinterpret_cast<const int16_t*>(src);
      for (int64_t i = 0; i < length; ++i) dst[i] = s[i];
      break;
    }
    case DType::kUint16: {
      const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < length; ++i) dst[i] = s[i];
      break;
    }
    case DType::kInt32:
      std::memcpy(dst, src, 4 * length);
      break;
    case DType::kInt64: {
      const int64_t* s = reinterpret_cast<const int64_t*>(src);
      for (int64_t i = 0; i < length; ++i) {
        if (s[i] < std::numeric_limits<int32_t>::min() ||
            s[i] > std::numeric_limits<int32_t>::max()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "token ", s[i], " at ", bin_path_, " byte ",
              sequence_pointer(seq_index) + 8 * (offset + i), " does not fit int32"));
        }
        dst[i] = static_cast<int32_t>(s[i]);
      }
      break;
    }
    case DType::kFloat32:
    case DType::kFloat64:
      return absl::InvalidArgumentError(absl::StrCat(
          idx_path_, " holds ", DTypeName(dtype_),
          " values, not tokens; use SequenceData() for raw access"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> IndexedDataset::Get(int64_t seq_index, int64_t offset,
                                                         int64_t length) const {
  if (seq_index < 0 || seq_index >= num_sequences_) {
    return absl::OutOfRangeError(absl::StrCat("sequence index ", seq_index,
                                              " outside [0, ", num_sequences_, ") of ",
                                              idx_path_));
  }
  if (length < 0) {
    const int64_t sequence_length = this->sequence_length(seq_index);
    if (offset < 0 || offset > sequence_length) {
      return absl::OutOfRangeError(absl::StrCat("offset ", offset, " outside sequence ",
                                                seq_index, " of length ", sequence_length,
                                                " in ", idx_path_));
    }
    length = sequence_length - offset;
  }
  const int64_t sequence_length = this->sequence_length(seq_index);
  if (offset < 0 || offset > sequence_length || length > sequence_length - offset) {
    return absl::OutOfRangeError(absl::StrCat(
        "tokens [", offset, ", ", offset, " + ", length, ") outside sequence ", seq_index,
        " of length ", sequence_length, " in ", idx_path_));
  }
  std::vector<int32_t> out(static_cast<size_t>(length));
  MXMACA_RETURN_IF_ERROR(GetInto(seq_index, offset, absl::MakeSpan(out)));
  return out;
}

}  // namespace mxmaca::data
