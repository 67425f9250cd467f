// actors/checkpoint/async_writer.cc: the background save thread and its test hooks.
#include "actors/checkpoint/async_writer.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actors/checkpoint/file_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

// EnvInt: a test hook's value, or `fallback` when unset or not an integer.
int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  int64_t out = 0;
  if (v == nullptr || !absl::SimpleAtoi(v, &out)) return fallback;
  return out;
}

}  // namespace

AsyncCheckpointWriter::AsyncCheckpointWriter(std::function<void(const std::string&)> log_error)
    : log_error_(std::move(log_error)) {
  if (!log_error_) {
    log_error_ = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  }
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void AsyncCheckpointWriter::Start(std::shared_ptr<CheckpointWriter> writer,
                                  std::function<absl::Status(CheckpointWriter&)> publish) {
  if (thread_.joinable() || writer == nullptr) {  // a broken invariant of the owner
    std::fprintf(stderr, "AsyncCheckpointWriter::Start %s\n",
                 writer == nullptr ? "without a writer" : "with a save in flight");
    std::abort();
  }
  const int64_t slow_ms = EnvInt(kTestSlowWriteEnv, 0);
  int64_t fail_iteration = EnvInt(kTestFailWriteEnv, -1);
  if (std::getenv(kTestFailRankEnv) != nullptr &&
      EnvInt(kTestFailRankEnv, -1) != EnvInt("RANK", 0)) {
    fail_iteration = -1;  // another rank's failure
  }
  done_.store(false);
  result_ = AsyncSaveResult{};
  result_.iteration = writer->iteration();
  result_.final_dir = writer->final_dir();
  thread_ = std::thread([this, writer = std::move(writer), publish = std::move(publish),
                         slow_ms, fail_iteration]() mutable {
    const auto start = std::chrono::steady_clock::now();
    auto nap = [slow_ms] {
      if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    };
    absl::Status s = [&]() -> absl::Status {
      nap();
      if (writer->iteration() == fail_iteration) {
        return ErrnoStatus(ENOSPC,
                           absl::StrCat("cannot write checkpoint shards (failure injected by ",
                                        kTestFailWriteEnv, " for tests) into"),
                           writer->temp_dir());
      }
      absl::Status w = writer->WriteDeferred();
      if (!w.ok()) return w;
      nap();
      return publish(*writer);
    }();
    writer.reset();  // an unpublished temp dir is removed here (the owner of Begin)
    result_.write_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      log_error_(absl::StrCat("mxmaca: the background checkpoint save (--async-save) of "
                              "iteration ", result_.iteration, " to ", result_.final_dir,
                              " failed: ", s.message(),
                              "; the previous checkpoint stays the latest; the run ends "
                              "with this error at its next synchronization point"));
    }
    result_.status = std::move(s);
    done_.store(true, std::memory_order_release);
  });
}

std::optional<AsyncSaveResult> AsyncCheckpointWriter::TryFinish() {
  if (!thread_.joinable() || !done_.load(std::memory_order_acquire)) return std::nullopt;
  return Wait();
}

std::optional<AsyncSaveResult> AsyncCheckpointWriter::Wait() {
  if (!thread_.joinable()) return std::nullopt;
  thread_.join();
  return std::move(result_);
}

}  // namespace mxmaca::actors::checkpoint
