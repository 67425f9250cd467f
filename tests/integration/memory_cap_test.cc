// --memory-cap-per-shard (issue 9): a cap on each rank's activation memory (its training
// stash bytes, GptStage::SetMemoryCap) that turns exceeding it into a clear out-of-memory
// error naming the rank and what it tried to allocate, never a crash.
//
// A tiny GPT at sequence 64 is run uncapped at CP 1 and CP 4 to measure each one's peak
// activation bytes per rank (CP 4 holds a quarter of every [s, ...] stash, so its peak must
// be under half of CP 1's: a check that the test's premise holds); the cap is then set to
// half of CP 1's peak: CP 1 must end with the out-of-memory error naming rank 0 and the bytes it
// tried to allocate, and CP 4 under the same cap must train to the end with the same losses
// bit for bit as uncapped (the cap only counts; it changes no arithmetic). A malformed value
// is rejected naming the flag.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "api/train/train_command.h"
#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

std::vector<std::string> Args(const ParityCorpus& corpus, int cp) {
  std::vector<std::string> a = {
      "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
      "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "1",
      "--global-batch-size", "2", "--train-iters", "2", "--lr", "1e-3",
      "--hidden-dropout", "0", "--attention-dropout", "0", "--eval-interval", "100",
      "--eval-iters", "0", "--context-parallel-size", std::to_string(cp), "--world-size",
      std::to_string(cp)};
  const std::vector<std::string> common = corpus.CommonArgs(1000);
  a.insert(a.end(), common.begin(), common.end());
  return a;
}

std::vector<std::string> Plus(std::vector<std::string> a, std::vector<std::string> more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST_CASE("--memory-cap-per-shard: CP 1 over the cap fails naming the rank, CP 4 fits") {
  ParityCorpus corpus("memory_cap");
  const Run cp1 = corpus.Train("cp1", Args(corpus, 1), 2);
  const Run cp4 = corpus.Train("cp4", Args(corpus, 4), 2);
  const int64_t p1 = cp1.summary.peak_activation_bytes;
  const int64_t p4 = cp4.summary.peak_activation_bytes;
  INFO("peak activation bytes per rank: CP 1 " << p1 << ", CP 4 " << p4);
  REQUIRE(p4 > 0);
  REQUIRE(2 * p4 < p1);
  const std::string cap = std::to_string(p1 / 2);

  std::string log;
  auto failed = api::Train(Plus(Args(corpus, 1), {"--memory-cap-per-shard", cap}),
                           [&](const std::string& line) { log += line + "\n"; });
  INFO(log);
  // The run starts and ends with the error (the binary prints it and exits 1: RunTrain).
  REQUIRE(failed.ok());
  REQUIRE_FALSE(failed->ok);
  const std::string msg = failed->error;
  INFO(msg);
  CHECK(msg.find("out of memory: shard rank 0 (pipeline stage 0, tensor rank 0, context rank "
                 "0, data rank 0): allocating ") != std::string::npos);
  CHECK(msg.find(" bytes for the ") != std::string::npos);
  CHECK(msg.find("of the " + cap + "-byte cap (--memory-cap-per-shard") != std::string::npos);

  const Run capped =
      corpus.Train("cp4 capped", Plus(Args(corpus, 4), {"--memory-cap-per-shard", cap}), 2);
  CHECK(capped.summary.train_losses == cp4.summary.train_losses);
  CHECK(capped.summary.peak_activation_bytes == p4);
}

TEST_CASE("--memory-cap-per-shard rejects a malformed value, naming the flag") {
  ParityCorpus corpus("memory_cap_bad");
  auto s = api::Train(Plus(Args(corpus, 1), {"--memory-cap-per-shard", "12Q"}),
                      [](const std::string&) {});
  REQUIRE_FALSE(s.ok());
  INFO(s.status().message());
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.status().message()).find("--memory-cap-per-shard \"12Q\"") !=
        std::string::npos);
}

}  // namespace
}  // namespace mxmaca::testing
