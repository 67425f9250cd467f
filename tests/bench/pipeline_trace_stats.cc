// tests/bench/pipeline_trace_stats.cc: see pipeline_trace_stats.h.
#include "tests/bench/pipeline_trace_stats.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace mxmaca::bench {
namespace {

using scheduler::OpKind;

// ParseOpName: "F3" / "B12.c1" / "W0" -> kind, micro-batch, chunk.
bool ParseOpName(const std::string& name, TracedOp* op) {
  if (name.size() < 2) return false;
  switch (name[0]) {
    case 'F': op->kind = OpKind::kForward; break;
    case 'B': op->kind = OpKind::kBackwardInput; break;
    case 'W': op->kind = OpKind::kBackwardWeight; break;
    default: return false;
  }
  const size_t dot = name.find(".c");
  try {
    op->microbatch = std::stoi(name.substr(1, dot == std::string::npos ? std::string::npos : dot - 1));
    op->chunk = dot == std::string::npos ? 0 : std::stoi(name.substr(dot + 2));
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<TracedOp>> LoadTracedOps(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("trace ", path, ": cannot open"));
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("trace ", path, ": ", e.what()));
  }
  std::vector<TracedOp> ops;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "compute") continue;
    TracedOp op;
    const std::string name = e.value("name", "");
    if (!ParseOpName(name, &op)) {
      return absl::DataLossError(absl::StrCat("trace ", path, ": span '", name, "' is not an op"));
    }
    op.rank = e.value("tid", 0);
    op.start_us = e.value("ts", int64_t{0});
    op.duration_us = e.value("dur", int64_t{0});
    op.iteration = e.at("args").value("iteration", int64_t{0});
    ops.push_back(op);
  }
  return ops;
}

HopSamples MeasureHops(const std::vector<TracedOp>& ops, int32_t p, int32_t dp, int32_t v,
                       int64_t first_iteration) {
  // (iteration, rank, kind, micro-batch, chunk) -> op.
  using Key = std::tuple<int64_t, int32_t, int, int32_t, int32_t>;
  std::map<Key, const TracedOp*> index;
  // (iteration, rank) -> its ops in start order.
  std::map<std::pair<int64_t, int32_t>, std::vector<const TracedOp*>> timeline;
  for (const TracedOp& op : ops) {
    if (op.iteration < first_iteration) continue;
    index[Key{op.iteration, op.rank, static_cast<int>(op.kind), op.microbatch, op.chunk}] = &op;
    timeline[{op.iteration, op.rank}].push_back(&op);
  }
  const int32_t last_virtual = p * v - 1;
  HopSamples out;
  for (auto& [where, list] : timeline) {
    std::sort(list.begin(), list.end(),
              [](const TracedOp* a, const TracedOp* b) { return a->start_us < b->start_us; });
    const int32_t rank = where.second;
    const int32_t stage = rank / dp, replica = rank % dp;
    for (size_t i = 0; i < list.size(); ++i) {
      const TracedOp& op = *list[i];
      const double prev_end = i == 0 ? -std::numeric_limits<double>::infinity()
                                     : static_cast<double>(list[i - 1]->end_us());
      const int32_t k = scheduler::VirtualStage(op.chunk, stage, p);
      int32_t from = -1;
      if (op.kind == OpKind::kForward && k > 0) from = k - 1;
      if (op.kind == OpKind::kBackwardInput && k < last_virtual) from = k + 1;
      const TracedOp* producer = nullptr;
      if (from >= 0) {
        const int32_t from_rank = (from % p) * dp + replica;
        auto it = index.find(Key{op.iteration, from_rank, static_cast<int>(op.kind),
                                 op.microbatch, from / p});
        if (it == index.end()) continue;
        producer = it->second;
      }
      const double start = static_cast<double>(op.start_us);
      if (producer != nullptr && static_cast<double>(producer->end_us()) >= prev_end) {
        out.hop_us.push_back(start - static_cast<double>(producer->end_us()));
      } else if (i > 0) {
        out.turnaround_us.push_back(start - prev_end);
      }
    }
  }
  return out;
}

std::vector<IterationBusy> BusyPerIteration(const std::vector<TracedOp>& ops, int32_t ranks,
                                            int64_t first_iteration) {
  std::map<int64_t, IterationBusy> by_iteration;
  std::map<int64_t, std::pair<int64_t, int64_t>> extent;  // first start, last end
  for (const TracedOp& op : ops) {
    if (op.iteration < first_iteration) continue;
    IterationBusy& b = by_iteration[op.iteration];
    b.iteration = op.iteration;
    b.mean_busy_seconds += static_cast<double>(op.duration_us) * 1e-6 / ranks;
    auto [it, fresh] = extent.emplace(op.iteration, std::make_pair(op.start_us, op.end_us()));
    if (!fresh) {
      it->second.first = std::min(it->second.first, op.start_us);
      it->second.second = std::max(it->second.second, op.end_us());
    }
  }
  std::vector<IterationBusy> out;
  for (auto& [iteration, b] : by_iteration) {
    const auto& e = extent[iteration];
    b.makespan_seconds = static_cast<double>(e.second - e.first) * 1e-6;
    out.push_back(b);
  }
  return out;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace mxmaca::bench
