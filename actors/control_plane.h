// actors/control_plane.h: the coordinators' channel when a job spans processes (one rank
// per process, docs/MULTIPROCESS.md "How training runs across processes").
//
// Every process runs its own Coordinator for its own stage actor. Where the in-process
// coordinator sums the reports of all stages, the coordinators of a multi-process job
// all-gather their stages' reports through a ControlPlane and then compute the same sums,
// in the same rank order, from the same bytes — so every process takes the same decision
// (skip, clip coefficient, learning rate, evaluate, save, exit) without a leader. Small
// fixed-size blocks (a few hundred bytes per rank per iteration) travel over the job's
// Communicator (UCX between processes) on a group of its own, so they never interleave
// with the layers' collectives.
#ifndef MXMACA_ACTORS_CONTROL_PLANE_H_
#define MXMACA_ACTORS_CONTROL_PLANE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::actors {

class ControlPlane {
 public:
  // Blocks: one block per rank, indexed by global rank.
  using Blocks = std::vector<std::vector<uint8_t>>;
  using Done = std::function<void(absl::Status status, Blocks blocks)>;

  // ControlPlane: over `comm` (this process's endpoint; rank = comm->rank()) for a job of
  // `world_size` ranks, using group id `group_id`, which must differ from every group of
  // the job's RankGrid (ControlGroupId). `comm` must outlive this object.
  ControlPlane(transport::Communicator* comm, int world_size, int64_t group_id);

  int rank() const { return group_.rank_in_group; }
  int world_size() const { return group_.size(); }

  // AllGather: every rank contributes `block`; all blocks must have the same size (bytes),
  // else every rank's `done` gets the communicator's mismatch report. `done` runs once,
  // on the communicator's thread, with the blocks of all ranks in rank order, or with the
  // error (mismatch, timeout, a lost peer). Calls must be made in the same order on every
  // rank (the communicator's matching rule).
  void AllGather(std::vector<uint8_t> block, Done done);

  // ControlGroupId / PipelineGroupId: group ids outside RankGrid's range
  // (kind * world + index < kNumGroupKinds * world) for the control plane and for the
  // stage actors' point-to-point activation traffic (remote_stage_link.h).
  static int64_t ControlGroupId(int world_size);
  static int64_t PipelineGroupId(int world_size);
  // HeartbeatGroupId: the processes' heartbeat ring (api/train/heartbeat.h).
  static int64_t HeartbeatGroupId(int world_size);
  // StartupGroupId: one-off agreements before training starts (the --save lock,
  // api/train/save_guard.h).
  static int64_t StartupGroupId(int world_size);

 private:
  transport::Communicator* comm_;
  transport::ProcessGroup group_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_CONTROL_PLANE_H_
