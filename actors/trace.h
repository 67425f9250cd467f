// actors/trace.h: Chrome / Perfetto trace of the actors' timelines (--trace-file).
//
// The Trace Event Format (the JSON Chrome's about:tracing and ui.perfetto.dev open):
// {"traceEvents": [ {"name", "cat", "ph": "X", "ts" (µs), "dur" (µs), "pid", "tid",
// "args"}, ... ]}, plus "M" (metadata) events naming each track. One track (tid) per
// actor; spans are the ops the actor ran (F/B/W with micro-batch ids, optimizer steps);
// the gaps between them are the actor's idle time.
#ifndef MXMACA_ACTORS_TRACE_H_
#define MXMACA_ACTORS_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::actors {

// TraceSpan: one complete event. Times in microseconds since TraceClockMicros()'s epoch.
struct TraceSpan {
  std::string name;       // "F3", "B3", "W3", "optimizer", "eval F0"
  std::string category;   // "compute", "optimizer", "eval"
  int32_t track = 0;      // the actor's track
  int64_t start_us = 0;
  int64_t duration_us = 0;
  int64_t iteration = 0;
  int32_t microbatch = -1;  // -1 when not about a micro-batch
};

// TraceClockMicros: a monotonic clock in microseconds, shared by every actor.
int64_t TraceClockMicros();

// ChromeTraceWriter: streams events to a file; Close() completes the JSON.
class ChromeTraceWriter {
 public:
  // Open: creates `path` (truncating it). Errors: the OS error naming the path.
  static absl::StatusOr<std::unique_ptr<ChromeTraceWriter>> Open(const std::string& path);
  ~ChromeTraceWriter();

  // NameTrack: shows `name` for track `track` ("stage 0").
  void NameTrack(int32_t track, const std::string& name);
  // Add: appends one span.
  void Add(const TraceSpan& span);
  // Close: writes the closing bracket and closes the file; later calls do nothing.
  // Errors: a failed write or close, naming the path.
  absl::Status Close();

 private:
  ChromeTraceWriter(std::FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  void WriteEvent(const std::string& json);
  std::FILE* file_;
  std::string path_;
  bool first_ = true;
  bool failed_ = false;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_TRACE_H_
