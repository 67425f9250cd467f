// actors/trace.cc: see trace.h.
#include "actors/trace.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace mxmaca::actors {

int64_t TraceClockMicros() {
  static const auto epoch = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - epoch)
      .count();
}

absl::StatusOr<std::unique_ptr<ChromeTraceWriter>> ChromeTraceWriter::Open(
    const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace-file ", path, ": cannot create: ", std::strerror(errno)));
  }
  std::fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
  return std::unique_ptr<ChromeTraceWriter>(new ChromeTraceWriter(f, path));
}

ChromeTraceWriter::~ChromeTraceWriter() { (void)Close(); }

void ChromeTraceWriter::WriteEvent(const std::string& json) {
  if (file_ == nullptr) return;
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  if (std::fputs(json.c_str(), file_) < 0) failed_ = true;
}

void ChromeTraceWriter::NameTrack(int32_t track, const std::string& name) {
  nlohmann::json e = {{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", track},
                      {"args", {{"name", name}}}};
  WriteEvent(e.dump());
}

void ChromeTraceWriter::Add(const TraceSpan& s) {
  nlohmann::json args = {{"iteration", s.iteration}};
  if (s.microbatch >= 0) args["microbatch"] = s.microbatch;
  nlohmann::json e = {{"name", s.name},          {"cat", s.category},
                      {"ph", "X"},               {"ts", s.start_us},
                      {"dur", s.duration_us},    {"pid", 0},
                      {"tid", s.track},          {"args", args}};
  WriteEvent(e.dump());
}

absl::Status ChromeTraceWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  std::fputs("\n]}\n", file_);
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (failed_ || close_failed) {
    return absl::DataLossError(absl::StrCat("--trace-file ", path_, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::actors
