// data/internal/pretokenizer.cc: the GPT-2 pre-tokenizer as a hand-written scanner.
#include "data/internal/pretokenizer.h"

#include <array>

namespace mxmaca::data::internal {
namespace {

struct ClassedChar {
  CharClass char_class;
  int length;
};

// CharAt: class and byte length of the character at p (< end).
inline ClassedChar CharAt(const unsigned char* p, const unsigned char* end) {
  if (*p < 0x80) return {kAsciiClasses[*p], 1};
  const Utf8Char c = DecodeUtf8Char(p, end);
  if (!c.valid) return {CharClass::kOther, 1};
  return {ClassOfCodePoint(c.code_point), c.length};
}

// SkipRun: the end of the maximal run of characters of class `cls` starting at p.
inline const unsigned char* SkipRun(const unsigned char* p, const unsigned char* end,
                                    CharClass cls) {
  while (p < end) {
    if (*p < 0x80) {
      if (kAsciiClasses[*p] != cls) break;
      ++p;
      continue;
    }
    const ClassedChar c = CharAt(p, end);
    if (c.char_class != cls) break;
    p += c.length;
  }
  return p;
}

}  // namespace

bool Gpt2WordSplitter::Next(std::string_view* word) {
  const unsigned char* const start = pos_;
  if (start >= end_) return false;
  const unsigned char* p = start;
  const unsigned char c0 = *p;

  // 1. 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, ASCII apostrophe only).
  if (c0 == '\'' && end_ - p >= 2) {
    const unsigned char c1 = p[1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
      p += 2;
    } else if (end_ - p >= 3 && ((c1 == 'r' && p[2] == 'e') || (c1 == 'v' && p[2] == 'e') ||
                                 (c1 == 'l' && p[2] == 'l'))) {
      p += 3;
    }
  }

  if (p == start) {
    // 2-4. ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020 and a
    // maximal run of one class. The space is taken only when the next character
    // starts such a run; otherwise a lone space is whitespace (cases 5-6).
    const unsigned char* q = p;
    if (c0 == ' ' && end_ - p >= 2) ++q;
    ClassedChar c = CharAt(q, end_);
    if (q != p && c.char_class == CharClass::kWhitespace) {
      q = p;  // "  " etc.: fall through to the whitespace cases from p.
      c = CharAt(q, end_);
    }
    if (c.char_class != CharClass::kWhitespace) {
      p = SkipRun(q + c.length, end_, c.char_class);
    } else {
      // 5. `\s+(?!\S)`: the maximal whitespace run, backtracked by one character
      //    when a non-space follows it (so that its last space can prefix the
      //    next word); the run is taken whole at the end of the text.
      // 6. `\s+`: otherwise (a single whitespace character before a non-space).
      const unsigned char* last = q;  // start of the last whitespace char so far
      const unsigned char* r = q + c.length;
      while (r < end_) {
        const ClassedChar d = CharAt(r, end_);
        if (d.char_class != CharClass::kWhitespace) break;
        last = r;
        r += d.length;
      }
      if (r == end_ || last == q) {
        p = r;
      } else {
        p = last;
      }
    }
  }

  pos_ = p;
  *word = std::string_view(reinterpret_cast<const char*>(start), static_cast<size_t>(p - start));
  return true;
}

}  // namespace mxmaca::data::internal
