// api/train/exit_signal.h: Megatron's --exit-signal-handler — note that a signal (SIGTERM
// by default) arrived, so that training can save a checkpoint at the end of the current
// iteration and exit cleanly instead of dying mid-step.
//
// Source: megatron/training/dist_signal_handler.py (DistributedSignalHandler: a handler
// that only sets `_signal_received`) and megatron/training/training.py (after each
// iteration: if any rank received the signal, save_checkpoint when --save is set, print
// "exiting program after receiving SIGTERM." and leave the training loop).
//
// Typical use (one process per rank; the caller agrees across ranks, as Megatron's
// signals_received() all-gathers the flag, so that every rank stops at the same
// iteration):
//
//   if (args.exit_signal_handler) MXMACA_RETURN_IF_ERROR(InstallExitSignalHandler());
//   for (...each iteration...) {
//     ...
//     if (ExitSignalReceived()) { save; print kExitSignalMessage; return exit code 0; }
//   }
//
// Process-wide state: a signal disposition belongs to the process, so the flag is one
// process-wide atomic (the only global here, by necessity).
#ifndef MXMACA_API_TRAIN_EXIT_SIGNAL_H_
#define MXMACA_API_TRAIN_EXIT_SIGNAL_H_

#include <signal.h>

#include "absl/status/status.h"

namespace mxmaca::api {

// kExitSignalMessage: Megatron's line (training.py, printed with print_datetime) when the
// loop ends because of the signal. Megatron prints "SIGTERM" whatever the signal.
inline constexpr char kExitSignalMessage[] = "exiting program after receiving SIGTERM.";

// InstallExitSignalHandler: installs (sigaction, SA_RESTART so that blocking calls in
// other threads are resumed rather than failing with EINTR) a handler for `signum` that
// only sets the process-wide flag read by ExitSignalReceived — async-signal-safe, the
// process keeps running. May be called for several signals; they share the flag.
// Calling it again for the same signal is harmless. Does not clear the flag.
// Errors: InvalidArgument for a signal that cannot be caught (SIGKILL, SIGSTOP) or is
// outside 1..SIGRTMAX; Internal naming the signal and errno if sigaction fails.
absl::Status InstallExitSignalHandler(int signum = SIGTERM);

// ExitSignalReceived: true once an installed signal has been delivered to this process
// (until ResetExitSignalForTest). Cheap (one relaxed atomic load): call it every
// iteration.
bool ExitSignalReceived();

// RestoreDefaultExitSignalHandlers: puts back SIG_DFL for every signal installed above
// (Megatron's DistributedSignalHandler.release), e.g. for tests or an embedding program
// that runs training more than once. Leaves the flag as it is.
void RestoreDefaultExitSignalHandlers();

// ResetExitSignalForTest: clears the flag (handlers stay installed).
void ResetExitSignalForTest();

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_EXIT_SIGNAL_H_
