// tests/parity/tensor_file.cc
#include "tests/parity/tensor_file.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::parity {
namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

void TensorFileWriter::AddF32(const std::string& name, std::vector<int64_t> shape,
                              const float* data) {
  const int64_t n = Numel(shape);
  entries_.push_back({name, "F32", std::move(shape),
                      std::string(reinterpret_cast<const char*>(data), n * sizeof(float))});
}

void TensorFileWriter::AddI32(const std::string& name, std::vector<int64_t> shape,
                              const int32_t* data) {
  const int64_t n = Numel(shape);
  entries_.push_back({name, "I32", std::move(shape),
                      std::string(reinterpret_cast<const char*>(data), n * sizeof(int32_t))});
}

absl::Status TensorFileWriter::Write(const std::string& path) const {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  int64_t offset = 0;
  for (const Entry& e : entries_) {
    const int64_t end = offset + static_cast<int64_t>(e.bytes.size());
    absl::StrAppend(&header, ",\"", e.name, "\":{\"dtype\":\"", e.dtype, "\",\"shape\":[",
                    absl::StrJoin(e.shape, ","), "],\"data_offsets\":[", offset, ",", end, "]}");
    offset = end;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::InternalError(absl::StrCat("cannot open ", path, " for writing"));
  const uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const Entry& e : entries_) {
    out.write(e.bytes.data(), static_cast<std::streamsize>(e.bytes.size()));
  }
  if (!out) return absl::InternalError(absl::StrCat("write to ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace mxmaca::parity
