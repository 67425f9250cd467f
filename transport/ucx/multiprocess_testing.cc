// transport/ucx/multiprocess_testing.cc: fork, collect reports through pipes, reap.
#include "transport/ucx/multiprocess_testing.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

#include "absl/time/clock.h"

namespace mxmaca::transport::ucx {

std::vector<RankResult> RunRanks(int world_size, const std::function<std::string(int rank)>& body,
                                 absl::Duration timeout) {
  std::fflush(nullptr);
  std::vector<RankResult> results(world_size);
  std::vector<pid_t> pids(world_size, -1);
  std::vector<int> fds(world_size, -1);
  for (int r = 0; r < world_size; ++r) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      results[r].text = "pipe() failed";
      continue;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string text = "R";  // "reported": a child that dies before this writes nothing
      try {
        text += body(r);
      } catch (const std::exception& e) {
        text = std::string("exception: ") + e.what();
      }
      size_t done = 0;
      while (done < text.size()) {
        const ssize_t n = ::write(p[1], text.data() + done, text.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      ::close(p[1]);
      std::fflush(nullptr);
      ::_exit(0);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  // Read every pipe to end-of-file (children write once, at exit) until the deadline.
  const absl::Time deadline = absl::Now() + timeout;
  int open_pipes = 0;
  for (int fd : fds) open_pipes += fd >= 0;
  while (open_pipes > 0) {
    std::vector<pollfd> polls;
    std::vector<int> owners;
    for (int r = 0; r < world_size; ++r) {
      if (fds[r] >= 0) {
        polls.push_back({fds[r], POLLIN, 0});
        owners.push_back(r);
      }
    }
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    if (::poll(polls.data(), polls.size(), static_cast<int>(left_ms)) <= 0) continue;
    for (size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      const int r = owners[i];
      char buffer[4096];
      const ssize_t n = ::read(fds[r], buffer, sizeof(buffer));
      if (n > 0) {
        results[r].text.append(buffer, static_cast<size_t>(n));
      } else {
        ::close(fds[r]);
        fds[r] = -1;
        --open_pipes;
      }
    }
  }
  for (int r = 0; r < world_size; ++r) {
    if (fds[r] < 0 && pids[r] > 0) {
      if (!results[r].text.empty() && results[r].text[0] == 'R') {
        results[r].text.erase(0, 1);
      } else {
        results[r].text = "rank " + std::to_string(r) + " exited without reporting";
      }
    }
    if (fds[r] >= 0) {
      ::close(fds[r]);
      if (pids[r] > 0) ::kill(pids[r], SIGKILL);
      results[r].timed_out = true;
      results[r].text += " [timed out: killed]";
    }
    if (pids[r] <= 0) continue;
    int wstatus = 0;
    ::waitpid(pids[r], &wstatus, 0);
    if (WIFEXITED(wstatus)) {
      results[r].exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
      results[r].exit_code = 128 + WTERMSIG(wstatus);
      if (!results[r].timed_out) {
        results[r].text += " [killed by signal " + std::to_string(WTERMSIG(wstatus)) + "]";
      }
    }
  }
  return results;
}

int FreeTcpPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace mxmaca::transport::ucx
