// data/internal/unicode_classes.cc: two-stage lookup table built once from the
// generated ranges in unicode_classes.inc.
#include "data/internal/unicode_classes.h"

#include <array>
#include <cstring>
#include <vector>

namespace mxmaca::data::internal {
namespace {

struct ClassRange {
  uint32_t first;
  uint32_t last;
  CharClass char_class;
};

constexpr ClassRange kClassRanges[] = {
#include "data/internal/unicode_classes.inc"
};

constexpr uint32_t kNumCodePoints = 0x110000;
constexpr uint32_t kBlockBits = 8;
constexpr uint32_t kBlockSize = 1u << kBlockBits;
constexpr uint32_t kNumBlocks = kNumCodePoints / kBlockSize;

// Stage 1 maps a 256-code-point block to the index of its (deduplicated) row of
// classes in stage 2. Most blocks are all-kOther or all-kLetter, so stage 2 stays
// small (a few hundred rows).
struct TwoStageTable {
  std::array<uint16_t, kNumBlocks> block_index;
  std::vector<CharClass> blocks;  // [num_unique_blocks * kBlockSize]
};

TwoStageTable BuildTable() {
  std::vector<CharClass> flat(kNumCodePoints, CharClass::kOther);
  for (const ClassRange& r : kClassRanges) {
    for (uint32_t cp = r.first; cp <= r.last; ++cp) flat[cp] = r.char_class;
  }
  TwoStageTable table;
  for (uint32_t b = 0; b < kNumBlocks; ++b) {
    const CharClass* block = flat.data() + b * kBlockSize;
    const size_t num_unique = table.blocks.size() / kBlockSize;
    size_t found = num_unique;
    for (size_t u = 0; u < num_unique; ++u) {
      if (std::memcmp(table.blocks.data() + u * kBlockSize, block, kBlockSize) == 0) {
        found = u;
        break;
      }
    }
    if (found == num_unique) table.blocks.insert(table.blocks.end(), block, block + kBlockSize);
    table.block_index[b] = static_cast<uint16_t>(found);
  }
  return table;
}

const TwoStageTable& Table() {
  static const TwoStageTable* const table = new TwoStageTable(BuildTable());
  return *table;
}

}  // namespace

CharClass ClassOfCodePoint(uint32_t cp) {
  if (cp >= kNumCodePoints) return CharClass::kOther;
  const TwoStageTable& table = Table();
  return table.blocks[static_cast<size_t>(table.block_index[cp >> kBlockBits]) * kBlockSize +
                      (cp & (kBlockSize - 1))];
}

bool IsValidUtf8(const char* data, size_t size) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  const auto* end = p + size;
  while (p < end) {
    const Utf8Char c = DecodeUtf8Char(p, end);
    if (!c.valid) return false;
    p += c.length;
  }
  return true;
}

}  // namespace mxmaca::data::internal
