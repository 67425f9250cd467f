// tests/parity/tensor_file.h: a minimal safetensors writer for the parity tests.
//
// Format (MEGATRON_FORMATS.md, "safetensors"): u64 little-endian header length N; N bytes
// of JSON {"name": {"dtype": "F32"|"I32", "shape": [...], "data_offsets": [begin, end]},
// "__metadata__": {"format": "pt"}} padded with spaces to a multiple of 8; then the
// tensors, little-endian, C order, back to back. Read by gpt_reference.py.
#ifndef MXMACA_TESTS_PARITY_TENSOR_FILE_H_
#define MXMACA_TESTS_PARITY_TENSOR_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::parity {

// TensorFileWriter: collects tensors (copied) and writes them in insertion order.
class TensorFileWriter {
 public:
  void AddF32(const std::string& name, std::vector<int64_t> shape, const float* data);
  void AddI32(const std::string& name, std::vector<int64_t> shape, const int32_t* data);
  // Write: the file at `path`; Internal error naming the path if it cannot be written.
  absl::Status Write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries_;
};

}  // namespace mxmaca::parity

#endif  // MXMACA_TESTS_PARITY_TENSOR_FILE_H_
