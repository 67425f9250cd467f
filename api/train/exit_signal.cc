// api/train/exit_signal.cc: the signal handler and flag behind exit_signal.h.
#include "api/train/exit_signal.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace mxmaca::api {
namespace {

// Only lock-free atomics may be touched from a signal handler.
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<unsigned long long>::is_always_lock_free);

std::atomic<bool> exit_signal_received{false};

// Bit s-1 set: signal s has our handler (signals 1..64; SIGRTMAX is 64 on Linux).
std::atomic<unsigned long long> installed_signals{0};

void OnExitSignal(int /*signum*/) { exit_signal_received.store(true, std::memory_order_relaxed); }

}  // namespace

absl::Status InstallExitSignalHandler(int signum) {
  if (signum < 1 || signum > SIGRTMAX || signum > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("exit signal ", signum, " is not a signal number (1..", SIGRTMAX, ")"));
  }
  if (signum == SIGKILL || signum == SIGSTOP) {
    return absl::InvalidArgumentError(
        absl::StrCat("exit signal ", signum, " (", strsignal(signum), ") cannot be caught"));
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnExitSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(signum, &action, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("sigaction for exit signal ", signum, " (",
                                            strsignal(signum), ") failed: ", std::strerror(errno)));
  }
  installed_signals.fetch_or(1ULL << (signum - 1));
  return absl::OkStatus();
}

bool ExitSignalReceived() { return exit_signal_received.load(std::memory_order_relaxed); }

void RestoreDefaultExitSignalHandlers() {
  const unsigned long long installed = installed_signals.exchange(0);
  for (int signum = 1; signum <= 64; ++signum) {
    if (installed & (1ULL << (signum - 1))) ::signal(signum, SIG_DFL);
  }
}

void ResetExitSignalForTest() { exit_signal_received.store(false, std::memory_order_relaxed); }

}  // namespace mxmaca::api
