// api/preprocess/partition_writer_test.cc: Megatron's partition names (os.path.splitext,
// get_file_name) and line distribution (round-robin, sequential blocks), and the errors.
#include "api/preprocess/partition_writer.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "api/preprocess/test_files.h"

namespace mxmaca::api {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::WriteFile;

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST_CASE("names: os.path.splitext of the --input pattern, as get_file_name") {
  using P = std::pair<std::string, std::string>;
  CHECK(SplitExtension("data/kjv.jsonl") == P{"data/kjv", ".jsonl"});
  CHECK(SplitExtension("data/a.b.jsonl") == P{"data/a.b", ".jsonl"});
  CHECK(SplitExtension("data.d/kjv") == P{"data.d/kjv", ""});
  CHECK(SplitExtension(".bashrc") == P{".bashrc", ""});
  CHECK(SplitExtension("d/..x.json") == P{"d/..x", ".json"});
  CHECK(SplitExtension("d/...") == P{"d/...", ""});
  const PartitionNames names = PartitionNamesFor("data/*.jsonl", "out/kjv", 2);
  CHECK(names.partition == "data/*_2.jsonl");
  CHECK(names.output_prefix == "out/kjv_2");
}

TEST_CASE("lines go round-robin or in ceil(total / N) blocks, each ending in a newline") {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/a.jsonl", "{\"l\":1}\n{\"l\":2}\r\n{\"l\":3}\n");
  WriteFile(dir + "/empty.jsonl", "");
  WriteFile(dir + "/b.jsonl", "{\"l\":4}\n{\"l\":5}");  // no final newline
  const std::vector<std::string> inputs = {dir + "/a.jsonl", dir + "/empty.jsonl",
                                           dir + "/b.jsonl"};
  const std::vector<std::string> parts = {dir + "/p0", dir + "/p1", dir + "/p2"};
  auto lines = WritePartitions(inputs, parts, /*keep_sequential=*/false);
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<int64_t>{2, 2, 1});
  CHECK(ReadFile(parts[0]) == "{\"l\":1}\n{\"l\":4}\n");
  CHECK(ReadFile(parts[1]) == "{\"l\":2}\n{\"l\":5}\n");
  CHECK(ReadFile(parts[2]) == "{\"l\":3}\n");
  lines = WritePartitions(inputs, parts, /*keep_sequential=*/true);  // blocks of ceil(5/3)
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<int64_t>{2, 2, 1});
  CHECK(ReadFile(parts[0]) == "{\"l\":1}\n{\"l\":2}\n");
  CHECK(ReadFile(parts[1]) == "{\"l\":3}\n{\"l\":4}\n");
  CHECK(ReadFile(parts[2]) == "{\"l\":5}\n");
  // Fewer lines than partitions: the last ones stay empty.
  lines = WritePartitions({dir + "/b.jsonl"}, parts, /*keep_sequential=*/true);
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<int64_t>{1, 1, 0});
  CHECK(ReadFile(parts[2]).empty());
}

TEST_CASE("errors name the file and leave no partition behind") {
  const std::string dir = MakeTempDir();
  const std::vector<std::string> parts = {dir + "/p0", dir + "/p1"};
  auto check_error = [&](const std::vector<std::string>& inputs, const std::string& text) {
    auto lines = WritePartitions(inputs, parts, false);
    REQUIRE_FALSE(lines.ok());
    INFO(lines.status().message());
    CHECK(std::string(lines.status().message()).find(text) != std::string::npos);
    for (const std::string& p : parts) {
      CHECK_FALSE(Exists(p));
      CHECK_FALSE(Exists(p + ".partial"));
    }
  };
  WriteFile(dir + "/blank.jsonl", "{\"l\":1}\n\n{\"l\":3}\n");
  check_error({dir + "/blank.jsonl"}, dir + "/blank.jsonl:2: blank line");
  WriteFile(dir + "/in.jsonl.gz", "\x1f\x8b");
  check_error({dir + "/in.jsonl.gz"}, "gzip");
  check_error({dir + "/missing.jsonl"}, dir + "/missing.jsonl");
  check_error({dir}, "is a directory");
  WriteFile(dir + "/empty.jsonl", "");
  check_error({dir + "/empty.jsonl"}, "hold no lines");
  CHECK_FALSE(WritePartitions({dir + "/empty.jsonl"}, {dir + "/p0"}, false).ok());  // N < 2
}

}  // namespace
}  // namespace mxmaca::api
