// actors/step_backup.cc: see step_backup.h.
#include "actors/step_backup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mxmaca::actors {
namespace {

absl::Status CheckOptimizers(
    StageProgram& program,
    const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers) {
  if (static_cast<int>(optimizers.size()) != program.num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat("step backup: ", optimizers.size(),
                                                   " optimizers for ", program.num_chunks(),
                                                   " model chunks"));
  }
  for (size_t c = 0; c < optimizers.size(); ++c) {
    if (!optimizers[c]) {
      return absl::InvalidArgumentError(absl::StrCat("step backup: chunk ", c,
                                                     " has no optimizer"));
    }
  }
  return absl::OkStatus();
}

// CopyBack: `from` into `to` when the sizes match.
absl::Status CopyBack(const std::vector<float>& from, absl::Span<float> to, size_t chunk,
                      const char* what) {
  if (from.size() != to.size()) {
    return absl::InvalidArgumentError(absl::StrCat("step backup: chunk ", chunk, " ", what,
                                                   " holds ", to.size(), " values, ",
                                                   from.size(), " were saved"));
  }
  std::copy(from.begin(), from.end(), to.begin());
  return absl::OkStatus();
}

}  // namespace

absl::Status StepBackup::Save(
    StageProgram& program,
    const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers) {
  if (absl::Status s = CheckOptimizers(program, optimizers); !s.ok()) return s;
  chunks_.resize(optimizers.size());
  for (size_t c = 0; c < optimizers.size(); ++c) {
    layers::ParameterStore& store = program.parameters(static_cast<int>(c));
    Chunk& k = chunks_[c];
    const absl::Span<float> params = store.params_arena(), grads = store.grads_arena();
    k.params.assign(params.begin(), params.end());
    k.grads.assign(grads.begin(), grads.end());
    layers::AdamWOptimizer& opt = *optimizers[c];
    const size_t n = opt.tensors().size();
    k.exp_avg.resize(n);
    k.exp_avg_sq.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const absl::Span<float> m = opt.exp_avg(i), v = opt.exp_avg_sq(i);
      k.exp_avg[i].assign(m.begin(), m.end());
      k.exp_avg_sq[i].assign(v.begin(), v.end());
    }
    k.step = opt.step();
  }
  saved_ = true;
  return absl::OkStatus();
}

absl::Status StepBackup::Restore(
    StageProgram& program,
    const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers) const {
  if (!saved_) return absl::FailedPreconditionError("step backup: nothing was saved");
  if (absl::Status s = CheckOptimizers(program, optimizers); !s.ok()) return s;
  if (optimizers.size() != chunks_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("step backup: ", chunks_.size(),
                                                   " chunks saved, ", optimizers.size(),
                                                   " now"));
  }
  for (size_t c = 0; c < chunks_.size(); ++c) {
    layers::ParameterStore& store = program.parameters(static_cast<int>(c));
    const Chunk& k = chunks_[c];
    layers::AdamWOptimizer& opt = *optimizers[c];
    if (opt.tensors().size() != k.exp_avg.size()) {
      return absl::InvalidArgumentError(absl::StrCat("step backup: chunk ", c, " has ",
                                                     opt.tensors().size(), " tensors, ",
                                                     k.exp_avg.size(), " were saved"));
    }
    // Check every size before writing anything.
    if (store.params_arena().size() != k.params.size() ||
        store.grads_arena().size() != k.grads.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step backup: chunk ", c, " arenas hold ", store.params_arena().size(),
          " values, ", k.params.size(), " were saved"));
    }
    for (size_t i = 0; i < k.exp_avg.size(); ++i) {
      if (opt.exp_avg(i).size() != k.exp_avg[i].size() ||
          opt.exp_avg_sq(i).size() != k.exp_avg_sq[i].size()) {
        return absl::InvalidArgumentError(absl::StrCat("step backup: chunk ", c, " tensor ",
                                                       i, " moments changed size"));
      }
    }
  }
  for (size_t c = 0; c < chunks_.size(); ++c) {
    layers::ParameterStore& store = program.parameters(static_cast<int>(c));
    const Chunk& k = chunks_[c];
    layers::AdamWOptimizer& opt = *optimizers[c];
    if (absl::Status s = CopyBack(k.params, store.params_arena(), c, "parameter arena");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CopyBack(k.grads, store.grads_arena(), c, "gradient arena"); !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < k.exp_avg.size(); ++i) {
      if (absl::Status s = CopyBack(k.exp_avg[i], opt.exp_avg(i), c, "exp_avg"); !s.ok()) {
        return s;
      }
      if (absl::Status s = CopyBack(k.exp_avg_sq[i], opt.exp_avg_sq(i), c, "exp_avg_sq");
          !s.ok()) {
        return s;
      }
    }
    opt.set_step(k.step);
  }
  return absl::OkStatus();
}

int64_t StepBackup::bytes() const {
  int64_t n = 0;
  for (const Chunk& k : chunks_) {
    n += static_cast<int64_t>(k.params.size() + k.grads.size());
    for (const auto& m : k.exp_avg) n += static_cast<int64_t>(m.size());
    for (const auto& v : k.exp_avg_sq) n += static_cast<int64_t>(v.size());
  }
  return n * static_cast<int64_t>(sizeof(float));
}

}  // namespace mxmaca::actors
