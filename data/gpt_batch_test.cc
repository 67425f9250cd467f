// BuildGptMicroBatch against the numpy port of Megatron's
// _get_ltor_masks_and_position_ids (gpt_reference.py masks mode; doc_start derived there
// from the full [s, s] mask), on random samples with many EODs, all flag combinations.
// Integer and 0/1 outputs, so the comparison is exact.
#include "data/gpt_batch.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "data/gpt_dataset_test_util.h"

namespace mxmaca::data {
namespace {

using nlohmann::json;

TEST_CASE("BuildGptMicroBatch matches Megatron's masks and position ids") {
  std::mt19937 gen(8086);
  constexpr int32_t kEod = 50256;
  for (int trial = 0; trial < 16; ++trial) {
    const int64_t b = 1 + gen() % 4;
    const int64_t s = 1 + gen() % 70;
    std::vector<int32_t> samples(b * (s + 1));
    // About one EOD in 6 tokens; also EOD first and last in some rows.
    for (auto& t : samples) t = (gen() % 6 == 0) ? kEod : static_cast<int32_t>(gen() % 50000);
    if (trial % 3 == 0) samples[0] = kEod;
    if (trial % 4 == 0) samples[s - 1] = kEod;
    const bool eod_mask_loss = trial & 1;
    const bool reset_position_ids = trial & 2;
    const bool reset_attention_mask = trial & 4;
    json rows = json::array();
    for (int64_t r = 0; r < b; ++r) {
      rows.push_back(
          std::vector<int32_t>(samples.begin() + r * (s + 1), samples.begin() + (r + 1) * (s + 1)));
    }
    json cfg = {{"mode", "masks"},
                {"samples", rows},
                {"eod", kEod},
                {"eod_mask_loss", eod_mask_loss},
                {"reset_position_ids", reset_position_ids},
                {"reset_attention_mask", reset_attention_mask}};
    auto want = testing::RunPythonJson("data/tests/gpt_dataset_reference/gpt_reference.py", cfg);
    REQUIRE(want.ok());
    const GptMicroBatch batch = BuildGptMicroBatch(samples, b, s, kEod, eod_mask_loss,
                                                   reset_position_ids, reset_attention_mask);
    INFO("trial " << trial << " b=" << b << " s=" << s);
    CHECK(batch.b == b);
    CHECK(batch.s == s);
    CHECK(batch.tokens == (*want)["tokens"].get<std::vector<int32_t>>());
    CHECK(batch.labels == (*want)["labels"].get<std::vector<int32_t>>());
    CHECK(batch.position_ids == (*want)["position_ids"].get<std::vector<int32_t>>());
    CHECK(batch.doc_start == (*want)["doc_start"].get<std::vector<int32_t>>());
    CHECK(batch.loss_mask == (*want)["loss_mask"].get<std::vector<float>>());
  }
}

}  // namespace
}  // namespace mxmaca::data
