// actors/metrics/tensorboard_events.h: TensorBoard event files, written by hand.
//
// What torch.utils.tensorboard.SummaryWriter (Megatron's --tensorboard-dir writer) writes
// for add_scalar, without a protobuf library:
//   - file name `events.out.tfevents.{time:010d}.{host}.{pid}.{uid}` in the log directory
//     (tensorboard/summary/writer/event_file_writer.py);
//   - TFRecord framing per record (tensorflow/core/lib/io/record_writer.cc): u64 length,
//     u32 masked CRC-32C of those 8 bytes, the data, u32 masked CRC-32C of the data, all
//     little-endian; mask = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32);
//   - the first record an Event{wall_time, file_version = "brain.Event:2"}, then one
//     Event{wall_time, step, summary{value{tag, simple_value}}} per scalar.
// Protobuf fields (tensorflow/core/util/event.proto, framework/summary.proto): Event
// wall_time = 1 (double, fixed64), step = 2 (int64, varint), file_version = 3 (string),
// summary = 5 (message); Summary.value = 1 (repeated message); Value.tag = 1 (string),
// Value.simple_value = 2 (float, fixed32). proto3: a zero step is not written; the oneof
// member simple_value always is.
#ifndef MXMACA_ACTORS_METRICS_TENSORBOARD_EVENTS_H_
#define MXMACA_ACTORS_METRICS_TENSORBOARD_EVENTS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::actors::metrics {

// MaskedCrc32c: TFRecord's masked CRC-32C of `size` bytes at `data`.
uint32_t MaskedCrc32c(const void* data, size_t size);

// FrameTfRecord: `data` in TFRecord framing (length, masked CRC of the length, data,
// masked CRC of the data); 16 bytes longer than `data`.
std::string FrameTfRecord(std::string_view data);

// EncodeFileVersionEvent: the serialized Event{wall_time, file_version: "brain.Event:2"}.
// `wall_time` in seconds since the Unix epoch.
std::string EncodeFileVersionEvent(double wall_time);

// EncodeScalarEvent: the serialized Event{wall_time, step, summary{value{tag,
// simple_value}}}. `value` is stored as a float (as SummaryWriter.add_scalar does).
std::string EncodeScalarEvent(double wall_time, int64_t step, std::string_view tag, float value);

// EncodeTextEvent: the serialized Event of SummaryWriter.add_text(tag, text, step)
// (torch/utils/tensorboard/summary.py text()): Value{tag: tag + "/text_summary",
// metadata (9): SummaryMetadata{plugin_data (1): PluginData{plugin_name (1): "text"}},
// tensor (8): TensorProto{dtype (1): DT_STRING = 7, tensor_shape (2): TensorShapeProto{
// dim (2): Dim{size (1): 1}}, string_val (8): text}} (tensorboard/compat/proto/summary.proto,
// tensor.proto, tensor_shape.proto, types.proto; TextPluginData{version: 0} serializes to
// nothing, so PluginData.content is empty and not written).
std::string EncodeTextEvent(double wall_time, int64_t step, std::string_view tag,
                            std::string_view text);

// EventFileWriter: one event file, records buffered in memory and written out by Flush
// (SummaryWriter's max_queue: after `max_queue` pending scalars the writer flushes itself).
// Not thread-safe; the coordinator owns it.
class EventFileWriter {
 public:
  // Create: creates `dir` if needed and a new event file in it named as above (`host` from
  // gethostname), writes and flushes the file_version record. Errors: the directory or the
  // file cannot be created (InvalidArgument naming the path), or max_queue < 1.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir,
                                                                 int64_t max_queue);
  ~EventFileWriter();  // flushes; errors are lost: call Close to see them
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // AddScalar: queues one scalar event at the current wall time; flushes when max_queue
  // events are pending. Errors: as Flush.
  absl::Status AddScalar(std::string_view tag, double value, int64_t step);
  // AddText: queues one text event (EncodeTextEvent) at the current wall time, as AddScalar.
  absl::Status AddText(std::string_view tag, std::string_view text, int64_t step);
  // Flush: writes the pending records and flushes the file. Errors: a failed write
  // (DataLoss naming the file and errno's text).
  absl::Status Flush();
  // Close: flushes and closes the file; later calls do nothing.
  absl::Status Close();
  // path: the event file's path.
  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, std::FILE* file, int64_t max_queue);
  std::string path_;
  std::FILE* file_;
  int64_t max_queue_;
  int64_t pending_count_ = 0;
  std::string pending_;
};

}  // namespace mxmaca::actors::metrics

#endif  // MXMACA_ACTORS_METRICS_TENSORBOARD_EVENTS_H_
