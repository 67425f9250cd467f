// transport/rank_grid_parity_test.cc: RankGrid's groups against a Python port of
// Megatron-Core's RankGenerator / generate_masked_orthogonal_rank_groups
// (transport/tests/megatron_rank_groups.py, run with /usr/bin/python3) for many
// (world, tp, pp, cp, ep, etp) combinations, including world 512 = TP8 x PP8 x DP8.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transport/rank_grid.h"

namespace mxmaca::transport {
namespace {

struct Case { int world, tp, pp, cp, ep, etp; };

std::vector<int> Divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

// Cases: fixed ones from the task and Megatron's docs, plus a seeded random sample of
// every valid combination for several world sizes (all with tp*cp*pp | world and
// etp*ep*pp | world).
std::vector<Case> MakeCases() {
  std::vector<Case> cases = {{16, 2, 4, 1, 1, 0}, {8, 4, 1, 2, 1, 0},   {512, 8, 8, 1, 1, 0},
                             {512, 8, 8, 2, 4, 0}, {512, 4, 4, 4, 8, 1}, {512, 2, 16, 2, 16, 2},
                             {1, 1, 1, 1, 1, 0},  {24, 2, 3, 2, 2, 1}};
  std::mt19937 rng(20260130);
  for (int world : {2, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
    std::vector<Case> valid;
    for (int tp : Divisors(world))
      for (int pp : Divisors(world / tp))
        for (int cp : Divisors(world / tp / pp))
          for (int ep : Divisors(world))
            for (int etp : {0, 1, 2}) {
              const int e = etp == 0 ? tp : etp;
              if (world % (static_cast<long>(e) * ep * pp) != 0) continue;
              valid.push_back({world, tp, pp, cp, ep, etp});
            }
    std::shuffle(valid.begin(), valid.end(), rng);
    if (valid.size() > 25) valid.resize(25);
    cases.insert(cases.end(), valid.begin(), valid.end());
  }
  return cases;
}

TEST_CASE("RankGrid groups equal Megatron-Core's RankGenerator groups", "[parity]") {
  const std::vector<Case> cases = MakeCases();
  std::vector<std::string> args;
  for (const Case& c : cases) {
    args.push_back(absl::StrCat(c.world, ",", c.tp, ",", c.pp, ",", c.cp, ",", c.ep, ",", c.etp));
  }
  const std::string cmd = absl::StrCat(
      "/usr/bin/python3 transport/tests/megatron_rank_groups.py ", absl::StrJoin(args, " "));
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  REQUIRE(pclose(pipe) == 0);

  size_t pos = 0, line_no = 0, groups_compared = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == std::string::npos) end = output.size();
    const nlohmann::json line = nlohmann::json::parse(output.substr(pos, end - pos));
    pos = end + 1;
    REQUIRE(line_no < cases.size());
    const Case& c = cases[line_no++];
    INFO("world " << c.world << " tp " << c.tp << " pp " << c.pp << " cp " << c.cp << " ep "
                  << c.ep << " etp " << c.etp);
    auto grid = RankGrid::Create(c.world, c.tp, c.pp, c.cp, c.ep, c.etp);
    REQUIRE(grid.ok());
    for (int k = 0; k < kNumGroupKinds; ++k) {
      const GroupKind kind = static_cast<GroupKind>(k);
      if (kind == GroupKind::kWorld) continue;
      INFO("group " << GroupKindName(kind));
      REQUIRE(line["groups"].contains(GroupKindName(kind)));
      const auto expected =
          line["groups"][GroupKindName(kind)].get<std::vector<std::vector<int>>>();
      REQUIRE(grid->Groups(kind) == expected);
      // The per-rank lookup finds the same group, with the rank's position in it.
      for (size_t g = 0; g < expected.size(); ++g) {
        for (size_t i = 0; i < expected[g].size(); ++i) {
          const auto member = grid->Group(kind, expected[g][i]);
          REQUIRE(member.ok());
          REQUIRE(member->has_value());
          CHECK((*member)->ranks == expected[g]);
          CHECK((*member)->rank_in_group == static_cast<int>(i));
        }
      }
      ++groups_compared;
    }
  }
  CHECK(line_no == cases.size());
  CHECK(groups_compared == cases.size() * (kNumGroupKinds - 1));
}

}  // namespace
}  // namespace mxmaca::transport
