// transport/ucx/rendezvous.cc: TCP star around rank 0 with length-prefixed frames.
//
// Wire format (all integers little-endian u32): a frame is [length][bytes]. Hello (worker
// -> rank 0): "MXRV" rank world_size. Verdict (rank 0 -> worker): one byte 1 (all arrived)
// or 0 followed by the error text; before it, any number of progress frames: byte 2
// followed by rank 0's progress line. AllGather: each worker sends one frame; rank 0 answers
// every worker with [count] then count frames, in rank order.
#include "transport/ucx/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace mxmaca::transport::ucx {
namespace {

constexpr char kMagic[4] = {'M', 'X', 'R', 'V'};
constexpr uint32_t kMaxFrame = 64u << 20;  // 64 MiB: far above any worker address table

std::string ErrnoText(int err) { return std::strerror(err); }

int RemainingMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// SendAll: writes every byte before `deadline`; `who` names the peer in errors.
absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline, const std::string& who) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p = {fd, POLLOUT, 0};
      if (::poll(&p, 1, RemainingMs(deadline)) == 0) {
        return absl::DeadlineExceededError(
            absl::StrCat("rendezvous: sending to ", who, " timed out"));
      }
      continue;
    }
    return absl::UnavailableError(absl::StrCat("rendezvous: connection to ", who,
                                               " failed while sending: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// RecvAll: reads exactly `size` bytes before `deadline`.
absl::Status RecvAll(int fd, char* out, size_t size, absl::Time deadline, const std::string& who) {
  size_t done = 0;
  while (done < size) {
    pollfd p = {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, RemainingMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous: nothing from ", who, " before the deadline"));
    }
    const ssize_t n = ::recv(fd, out + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous: ", who, " closed its connection (its process exited?)"));
    } else if (errno != EINTR && errno != EAGAIN) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous: receiving from ", who, " failed: ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status SendFrame(int fd, absl::string_view payload, absl::Time deadline,
                       const std::string& who) {
  std::string frame;
  PutU32(&frame, static_cast<uint32_t>(payload.size()));
  frame.append(payload.data(), payload.size());
  return SendAll(fd, frame, deadline, who);
}

absl::StatusOr<std::string> RecvFrame(int fd, absl::Time deadline, const std::string& who) {
  char header[4];
  MXMACA_RETURN_IF_ERROR(RecvAll(fd, header, 4, deadline, who));
  const uint32_t size = GetU32(header);
  if (size > kMaxFrame) {
    return absl::FailedPreconditionError(absl::StrCat("rendezvous: ", who, " sent a frame of ",
                                                      size, " bytes (limit ", kMaxFrame,
                                                      "): not an MXMACA rendezvous peer?"));
  }
  std::string payload(size, '\0');
  MXMACA_RETURN_IF_ERROR(RecvAll(fd, payload.data(), size, deadline, who));
  return payload;
}

// SetUp: no Nagle delay (frames are small and latency-bound) and non-blocking I/O (every
// wait goes through poll with a deadline).
void SetUp(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

}  // namespace

std::string Rendezvous::Where() const {
  return absl::StrCat(options_.master_addr, ":", options_.master_port);
}

std::string Rendezvous::Left(absl::Time deadline) const {
  // Whole seconds, rounded: "50s left" ten seconds into a one-minute wait.
  absl::Duration left =
      absl::Seconds(absl::ToInt64Seconds(deadline - absl::Now() + absl::Milliseconds(500)));
  if (left < absl::ZeroDuration()) left = absl::ZeroDuration();
  return absl::StrCat(absl::FormatDuration(left), " left before the timeout of ",
                      absl::FormatDuration(options_.timeout), options_.timeout_hint);
}

absl::StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::Connect(const RendezvousOptions& options,
                                                                int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: rank ", rank, " outside [0, world size ", world_size, ")"));
  }
  if (options.master_port < 1 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: port ", options.master_port, " outside 1..65535"));
  }
  std::unique_ptr<Rendezvous> r(new Rendezvous(options, rank, world_size));
  if (world_size == 1) return r;
  MXMACA_RETURN_IF_ERROR(rank == 0 ? r->ConnectAsMaster() : r->ConnectAsWorker());
  return r;
}

absl::Status Rendezvous::ConnectAsMaster() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: socket(): ", ErrnoText(errno)));
  }
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(options_.master_port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, world_size_) != 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: rank 0 cannot listen on port ",
                                               options_.master_port, ": ", ErrnoText(errno)));
  }
  peers_.assign(world_size_, -1);
  const absl::Time deadline = absl::Now() + options_.timeout;
  int arrived = 1;
  absl::Status failure;
  absl::Time next_progress = absl::Now() + options_.progress_interval;
  auto missing_ranks = [&] {
    std::vector<int> missing;
    for (int q = 1; q < world_size_; ++q) {
      if (peers_[q] < 0) missing.push_back(q);
    }
    return absl::StrJoin(missing, ", ");
  };
  while (arrived < world_size_ && failure.ok()) {
    if (absl::Now() >= next_progress && absl::Now() < deadline) {
      // Say who is missing, here and to every rank that is waiting with us.
      const std::string line = absl::StrCat("rendezvous at ", Where(), ": waiting for ranks [",
                                            missing_ranks(), "] of ", world_size_, " (", arrived,
                                            " arrived, counting rank 0); ", Left(deadline));
      if (options_.progress) options_.progress(line);
      for (int q = 1; q < world_size_; ++q) {
        if (peers_[q] < 0) continue;
        SendFrame(peers_[q], absl::StrCat(std::string(1, '\2'), line),
                  absl::Now() + absl::Seconds(1), absl::StrCat("rank ", q))
            .IgnoreError();
      }
      next_progress = absl::Now() + options_.progress_interval;
    }
    pollfd p = {listen_fd_, POLLIN, 0};
    const int ready =
        ::poll(&p, 1, std::min(RemainingMs(deadline), std::max(1, RemainingMs(next_progress))));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0 && absl::Now() < deadline) continue;  // a progress tick
    if (ready == 0) {
      std::vector<int> missing;
      for (int q = 1; q < world_size_; ++q) {
        if (peers_[q] < 0) missing.push_back(q);
      }
      failure = absl::DeadlineExceededError(absl::StrCat(
          "rendezvous: ranks [", absl::StrJoin(missing, ", "), "] of ", world_size_,
          " did not arrive at ", Where(), " within ", absl::FormatDuration(options_.timeout), " (",
          arrived, " arrived, counting rank 0)"));
      break;
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    SetUp(fd);
    // A peer has a few seconds (within the deadline) to say hello once connected.
    auto hello =
        RecvFrame(fd, std::min(deadline, absl::Now() + absl::Seconds(10)), "a connecting rank");
    if (!hello.ok() || hello->size() != 12 || std::memcmp(hello->data(), kMagic, 4) != 0) {
      ::close(fd);  // not one of ours (a port scanner, a stale process): ignore it
      continue;
    }
    const int peer = static_cast<int>(GetU32(hello->data() + 4));
    const int peer_world = static_cast<int>(GetU32(hello->data() + 8));
    if (peer_world != world_size_) {
      failure = absl::FailedPreconditionError(absl::StrCat("rendezvous at ", Where(), ": rank ",
                                                           peer, " has world size ", peer_world,
                                                           " but rank 0 has ", world_size_));
    } else if (peer < 1 || peer >= world_size_ || peers_[peer] >= 0) {
      failure = absl::FailedPreconditionError(
          absl::StrCat("rendezvous at ", Where(), ": rank ", peer,
                       peers_[std::clamp(peer, 0, world_size_ - 1)] >= 0 ? " arrived twice"
                                                                         : " is outside the world",
                       " (world size ", world_size_, ")"));
    }
    if (peer >= 1 && peer < world_size_ && peers_[peer] < 0) {
      peers_[peer] = fd;
      ++arrived;
    } else {
      SendFrame(fd, absl::StrCat(std::string(1, '\0'), failure.message()),
                absl::Now() + absl::Seconds(1), "a connecting rank")
          .IgnoreError();
      ::close(fd);
    }
  }
  const std::string verdict =
      failure.ok() ? std::string(1, '\1') : absl::StrCat(std::string(1, '\0'), failure.message());
  for (int q = 1; q < world_size_; ++q) {
    if (peers_[q] < 0) continue;
    absl::Status s =
        SendFrame(peers_[q], verdict, absl::Now() + absl::Seconds(5), absl::StrCat("rank ", q));
    if (failure.ok() && !s.ok()) failure = s;
  }
  return failure;
}

absl::Status Rendezvous::ConnectAsWorker() {
  // Workers wait a little longer than rank 0 so that rank 0's verdict (naming who is
  // missing) reaches them before their own deadline does.
  const absl::Time connect_deadline = absl::Now() + options_.timeout;
  const absl::Time deadline = connect_deadline + absl::Seconds(5);
  addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no attempt";
  int fd = -1;
  absl::Time next_progress = absl::Now() + options_.progress_interval;
  while (fd < 0) {
    addrinfo* found = nullptr;
    const int gai = ::getaddrinfo(options_.master_addr.c_str(),
                                  absl::StrCat(options_.master_port).c_str(), &hints, &found);
    if (gai != 0) {
      last_error =
          absl::StrCat("cannot resolve \"", options_.master_addr, "\": ", gai_strerror(gai));
    } else {
      for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
        const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) continue;
        if (::connect(s, a->ai_addr, a->ai_addrlen) == 0) {
          fd = s;
        } else {
          last_error = ErrnoText(errno);
          ::close(s);
        }
      }
      ::freeaddrinfo(found);
    }
    if (fd >= 0) break;
    if (absl::Now() >= next_progress) {
      if (options_.progress) {
        options_.progress(absl::StrCat("rendezvous: rank ", rank_, " still cannot reach rank 0 at ",
                                       Where(), ": ", last_error, "; ", Left(connect_deadline)));
      }
      next_progress = absl::Now() + options_.progress_interval;
    }
    if (absl::Now() + absl::Milliseconds(50) >= connect_deadline) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous: rank ", rank_, " could not connect to rank 0 at ", Where(),
                       " within ", absl::FormatDuration(options_.timeout), ": ", last_error));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  SetUp(fd);
  peers_ = {fd};
  std::string hello(kMagic, 4);
  PutU32(&hello, static_cast<uint32_t>(rank_));
  PutU32(&hello, static_cast<uint32_t>(world_size_));
  MXMACA_RETURN_IF_ERROR(SendFrame(fd, hello, deadline, "rank 0"));
  absl::StatusOr<std::string> verdict = RecvFrame(fd, deadline, "rank 0");
  // Rank 0's progress lines (who is still missing) come first, then the verdict.
  while (verdict.ok() && !verdict->empty() && (*verdict)[0] == '\2') {
    if (options_.progress) options_.progress(verdict->substr(1));
    verdict = RecvFrame(fd, deadline, "rank 0");
  }
  if (!verdict.ok()) {
    if (absl::IsDeadlineExceeded(verdict.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous: rank ", rank_, ": rank 0 at ", Where(), " did not confirm that all ",
          world_size_, " ranks arrived within ", absl::FormatDuration(options_.timeout)));
    }
    return verdict.status();
  }
  if (verdict->empty() || (*verdict)[0] != '\1') {
    const std::string text = verdict->empty() ? "empty verdict" : verdict->substr(1);
    return absl::DeadlineExceededError(
        absl::StrCat("rendezvous: rank ", rank_, ": rank 0 reports: ", text));
  }
  return absl::OkStatus();
}

Rendezvous::~Rendezvous() {
  for (int fd : peers_) {
    if (fd >= 0) ::close(fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

absl::StatusOr<std::vector<std::string>> Rendezvous::AllGather(absl::string_view blob) {
  std::vector<std::string> all(world_size_);
  all[rank_] = std::string(blob);
  if (world_size_ == 1) return all;
  const absl::Time deadline = absl::Now() + options_.timeout;
  if (rank_ != 0) {
    MXMACA_RETURN_IF_ERROR(SendFrame(peers_[0], blob, deadline, "rank 0"));
    MXMACA_ASSIGN_OR_RETURN(std::string table, RecvFrame(peers_[0], deadline, "rank 0"));
    size_t at = 4;
    if (table.size() < 4 || GetU32(table.data()) != static_cast<uint32_t>(world_size_)) {
      return absl::FailedPreconditionError("rendezvous: malformed table from rank 0");
    }
    for (int q = 0; q < world_size_; ++q) {
      if (at + 4 > table.size()) return absl::FailedPreconditionError("rendezvous: short table");
      const uint32_t size = GetU32(table.data() + at);
      at += 4;
      if (at + size > table.size()) return absl::FailedPreconditionError("rendezvous: short table");
      all[q] = table.substr(at, size);
      at += size;
    }
    return all;
  }
  std::vector<int> missing;
  absl::Status failure;
  for (int q = 1; q < world_size_; ++q) {
    auto got = RecvFrame(peers_[q], deadline, absl::StrCat("rank ", q));
    if (got.ok()) {
      all[q] = std::move(*got);
    } else if (absl::IsDeadlineExceeded(got.status())) {
      missing.push_back(q);
    } else if (failure.ok()) {
      failure = got.status();
    }
  }
  if (!missing.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("rendezvous: ranks [", absl::StrJoin(missing, ", "),
                     "] sent nothing to rank 0 within ", absl::FormatDuration(options_.timeout)));
  }
  MXMACA_RETURN_IF_ERROR(failure);
  std::string table;
  PutU32(&table, static_cast<uint32_t>(world_size_));
  for (const std::string& b : all) {
    PutU32(&table, static_cast<uint32_t>(b.size()));
    table += b;
  }
  for (int q = 1; q < world_size_; ++q) {
    MXMACA_RETURN_IF_ERROR(SendFrame(peers_[q], table, deadline, absl::StrCat("rank ", q)));
  }
  return all;
}

absl::Status Rendezvous::Barrier() { return AllGather("").status(); }

}  // namespace mxmaca::transport::ucx
