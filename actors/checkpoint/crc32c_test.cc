// actors/checkpoint/crc32c_test.cc: CRC-32C against the published check value and a
// bit-at-a-time reference written from the definition.
#include "actors/checkpoint/crc32c.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

namespace mxmaca::actors::checkpoint {
namespace {

// ReferenceCrc32c: one bit at a time, reflected polynomial 0x82F63B78 (RFC 3720 B.4).
uint32_t ReferenceCrc32c(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

TEST_CASE("CRC-32C check values", "[checkpoint]") {
  const std::string check = "123456789";
  CHECK(Crc32c(check.data(), check.size()) == 0xE3069283u);
  CHECK(Crc32c(nullptr, 0) == 0u);
  // RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA, 32 bytes of 0xFF -> 0x62A8AB43.
  const std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF);
  CHECK(Crc32c(zeros.data(), 32) == 0x8A9136AAu);
  CHECK(Crc32c(ones.data(), 32) == 0x62A8AB43u);
}

TEST_CASE("CRC-32C matches the bitwise reference and extends across splits",
          "[checkpoint]") {
  std::mt19937 gen(17);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<unsigned char> buf(gen() % 300);
    for (unsigned char& b : buf) b = static_cast<unsigned char>(gen());
    const uint32_t expected = ReferenceCrc32c(buf.data(), buf.size());
    CHECK(Crc32c(buf.data(), buf.size()) == expected);
    const size_t split = buf.empty() ? 0 : gen() % buf.size();
    const uint32_t first = Crc32c(buf.data(), split);
    CHECK(Crc32c(buf.data() + split, buf.size() - split, first) == expected);
  }
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
