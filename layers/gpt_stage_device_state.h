// layers/gpt_stage_device_state.h: what a GptStage built by CreateOnDevice holds besides
// the CPU stage's members (gpt_stage.h "Backends"): the per-op buffers shared by all
// slots, the gradient temporaries, the slots. Private to the gpt_stage target.
#ifndef MXMACA_LAYERS_GPT_STAGE_DEVICE_STATE_H_
#define MXMACA_LAYERS_GPT_STAGE_DEVICE_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/exec_context.h"
#include "layers/device/segment_runner.h"
#include "layers/gpt_stage.h"
#include "layers/micro_batch_stash.h"

namespace mxmaca::layers {

struct GptStage::DeviceState {
  DeviceStageOptions options;
  double* norm_partials = nullptr;  // [tensors] GradNormSquared's fp64 partials
  // grad_temp: the gradient temporaries of DeviceGradSink (at most two tensors open at
  // once: a weight and its bias, a norm's gamma and beta); tied_temp: the tied
  // output/embedding weight's micro-batch gradient while the layers' W runs between its
  // two halves (a stage with both the embedding and the loss head).
  float* grad_temp = nullptr;
  int64_t grad_temp_floats = 0;
  float* tied_temp = nullptr;
  // Selective recomputation without fused attention: every slot's layers share one
  // [b, np, s, s] probabilities buffer (no micro-batch keeps them from F to B).
  float* shared_probs = nullptr;
  // Per-op buffers (not kept between ops).
  int32_t* rope_positions = nullptr;  // [T]
  int32_t* local_targets = nullptr;   // [T] (TP > 1)
  float* stage_output = nullptr;      // [T, h]
  float* token_losses = nullptr;      // [T]
  float* loss_grad = nullptr;         // [T]
  // A slot: the stash of one micro-batch in flight, its buffers bound to one allocation
  // (micro_batch_stash.h StashBuffer::Bind), and its dropout keys.
  struct Slot {
    std::unique_ptr<MicroBatchStash> stash;
    kernels::RngKey* dropout_keys = nullptr;  // NumSlotKeys(layers) keys
    float* pending_grads = nullptr;  // [arena] W out of forward order (allocated at first use)
    bool busy = false;
  };
  std::vector<Slot> slots;
  int64_t slot_bytes = 0;     // of one slot
  int64_t arena_bytes = 0;    // parameters, gradients (and the Adam moments once allocated)
  int64_t scratch_bytes = 0;  // the per-op buffers, temporaries, shared probabilities
  int64_t cap_bytes = 0;      // --memory-cap-per-shard on the slots' bytes (0: none)
  std::string cap_shard;
  std::vector<kernels::RngKey> host_keys;  // UploadDropoutKeys' staging (until the op's sync)
  device::SegmentRunner runner;
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_GPT_STAGE_DEVICE_STATE_H_
