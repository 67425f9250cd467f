// Checks that the system libraries the build links (Abseil, CAF, oneDNN, UCX) are
// usable: each is called once and its answer checked.
#include <catch2/catch.hpp>
#include <dnnl.h>
#include <ucp/api/ucp.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

TEST_CASE("abseil StatusOr carries a value and an error") {
  absl::StatusOr<int> ok = 3;
  absl::StatusOr<int> bad = absl::InvalidArgumentError(absl::StrCat("x=", 4));
  REQUIRE(ok.ok());
  REQUIRE(*ok == 3);
  REQUIRE(bad.status().message() == "x=4");
}

TEST_CASE("oneDNN sgemm multiplies a 2x2 pair") {
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {0, 0, 0, 0};
  REQUIRE(dnnl_sgemm('N', 'N', 2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2) == dnnl_success);
  REQUIRE(c[0] == 19.f);
  REQUIRE(c[3] == 50.f);
}

TEST_CASE("UCX reports its version") {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  REQUIRE(major == 1);
  REQUIRE(minor >= 13);
}

TEST_CASE("CAF actor system starts and stops") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  caf::actor_system sys{cfg};
  REQUIRE(sys.scheduler().num_workers() >= 1);
}
