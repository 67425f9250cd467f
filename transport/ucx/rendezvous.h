// transport/ucx/rendezvous.h: the out-of-band meeting point of a multi-process job — plain
// TCP sockets in a star around rank 0 (torch.distributed's TCPStore plays this part in
// Megatron). The UCX backend uses it once at start-up to exchange ucp worker addresses
// (~215 bytes each) and at shut-down as a barrier; it is not a data path.
//
// Rank 0 listens on MASTER_ADDR:MASTER_PORT (bound on all interfaces); every other rank
// connects (retrying while rank 0 is not up yet) and says hello (rank, world size). Connect
// returns on every rank only once all world_size ranks have arrived; when one never
// arrives within the timeout, rank 0 fails with an error naming the missing ranks and
// forwards the same error to the ranks that did arrive, so every process reports it.
// While it waits, every RendezvousOptions::progress_interval (10 s) rank 0 reports the
// ranks not yet seen and the time left, to its own `progress` and to every rank that has
// arrived (so each process's log says what it waits for); a rank still trying to reach
// rank 0 reports that.
#ifndef MXMACA_TRANSPORT_UCX_RENDEZVOUS_H_
#define MXMACA_TRANSPORT_UCX_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mxmaca::transport::ucx {

// RendezvousOptions: where rank 0 listens and how long everyone waits.
struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";  // host name or IPv4 address of rank 0
  int master_port = 29500;                // TCP port rank 0 listens on
  // timeout: limit for Connect (all ranks arriving) and for each AllGather / Barrier.
  absl::Duration timeout = absl::Seconds(60);
  // progress: receives a line every progress_interval while Connect waits, e.g.
  //   rendezvous at 127.0.0.1:29500: waiting for ranks [2] of 3 (2 arrived, counting
  //   rank 0); 50s left before the timeout of 1m
  // (on rank 0 and, forwarded, on the ranks that arrived), or, on a rank that cannot reach
  // rank 0 yet, "rendezvous: rank 1 still cannot reach rank 0 at ...: <errno text>; 50s
  // left ...". `timeout_hint` is appended to "the timeout of 1m" (e.g. " (set by
  // --distributed-timeout-minutes)"). Empty: silent. Called on the connecting thread.
  std::function<void(const std::string&)> progress;
  absl::Duration progress_interval = absl::Seconds(10);
  std::string timeout_hint;
};

// Rendezvous: one rank's connection(s) to the star. Not thread-safe; every rank must call
// the collective methods (AllGather, Barrier) in the same order.
class Rendezvous {
 public:
  // Connect: rank 0 listens and waits for ranks 1..world_size-1; the others connect.
  // Errors: InvalidArgument (rank outside [0, world_size), port outside 1..65535);
  // Unavailable (rank 0 cannot listen on the port, or a rank cannot reach rank 0 within
  // the timeout: "rank 2 could not connect to rank 0 at host:port within 10s: <errno
  // text>"); DeadlineExceeded ("ranks [3] of 4 did not arrive at host:port within 10s");
  // FailedPrecondition (a peer reports another world size, or a rank arrives twice).
  static absl::StatusOr<std::unique_ptr<Rendezvous>> Connect(const RendezvousOptions& options,
                                                             int rank, int world_size);
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;
  // ~Rendezvous: closes the sockets (peers then see end-of-file).
  ~Rendezvous();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // AllGather: every rank's `blob`, indexed by rank. Errors: DeadlineExceeded naming the
  // ranks that did not send within the timeout; Unavailable when a peer's connection
  // closes (its process exited), naming the rank.
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob);

  // Barrier: returns when every rank has called Barrier (an AllGather of nothing).
  absl::Status Barrier();

 private:
  Rendezvous(RendezvousOptions options, int rank, int world_size)
      : options_(std::move(options)), rank_(rank), world_size_(world_size) {}
  absl::Status ConnectAsMaster();
  absl::Status ConnectAsWorker();
  std::string Where() const;
  // Left: "50s left before the timeout of 1m<hint>" for a wait ending at `deadline`.
  std::string Left(absl::Time deadline) const;

  RendezvousOptions options_;
  int rank_;
  int world_size_;
  int listen_fd_ = -1;
  // peers_: rank 0: peers_[r] is the socket of rank r (peers_[0] unused); other ranks:
  // peers_[0] is the socket to rank 0.
  std::vector<int> peers_;
};

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_RENDEZVOUS_H_
