// actors/remote_stage_link.h: activations and input gradients between stage actors in
// different processes (docs/ARCHITECTURE.md "between processes the bytes go over UCX (host memory)";
// docs/MULTIPROCESS.md "How training runs across processes").
//
// Within a process a stage actor sends its neighbour an ActivationMessage whose payload
// points into the sender's ActivationPool. Across processes the same message goes over the
// job's Communicator as two point-to-point transfers on the pipeline group
// (ControlPlane::PipelineGroupId): a fixed header of 16 int64 (kind, iteration, eval,
// micro-batch, receiving chunk, direction, channel, element count, rank and dims of the
// shape), then the payload [b, s, h] fp32 straight from the sender's pooled buffer (no
// staging copy). The receiver keeps one header receive posted per peer that may send to
// it; when a header arrives it posts the payload receive into a buffer of its own pool and
// the next header receive (so the per-channel FIFO order of the communicator is the order
// of the messages), and delivers the ActivationMessage to its stage actor when the bytes
// are in.
//
// Back-pressure (scheduler/edge_slots.h) is end to end, as within a process: the sender's
// payload stays referenced — so its slot stays taken — until the receiver's consumer drops
// the received copy; the receiver's pool then sends a "released" header back (kind 2) and
// the sender drops its reference, which frees the slot.
//
// Threads: Send and the release path run on strands and actors; completions run on the
// communicator's thread. Errors (a failed transfer, a lost peer, a malformed header) are
// reported once through `fail`.
#ifndef MXMACA_ACTORS_REMOTE_STAGE_LINK_H_
#define MXMACA_ACTORS_REMOTE_STAGE_LINK_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/activation_pool.h"
#include "actors/messages.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::actors {

class RemoteStageLinks : public std::enable_shared_from_this<RemoteStageLinks> {
 public:
  using Deliver = std::function<void(ActivationMessage message)>;
  using Fail = std::function<void(const std::string& message)>;

  // kHeaderWords: int64 words of a header; shapes have at most kMaxDims dims.
  static constexpr int kHeaderWords = 16;
  static constexpr int kMaxDims = 4;

  // Create: the links of stage rank comm->rank() in a job of `world_size` ranks, over
  // `comm` (must outlive the links' last completion) on group `group_id`. `deliver` gets
  // every message that arrives for the local stage; `fail` the first error.
  static std::shared_ptr<RemoteStageLinks> Create(transport::Communicator* comm,
                                                  int world_size, int64_t group_id,
                                                  Deliver deliver, Fail fail);

  // Start: posts the first header receive from each rank in `peers` (the ranks that may
  // send to this one: its pipeline neighbours in other processes). Call once.
  void Start(const std::vector<int>& peers);

  // Send: sends `message` (tensor.shape of at most kMaxDims dims, tensor.data non-null) to
  // rank `dst` on the sender's `channel` (0 activations, 1 gradients). The payload stays
  // referenced until dst released it (see the file comment).
  void Send(int dst, int32_t channel, ActivationMessage message);

  // Stop: completions after this (the communicator cancelling the posted receives at
  // close) are ignored.
  void Stop();

  // Counters for tests: messages sent / delivered, payloads still held for a release.
  int64_t messages_sent() const { return sent_.load(); }
  int64_t messages_delivered() const { return delivered_.load(); }
  int64_t payloads_held() const;

 private:
  struct PeerReceive;
  RemoteStageLinks(transport::Communicator* comm, int world_size, int64_t group_id,
                   Deliver deliver, Fail fail);
  void PostHeader(const std::shared_ptr<PeerReceive>& peer);
  void OnHeader(const std::shared_ptr<PeerReceive>& peer);
  void SendRelease(int dst, int32_t channel);
  void OnRelease(int from, int32_t channel);
  void OnPayloadSent(int dst, int32_t channel, std::shared_ptr<const std::vector<float>> data);
  void Report(const std::string& message);

  transport::Communicator* const comm_;
  transport::ProcessGroup group_;
  const Deliver deliver_;
  const Fail fail_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> sent_{0}, delivered_{0};
  // post_mu_ orders the sends to a peer (a header and its payload are posted back to
  // back, never split by a release header); mu_ guards the held payloads.
  std::mutex post_mu_;
  mutable std::mutex mu_;
  // Per (peer, channel): payloads sent and not yet released by the peer, and releases
  // that arrived before their payload's send completed.
  std::map<std::pair<int, int32_t>, std::deque<std::shared_ptr<const std::vector<float>>>> held_;
  std::map<std::pair<int, int32_t>, int64_t> early_releases_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_REMOTE_STAGE_LINK_H_
