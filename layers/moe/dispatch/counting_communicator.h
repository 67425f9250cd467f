// layers/moe/dispatch/counting_communicator.h: CountingCommunicator, a Communicator
// decorator that records every operation a rank posts, so tests and benchmarks can count
// the messages that cross node boundaries (issue 7: "one message per node pair and step
// direction ... counted and asserted in a test").
//
// It records at post time, forwarding every call unchanged to the wrapped endpoint. A Send
// is one message from this rank to its peer; a collective is recorded with its group's
// members, so a caller can tell whether it spans nodes (the backend then sends messages
// between them, how many depending on its algorithm).
#ifndef MXMACA_LAYERS_MOE_DISPATCH_COUNTING_COMMUNICATOR_H_
#define MXMACA_LAYERS_MOE_DISPATCH_COUNTING_COMMUNICATOR_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "transport/communicator.h"

namespace mxmaca::layers::moe::dispatch {

// PostedOp: one recorded post.
struct PostedOp {
  transport::CollectiveOp op = transport::CollectiveOp::kSend;
  transport::DataType dtype = transport::DataType::kFloat32;
  int src = -1;            // global rank that posted
  int dst = -1;            // send/recv: global rank of the peer; collectives: -1
  int64_t bytes = 0;       // bytes this rank sends (send: the message; recv: 0)
  std::vector<int> group;  // collectives: the group's global ranks
};

// CountingCommunicator: forwards to `inner` (not owned) and records. Thread-safe.
class CountingCommunicator : public transport::Communicator {
 public:
  explicit CountingCommunicator(transport::Communicator* inner) : inner_(inner) {}

  // Posted: the operations recorded so far, in post order. Clear: forget them.
  std::vector<PostedOp> Posted() const;
  void Clear();

  // CrossNodeSends: the recorded Sends whose peer is on another node (node = global
  // rank / ranks_per_node). SpanningCollectives: recorded collectives whose group has
  // ranks on more than one node.
  std::vector<PostedOp> CrossNodeSends(int ranks_per_node) const;
  std::vector<PostedOp> SpanningCollectives(int ranks_per_node) const;

  int rank() const override { return inner_->rank(); }
  transport::CollectiveInfo AllReduceSum(const transport::ProcessGroup& group, const float* send,
                                         float* recv, int64_t count,
                                         transport::DoneCallback done) override;
  transport::CollectiveInfo AllGather(const transport::ProcessGroup& group, const void* send,
                                      void* recv, int64_t count, transport::DataType dtype,
                                      transport::DoneCallback done) override;
  transport::CollectiveInfo ReduceScatterSum(const transport::ProcessGroup& group,
                                             const float* send, float* recv, int64_t recv_count,
                                             transport::DoneCallback done) override;
  transport::CollectiveInfo Broadcast(const transport::ProcessGroup& group, int root, void* buffer,
                                      int64_t count, transport::DataType dtype,
                                      transport::DoneCallback done) override;
  transport::CollectiveInfo Send(const transport::ProcessGroup& group, int peer, const void* buffer,
                                 int64_t count, transport::DataType dtype,
                                 transport::DoneCallback done) override;
  transport::CollectiveInfo Recv(const transport::ProcessGroup& group, int peer, void* buffer,
                                 int64_t count, transport::DataType dtype,
                                 transport::DoneCallback done) override;
  transport::CollectiveInfo AllToAllV(const transport::ProcessGroup& group, const void* send,
                                      const std::vector<int64_t>& send_counts,
                                      const std::vector<int64_t>& send_displs, void* recv,
                                      const std::vector<int64_t>& recv_counts,
                                      const std::vector<int64_t>& recv_displs,
                                      transport::DataType dtype,
                                      transport::DoneCallback done) override;

 private:
  void Record(PostedOp op);

  transport::Communicator* inner_;
  mutable absl::Mutex mu_;
  std::vector<PostedOp> posted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_COUNTING_COMMUNICATOR_H_
