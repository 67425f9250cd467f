// layers/moe/dispatch/counting_communicator.cc: record, then forward.
#include "layers/moe/dispatch/counting_communicator.h"

#include <utility>

namespace mxmaca::layers::moe::dispatch {

using transport::CollectiveInfo;
using transport::CollectiveOp;
using transport::DataType;
using transport::DoneCallback;
using transport::ProcessGroup;

namespace {

PostedOp Collective(CollectiveOp op, DataType dtype, int src, int64_t bytes,
                    const ProcessGroup& group) {
  PostedOp p;
  p.op = op;
  p.dtype = dtype;
  p.src = src;
  p.bytes = bytes;
  p.group = group.ranks;
  return p;
}

int PeerRank(const ProcessGroup& group, int peer) {
  return peer >= 0 && peer < group.size() ? group.ranks[peer] : -1;
}

}  // namespace

std::vector<PostedOp> CountingCommunicator::Posted() const {
  absl::MutexLock lock(&mu_);
  return posted_;
}

void CountingCommunicator::Clear() {
  absl::MutexLock lock(&mu_);
  posted_.clear();
}

void CountingCommunicator::Record(PostedOp op) {
  absl::MutexLock lock(&mu_);
  posted_.push_back(std::move(op));
}

std::vector<PostedOp> CountingCommunicator::CrossNodeSends(int ranks_per_node) const {
  std::vector<PostedOp> out;
  for (const PostedOp& p : Posted()) {
    if (p.op == CollectiveOp::kSend && p.dst >= 0 &&
        p.src / ranks_per_node != p.dst / ranks_per_node) {
      out.push_back(p);
    }
  }
  return out;
}

std::vector<PostedOp> CountingCommunicator::SpanningCollectives(int ranks_per_node) const {
  std::vector<PostedOp> out;
  for (const PostedOp& p : Posted()) {
    if (p.op == CollectiveOp::kSend || p.op == CollectiveOp::kRecv || p.group.empty()) continue;
    for (int r : p.group) {
      if (r / ranks_per_node != p.group.front() / ranks_per_node) {
        out.push_back(p);
        break;
      }
    }
  }
  return out;
}

CollectiveInfo CountingCommunicator::AllReduceSum(const ProcessGroup& group, const float* send,
                                                  float* recv, int64_t count, DoneCallback done) {
  Record(Collective(CollectiveOp::kAllReduce, DataType::kFloat32, rank(), count * 4, group));
  return inner_->AllReduceSum(group, send, recv, count, std::move(done));
}

CollectiveInfo CountingCommunicator::AllGather(const ProcessGroup& group, const void* send,
                                               void* recv, int64_t count, DataType dtype,
                                               DoneCallback done) {
  Record(Collective(CollectiveOp::kAllGather, dtype, rank(), count * transport::DataTypeSize(dtype),
                    group));
  return inner_->AllGather(group, send, recv, count, dtype, std::move(done));
}

CollectiveInfo CountingCommunicator::ReduceScatterSum(const ProcessGroup& group, const float* send,
                                                      float* recv, int64_t recv_count,
                                                      DoneCallback done) {
  Record(Collective(CollectiveOp::kReduceScatter, DataType::kFloat32, rank(),
                    recv_count * group.size() * 4, group));
  return inner_->ReduceScatterSum(group, send, recv, recv_count, std::move(done));
}

CollectiveInfo CountingCommunicator::Broadcast(const ProcessGroup& group, int root, void* buffer,
                                               int64_t count, DataType dtype, DoneCallback done) {
  Record(Collective(CollectiveOp::kBroadcast, dtype, rank(), count * transport::DataTypeSize(dtype),
                    group));
  return inner_->Broadcast(group, root, buffer, count, dtype, std::move(done));
}

CollectiveInfo CountingCommunicator::Send(const ProcessGroup& group, int peer, const void* buffer,
                                          int64_t count, DataType dtype, DoneCallback done) {
  PostedOp p;
  p.op = CollectiveOp::kSend;
  p.dtype = dtype;
  p.src = rank();
  p.dst = PeerRank(group, peer);
  p.bytes = count * transport::DataTypeSize(dtype);
  Record(std::move(p));
  return inner_->Send(group, peer, buffer, count, dtype, std::move(done));
}

CollectiveInfo CountingCommunicator::Recv(const ProcessGroup& group, int peer, void* buffer,
                                          int64_t count, DataType dtype, DoneCallback done) {
  PostedOp p;
  p.op = CollectiveOp::kRecv;
  p.dtype = dtype;
  p.src = rank();
  p.dst = PeerRank(group, peer);
  Record(std::move(p));
  return inner_->Recv(group, peer, buffer, count, dtype, std::move(done));
}

CollectiveInfo CountingCommunicator::AllToAllV(const ProcessGroup& group, const void* send,
                                               const std::vector<int64_t>& send_counts,
                                               const std::vector<int64_t>& send_displs, void* recv,
                                               const std::vector<int64_t>& recv_counts,
                                               const std::vector<int64_t>& recv_displs,
                                               DataType dtype, DoneCallback done) {
  int64_t total = 0;
  for (int64_t c : send_counts) total += c;
  Record(Collective(CollectiveOp::kAllToAllV, dtype, rank(), total * transport::DataTypeSize(dtype),
                    group));
  return inner_->AllToAllV(group, send, send_counts, send_displs, recv, recv_counts, recv_displs,
                           dtype, std::move(done));
}

}  // namespace mxmaca::layers::moe::dispatch
