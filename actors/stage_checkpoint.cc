// actors/stage_checkpoint.cc: see stage_checkpoint.h.
#include "actors/stage_checkpoint.h"

#include <algorithm>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/flat_range.h"
#include "base/status_macros.h"

namespace mxmaca::actors {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// StoredShape: the full shape a checkpoint written now stores for `spec`: a vocab-padded
// tensor (ParameterSpec::vocab_rows > 0) keeps its logical rows [0, V) unless its padding
// rows are trained (save_padding_rows); every other tensor its full shape.
std::vector<int64_t> StoredShape(const layers::ParameterSpec& spec) {
  std::vector<int64_t> shape = spec.shape;
  if (spec.vocab_rows > 0 && !spec.save_padding_rows && !shape.empty() &&
      spec.vocab_rows < shape[0]) {
    shape[0] = spec.vocab_rows;
  }
  return shape;
}

// ClipRows: clips the box [offsets, offsets + shape) to rows below `rows` (dim 0), in
// place; false when nothing is left. The box's first elements are its first rows (C
// order), so the clipped box starts where the box did.
bool ClipRows(const std::vector<int64_t>& offsets, std::vector<int64_t>* shape, int64_t rows) {
  if (shape->empty()) return true;
  (*shape)[0] = std::max<int64_t>(0, std::min((*shape)[0], rows - offsets[0]));
  for (int64_t d : *shape) {
    if (d == 0) return false;
  }
  return true;
}

// RowsToRead: how many leading rows of tensor `info` the checkpoint's `name` supplies:
// all of them when the stored full shape is the model's (the same padded size: every row,
// padding included, bit for bit); V when `info` is vocab-padded and the checkpoint holds at
// least the V logical rows with the same other dims (another padded size — another TP size
// or --make-vocab-size-divisible-by — or a checkpoint of the logical rows only): rows
// [V, V_pad) are padding and keep what the caller's buffer holds (initial values,
// Adam's zero moments). NotFound if the checkpoint lacks `name`, InvalidArgument if the
// shapes are not compatible.
absl::StatusOr<int64_t> RowsToRead(const checkpoint::CheckpointReader& reader,
                                   const std::string& name, const layers::ParameterInfo& info) {
  absl::StatusOr<std::vector<int64_t>> full = reader.FullShape(name);
  if (!full.ok()) {
    return absl::NotFoundError(absl::StrCat("checkpoint iteration ", reader.iteration(),
                                            " has no tensor ", name, ": ",
                                            full.status().message()));
  }
  const std::vector<int64_t>& model = info.spec.shape;
  if (*full == model) return model.empty() ? 0 : model[0];
  const int64_t v = info.spec.vocab_rows;
  if (v > 0 && full->size() == model.size() && !model.empty() &&
      std::equal(full->begin() + 1, full->end(), model.begin() + 1) && (*full)[0] >= v) {
    return v;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint has ", name, " ", ShapeString(*full), ", model expects ",
      ShapeString(model),
      v > 0 ? absl::StrCat(" (or at least the ", v, " rows of the vocabulary)") : "",
      " (different model shape?)"));
}

absl::Status ReadInto(const checkpoint::CheckpointReader& reader, const std::string& name,
                      const layers::ParameterInfo& info, float* out) {
  MXMACA_ASSIGN_OR_RETURN(const int64_t rows, RowsToRead(reader, name, info));
  // A tensor-parallel shard may be several boxes of the full tensor (SwiGLU's
  // [gate_r; up_r]): each box is contiguous in the local buffer at its local_offset.
  for (const layers::ShardBox& box : layers::ShardBoxes(info)) {
    std::vector<int64_t> shape = box.shape;
    if (!ClipRows(box.offset, &shape, rows)) continue;  // padding rows only
    MXMACA_RETURN_IF_ERROR(reader.ReadSlice(name, box.offset, shape, out + box.local_offset));
  }
  return absl::OkStatus();
}

// PieceBox: one box of an optimizer entry, in full-tensor coordinates, and where its
// values start inside the entry's buffer (an element index).
struct PieceBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> shape;
  int64_t buffer_begin = 0;
};

// PieceBoxes: the boxes of optimizer entry `t` of tensor `info`: the entry covers the
// elements [flat_offset, flat_offset + numel) of the shard's local buffer; the local buffer
// is the shard's boxes (layers::ShardBoxes) one after another, each in C order. Each
// intersection of the entry with a box becomes the boxes of that flat sub-range, moved to
// the box's place in the full tensor. InvalidArgument for a range outside the shard.
absl::StatusOr<std::vector<PieceBox>> PieceBoxes(const layers::OptimizerTensor& t,
                                                 const layers::ParameterInfo& info) {
  if (t.flat_offset < 0 || t.numel < 0 || t.flat_offset + t.numel > info.numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer entry ", t.name, " covers elements [", t.flat_offset, ", ",
        t.flat_offset + t.numel, ") of a tensor of ", info.numel, " elements ",
        ShapeString(info.shard_shape)));
  }
  std::vector<PieceBox> out;
  const int64_t begin = t.flat_offset, end = t.flat_offset + t.numel;
  for (const layers::ShardBox& box : layers::ShardBoxes(info)) {
    int64_t box_numel = 1;
    for (int64_t d : box.shape) box_numel *= d;
    const int64_t lo = std::max(begin, box.local_offset);
    const int64_t hi = std::min(end, box.local_offset + box_numel);
    if (lo >= hi) continue;
    if (lo == box.local_offset && hi == box.local_offset + box_numel) {
      out.push_back({box.offset, box.shape, lo - begin});
      continue;
    }
    absl::StatusOr<std::vector<checkpoint::FlatRangeBox>> boxes = checkpoint::FlatRangeToBoxes(
        box.shape, lo - box.local_offset, hi - box.local_offset);
    if (!boxes.ok()) return boxes.status();
    for (const checkpoint::FlatRangeBox& fb : *boxes) {
      PieceBox p;
      p.offsets = fb.offsets;
      for (size_t d = 0; d < p.offsets.size(); ++d) p.offsets[d] += box.offset[d];
      p.shape = fb.shape;
      p.buffer_begin = box.local_offset + fb.flat_begin - begin;
      out.push_back(std::move(p));
    }
  }
  return out;
}

// AdamState: exp_avg (Adam's first moment) or exp_avg_sq (second), as named in checkpoints.
struct AdamState {
  const char* name;
  bool second_moment;
};
constexpr AdamState kAdamStates[] = {{"exp_avg", false}, {"exp_avg_sq", true}};

float* StateOf(layers::AdamWOptimizer& optimizer, size_t k, const AdamState& state) {
  return state.second_moment ? optimizer.exp_avg_sq(k).data() : optimizer.exp_avg(k).data();
}

// ParameterOf: the index in `params` of optimizer entry `t`'s tensor.
absl::StatusOr<int> ParameterOf(const layers::ParameterStore& params,
                                const layers::OptimizerTensor& t) {
  absl::StatusOr<int> index = params.Index(t.name);
  if (!index.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer entry ", t.name, " is not a parameter of this stage's store"));
  }
  return *index;
}

}  // namespace

absl::Status WriteStageShard(checkpoint::CheckpointWriter& writer, const std::string& writer_name,
                             const layers::ParameterStore& params,
                             layers::AdamWOptimizer* optimizer,
                             const StageShardOptions& options) {
  // Optimizer entries per parameter, in optimizer order (pieces come in arena order).
  std::vector<std::vector<size_t>> entries_of(params.size());
  const bool write_optimizer = optimizer != nullptr && options.optimizer_state;
  if (write_optimizer) {
    for (size_t k = 0; k < optimizer->tensors().size(); ++k) {
      absl::StatusOr<int> index = ParameterOf(params, optimizer->tensors()[k]);
      if (!index.ok()) return index.status();
      entries_of[*index].push_back(k);
    }
  }
  std::vector<checkpoint::TensorShardView> views;
  for (int i = 0; i < params.size(); ++i) {
    const layers::ParameterInfo& info = params.info(i);
    if (options.skip_parameter && options.skip_parameter(info)) continue;
    // Vocab-padded tensors: the logical rows only (StoredShape); a box of padding rows
    // alone is not written.
    const std::vector<int64_t> stored = StoredShape(info.spec);
    if (options.parameters) {
      for (const layers::ShardBox& box : layers::ShardBoxes(info)) {
        std::vector<int64_t> shape = box.shape;
        if (!ClipRows(box.offset, &shape, stored[0])) continue;
        views.push_back({absl::StrCat("model/", info.spec.name), stored, box.offset, shape,
                         params.param(i) + box.local_offset});
      }
    }
    for (size_t k : entries_of[i]) {
      absl::StatusOr<std::vector<PieceBox>> boxes = PieceBoxes(optimizer->tensors()[k], info);
      if (!boxes.ok()) return boxes.status();
      for (const AdamState& state : kAdamStates) {
        const float* data = StateOf(*optimizer, k, state);
        for (const PieceBox& box : *boxes) {
          std::vector<int64_t> shape = box.shape;
          if (!ClipRows(box.offsets, &shape, stored[0])) continue;
          views.push_back({absl::StrCat("optimizer/", state.name, "/", info.spec.name), stored,
                           box.offsets, shape, data + box.buffer_begin});
        }
      }
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
  for (size_t k = 0; k < optimizer.tensors().size(); ++k) {
    const layers::OptimizerTensor& t = optimizer.tensors()[k];
    absl::StatusOr<int> index = ParameterOf(params, t);
    if (!index.ok()) return index.status();
    const layers::ParameterInfo& info = params.info(*index);
    absl::StatusOr<std::vector<PieceBox>> boxes = PieceBoxes(t, info);
    if (!boxes.ok()) return boxes.status();
    for (const AdamState& state : kAdamStates) {
      const std::string name = absl::StrCat("optimizer/", state.name, "/", info.spec.name);
      MXMACA_ASSIGN_OR_RETURN(const int64_t rows, RowsToRead(reader, name, info));
      float* data = StateOf(optimizer, k, state);
      for (const PieceBox& box : *boxes) {
        std::vector<int64_t> shape = box.shape;
        if (!ClipRows(box.offsets, &shape, rows)) continue;  // padding rows keep their zeros
        MXMACA_RETURN_IF_ERROR(
            reader.ReadSlice(name, box.offsets, shape, data + box.buffer_begin));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LoadPersistentBuffers(
    const checkpoint::CheckpointReader& reader,
    const std::vector<std::pair<std::string, std::vector<float>*>>& buffers, bool required,
    std::vector<std::string>* missing) {
  for (const auto& [buffer, values] : buffers) {
    const std::string name = "buffers/" + buffer;
    const int64_t n = static_cast<int64_t>(values->size());
    if (!reader.HasTensor(name)) {
      if (required) {
        return absl::NotFoundError(
            absl::StrCat("checkpoint ", reader.dir(), " has no ", name));
      }
      if (missing != nullptr) missing->push_back(name);
      continue;
    }
    MXMACA_RETURN_IF_ERROR(reader.ReadShard(name, {n}, {0}, {n}, values->data()));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::actors
