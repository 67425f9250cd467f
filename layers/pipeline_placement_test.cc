// layers/pipeline_placement_test.cc: BuildPipelinePlacement against placements derived by
// hand from Megatron-Core core_v0.15 (get_num_layers_to_build, get_transformer_layer_offset,
// PipelineParallelLayerLayout), the layout-string grammar, round trips and bad inputs.
#include "layers/pipeline_placement.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mxmaca::layers {
namespace {

// Expected: one (rank, chunk) entry.
struct Expected {
  int64_t rank, chunk, first, last;
  bool e, l;
};

void CheckPlacement(const PipelinePlacement& got, int64_t p, int64_t v,
                    const std::vector<Expected>& want) {
  REQUIRE(got.pipeline_model_parallel_size == p);
  REQUIRE(got.virtual_pipeline_model_parallel_size == v);
  REQUIRE(static_cast<int64_t>(got.layouts.size()) == p);
  for (const auto& row : got.layouts) REQUIRE(static_cast<int64_t>(row.size()) == v);
  REQUIRE(static_cast<int64_t>(want.size()) == p * v);
  for (const Expected& w : want) {
    INFO("rank " << w.rank << " chunk " << w.chunk);
    const StageLayout& s = got.layouts[w.rank][w.chunk];
    CHECK(s.first_layer == w.first);
    CHECK(s.last_layer == w.last);
    CHECK(s.has_embedding == w.e);
    CHECK(s.has_loss_head == w.l);
  }
}

void CheckSame(const PipelinePlacement& a, const PipelinePlacement& b) {
  REQUIRE(a.pipeline_model_parallel_size == b.pipeline_model_parallel_size);
  REQUIRE(a.virtual_pipeline_model_parallel_size == b.virtual_pipeline_model_parallel_size);
  for (int64_t r = 0; r < a.pipeline_model_parallel_size; ++r) {
    for (int64_t c = 0; c < a.virtual_pipeline_model_parallel_size; ++c) {
      INFO("rank " << r << " chunk " << c);
      const StageLayout& x = a.layouts[r][c];
      const StageLayout& y = b.layouts[r][c];
      CHECK(x.first_layer == y.first_layer);
      CHECK(x.last_layer == y.last_layer);
      CHECK(x.has_embedding == y.has_embedding);
      CHECK(x.has_loss_head == y.has_loss_head);
    }
  }
}

PipelinePlacementConfig Flags(int64_t num_layers, int64_t p) {
  PipelinePlacementConfig c;
  c.num_layers = num_layers;
  c.pipeline_model_parallel_size = p;
  return c;
}

PipelinePlacement Build(const PipelinePlacementConfig& c) {
  absl::StatusOr<PipelinePlacement> got = BuildPipelinePlacement(c);
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  return *got;
}

// ExpectError: InvalidArgument whose message contains every fragment.
void ExpectError(const PipelinePlacementConfig& c, const std::vector<std::string>& fragments) {
  absl::StatusOr<PipelinePlacement> got = BuildPipelinePlacement(c);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(got.status().message());
  for (const std::string& f : fragments) {
    INFO("message: " << msg);
    CHECK(msg.find(f) != std::string::npos);
  }
}

PipelinePlacementConfig WithLayout(int64_t num_layers, int64_t p, const std::string& layout) {
  PipelinePlacementConfig c = Flags(num_layers, p);
  c.pipeline_model_parallel_layout = layout;
  return c;
}

// Derivations below use Megatron's formulas with N = num_layers (+1 per accounted
// embedding/loss), p, v:
//   layers to build on (rank r, vp stage c):
//     even:    N / p / v, minus 1 on (0, 0) for the embedding, on (p-1, v-1) for the loss
//     uneven:  first / v on rank 0, last / v on rank p-1, and
//              (num_layers - first - last) / middle_ranks / v elsewhere
//   offset (get_transformer_layer_offset):
//     even, no VP: r * N/p (- 1 unless r == 0 when the embedding is accounted)
//     even, VP:    c * N/v + r * N/(p v) (- 1 unless (r, c) == (0, 0), embedding accounted)
//     uneven, VP:  c * T + (r == 0 ? 0 : first/v + (r - 1 or r) * middle/v / middle_ranks),
//                  T = first/v + middle/v + last/v; the "- 1" applies when first is set
//     uneven, no VP: 0 on rank 0, else middle_rank * middle/middle_ranks + first
TEST_CASE("even split without virtual stages", "[placement]") {
  // L=8, p=2: build 8/2 = 4; offset r*4.
  CheckPlacement(Build(Flags(8, 2)), 2, 1, {{0, 0, 0, 4, true, false}, {1, 0, 4, 8, false, true}});
  // p = 1: everything on one stage.
  CheckPlacement(Build(Flags(5, 1)), 1, 1, {{0, 0, 0, 5, true, true}});
}

TEST_CASE("interleaved split matches Megatron's transformer_block comment", "[placement]") {
  // "With 8 layers, 2 stages, and 2 virtual stages: Stage 0: [0, 1] [4, 5];
  //  Stage 1: [2, 3] [6, 7]". Offset c*8/2 + r*8/4.
  PipelinePlacementConfig c = Flags(8, 2);
  c.num_virtual_stages_per_pipeline_rank = 2;
  CheckPlacement(Build(c), 2, 2,
                 {{0, 0, 0, 2, true, false},
                  {1, 0, 2, 4, false, false},
                  {0, 1, 4, 6, false, false},
                  {1, 1, 6, 8, false, true}});
  // "With 8 layers, 2 stages, and 4 model chunks: Stage 0: [0] [2] [4] [6];
  //  Stage 1: [1] [3] [5] [7]" — here from --num-layers-per-virtual-pipeline-stage 1:
  // v = 8 / 2 / 1 = 4.
  PipelinePlacementConfig d = Flags(8, 2);
  d.num_layers_per_virtual_pipeline_stage = 1;
  std::vector<Expected> want;
  for (int64_t g = 0; g < 8; ++g) want.push_back({g % 2, g / 2, g, g + 1, g == 0, g == 7});
  CheckPlacement(Build(d), 2, 4, want);
}

TEST_CASE("uneven first and last stages", "[placement]") {
  // L=10, p=4, first=1, last=3: middle = 6 over 2 ranks = 3; offsets 0, 0*3+1, 1*3+1, 2*3+1.
  PipelinePlacementConfig c = Flags(10, 4);
  c.decoder_first_pipeline_num_layers = 1;
  c.decoder_last_pipeline_num_layers = 3;
  CheckPlacement(Build(c), 4, 1,
                 {{0, 0, 0, 1, true, false},
                  {1, 0, 1, 4, false, false},
                  {2, 0, 4, 7, false, false},
                  {3, 0, 7, 10, false, true}});

  // Only last: L=10, p=3, last=4: middle = 6 over ranks 0 and 1 (middle_rank = r): 3 each,
  // offsets 0, 3, 6; rank 2 builds 4.
  PipelinePlacementConfig d = Flags(10, 3);
  d.decoder_last_pipeline_num_layers = 4;
  CheckPlacement(
      Build(d), 3, 1,
      {{0, 0, 0, 3, true, false}, {1, 0, 3, 6, false, false}, {2, 0, 6, 10, false, true}});

  // Only first, p=2 (the other rank is the one middle rank): L=9, first=2 -> rank 1 has 7.
  PipelinePlacementConfig e = Flags(9, 2);
  e.decoder_first_pipeline_num_layers = 2;
  CheckPlacement(Build(e), 2, 1, {{0, 0, 0, 2, true, false}, {1, 0, 2, 9, false, true}});

  // Both with p=2 and no middle ranks: first + last must be L.
  PipelinePlacementConfig f = Flags(9, 2);
  f.decoder_first_pipeline_num_layers = 4;
  f.decoder_last_pipeline_num_layers = 5;
  CheckPlacement(Build(f), 2, 1, {{0, 0, 0, 4, true, false}, {1, 0, 4, 9, false, true}});
}

TEST_CASE("uneven first and last stages with virtual stages", "[placement]") {
  // L=16, p=3, v=2, first=2, last=6: middle = 8 on rank 1; chunks: 2/2=1, 8/2=4, 6/2=3;
  // T = 1 + 4 + 3 = 8. Offsets: rank 0: c*8; rank 1: c*8 + 1 + 0*4; rank 2: c*8 + 1 + 1*4.
  PipelinePlacementConfig c = Flags(16, 3);
  c.num_virtual_stages_per_pipeline_rank = 2;
  c.decoder_first_pipeline_num_layers = 2;
  c.decoder_last_pipeline_num_layers = 6;
  CheckPlacement(Build(c), 3, 2,
                 {{0, 0, 0, 1, true, false},
                  {1, 0, 1, 5, false, false},
                  {2, 0, 5, 8, false, false},
                  {0, 1, 8, 9, false, false},
                  {1, 1, 9, 13, false, false},
                  {2, 1, 13, 16, false, true}});
}

TEST_CASE("account for embedding and loss in the pipeline split", "[placement]") {
  // L=6, p=4, both: N=8, 2 per rank; rank 0 and 3 build 1; offsets r*2 - 1 (r > 0).
  PipelinePlacementConfig c = Flags(6, 4);
  c.account_for_embedding_in_pipeline_split = true;
  c.account_for_loss_in_pipeline_split = true;
  CheckPlacement(Build(c), 4, 1,
                 {{0, 0, 0, 1, true, false},
                  {1, 0, 1, 3, false, false},
                  {2, 0, 3, 5, false, false},
                  {3, 0, 5, 6, false, true}});

  // Embedding only with VP: L=7, p=2, v=2: N=8, 2 per virtual stage; offsets
  // c*4 + r*2 - 1 except (0, 0), which builds 1.
  PipelinePlacementConfig d = Flags(7, 2);
  d.num_virtual_stages_per_pipeline_rank = 2;
  d.account_for_embedding_in_pipeline_split = true;
  CheckPlacement(Build(d), 2, 2,
                 {{0, 0, 0, 1, true, false},
                  {1, 0, 1, 3, false, false},
                  {0, 1, 3, 5, false, false},
                  {1, 1, 5, 7, false, true}});

  // Loss only, v from --num-layers-per-virtual-pipeline-stage 3 (Megatron counts the loss):
  // L=11, p=2: N=12, 6 per rank, v = 6/3 = 2; offsets c*6 + r*3; (1, 1) builds 2.
  PipelinePlacementConfig e = Flags(11, 2);
  e.num_layers_per_virtual_pipeline_stage = 3;
  e.account_for_loss_in_pipeline_split = true;
  CheckPlacement(Build(e), 2, 2,
                 {{0, 0, 0, 3, true, false},
                  {1, 0, 3, 6, false, false},
                  {0, 1, 6, 9, false, false},
                  {1, 1, 9, 11, false, true}});

  // A standalone embedding stage: L=3, p=4, embedding accounted: N=4, one each, rank 0
  // builds 0 (Megatron allows the empty stage).
  PipelinePlacementConfig f = Flags(3, 4);
  f.account_for_embedding_in_pipeline_split = true;
  CheckPlacement(Build(f), 4, 1,
                 {{0, 0, 0, 0, true, false},
                  {1, 0, 0, 1, false, false},
                  {2, 0, 1, 2, false, false},
                  {3, 0, 2, 3, false, true}});
}

TEST_CASE("virtual size 1 is not interleaved, also with p = 1", "[placement]") {
  PipelinePlacementConfig c = Flags(6, 1);
  c.num_virtual_stages_per_pipeline_rank = 1;
  CheckPlacement(Build(c), 1, 1, {{0, 0, 0, 6, true, true}});
  PipelinePlacementConfig d = Flags(6, 2);
  d.num_layers_per_virtual_pipeline_stage = 3;  // v = 6 / 2 / 3 = 1
  CheckPlacement(Build(d), 2, 1, {{0, 0, 0, 3, true, false}, {1, 0, 3, 6, false, true}});
}

TEST_CASE("layout string places layers, empty stages allowed", "[placement]") {
  CheckPlacement(
      Build(WithLayout(11, 3, "Ettt|tttt|ttttL")), 3, 1,
      {{0, 0, 0, 3, true, false}, {1, 0, 3, 7, false, false}, {2, 0, 7, 11, false, true}});
  // "E|(tt|)*2,t*3L" expands to E | tt | tt | tttL: 4 stages, p=2 -> v=2; stage g on rank
  // g % 2, chunk g / 2.
  CheckPlacement(Build(WithLayout(7, 2, "E|(tt|)*2,t*3L")), 2, 2,
                 {{0, 0, 0, 0, true, false},
                  {1, 0, 0, 2, false, false},
                  {0, 1, 2, 4, false, false},
                  {1, 1, 4, 7, false, true}});
  // Megatron's docstring example shape without MTP: "Ettt|(tt|)*29,L" is 31 stages.
  absl::StatusOr<std::vector<std::string>> stages = ParsePipelineLayout("Ettt|(tt|)*29,L");
  REQUIRE(stages.ok());
  REQUIRE(stages->size() == 31);
  CHECK((*stages)[0] == "Ettt");
  CHECK((*stages)[29] == "tt");
  CHECK((*stages)[30] == "L");
  // Empty middle stage, one stage with everything, repeated separators, t*0.
  CheckPlacement(
      Build(WithLayout(4, 3, "Ett||ttL")), 3, 1,
      {{0, 0, 0, 2, true, false}, {1, 0, 2, 2, false, false}, {2, 0, 2, 4, false, true}});
  CheckPlacement(Build(WithLayout(3, 1, "Et*3L")), 1, 1, {{0, 0, 0, 3, true, true}});
  CheckPlacement(
      Build(WithLayout(2, 3, "Et|*2t*0tL")), 3, 1,
      {{0, 0, 0, 1, true, false}, {1, 0, 1, 1, false, false}, {2, 0, 1, 2, false, true}});
  // Commas are cosmetic, also inside a count (Megatron strips them first).
  CheckPlacement(Build(WithLayout(12, 1, "Et*1,2L")), 1, 1, {{0, 0, 0, 12, true, true}});
}

TEST_CASE("ToLayoutString and Describe", "[placement]") {
  const PipelinePlacement a = Build(WithLayout(11, 3, "Ettt|tttt|ttttL"));
  CHECK(a.ToLayoutString() == "Ettt|t*4|t*4L");
  PipelinePlacementConfig c = Flags(3, 4);
  c.account_for_embedding_in_pipeline_split = true;
  CHECK(Build(c).ToLayoutString() == "E|t|t|tL");
  const std::string d = a.Describe();
  CHECK(d.find("3 pipeline rank(s) x 1 model chunk(s)") != std::string::npos);
  CHECK(d.find("rank 0 chunk 0 (virtual stage 0): layers [0, 3) (3 layers) + embedding (E)") !=
        std::string::npos);
  CHECK(d.find("rank 2 chunk 0 (virtual stage 2): layers [7, 11) (4 layers) + loss head (L)") !=
        std::string::npos);
  const std::string e = Build(WithLayout(7, 2, "E|(tt|)*2,t*3L")).Describe();
  CHECK(e.find("rank 0 chunk 0 (virtual stage 0): no transformer layers + embedding (E)") !=
        std::string::npos);
  CHECK(e.find("rank 0 chunk 1 (virtual stage 2): layers [2, 4)") != std::string::npos);
  // One line per (rank, chunk) plus the header.
  CHECK(std::count(e.begin(), e.end(), '\n') == 5);
}

TEST_CASE("round trip: flags -> ToLayoutString -> layout -> same placement", "[placement]") {
  std::vector<PipelinePlacementConfig> configs;
  configs.push_back(Flags(8, 2));
  configs.push_back(Flags(24, 4));
  {
    PipelinePlacementConfig c = Flags(24, 4);
    c.num_virtual_stages_per_pipeline_rank = 3;
    configs.push_back(c);
  }
  {
    PipelinePlacementConfig c = Flags(16, 3);
    c.num_virtual_stages_per_pipeline_rank = 2;
    c.decoder_first_pipeline_num_layers = 2;
    c.decoder_last_pipeline_num_layers = 6;
    configs.push_back(c);
  }
  {
    PipelinePlacementConfig c = Flags(30, 4);
    c.account_for_embedding_in_pipeline_split = true;
    c.account_for_loss_in_pipeline_split = true;
    c.num_layers_per_virtual_pipeline_stage = 2;  // N=32, 8 per rank, v=4
    configs.push_back(c);
  }
  for (const PipelinePlacementConfig& c : configs) {
    const PipelinePlacement a = Build(c);
    const std::string text = a.ToLayoutString();
    INFO("layout " << text);
    const PipelinePlacement b =
        Build(WithLayout(c.num_layers, c.pipeline_model_parallel_size, text));
    CheckSame(a, b);
    CHECK(b.ToLayoutString() == text);
  }
}

TEST_CASE("round trip on random layouts", "[placement]") {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t p = 1 + rng() % 5;
    const int64_t v = p == 1 ? 1 : 1 + rng() % 3;
    std::vector<int64_t> counts(p * v);
    int64_t total = 0;
    for (int64_t& n : counts) {
      n = rng() % 6;  // zeros included: empty stages
      total += n;
    }
    if (total == 0) {
      counts.back() = 1;
      total = 1;
    }
    // Written literally with cosmetic commas, in a different style from ToLayoutString.
    std::string text;
    for (int64_t g = 0; g < p * v; ++g) {
      if (g > 0) text += "|";
      if (g == 0) text += "E,";
      for (int64_t i = 0; i < counts[g]; ++i) text += (i % 2 == 1) ? ",t" : "t";
      if (g == p * v - 1) text += "L";
    }
    INFO("layout " << text << " p " << p);
    const PipelinePlacement a = Build(WithLayout(total, p, text));
    int64_t next = 0;
    for (int64_t g = 0; g < p * v; ++g) {
      const StageLayout& s = a.virtual_stage(g);
      CHECK(s.first_layer == next);
      CHECK(s.num_layers() == counts[g]);
      next = s.last_layer;
    }
    const PipelinePlacement b = Build(WithLayout(total, p, a.ToLayoutString()));
    CheckSame(a, b);
  }
}

TEST_CASE("indivisible even splits name num_layers, p and v", "[placement][errors]") {
  ExpectError(Flags(10, 4), {"--num-layers 10", "--pipeline-model-parallel-size 4"});
  PipelinePlacementConfig c = Flags(8, 2);
  c.num_virtual_stages_per_pipeline_rank = 3;
  ExpectError(c, {"--num-layers 8", "--pipeline-model-parallel-size 2", "virtual pipeline size 3"});
  PipelinePlacementConfig d = Flags(7, 2);
  d.account_for_embedding_in_pipeline_split = true;
  d.account_for_loss_in_pipeline_split = true;  // N = 9
  ExpectError(d, {"--num-layers 7 + 2", "--pipeline-model-parallel-size 2"});
  PipelinePlacementConfig e = Flags(12, 2);
  e.num_layers_per_virtual_pipeline_stage = 4;  // 6 per rank, not divisible by 4
  ExpectError(e, {"layers per pipeline rank 6", "--num-layers-per-virtual-pipeline-stage 4"});
  PipelinePlacementConfig f = Flags(8, 2);
  f.num_virtual_stages_per_pipeline_rank = int64_t{1} << 40;
  ExpectError(f, {"virtual pipeline size 1099511627776", "--num-layers 8"});
  ExpectError(Flags(0, 1), {"--num-layers: got 0"});
  ExpectError(Flags(4, 0), {"--pipeline-model-parallel-size: got 0"});
}

TEST_CASE("conflicting flags are errors naming both", "[placement][errors]") {
  PipelinePlacementConfig a = Flags(8, 2);
  a.num_layers_per_virtual_pipeline_stage = 2;
  a.num_virtual_stages_per_pipeline_rank = 2;
  ExpectError(a, {"--num-layers-per-virtual-pipeline-stage and "
                  "--num-virtual-stages-per-pipeline-rank"});
  PipelinePlacementConfig b = WithLayout(8, 2, "Etttt|ttttL");
  b.num_virtual_stages_per_pipeline_rank = 1;
  ExpectError(b, {"--num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout"});
  PipelinePlacementConfig c = WithLayout(8, 2, "Etttt|ttttL");
  c.decoder_first_pipeline_num_layers = 4;
  c.account_for_loss_in_pipeline_split = true;
  ExpectError(c, {"--pipeline-model-parallel-layout cannot be combined with",
                  "--decoder-first-pipeline-num-layers", "--account-for-loss-in-pipeline-split"});
  PipelinePlacementConfig d = Flags(8, 2);
  d.decoder_last_pipeline_num_layers = 4;
  d.account_for_embedding_in_pipeline_split = true;
  ExpectError(d,
              {"--decoder-last-pipeline-num-layers", "--account-for-embedding-in-pipeline-split"});
  PipelinePlacementConfig e = Flags(8, 2);
  e.decoder_first_pipeline_num_layers = 2;
  e.num_layers_per_virtual_pipeline_stage = 1;
  ExpectError(e,
              {"--num-layers-per-virtual-pipeline-stage", "--decoder-first-pipeline-num-layers"});
}

TEST_CASE("interleaving needs p > 1", "[placement][errors]") {
  PipelinePlacementConfig a = Flags(8, 1);
  a.num_virtual_stages_per_pipeline_rank = 2;
  ExpectError(a, {"virtual pipeline size 2", "--pipeline-model-parallel-size 1"});
  PipelinePlacementConfig b = Flags(8, 1);
  b.num_layers_per_virtual_pipeline_stage = 4;  // v = 2
  ExpectError(b, {"virtual pipeline size 2", "--num-layers-per-virtual-pipeline-stage"});
  ExpectError(WithLayout(8, 1, "Etttt|ttttL"),
              {"2 virtual stages", "--pipeline-model-parallel-size 1"});
}

TEST_CASE("bad uneven first/last values", "[placement][errors]") {
  PipelinePlacementConfig a = Flags(8, 4);
  a.decoder_first_pipeline_num_layers = 0;
  ExpectError(a, {"--decoder-first-pipeline-num-layers: got 0"});
  PipelinePlacementConfig b = Flags(12, 4);
  b.decoder_first_pipeline_num_layers = 3;
  b.num_virtual_stages_per_pipeline_rank = 2;
  ExpectError(b, {"--decoder-first-pipeline-num-layers 3", "virtual pipeline size 2"});
  PipelinePlacementConfig c = Flags(10, 4);
  c.decoder_first_pipeline_num_layers = 2;
  c.decoder_last_pipeline_num_layers = 3;  // 5 left over 2 ranks
  ExpectError(c, {"5 layers", "2 middle pipeline ranks"});
  PipelinePlacementConfig d = Flags(10, 4);
  d.decoder_first_pipeline_num_layers = 8;
  d.decoder_last_pipeline_num_layers = 4;
  ExpectError(d, {"12 layers", "--num-layers 10"});
  PipelinePlacementConfig e = Flags(10, 2);
  e.decoder_first_pipeline_num_layers = 4;
  e.decoder_last_pipeline_num_layers = 4;
  ExpectError(e, {"!= --num-layers 10", "remaining 2"});
  PipelinePlacementConfig f = Flags(10, 1);
  f.decoder_last_pipeline_num_layers = 10;
  ExpectError(f, {"--decoder-last-pipeline-num-layers needs --pipeline-model-parallel-size > 1"});
  PipelinePlacementConfig g = Flags(14, 4);
  g.num_virtual_stages_per_pipeline_rank = 2;
  g.decoder_first_pipeline_num_layers = 2;
  g.decoder_last_pipeline_num_layers = 2;  // 10 over 2 middle ranks = 5, odd
  ExpectError(g, {"layers per middle pipeline rank 5", "virtual pipeline size 2"});
}

TEST_CASE("layout syntax errors name the position and what was expected", "[placement][errors]") {
  ExpectError(WithLayout(4, 2, "Ett|txtL"), {"position 5", "got 'x'", "expected one of E"});
  ExpectError(WithLayout(4, 2, "Ett|((t)*2)*1L"), {"position 5", "got '('", "groups do not nest"});
  ExpectError(WithLayout(4, 2, "Ett|(tt|L"), {"position 9", "end of string", "position 4"});
  ExpectError(WithLayout(4, 2, "Ett|(ttL)"), {"position 9", "'*<count>' after ')'"});
  ExpectError(WithLayout(4, 2, "Ett|ttL)"), {"position 7", "closes nothing"});
  ExpectError(WithLayout(4, 2, "Ett|t*L"), {"position 6", "got 'L'", "repeat count"});
  ExpectError(WithLayout(4, 2, "Ett|()*2ttL"), {"position 5", "non-empty group"});
  ExpectError(WithLayout(4, 2, "E t t|ttL"), {"position 1", "got ' '"});
  // Commas do not shift the reported position.
  ExpectError(WithLayout(4, 2, "E,t,t|t,?"), {"position 8", "got '?'"});
  ExpectError(WithLayout(4, 2, "Ett|t*99999999tL"), {"repeat count"});
}

TEST_CASE("layout content errors", "[placement][errors]") {
  ExpectError(WithLayout(4, 2, "Ett|tt|L"),
              {"3 virtual stages", "multiple of", "--pipeline-model-parallel-size 2"});
  ExpectError(WithLayout(4, 2, "Ett|ttmL"), {"'m'", "MTP"});
  ExpectError(WithLayout(4, 2, "tEt|ttL"), {"E must be the first symbol of virtual stage 0"});
  ExpectError(WithLayout(4, 2, "|EttttL"), {"E must be the first symbol of virtual stage 0"});
  ExpectError(WithLayout(4, 2, "Ett|tLt"), {"L must be the last symbol", "pipeline rank 1"});
  ExpectError(WithLayout(4, 2, "EttL|ttL"), {"2 L", "exactly one E"});
  ExpectError(WithLayout(4, 2, "Ett|tt"), {"0 L"});
  ExpectError(WithLayout(5, 2, "Ett|ttL"), {"4 transformer layers", "--num-layers 5"});
}

}  // namespace
}  // namespace mxmaca::layers
