// transport/ucx/verify_plan.h (internal to transport/ucx): the verification steps of the
// UCX backend as plan steps (collective_plan.h) — the descriptor exchange that opens a
// verified collective, and both sides of a send/recv.
//
// Send/recv protocol (tag steps fixed: 0 descriptor, 1 data, 2 verdict):
//   sender, one step: descriptor and data out, the receiver's verdict in; `after` fails
//     with the mismatch report unless the verdict is "ok".
//   receiver, step 0: the sender's descriptor in; `after` decides (VerifyPointToPoint)
//     and aims step 1 at the caller's buffer, or at scratch of the sender's size to drain
//     a mismatched message; step 1: data in, verdict out ("ok", or this side's
//     descriptor); `after` returns the decision.
// Without verification each side is a single data transfer (tag step 1).
#ifndef MXMACA_TRANSPORT_UCX_VERIFY_PLAN_H_
#define MXMACA_TRANSPORT_UCX_VERIFY_PLAN_H_

#include "transport/ucx/collective_plan.h"
#include "transport/ucx/descriptor.h"

namespace mxmaca::transport::ucx {

// AddDescriptorExchange: appends step 0 of a verified collective: every member sends
// `mine` to every other member; `after` decodes all descriptors and returns
// VerifyCollective's verdict (the same on every member).
void AddDescriptorExchange(const Members& m, const Descriptor& mine, Plan* plan);

// BuildPointToPoint: the plan of one side of a send/recv described by `mine`
// (info.op kSend or kRecv, info.peer the other side's global rank, info.bytes the
// length, invalid non-empty for a bad post). send_buffer / recv_buffer: the caller's.
void BuildPointToPoint(const Descriptor& mine, const void* send_buffer, void* recv_buffer,
                       bool verify, Plan* plan);

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_VERIFY_PLAN_H_
