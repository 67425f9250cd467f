// api/preprocess/preprocess_partitions_test.cc: `preprocess --partitions N` end to end:
// with --keep-sequential-samples the merge equals --partitions 1 on the concatenated
// input; round-robin equals --partitions 1 on the lines reordered partition by
// partition; partition files stay and are reused, per-partition datasets do not stay;
// errors name the value. (Byte parity with Megatron's algorithm itself:
// preprocess_partitions_parity_test.)
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "api/preprocess/preprocess_command.h"
#include "api/preprocess/test_files.h"

namespace mxmaca::api {
namespace {

using testing::kEncoderDir;
using testing::ListDir;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::WriteFile;

PreprocessOptions Options(const std::string& input, const std::string& prefix) {
  PreprocessOptions options;
  options.input = input;
  options.output_prefix = prefix;
  options.tokenizer_type = "GPT2BPETokenizer";
  options.vocab_file = absl::StrCat(kEncoderDir, "/encoder.json");
  options.merge_file = absl::StrCat(kEncoderDir, "/vocab.bpe");
  options.json_keys = {"text", "title"};
  options.append_eod = true;
  options.workers = 2;
  return options;
}

// 11 JSON lines (not divisible by 2 or 3), some with no tokens.
std::vector<std::string> Lines() {
  std::vector<std::string> lines;
  for (int i = 0; i < 11; ++i) {
    std::string text = i % 4 == 3 ? "" : absl::StrCat("Document ", i, " says");
    for (int w = 0; w < i; ++w) absl::StrAppend(&text, " word", w * i);
    lines.push_back(absl::StrCat("{\"text\": \"", text, "\", \"title\": \"t", i, "\"}"));
  }
  return lines;
}

std::string Join(const std::vector<std::string>& lines, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += lines[i] + "\n";
  return out;
}

// The four output files of `prefix` for keys text and title.
std::string Outputs(const std::string& prefix) {
  std::string all;
  for (const char* key : {"text", "title"}) {
    for (const char* ext : {".bin", ".idx"}) {
      all += ReadFile(OutputPrefix(prefix, key) + ext) + "|";
    }
  }
  return all;
}

std::string ReadLog(std::FILE* log) {
  std::rewind(log);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), log)) > 0;) text.append(buf, n);
  std::fclose(log);
  return text;
}

TEST_CASE("--keep-sequential-samples: the merge equals one pass over the concatenation") {
  const std::string dir = MakeTempDir();
  const auto lines = Lines();
  WriteFile(dir + "/whole.jsonl", Join(lines, 0, lines.size()));
  REQUIRE(Preprocess(Options(dir + "/whole.jsonl", dir + "/whole"), nullptr).ok());
  for (int64_t n : {2, 3, 4}) {
    PreprocessOptions options = Options(dir + "/whole.jsonl", dir + "/seq");
    options.partitions = n;
    options.workers = 2 * n;
    options.keep_sequential_samples = true;
    PreprocessStats stats;
    REQUIRE(Preprocess(options, nullptr, &stats).ok());
    CHECK(stats.documents == 11);
    CHECK(Outputs(dir + "/seq") == Outputs(dir + "/whole"));
    for (int64_t i = 0; i < n; ++i) std::remove(absl::StrCat(dir, "/whole_", i, ".jsonl").c_str());
  }
}

TEST_CASE("round-robin: the merge equals one pass over the lines partition by partition") {
  const std::string dir = MakeTempDir();
  const auto lines = Lines();
  // A glob pattern of one file (several files: preprocess_partitions_parity_test).
  REQUIRE(::mkdir((dir + "/in").c_str(), 0755) == 0);
  WriteFile(dir + "/in/docs.jsonl", Join(lines, 0, lines.size()));
  for (int64_t n : {2, 3}) {
    std::string reordered;
    for (int64_t p = 0; p < n; ++p) {
      for (size_t i = p; i < lines.size(); i += n) reordered += lines[i] + "\n";
    }
    WriteFile(dir + "/reordered.jsonl", reordered);
    REQUIRE(Preprocess(Options(dir + "/reordered.jsonl", dir + "/expected"), nullptr).ok());
    PreprocessOptions options = Options(dir + "/in/d*.jsonl", dir + "/rr");
    options.partitions = n;
    options.workers = n;
    REQUIRE(Preprocess(options, nullptr).ok());
    CHECK(Outputs(dir + "/rr") == Outputs(dir + "/expected"));
    std::vector<std::string> expected_files = {"docs.jsonl"};
    for (int64_t i = 0; i < n; ++i) expected_files.push_back(absl::StrCat("d*_", i, ".jsonl"));
    std::sort(expected_files.begin(), expected_files.end());
    CHECK(ListDir(dir + "/in") == expected_files);  // the partition files stay
    for (int64_t i = 0; i < n; ++i) {
      std::remove(absl::StrCat(dir, "/in/d*_", i, ".jsonl").c_str());
    }
  }
  // Only the merged datasets are left next to the output prefix.
  for (const std::string& name : ListDir(dir)) {
    CHECK(name.find("rr_0") == std::string::npos);
    CHECK(name.find("rr_1") == std::string::npos);
  }
}

TEST_CASE("partition files already present are reused as they are, as in Megatron") {
  const std::string dir = MakeTempDir();
  const auto lines = Lines();
  WriteFile(dir + "/in.jsonl", Join(lines, 0, lines.size()));
  PreprocessOptions options = Options(dir + "/in.jsonl", dir + "/out");
  options.partitions = 2;
  REQUIRE(Preprocess(options, nullptr).ok());
  const std::string first = Outputs(dir + "/out");
  WriteFile(dir + "/in.jsonl", Join(lines, 0, 3));  // changed input, stale partitions
  std::FILE* log = std::tmpfile();
  REQUIRE(log != nullptr);
  REQUIRE(Preprocess(options, log).ok());
  CHECK(ReadLog(log).find("Partitions already present") != std::string::npos);
  CHECK(Outputs(dir + "/out") == first);
  // Fewer lines than partitions: the empty partition adds nothing.
  WriteFile(dir + "/two.jsonl", Join(lines, 0, 2));
  options = Options(dir + "/two.jsonl", dir + "/two");
  options.partitions = 4;
  options.workers = 4;
  options.keep_sequential_samples = true;
  REQUIRE(Preprocess(options, nullptr).ok());
  REQUIRE(Preprocess(Options(dir + "/two.jsonl", dir + "/two_whole"), nullptr).ok());
  CHECK(Outputs(dir + "/two") == Outputs(dir + "/two_whole"));
}

TEST_CASE("the glob skips this run's own partition files and warns about others'") {
  const std::string dir = MakeTempDir();
  const auto lines = Lines();
  WriteFile(dir + "/docs.jsonl", Join(lines, 0, lines.size()));
  PreprocessOptions options = Options(dir + "/d*.jsonl", dir + "/fresh");
  options.partitions = 3;
  options.workers = 3;
  REQUIRE(Preprocess(options, nullptr).ok());
  for (int i = 0; i < 3; ++i) std::remove(absl::StrCat(dir, "/d*_", i, ".jsonl").c_str());
  // Left over: partition 1 of this run (not all three: re-partitioned) and a partition
  // of a run with --partitions 8 (read as input, with a warning).
  WriteFile(dir + "/d*_1.jsonl", Join(lines, 0, 4));
  WriteFile(dir + "/d*_7.jsonl", Join(lines, 5, 6));
  options.output_prefix = dir + "/again";
  std::FILE* log = std::tmpfile();
  REQUIRE(log != nullptr);
  REQUIRE(Preprocess(options, log).ok());
  const std::string text = ReadLog(log);
  INFO(text);
  CHECK(text.find("Skipping " + dir + "/d*_1.jsonl: a partition file of this run") !=
        std::string::npos);
  CHECK(text.find("Warning: --input matches " + dir + "/d*_7.jsonl") != std::string::npos);
  std::remove((dir + "/d*_7.jsonl").c_str());
  for (int i = 0; i < 3; ++i) std::remove(absl::StrCat(dir, "/d*_", i, ".jsonl").c_str());
  options.output_prefix = dir + "/third";
  REQUIRE(Preprocess(options, nullptr).ok());
  CHECK(Outputs(dir + "/third") == Outputs(dir + "/fresh"));
  CHECK(Outputs(dir + "/again") != Outputs(dir + "/fresh"));  // d*_7's line was read
}

TEST_CASE("errors name the value and leave no dataset behind") {
  const std::string dir = MakeTempDir();
  PreprocessOptions options = Options(dir + "/nothing*.jsonl", dir + "/out");
  options.partitions = 2;
  absl::Status status = Preprocess(options, nullptr);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().find("--input \"" + dir + "/nothing*.jsonl\" matches no file") !=
        std::string::npos);
  WriteFile(dir + "/bad.jsonl", "{\"text\": \"a\", \"title\": \"b\"}\n{\"text\": 5}\n");
  options = Options(dir + "/bad.jsonl", dir + "/out");
  options.partitions = 2;
  status = Preprocess(options, nullptr);
  REQUIRE_FALSE(status.ok());
  INFO(status.message());
  CHECK(status.message().find(dir + "/bad_1.jsonl:1:") != std::string::npos);
  CHECK(ListDir(dir) == std::vector<std::string>{"bad.jsonl", "bad_0.jsonl", "bad_1.jsonl"});
  CHECK(RunPreprocess({"--input", "x", "--output-prefix", "y", "--tokenizer-type",
                       "GPT2BPETokenizer", "--vocab-file", "v", "--merge-file", "m", "--workers",
                       "2", "--partitions", "0"})
            .message()
            .find("--partitions must be >= 1") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
