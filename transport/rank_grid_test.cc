// transport/rank_grid_test.cc: RankGrid against layouts written out in Megatron-Core's
// parallel_state.py docstrings, validation errors, and self-consistency of the per-rank
// view with the enumerated groups.
#include "transport/rank_grid.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::transport {
namespace {

using Groups = std::vector<std::vector<int>>;

RankGrid MustCreate(int world, int tp, int pp, int cp = 1, int ep = 1, int etp = 0) {
  auto grid = RankGrid::Create(world, tp, pp, cp, ep, etp);
  REQUIRE(grid.ok());
  return *grid;
}

TEST_CASE("RankGrid world 16 tp2 pp4 matches Megatron's initialize_model_parallel docstring") {
  const RankGrid grid = MustCreate(16, /*tp=*/2, /*pp=*/4);
  CHECK(grid.data_parallel_size() == 2);
  CHECK(grid.Groups(GroupKind::kTensorModelParallel) ==
        Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(grid.Groups(GroupKind::kDataParallel) ==
        Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(grid.Groups(GroupKind::kPipelineModelParallel) ==
        Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(grid.Groups(GroupKind::kEmbedding) == Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}});
  CHECK(grid.Groups(GroupKind::kPositionEmbedding) == Groups{{0}, {1}, {2}, {3}});
  // tp-pp: ranks sharing the dp coordinate.
  CHECK(grid.Groups(GroupKind::kModelParallel) ==
        Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}});

  const RankView r9 = *grid.ForRank(9);  // tp 1, dp 0, pp 2
  CHECK(r9.tensor_model_parallel_rank() == 1);
  CHECK(r9.data_parallel_rank() == 0);
  CHECK(r9.pipeline_model_parallel_rank() == 2);
  CHECK(r9.pipeline_model_parallel_group().ranks == std::vector<int>{1, 5, 9, 13});
  CHECK(r9.pipeline_model_parallel_next_rank() == 13);
  CHECK(r9.pipeline_model_parallel_prev_rank() == 5);
  CHECK_FALSE(r9.is_pipeline_first_stage());
  CHECK_FALSE(r9.is_pipeline_last_stage());
  CHECK_FALSE(r9.is_rank_in_embedding_group());
  const RankView r13 = *grid.ForRank(13);
  CHECK(r13.is_pipeline_last_stage());
  CHECK(r13.pipeline_model_parallel_next_rank() == 1);  // wraps as Megatron's does
  REQUIRE(r13.embedding_group().has_value());
  CHECK(r13.embedding_group()->ranks == std::vector<int>{1, 13});
  CHECK(r13.embedding_group()->rank_in_group == 1);
  CHECK_FALSE(r13.is_rank_in_position_embedding_group());
}

TEST_CASE("RankGrid context parallel: 8 ranks tp4 cp2 gives Megatron's cp groups") {
  const RankGrid grid = MustCreate(8, /*tp=*/4, /*pp=*/1, /*cp=*/2);
  CHECK(grid.data_parallel_size() == 1);
  CHECK(grid.Groups(GroupKind::kContextParallel) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // With dp = 1, data_parallel is one rank each while data_parallel_with_cp is the cp group.
  CHECK(grid.Groups(GroupKind::kDataParallel).size() == 8);
  CHECK(grid.Groups(GroupKind::kDataParallelWithCp) == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  const RankView r6 = *grid.ForRank(6);
  CHECK(r6.context_parallel_rank() == 1);
  CHECK(r6.data_parallel_world_size() == 1);
  CHECK(r6.data_parallel_world_size(/*with_context_parallel=*/true) == 2);
  CHECK(r6.data_parallel_rank(/*with_context_parallel=*/true) == 1);
  CHECK(r6.tensor_and_context_parallel_group().ranks ==
        std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("RankGrid dp-cp group order is cp fastest, then dp") {
  // world 16 = tp2 cp2 dp4 pp1: rank = tp + 2 cp + 4 dp.
  const RankGrid grid = MustCreate(16, /*tp=*/2, /*pp=*/1, /*cp=*/2);
  const ProcessGroup g = grid.ForRank(13)->data_parallel_group(/*with_context_parallel=*/true);
  CHECK(g.ranks == std::vector<int>{1, 3, 5, 7, 9, 11, 13, 15});
  CHECK(g.rank_in_group == 6);  // cp 0, dp 3 -> 0 + 2 * 3
  CHECK(grid.ForRank(13)->data_parallel_group().ranks == std::vector<int>{1, 5, 9, 13});
}

TEST_CASE("RankGrid pp = 1: the embedding group is the rank itself") {
  const RankGrid grid = MustCreate(4, /*tp=*/2, /*pp=*/1);
  for (int r = 0; r < 4; ++r) {
    const auto emb = grid.ForRank(r)->embedding_group();
    REQUIRE(emb.has_value());
    CHECK(emb->ranks == std::vector<int>{r});
    CHECK(grid.ForRank(r)->is_pipeline_first_stage());
    CHECK(grid.ForRank(r)->is_pipeline_last_stage());
  }
}

TEST_CASE("RankGrid expert grid folds ep over tp x cp x dp") {
  SECTION("tp1 ep2 world 8: edp 4") {
    const RankGrid grid = MustCreate(8, /*tp=*/1, /*pp=*/1, /*cp=*/1, /*ep=*/2);
    CHECK(grid.expert_data_parallel_size() == 4);
    CHECK(grid.expert_tensor_parallel_size() == 1);
    CHECK(grid.Groups(GroupKind::kExpertModelParallel) ==
          Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
    CHECK(grid.Groups(GroupKind::kExpertDataParallel) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  }
  SECTION("tp2 ep4 world 8: etp defaults to tp, edp 1") {
    const RankGrid grid = MustCreate(8, /*tp=*/2, /*pp=*/1, /*cp=*/1, /*ep=*/4);
    CHECK(grid.expert_tensor_parallel_size() == 2);
    CHECK(grid.expert_data_parallel_size() == 1);
    CHECK(grid.Groups(GroupKind::kExpertModelParallel) == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
    CHECK(grid.Groups(GroupKind::kExpertTensorParallel) ==
          Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  }
  SECTION("tp2 cp2 ep4 etp1 pp2 world 16: pp groups shared with the decoder grid") {
    const RankGrid grid = MustCreate(16, /*tp=*/2, /*pp=*/2, /*cp=*/2, /*ep=*/4, /*etp=*/1);
    CHECK(grid.expert_data_parallel_size() == 2);
    CHECK(grid.Groups(GroupKind::kExpertModelParallel) ==
          Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
    const RankView r5 = *grid.ForRank(5);
    CHECK(r5.expert_model_parallel_rank() == 1);
    CHECK(r5.expert_data_parallel_rank() == 1);
    CHECK(r5.expert_data_parallel_group().ranks == std::vector<int>{1, 5});
    CHECK(r5.expert_tensor_model_pipeline_parallel_group().ranks ==
          std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15});  // edp 1
  }
}

TEST_CASE("RankGrid::Create rejects bad sizes with the values in the message") {
  auto not_divisible = RankGrid::Create(12, /*tp=*/4, /*pp=*/2);
  REQUIRE_FALSE(not_divisible.ok());
  CHECK(absl::IsInvalidArgument(not_divisible.status()));
  const std::string msg(not_divisible.status().message());
  CHECK(msg.find("world_size 12") != std::string::npos);
  CHECK(msg.find("= 8") != std::string::npos);

  auto expert = RankGrid::Create(8, /*tp=*/2, /*pp=*/1, /*cp=*/1, /*ep=*/8);
  REQUIRE_FALSE(expert.ok());
  CHECK(std::string(expert.status().message()).find("expert model (8)") != std::string::npos);

  auto zero = RankGrid::Create(8, /*tp=*/0, /*pp=*/1);
  REQUIRE_FALSE(zero.ok());
  CHECK(std::string(zero.status().message()).find("tensor_model_parallel_size is 0") !=
        std::string::npos);

  const RankGrid grid = MustCreate(8, 2, 2);
  CHECK_FALSE(grid.ForRank(8).ok());
  CHECK_FALSE(grid.ForRank(-1).ok());
  CHECK_FALSE(grid.Group(GroupKind::kDataParallel, 8).ok());
}

// Every kind of every grid: groups of one kind partition the ranks (embedding kinds
// excepted), and Group(kind, r) is the enumerated group holding r, with its index,
// r's position and an id unique across kinds.
TEST_CASE("RankGrid per-rank groups agree with the enumerated groups") {
  struct Case { int world, tp, pp, cp, ep, etp; };
  const Case cases[] = {{1, 1, 1, 1, 1, 0},   {16, 2, 2, 2, 2, 0}, {24, 2, 3, 2, 1, 0},
                        {32, 2, 2, 1, 4, 1},  {64, 4, 2, 2, 8, 2}, {48, 1, 3, 4, 2, 2}};
  for (const Case& c : cases) {
    const RankGrid grid = MustCreate(c.world, c.tp, c.pp, c.cp, c.ep, c.etp);
    std::set<int64_t> ids;
    size_t total_groups = 0;
    for (int k = 0; k < kNumGroupKinds; ++k) {
      const GroupKind kind = static_cast<GroupKind>(k);
      INFO("world " << c.world << " tp " << c.tp << " pp " << c.pp << " cp " << c.cp << " ep "
                    << c.ep << " kind " << GroupKindName(kind));
      const Groups groups = grid.Groups(kind);
      total_groups += groups.size();
      std::vector<int> seen(c.world, 0);
      for (size_t g = 0; g < groups.size(); ++g) {
        CHECK(std::is_sorted(groups[g].begin(), groups[g].end()));
        for (size_t i = 0; i < groups[g].size(); ++i) {
          const int r = groups[g][i];
          ++seen[r];
          const auto member = grid.Group(kind, r);
          REQUIRE(member.ok());
          REQUIRE(member->has_value());
          CHECK((*member)->ranks == groups[g]);
          CHECK((*member)->index == static_cast<int>(g));
          CHECK((*member)->rank_in_group == static_cast<int>(i));
          CHECK((*member)->global_rank() == r);
          ids.insert((*member)->id);
        }
      }
      if (kind != GroupKind::kEmbedding && kind != GroupKind::kPositionEmbedding) {
        CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      }
    }
    CHECK(ids.size() == total_groups);
    // Axis coordinates reassemble the rank in `tp-cp-ep-dp-pp` order.
    for (int r = 0; r < c.world; ++r) {
      const auto d = grid.DecoderCoordinates(r);
      CHECK(d[0] + c.tp * (d[1] + c.cp * (d[3] + grid.data_parallel_size() * d[4])) == r);
      const RankView v = *grid.ForRank(r);
      CHECK(v.tensor_model_parallel_rank() == v.tensor_model_parallel_group().rank_in_group);
      CHECK(v.pipeline_model_parallel_rank() == v.pipeline_model_parallel_group().rank_in_group);
      CHECK(v.context_parallel_rank() == v.context_parallel_group().rank_in_group);
      CHECK(v.expert_model_parallel_rank() == v.expert_model_parallel_group().rank_in_group);
      CHECK(v.expert_data_parallel_rank() == v.expert_data_parallel_group().rank_in_group);
      CHECK(v.expert_tensor_parallel_rank() == v.expert_tensor_parallel_group().rank_in_group);
      CHECK(v.data_parallel_world_size(true) == v.data_parallel_group(true).size());
      CHECK(v.expert_data_parallel_world_size() == v.expert_data_parallel_group().size());
      // The pipeline groups of the decoder and expert grids are the same (Megatron asserts it).
      CHECK(grid.ExpertCoordinates(r)[RankGrid::kPp] == d[RankGrid::kPp]);
    }
  }
}

}  // namespace
}  // namespace mxmaca::transport
