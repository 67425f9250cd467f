// base/process_info_test.cc: pid liveness and start times against processes this test
// starts and ends itself (fork), and against ps(1)'s view of this process.
#include "base/process_info.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

namespace mxmaca::base {
namespace {

TEST_CASE("this process is alive with a stable start time") {
  const auto ticks = ProcessStartTicks(::getpid());
  REQUIRE(ticks.has_value());
  CHECK(ProcessStartTicks(::getpid()) == ticks);
  CHECK(ProcessAlive(::getpid()));
  CHECK(ProcessAlive(::getpid(), ticks));
  CHECK_FALSE(ProcessAlive(::getpid(), *ticks + 1));  // another process with our pid
  const auto start = ProcessStartTime(::getpid());
  REQUIRE(start.has_value());
  CHECK(*start <= absl::Now() + absl::Seconds(2));
  CHECK(*start > absl::Now() - absl::Hours(24 * 365));
}

TEST_CASE("a child is alive until it exits; a zombie and a reaped pid are gone") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char c;
    ::close(fds[1]);
    (void)::read(fds[0], &c, 1);  // until the parent closes its end
    ::_exit(0);
  }
  ::close(fds[0]);
  const auto start = ProcessStartTime(child);
  REQUIRE(start.has_value());
  CHECK(*start >= absl::Now() - absl::Seconds(5));  // started just now (boot time is whole s)
  CHECK(ProcessAlive(child));
  CHECK(ProcessAlive(child, ProcessStartTicks(child)));
  ::close(fds[1]);
  // Exited but not reaped: a zombie.
  for (int i = 0; i < 200 && ProcessAlive(child); ++i) ::usleep(10 * 1000);
  CHECK_FALSE(ProcessAlive(child));
  int wstatus = 0;
  REQUIRE(::waitpid(child, &wstatus, 0) == child);
  CHECK_FALSE(ProcessAlive(child));
  CHECK_FALSE(ProcessStartTicks(child).has_value());
  CHECK_FALSE(ProcessAlive(0));
  CHECK_FALSE(ProcessAlive(-1));
}

TEST_CASE("host name") { CHECK_FALSE(HostName().empty()); }

}  // namespace
}  // namespace mxmaca::base
