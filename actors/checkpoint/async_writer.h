// actors/checkpoint/async_writer.h: the background thread of --async-save (Megatron's
// async checkpoint save, megatron/core/dist_checkpointing/strategies/async_utils.py):
// writes a snapshotted checkpoint (CheckpointWriter::DeferWrites) and publishes it while
// training continues. At most one save in flight; the owner waits for it (Wait) before
// the next save and at the end of training. Guarantees: docs/CHECKPOINTS.md
// "Asynchronous saves (--async-save)".
#ifndef MXMACA_ACTORS_CHECKPOINT_ASYNC_WRITER_H_
#define MXMACA_ACTORS_CHECKPOINT_ASYNC_WRITER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "actors/checkpoint/checkpoint_writer.h"

namespace mxmaca::actors::checkpoint {

// Test-only environment variables, read by AsyncCheckpointWriter::Start (never set them in
// production; tests/integration:async_save_test uses them):
//   MXMACA_TEST_SLOW_CHECKPOINT_WRITE_MS=<ms>: the background job sleeps <ms> before
//     writing the shard files and again before publishing (to kill a process mid-save);
//   MXMACA_TEST_FAIL_CHECKPOINT_WRITE_ITERATION=<N>: the background write of iteration N
//     fails as a full disk would (ENOSPC on the temp dir), before any shard is written;
//   MXMACA_TEST_FAIL_CHECKPOINT_WRITE_RANK=<R>: with the above, only in the process whose
//     launcher-given RANK is R (a one-rank failure in a multi-process job).
inline constexpr char kTestSlowWriteEnv[] = "MXMACA_TEST_SLOW_CHECKPOINT_WRITE_MS";
inline constexpr char kTestFailWriteEnv[] = "MXMACA_TEST_FAIL_CHECKPOINT_WRITE_ITERATION";
inline constexpr char kTestFailRankEnv[] = "MXMACA_TEST_FAIL_CHECKPOINT_WRITE_RANK";

// AsyncSaveResult: how a background save ended.
//   status:        OK, or the first error (the file system's, naming the path).
//   iteration:     the checkpoint's iteration.
//   final_dir:     <save>/iter_{:07d}.
//   write_seconds: wall time of the background job (shard files, fsyncs, commit).
struct AsyncSaveResult {
  absl::Status status;
  int64_t iteration = 0;
  std::string final_dir;
  double write_seconds = 0.0;
};

// AsyncCheckpointWriter: runs one background save at a time on a thread of its own.
// All methods are called by one owner thread (the coordinator); the job runs on the
// background thread and touches only the writer and what `publish` captured. The
// destructor waits for a job in flight (never abandons a half-written save to a torn-down
// process), logging its error, if any, through `log_error`.
class AsyncCheckpointWriter {
 public:
  // log_error: called on the background thread, once, when a job fails, with a line
  // naming the iteration and the error (the path and the OS error): the failure is
  // reported when it happens, before the owner learns of it. Empty: stderr.
  explicit AsyncCheckpointWriter(std::function<void(const std::string&)> log_error = {});
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Start: begins the background job for `writer` (made by Begin or Attach, with
  // DeferWrites, every WriteShard returned): writer->WriteDeferred() (shard files, each
  // fsynced), then publish(*writer) (the owner's Commit — metadata.json, rename of the
  // temp dir, fsyncs, latest_checkpointed_iteration.txt — and any after-commit hook).
  // Nothing of the previous checkpoint changes unless the whole job succeeds. The writer
  // is released on the background thread (an unpublished temp dir is removed then).
  // Precondition (aborts otherwise): no job in flight (call Wait or TryFinish first).
  void Start(std::shared_ptr<CheckpointWriter> writer,
             std::function<absl::Status(CheckpointWriter&)> publish);

  // in_flight: a job was started and its result not yet taken.
  bool in_flight() const { return thread_.joinable(); }

  // ended: a job is in flight and has ended (its result waits for TryFinish / Wait, which
  // then return at once). Never blocks; takes nothing.
  bool ended() const { return thread_.joinable() && done_.load(std::memory_order_acquire); }

  // TryFinish: the result of the job in flight if it has ended (joining its thread), else
  // nullopt without blocking; nullopt too when none is in flight.
  std::optional<AsyncSaveResult> TryFinish();

  // Wait: blocks until the job in flight ends and returns its result (joining the thread);
  // nullopt when none is in flight. The job always ends: every step is bounded file I/O.
  std::optional<AsyncSaveResult> Wait();

 private:
  std::function<void(const std::string&)> log_error_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  AsyncSaveResult result_;  // written by the job before done_, read after join
};

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_ASYNC_WRITER_H_
