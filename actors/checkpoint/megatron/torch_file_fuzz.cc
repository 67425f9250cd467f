// actors/checkpoint/megatron/torch_file_fuzz.cc: libFuzzer target for the zip reader and
// the restricted unpickler (the code that reads untrusted checkpoint bytes).
//
// Input: byte 0 selects the mode; the rest is the file.
//   even: the rest is a pickle: Unpickle must return a Status (never crash, never read out
//         of bounds under ASan, never leak under LSan); when it succeeds, Pickle of the value
//         (when it can be written) must unpickle again — writer and reader agree.
//   odd:  the rest is a zip archive: ZipReader::Open must return a Status; when it opens,
//         every entry's data view lies inside the input and VerifyCrc runs; a
//         "<archive>/data.pkl" entry is unpickled as above.
// Built two ways like data/fuzz's targets: by run_torch_file_fuzz.sh with clang++
// -fsanitize=fuzzer,address,undefined (-DMXMACA_LIBFUZZER), and by Bazel as a plain binary
// replaying the files named on its command line.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "actors/checkpoint/megatron/pickle_reader.h"
#include "actors/checkpoint/megatron/pickle_writer.h"
#include "actors/checkpoint/megatron/zip_archive.h"

namespace {

using namespace mxmaca::actors::checkpoint::megatron;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "torch_file_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

void FuzzPickle(absl::string_view bytes) {
  absl::StatusOr<PyRef> v = Unpickle(bytes, "fuzz");
  if (!v.ok()) return;
  absl::StatusOr<std::string> again = Pickle(**v);
  if (!again.ok()) return;
  absl::StatusOr<PyRef> back = Unpickle(*again, "fuzz (re-pickled)");
  if (!back.ok()) std::fprintf(stderr, "%s\n", back.status().ToString().c_str());
  Check(back.ok(), "a re-pickled value unpickles");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzPickle(rest);
    return 0;
  }
  absl::StatusOr<ZipReader> zip = ZipReader::Open(rest.data(), rest.size(), "fuzz.pt");
  if (!zip.ok()) return 0;
  for (const ZipEntry& e : zip->entries()) {
    Check(e.data_offset <= rest.size() && e.size <= rest.size() - e.data_offset, "entry inside the input");
    (void)zip->VerifyCrc(e);
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.substr(slash + 1) == "data.pkl") FuzzPickle(zip->Data(e));
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
