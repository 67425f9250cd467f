// data/gpt_dataset_test_util.cc: see gpt_dataset_test_util.h.
#include "data/gpt_dataset_test_util.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mxmaca::data::testing {

absl::StatusOr<std::string> MakeScratchDir(const std::string& tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/", tag, "_XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  return std::string(buf.data());
}

absl::StatusOr<nlohmann::json> RunPythonJson(const std::string& script, const nlohmann::json& input,
                                             const std::string& extra_args) {
  auto dir = MakeScratchDir("pyref");
  if (!dir.ok()) return dir.status();
  const std::string in_path = *dir + "/in.json";
  const std::string out_path = *dir + "/out.json";
  const std::string err_path = *dir + "/err.txt";
  {
    std::ofstream in(in_path);
    in << input.dump();
    if (!in) return absl::InternalError("cannot write " + in_path);
  }
  const std::string cmd = absl::StrCat("/usr/bin/python3 ", script, " ", in_path, " ", out_path,
                                       " ", extra_args, " 2>", err_path);
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream err(err_path);
    std::stringstream ss;
    ss << err.rdbuf();
    std::string tail = ss.str();
    if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
    return absl::InternalError(absl::StrCat("`", cmd, "` exited with ", rc, ": ", tail));
  }
  std::ifstream out(out_path);
  if (!out) return absl::InternalError("no output from " + cmd);
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bad JSON from ", script, ": ", e.what()));
  }
}

}  // namespace mxmaca::data::testing
