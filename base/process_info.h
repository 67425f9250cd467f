// base/process_info.h: facts about processes on this host, read from /proc (proc(5)),
// for deciding whether a pid written down earlier (in a lock file, a temp dir's name, an
// environment variable) still names the same, living process.
//
// A pid alone is not enough: pids are reused. A process is identified by (pid, start
// time); ProcessStartTicks gives the kernel's start time of a pid, which differs for a
// later process that got the same pid.
#ifndef MXMACA_BASE_PROCESS_INFO_H_
#define MXMACA_BASE_PROCESS_INFO_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace mxmaca::base {

// ProcessStartTicks: field 22 of /proc/<pid>/stat (starttime: clock ticks after boot at
// which the process started); nullopt when there is no such process (or /proc cannot be
// read). A zombie still has its entry until it is reaped.
std::optional<uint64_t> ProcessStartTicks(pid_t pid);

// ProcessStartTime: ProcessStartTicks converted to wall-clock time (boot time from
// /proc/stat "btime" + ticks / sysconf(_SC_CLK_TCK)); resolution one tick (10 ms usually),
// and the boot time is whole seconds, so compare with a margin of a second or two.
std::optional<absl::Time> ProcessStartTime(pid_t pid);

// ProcessAlive: true when `pid` exists on this host and has not exited (a zombie — exited,
// not yet reaped — counts as gone), and, when `start_ticks` is given, it is the same
// process (its ProcessStartTicks equals `start_ticks`).
bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_ticks = std::nullopt);

// HostName: this machine's name (gethostname(2)); "localhost" if it cannot be read.
std::string HostName();

}  // namespace mxmaca::base

#endif  // MXMACA_BASE_PROCESS_INFO_H_
