// kernels/cuda/graph_state.cc: the per-segment capture state machine (host only).
#include "kernels/cuda/graph_state.h"

#include <string>
#include <tuple>

namespace mxmaca::kernels::cuda {

bool SegmentKey::operator<(const SegmentKey& o) const {
  return std::tie(op, chunk, micro_batch, seq, extra) <
         std::tie(o.op, o.chunk, o.micro_batch, o.seq, o.extra);
}

bool SegmentKey::operator==(const SegmentKey& o) const {
  return std::tie(op, chunk, micro_batch, seq, extra) ==
         std::tie(o.op, o.chunk, o.micro_batch, o.seq, o.extra);
}

std::string SegmentKey::ToString() const {
  std::string s = op + " chunk " + std::to_string(chunk) + " b " + std::to_string(micro_batch) +
                  " s " + std::to_string(seq);
  if (!extra.empty()) {
    s += " extra [";
    for (size_t i = 0; i < extra.size(); ++i) {
      if (i > 0) s += ",";
      s += std::to_string(extra[i]);
    }
    s += "]";
  }
  return s;
}

SegmentAction GraphStateTable::Next(const SegmentKey& key) {
  Entry& e = entries_[key];
  if (mode_ == CudaGraphMode::kNone) return SegmentAction::kEager;
  switch (e.phase) {
    case Phase::kCaptured:
      return SegmentAction::kReplay;
    case Phase::kEagerOnly:
      return SegmentAction::kEager;
    case Phase::kWarmingUp:
      break;
  }
  return e.warm_runs < warmup_runs_ ? SegmentAction::kEager : SegmentAction::kCapture;
}

void GraphStateTable::RecordEager(const SegmentKey& key) {
  Entry& e = entries_[key];
  ++e.stats.eager_runs;
  if (e.phase == Phase::kWarmingUp) ++e.warm_runs;
}

void GraphStateTable::RecordCaptured(const SegmentKey& key) {
  Entry& e = entries_[key];
  e.phase = Phase::kCaptured;
  ++e.stats.captures;
  ++e.stats.launches;
}

void GraphStateTable::RecordReplay(const SegmentKey& key) { ++entries_[key].stats.launches; }

void GraphStateTable::RecordCaptureFailure(const SegmentKey& key, const std::string& reason) {
  Entry& e = entries_[key];
  ++e.stats.capture_failures;
  MarkEagerOnly(key, reason);
}

void GraphStateTable::MarkEagerOnly(const SegmentKey& key, const std::string& reason) {
  Entry& e = entries_[key];
  e.phase = Phase::kEagerOnly;
  e.stats.eager_only = true;
  e.stats.eager_only_reason = reason;
}

bool GraphStateTable::Reset(Entry& e) {
  const bool had_graph = e.phase == Phase::kCaptured;
  if (had_graph) ++e.stats.invalidations;
  e.phase = Phase::kWarmingUp;
  e.warm_runs = 0;
  e.stats.eager_only = false;
  e.stats.eager_only_reason.clear();
  return had_graph;
}

int GraphStateTable::Invalidate() {
  int dropped = 0;
  for (auto& [key, e] : entries_) dropped += Reset(e) ? 1 : 0;
  return dropped;
}

bool GraphStateTable::Invalidate(const SegmentKey& key) {
  const auto it = entries_.find(key);
  return it != entries_.end() && Reset(it->second);
}

const SegmentStats* GraphStateTable::Stats(const SegmentKey& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second.stats;
}

SegmentStats GraphStateTable::Totals() const {
  SegmentStats t;
  for (const auto& [key, e] : entries_) {
    t.eager_runs += e.stats.eager_runs;
    t.captures += e.stats.captures;
    t.launches += e.stats.launches;
    t.capture_failures += e.stats.capture_failures;
    t.invalidations += e.stats.invalidations;
    t.eager_only = t.eager_only || e.stats.eager_only;
  }
  return t;
}

int GraphStateTable::num_captured() const {
  int n = 0;
  for (const auto& [key, e] : entries_) n += e.phase == Phase::kCaptured ? 1 : 0;
  return n;
}

std::string GraphStateTable::Report() const {
  std::string out;
  for (const auto& [key, e] : entries_) {
    const SegmentStats& s = e.stats;
    out += key.ToString() + ": eager " + std::to_string(s.eager_runs) + ", captures " +
           std::to_string(s.captures) + ", launches " + std::to_string(s.launches) +
           ", failures " + std::to_string(s.capture_failures) + ", invalidations " +
           std::to_string(s.invalidations);
    if (s.eager_only) out += ", eager-only: " + s.eager_only_reason;
    out += "\n";
  }
  return out;
}

}  // namespace mxmaca::kernels::cuda
