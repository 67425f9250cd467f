// Tests the event-file encoding against bytes worked out by hand from the protobuf wire
// format and TFRecord's framing (tensorboard_events.h). The independent decoder check
// (python3-protobuf with TensorFlow's .proto) is //tests/integration:tensorboard_test.
#include "actors/metrics/tensorboard_events.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "actors/checkpoint/crc32c.h"

namespace mxmaca::actors::metrics {
namespace {

uint64_t LittleEndian(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return v;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return std::string(t != nullptr ? t : "/tmp") + "/tensorboard_events_test";
}

TEST_CASE("masked CRC-32C is TFRecord's mask of the Castagnoli CRC") {
  const char* text = "123456789";
  const uint32_t crc = checkpoint::Crc32c(text, 9);
  REQUIRE(crc == 0xE3069283u);
  CHECK(MaskedCrc32c(text, 9) == static_cast<uint32_t>(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
}

TEST_CASE("a TFRecord is length, masked CRC of the length, data, masked CRC of the data") {
  const std::string data = "hello";
  const std::string record = FrameTfRecord(data);
  REQUIRE(record.size() == data.size() + 16);
  CHECK(LittleEndian(record, 0, 8) == 5);
  CHECK(LittleEndian(record, 8, 4) == MaskedCrc32c(record.data(), 8));
  CHECK(record.substr(12, 5) == data);
  CHECK(LittleEndian(record, 17, 4) == MaskedCrc32c(data.data(), data.size()));
}

TEST_CASE("scalar and file-version events have the protobuf bytes worked out by hand") {
  // Event{wall_time: 1.5 (field 1, fixed64), step: 3 (field 2, varint),
  //       summary (field 5): Summary{value (field 1): Value{tag "a" (1), simple_value 2.0f (2)}}}
  const std::string expected_scalar =
      Bytes({0x09, 0,    0,    0,    0,   0, 0, 0xF8, 0x3F,  // 1.5 as a little-endian double
             0x10, 0x03,                                     // step 3
             0x2A, 0x0A,                                     // summary, 10 bytes
             0x0A, 0x08,                                     //   value, 8 bytes
             0x0A, 0x01, 'a',                                //     tag "a"
             0x15, 0x00, 0x00, 0x00, 0x40});                 //     simple_value 2.0f
  CHECK(EncodeScalarEvent(1.5, 3, "a", 2.0f) == expected_scalar);
  // A step over 127 takes two varint bytes; step 0 is not written (proto3 default).
  CHECK(EncodeScalarEvent(1.5, 300, "a", 2.0f).substr(9, 3) == Bytes({0x10, 0xAC, 0x02}));
  CHECK(EncodeScalarEvent(1.5, 0, "a", 2.0f).substr(9, 1) == Bytes({0x2A}));
  const std::string expected_version =
      std::string(Bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13})) + "brain.Event:2";
  CHECK(EncodeFileVersionEvent(1.5) == expected_version);
}

TEST_CASE("a text event has add_text's protobuf bytes worked out by hand") {
  // Event{wall_time 1.5, step 3, summary{value{tag "a/text_summary" (1), tensor (8):
  // TensorProto{dtype DT_STRING = 7 (1), tensor_shape (2){dim (2){size 1 (1)}},
  // string_val "x" (8)}, metadata (9): SummaryMetadata{plugin_data (1){plugin_name "text"}}}}}
  const std::string tensor =
      Bytes({0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x42, 0x01, 'x'});
  const std::string metadata = Bytes({0x0A, 0x06, 0x0A, 0x04, 't', 'e', 'x', 't'});
  const std::string value = std::string(Bytes({0x0A, 14})) + "a/text_summary" +
                            Bytes({0x42, static_cast<int>(tensor.size())}) + tensor +
                            Bytes({0x4A, static_cast<int>(metadata.size())}) + metadata;
  const std::string summary = Bytes({0x0A, static_cast<int>(value.size())}) + value;
  const std::string expected = std::string(Bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x10, 0x03,
                                                  0x2A, static_cast<int>(summary.size())})) +
                               summary;
  CHECK(EncodeTextEvent(1.5, 3, "a", "x") == expected);
}

TEST_CASE("an event file is named as SummaryWriter names it and starts with the version") {
  const std::string dir = TempDir() + "/named";
  std::filesystem::remove_all(dir);
  auto writer = EventFileWriter::Create(dir, 2);
  REQUIRE(writer.ok());
  const std::string name = std::filesystem::path((*writer)->path()).filename().string();
  CHECK(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.\d+)")));
  auto read = [&] {
    std::ifstream f((*writer)->path(), std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  std::string bytes = read();
  REQUIRE(bytes.size() == 16 + 9 + 2 + 13);  // flushed at once
  CHECK(bytes.substr(12 + 9 + 2, 13) == "brain.Event:2");
  // max_queue 2: the first scalar stays queued, the second flushes both.
  REQUIRE((*writer)->AddScalar("lm loss", 7.0, 1).ok());
  CHECK(read().size() == bytes.size());
  REQUIRE((*writer)->AddScalar("lm loss", 6.5, 2).ok());
  CHECK(read().size() > bytes.size());
  REQUIRE((*writer)->Close().ok());
  CHECK(!(*writer)->AddScalar("lm loss", 6.0, 3).ok());
}

TEST_CASE("bad event-file arguments are errors naming the value") {
  auto queue = EventFileWriter::Create(TempDir() + "/q", 0);
  REQUIRE(!queue.ok());
  CHECK(std::string(queue.status().message()).find("--tensorboard-queue-size 0") !=
        std::string::npos);
  const std::string file = TempDir() + "/a_file";
  std::filesystem::create_directories(TempDir());
  std::ofstream(file) << "x";
  auto not_dir = EventFileWriter::Create(file + "/sub", 10);
  REQUIRE(!not_dir.ok());
  CHECK(std::string(not_dir.status().message()).find("--tensorboard-dir") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::actors::metrics
