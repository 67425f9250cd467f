// transport/nccl/nccl_communicator_nocuda_test.cc (build without CUDA): the NCCL backend
// links, and Create and every operation say "built without CUDA" instead of failing later.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "transport/nccl/nccl_communicator.h"

namespace mxmaca::transport::nccl {
namespace {

TEST_CASE("without CUDA, Create returns Unimplemented saying so") {
  ProcessGroup world;
  world.kind = GroupKind::kWorld;
  world.id = static_cast<int64_t>(GroupKind::kWorld);
  world.ranks = {0};
  auto comm = NcclCommunicator::Create(
      0, 1, {world},
      [](absl::string_view b) {
        return absl::StatusOr<std::vector<std::string>>(std::vector<std::string>{std::string(b)});
      },
      StreamPair{}, NcclCommunicator::Options{});
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == absl::StatusCode::kUnimplemented);
  CHECK(absl::StrContains(comm.status().message(), "built without CUDA"));
}

}  // namespace
}  // namespace mxmaca::transport::nccl
