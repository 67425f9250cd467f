// api/preprocess/python_glob_test.cc: fnmatch and glob.glob semantics of Python (the
// expected values are what Python 3 returns for the same calls).
#include "api/preprocess/python_glob.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "api/preprocess/test_files.h"

namespace mxmaca::api {
namespace {

using testing::MakeTempDir;

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST_CASE("fnmatch rules: *, ?, [seq], [!seq], unclosed [, no escapes, code points") {
  CHECK(FnmatchPython("a.jsonl", "*.jsonl"));
  CHECK(FnmatchPython(".jsonl", "*.jsonl"));  // fnmatch itself does not hide dot names
  CHECK_FALSE(FnmatchPython("a.json", "*.jsonl"));
  CHECK(FnmatchPython("part_07.jsonl", "part_??.jsonl"));
  CHECK_FALSE(FnmatchPython("part_7.jsonl", "part_??.jsonl"));
  CHECK(FnmatchPython("b3", "[a-c][0-9]"));
  CHECK_FALSE(FnmatchPython("d3", "[a-c][0-9]"));
  CHECK(FnmatchPython("d", "[!a-c]"));
  CHECK_FALSE(FnmatchPython("b", "[!a-c]"));
  CHECK(FnmatchPython("]", "[]]"));
  CHECK(FnmatchPython("-", "[a-]"));
  CHECK(FnmatchPython("[x", "[x"));       // unclosed: literal
  CHECK(FnmatchPython("a\\b", "a\\b"));   // backslash is literal
  CHECK(FnmatchPython("\xC3\xA9", "?"));  // one code point, two bytes
  CHECK(FnmatchPython("abc", "a**c"));
  CHECK(FnmatchPython("aXbXc", "*b*c"));
  CHECK_FALSE(FnmatchPython("Abc", "abc"));  // case-sensitive, as on POSIX
}

TEST_CASE("glob: directory order set, hidden names, literals, magic directories") {
  const std::string dir = MakeTempDir();
  for (const char* name : {"b.jsonl", "a.jsonl", ".hidden.jsonl", "c.txt"}) Touch(dir + "/" + name);
  REQUIRE(::mkdir((dir + "/sub1").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir + "/sub2").c_str(), 0755) == 0);
  Touch(dir + "/sub1/x.jsonl");
  Touch(dir + "/sub2/y.jsonl");
  CHECK(Sorted(PythonGlob(dir + "/*.jsonl")) ==
        std::vector<std::string>{dir + "/a.jsonl", dir + "/b.jsonl"});
  CHECK(PythonGlob(dir + "/.*.jsonl") == std::vector<std::string>{dir + "/.hidden.jsonl"});
  CHECK(PythonGlob(dir + "/a.jsonl") == std::vector<std::string>{dir + "/a.jsonl"});
  CHECK(PythonGlob(dir + "/missing.jsonl").empty());
  CHECK(PythonGlob(dir + "/*.parquet").empty());
  CHECK(PythonGlob(dir + "/nodir/*.jsonl").empty());
  CHECK(Sorted(PythonGlob(dir + "/sub?/*.jsonl")) ==
        std::vector<std::string>{dir + "/sub1/x.jsonl", dir + "/sub2/y.jsonl"});
  CHECK(PythonGlob(dir + "/sub*/y.jsonl") == std::vector<std::string>{dir + "/sub2/y.jsonl"});
  CHECK(PythonGlob(dir + "//a.jsonl") == std::vector<std::string>{dir + "//a.jsonl"});
  REQUIRE(::chdir(dir.c_str()) == 0);
  CHECK(Sorted(PythonGlob("*.jsonl")) == std::vector<std::string>{"a.jsonl", "b.jsonl"});
  CHECK(HasGlobMagic("a[0].jsonl"));
  CHECK_FALSE(HasGlobMagic("plain.jsonl"));
}

}  // namespace
}  // namespace mxmaca::api
