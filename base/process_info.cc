// base/process_info.cc: see process_info.h.
#include "base/process_info.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace mxmaca::base {
namespace {

// StatFields: /proc/<pid>/stat after the command name, which is in parentheses and may
// itself hold spaces and ')' (so the last ')' ends it): field 3 (state) onwards.
std::optional<std::string> StatAfterName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return std::nullopt;
  return line.substr(close + 2);
}

std::optional<int64_t> BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      int64_t v = 0;
      if (in >> v) return v;
      return std::nullopt;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> ProcessStartTicks(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::optional<std::string> fields = StatAfterName(pid);
  if (!fields) return std::nullopt;
  std::istringstream s(*fields);
  std::string f;
  // After the name: field 3 is the state; starttime is field 22.
  for (int k = 3; k < 22; ++k) {
    if (!(s >> f)) return std::nullopt;
  }
  uint64_t ticks = 0;
  if (!(s >> ticks)) return std::nullopt;
  return ticks;
}

std::optional<absl::Time> ProcessStartTime(pid_t pid) {
  std::optional<uint64_t> ticks = ProcessStartTicks(pid);
  std::optional<int64_t> boot = BootTimeSeconds();
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (!ticks || !boot || hz <= 0) return std::nullopt;
  return absl::FromUnixSeconds(*boot) +
         absl::Milliseconds(static_cast<int64_t>(*ticks) * 1000 / hz);
}

bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_ticks) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::optional<std::string> fields = StatAfterName(pid);
  if (!fields) return false;
  if (!fields->empty() && ((*fields)[0] == 'Z' || (*fields)[0] == 'X')) return false;
  if (start_ticks) {
    std::optional<uint64_t> now = ProcessStartTicks(pid);
    if (!now || *now != *start_ticks) return false;
  }
  return true;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace mxmaca::base
