// transport/nccl/nccl_communicator_nocuda.cc: NcclCommunicator in a build without CUDA
// (--config=nocuda): the header is the same, Create returns Unimplemented "built without
// CUDA", so code that names the backend still links and says why it cannot run.
#include "absl/strings/str_cat.h"
#include "transport/nccl/nccl_communicator.h"

namespace mxmaca::transport::nccl {
namespace {

absl::Status BuiltWithoutCuda() {
  return absl::UnimplementedError(
      "NcclCommunicator: built without CUDA (no nvcc at CUDA_PATH when Bazel configured "
      "@local_cuda); rebuild on a machine with the CUDA toolkit and NCCL");
}

CollectiveInfo Refuse(CollectiveOp op, const ProcessGroup& group, DoneCallback& done) {
  CollectiveInfo info;
  info.op = op;
  info.group_id = group.id;
  info.group_name = group.name();
  if (done) done(info, BuiltWithoutCuda());
  return info;
}

}  // namespace

// Impl: never constructed in this build.
class NcclCommunicator::Impl {
 public:
  int rank = 0;
  int world_size = 0;
};

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    int, int, const std::vector<ProcessGroup>&, const AllGatherFn&, StreamPair, Options) {
  return BuiltWithoutCuda();
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::CreateWithRendezvous(
    ucx::Rendezvous&, const std::vector<ProcessGroup>&, StreamPair, Options) {
  return BuiltWithoutCuda();
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::world_size() const { return impl_->world_size; }
void NcclCommunicator::SetComputeStream(void*) {}
StreamPair NcclCommunicator::streams() const { return StreamPair{}; }
void NcclCommunicator::BeginBatch() {}
absl::Status NcclCommunicator::EndBatch() { return BuiltWithoutCuda(); }
std::vector<absl::Status> NcclCommunicator::CheckTimeouts(absl::Time) { return {}; }
int NcclCommunicator::pending_operations() const { return 0; }

CollectiveInfo NcclCommunicator::AllReduceSum(const ProcessGroup& group, const float*, float*,
                                              int64_t, DoneCallback done) {
  return Refuse(CollectiveOp::kAllReduce, group, done);
}
CollectiveInfo NcclCommunicator::AllGather(const ProcessGroup& group, const void*, void*, int64_t,
                                           DataType, DoneCallback done) {
  return Refuse(CollectiveOp::kAllGather, group, done);
}
CollectiveInfo NcclCommunicator::ReduceScatterSum(const ProcessGroup& group, const float*, float*,
                                                  int64_t, DoneCallback done) {
  return Refuse(CollectiveOp::kReduceScatter, group, done);
}
CollectiveInfo NcclCommunicator::Broadcast(const ProcessGroup& group, int, void*, int64_t,
                                           DataType, DoneCallback done) {
  return Refuse(CollectiveOp::kBroadcast, group, done);
}
CollectiveInfo NcclCommunicator::Send(const ProcessGroup& group, int, const void*, int64_t,
                                      DataType, DoneCallback done) {
  return Refuse(CollectiveOp::kSend, group, done);
}
CollectiveInfo NcclCommunicator::Recv(const ProcessGroup& group, int, void*, int64_t, DataType,
                                      DoneCallback done) {
  return Refuse(CollectiveOp::kRecv, group, done);
}
CollectiveInfo NcclCommunicator::AllToAllV(const ProcessGroup& group, const void*,
                                           const std::vector<int64_t>&,
                                           const std::vector<int64_t>&, void*,
                                           const std::vector<int64_t>&,
                                           const std::vector<int64_t>&, DataType,
                                           DoneCallback done) {
  return Refuse(CollectiveOp::kAllToAllV, group, done);
}

}  // namespace mxmaca::transport::nccl
