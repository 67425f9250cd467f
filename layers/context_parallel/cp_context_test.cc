// layers/context_parallel/cp_context_test.cc: the CP context from the rank grid, its
// validation, the original positions of a rank's tokens and the runs that key dropout.
#include "layers/context_parallel/cp_context.h"

#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "transport/inprocess_communicator.h"

namespace mxmaca::layers::cp {
namespace {

TEST_CASE("ContextParallelContextFor follows the grid's CP group (tp-cp-ep-dp-pp order)") {
  // TP 2 x CP 2 x DP 2: rank = (d * 2 + c) * 2 + t.
  transport::InProcessHub hub(8);
  auto grid = transport::RankGrid::Create(8, /*tp=*/2, /*pp=*/1, /*cp=*/2);
  REQUIRE(grid.ok());
  for (int rank = 0; rank < 8; ++rank) {
    auto view = grid->ForRank(rank);
    REQUIRE(view.ok());
    const ContextParallelContext cp = ContextParallelContextFor(*view, hub.ForRank(rank));
    CHECK(cp.size == 2);
    CHECK(cp.rank == (rank / 2) % 2);
    REQUIRE(cp.group.size() == 2);
    const int t = rank % 2, d = rank / 4;
    CHECK(cp.group.ranks[0] == (d * 2 + 0) * 2 + t);
    CHECK(cp.group.ranks[1] == (d * 2 + 1) * 2 + t);
    CHECK(ValidateContextParallelContext(cp).ok());
  }
}

TEST_CASE("ValidateContextParallelContext rejects inconsistent contexts") {
  ContextParallelContext cp;
  CHECK(ValidateContextParallelContext(cp).ok());  // size 1: no CP
  cp.size = 2;
  CHECK_FALSE(ValidateContextParallelContext(cp).ok());  // no communicator
  transport::InProcessHub hub(2);
  cp.comm = hub.ForRank(0);
  CHECK_FALSE(ValidateContextParallelContext(cp).ok());  // group of 0 ranks
  cp.group.ranks = {0, 1};
  cp.group.rank_in_group = 1;
  CHECK_FALSE(ValidateContextParallelContext(cp).ok());  // rank 0 but index 1
  cp.group.rank_in_group = 0;
  CHECK(ValidateContextParallelContext(cp).ok());
  cp.rank = 2;
  CHECK_FALSE(ValidateContextParallelContext(cp).ok());
}

TEST_CASE("CpRowPositions and CpLocalTokenRuns cover every original position exactly once") {
  std::mt19937 rng(std::random_device{}());
  for (int64_t cp_size : {1, 2, 3, 4}) {
    for (int64_t sp : {1, 2, 4}) {
      const int64_t b = 1 + rng() % 3;
      const int64_t seq = 2 * cp_size * sp * (1 + rng() % 4);
      auto layout = MakeCpLayout(seq, cp_size, sp, sp > 1);
      REQUIRE(layout.ok());
      INFO("CP " << cp_size << " SP " << sp << " b " << b << " s " << seq);
      std::multiset<int64_t> rows;  // global rows b s, from the runs of every (CP, SP) rank
      for (int64_t r = 0; r < cp_size; ++r) {
        const std::vector<int32_t> pos = CpRowPositions(*layout, r, b);
        REQUIRE(static_cast<int64_t>(pos.size()) == b * layout->LocalSeq());
        for (int64_t i = 0; i < b * layout->LocalSeq(); ++i) {
          CHECK(pos[i] == layout->GlobalPosition(r, i % layout->LocalSeq()));
        }
        for (int64_t q = 0; q < sp; ++q) {
          const int64_t n = layout->LocalSeq() / sp;
          int64_t covered = 0;
          for (const CpTokenRun& run : CpLocalTokenRuns(*layout, r, b, q, sp)) {
            REQUIRE(run.rows > 0);
            for (int64_t k = 0; k < run.rows; ++k) {
              // Local row -> (sequence, local position) -> original row.
              const int64_t local = run.local_row + k, bi = local / n, t = q * n + local % n;
              CHECK(run.global_row + k == bi * seq + layout->GlobalPosition(r, t));
              rows.insert(run.global_row + k);
            }
            covered += run.rows;
          }
          CHECK(covered == b * n);
        }
      }
      REQUIRE(static_cast<int64_t>(rows.size()) == b * seq);
      int64_t expect = 0;
      for (int64_t row : rows) CHECK(row == expect++);
    }
  }
}

}  // namespace
}  // namespace mxmaca::layers::cp
