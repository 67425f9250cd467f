// transport/ucx/launch_env.cc: launcher environment detection and Slurm hostlists.
#include "transport/ucx/launch_env.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace mxmaca::transport::ucx {
namespace {

// ParseInt: the variable's value as a decimal int, or InvalidArgument naming it.
absl::StatusOr<int> ParseInt(const char* name, const char* value) {
  int out = 0;
  if (!absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch environment: ", name, "=\"", value, "\" is not an integer"));
  }
  return out;
}

// RangeOrListItem expands one bracket item "07" or "01-04" into numbers with padding.
absl::Status ExpandRangeItem(absl::string_view item, absl::string_view whole,
                             std::vector<std::string>* out) {
  std::vector<absl::string_view> bounds = absl::StrSplit(item, '-');
  auto numeric = [](absl::string_view s) {
    if (s.empty()) return false;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
    }
    return true;
  };
  if (bounds.size() > 2 || !numeric(bounds.front()) || !numeric(bounds.back())) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm hostlist \"", whole, "\": range \"", item,
                                                   "\" is not N or N-M with decimal N, M"));
  }
  uint64_t lo = 0, hi = 0;
  if (bounds.front().size() > 9 || bounds.back().size() > 9 ||
      !absl::SimpleAtoi(bounds.front(), &lo) || !absl::SimpleAtoi(bounds.back(), &hi) || hi < lo ||
      hi - lo > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm hostlist \"", whole, "\": range \"", item,
                                                   "\" is descending or too large"));
  }
  const size_t width = bounds.front().size();
  for (uint64_t v = lo; v <= hi; ++v) {
    std::string digits = absl::StrCat(v);
    if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
    out->push_back(std::move(digits));
  }
  return absl::OkStatus();
}

// ExpandExpression: one top-level host expression, e.g. "r[1-2]-n[01,03]".
absl::Status ExpandExpression(absl::string_view expr, absl::string_view whole,
                              std::vector<std::string>* out) {
  std::vector<std::string> partial = {""};
  size_t i = 0;
  while (i < expr.size()) {
    const size_t open = expr.find('[', i);
    const absl::string_view literal =
        expr.substr(i, open == absl::string_view::npos ? absl::string_view::npos : open - i);
    if (literal.find(']') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm hostlist \"", whole, "\": unmatched ']' in \"", expr, "\""));
    }
    for (std::string& p : partial) absl::StrAppend(&p, literal);
    if (open == absl::string_view::npos) break;
    const size_t close = expr.find(']', open);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm hostlist \"", whole, "\": unmatched '[' in \"", expr, "\""));
    }
    const absl::string_view body = expr.substr(open + 1, close - open - 1);
    if (body.find('[') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm hostlist \"", whole, "\": nested '[' in \"", expr, "\""));
    }
    std::vector<std::string> numbers;
    for (absl::string_view item : absl::StrSplit(body, ',')) {
      MXMACA_RETURN_IF_ERROR(ExpandRangeItem(item, whole, &numbers));
    }
    std::vector<std::string> next;
    next.reserve(partial.size() * numbers.size());
    for (const std::string& p : partial) {
      for (const std::string& n : numbers) next.push_back(absl::StrCat(p, n));
    }
    partial = std::move(next);
    i = close + 1;
  }
  for (std::string& p : partial) out->push_back(std::move(p));
  return absl::OkStatus();
}

}  // namespace

std::string LaunchEnv::ToString() const {
  return absl::StrCat("rank ", rank, " of ", world_size, " (local ", local_rank, ") master ",
                      master_addr, ":", master_port, " from ", source);
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(absl::string_view hostlist) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= hostlist.size(); ++i) {
    const char c = i < hostlist.size() ? hostlist[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Slurm hostlist \"", hostlist, "\": unbalanced or nested brackets at offset ", i));
    }
    if (c == ',' && depth == 0) {
      const absl::string_view expr = hostlist.substr(start, i - start);
      if (expr.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Slurm hostlist \"", hostlist, "\": empty host name at offset ", start));
      }
      MXMACA_RETURN_IF_ERROR(ExpandExpression(expr, hostlist, &hosts));
      start = i + 1;
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm hostlist \"", hostlist, "\": unmatched '['"));
  }
  return hosts;
}

absl::StatusOr<LaunchEnv> DetectLaunchEnv(const GetEnv& getenv_fn) {
  const GetEnv get = getenv_fn ? getenv_fn : GetEnv([](const char* n) { return std::getenv(n); });
  LaunchEnv env;
  // Reads the (rank, size, local rank) triple of one source; `found` says whether any of
  // them was set.
  auto read = [&](const char* rank_var, const char* size_var, const char* local_var,
                  bool* found) -> absl::Status {
    const char* r = get(rank_var);
    const char* s = get(size_var);
    *found = r != nullptr || s != nullptr;
    if (!*found) return absl::OkStatus();
    if (r == nullptr || s == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch environment: ", r ? rank_var : size_var, " is set but ",
                       r ? size_var : rank_var, " is not"));
    }
    MXMACA_ASSIGN_OR_RETURN(env.rank, ParseInt(rank_var, r));
    MXMACA_ASSIGN_OR_RETURN(env.world_size, ParseInt(size_var, s));
    if (const char* l = get(local_var)) {
      MXMACA_ASSIGN_OR_RETURN(env.local_rank, ParseInt(local_var, l));
    } else {
      env.local_rank = env.rank;  // a single-host launcher that does not say
    }
    if (env.world_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("launch environment: ", size_var, "=",
                                                     env.world_size, " must be at least 1"));
    }
    if (env.rank < 0 || env.rank >= env.world_size) {
      return absl::InvalidArgumentError(absl::StrCat("launch environment: ", rank_var, "=",
                                                     env.rank, " is outside [0, ", size_var, "=",
                                                     env.world_size, ")"));
    }
    if (env.local_rank < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch environment: ", local_var, "=", env.local_rank, " is negative"));
    }
    return absl::OkStatus();
  };

  bool found = false;
  MXMACA_RETURN_IF_ERROR(read("RANK", "WORLD_SIZE", "LOCAL_RANK", &found));
  if (found) {
    env.source = "torchrun";
  } else {
    MXMACA_RETURN_IF_ERROR(read("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", &found));
    if (found) {
      env.source = "slurm";
      if (const char* nodes = get("SLURM_JOB_NODELIST")) {
        MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandSlurmHostlist(nodes));
        if (!hosts.empty()) env.master_addr = hosts.front();
      }
    } else {
      MXMACA_RETURN_IF_ERROR(read("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK", &found));
      if (found) env.source = "openmpi";
    }
  }
  if (const char* addr = get("MASTER_ADDR")) {
    if (*addr == '\0') {
      return absl::InvalidArgumentError("launch environment: MASTER_ADDR is empty");
    }
    env.master_addr = addr;
  }
  if (const char* port = get("MASTER_PORT")) {
    MXMACA_ASSIGN_OR_RETURN(env.master_port, ParseInt("MASTER_PORT", port));
    if (env.master_port < 1 || env.master_port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launch environment: MASTER_PORT=", env.master_port, " is outside 1..65535"));
    }
  }
  return env;
}

}  // namespace mxmaca::transport::ucx
