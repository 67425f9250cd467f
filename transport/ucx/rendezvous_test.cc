// transport/ucx/rendezvous_test.cc (tag multiprocess): 4 forked ranks exchange blobs over
// the TCP rendezvous; a rank that never arrives gives every arrived rank an error naming
// it within the timeout.
#include "transport/ucx/rendezvous.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "transport/ucx/multiprocess_testing.h"

namespace mxmaca::transport::ucx {
namespace {

// Blob: rank r's random-length, random-content blob for round `round` (seeded by both, so
// every process can recompute every other rank's).
std::string Blob(int r, int round) {
  std::mt19937 gen(1000 * round + r + 7);
  std::string s(std::uniform_int_distribution<int>(0, 300)(gen), '\0');
  for (char& c : s) c = static_cast<char>(gen());
  return s;
}

TEST_CASE("four ranks all-gather blobs and pass barriers") {
  RendezvousOptions options;
  options.master_port = FreeTcpPort();
  options.timeout = absl::Seconds(10);
  const int world = 4;
  auto results = RunRanks(
      world,
      [&](int rank) -> std::string {
        auto rv = Rendezvous::Connect(options, rank, world);
        if (!rv.ok()) return std::string(rv.status().message());
        for (int round = 0; round < 3; ++round) {
          auto all = (*rv)->AllGather(Blob(rank, round));
          if (!all.ok()) return std::string(all.status().message());
          if (static_cast<int>(all->size()) != world) return "wrong table size";
          for (int q = 0; q < world; ++q) {
            if ((*all)[q] != Blob(q, round)) return absl::StrCat("round ", round, ": blob of ", q);
          }
          absl::Status b = (*rv)->Barrier();
          if (!b.ok()) return std::string(b.message());
        }
        return "";
      },
      absl::Seconds(30));
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    CHECK(results[r].text == "");
    CHECK(results[r].exit_code == 0);
  }
}

TEST_CASE("a rank that never arrives: a clear error on every arrived rank") {
  RendezvousOptions options;
  options.master_port = FreeTcpPort();
  options.timeout = absl::Seconds(2);
  const int world = 4;
  const absl::Time start = absl::Now();
  auto results = RunRanks(
      world,
      [&](int rank) -> std::string {
        if (rank == 2) return "";  // never arrives
        auto rv = Rendezvous::Connect(options, rank, world);
        if (rv.ok()) return "connected without rank 2";
        return std::string(rv.status().ToString());
      },
      absl::Seconds(20));
  const absl::Duration took = absl::Now() - start;
  CHECK(took < absl::Seconds(8));  // timeout 2 s (+ up to 5 s worker grace, not needed here)
  CHECK(results[2].text == "");
  for (int r : {0, 1, 3}) {
    INFO("rank " << r << ": " << results[r].text);
    CHECK_THAT(results[r].text, Catch::Contains("DEADLINE_EXCEEDED"));
    CHECK_THAT(results[r].text, Catch::Contains("ranks [2] of 4 did not arrive at 127.0.0.1:"));
  }
}

TEST_CASE("no rank 0: workers give up naming the address") {
  RendezvousOptions options;
  options.master_port = FreeTcpPort();
  options.timeout = absl::Milliseconds(300);
  auto results = RunRanks(
      2,
      [&](int rank) -> std::string {
        if (rank == 0) return "";
        auto rv = Rendezvous::Connect(options, rank, 2);
        return rv.ok() ? "connected" : std::string(rv.status().ToString());
      },
      absl::Seconds(20));
  CHECK_THAT(results[1].text, Catch::Contains("UNAVAILABLE"));
  CHECK_THAT(results[1].text,
             Catch::Contains(absl::StrCat("rank 1 could not connect to rank 0 at 127.0.0.1:",
                                          options.master_port)));
}

TEST_CASE("bad arguments") {
  RendezvousOptions options;
  CHECK(Rendezvous::Connect(options, 3, 2).status().code() == absl::StatusCode::kInvalidArgument);
  options.master_port = 0;
  CHECK(Rendezvous::Connect(options, 0, 2).status().code() == absl::StatusCode::kInvalidArgument);
  options.master_port = 1234;
  auto single = Rendezvous::Connect(options, 0, 1);  // world of one: no sockets
  REQUIRE(single.ok());
  auto all = (*single)->AllGather("x");
  REQUIRE(all.ok());
  CHECK(*all == std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace mxmaca::transport::ucx
