// actors/checkpoint/crc32c.cc: CRC-32C, hardware (SSE4.2) or table-driven.
#include "actors/checkpoint/crc32c.h"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace mxmaca::actors::checkpoint {
namespace {

#if !defined(__SSE4_2__)
constexpr uint32_t kPolyReflected = 0x82F63B78u;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolyReflected : c >> 1;
    table[i] = c;
  }
  return table;
}
#endif

}  // namespace

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#if defined(__SSE4_2__)
  uint64_t c64 = c;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
    p += 8;
    size -= 8;
  }
  c = static_cast<uint32_t>(c64);
  while (size > 0) {
    c = _mm_crc32_u8(c, *p++);
    --size;
  }
#else
  static const std::array<uint32_t, 256> table = MakeTable();
  while (size > 0) {
    c = table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    --size;
  }
#endif
  return ~c;
}

}  // namespace mxmaca::actors::checkpoint
