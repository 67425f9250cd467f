// data/indexed_dataset.h: Megatron-Core's indexed dataset (.bin/.idx), writer and
// mmap reader, byte-identical to megatron/core/datasets/indexed_dataset.py
// (core_v0.15.0: IndexedDatasetBuilder, _IndexWriter, _IndexReader, IndexedDataset).
//
// File format (all little-endian; see docs/MEGATRON_FORMATS.md):
//   {prefix}.idx: 9-byte magic "MMIDIDX\0\0"; u64 version = 1; u8 dtype code;
//                 u64 N (sequence count); u64 D (document-index count = documents + 1);
//                 int32 sequence_lengths[N] (tokens); int64 sequence_pointers[N]
//                 (byte offsets into .bin); int64 document_indices[D] (starts at 0, ends
//                 at N, non-decreasing; an empty document repeats the previous value);
//                 for multimodal data only, int8 sequence_modes[N].
//   {prefix}.bin: the tokens of all sequences, raw, in the dtype of the .idx, no header.
// Offsets inside the .idx are not aligned (the arrays start at byte 34), so the reader
// loads index entries with memcpy; tokens in .bin are aligned to their dtype.
// Every size and offset is 64-bit: files over 2^31 bytes and 2^31 tokens work.
#ifndef MXMACA_DATA_INDEXED_DATASET_H_
#define MXMACA_DATA_INDEXED_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mxmaca::data {

// DType: Megatron's numeric code for the token type of a dataset (indexed_dataset.py
// `DType`). The values are the on-disk codes.
enum class DType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

// IsValidDTypeCode: whether `code` is one of the 8 codes above.
bool IsValidDTypeCode(uint8_t code);

// DTypeSize: bytes per element of `dtype` (1, 2, 4 or 8).
int64_t DTypeSize(DType dtype);

// DTypeName: numpy's name of `dtype` ("uint16", "int32", ...).
const char* DTypeName(DType dtype);

// DTypeForVocab: the token dtype Megatron picks for a vocabulary of `vocab_size`
// entries (DType.optimal_dtype): uint16 if vocab_size < 65500, else int32.
DType DTypeForVocab(int64_t vocab_size);

// IndexPath / BinPath: "{prefix}.idx" and "{prefix}.bin" (get_idx_path, get_bin_path).
std::string IndexPath(const std::string& prefix);
std::string BinPath(const std::string& prefix);

// IndexedDatasetBuilder: writes one dataset, Megatron's IndexedDatasetBuilder +
// _IndexWriter. Tokens stream to a temporary .bin as they are added (only the
// per-sequence lengths and the document indices stay in memory); Finalize() writes the
// .idx to a temporary file and renames both into place, so readers never see a
// half-written dataset. A builder destroyed without Finalize() removes its temporary
// files. Not thread-safe; one writer per builder.
//
// Differences from Megatron, all on inputs Megatron would corrupt silently:
//   - a token that does not fit the dtype is an error (numpy would wrap it);
//   - AddIndex() rejects a dataset of another dtype, and one whose .bin is not exactly
//     the bytes its index describes (the merged pointers would be wrong).
// Only integer dtypes can be written (Megatron's tools write uint16 or int32 only).
class IndexedDatasetBuilder {
 public:
  // Create: starts a dataset at `prefix` (files {prefix}.bin and {prefix}.idx appear at
  // Finalize). Errors: InvalidArgument for a float dtype; the OS error (with the path)
  // if the temporary .bin cannot be created.
  static absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> Create(
      const std::string& prefix, DType dtype);

  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // AddItem: appends one sequence of `tokens` [len] (Megatron add_item). The sequence
  // belongs to the current document, which EndDocument() closes. Errors:
  // InvalidArgument if a token is outside the dtype's range (nothing is written then);
  // the OS error on a failed write; FailedPrecondition after Finalize().
  absl::Status AddItem(absl::Span<const int32_t> tokens);

  // EndDocument: closes the current document: appends the number of sequences so far to
  // the document indices (Megatron end_document). With no AddItem() since the last
  // document this records an empty document.
  void EndDocument();

  // AddDocument: AddItem() for each of the `lengths` [k] consecutive slices of `tokens`
  // [sum(lengths)], then EndDocument() (Megatron add_document). Empty `lengths` records
  // an empty document. Errors: as AddItem(); InvalidArgument if the lengths are negative
  // or do not sum to tokens.size().
  absl::Status AddDocument(absl::Span<const int32_t> tokens,
                           absl::Span<const int32_t> lengths);

  // AddIndex: appends a whole existing dataset at `other_prefix` (Megatron add_index):
  // its sequences and documents follow the ones added so far, its .bin bytes are copied
  // after ours and its pointers are recomputed. Errors: those of IndexedDataset::Open;
  // InvalidArgument if its dtype differs from ours or its .bin has bytes that no
  // sequence covers; the OS error of a failed copy.
  absl::Status AddIndex(const std::string& other_prefix);

  // Finalize: flushes the .bin, writes the .idx and renames both into place. Documents
  // not closed by EndDocument() are not recorded (as in Megatron). Errors: the OS error
  // of a failed write or rename; FailedPrecondition if called twice.
  absl::Status Finalize();

  // num_sequences / num_documents: counts so far (documents = EndDocument calls plus
  // the documents of merged datasets).
  int64_t num_sequences() const { return static_cast<int64_t>(sequence_lengths_.size()); }
  int64_t num_documents() const {
    return static_cast<int64_t>(document_indices_.size()) - 1;
  }
  // bytes_written: size of the .bin so far.
  int64_t bytes_written() const { return bin_bytes_; }
  DType dtype() const { return dtype_; }

 private:
  IndexedDatasetBuilder(std::string prefix, DType dtype);
  absl::Status WriteBin(const void* data, size_t size);
  absl::Status WriteIndexFile(const std::string& path) const;
  void RemoveTemporaries();

  std::string prefix_;
  DType dtype_;
  std::string bin_tmp_path_;
  std::string idx_tmp_path_;
  std::FILE* bin_file_ = nullptr;
  bool finalized_ = false;
  int64_t bin_bytes_ = 0;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_;  // starts with 0
  std::vector<char> convert_buffer_;       // tokens converted to dtype_ before writing
};

// IndexedDataset: a read-only view of a dataset through mmap (Megatron IndexedDataset
// with mmap=True). Open() validates the whole index against the .bin, so every access
// afterwards is in bounds. Immutable after Open(); safe to read from many threads.
class IndexedDataset {
 public:
  // Open: maps {prefix}.idx and {prefix}.bin. Errors (each names the file, the byte
  // offset and what was expected): NotFound if a file is missing; DataLoss for a wrong
  // magic, version != 1, an unknown dtype code, an .idx shorter than its counts say or
  // with unexplained trailing bytes, document indices that do not start at 0, decrease
  // or do not end at N, negative lengths, pointers not a multiple of the dtype size, or
  // a sequence past the end of .bin. Trailing bytes of exactly N are read as the
  // multimodal modes array (has_sequence_modes()).
  static absl::StatusOr<std::unique_ptr<IndexedDataset>> Open(const std::string& prefix);

  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  // num_sequences: N, the number of sequences (Megatron len(dataset)).
  int64_t num_sequences() const { return num_sequences_; }
  // num_documents: D - 1.
  int64_t num_documents() const { return num_document_indices_ - 1; }
  DType dtype() const { return dtype_; }
  bool has_sequence_modes() const { return has_modes_; }
  // bin_size: bytes of the .bin file.
  int64_t bin_size() const { return bin_size_; }

  // sequence_length / sequence_pointer / document_index: entry i of the index arrays
  // (tokens; byte offset into .bin; sequence index). Preconditions (CHECKed): 0 <= i < N
  // (document_index: 0 <= i <= num_documents()).
  int32_t sequence_length(int64_t i) const;
  int64_t sequence_pointer(int64_t i) const;
  int64_t document_index(int64_t i) const;
  // sequence_mode: entry i of the multimodal modes (0 when there are none).
  int8_t sequence_mode(int64_t i) const;

  // sequence_lengths [N] int32 / sequence_pointers [N] int64 / document_indices [D]
  // int64: copies of the whole arrays (aligned, for bulk processing).
  std::vector<int32_t> sequence_lengths() const;
  std::vector<int64_t> sequence_pointers() const;
  std::vector<int64_t> document_indices() const;

  // Get: tokens [offset, offset + length) of sequence `seq_index`, widened to int32
  // (Megatron IndexedDataset.get; length < 0 means "to the end of the sequence").
  // Errors: OutOfRange for a bad index or range; InvalidArgument for a float dtype or
  // an int64 token outside int32.
  absl::StatusOr<std::vector<int32_t>> Get(int64_t seq_index, int64_t offset = 0,
                                           int64_t length = -1) const;
  // GetInto: as Get, writing `out.size()` tokens starting at `offset` into `out`.
  absl::Status GetInto(int64_t seq_index, int64_t offset, absl::Span<int32_t> out) const;

  // SequenceData: zero-copy pointer to the first token of sequence `seq_index` in the
  // mapped .bin (elements of dtype(); sequence_length() of them; aligned to the dtype
  // size). Valid while this object lives. Precondition (CHECKed): 0 <= seq_index < N.
  const void* SequenceData(int64_t seq_index) const;
  // bin_data: the whole mapped .bin (nullptr when it is empty).
  const uint8_t* bin_data() const { return bin_data_; }

 private:
  IndexedDataset() = default;
  absl::Status Validate() const;

  std::string idx_path_;
  std::string bin_path_;
  const uint8_t* idx_data_ = nullptr;
  int64_t idx_size_ = 0;
  const uint8_t* bin_data_ = nullptr;
  int64_t bin_size_ = 0;
  DType dtype_ = DType::kInt32;
  int64_t num_sequences_ = 0;
  int64_t num_document_indices_ = 0;
  bool has_modes_ = false;
  // Byte offsets of the arrays inside the .idx.
  int64_t lengths_offset_ = 0;
  int64_t pointers_offset_ = 0;
  int64_t doc_indices_offset_ = 0;
  int64_t modes_offset_ = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_INDEXED_DATASET_H_
