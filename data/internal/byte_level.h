// data/internal/byte_level.h: GPT-2's reversible byte -> Unicode character map.
//
// Source: openai/gpt-2 src/encoder.py `bytes_to_unicode()` (also Megatron-LM's
// gpt2_tokenization.py). The 188 printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' map to
// the code point of the same value; the other 68 bytes, in increasing order, map to
// U+0100, U+0101, ... U+0143. encoder.json and vocab.bpe spell tokens in these
// characters (e.g. "Ġ" = U+0120 is the byte 0x20).
#ifndef MXMACA_DATA_INTERNAL_BYTE_LEVEL_H_
#define MXMACA_DATA_INTERNAL_BYTE_LEVEL_H_

#include <array>
#include <cstdint>

namespace mxmaca::data::internal {

// kByteToCodePoint[b]: the code point (< U+0144) that GPT-2 uses for byte b.
inline constexpr std::array<uint16_t, 256> kByteToCodePoint = [] {
  std::array<uint16_t, 256> map{};
  int next_extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    map[b] = static_cast<uint16_t>(printable ? b : 256 + next_extra++);
  }
  return map;
}();

// kCodePointToByte[cp] for cp < kNumByteCodePoints: the byte whose character is
// cp, or -1 when cp is not one of the 256 characters.
inline constexpr int kNumByteCodePoints = 0x144;
inline constexpr std::array<int16_t, kNumByteCodePoints> kCodePointToByte = [] {
  std::array<int16_t, kNumByteCodePoints> inverse{};
  for (auto& v : inverse) v = -1;
  for (int b = 0; b < 256; ++b) inverse[kByteToCodePoint[b]] = static_cast<int16_t>(b);
  return inverse;
}();

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_BYTE_LEVEL_H_
