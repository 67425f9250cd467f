// data/internal/pretokenizer.h: GPT-2's pre-tokenizer regex, by hand, over UTF-8.
//
// openai/gpt-2 src/encoder.py (and Megatron-LM's gpt2_tokenization.py) split text
// into words with `regex.findall` of
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// before byte-pair encoding each word separately. Every position of any string is
// matched by one of the alternatives, so the words tile the text. Gpt2WordSplitter
// reproduces the leftmost-alternative, greedy-with-backtracking semantics of that
// pattern exactly (see Next() in the .cc for the case analysis).
//
// Bytes that are not well-formed UTF-8 (Python strings cannot hold them) are each
// treated as one character of class kOther, i.e. like punctuation: they join runs
// of [^\s\p{L}\p{N}], may take one leading space, and never split or merge letters.
#ifndef MXMACA_DATA_INTERNAL_PRETOKENIZER_H_
#define MXMACA_DATA_INTERNAL_PRETOKENIZER_H_

#include <cstddef>
#include <string_view>

#include "data/internal/unicode_classes.h"

namespace mxmaca::data::internal {

// Gpt2WordSplitter: iterates over the words of `text` (which must outlive it).
//   Gpt2WordSplitter splitter(text);
//   for (std::string_view word; splitter.Next(&word);) { ... }
// Words are non-empty, contiguous and cover `text` exactly.
class Gpt2WordSplitter {
 public:
  explicit Gpt2WordSplitter(std::string_view text)
      : begin_(reinterpret_cast<const unsigned char*>(text.data())),
        end_(begin_ + text.size()),
        pos_(begin_) {}

  // Next: stores the next word in *word and returns true, or returns false at the
  // end of the text.
  bool Next(std::string_view* word);

 private:
  const unsigned char* const begin_;
  const unsigned char* const end_;
  const unsigned char* pos_;
};

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_PRETOKENIZER_H_
