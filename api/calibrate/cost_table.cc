// api/calibrate/cost_table.cc: see cost_table.h.
#include "api/calibrate/cost_table.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace mxmaca::api {
namespace {

using nlohmann::json;

constexpr char kFormat[] = "mxmaca-cost-table/1";

absl::Status Bad(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// Number: j[key] as a finite number >= 0.
absl::StatusOr<double> Number(const json& j, const std::string& key, const std::string& source,
                              const std::string& where) {
  if (!j.contains(key)) return Bad(source, absl::StrCat(where, "missing \"", key, "\""));
  const json& v = j.at(key);
  if (!v.is_number()) return Bad(source, absl::StrCat(where, "\"", key, "\" is not a number"));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) {
    return Bad(source, absl::StrCat(where, "\"", key, "\" = ", x, ": expected a number >= 0"));
  }
  return x;
}

absl::StatusOr<std::array<double, 3>> Triple(const json& j, const std::string& key,
                                             const std::string& source, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_array() || j.at(key).size() != 3) {
    return Bad(source, absl::StrCat(where, "\"", key, "\" must be an array [F, B, W]"));
  }
  std::array<double, 3> out;
  for (int k = 0; k < 3; ++k) {
    const json& v = j.at(key)[static_cast<size_t>(k)];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      return Bad(source, absl::StrCat(where, "\"", key, "\"[", k, "]: expected a number >= 0"));
    }
    out[static_cast<size_t>(k)] = v.get<double>();
  }
  return out;
}

absl::StatusOr<LinearCost> Linear(const json& j, const std::string& key, const std::string& source) {
  if (!j.contains(key) || !j.at(key).is_object()) {
    return Bad(source, absl::StrCat("missing object \"", key, "\""));
  }
  LinearCost c;
  const std::string where = absl::StrCat(key, ": ");
  auto lat = Number(j.at(key), "latency_s", source, where);
  if (!lat.ok()) return lat.status();
  auto per = Number(j.at(key), "seconds_per_byte", source, where);
  if (!per.ok()) return per.status();
  c.latency_s = *lat;
  c.seconds_per_byte = *per;
  return c;
}

}  // namespace

const char* CostOpName(CostOpKind kind) {
  switch (kind) {
    case CostOpKind::kLayer:
      return "layer";
    case CostOpKind::kEmbedding:
      return "embedding";
    case CostOpKind::kLossHead:
      return "loss_head";
  }
  return "?";
}

std::string OpShape::ToString() const {
  return absl::StrFormat("b %d s %d h %d a %d g %d d %d f %d f1 %d V %d t %d%s", b, s, h, a, g,
                         d, f, f1, V, t, sp ? " sp" : "");
}

std::array<double, 3> WorkOf(CostOpKind kind, const OpShape& x) {
  const double b = static_cast<double>(x.b), s = static_cast<double>(x.s),
               h = static_cast<double>(x.h), a = static_cast<double>(x.a),
               g = static_cast<double>(x.g), d = static_cast<double>(x.d),
               f = static_cast<double>(x.f), f1 = static_cast<double>(x.f1),
               V = static_cast<double>(x.V), t = static_cast<double>(x.t);
  const double T = b * s;
  switch (kind) {
    case CostOpKind::kLayer: {
      const double linear = 2 * T * h * (a + 2 * g) * d / t + 2 * T * a * d * h / t +
                            2 * T * h * f1 / t + 2 * T * f * h / t;
      const double attention = 2 * b * (a / t) * s * s * d;
      return {linear + attention, linear + 2 * attention, linear};
    }
    case CostOpKind::kLossHead: {
      const double logits = 2 * T * h * V / t;
      return {logits, logits, logits};
    }
    case CostOpKind::kEmbedding: {
      const double rows = x.sp && x.t > 1 ? T / t : T;
      return {rows * h, rows * h, rows * h};
    }
  }
  return {0, 0, 0};
}

absl::StatusOr<std::array<double, 3>> CostTable::OpSeconds(CostOpKind kind, const OpShape& shape,
                                                           int concurrency,
                                                           int64_t stage_layers) const {
  const bool sp = shape.sp && shape.t > 1;
  std::vector<const CostEntry*> all;
  for (const CostEntry& e : ops) {
    if (e.op == kind && e.tp == shape.t && (e.sp && e.tp > 1) == sp) all.push_back(&e);
  }
  if (all.empty()) {
    return absl::NotFoundError(absl::StrCat("cost table has no \"", CostOpName(kind),
                                            "\" entry for tp ", shape.t, sp ? " with sp" : "",
                                            " (run mxmaca calibrate with that TP size)"));
  }
  // The measured stage depth nearest the requested one (entries without a depth match any).
  int64_t depth = 0;
  if (stage_layers > 0) {
    int64_t best = -1;
    for (const CostEntry* e : all) {
      if (e->stage_layers <= 0) continue;
      const int64_t d = e->stage_layers > stage_layers ? e->stage_layers - stage_layers
                                                       : stage_layers - e->stage_layers;
      if (best < 0 || d < best || (d == best && e->stage_layers < depth)) {
        best = d;
        depth = e->stage_layers;
      }
    }
  }
  std::vector<const CostEntry*> match;
  for (const CostEntry* e : all) {
    if (depth == 0 || e->stage_layers == depth || e->stage_layers <= 0) match.push_back(e);
  }
  // The concurrency to use: the largest measured <= requested, else the smallest.
  int use = -1, lowest = match.front()->concurrency;
  for (const CostEntry* e : match) {
    lowest = std::min(lowest, e->concurrency);
    if (e->concurrency <= concurrency) use = std::max(use, e->concurrency);
  }
  if (use < 0) use = lowest;
  std::vector<const CostEntry*> points;
  for (const CostEntry* e : match) {
    if (e->concurrency == use) points.push_back(e);
  }
  const std::array<double, 3> work = WorkOf(kind, shape);
  std::array<double, 3> out = {0, 0, 0};
  for (size_t k = 0; k < 3; ++k) {
    std::vector<std::pair<double, double>> xy;  // (work, seconds), work > 0
    for (const CostEntry* e : points) {
      if (e->work[k] > 0) xy.emplace_back(e->work[k], e->seconds[k]);
    }
    if (xy.empty()) continue;  // nothing measured (e.g. zero work): zero time
    std::sort(xy.begin(), xy.end());
    const double x = work[k];
    if (x <= xy.front().first) {
      out[k] = xy.front().second * x / xy.front().first;
    } else if (x >= xy.back().first) {
      out[k] = xy.back().second * x / xy.back().first;
    } else {
      for (size_t i = 1; i < xy.size(); ++i) {
        if (x <= xy[i].first) {
          const double u = (x - xy[i - 1].first) / (xy[i].first - xy[i - 1].first);
          out[k] = xy[i - 1].second + u * (xy[i].second - xy[i - 1].second);
          break;
        }
      }
    }
  }
  return out;
}

std::string CostTableToJson(const CostTable& t) {
  json j;
  j["format"] = kFormat;
  j["host"] = t.host;
  j["measured_at"] = t.measured_at;
  j["load_average_1m"] = t.load_average_1m;
  j["cores"] = t.cores;
  j["threads_per_op"] = t.threads_per_op;
  j["precision"] = t.precision;
  j["gemm_gflops"] = t.gemm_gflops;
  json ops = json::array();
  for (const CostEntry& e : t.ops) {
    ops.push_back({{"op", CostOpName(e.op)},
                   {"tp", e.tp},
                   {"sp", e.sp},
                   {"concurrency", e.concurrency},
                   {"stage_layers", e.stage_layers},
                   {"work", {e.work[0], e.work[1], e.work[2]}},
                   {"seconds", {e.seconds[0], e.seconds[1], e.seconds[2]}},
                   {"shape", e.shape}});
  }
  j["ops"] = ops;
  j["optimizer_seconds_per_parameter"] = t.optimizer_seconds_per_parameter;
  j["allreduce"] = {{"ranks", t.allreduce_ranks},
                    {"latency_s", t.allreduce.latency_s},
                    {"seconds_per_byte", t.allreduce.seconds_per_byte}};
  j["p2p"] = {{"latency_s", t.p2p.latency_s}, {"seconds_per_byte", t.p2p.seconds_per_byte}};
  j["op_overhead_s"] = t.op_overhead_s;
  j["step_overhead_s"] = t.step_overhead_s;
  return j.dump(2) + "\n";
}

absl::StatusOr<CostTable> ParseCostTable(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(source, "not a JSON object");
  if (!j.contains("format") || !j.at("format").is_string() ||
      j.at("format").get<std::string>() != kFormat) {
    return Bad(source, absl::StrCat("\"format\" must be \"", kFormat, "\""));
  }
  CostTable t;
  auto str = [&](const char* key) {
    return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : "";
  };
  t.host = str("host");
  t.measured_at = str("measured_at");
  t.precision = j.contains("precision") ? str("precision") : "fp32";
  if (t.precision != "fp32" && t.precision != "bf16") {
    return Bad(source, absl::StrCat("\"precision\" = '", t.precision, "': expected fp32 or bf16"));
  }
  if (j.contains("load_average_1m")) {
    auto v = Number(j, "load_average_1m", source, "");
    if (!v.ok()) return v.status();
    t.load_average_1m = *v;
  }
  for (const char* key : {"cores", "threads_per_op"}) {
    auto v = Number(j, key, source, "");
    if (!v.ok()) return v.status();
    if (*v < 1 || *v != std::floor(*v)) {
      return Bad(source, absl::StrCat("\"", key, "\" = ", *v, ": expected an integer >= 1"));
    }
    (std::string(key) == "cores" ? t.cores : t.threads_per_op) = static_cast<int>(*v);
  }
  for (auto [key, into] : {std::pair<const char*, double*>{"gemm_gflops", &t.gemm_gflops},
                           {"optimizer_seconds_per_parameter", &t.optimizer_seconds_per_parameter},
                           {"op_overhead_s", &t.op_overhead_s},
                           {"step_overhead_s", &t.step_overhead_s}}) {
    auto v = Number(j, key, source, "");
    if (!v.ok()) return v.status();
    *into = *v;
  }
  auto ar = Linear(j, "allreduce", source);
  if (!ar.ok()) return ar.status();
  t.allreduce = *ar;
  auto ranks = Number(j.at("allreduce"), "ranks", source, "allreduce: ");
  if (!ranks.ok()) return ranks.status();
  if (*ranks < 2) return Bad(source, "allreduce: \"ranks\" must be >= 2");
  t.allreduce_ranks = static_cast<int>(*ranks);
  auto p2p = Linear(j, "p2p", source);
  if (!p2p.ok()) return p2p.status();
  t.p2p = *p2p;
  if (!j.contains("ops") || !j.at("ops").is_array()) return Bad(source, "missing array \"ops\"");
  for (size_t i = 0; i < j.at("ops").size(); ++i) {
    const json& o = j.at("ops")[i];
    const std::string where = absl::StrCat("ops[", i, "]: ");
    if (!o.is_object()) return Bad(source, absl::StrCat(where, "not an object"));
    CostEntry e;
    const std::string name = o.contains("op") && o.at("op").is_string() ? o.at("op").get<std::string>() : "";
    if (name == "layer") {
      e.op = CostOpKind::kLayer;
    } else if (name == "embedding") {
      e.op = CostOpKind::kEmbedding;
    } else if (name == "loss_head") {
      e.op = CostOpKind::kLossHead;
    } else {
      return Bad(source, absl::StrCat(where, "\"op\" = '", name,
                                      "': expected layer, embedding or loss_head"));
    }
    auto tp = Number(o, "tp", source, where);
    if (!tp.ok()) return tp.status();
    auto conc = Number(o, "concurrency", source, where);
    if (!conc.ok()) return conc.status();
    if (*tp < 1 || *conc < 1) {
      return Bad(source, absl::StrCat(where, "\"tp\" and \"concurrency\" must be >= 1"));
    }
    e.tp = static_cast<int64_t>(*tp);
    e.concurrency = static_cast<int>(*conc);
    e.sp = o.contains("sp") && o.at("sp").is_boolean() && o.at("sp").get<bool>();
    if (o.contains("stage_layers")) {
      auto depth = Number(o, "stage_layers", source, where);
      if (!depth.ok()) return depth.status();
      e.stage_layers = static_cast<int64_t>(*depth);
    }
    auto work = Triple(o, "work", source, where);
    if (!work.ok()) return work.status();
    auto sec = Triple(o, "seconds", source, where);
    if (!sec.ok()) return sec.status();
    e.work = *work;
    e.seconds = *sec;
    if (o.contains("shape") && o.at("shape").is_string()) e.shape = o.at("shape").get<std::string>();
    t.ops.push_back(e);
  }
  return t;
}

absl::StatusOr<CostTable> LoadCostTable(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read cost table '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseCostTable(ss.str(), path);
}

absl::Status SaveCostTable(const CostTable& table, const std::string& path) {
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrCat("cannot write cost table '", path, "'"));
  out << CostTableToJson(table);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("error writing cost table '", path, "'"));
  return absl::OkStatus();
}

}  // namespace mxmaca::api
