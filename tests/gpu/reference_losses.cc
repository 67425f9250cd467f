// tests/gpu/reference_losses.cc
#include "tests/gpu/reference_losses.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace mxmaca::gpu_check {

namespace {

std::string Exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

}  // namespace

std::string ReferenceKey(ModelVariant variant, kernels::Precision precision) {
  return absl::StrCat(VariantName(variant), "/", PrecisionName(precision));
}

std::string FormatReferenceRun(ModelVariant variant, kernels::Precision precision,
                               const ReferenceRun& run) {
  const std::string vp = absl::StrCat(VariantName(variant), " ", PrecisionName(precision));
  std::string out = absl::StrCat("run ", vp, " ", run.fingerprint, "\n");
  for (size_t i = 0; i < run.steps.size(); ++i) {
    absl::StrAppend(&out, "step ", vp, " ", i, " ", Exact(run.steps[i].loss), " ",
                    Exact(run.steps[i].grad_norm), "\n");
  }
  return out;
}

absl::StatusOr<std::map<std::string, ReferenceRun>> ParseReferenceLosses(
    const std::string& text, const std::string& source) {
  std::map<std::string, ReferenceRun> runs;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](absl::string_view expected) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_no, ": '", line,
                                                     "': expected ", expected));
    };
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f[0] == "run") {
      if (f.size() < 4) return bad("'run <variant> <precision> <fingerprint>'");
      const std::string key = absl::StrCat(f[1], "/", f[2]);
      if (runs.count(key) > 0) return bad(absl::StrCat("one run line per run (", key, " again)"));
      const size_t at = static_cast<size_t>(f[3].data() - line.data());
      runs[key].fingerprint = std::string(line.substr(at));
    } else if (f[0] == "step") {
      if (f.size() != 6) return bad("'step <variant> <precision> <step> <loss> <grad_norm>'");
      const std::string key = absl::StrCat(f[1], "/", f[2]);
      auto it = runs.find(key);
      if (it == runs.end()) return bad(absl::StrCat("a 'run ", f[1], " ", f[2], " ...' line first"));
      int64_t step = 0;
      StepRecord rec;
      if (!absl::SimpleAtoi(f[3], &step) || !absl::SimpleAtod(f[4], &rec.loss) ||
          !absl::SimpleAtod(f[5], &rec.grad_norm)) {
        return bad("an integer step and two numbers");
      }
      if (step != static_cast<int64_t>(it->second.steps.size())) {
        return bad(absl::StrCat("step ", it->second.steps.size(), " of ", key));
      }
      it->second.steps.push_back(rec);
    } else {
      return bad("a 'run' or 'step' line or a '#' comment");
    }
  }
  return runs;
}

absl::StatusOr<std::map<std::string, ReferenceRun>> ReadReferenceLosses(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read ", path, " (written by tests/gpu/build_gpu_check.sh via tests/gpu:cpu_reference)"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseReferenceLosses(ss.str(), path);
}

}  // namespace mxmaca::gpu_check
