// actors/checkpoint/flat_range_test.cc: flat ranges as boxes, and a distributed-optimizer
// style save (each DP rank a flat range of one buffer holding several tensors) loaded as
// tensor-parallel row shards.
#include "actors/checkpoint/flat_range.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <list>
#include <random>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

using testing::BitEqual;
using testing::ExtractRegion;
using testing::MakeTempDir;
using testing::NumElementsOf;
using testing::RandomBits;

TEST_CASE("FlatRangeToBoxes: the documented example", "[checkpoint]") {
  auto boxes = FlatRangeToBoxes({4, 5}, 3, 17);
  REQUIRE(boxes.ok());
  REQUIRE(boxes->size() == 3);
  CHECK((*boxes)[0].offsets == std::vector<int64_t>{0, 3});
  CHECK((*boxes)[0].shape == std::vector<int64_t>{1, 2});
  CHECK((*boxes)[0].flat_begin == 3);
  CHECK((*boxes)[1].offsets == std::vector<int64_t>{1, 0});
  CHECK((*boxes)[1].shape == std::vector<int64_t>{2, 5});
  CHECK((*boxes)[1].flat_begin == 5);
  CHECK((*boxes)[2].offsets == std::vector<int64_t>{3, 0});
  CHECK((*boxes)[2].shape == std::vector<int64_t>{1, 2});
  CHECK((*boxes)[2].flat_begin == 15);
  CHECK(FlatRangeToBoxes({4, 5}, 7, 7)->empty());
  CHECK(FlatRangeToBoxes({}, 0, 1)->size() == 1);
  CHECK_FALSE(FlatRangeToBoxes({4, 5}, 3, 21).ok());
  CHECK_FALSE(FlatRangeToBoxes({4, 5}, 4, 3).ok());
}

// Every box, enumerated in C order, must visit consecutive flat indices, and the boxes
// together exactly [begin, end) in order.
TEST_CASE("FlatRangeToBoxes: random shapes and ranges tile the range in flat order",
          "[checkpoint]") {
  std::mt19937 gen(3);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int64_t> shape(gen() % 5);
    for (int64_t& d : shape) d = 1 + gen() % 5;
    const int64_t numel = NumElementsOf(shape);
    int64_t begin = gen() % (numel + 1), end = gen() % (numel + 1);
    if (begin > end) std::swap(begin, end);
    auto boxes = FlatRangeToBoxes(shape, begin, end);
    REQUIRE(boxes.ok());
    const size_t limit = shape.empty() ? 1 : 2 * shape.size() - 1;
    CHECK(boxes->size() <= limit);
    int64_t next = begin;
    for (const FlatRangeBox& b : *boxes) {
      REQUIRE(b.offsets.size() == shape.size());
      REQUIRE(b.shape.size() == shape.size());
      CHECK(b.flat_begin == next);
      const int64_t n = NumElementsOf(b.shape);
      CHECK(n > 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t rem = i, flat = 0, stride = 1;
        for (size_t d = shape.size(); d-- > 0;) {
          flat += (rem % b.shape[d] + b.offsets[d]) * stride;
          rem /= b.shape[d];
          stride *= shape[d];
        }
        REQUIRE(flat == next);
        ++next;
      }
    }
    CHECK(next == end);
  }
}

TEST_CASE("distributed-optimizer flat shards load as tensor-parallel row shards",
          "[checkpoint]") {
  // Two tensors in one flat buffer, cut into 3 uneven DP ranges that split rows.
  struct T {
    std::string name;
    std::vector<int64_t> shape;
    int64_t start;  // in the flat buffer
  };
  const std::vector<T> tensors = {{"optimizer/exp_avg/a", {7, 9}, 0},
                                  {"optimizer/exp_avg/b", {5, 3, 4}, 63}};
  const int64_t total = 63 + 60;
  const std::vector<float> buffer = RandomBits(total, 77);
  const std::vector<int64_t> cuts = {0, 40, 71, total};  // DP rank r owns [cuts[r], cuts[r+1])
  const std::string dir = MakeTempDir();
  auto writer = CheckpointWriter::Begin(dir, 12);
  REQUIRE(writer.ok());
  for (int r = 0; r < 3; ++r) {
    std::vector<TensorShardView> views;
    for (const T& t : tensors) {
      const int64_t n = NumElementsOf(t.shape);
      const int64_t lo = std::max(cuts[r], t.start), hi = std::min(cuts[r + 1], t.start + n);
      if (lo >= hi) continue;
      auto boxes = FlatRangeToBoxes(t.shape, lo - t.start, hi - t.start);
      REQUIRE(boxes.ok());
      for (const FlatRangeBox& b : *boxes) {
        views.push_back({t.name, t.shape, b.offsets, b.shape,
                         buffer.data() + t.start + b.flat_begin});
      }
    }
    absl::Status st = writer->WriteShard("dp" + std::to_string(r), views);
    INFO(st.ToString());
    REQUIRE(st.ok());
  }
  absl::Status st = writer->Commit(nlohmann::json::object(), nlohmann::json::object());
  INFO(st.ToString());
  REQUIRE(st.ok());
  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  REQUIRE(reader->VerifyChecksums().ok());
  for (const T& t : tensors) {
    const std::vector<float> full(buffer.begin() + t.start,
                                  buffer.begin() + t.start + NumElementsOf(t.shape));
    // TP=2 row shards of the loading layout.
    const int64_t half = t.shape[0] / 2;
    for (int tp = 0; tp < 2; ++tp) {
      std::vector<int64_t> off(t.shape.size(), 0), shape = t.shape;
      off[0] = tp * half;
      shape[0] = tp == 0 ? half : t.shape[0] - half;
      std::vector<float> out(NumElementsOf(shape));
      REQUIRE(reader->ReadSlice(t.name, off, shape, out.data()).ok());
      CHECK(BitEqual(out, ExtractRegion(full, t.shape, off, shape)));
    }
  }
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
