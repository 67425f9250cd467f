// actors/checkpoint/async_writer_test.cc: --async-save's pieces: deferred WriteShard
// (snapshot) + AsyncCheckpointWriter write the same bytes as a synchronous save, from a
// copy (the caller's tensors may change at once); a failing background write names the
// path, leaves the previous checkpoint the latest and loadable, and is reported once.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/checkpoint/async_writer.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::BitEqual;
using testing::MakeTempDir;
using testing::RandomBits;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Values: two writers' shards of a [4, 6] tensor (rows 0-1, 2-3) and a scalar.
struct Values {
  std::vector<float> top = RandomBits(12, 1), bottom = RandomBits(12, 2), scalar = {3.5f};
};

void WriteAll(CheckpointWriter& w, Values& v) {
  REQUIRE(w.WriteShard("tp0", {{"model/w", {4, 6}, {0, 0}, {2, 6}, v.top.data()},
                               {"model/s", {}, {}, {}, v.scalar.data()}})
              .ok());
  REQUIRE(w.WriteShard("tp1", {{"model/w", {4, 6}, {2, 0}, {2, 6}, v.bottom.data()}}).ok());
}

const nlohmann::json kArgs = {{"seed", 1}};
const nlohmann::json kState = {{"consumed_train_samples", 80}};

absl::Status Publish(CheckpointWriter& w) { return w.Commit(kArgs, kState); }

void SaveSync(const std::string& dir, int64_t iteration, Values& v) {
  auto w = CheckpointWriter::Begin(dir, iteration);
  REQUIRE(w.ok());
  WriteAll(*w, v);
  REQUIRE(w->Commit(kArgs, kState).ok());
}

TEST_CASE("an async save writes the bytes a synchronous save writes, from a snapshot") {
  const std::string sync_dir = MakeTempDir(), async_dir = MakeTempDir();
  Values v;
  const Values original = v;
  SaveSync(sync_dir, 10, v);

  auto w = CheckpointWriter::Begin(async_dir, 10);
  REQUIRE(w.ok());
  w->DeferWrites();
  WriteAll(*w, v);
  CHECK(w->deferred_bytes() == (12 + 12 + 1) * 4);
  // Nothing is on disk yet, and the caller's tensors may change at once.
  CHECK(!fs::exists(w->temp_dir() + "/shard_tp0.safetensors"));
  for (float& x : v.top) x = 0.0f;
  v.scalar[0] = -1.0f;
  AsyncCheckpointWriter async;
  async.Start(std::make_shared<CheckpointWriter>(std::move(*w)), Publish);
  CHECK(async.in_flight());
  std::optional<AsyncSaveResult> r = async.Wait();
  REQUIRE(r.has_value());
  INFO(r->status.message());
  REQUIRE(r->status.ok());
  CHECK(r->iteration == 10);
  CHECK(r->final_dir == async_dir + "/iter_0000010");
  CHECK(!async.in_flight());
  CHECK(!async.Wait().has_value());

  for (const char* f : {"shard_tp0.safetensors", "shard_tp1.safetensors", "metadata.json"}) {
    INFO(f);
    const std::string a = Slurp(sync_dir + "/iter_0000010/" + f);
    CHECK(!a.empty());
    CHECK(a == Slurp(async_dir + "/iter_0000010/" + f));
  }
  CHECK(Slurp(async_dir + "/latest_checkpointed_iteration.txt") == "10");
  auto reader = CheckpointReader::Open(async_dir);
  REQUIRE(reader.ok());
  REQUIRE(reader->VerifyChecksums().ok());
  std::vector<float> top(12);
  REQUIRE(reader->ReadSlice("model/w", {0, 0}, {2, 6}, top.data()).ok());
  CHECK(BitEqual(top, original.top));  // the snapshot's values, not the zeroed buffer
}

TEST_CASE("TryFinish does not block while the background job runs") {
  const std::string dir = MakeTempDir();
  Values v;
  setenv(kTestSlowWriteEnv, "150", 1);
  auto w = CheckpointWriter::Begin(dir, 4);
  REQUIRE(w.ok());
  w->DeferWrites();
  WriteAll(*w, v);
  AsyncCheckpointWriter async;
  async.Start(std::make_shared<CheckpointWriter>(std::move(*w)), Publish);
  unsetenv(kTestSlowWriteEnv);
  CHECK(!async.TryFinish().has_value());  // sleeping 150 ms before the first shard
  CHECK(async.in_flight());
  CHECK(!fs::exists(dir + "/latest_checkpointed_iteration.txt"));
  std::optional<AsyncSaveResult> r;
  while (!(r = async.TryFinish())) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(r->status.ok());
  CHECK(r->write_seconds >= 0.3);  // two naps of 150 ms
  CHECK(Slurp(dir + "/latest_checkpointed_iteration.txt") == "4");
}

TEST_CASE("a failed background write names the path and keeps the previous checkpoint") {
  const std::string dir = MakeTempDir();
  Values v;
  SaveSync(dir, 10, v);
  std::vector<std::string> logged;
  SECTION("injected disk full (test hook)") {
    setenv(kTestFailWriteEnv, "20", 1);
    auto w = CheckpointWriter::Begin(dir, 20);
    REQUIRE(w.ok());
    const std::string temp = w->temp_dir();
    w->DeferWrites();
    WriteAll(*w, v);
    AsyncCheckpointWriter async([&](const std::string& line) { logged.push_back(line); });
    async.Start(std::make_shared<CheckpointWriter>(std::move(*w)), Publish);
    unsetenv(kTestFailWriteEnv);
    std::optional<AsyncSaveResult> r = async.Wait();
    REQUIRE(r.has_value());
    CHECK(absl::IsResourceExhausted(r->status));
    CHECK_THAT(std::string(r->status.message()), Catch::Contains(temp));
    CHECK_THAT(std::string(r->status.message()), Catch::Contains("No space left on device"));
    CHECK(!fs::exists(temp));  // the unpublished temp dir is removed
  }
  SECTION("a real OS error: the temp dir vanished before the write") {
    auto w = CheckpointWriter::Begin(dir, 20);
    REQUIRE(w.ok());
    const std::string temp = w->temp_dir();
    w->DeferWrites();
    WriteAll(*w, v);
    fs::remove_all(temp);
    AsyncCheckpointWriter async([&](const std::string& line) { logged.push_back(line); });
    async.Start(std::make_shared<CheckpointWriter>(std::move(*w)), Publish);
    std::optional<AsyncSaveResult> r = async.Wait();
    REQUIRE(r.has_value());
    CHECK(!r->status.ok());
    CHECK_THAT(std::string(r->status.message()), Catch::Contains(temp + "/shard_tp0"));
  }
  REQUIRE(logged.size() == 1);
  CHECK_THAT(logged[0], Catch::Contains("iteration 20"));
  CHECK_THAT(logged[0], Catch::Contains(dir + "/iter_0000020"));
  CHECK(!fs::exists(dir + "/iter_0000020"));
  CHECK(Slurp(dir + "/latest_checkpointed_iteration.txt") == "10");
  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  CHECK(reader->iteration() == 10);
  CHECK(reader->VerifyChecksums().ok());
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
