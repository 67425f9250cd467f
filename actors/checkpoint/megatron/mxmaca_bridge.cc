// actors/checkpoint/megatron/mxmaca_bridge.cc: see mxmaca_bridge.h.
#include "actors/checkpoint/megatron/mxmaca_bridge.h"

#include "actors/checkpoint/checkpoint_writer.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint::megatron {

absl::StatusOr<LogicalTensors> ReadLogicalTensors(const CheckpointReader& reader) {
  LogicalTensors out;
  for (const std::string& name : reader.TensorNames()) {
    MXMACA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, reader.FullShape(name));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    LogicalTensor t;
    t.shape = shape;
    t.data.resize(static_cast<size_t>(n));
    MXMACA_RETURN_IF_ERROR(reader.ReadSlice(name, std::vector<int64_t>(shape.size(), 0), shape, t.data.data()));
    out[name] = std::move(t);
  }
  return out;
}

absl::Status WriteAsMxmacaCheckpoint(const LogicalTensors& tensors, const std::string& save_dir,
                                     int64_t iteration, const nlohmann::json& args,
                                     const nlohmann::json& state) {
  MXMACA_ASSIGN_OR_RETURN(CheckpointWriter w, CheckpointWriter::Begin(save_dir, iteration));
  std::vector<TensorShardView> views;
  for (const auto& [name, t] : tensors) {
    views.push_back({name, t.shape, std::vector<int64_t>(t.shape.size(), 0), t.shape, t.data.data()});
  }
  MXMACA_RETURN_IF_ERROR(w.WriteShard("megatron", views));
  return w.Commit(args, state);
}

}  // namespace mxmaca::actors::checkpoint::megatron
