// layers/device/segment_runner.h: a stage op's device work as one SEGMENT that a runner
// executes eagerly or captures into a CUDA graph and replays (layers/device/
// cuda_graph_runner.h; docs/ARCHITECTURE.md "Kernel calls only enqueue").
//
// layers/gpt_stage.h on a device backend runs each op (F, B, W, eval-F) of a micro-batch
// as: host -> device copies of its inputs, the segment (kernel enqueues only, on the
// micro-batch slot's fixed buffers), device -> host copies of its outputs. A segment must
// not read or write host memory, allocate, or synchronise; everything that differs
// between micro-batches reaches it through device buffers uploaded before it.
#ifndef MXMACA_LAYERS_DEVICE_SEGMENT_RUNNER_H_
#define MXMACA_LAYERS_DEVICE_SEGMENT_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mxmaca::layers::device {

// SegmentInfo: which op's device work a segment is: op "F", "B", "W" or "eval-F", the
// micro-batch slot (its fixed buffer addresses), the shape, and whether document masks
// are on. Two segments with equal info do the same work on the same addresses.
struct SegmentInfo {
  std::string op;
  int slot = 0;
  int64_t b = 0, s = 0;
  bool doc_start = false;
  // ToString: e.g. "F/slot0/b2/s1024" (+ "/doc").
  std::string ToString() const {
    return absl::StrCat(op, "/slot", slot, "/b", b, "/s", s, doc_start ? "/doc" : "");
  }
};

// Segment: the device work of one op (returns the first enqueue error).
using Segment = std::function<absl::Status()>;
// SegmentRunner: runs `segment` — eagerly, or captured into / replayed from a CUDA graph
// keyed by `info`.
using SegmentRunner = std::function<absl::Status(const SegmentInfo& info, const Segment& segment)>;

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_SEGMENT_RUNNER_H_
