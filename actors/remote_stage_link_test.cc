// actors/remote_stage_link_test.cc: activations between stages of different processes
// (remote_stage_link.h), over the in-process hub standing in for UCX: messages arrive in
// order with their keys, shapes and exact bytes, and the sender's payload stays held —
// its channel slot taken — until the receiver drops its copy (end-to-end back-pressure).
#include "actors/remote_stage_link.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "actors/control_plane.h"
#include "transport/inprocess_communicator.h"

namespace mxmaca::actors {
namespace {

// WaitFor: polls `done` for up to 10 s (the hub completes on posting threads).
template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 10000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST_CASE("remote links: ordered, exact delivery and release back to the sender") {
  transport::InProcessHub hub(2);
  const int64_t group = ControlPlane::PipelineGroupId(2);
  std::mutex mu;
  std::vector<ActivationMessage> received;
  std::vector<std::string> errors;
  auto fail = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(e);
  };
  auto sender = RemoteStageLinks::Create(hub.ForRank(0), 2, group, [](ActivationMessage) {},
                                         fail);
  auto receiver = RemoteStageLinks::Create(
      hub.ForRank(1), 2, group,
      [&](ActivationMessage m) {
        std::lock_guard<std::mutex> lock(mu);
        received.push_back(std::move(m));
      },
      fail);
  sender->Start({1});  // the receiver sends releases back
  receiver->Start({0});

  std::mt19937 rng(20261130);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> sent;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> x(static_cast<size_t>(2 * 3 * (4 + k)));
    for (float& v : x) v = normal(rng);
    sent.push_back(x);
    ActivationMessage m;
    m.iteration = 7;
    m.microbatch = k;
    m.chunk = 1;
    m.direction = Direction::kForward;
    m.tensor.shape = {2, 3, 4 + k};
    m.tensor.data = std::make_shared<const std::vector<float>>(std::move(x));
    sender->Send(1, 0, std::move(m));
  }
  REQUIRE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return received.size() == 3;
  }));
  REQUIRE(WaitFor([&] { return sender->payloads_held() == 3; }));
  CHECK(sender->messages_sent() == 3);
  CHECK(receiver->messages_delivered() == 3);
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int k = 0; k < 3; ++k) {
      const ActivationMessage& m = received[static_cast<size_t>(k)];
      CHECK(m.iteration == 7);
      CHECK(m.microbatch == k);
      CHECK(m.chunk == 1);
      CHECK(m.from_rank == 0);
      CHECK(m.tensor.shape == std::vector<int64_t>{2, 3, 4 + k});
      CHECK(*m.tensor.data == sent[static_cast<size_t>(k)]);  // bit-exact copy
    }
    // The sender's slots stay taken while the receiver holds the copies; dropping one
    // releases exactly one.
    received.erase(received.begin());
  }
  REQUIRE(WaitFor([&] { return sender->payloads_held() == 2; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    received.clear();
  }
  REQUIRE(WaitFor([&] { return sender->payloads_held() == 0; }));
  sender->Stop();
  receiver->Stop();
  std::lock_guard<std::mutex> lock(mu);
  CHECK(errors.empty());
}

TEST_CASE("remote links: a tensor that cannot be sent is reported, not sent") {
  transport::InProcessHub hub(2);
  std::string error;
  auto links = RemoteStageLinks::Create(hub.ForRank(0), 2, ControlPlane::PipelineGroupId(2),
                                        [](ActivationMessage) {},
                                        [&](const std::string& e) { error = e; });
  ActivationMessage m;
  m.tensor.shape = {1, 2, 3, 4, 5};  // 5 dims: more than a header carries
  m.tensor.data = std::make_shared<const std::vector<float>>(120, 1.0f);
  links->Send(1, 0, std::move(m));
  CHECK(error.find("5 dims") != std::string::npos);
  CHECK(links->messages_sent() == 0);
  links->Stop();
}

}  // namespace
}  // namespace mxmaca::actors
