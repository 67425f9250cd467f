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

TEST_CASE("waiting for a missing rank: progress lines naming it, on rank 0 and the arrived") {
  RendezvousOptions options;
  options.master_port = FreeTcpPort();
  options.timeout = absl::Milliseconds(2500);
  options.progress_interval = absl::Milliseconds(500);
  options.timeout_hint = " (hint)";
  const int world = 3;
  auto results = RunRanks(
      world,
      [&](int rank) -> std::string {
        if (rank == 2) return "";  // never arrives
        std::string lines;
        RendezvousOptions mine = options;
        mine.progress = [&lines](const std::string& line) { lines += line + "\n"; };
        auto rv = Rendezvous::Connect(mine, rank, world);
        if (rv.ok()) return "connected without rank 2";
        return lines;  // the progress seen while waiting, then the timeout
      },
      absl::Seconds(20));
  for (int r : {0, 1}) {
    INFO("rank " << r << ":\n" << results[r].text);
    CHECK_THAT(results[r].text,
               Catch::Contains(absl::StrCat("rendezvous at 127.0.0.1:", options.master_port,
                                            ": waiting for ranks [2] of 3 (2 arrived")));
    CHECK_THAT(results[r].text, Catch::Contains("left before the timeout of 2.5s (hint)"));
    // A line every 0.5 s of a 2.5 s wait: at least three before the timeout.
    int count = 0;
    for (size_t at = 0; (at = results[r].text.find("waiting for ranks", at)) != std::string::npos;
         ++at) {
      ++count;
    }
    CHECK(count >= 3);
  }
}

TEST_CASE("a rank that cannot reach rank 0 says so while it retries") {
  RendezvousOptions options;
  options.master_port = FreeTcpPort();
  options.timeout = absl::Milliseconds(1200);
  options.progress_interval = absl::Milliseconds(400);
  std::string lines;
  options.progress = [&lines](const std::string& line) { lines += line + "\n"; };
  auto rv = Rendezvous::Connect(options, 1, 2);
  CHECK_FALSE(rv.ok());
  CHECK_THAT(lines, Catch::Contains(absl::StrCat("rendezvous: rank 1 still cannot reach rank 0 "
                                                 "at 127.0.0.1:",
                                                 options.master_port)));
  CHECK_THAT(lines, Catch::Contains("left before the timeout of 1.2s"));
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
