// actors/control_plane.cc: see control_plane.h.
#include "actors/control_plane.h"

#include <memory>
#include <utility>

namespace mxmaca::actors {

ControlPlane::ControlPlane(transport::Communicator* comm, int world_size, int64_t group_id)
    : comm_(comm) {
  group_.id = group_id;
  group_.kind = transport::GroupKind::kWorld;
  group_.index = 1;
  for (int r = 0; r < world_size; ++r) group_.ranks.push_back(r);
  group_.rank_in_group = comm->rank();
}

int64_t ControlPlane::ControlGroupId(int world_size) {
  return static_cast<int64_t>(transport::kNumGroupKinds) * world_size;
}

int64_t ControlPlane::PipelineGroupId(int world_size) {
  return static_cast<int64_t>(transport::kNumGroupKinds) * world_size + 1;
}

int64_t ControlPlane::HeartbeatGroupId(int world_size) {
  return static_cast<int64_t>(transport::kNumGroupKinds) * world_size + 2;
}

int64_t ControlPlane::StartupGroupId(int world_size) {
  return static_cast<int64_t>(transport::kNumGroupKinds) * world_size + 3;
}

void ControlPlane::AllGather(std::vector<uint8_t> block, Done done) {
  struct Op {
    std::vector<uint8_t> send;
    std::vector<uint8_t> recv;
  };
  auto op = std::make_shared<Op>();
  op->send = std::move(block);
  const int64_t bytes = static_cast<int64_t>(op->send.size());
  op->recv.resize(static_cast<size_t>(bytes) * static_cast<size_t>(group_.size()));
  comm_->AllGather(group_, op->send.data(), op->recv.data(), bytes, transport::DataType::kUInt8,
                   [op, bytes, done = std::move(done)](const transport::CollectiveInfo&,
                                                       absl::Status status) {
                     Blocks blocks;
                     if (status.ok()) {
                       const size_t n = op->recv.size() / static_cast<size_t>(bytes ? bytes : 1);
                       for (size_t r = 0; r < (bytes ? n : 0); ++r) {
                         blocks.emplace_back(op->recv.begin() + r * bytes,
                                             op->recv.begin() + (r + 1) * bytes);
                       }
                     }
                     done(std::move(status), std::move(blocks));
                   });
}

}  // namespace mxmaca::actors
