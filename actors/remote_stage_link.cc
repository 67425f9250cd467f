// actors/remote_stage_link.cc: see remote_stage_link.h.
#include "actors/remote_stage_link.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace mxmaca::actors {
namespace {

// Header words.
enum Word : int {
  kKind = 0,        // kActivation or kRelease
  kIteration = 1,
  kEval = 2,
  kMicrobatch = 3,
  kChunk = 4,       // the receiving chunk
  kDirection = 5,   // Direction
  kChannel = 6,     // the sender's channel
  kCount = 7,       // payload elements
  kNdim = 8,
  kDim0 = 9,        // kDim0 .. kDim0 + kMaxDims - 1
};
constexpr int64_t kActivation = 1;
constexpr int64_t kRelease = 2;

using Header = std::array<int64_t, RemoteStageLinks::kHeaderWords>;

}  // namespace

struct RemoteStageLinks::PeerReceive {
  int rank = 0;
  Header header{};
  std::shared_ptr<ActivationPool> pool;  // received payloads; releasing one tells `rank`
};

std::shared_ptr<RemoteStageLinks> RemoteStageLinks::Create(transport::Communicator* comm,
                                                           int world_size, int64_t group_id,
                                                           Deliver deliver, Fail fail) {
  return std::shared_ptr<RemoteStageLinks>(
      new RemoteStageLinks(comm, world_size, group_id, std::move(deliver), std::move(fail)));
}

RemoteStageLinks::RemoteStageLinks(transport::Communicator* comm, int world_size,
                                   int64_t group_id, Deliver deliver, Fail fail)
    : comm_(comm), deliver_(std::move(deliver)), fail_(std::move(fail)) {
  group_.id = group_id;
  group_.kind = transport::GroupKind::kWorld;
  group_.index = 2;
  for (int r = 0; r < world_size; ++r) group_.ranks.push_back(r);
  group_.rank_in_group = comm->rank();
}

void RemoteStageLinks::Start(const std::vector<int>& peers) {
  std::weak_ptr<RemoteStageLinks> weak = shared_from_this();
  for (int rank : peers) {
    // Each peer's state lives as long as its posted receive (the callbacks hold it).
    auto peer = std::make_shared<PeerReceive>();
    peer->rank = rank;
    peer->pool = ActivationPool::Create([weak, rank](int32_t channel) {
      if (auto links = weak.lock()) links->SendRelease(rank, channel);
    });
    PostHeader(peer);
  }
}

void RemoteStageLinks::Stop() { stopped_ = true; }

int64_t RemoteStageLinks::payloads_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [key, q] : held_) n += static_cast<int64_t>(q.size());
  return n;
}

void RemoteStageLinks::Report(const std::string& message) {
  if (stopped_ || failed_.exchange(true)) return;
  fail_(message);
}

void RemoteStageLinks::PostHeader(const std::shared_ptr<PeerReceive>& peer) {
  if (stopped_) return;
  auto self = shared_from_this();
  comm_->Recv(group_, peer->rank, peer->header.data(), kHeaderWords,
              transport::DataType::kInt64,
              [self, peer](const transport::CollectiveInfo& info, absl::Status status) {
                if (self->stopped_) return;
                if (!status.ok()) {
                  self->Report(absl::StrCat("receiving from rank ", peer->rank, ": ",
                                            status.message()));
                  return;
                }
                self->OnHeader(peer);
              });
}

void RemoteStageLinks::OnHeader(const std::shared_ptr<PeerReceive>& peer) {
  const Header h = peer->header;
  if (h[kKind] == kRelease) {
    OnRelease(peer->rank, static_cast<int32_t>(h[kChannel]));
    PostHeader(peer);
    return;
  }
  const int64_t count = h[kCount], ndim = h[kNdim];
  const bool direction_ok = h[kDirection] == static_cast<int64_t>(Direction::kForward) ||
                            h[kDirection] == static_cast<int64_t>(Direction::kBackward);
  int64_t elements = 1;
  for (int64_t d = 0; d < ndim && d < kMaxDims; ++d) elements *= h[kDim0 + d];
  if (h[kKind] != kActivation || ndim < 1 || ndim > kMaxDims || count < 1 ||
      elements != count || !direction_ok || (h[kChannel] != 0 && h[kChannel] != 1)) {
    Report(absl::StrCat("malformed message header from rank ", peer->rank, " (kind ", h[kKind],
                        ", count ", count, ", ndim ", ndim, ")"));
    return;
  }
  auto buffer = std::make_shared<std::vector<float>>(peer->pool->Take());
  buffer->resize(static_cast<size_t>(count));
  auto self = shared_from_this();
  // The payload's receive, then the next header's: receives from `peer` are only posted
  // here, by the completion of the previous one, so their order is the messages' order.
  comm_->Recv(group_, peer->rank, buffer->data(), count, transport::DataType::kFloat32,
              [self, peer, h, buffer](const transport::CollectiveInfo&, absl::Status status) {
                if (self->stopped_) return;
                if (!status.ok()) {
                  self->Report(absl::StrCat("receiving a payload from rank ", peer->rank, ": ",
                                            status.message()));
                  return;
                }
                ActivationMessage m;
                m.iteration = h[kIteration];
                m.eval = h[kEval] != 0;
                m.microbatch = static_cast<int32_t>(h[kMicrobatch]);
                m.chunk = static_cast<int32_t>(h[kChunk]);
                m.direction = static_cast<Direction>(h[kDirection]);
                m.from_rank = peer->rank;
                m.tensor.shape.assign(h.begin() + kDim0, h.begin() + kDim0 + h[kNdim]);
                m.tensor.data =
                    peer->pool->Publish(std::move(*buffer), static_cast<int32_t>(h[kChannel]));
                ++self->delivered_;
                self->deliver_(std::move(m));
              });
  PostHeader(peer);
}

void RemoteStageLinks::Send(int dst, int32_t channel, ActivationMessage message) {
  const std::vector<int64_t>& shape = message.tensor.shape;
  auto data = message.tensor.data;
  if (!data || shape.empty() || shape.size() > static_cast<size_t>(kMaxDims) ||
      data->empty()) {
    Report(absl::StrCat("cannot send a tensor of ", shape.size(), " dims / ",
                        data ? data->size() : 0, " elements to rank ", dst));
    return;
  }
  auto header = std::make_shared<Header>();
  header->fill(0);
  (*header)[kKind] = kActivation;
  (*header)[kIteration] = message.iteration;
  (*header)[kEval] = message.eval ? 1 : 0;
  (*header)[kMicrobatch] = message.microbatch;
  (*header)[kChunk] = message.chunk;
  (*header)[kDirection] = static_cast<int64_t>(message.direction);
  (*header)[kChannel] = channel;
  (*header)[kCount] = static_cast<int64_t>(data->size());
  (*header)[kNdim] = static_cast<int64_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) (*header)[kDim0 + d] = shape[d];
  auto self = shared_from_this();
  std::lock_guard<std::mutex> lock(post_mu_);  // header and payload back to back
  comm_->Send(group_, dst, header->data(), kHeaderWords, transport::DataType::kInt64,
              [self, header, dst](const transport::CollectiveInfo&, absl::Status status) {
                if (!status.ok()) {
                  self->Report(absl::StrCat("sending to rank ", dst, ": ", status.message()));
                }
              });
  comm_->Send(group_, dst, data->data(), static_cast<int64_t>(data->size()),
              transport::DataType::kFloat32,
              [self, data, dst, channel](const transport::CollectiveInfo&,
                                         absl::Status status) mutable {
                if (!status.ok()) {
                  self->Report(absl::StrCat("sending a payload to rank ", dst, ": ",
                                            status.message()));
                  return;
                }
                self->OnPayloadSent(dst, channel, std::move(data));
              });
  ++sent_;
}

void RemoteStageLinks::OnPayloadSent(int dst, int32_t channel,
                                     std::shared_ptr<const std::vector<float>> data) {
  std::shared_ptr<const std::vector<float>> drop;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& early = early_releases_[{dst, channel}];
    if (early > 0) {
      --early;
      drop = std::move(data);
    } else {
      held_[{dst, channel}].push_back(std::move(data));
    }
  }
}

void RemoteStageLinks::OnRelease(int from, int32_t channel) {
  std::shared_ptr<const std::vector<float>> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = held_[{from, channel}];
    if (q.empty()) {
      ++early_releases_[{from, channel}];
    } else {
      drop = std::move(q.front());
      q.pop_front();
    }
  }
}

void RemoteStageLinks::SendRelease(int dst, int32_t channel) {
  if (stopped_) return;
  auto header = std::make_shared<Header>();
  header->fill(0);
  (*header)[kKind] = kRelease;
  (*header)[kChannel] = channel;
  auto self = shared_from_this();
  std::lock_guard<std::mutex> lock(post_mu_);
  comm_->Send(group_, dst, header->data(), kHeaderWords, transport::DataType::kInt64,
              [self, header, dst](const transport::CollectiveInfo&, absl::Status status) {
                if (!status.ok()) {
                  self->Report(absl::StrCat("sending a release to rank ", dst, ": ",
                                            status.message()));
                }
              });
}

}  // namespace mxmaca::actors
