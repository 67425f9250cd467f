// data/fuzz/indexed_dataset_fuzz.cc: libFuzzer target for //data:indexed_dataset.
//
// Input layout: byte 0 = flags (bit 0: a .bin exists; bit 1: the .bin gets its size
// from the index, i.e. "matching", else from bytes 1-2), bytes 1-2 = a .bin size in
// [0, 4096), the rest = the .idx file. IndexedDataset::Open must return a Status (never
// crash, never read out of bounds under ASan); when it succeeds every sequence must be
// readable, the arrays consistent, and merging the dataset with AddIndex + Finalize must
// give a dataset with the same index and tokens (writer and reader agree).
//
// Built two ways, like tokenizer_fuzz: by data/fuzz/run_fuzzers_idx.sh with clang++
// -fsanitize=fuzzer (-DMXMACA_LIBFUZZER), and by Bazel as a plain binary replaying the
// files named on its command line.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace {

using mxmaca::data::DType;
using mxmaca::data::IndexedDataset;
using mxmaca::data::IndexedDatasetBuilder;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "indexed_dataset_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

const std::string& Dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base != nullptr ? base : "/tmp") + "/idxfuzz.XXXXXX";
    Check(::mkdtemp(templ.data()) != nullptr, "mkdtemp");
    return templ;
  }();
  return dir;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  Check(f != nullptr, "fopen");
  if (size > 0) Check(std::fwrite(data, 1, size, f) == size, "fwrite");
  std::fclose(f);
}

// Bytes the index would need in .bin if it is contiguous (0 if it cannot be parsed).
size_t MatchingBinSize(const uint8_t* idx, size_t size) {
  if (size < 34 || idx[17] < 1 || idx[17] > 8) return 0;
  uint64_t n;
  std::memcpy(&n, idx + 18, 8);
  if (n > (size - 34) / 4) return 0;
  static const int kItem[9] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; ++i) {
    int32_t len;
    std::memcpy(&len, idx + 34 + 4 * i, 4);
    if (len > 0) total += static_cast<uint64_t>(len) * kItem[idx[17]];
    if (total > (1u << 20)) return 1u << 20;
  }
  return static_cast<size_t>(total);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const uint8_t* idx = data + 3;
  const size_t idx_size = size - 3;
  const std::string prefix = Dir() + "/in";
  ::unlink((prefix + ".bin").c_str());
  WriteFile(prefix + ".idx", idx, idx_size);
  if (flags & 1) {
    size_t bin_size = (flags & 2) ? MatchingBinSize(idx, idx_size)
                                  : ((data[1] | (data[2] << 8)) % 4096);
    std::vector<uint8_t> bin(bin_size);
    for (size_t i = 0; i < bin_size; ++i) bin[i] = static_cast<uint8_t>(i * 131 + 7);
    WriteFile(prefix + ".bin", bin.data(), bin.size());
  }
  auto opened = IndexedDataset::Open(prefix);
  if (!opened.ok()) {
    Check(!opened.status().message().empty(), "error without message");
    return 0;
  }
  const IndexedDataset& ds = **opened;
  const int64_t n = ds.num_sequences();
  Check(n >= 0 && ds.num_documents() >= 0, "counts");
  Check(ds.document_index(0) == 0, "first document index");
  Check(ds.document_index(ds.num_documents()) == n, "last document index");
  Check(static_cast<int64_t>(ds.sequence_lengths().size()) == n, "lengths size");
  Check(static_cast<int64_t>(ds.document_indices().size()) == ds.num_documents() + 1,
        "document indices size");
  const bool is_float = ds.dtype() == DType::kFloat32 || ds.dtype() == DType::kFloat64;
  std::vector<std::vector<int32_t>> sequences;
  for (int64_t i = 0; i < n && i < 4096; ++i) {
    const int32_t len = ds.sequence_length(i);
    Check(len >= 0, "negative length after validation");
    Check(ds.sequence_pointer(i) + int64_t{len} * mxmaca::data::DTypeSize(ds.dtype()) <=
              ds.bin_size(),
          "sequence past .bin after validation");
    auto tokens = ds.Get(i);
    if (is_float) {
      Check(!tokens.ok(), "float dataset read as tokens");
      continue;
    }
    if (!tokens.ok()) {  // only int64 values outside int32
      Check(ds.dtype() == DType::kInt64, "Get failed on a validated dataset");
      return 0;
    }
    Check(static_cast<int64_t>(tokens->size()) == len, "Get length");
    if (len > 0) {
      auto tail = ds.Get(i, len - 1, 1);
      Check(tail.ok() && (*tail)[0] == tokens->back(), "partial Get");
    }
    Check(!ds.Get(i, 0, int64_t{len} + 1).ok(), "Get past the end");
    sequences.push_back(std::move(*tokens));
  }
  if (is_float || n > 4096) return 0;

  // Round trip through the writer: AddIndex (needs a contiguous .bin) and a rewrite
  // from the tokens must both reproduce the index and tokens.
  auto builder = IndexedDatasetBuilder::Create(Dir() + "/merged", ds.dtype());
  Check(builder.ok(), "builder");
  const bool merged = (*builder)->AddIndex(prefix).ok();
  Check((*builder)->Finalize().ok(), "finalize");
  if (!merged) return 0;
  auto again = IndexedDataset::Open(Dir() + "/merged");
  Check(again.ok(), "reopen merged");
  Check((*again)->num_sequences() == n, "merged sequences");
  Check((*again)->document_indices() == ds.document_indices(), "merged documents");
  for (int64_t i = 0; i < n; ++i) {
    auto tokens = (*again)->Get(i);
    Check(tokens.ok() && *tokens == sequences[i], "merged tokens");
  }
  return 0;
}

#ifndef MXMACA_LIBFUZZER
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::printf("%s: ok\n", argv[i]);
  }
  return 0;
}
#endif
