// layers/context_parallel/pending_transfers.h: waiting on the completion of posted
// Communicator operations (transport/communicator.h) from a rank's compute thread, with a
// timeout and a report of what is still missing.
//
// The Communicator only enqueues and calls `done` later, on any thread. A context shard
// that computes while its K/V transfers are in flight needs, at the end of each ring step,
// to wait for the transfers it posted: PendingTransfers hands out `done` callbacks, counts
// the outstanding ones and blocks in Wait until they have all fired (or the timeout
// passes). Its state is shared with the callbacks, so a callback that fires after the
// PendingTransfers is gone (after a timeout) is harmless.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_PENDING_TRANSFERS_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_PENDING_TRANSFERS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "transport/communicator.h"

namespace mxmaca::layers::cp {

// PendingTransfers: a set of posted operations to wait for. Track and Wait are called by
// one thread (the owner); the callbacks may fire on any thread.
class PendingTransfers {
 public:
  PendingTransfers();

  // Track: the `done` callback for one operation about to be posted, described by `what`
  // (for error reports, e.g. "recv K of ring step 2 from CP rank 1"). With
  // measure_latency, the seconds from this call to the callback are added to
  // latency_seconds() (the transfer's time in flight as this rank sees it).
  transport::DoneCallback Track(std::string what, bool measure_latency = false);

  // Wait: blocks until every tracked operation has completed. Returns OK, the first
  // error a callback reported (prefixed with its `what`), or DeadlineExceeded after
  // `timeout` listing the operations still outstanding. After an error the buffers of the
  // outstanding operations must stay valid until the backend fails them (the job ends).
  absl::Status Wait(absl::Duration timeout);

  // outstanding: operations tracked and not yet completed.
  int outstanding() const;
  // latency_seconds: the sum of the measured operations' post-to-completion times.
  double latency_seconds() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_PENDING_TRANSFERS_H_
