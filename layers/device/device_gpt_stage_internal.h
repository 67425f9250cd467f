// layers/device/device_gpt_stage_internal.h: what device_gpt_stage.cc (create, slots, F,
// B) and device_gpt_stage_weight_grad.cc (W, optimizer) share: the slot and scratch layouts
// of DeviceGptStage and the 256-byte carving of one allocation. Not a public header.
#ifndef MXMACA_LAYERS_DEVICE_DEVICE_GPT_STAGE_INTERNAL_H_
#define MXMACA_LAYERS_DEVICE_DEVICE_GPT_STAGE_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/exec_context.h"
#include "layers/device/device_gpt_stage.h"
#include "layers/transformer_layer.h"

namespace mxmaca::layers::device {
namespace internal {

inline constexpr int64_t kAlignFloats = 64;  // 256 bytes: every buffer of a slot starts aligned

inline int64_t RoundUp(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// FloatCarver: hands out consecutive 256-byte-aligned pieces of one allocation (or, with
// base == nullptr, only counts how many floats the pieces need).
class FloatCarver {
 public:
  explicit FloatCarver(float* base) : base_(base) {}
  float* Take(int64_t n) {
    float* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += RoundUp(std::max<int64_t>(n, 1));
    return p;
  }
  int32_t* TakeInts(int64_t n) { return reinterpret_cast<int32_t*>(Take(n)); }
  double* TakeDoubles(int64_t n) { return reinterpret_cast<double*>(Take(2 * n)); }
  int64_t used() const { return used_; }

 private:
  float* base_;
  int64_t used_ = 0;
};

// Dropout keys of one micro-batch in its slot: [0] the embedding's, then per local layer i
// the attention probabilities', the attention output's and the MLP output's.
inline int NumKeys(int num_layers) { return 1 + 3 * num_layers; }
inline int KeyIndex(int local_layer, DropoutSite site) {
  if (local_layer < 0) return 0;
  return 1 + 3 * local_layer + LayerDropoutKeyIndex(site);
}

}  // namespace internal

struct DeviceGptStage::Slot {
  int index = 0;
  bool busy = false;
  bool training = false;
  enum class Phase { kForwardDone, kBackwardInputDone } phase = Phase::kForwardDone;
  int64_t micro_batch_id = -1, iteration = 0, b = 0, s = 0;
  bool has_doc_start = false;
  float* base = nullptr;  // the slot's one allocation
  // Inputs (device).
  int32_t *tokens, *positions, *rope_positions, *doc_start, *labels;
  float *loss_mask, *dloss;
  kernels::RngKey* rng_keys;  // internal::NumKeys(layers) keys, uploaded by training F
  float* d_embedding;
  // Per local layer: transformer_layer.h's stash, every buffer bound to fixed addresses
  // of the slot's allocation (micro_batch_stash.h StashBuffer::Bind).
  std::vector<LayerStash> layers;
  // Loss head.
  float *final_input, *lnf_out, *lnf_mean, *lnf_rstd, *logits, *ce_lse, *token_losses, *d_lnf_out;
  // Stage boundary: output hidden (F), incoming d_output and outgoing d_input (B).
  float *output, *d_output, *d_input;
  std::vector<float> host_loss_mask;  // for the loss and dloss
};

// Scratch: temporaries of one op (not kept between ops), shared by all slots: the layer
// gradients between layers, the layers' own scratch (bound), the final norm's 1 + w.
struct DeviceGptStage::Scratch {
  float *grad_a, *grad_b, *gamma;
  LayerScratch layer;
};

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_DEVICE_GPT_STAGE_INTERNAL_H_
