// actors/checkpoint/checkpoint_bench.cc: save/load throughput of a ~100 MB checkpoint
// (12 tensors of [1024, 2048] fp32, TP=2 row shards written by 2 threads), against a
// baseline measured in the same run: one plain file of the same bytes written + fsynced,
// and read back with read(2).
//   bazel run -c opt //actors/checkpoint:checkpoint_bench [-- DIR]
// Loads are measured warm (page cache) and cold (pages evicted with
// posix_fadvise(DONTNEED) on our own files; nothing system-wide is dropped).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

constexpr int kTensors = 12;
constexpr int64_t kRows = 1024, kCols = 2048;
constexpr double kMB = 1e6;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Evict(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

void Die(const absl::Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    std::exit(1);
  }
}

int Main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : testing::MakeTempDir();
  std::filesystem::create_directories(root);
  std::vector<std::vector<float>> values;
  for (int t = 0; t < kTensors; ++t) values.push_back(testing::RandomFloats(kRows * kCols, t));
  const double bytes = kTensors * kRows * kCols * 4.0;
  const std::vector<int64_t> full = {kRows, kCols};

  // Baseline: the same bytes as one file, write + fsync, then read(2) cold.
  const std::string plain = root + "/plain.bin";
  double t0 = Now();
  {
    int fd = ::open(plain.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (const auto& v : values) {
      if (::write(fd, v.data(), v.size() * 4) != static_cast<ssize_t>(v.size() * 4)) return 1;
    }
    ::fsync(fd);
    ::close(fd);
  }
  const double base_save = Now() - t0;
  Evict(root);
  std::vector<float> sink(kRows * kCols);
  t0 = Now();
  {
    int fd = ::open(plain.c_str(), O_RDONLY);
    for (int t = 0; t < kTensors; ++t) {
      if (::read(fd, sink.data(), sink.size() * 4) != static_cast<ssize_t>(sink.size() * 4)) {
        return 1;
      }
    }
    ::close(fd);
  }
  const double base_load = Now() - t0;

  // Save: 2 writer threads (TP ranks), each its half of the rows of every tensor.
  const std::string save = root + "/ckpt";
  t0 = Now();
  auto writer = CheckpointWriter::Begin(save, 1000);
  Die(writer.status());
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<TensorShardView> views;
      for (int t = 0; t < kTensors; ++t) {
        views.push_back({"model/decoder.layers." + std::to_string(t) + ".mlp.linear_fc1.weight",
                         full, {r * kRows / 2, 0}, {kRows / 2, kCols},
                         values[t].data() + r * kRows / 2 * kCols});
      }
      results[r] = writer->WriteShard("tp" + std::to_string(r), views);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& st : results) Die(st);
  Die(writer->Commit({{"bench", true}}, nlohmann::json::object()));
  const double save_s = Now() - t0;

  // Load into another sharding (2 column shards per tensor), warm then cold.
  auto load = [&](bool cold) {
    if (cold) Evict(save);
    const double start = Now();
    auto reader = CheckpointReader::Open(save);
    Die(reader.status());
    Die(reader->VerifyChecksums());
    std::vector<float> half(kRows * kCols / 2);
    for (const std::string& name : reader->TensorNames()) {
      for (int c = 0; c < 2; ++c) {
        Die(reader->ReadSlice(name, {0, c * kCols / 2}, {kRows, kCols / 2}, half.data()));
      }
    }
    return Now() - start;
  };
  const double warm_s = load(false);
  const double cold_s = load(true);

  std::printf("checkpoint: %.1f MB, %d tensors [%lld, %lld] fp32, saved as 2 row shards\n",
              bytes / kMB, kTensors, static_cast<long long>(kRows),
              static_cast<long long>(kCols));
  std::printf("save (2 writer threads, CRC, fsync, commit): %4.3f s  %8.0f MB/s  "
              "(plain write+fsync %.3f s, ratio %.2f)\n",
              save_s, bytes / kMB / save_s, base_save, save_s / base_save);
  std::printf("load (verify CRC + 2 column shards), cold: %4.3f s  %8.0f MB/s  "
              "(plain read(2) cold %.3f s, ratio %.2f)\n",
              cold_s, bytes / kMB / cold_s, base_load, cold_s / base_load);
  std::printf("load (verify CRC + 2 column shards), warm: %4.3f s  %8.0f MB/s\n", warm_s,
              bytes / kMB / warm_s);
  if (argc <= 1) std::filesystem::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint

int main(int argc, char** argv) { return mxmaca::actors::checkpoint::Main(argc, argv); }
