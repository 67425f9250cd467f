// data/gpt_index_cache.h: the numpy .npy files and atomic writes behind the GPT dataset
// index cache (gpt_dataset.h). Only what the cache needs: C-order integer arrays of 1 or
// 2 dimensions, format version 1.0, little-endian, the header padded to 64 bytes as
// numpy.save writes it (numpy/lib/format.py), so numpy.load reads our files and we read
// numpy's.
#ifndef MXMACA_DATA_GPT_INDEX_CACHE_H_
#define MXMACA_DATA_GPT_INDEX_CACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mxmaca::data {

// NpyDtype: the element types the index cache uses (numpy descr in the comment).
enum class NpyDtype { kInt16, kInt32, kUint32, kInt64 };  // <i2 <i4 <u4 <i8
const char* NpyDescr(NpyDtype dtype);

// NpyArray: a parsed .npy: dtype, shape and the values widened to int64 (C order).
struct NpyArray {
  NpyDtype dtype = NpyDtype::kInt64;
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
};

// WriteNpyAtomic: writes `values` (C order, product(shape) of them) as a .npy of
// `dtype` to a temporary beside `path`, then renames it over `path`. Errors:
// InvalidArgument if a value does not fit `dtype` or the count does not match the
// shape; the OS error with the path on a failed write or rename.
absl::Status WriteNpyAtomic(const std::string& path, NpyDtype dtype,
                            const std::vector<int64_t>& shape, absl::Span<const int64_t> values);

// ReadNpy: parses a .npy written as above. Errors: NotFound if missing; DataLoss naming
// the file and what was wrong (bad magic or header, an unsupported dtype, Fortran
// order, or a size that does not match the header: a truncated file).
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// WriteFileAtomic / ReadWholeFile: a whole text file, written through a temporary and
// a rename. Errors: the OS error with the path.
absl::Status WriteFileAtomic(const std::string& path, const std::string& contents);
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// MakeDirs: mkdir -p. Errors: the OS error with the path.
absl::Status MakeDirs(const std::string& path);

// Fnv1a64Hex: 16 hex digits of the 64-bit FNV-1a hash of `text` (cache file names).
std::string Fnv1a64Hex(const std::string& text);

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_GPT_INDEX_CACHE_H_
