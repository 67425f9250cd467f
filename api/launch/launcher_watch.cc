// api/launch/launcher_watch.cc: see launcher_watch.h.
#include "api/launch/launcher_watch.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/process_info.h"

namespace mxmaca::api {

absl::StatusOr<std::optional<LauncherIdentity>> LauncherFromEnvironment() {
  const char* pid_text = std::getenv(kLauncherPidVariable);
  if (pid_text == nullptr) return std::nullopt;
  LauncherIdentity id;
  int pid = 0;
  if (!absl::SimpleAtoi(pid_text, &pid) || pid <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(kLauncherPidVariable, "=\"", pid_text,
                                                   "\": expected the launcher's pid, a positive "
                                                   "integer (set by mxmaca launch)"));
  }
  id.pid = static_cast<pid_t>(pid);
  if (const char* start = std::getenv(kLauncherStartVariable); start != nullptr) {
    uint64_t ticks = 0;
    if (!absl::SimpleAtoi(start, &ticks)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kLauncherStartVariable, "=\"", start,
                       "\": expected the launcher's start time in "
                       "clock ticks, a decimal integer (set by mxmaca launch)"));
    }
    id.start_ticks = ticks;
  }
  return id;
}

absl::StatusOr<bool> StartLauncherWatch(absl::Duration period,
                                        std::function<void(pid_t launcher)> on_gone) {
  absl::StatusOr<std::optional<LauncherIdentity>> launcher = LauncherFromEnvironment();
  if (!launcher.ok()) return launcher.status();
  if (!launcher->has_value()) return false;
  if (!on_gone) {
    on_gone = [](pid_t pid) {
      std::fprintf(stderr,
                   "mxmaca: the launcher (pid %d) is gone; exiting at once, writing nothing "
                   "further\n",
                   static_cast<int>(pid));
      std::fflush(stderr);
      std::_Exit(kLauncherGoneExitCode);
    };
  }
  const LauncherIdentity id = **launcher;
  if (!base::ProcessAlive(id.pid, id.start_ticks)) {
    on_gone(id.pid);
    return true;
  }
  std::thread([id, period, on_gone = std::move(on_gone)] {
    while (base::ProcessAlive(id.pid, id.start_ticks)) absl::SleepFor(period);
    on_gone(id.pid);
  }).detach();
  return true;
}

}  // namespace mxmaca::api
