// actors/checkpoint/checkpoint_test.cc: save/load round trips, resharding between
// layouts, concurrent writers, re-saving an iteration.
#include <catch2/catch.hpp>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <list>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

using testing::BitEqual;
using testing::ExtractRegion;
using testing::MakeTempDir;
using testing::NumElementsOf;
using testing::RandomBits;
using testing::RandomFloats;

// Box: a region of a logical tensor and the writer that stores it.
struct Box {
  std::string writer;
  std::vector<int64_t> offsets;
  std::vector<int64_t> shape;
};

// Logical: a logical tensor's name, full shape and full values.
struct Logical {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// SaveSharded: one checkpoint at `iteration` where tensor i is stored as boxes[i], each box
// cut out of the full values by the reference extractor and written by its writer.
void SaveSharded(const std::string& dir, int64_t iteration,
                 const std::vector<Logical>& tensors,
                 const std::vector<std::vector<Box>>& boxes, const nlohmann::json& state) {
  std::map<std::string, std::vector<TensorShardView>> views;
  std::list<std::vector<float>> keep;  // shard data; list nodes never move
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (const Box& b : boxes[i]) {
      keep.push_back(ExtractRegion(tensors[i].values, tensors[i].shape, b.offsets, b.shape));
      views[b.writer].push_back(
          {tensors[i].name, tensors[i].shape, b.offsets, b.shape, keep.back().data()});
    }
  }
  auto writer = CheckpointWriter::Begin(dir, iteration);
  REQUIRE(writer.ok());
  for (const auto& [name, v] : views) {
    absl::Status st = writer->WriteShard(name, v);
    INFO(st.ToString());
    REQUIRE(st.ok());
  }
  absl::Status st = writer->Commit({{"num_layers", 2}, {"hidden_size", 8}}, state);
  INFO(st.ToString());
  REQUIRE(st.ok());
}

std::vector<float> ReadRegion(const CheckpointReader& r, const std::string& name,
                              const std::vector<int64_t>& offsets,
                              const std::vector<int64_t>& shape) {
  std::vector<float> out(NumElementsOf(shape), -12345.0f);
  absl::Status st = r.ReadSlice(name, offsets, shape, out.data());
  INFO(st.ToString());
  REQUIRE(st.ok());
  return out;
}

TEST_CASE("round trip of several tensors, args and state", "[checkpoint]") {
  const std::string dir = MakeTempDir();
  std::vector<Logical> tensors = {
      {"model/embedding.word_embeddings.weight", {33, 8}, RandomBits(33 * 8, 1)},
      {"model/decoder.final_layernorm.weight", {8}, RandomBits(8, 2)},
      {"model/decoder.layers.0.self_attention.linear_qkv.weight", {3, 5, 7},
       RandomBits(105, 3)},
      {"optimizer/step_scale", {}, RandomBits(1, 4)},
      {"model/empty", {0, 4}, {}},
  };
  std::vector<std::vector<Box>> boxes;
  for (const Logical& t : tensors) {
    boxes.push_back({{"rank0", std::vector<int64_t>(t.shape.size(), 0), t.shape}});
  }
  const nlohmann::json state = {{"consumed_train_samples", 12800},
                                {"opt_param_scheduler", {{"num_steps", 1600}}},
                                {"rng", {{"seed", 1234}}}};
  SaveSharded(dir, 100, tensors, boxes, state);

  auto reader = CheckpointReader::Open(dir);
  INFO(reader.status().ToString());
  REQUIRE(reader.ok());
  CHECK(reader->VerifyChecksums().ok());
  CHECK(reader->iteration() == 100);
  CHECK(reader->args() == nlohmann::json({{"num_layers", 2}, {"hidden_size", 8}}));
  CHECK(reader->state() == state);
  std::vector<std::string> names = reader->TensorNames();
  CHECK(names.size() == tensors.size());
  for (const Logical& t : tensors) {
    auto shape = reader->FullShape(t.name);
    REQUIRE(shape.ok());
    CHECK(*shape == t.shape);
    std::vector<int64_t> zero(t.shape.size(), 0);
    CHECK(BitEqual(ReadRegion(*reader, t.name, zero, t.shape), t.values));
  }
}

// The same [37, 53] tensor saved under several layouts and read under several others.
TEST_CASE("a tensor saved with one sharding loads bit-identically into another",
          "[checkpoint]") {
  const std::vector<int64_t> full = {37, 53};
  const Logical t{"model/decoder.layers.3.mlp.linear_fc1.weight", full,
                  RandomBits(37 * 53, 11)};
  // Layouts: TP=2 row-parallel (uneven: 19 + 18 rows), TP=2 column-parallel, 2x2 blocks
  // written by 3 writers (one writer holds two boxes of the tensor).
  const std::map<std::string, std::vector<Box>> save_layouts = {
      {"rows", {{"tp0", {0, 0}, {19, 53}}, {"tp1", {19, 0}, {18, 53}}}},
      {"cols", {{"tp0", {0, 0}, {37, 27}}, {"tp1", {0, 27}, {37, 26}}}},
      {"blocks",
       {{"a", {0, 0}, {10, 20}},
        {"b", {0, 20}, {10, 33}},
        {"c", {10, 0}, {27, 20}},
        {"a", {10, 20}, {27, 33}}}},
  };
  const std::vector<std::vector<Box>> load_layouts = {
      {{"", {0, 0}, full}},                                              // whole
      {{"", {0, 0}, {13, 53}}, {"", {13, 0}, {12, 53}}, {"", {25, 0}, {12, 53}}},  // rows 3
      {{"", {0, 0}, {37, 26}}, {"", {0, 26}, {37, 27}}},                 // cols 2, other cut
      {{"", {5, 7}, {20, 30}}, {"", {36, 52}, {1, 1}}, {"", {3, 0}, {0, 5}}},  // odd boxes
  };
  for (const auto& [layout, boxes] : save_layouts) {
    SECTION("saved as " + layout) {
      const std::string dir = MakeTempDir();
      SaveSharded(dir, 7, {t}, {boxes}, nlohmann::json::object());
      auto reader = CheckpointReader::Open(dir, 7);
      INFO(reader.status().ToString());
      REQUIRE(reader.ok());
      for (const std::vector<Box>& load : load_layouts) {
        for (const Box& b : load) {
          INFO("region offsets " << b.offsets[0] << "," << b.offsets[1] << " shape "
                                 << b.shape[0] << "," << b.shape[1]);
          CHECK(BitEqual(ReadRegion(*reader, t.name, b.offsets, b.shape),
                         ExtractRegion(t.values, full, b.offsets, b.shape)));
        }
      }
    }
  }
}

// Random grids over a 3-D tensor: each dim cut at random points, cells given to random
// writers; random regions read back.
TEST_CASE("random 3-D shardings and random regions", "[checkpoint]") {
  std::mt19937 gen(2024);
  for (int trial = 0; trial < 5; ++trial) {
    const std::vector<int64_t> full = {int64_t(gen() % 7 + 1), int64_t(gen() % 9 + 1),
                                       int64_t(gen() % 11 + 1)};
    const Logical t{"model/t3", full, RandomBits(NumElementsOf(full), 100 + trial)};
    std::vector<std::vector<int64_t>> cuts(3);
    for (int d = 0; d < 3; ++d) {
      cuts[d] = {0};
      for (int64_t x = 1; x < full[d]; ++x) {
        if (gen() % 3 == 0) cuts[d].push_back(x);
      }
      cuts[d].push_back(full[d]);
    }
    std::vector<Box> boxes;
    for (size_t i = 0; i + 1 < cuts[0].size(); ++i) {
      for (size_t j = 0; j + 1 < cuts[1].size(); ++j) {
        for (size_t k = 0; k + 1 < cuts[2].size(); ++k) {
          boxes.push_back({"w" + std::to_string(gen() % 3),
                           {cuts[0][i], cuts[1][j], cuts[2][k]},
                           {cuts[0][i + 1] - cuts[0][i], cuts[1][j + 1] - cuts[1][j],
                            cuts[2][k + 1] - cuts[2][k]}});
        }
      }
    }
    const std::string dir = MakeTempDir();
    SaveSharded(dir, trial, {t}, {boxes}, nlohmann::json::object());
    auto reader = CheckpointReader::Open(dir);
    REQUIRE(reader.ok());
    for (int q = 0; q < 20; ++q) {
      std::vector<int64_t> off(3), shape(3);
      for (int d = 0; d < 3; ++d) {
        off[d] = gen() % (full[d] + 1);
        shape[d] = gen() % (full[d] - off[d] + 1);
      }
      CHECK(BitEqual(ReadRegion(*reader, t.name, off, shape),
                     ExtractRegion(t.values, full, off, shape)));
    }
  }
}

TEST_CASE("concurrent WriteShard from several threads", "[checkpoint]") {
  const std::string dir = MakeTempDir();
  constexpr int kWriters = 4;
  const std::vector<int64_t> full = {kWriters * 16, 24};
  const std::vector<float> w = RandomFloats(NumElementsOf(full), 5);
  const std::vector<float> m = RandomFloats(NumElementsOf(full), 6);
  auto writer = CheckpointWriter::Begin(dir, 3);
  REQUIRE(writer.ok());
  std::vector<absl::Status> results(kWriters);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWriters; ++r) {
    threads.emplace_back([&, r] {
      const std::vector<int64_t> off = {16 * r, 0}, shape = {16, 24};
      std::vector<TensorShardView> views = {
          {"model/w", full, off, shape, w.data() + 16 * 24 * r},
          {"optimizer/exp_avg/w", full, off, shape, m.data() + 16 * 24 * r}};
      results[r] = writer->WriteShard("dp0_tp" + std::to_string(r), views);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const absl::Status& st : results) CHECK(st.ok());
  REQUIRE(writer->Commit(nlohmann::json::object(), nlohmann::json::object()).ok());
  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  CHECK(BitEqual(ReadRegion(*reader, "model/w", {0, 0}, full), w));
  CHECK(BitEqual(ReadRegion(*reader, "optimizer/exp_avg/w", {0, 0}, full), m));
}

TEST_CASE("saving an iteration again replaces it; older iterations stay loadable",
          "[checkpoint]") {
  const std::string dir = MakeTempDir();
  const Logical a{"model/w", {6, 4}, RandomFloats(24, 21)};
  const Logical b{"model/w", {6, 4}, RandomFloats(24, 22)};
  const Logical c{"model/w", {6, 4}, RandomFloats(24, 23)};
  const std::vector<Box> whole = {{"r0", {0, 0}, {6, 4}}};
  SaveSharded(dir, 10, {a}, {whole}, {{"tag", "a"}});
  SaveSharded(dir, 20, {b}, {whole}, {{"tag", "b"}});
  SaveSharded(dir, 20, {c}, {{{"r0", {0, 0}, {3, 4}}, {"r1", {3, 0}, {3, 4}}}},
              {{"tag", "c"}});
  auto latest = CheckpointReader::Open(dir);
  REQUIRE(latest.ok());
  CHECK(latest->iteration() == 20);
  CHECK(latest->state()["tag"] == "c");
  CHECK(BitEqual(ReadRegion(*latest, "model/w", {0, 0}, {6, 4}), c.values));
  auto old = CheckpointReader::Open(dir, 10);
  REQUIRE(old.ok());
  CHECK(BitEqual(ReadRegion(*old, "model/w", {0, 0}, {6, 4}), a.values));
  // Only the two iteration dirs and the tracker remain (no temp or swapped-out dirs).
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 3);
}


// Multi-process save: the coordinator Begins, other processes Attach to its temp dir and
// write their own shard files; the coordinator's Commit indexes them all.
TEST_CASE("processes attached to one save write shards the coordinator commits",
          "[checkpoint]") {
  const std::string dir = MakeTempDir();
  const std::vector<int64_t> full = {12, 10};
  const std::vector<float> w = RandomBits(120, 31);
  const std::vector<float> m = RandomBits(120, 32);
  auto coordinator = CheckpointWriter::Begin(dir, 9);
  REQUIRE(coordinator.ok());
  const std::string temp = coordinator->temp_dir();
  // Process p (0..2) holds rows [4p, 4p + 4) of both tensors; p = 0 is the coordinator.
  auto write_rows = [&](CheckpointWriter& writer, int p) {
    const std::vector<int64_t> off = {4 * p, 0}, shape = {4, 10};
    std::vector<TensorShardView> views = {{"model/w", full, off, shape, w.data() + 40 * p},
                                          {"optimizer/exp_avg/w", full, off, shape,
                                           m.data() + 40 * p}};
    return writer.WriteShard("pp0_tp" + std::to_string(p), views);
  };
  auto spawn = [&](int p, const std::string& writer_name_override) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto attached = CheckpointWriter::Attach(dir, 9, temp);
      if (!attached.ok()) _exit(2);
      absl::Status st = writer_name_override.empty()
                            ? write_rows(*attached, p)
                            : attached->WriteShard(writer_name_override, {});
      if (!st.ok()) _exit(absl::IsAlreadyExists(st) ? 4 : 3);
      if (attached->Commit(nlohmann::json::object(), nlohmann::json::object()).ok()) _exit(5);
      _exit(0);  // no destructors: as a separate process would end
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
  };
  REQUIRE(write_rows(*coordinator, 0).ok());
  CHECK(spawn(1, "") == 0);
  SECTION("all processes wrote") {
    CHECK(spawn(2, "") == 0);
    CHECK(spawn(3, "pp0_tp1") == 4);  // writer name already taken by process 1
    absl::Status st = coordinator->Commit({{"world_size", 3}}, nlohmann::json::object());
    INFO(st.ToString());
    REQUIRE(st.ok());
    auto reader = CheckpointReader::Open(dir);
    REQUIRE(reader.ok());
    CHECK(reader->VerifyChecksums().ok());  // checksums of other processes' shards too
    CHECK(BitEqual(ReadRegion(*reader, "model/w", {0, 0}, full), w));
    CHECK(BitEqual(ReadRegion(*reader, "optimizer/exp_avg/w", {2, 3}, {9, 7}),
                   ExtractRegion(m, full, {2, 3}, {9, 7})));
  }
  SECTION("a process that never wrote makes Commit fail") {
    absl::Status st = coordinator->Commit(nlohmann::json::object(), nlohmann::json::object());
    CHECK(absl::IsFailedPrecondition(st));
    CHECK_THAT(std::string(st.message()), Catch::Matchers::Contains("cover 80 of 120"));
    CHECK(spawn(2, "") == 0);  // late, but before a retried Commit
    CHECK(coordinator->Commit(nlohmann::json::object(), nlohmann::json::object()).ok());
    CHECK(CheckpointReader::Open(dir).ok());
  }
  CHECK(absl::IsInvalidArgument(CheckpointWriter::Attach(dir, 8, temp).status()));
  CHECK(absl::IsNotFound(
      CheckpointWriter::Attach(dir, 9, dir + "/iter_0000009.tmp-nope").status()));
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
