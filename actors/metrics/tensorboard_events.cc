// actors/metrics/tensorboard_events.cc: see tensorboard_events.h.
#include "actors/metrics/tensorboard_events.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actors/checkpoint/crc32c.h"

namespace mxmaca::actors::metrics {
namespace {

// Protobuf wire types (https://protobuf.dev/programming-guides/encoding/).
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutKey(std::string* out, uint32_t field, uint32_t wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

void PutLittleEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutDouble(std::string* out, uint32_t field, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  PutKey(out, field, kFixed64);
  PutLittleEndian(out, bits, 8);
}

void PutFloat(std::string* out, uint32_t field, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  PutKey(out, field, kFixed32);
  PutLittleEndian(out, bits, 4);
}

void PutBytes(std::string* out, uint32_t field, std::string_view bytes) {
  PutKey(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

// The Event fields before the oneof: wall_time, then step unless 0 (proto3 default).
std::string EventHeader(double wall_time, int64_t step) {
  std::string event;
  PutDouble(&event, 1, wall_time);
  if (step != 0) {
    PutKey(&event, 2, kVarint);
    PutVarint(&event, static_cast<uint64_t>(step));  // int64: two's complement
  }
  return event;
}

double WallTime() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

std::string HostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

std::atomic<int64_t> next_uid{0};  // tensorboard's _global_uid: one per writer in a process

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = checkpoint::Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string FrameTfRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutLittleEndian(&out, data.size(), 8);
  PutLittleEndian(&out, MaskedCrc32c(out.data(), 8), 4);
  out.append(data.data(), data.size());
  PutLittleEndian(&out, MaskedCrc32c(data.data(), data.size()), 4);
  return out;
}

std::string EncodeFileVersionEvent(double wall_time) {
  std::string event = EventHeader(wall_time, 0);
  PutBytes(&event, 3, "brain.Event:2");
  return event;
}

std::string EncodeScalarEvent(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  PutBytes(&summary_value, 1, tag);
  PutFloat(&summary_value, 2, value);
  std::string summary;
  PutBytes(&summary, 1, summary_value);
  std::string event = EventHeader(wall_time, step);
  PutBytes(&event, 5, summary);
  return event;
}

std::string EncodeTextEvent(double wall_time, int64_t step, std::string_view tag,
                            std::string_view text) {
  std::string plugin_data;
  PutBytes(&plugin_data, 1, "text");
  std::string metadata;
  PutBytes(&metadata, 1, plugin_data);
  std::string dim;
  PutKey(&dim, 1, kVarint);
  PutVarint(&dim, 1);
  std::string shape;
  PutBytes(&shape, 2, dim);
  std::string tensor;
  PutKey(&tensor, 1, kVarint);
  PutVarint(&tensor, 7);  // DT_STRING
  PutBytes(&tensor, 2, shape);
  PutBytes(&tensor, 8, text);
  std::string summary_value;
  PutBytes(&summary_value, 1, std::string(tag) + "/text_summary");
  PutBytes(&summary_value, 8, tensor);
  PutBytes(&summary_value, 9, metadata);
  std::string summary;
  PutBytes(&summary, 1, summary_value);
  std::string event = EventHeader(wall_time, step);
  PutBytes(&event, 5, summary);
  return event;
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir,
                                                                         int64_t max_queue) {
  if (max_queue < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensorboard-queue-size ", max_queue, ": expected >= 1"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensorboard-dir ", dir, ": cannot create the directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  const double now = WallTime();
  const std::string path = absl::StrFormat("%s/events.out.tfevents.%010d.%s.%d.%d", dir,
                                           static_cast<int64_t>(std::floor(now)), HostName(),
                                           static_cast<int64_t>(getpid()), next_uid.fetch_add(1));
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensorboard-dir: cannot create ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path, file, max_queue));
  writer->pending_ = FrameTfRecord(EncodeFileVersionEvent(now));
  if (absl::Status s = writer->Flush(); !s.ok()) return s;
  return writer;
}

EventFileWriter::EventFileWriter(std::string path, std::FILE* file, int64_t max_queue)
    : path_(std::move(path)), file_(file), max_queue_(max_queue) {}

EventFileWriter::~EventFileWriter() { (void)Close(); }

absl::Status EventFileWriter::AddScalar(std::string_view tag, double value, int64_t step) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the event file is closed"));
  }
  pending_ += FrameTfRecord(EncodeScalarEvent(WallTime(), step, tag, static_cast<float>(value)));
  if (++pending_count_ >= max_queue_) return Flush();
  return absl::OkStatus();
}

absl::Status EventFileWriter::AddText(std::string_view tag, std::string_view text, int64_t step) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the event file is closed"));
  }
  pending_ += FrameTfRecord(EncodeTextEvent(WallTime(), step, tag, text));
  if (++pending_count_ >= max_queue_) return Flush();
  return absl::OkStatus();
}

absl::Status EventFileWriter::Flush() {
  if (file_ == nullptr) return absl::OkStatus();
  const size_t n = pending_.size();
  const bool ok =
      (n == 0 || std::fwrite(pending_.data(), 1, n, file_) == n) && std::fflush(file_) == 0;
  pending_.clear();
  pending_count_ = 0;
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("writing the TensorBoard event file ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EventFileWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  absl::Status flushed = Flush();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (flushed.ok() && !closed) {
    return absl::DataLossError(
        absl::StrCat("closing the TensorBoard event file ", path_, ": ", std::strerror(errno)));
  }
  return flushed;
}

}  // namespace mxmaca::actors::metrics
