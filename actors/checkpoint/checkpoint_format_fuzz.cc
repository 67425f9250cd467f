// actors/checkpoint/checkpoint_format_fuzz.cc: libFuzzer target for the MXMACA checkpoint
// metadata reader: metadata.json's tensor index (TensorIndexFromJson, ValidateTensorIndex)
// and the safetensors shard-file header (ParseSafetensorsHeader), the code that reads
// untrusted checkpoint bytes (checkpoint_format.h).
//
// Input: byte 0 selects the mode; the rest is the file.
//   even: the rest is a metadata.json: parsed with nlohmann::json as CheckpointReader does;
//         when it is an object with an object "tensors", TensorIndexFromJson must return a
//         Status and, when it succeeds, ValidateTensorIndex too (never crash, never read out
//         of bounds under ASan, no undefined behaviour under UBSan, no exception). When the
//         index reads, TensorIndexToJson of it reads back to the same index (writer and
//         reader agree); when it also validates, the re-read index validates.
//   odd:  the rest is a whole shard file: ParseSafetensorsHeader(rest, rest.size()) must
//         return a Status; when it succeeds every entry lies inside the file, and
//         EncodeSafetensorsHeader of the entries and metadata parses again to the same
//         entries and metadata.
// Built two ways like data/fuzz's targets: by run_checkpoint_format_fuzz.sh with clang++
// -fsanitize=fuzzer,address,undefined (-DMXMACA_LIBFUZZER), and by Bazel as a plain binary
// replaying the files named on its command line.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_format.h"

namespace {

using namespace mxmaca::actors::checkpoint;
using json = nlohmann::json;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "checkpoint_format_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

bool SameShard(const ShardEntry& a, const ShardEntry& b) {
  return a.file == b.file && a.key == b.key && a.offsets == b.offsets && a.shape == b.shape &&
         a.crc32c == b.crc32c;
}

bool SameIndex(const TensorIndex& a, const TensorIndex& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.full_shape != ib->second.full_shape ||
        ia->second.shards.size() != ib->second.shards.size()) {
      return false;
    }
    for (size_t i = 0; i < ia->second.shards.size(); ++i) {
      if (!SameShard(ia->second.shards[i], ib->second.shards[i])) return false;
    }
  }
  return true;
}

void FuzzMetadata(absl::string_view text) {
  // CheckpointReader parses with exceptions and turns them into DataLoss; the
  // non-throwing form is the same parser.
  json meta = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object()) return;
  auto tensors = meta.find("tensors");
  if (tensors == meta.end() || !tensors->is_object()) return;
  absl::StatusOr<TensorIndex> index = TensorIndexFromJson(*tensors, "fuzz/metadata.json");
  if (!index.ok()) return;
  const absl::Status valid = ValidateTensorIndex(*index);
  absl::StatusOr<TensorIndex> back =
      TensorIndexFromJson(TensorIndexToJson(*index), "fuzz/metadata.json (re-written)");
  if (!back.ok()) std::fprintf(stderr, "%s\n", back.status().ToString().c_str());
  Check(back.ok(), "a re-written index reads");
  Check(SameIndex(*index, *back), "a re-written index reads to the same index");
  if (valid.ok()) Check(ValidateTensorIndex(*back).ok(), "a re-written valid index validates");
}

void FuzzShard(absl::string_view file) {
  absl::StatusOr<SafetensorsHeader> h =
      ParseSafetensorsHeader(file, file.size(), "fuzz/shard_0.safetensors");
  if (!h.ok()) return;
  Check(h->data_start >= 8 && h->data_start <= file.size(), "data start inside the file");
  std::vector<SafetensorsEntry> entries;
  uint64_t end = 0;
  for (const auto& [key, e] : h->entries) {
    Check(e.key == key && e.begin <= e.end && e.end <= file.size() - h->data_start,
          "entry inside the data buffer");
    end = std::max(end, e.end);
    entries.push_back(e);
  }
  Check(h->data_start + end == file.size(), "entries end at the end of the file");
  std::string again = EncodeSafetensorsHeader(entries, h->metadata);
  const uint64_t again_start = again.size();
  again.append(end, '\0');
  absl::StatusOr<SafetensorsHeader> back =
      ParseSafetensorsHeader(again, again.size(), "fuzz/shard_0.safetensors (re-encoded)");
  if (!back.ok()) std::fprintf(stderr, "%s\n", back.status().ToString().c_str());
  Check(back.ok(), "a re-encoded header parses");
  Check(back->data_start == again_start && back->data_start % 8 == 0 &&
            back->metadata == h->metadata && back->entries.size() == h->entries.size(),
        "a re-encoded header parses to the same header");
  for (const auto& [key, e] : h->entries) {
    auto it = back->entries.find(key);
    Check(it != back->entries.end() && it->second.shape == e.shape &&
              it->second.begin == e.begin && it->second.end == e.end,
          "a re-encoded entry parses to the same entry");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzMetadata(rest);
  } else {
    FuzzShard(rest);
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
