// actors/stage_checkpoint.cc: see stage_checkpoint.h.
#include "actors/stage_checkpoint.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::actors {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ReadInto(const checkpoint::CheckpointReader& reader, const std::string& name,
                      const layers::ParameterInfo& info, float* out) {
  absl::StatusOr<std::vector<int64_t>> full = reader.FullShape(name);
  if (!full.ok()) {
    return absl::NotFoundError(absl::StrCat("checkpoint iteration ", reader.iteration(),
                                            " has no tensor ", name, ": ",
                                            full.status().message()));
  }
  if (*full != info.spec.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint has ", name, " ", ShapeString(*full), ", model expects ",
        ShapeString(info.spec.shape), " (different model shape?)"));
  }
  return reader.ReadSlice(name, info.shard_offset, info.shard_shape, out);
}

}  // namespace

absl::Status WriteStageShard(checkpoint::CheckpointWriter& writer, const std::string& writer_name,
                             const layers::ParameterStore& params,
                             layers::AdamWOptimizer* optimizer) {
  std::vector<checkpoint::TensorShardView> views;
  for (int i = 0; i < params.size(); ++i) {
    const layers::ParameterInfo& info = params.info(i);
    views.push_back({absl::StrCat("model/", info.spec.name), info.spec.shape, info.shard_offset,
                     info.shard_shape, params.param(i)});
    if (optimizer != nullptr) {
      views.push_back({absl::StrCat("optimizer/exp_avg/", info.spec.name), info.spec.shape,
                       info.shard_offset, info.shard_shape, optimizer->exp_avg(i).data()});
      views.push_back({absl::StrCat("optimizer/exp_avg_sq/", info.spec.name), info.spec.shape,
                       info.shard_offset, info.shard_shape, optimizer->exp_avg_sq(i).data()});
    }
  }
  return writer.WriteShard(writer_name, views);
}

absl::Status LoadStageParameters(const checkpoint::CheckpointReader& reader,
                                 layers::ParameterStore& params) {
  for (int i = 0; i < params.size(); ++i) {
    const layers::ParameterInfo& info = params.info(i);
    absl::Status s = ReadInto(reader, absl::StrCat("model/", info.spec.name), info, params.param(i));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status LoadOptimizerState(const checkpoint::CheckpointReader& reader,
                                layers::AdamWOptimizer& optimizer,
                                const layers::ParameterStore& params) {
  for (int i = 0; i < params.size(); ++i) {
    const layers::ParameterInfo& info = params.info(i);
    absl::Status s = ReadInto(reader, absl::StrCat("optimizer/exp_avg/", info.spec.name), info,
                              optimizer.exp_avg(i).data());
    if (!s.ok()) return s;
    s = ReadInto(reader, absl::StrCat("optimizer/exp_avg_sq/", info.spec.name), info,
                 optimizer.exp_avg_sq(i).data());
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::actors
