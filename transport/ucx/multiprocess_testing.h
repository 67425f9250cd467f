// transport/ucx/multiprocess_testing.h: runs one function per rank in forked child
// processes and collects what each reports (test helper for tests tagged "multiprocess").
//
// Children must not use Catch2 assertions (they would report in the child); they return a
// text instead: empty means success, anything else is that rank's failure, which the
// parent checks.
#ifndef MXMACA_TRANSPORT_UCX_MULTIPROCESS_TESTING_H_
#define MXMACA_TRANSPORT_UCX_MULTIPROCESS_TESTING_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace mxmaca::transport::ucx {

// RankResult: what one child reported.
struct RankResult {
  std::string text;   // the body's return value (empty: success)
  int exit_code = 0;  // 0 when the body returned; 128+signal when killed
  bool timed_out = false;
};

// RunRanks: forks `world_size` children; child r runs body(r) and exits. Waits at most
// `timeout` for all of them, then SIGKILLs the rest (timed_out set). Result r is rank r's.
std::vector<RankResult> RunRanks(int world_size, const std::function<std::string(int rank)>& body,
                                 absl::Duration timeout);

// FreeTcpPort: a port the kernel just gave to a bound-then-closed socket on 127.0.0.1
// (free at that moment; the rendezvous of a test binds it soon after).
int FreeTcpPort();

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_MULTIPROCESS_TESTING_H_
