// layers/moe/dispatch/dispatcher_factory.h: CreateTokenDispatcher, a dispatcher from its
// --moe-token-dispatcher-type name.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_DISPATCHER_FACTORY_H_
#define MXMACA_LAYERS_MOE_DISPATCH_DISPATCHER_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "layers/moe/dispatch/token_dispatcher.h"

namespace mxmaca::layers::moe::dispatch {

// CreateTokenDispatcher: "alltoall" (AllToAllDispatcher), "allgather"
// (AllGatherDispatcher) — Megatron's --moe-token-dispatcher-type values — or
// "hierarchical" (HierarchicalDispatcher; ours, uses ranks_per_node >= 1; the others
// ignore it). Errors: InvalidArgument for another name (Megatron's "flex", DeepEP, is not
// implemented; the message lists the valid names) and the dispatcher's own Create errors.
absl::StatusOr<std::unique_ptr<TokenDispatcher>> CreateTokenDispatcher(absl::string_view type,
                                                                       DispatcherOptions options,
                                                                       int ranks_per_node = 1);

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_DISPATCHER_FACTORY_H_
