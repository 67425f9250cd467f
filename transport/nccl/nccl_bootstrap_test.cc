// transport/nccl/nccl_bootstrap_test.cc: the ncclUniqueId exchange without a GPU — ids are
// random 128-byte strings standing in for ncclGetUniqueId. Every rank of a 16-rank grid
// (TP2 x CP2 x PP2 x DP2, EP2) gets, for each of its groups, exactly the id that group's
// first member made; the error cases name the group and the rank; and four threads run the
// exchange over a real TCP rendezvous.
#include "transport/nccl/nccl_bootstrap.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "transport/rank_grid.h"
#include "transport/ucx/multiprocess_testing.h"
#include "transport/ucx/rendezvous.h"

namespace mxmaca::transport::nccl {
namespace {

// GroupsOf: every group of `rank` in `grid`, in GroupKind order.
std::vector<ProcessGroup> GroupsOf(const RankGrid& grid, int rank) {
  std::vector<ProcessGroup> groups;
  for (int k = 0; k < kNumGroupKinds; ++k) {
    auto g = grid.Group(static_cast<GroupKind>(k), rank);
    REQUIRE(g.ok());
    if (g->has_value()) groups.push_back(**g);
  }
  return groups;
}

// RandomIds: a MakeUniqueIdFn of fresh random ids that also appends each to `made`.
MakeUniqueIdFn RandomIds(std::mt19937_64* gen, std::vector<std::string>* made) {
  return [gen, made]() -> absl::StatusOr<std::string> {
    std::string id(kUniqueIdBytes, '\0');
    for (char& c : id) c = static_cast<char>((*gen)());
    made->push_back(id);
    return id;
  };
}

TEST_CASE("every member gets the id its group's first member made") {
  const int world = 16;
  auto grid = RankGrid::Create(world, /*tp=*/2, /*pp=*/2, /*cp=*/2, /*ep=*/2);
  REQUIRE(grid.ok());
  std::mt19937_64 gen(std::random_device{}());
  std::vector<std::vector<ProcessGroup>> groups(world);
  std::vector<std::vector<std::string>> made(world);
  std::vector<std::string> blobs;
  for (int r = 0; r < world; ++r) {
    groups[r] = GroupsOf(*grid, r);
    auto blob = EncodeRootIds(r, world, groups[r], RandomIds(&gen, &made[r]));
    REQUIRE(blob.ok());
    blobs.push_back(*blob);
  }
  // Expected: the k-th id rank r made is for the k-th of its groups whose first member is r.
  std::map<int64_t, std::string> want;
  for (int r = 0; r < world; ++r) {
    size_t k = 0;
    for (const ProcessGroup& g : groups[r]) {
      if (g.ranks[0] == r) want[g.id] = made[r].at(k++);
    }
    CHECK(k == made[r].size());
  }
  std::set<std::string> distinct;
  for (const auto& [id, bytes] : want) distinct.insert(bytes);
  CHECK(distinct.size() == want.size());
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    auto ids = DecodeUniqueIds(r, groups[r], blobs);
    REQUIRE(ids.ok());
    CHECK(ids->size() == groups[r].size());
    for (const ProcessGroup& g : groups[r]) CHECK(ids->at(g.id) == want.at(g.id));
  }
}

TEST_CASE("bootstrap errors name the group and the rank") {
  std::mt19937_64 gen(std::random_device{}());
  std::vector<std::string> made;
  ProcessGroup g;
  g.id = 33;
  g.kind = GroupKind::kDataParallel;
  g.index = 1;
  g.ranks = {4, 6};
  // Rank 6's view; rank 4 (the first member) did not list the group.
  g.rank_in_group = 1;
  std::vector<std::string> blobs(8);
  auto s = DecodeUniqueIds(6, {g}, blobs).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() == "rank 4, first member of data_parallel#1 (group 33), sent no NCCL id "
                       "for it: was the group in its list?");
  // Rank 4 lists other members for the same id.
  ProcessGroup root = g;
  root.ranks = {4, 5};
  root.rank_in_group = 0;
  blobs[4] = *EncodeRootIds(4, 8, {root}, RandomIds(&gen, &made));
  s = DecodeUniqueIds(6, {g}, blobs).status();
  CHECK(s.message() == "rank 4, first member of data_parallel#1 (group 33), lists members [4, "
                       "5], rank 6 has [4, 6]");
  // A truncated blob.
  blobs[4].pop_back();
  s = DecodeUniqueIds(6, {g}, blobs).status();
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(s.message() == absl::StrCat("NCCL id blob of rank 4 (", blobs[4].size(),
                                    " bytes) is malformed"));
  // Encoding: a group listed twice, a group without this rank, a short id.
  root.ranks = {4, 6};
  s = EncodeRootIds(4, 8, {root, root}, RandomIds(&gen, &made)).status();
  CHECK(s.message() == "group id 33 (data_parallel#1) appears twice in the group list");
  s = EncodeRootIds(5, 8, {root}, RandomIds(&gen, &made)).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  s = EncodeRootIds(4, 8, {root}, [] { return absl::StatusOr<std::string>("short"); }).status();
  CHECK(s.message() == "NCCL unique id for data_parallel#1 has 5 bytes, expected 128");
  // The all-gather must cover the world.
  s = ExchangeUniqueIds(4, 8, {root}, RandomIds(&gen, &made),
                        [](absl::string_view b) {
                          return absl::StatusOr<std::vector<std::string>>(
                              std::vector<std::string>{std::string(b)});
                        })
          .status();
  CHECK(s.message() == "the NCCL id all-gather returned 1 blobs for a world of 8");
}

TEST_CASE("four threads exchange ids over the TCP rendezvous") {
  const int world = 4;
  auto grid = RankGrid::Create(world, /*tp=*/2, /*pp=*/1);
  REQUIRE(grid.ok());
  ucx::RendezvousOptions options;
  options.master_port = ucx::FreeTcpPort();
  options.timeout = absl::Seconds(20);
  std::vector<absl::StatusOr<std::map<int64_t, std::string>>> results(world);
  std::vector<std::vector<std::string>> made(world);
  std::vector<std::vector<ProcessGroup>> groups(world);
  for (int r = 0; r < world; ++r) groups[r] = GroupsOf(*grid, r);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::mt19937_64 gen(std::random_device{}());
        auto rv = ucx::Rendezvous::Connect(options, r, world);
        if (!rv.ok()) {
          results[r] = rv.status();
          return;
        }
        results[r] = ExchangeUniqueIds(r, world, groups[r], RandomIds(&gen, &made[r]),
                                       RendezvousAllGather(rv->get()));
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].ok());
    for (const ProcessGroup& g : groups[r]) {
      // The first member's own result holds the id it made; every member must agree.
      CHECK(results[r]->at(g.id) == results[g.ranks[0]]->at(g.id));
      CHECK(results[r]->at(g.id).size() == kUniqueIdBytes);
    }
  }
  // Each group's id is one its first member made.
  for (int r = 0; r < world; ++r) {
    for (const ProcessGroup& g : groups[r]) {
      if (g.ranks[0] != r) continue;
      CHECK(std::find(made[r].begin(), made[r].end(), results[r]->at(g.id)) != made[r].end());
    }
  }
}

}  // namespace
}  // namespace mxmaca::transport::nccl
