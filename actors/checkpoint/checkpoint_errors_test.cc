// actors/checkpoint/checkpoint_errors_test.cc: crashes mid-save, half-written and corrupt
// checkpoints, invalid shardings and misuse — each must give a clear error naming the file
// (or tensor), never a crash or a silently wrong load.
#include <catch2/catch.hpp>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::BitEqual;
using testing::MakeTempDir;
using testing::RandomFloats;

using Catch::Matchers::Contains;

const std::vector<int64_t> kShape = {8, 6};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// SaveWhole: commits iteration `it` holding "model/w" = values (two row shards).
void SaveWhole(const std::string& dir, int64_t it, const std::vector<float>& values) {
  auto w = CheckpointWriter::Begin(dir, it);
  REQUIRE(w.ok());
  REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, {4, 6}, values.data()}}).ok());
  REQUIRE(w->WriteShard("tp1", {{"model/w", kShape, {4, 0}, {4, 6}, values.data() + 24}}).ok());
  absl::Status st = w->Commit({{"seed", 1}}, {{"consumed_train_samples", it * 8}});
  INFO(st.ToString());
  REQUIRE(st.ok());
}

std::vector<float> LoadWhole(const CheckpointReader& r) {
  std::vector<float> out(48);
  REQUIRE(r.ReadSlice("model/w", {0, 0}, kShape, out.data()).ok());
  return out;
}

TEST_CASE("a crash mid-save leaves the previous checkpoint and tracker untouched",
          "[checkpoint]") {
  const std::string dir = MakeTempDir();
  const std::vector<float> v10 = RandomFloats(48, 1), v20 = RandomFloats(48, 2);
  SaveWhole(dir, 10, v10);
  const std::string latest = dir + "/latest_checkpointed_iteration.txt";
  CHECK(ReadBytes(latest) == "10");  // Megatron's tracker: the number, no newline

  SECTION("writer alive, shards written, no Commit") {
    auto w = CheckpointWriter::Begin(dir, 20);
    REQUIRE(w.ok());
    REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, kShape, v20.data()}}).ok());
    auto r = CheckpointReader::Open(dir);
    REQUIRE(r.ok());
    CHECK(r->iteration() == 10);
    CHECK(BitEqual(LoadWhole(*r), v10));
    CHECK(ReadBytes(latest) == "10");
    auto r20 = CheckpointReader::Open(dir, 20);
    REQUIRE_FALSE(r20.ok());
    CHECK(absl::IsNotFound(r20.status()));
    CHECK_THAT(std::string(r20.status().message()), Contains("interrupted"));
  }
  SECTION("process killed after WriteShard (fork + _exit, no destructors)") {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto w = CheckpointWriter::Begin(dir, 20);
      if (!w.ok()) _exit(2);
      if (!w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, kShape, v20.data()}}).ok()) {
        _exit(3);
      }
      _exit(0);  // dies before Commit; the temp dir stays behind
    }
    int wstatus = 0;
    REQUIRE(waitpid(pid, &wstatus, 0) == pid);
    REQUIRE(WIFEXITED(wstatus));
    REQUIRE(WEXITSTATUS(wstatus) == 0);
    int temps = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      temps += e.path().filename().string().rfind("iter_0000020.tmp-", 0) == 0;
    }
    CHECK(temps == 1);
    auto r = CheckpointReader::Open(dir);
    REQUIRE(r.ok());
    CHECK(r->iteration() == 10);
    CHECK(r->state()["consumed_train_samples"] == 80);
    CHECK(BitEqual(LoadWhole(*r), v10));
    CHECK(ReadBytes(latest) == "10");
    // A later save of the same iteration is not disturbed by the leftover, and removes it:
    // its writer is gone (issue 22: leftovers of killed saves must not pile up).
    SaveWhole(dir, 20, v20);
    temps = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      temps += e.path().filename().string().find(".tmp-") != std::string::npos;
    }
    CHECK(temps == 0);
    auto r2 = CheckpointReader::Open(dir);
    REQUIRE(r2.ok());
    CHECK(r2->iteration() == 20);
    CHECK(BitEqual(LoadWhole(*r2), v20));
  }
  SECTION("abandoned writer removes its temp dir") {
    { auto w = CheckpointWriter::Begin(dir, 30); REQUIRE(w.ok()); }
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir)) (void)e, ++entries;
    CHECK(entries == 2);  // iter_0000010 and the tracker
  }
}

TEST_CASE("half-written, missing and garbled checkpoints give errors naming the file",
          "[checkpoint]") {
  const std::string dir = MakeTempDir();
  const std::vector<float> v = RandomFloats(48, 3);
  SaveWhole(dir, 5, v);
  const std::string iter = dir + "/iter_0000005";
  const std::string latest = dir + "/latest_checkpointed_iteration.txt";

  SECTION("iter dir without metadata.json") {
    fs::remove(iter + "/metadata.json");
    auto r = CheckpointReader::Open(dir);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains("half-written"));
    CHECK_THAT(std::string(r.status().message()), Contains(iter));
  }
  SECTION("missing load dir") {
    auto r = CheckpointReader::Open(dir + "/nope");
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsNotFound(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains(dir + "/nope"));
  }
  SECTION("missing tracker file lists complete checkpoints") {
    fs::remove(latest);
    auto r = CheckpointReader::Open(dir);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsNotFound(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains("latest_checkpointed_iteration.txt"));
    CHECK_THAT(std::string(r.status().message()), Contains("iter_0000005"));
    CHECK(CheckpointReader::Open(dir, 5).ok());
  }
  SECTION("garbled tracker file") {
    for (const char* bad : {"", "abc", "12x", "-3", "99999999999999999999999"}) {
      WriteBytes(latest, bad);
      auto r = CheckpointReader::Open(dir);
      INFO("tracker holds '" << bad << "'");
      REQUIRE_FALSE(r.ok());
      CHECK(absl::IsDataLoss(r.status()));
      CHECK_THAT(std::string(r.status().message()), Contains(latest));
    }
    WriteBytes(latest, "5\n");  // tolerated: written by hand or by other tools
    CHECK(CheckpointReader::Open(dir).ok());
    WriteBytes(latest, "release");
    CHECK(absl::IsUnimplemented(CheckpointReader::Open(dir).status()));
  }
  SECTION("tracker points at a missing iteration") {
    WriteBytes(latest, "6");
    auto r = CheckpointReader::Open(dir);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsNotFound(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains("iter_0000006"));
  }
  SECTION("metadata.json is not JSON / has a wrong field") {
    const std::string meta = iter + "/metadata.json";
    std::string text = ReadBytes(meta);
    WriteBytes(meta, text.substr(0, text.size() / 2));
    auto r = CheckpointReader::Open(dir);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains(meta));
    CHECK_THAT(std::string(r.status().message()), Contains("not valid JSON"));
    nlohmann::json j = nlohmann::json::parse(text);
    j["iteration"] = 6;
    WriteBytes(meta, j.dump());
    CHECK_THAT(std::string(CheckpointReader::Open(dir).status().message()),
               Contains("iteration is 6"));
    j = nlohmann::json::parse(text);
    j["tensors"]["model/w"]["shards"][0]["offsets"] = {1, 0};  // now overlapping
    WriteBytes(meta, j.dump());
    CHECK_THAT(std::string(CheckpointReader::Open(dir).status().message()),
               Contains("overlaps"));
    j = nlohmann::json::parse(text);
    j["tensors"]["model/w"]["shards"][0]["file"] = "../../etc/passwd";
    WriteBytes(meta, j.dump());
    CHECK_THAT(std::string(CheckpointReader::Open(dir).status().message()),
               Contains("not a shard file name"));
  }
  SECTION("shard file missing") {
    fs::remove(iter + "/shard_tp1.safetensors");
    auto r = CheckpointReader::Open(dir);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains("shard_tp1.safetensors"));
  }
}

TEST_CASE("truncated or corrupt shard files are detected at Open", "[checkpoint]") {
  const std::string dir = MakeTempDir();
  SaveWhole(dir, 1, RandomFloats(48, 4));
  const std::string shard = dir + "/iter_0000001/shard_tp0.safetensors";
  const std::string good = ReadBytes(shard);
  auto open_error = [&](const std::string& bytes) {
    WriteBytes(shard, bytes);
    auto r = CheckpointReader::Open(dir);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Contains(shard));
    return std::string(r.status().message());
  };
  CHECK_THAT(open_error(good.substr(0, good.size() - 4)), Contains("truncated"));
  CHECK_THAT(open_error(good.substr(0, 40)), Contains("truncated"));
  CHECK_THAT(open_error(good.substr(0, 5)), Contains("truncated"));
  CHECK_THAT(open_error(""), Contains("truncated"));
  CHECK_THAT(open_error(good + "extra"), Contains("corrupt"));
  std::string bad = good;
  bad[7] = '\x7f';  // header length field ~9e18
  CHECK_THAT(open_error(bad), Contains("header length"));
  bad = good;
  bad[8] = 'X';  // JSON starts with garbage
  CHECK_THAT(open_error(bad), Contains("not valid JSON"));
  bad = good;
  bad.replace(bad.find("F32"), 3, "F16");
  CHECK_THAT(open_error(bad), Contains("F32"));
  bad = good;
  bad.replace(bad.find("[4,6]"), 5, "[6,4]");  // same size, shape differs from the index
  CHECK_THAT(open_error(bad), Contains("[6, 4]"));
  WriteBytes(shard, good);
  CHECK(CheckpointReader::Open(dir).ok());
  // A flipped bit in tensor data passes the header checks; the checksum finds it.
  bad = good;
  bad[bad.size() - 7] ^= 0x10;
  WriteBytes(shard, bad);
  auto r = CheckpointReader::Open(dir);
  REQUIRE(r.ok());
  absl::Status st = r->VerifyChecksums();
  CHECK(absl::IsDataLoss(st));
  CHECK_THAT(std::string(st.message()), Contains(shard));
  CHECK_THAT(std::string(st.message()), Contains("CRC-32C"));
  WriteBytes(shard, good);
  r = CheckpointReader::Open(dir);
  REQUIRE(r.ok());
  CHECK(r->VerifyChecksums().ok());
}

TEST_CASE("Commit rejects overlapping, incomplete and inconsistent shardings",
          "[checkpoint]") {
  const std::string dir = MakeTempDir();
  const std::vector<float> v = RandomFloats(48, 5);
  auto w = CheckpointWriter::Begin(dir, 2);
  REQUIRE(w.ok());
  SECTION("overlap") {
    REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, {5, 6}, v.data()}}).ok());
    REQUIRE(w->WriteShard("tp1", {{"model/w", kShape, {4, 0}, {4, 6}, v.data()}}).ok());
    absl::Status st = w->Commit(nlohmann::json::object(), nlohmann::json::object());
    CHECK(absl::IsFailedPrecondition(st));
    CHECK_THAT(std::string(st.message()), Contains("model/w"));
    CHECK_THAT(std::string(st.message()), Contains("overlaps"));
  }
  SECTION("gap") {
    REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, {8, 3}, v.data()}}).ok());
    REQUIRE(w->WriteShard("tp1", {{"model/w", kShape, {0, 3}, {5, 3}, v.data()}}).ok());
    absl::Status st = w->Commit(nlohmann::json::object(), nlohmann::json::object());
    CHECK(absl::IsFailedPrecondition(st));
    CHECK_THAT(std::string(st.message()), Contains("cover 39 of 48"));
    CHECK_THAT(std::string(st.message()), Contains("element [5, 3] is in no shard"));
  }
  SECTION("full shapes disagree") {
    REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, {4, 6}, v.data()}}).ok());
    absl::Status st = w->WriteShard("tp1", {{"model/w", {16, 6}, {4, 0}, {4, 6}, v.data()}});
    CHECK(absl::IsInvalidArgument(st));
    CHECK_THAT(std::string(st.message()), Contains("[16, 6]"));
  }
  SECTION("shard outside its tensor, bad names, null data, reused writer") {
    CHECK(absl::IsInvalidArgument(
        w->WriteShard("tp0", {{"model/w", kShape, {6, 0}, {4, 6}, v.data()}})));
    CHECK(absl::IsInvalidArgument(
        w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, {4}, v.data()}})));
    CHECK(absl::IsInvalidArgument(
        w->WriteShard("../x", {{"model/w", kShape, {0, 0}, kShape, v.data()}})));
    CHECK(absl::IsInvalidArgument(
        w->WriteShard("tp0", {{"model/w#1", kShape, {0, 0}, kShape, v.data()}})));
    CHECK(absl::IsInvalidArgument(
        w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, kShape, nullptr}})));
    CHECK(absl::IsInvalidArgument(w->WriteShard(
        "tp0", {{"model/w", {4, 6}, {0, 0}, {4, 6}, v.data()},
                {"model/w", kShape, {4, 0}, {4, 6}, v.data()}})));
    REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, kShape, v.data()}}).ok());
    CHECK(absl::IsInvalidArgument(
        w->WriteShard("tp0", {{"model/v", kShape, {0, 0}, kShape, v.data()}})));
    CHECK(absl::IsInvalidArgument(w->Commit(nlohmann::json::array(), {})));
    REQUIRE(w->Commit(nlohmann::json::object(), nlohmann::json::object()).ok());
    CHECK(absl::IsFailedPrecondition(
        w->Commit(nlohmann::json::object(), nlohmann::json::object())));
    CHECK(absl::IsFailedPrecondition(
        w->WriteShard("tp1", {{"model/v", kShape, {0, 0}, kShape, v.data()}})));
  }
  // Nothing was published by a failed Commit.
  if (!fs::exists(dir + "/iter_0000002")) {
    CHECK_FALSE(fs::exists(dir + "/latest_checkpointed_iteration.txt"));
  }
}

TEST_CASE("ReadSlice and ReadShard report unknown names and shape mismatches",
          "[checkpoint]") {
  const std::string dir = MakeTempDir();
  SaveWhole(dir, 4, RandomFloats(48, 6));
  auto r = CheckpointReader::Open(dir);
  REQUIRE(r.ok());
  std::vector<float> out(200);
  absl::Status st = r->ReadSlice("model/nope", {0, 0}, {1, 1}, out.data());
  CHECK(absl::IsNotFound(st));
  CHECK_THAT(std::string(st.message()), Contains("model/nope"));
  st = r->ReadSlice("model/w", {4, 0}, {5, 6}, out.data());
  CHECK(absl::IsInvalidArgument(st));
  CHECK_THAT(std::string(st.message()), Contains("checkpoint has model/w [8, 6]"));
  CHECK(absl::IsInvalidArgument(r->ReadSlice("model/w", {0}, {8}, out.data())));
  st = r->ReadShard("model/w", {16, 6}, {0, 0}, {4, 6}, out.data());
  CHECK(absl::IsInvalidArgument(st));
  CHECK_THAT(std::string(st.message()),
             Contains("checkpoint has model/w [8, 6], model expects [16, 6]"));
  CHECK(r->ReadShard("model/w", kShape, {0, 0}, {4, 6}, out.data()).ok());
}


// Random edits of metadata.json and of a shard file: Open returns an error or a reader
// whose reads succeed; it never crashes (checked under ASan as well).
TEST_CASE("mutated metadata.json and shard files never crash the reader", "[checkpoint]") {
  const std::string dir = MakeTempDir();
  SaveWhole(dir, 3, RandomFloats(48, 8));
  const std::string meta = dir + "/iter_0000003/metadata.json";
  const std::string shard = dir + "/iter_0000003/shard_tp1.safetensors";
  const std::string good_meta = ReadBytes(meta), good_shard = ReadBytes(shard);
  std::mt19937 gen(5);
  int opened = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool edit_meta = trial % 2 == 0;
    std::string bytes = edit_meta ? good_meta : good_shard;
    for (int e = 1 + gen() % 3; e > 0; --e) {
      const size_t pos = gen() % bytes.size();
      bytes[pos] = "{}[],:\"0123456789 -"[gen() % 19];
    }
    WriteBytes(edit_meta ? meta : shard, bytes);
    auto r = CheckpointReader::Open(dir);
    if (r.ok()) {
      ++opened;
      for (const std::string& name : r->TensorNames()) {  // a name may have been edited
        std::vector<int64_t> full = *r->FullShape(name);
        std::vector<float> out(testing::NumElementsOf(full));
        CHECK(r->ReadSlice(name, std::vector<int64_t>(full.size(), 0), full, out.data()).ok());
      }
    }
    WriteBytes(edit_meta ? meta : shard, edit_meta ? good_meta : good_shard);
  }
  CHECK(opened < 400);
  CHECK(CheckpointReader::Open(dir).ok());
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
