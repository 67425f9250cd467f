// actors/checkpoint/checkpoint_writer.h: saves a checkpoint of logical tensors
// atomically (docs/ARCHITECTURE.md "Checkpoints store logical tensors"; format in
// checkpoint_format.h and docs/CHECKPOINTS.md).
//
// Usage (one writer per save, shared by the stage actors of a process):
//   MXMACA_ASSIGN_OR_RETURN(CheckpointWriter w, CheckpointWriter::Begin(save, 1000));
//   // each stage actor, concurrently:
//   MXMACA_RETURN_IF_ERROR(w.WriteShard("pp1_tp0", views));
//   // coordinator, after every WriteShard returned:
//   MXMACA_RETURN_IF_ERROR(w.Commit(args_json, state_json));
// Until Commit renames the temp dir, nothing a reader looks at has changed; a crash at any
// point leaves either the previous or the new checkpoint loadable.
#ifndef MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_WRITER_H_
#define MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include <nlohmann/json.hpp>

namespace mxmaca::actors::checkpoint {

// TensorShardView: one shard of a logical tensor, as held by the caller (not owned).
//   name:        logical name, e.g. "model/decoder.layers.3.mlp.linear_fc1.weight" or
//                "optimizer/exp_avg/decoder.layers.3.mlp.linear_fc1.weight"
//                (characters [A-Za-z0-9_.:/-]); layer numbers are global, not per stage.
//   full_shape:  shape of the whole logical tensor, e.g. [ffn, h]; [] for a scalar.
//   offsets:     where this shard starts in the full tensor, per dim.
//   shard_shape: extent of this shard, per dim; offsets + shard_shape <= full_shape.
//   data:        prod(shard_shape) fp32 values, C order over shard_shape, read during
//                WriteShard only (may be null when the shard is empty).
// A tensor held as several boxes by one writer (e.g. SwiGLU's [gate; up] rows of a TP
// shard) is passed as several views with the same name.
struct TensorShardView {
  std::string name;
  std::vector<int64_t> full_shape;
  std::vector<int64_t> offsets;
  std::vector<int64_t> shard_shape;
  const float* data = nullptr;
};

// CheckpointWriter: writes one checkpoint (one iteration) into a temp dir and publishes it
// on Commit. WriteShard is thread-safe; Begin and Commit are called once each by one
// thread (of one process; other processes Attach). Move-only. Destroying a writer made by
// Begin that did not commit removes its temp dir (a crashed process leaves it behind;
// readers ignore such dirs).
class CheckpointWriter {
 public:
  // Begin: creates `save_dir` if needed (like mkdir -p) and a fresh temp dir
  // <save_dir>/iter_{:07d}.tmp-<pid>-<counter>-<time>-<host>/ for this save. First it
  // removes the temp entries of earlier saves whose writer is gone (a process killed
  // mid-save; RemoveStaleTempEntries in temp_dirs.h, best effort), listed by removed_stale().
  // Errors: InvalidArgument for an empty save_dir or a negative iteration; the file
  // system's error (naming the path) if a directory cannot be created.
  static absl::StatusOr<CheckpointWriter> Begin(const std::string& save_dir,
                                                int64_t iteration);

  // Attach: joins a save that another process began, for multi-process jobs: the
  // coordinator calls Begin and sends temp_dir() to the other processes (a control
  // message), each calls Attach and WriteShard for its own writers and reports back; once
  // all have reported, the coordinator's Commit indexes every shard file in the temp dir.
  // An attached writer cannot Commit and never removes the temp dir.
  // Errors: NotFound if `temp_dir` does not exist; InvalidArgument if its name is not
  // <save_dir>/iter_{:07d}.tmp-* for `iteration`.
  static absl::StatusOr<CheckpointWriter> Attach(const std::string& save_dir,
                                                 int64_t iteration,
                                                 const std::string& temp_dir);

  CheckpointWriter(CheckpointWriter&&) noexcept;
  CheckpointWriter& operator=(CheckpointWriter&&) noexcept;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();

  // WriteShard: writes shard_<writer_name>.safetensors (as a .partial file, fsynced, then
  // renamed, so a shard file under its final name is always complete) holding every view
  // of `tensors` as one safetensors entry, and records the views in the tensor index.
  // Thread-safe: several actors may write their own shards concurrently; the file I/O runs
  // outside the writer's lock.
  // Errors: InvalidArgument for a bad writer name, a writer name already used, a bad
  // tensor name, a shard outside its full shape, null data for a non-empty shard, or a
  // full shape differing from one another shard of the same name gave; FailedPrecondition
  // after Commit; the file system's error naming the file.
  // With DeferWrites (below), WriteShard instead copies the views into host memory
  // (ShardSnapshot, shard_snapshot.h) and returns; the files are written by WriteDeferred.
  // Errors then: InvalidArgument for a bad writer name, a writer name already used, or
  // null data for a non-empty shard; FailedPrecondition after Commit. The remaining
  // checks run in WriteDeferred.
  absl::Status WriteShard(const std::string& writer_name,
                          absl::Span<const TensorShardView> tensors);

  // DeferWrites: --async-save: from now on WriteShard snapshots its views (one copy, on
  // the calling thread) instead of writing them, so the caller's tensors may change as
  // soon as it returns. Call before the first WriteShard, on one thread. Idempotent.
  void DeferWrites();

  // WriteDeferred: writes every snapshot taken since DeferWrites, in the order taken,
  // exactly as WriteShard would have written it from the original views (same bytes),
  // then frees them. Meant for a background thread (AsyncCheckpointWriter,
  // async_writer.h) while the training thread continues; call it once all WriteShard
  // calls returned and before Commit. Thread-safe against nothing else running on this
  // writer except accessors.
  // Errors: WriteShard's (validation, or the file system's error naming the file); the
  // first error is returned after the other shards were tried, and Commit then refuses.
  absl::Status WriteDeferred();

  // deferred_bytes: tensor bytes snapshotted by deferred WriteShard calls so far.
  int64_t deferred_bytes() const;

  // Commit: validates the index (every tensor covered by its shards exactly once, no
  // overlap, one full shape per name — FailedPrecondition naming the tensor and shards
  // otherwise), writes metadata.json {format, version, iteration, args, state, tensors},
  // fsyncs it and the temp dir, renames the temp dir to iter_{:07d} (an existing
  // iter_{:07d} is swapped out atomically and then removed), fsyncs <save_dir>, then
  // replaces latest_checkpointed_iteration.txt by temp file + rename + fsync.
  // `args` (the run's arguments) and `state` (consumed samples, scheduler and optimizer
  // steps, RNG/data position, ...) must be JSON objects; they are stored as given.
  // Shard files written by attached writers in other processes are indexed from their
  // safetensors __metadata__ (see docs/CHECKPOINTS.md); a missing one shows up as
  // incomplete coverage.
  // Errors: InvalidArgument if args/state are not objects or hold invalid UTF-8;
  // FailedPrecondition for a bad index, a failed WriteShard, a second Commit, or Commit on
  // an attached writer; DataLoss for an unreadable shard file of another process; the file
  // system's error otherwise (then the previous checkpoint stays the latest).
  absl::Status Commit(const nlohmann::json& args, const nlohmann::json& state);

  // iteration: the iteration given to Begin.
  int64_t iteration() const;
  // temp_dir: the directory shards are written to before Commit.
  const std::string& temp_dir() const;
  // final_dir: <save_dir>/iter_{:07d}.
  const std::string& final_dir() const;
  // removed_stale: the stale temp entries Begin removed (TempEntry::Describe), for a log
  // line; empty for an attached writer.
  const std::vector<std::string>& removed_stale() const;

 private:
  struct State;
  // WriteShardNow: WriteShard's file writing path, from `tensors` as given.
  absl::Status WriteShardNow(const std::string& writer_name,
                             absl::Span<const TensorShardView> tensors);
  explicit CheckpointWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_WRITER_H_
