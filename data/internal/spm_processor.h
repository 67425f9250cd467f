// data/internal/spm_processor.h: a narrow wrapper of SentencePiece's
// SentencePieceProcessor (Debian libsentencepiece-dev 0.1.97).
//
// Why a wrapper: sentencepiece_processor.h declares `namespace absl { using
// std::string_view; }`, which clashes with Debian's Abseil (its absl::string_view is
// its own class). This file and its .cc include no Abseil header, so the two never
// meet in one translation unit. Errors are plain strings here; callers turn them into
// absl::Status.
#ifndef MXMACA_DATA_INTERNAL_SPM_PROCESSOR_H_
#define MXMACA_DATA_INTERNAL_SPM_PROCESSOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mxmaca::data::internal {

// SpmProcessor: immutable after Load; Encode/Decode are const and thread-safe (as
// SentencePieceProcessor's are).
class SpmProcessor {
 public:
  // Load: reads a SentencePiece model (.model, a serialized ModelProto). Returns null
  // and sets *error to SentencePiece's message when the file cannot be read or parsed.
  static std::unique_ptr<SpmProcessor> Load(const std::string& model_file, std::string* error);
  ~SpmProcessor();

  // Encode: SentencePiece's `encode_as_ids(text)` (its normalizer, add_dummy_prefix,
  // BPE or unigram, byte fallback as the model says).
  std::vector<int> Encode(std::string_view text) const;

  // Decode: SentencePiece's `decode_ids(ids)`; every id must be in [0, piece_size()).
  // Returns false and sets *error on failure.
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;

  // piece_size: number of pieces (`len(sp)`); IdToPiece: piece `id` in [0, piece_size()).
  int piece_size() const;
  std::string IdToPiece(int id) const;
  // bos_id / eos_id / pad_id / unk_id: as SentencePiece reports them (-1 = none).
  int bos_id() const;
  int eos_id() const;
  int pad_id() const;
  int unk_id() const;

 private:
  SpmProcessor();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_SPM_PROCESSOR_H_
