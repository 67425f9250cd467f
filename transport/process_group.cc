// transport/process_group.cc: names of process groups.
#include "transport/process_group.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::transport {

const char* GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensorModelParallel: return "tensor_model_parallel";
    case GroupKind::kPipelineModelParallel: return "pipeline_model_parallel";
    case GroupKind::kDataParallel: return "data_parallel";
    case GroupKind::kDataParallelWithCp: return "data_parallel_with_cp";
    case GroupKind::kContextParallel: return "context_parallel";
    case GroupKind::kModelParallel: return "model_parallel";
    case GroupKind::kTensorAndDataParallel: return "tensor_and_data_parallel";
    case GroupKind::kTensorAndDataParallelWithCp: return "tensor_and_data_parallel_with_cp";
    case GroupKind::kTensorAndContextParallel: return "tensor_and_context_parallel";
    case GroupKind::kEmbedding: return "embedding";
    case GroupKind::kPositionEmbedding: return "position_embedding";
    case GroupKind::kExpertModelParallel: return "expert_model_parallel";
    case GroupKind::kExpertTensorParallel: return "expert_tensor_parallel";
    case GroupKind::kExpertTensorAndModelParallel: return "expert_tensor_and_model_parallel";
    case GroupKind::kExpertTensorModelPipelineParallel:
      return "expert_tensor_model_pipeline_parallel";
    case GroupKind::kExpertDataParallel: return "expert_data_parallel";
    case GroupKind::kWorld: return "world";
  }
  return "unknown";
}

std::string ProcessGroup::name() const {
  return absl::StrCat(GroupKindName(kind), "#", index);
}

}  // namespace mxmaca::transport
