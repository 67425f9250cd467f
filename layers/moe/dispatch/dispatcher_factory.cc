// layers/moe/dispatch/dispatcher_factory.cc: name -> dispatcher.
#include "layers/moe/dispatch/dispatcher_factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "layers/moe/dispatch/all_gather_dispatcher.h"
#include "layers/moe/dispatch/all_to_all_dispatcher.h"
#include "layers/moe/dispatch/hierarchical_dispatcher.h"

namespace mxmaca::layers::moe::dispatch {

namespace {

template <typename T>
absl::StatusOr<std::unique_ptr<TokenDispatcher>> Upcast(absl::StatusOr<std::unique_ptr<T>> d) {
  if (!d.ok()) return d.status();
  return std::unique_ptr<TokenDispatcher>(*std::move(d));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenDispatcher>> CreateTokenDispatcher(absl::string_view type,
                                                                       DispatcherOptions options,
                                                                       int ranks_per_node) {
  if (type == "alltoall") return Upcast(AllToAllDispatcher::Create(std::move(options)));
  if (type == "allgather") return Upcast(AllGatherDispatcher::Create(std::move(options)));
  if (type == "hierarchical") {
    return Upcast(HierarchicalDispatcher::Create(std::move(options), ranks_per_node));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--moe-token-dispatcher-type '", type,
                   "' is not supported; expected alltoall, allgather or hierarchical"));
}

}  // namespace mxmaca::layers::moe::dispatch
