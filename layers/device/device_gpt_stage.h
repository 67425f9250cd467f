// layers/device/device_gpt_stage.h: a dense Megatron-Core GPT pipeline stage whose
// parameters, gradients, optimizer state and activations live in device memory, with
// per-micro-batch forward (F), backward-input (B) and backward-weight (W) — the GPU
// backend's model (issue 8), written once against DeviceKernels (device_kernels.h).
//
// It computes what layers/gpt_stage.h computes for the configurations it accepts, with the
// same operations in the same order (transformer_layer.cc's sequence per layer, Megatron's
// get_batch / loss as gpt_stage.cc), so on CpuDeviceKernels it reproduces GptStage bit for
// bit (device_gpt_stage_test.cc) and on CudaDeviceKernels within the kernels' tolerances.
// b = micro-batch size, s = sequence length, T = b s, h = hidden, VP = padded vocabulary;
// token-major rows t = bi s + si.
//
// Accepted: layers/gpt_config.h's dense GPT without tensor, context or expert
// parallelism: LayerNorm or RMSNorm, GELU (exact or tanh) or SwiGLU, learned absolute,
// RoPE (with Llama-3 scaling, sequence-length interpolation and interleaved pairs;
// GptConfig::rope_frequencies) or no position embeddings, multi-head or grouped-query
// attention, with or without linear biases, tied or untied embeddings, hidden and
// attention dropout, --reset-attention-mask document masks, fp32 or bf16 GEMM inputs,
// --apply-layernorm-1p, --qk-layernorm, selective recomputation (--recompute-granularity
// selective: F keeps no attention probabilities, B recomputes them, and all slots share one
// probabilities buffer). Create refuses, by name: MoE layers and full recomputation.
//
// Memory. The stage owns one device arena each for parameters, gradients, exp_avg and
// exp_avg_sq (the layout of the host ParameterStore: the same arena offsets), and a set of
// micro-batch SLOTS: each slot holds every activation one micro-batch keeps from F to W
// (the stash of transformer_layer.h, sized for options.micro_batch_size x
// options.seq_length), at fixed device addresses for the slot's lifetime, so the device
// work of an op on a slot can be captured into a CUDA graph once and replayed (docs/ARCHITECTURE.md
// "slots have fixed addresses that captured graphs can reuse"). A micro-batch takes the
// first free slot at F and frees it at W; a new slot is allocated when all are busy
// (pipeline depth), so a 1F1B stage with p micro-batches in flight holds p slots.
//
// Graph segments. Each op is: host -> device copies of its inputs (eager), the SEGMENT
// (device work only: the op's kernels on the slot's buffers), device -> host copies of its
// outputs, then one Synchronize. The segment runs through the SegmentRunner given to
// set_segment_runner (the stage actor's CUDA graph cache: capture once, replay) with a key
// naming the op kind, slot and shape; without one it runs eagerly. Everything that differs
// between micro-batches reaches the segment through the slot's device buffers, uploaded
// before it: tokens, labels, masks, the loss scale, and the dropout keys (seed, layer,
// site, iteration, micro-batch), which the kernels read from device memory when they run.
// So a replayed graph computes exactly what the eager op would
// (layers/device/graph_replay_test.cc).
//
// Gradient accumulation: W adds each micro-batch's weight gradients to the gradient arena
// in call order; W calls must come in F order (every schedule of scheduler/ does; the
// dynamic policy is refused with --device cuda) and an out-of-order W is
// FailedPrecondition. With options.gradient_accumulation_fusion (Megatron's
// --gradient-accumulation-fusion) the 2-D weights' GEMMs accumulate into the arena (beta =
// 1; biases and norm weights still pass through a zeroed temporary); without it each
// gradient goes to a zeroed temporary first and is then added (GptStage's order,
// bit-identical to it).
//
// Not thread-safe: one caller (the stage actor's strand) at a time.
#ifndef MXMACA_LAYERS_DEVICE_DEVICE_GPT_STAGE_H_
#define MXMACA_LAYERS_DEVICE_DEVICE_GPT_STAGE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_config.h"
#include "layers/gpt_parameters.h"
#include "layers/parameter_store.h"
#include "layers/stage_io.h"
#include "layers/transformer_layer.h"

namespace mxmaca::layers::device {

// DeviceStageOptions: what a device stage is sized and built for.
struct DeviceStageOptions {
  int64_t micro_batch_size = 1;  // b of every slot (a micro-batch may use fewer rows)
  int64_t seq_length = 0;        // s of every slot; 0 = config.seq_length
  // Weight GEMMs accumulate straight into the gradient arena (Megatron's
  // --gradient-accumulation-fusion); false = GptStage's temporary-then-add order.
  bool gradient_accumulation_fusion = false;
  // Fused (flash-style) attention: no [b, np, s, s] probabilities in the stash; needs
  // DeviceKernels::has_fused_attention for the head dim (CUDA). false = materialised probabilities
  // (the CPU backend's kernel, GptStage's numerics).
  bool fused_attention = false;
  // arena_multiple: the host and device arenas are padded to a multiple of this many
  // elements (ParameterStore::Finalize: 16 x the data-parallel size for the buckets).
  int64_t arena_multiple = 16;
};

// SegmentInfo: which op's device work a segment is: op "F", "B", "W" or "eval-F", the
// micro-batch slot (its fixed buffer addresses), the shape, and whether document masks
// are on. Two segments with equal info do the same work on the same addresses.
struct SegmentInfo {
  std::string op;
  int slot = 0;
  int64_t b = 0, s = 0;
  bool doc_start = false;
  // ToString: e.g. "F/slot0/b2/s1024" (+ "/doc").
  std::string ToString() const;
};

// SegmentRunner: runs `segment` (device work only) — eagerly, or captured into / replayed
// from a CUDA graph keyed by `info` (layers/device/cuda_graph_runner.h).
using Segment = std::function<absl::Status()>;
using SegmentRunner = std::function<absl::Status(const SegmentInfo& info, const Segment& segment)>;

class DeviceGptStage {
 public:
  // Create: registers the stage's parameters (layers/gpt_parameters.h names and shapes) in
  // a host ParameterStore, initialises them from config.seed (so the weights equal
  // GptStage's), allocates the device arenas and uploads the parameters. `kernels` must
  // outlive the stage. InvalidArgument for an invalid or refused config (see the file
  // comment, naming the flag), options out of range, or fused attention the kernels lack;
  // kResourceExhausted when the device memory does not suffice.
  static absl::StatusOr<std::unique_ptr<DeviceGptStage>> Create(const GptConfig& config,
                                                                const StageLayout& layout,
                                                                DeviceKernels* kernels,
                                                                const DeviceStageOptions& options);
  ~DeviceGptStage();
  DeviceGptStage(const DeviceGptStage&) = delete;
  DeviceGptStage& operator=(const DeviceGptStage&) = delete;

  const GptConfig& config() const { return config_; }
  const StageLayout& layout() const { return layout_; }
  const GptParameterIds& ids() const { return ids_; }
  DeviceKernels& kernels() { return *kernels_; }

  // host_parameters: the host copy (names, shapes, arena layout; values as of the last
  // Upload/Download). Callers that keep master weights on the host (the stage actor's
  // optimizer) write it and call UploadParameters; DownloadGradients fills its grads.
  ParameterStore& host_parameters() { return store_; }
  const ParameterStore& host_parameters() const { return store_; }
  // UploadParameters: host parameter arena -> device (synchronous).
  absl::Status UploadParameters();
  // DownloadParameters / DownloadGradients: device arena -> host arena (synchronous).
  absl::Status DownloadParameters();
  absl::Status DownloadGradients();
  // device_param / device_grad: device pointers of parameter `id` (host_parameters index).
  float* device_param(int id);
  float* device_grad(int id);

  // set_segment_runner: see SegmentRunner; nullptr runs segments eagerly.
  void set_segment_runner(SegmentRunner runner) { runner_ = std::move(runner); }

  // Forward: F of one micro-batch; training keeps its slot until W, eval frees it at once.
  // InvalidArgument for a shape beyond the slots' size, ids out of range or sizes that do
  // not match; FailedPrecondition for a micro_batch_id already in flight.
  absl::Status Forward(const MicroBatchInput& in, bool training, StageOutput* out);
  // BackwardInput: B of micro-batch `micro_batch_id` from d_output [b, s, h] (host; empty
  // on the last stage, which starts from dL/d(loss_sum) = loss_grad_scale). Writes the
  // input gradient [b, s, h] to d_input (host; cleared on the first stage).
  absl::Status BackwardInput(int64_t micro_batch_id, absl::Span<const float> d_output,
                             float loss_grad_scale, std::vector<float>* d_input);
  // BackwardWeight: W: this micro-batch's weight gradients added to the gradient arena;
  // frees its slot. FailedPrecondition when it is not the oldest micro-batch awaiting W.
  absl::Status BackwardWeight(int64_t micro_batch_id);

  // ZeroGrads: the device gradient arena to 0.
  absl::Status ZeroGrads();
  // GradNormSquared: sum of squared gradients over the tensors `counts(id)` selects (fp64;
  // one fp64 partial per tensor, summed on the host in index order). Synchronous.
  absl::StatusOr<double> GradNormSquared(const std::function<bool(int)>& counts);
  // ScaleGrads: every gradient *= factor (loss scaling, clipping; the stage actor's
  // RunStep applies its factors one Scale each). Enqueued.
  absl::Status ScaleGrads(float factor);
  // AdamWStep: torch.optim.AdamW's update of every parameter on the device
  // (layers/optimizer.h; weight decay where ParameterSpec::weight_decay), `step` the
  // 1-based Adam step (bias corrections). Enqueued.
  absl::Status AdamWStep(float lr, float weight_decay, float beta1, float beta2, float eps,
                         int64_t step);

  // slots: how many micro-batch slots exist; slot_bytes: device bytes of one slot.
  int num_slots() const { return static_cast<int>(slots_.size()); }
  int64_t slot_bytes() const { return slot_bytes_; }
  // device_bytes: total device memory the stage holds (arenas, slots, scratch).
  int64_t device_bytes() const;

  struct Slot;  // device buffers of one micro-batch (device_gpt_stage.cc)

 private:
  DeviceGptStage(const GptConfig& config, const StageLayout& layout, DeviceKernels* kernels,
                 const DeviceStageOptions& options);
  absl::Status Init();
  absl::StatusOr<float*> AllocateFloats(int64_t n);
  absl::StatusOr<Slot*> AcquireSlot(int64_t micro_batch_id);
  Slot* FindSlot(int64_t micro_batch_id);
  absl::Status ValidateInput(const MicroBatchInput& in, bool training) const;
  absl::Status RunSegment(const std::string& op, const Slot& slot, const Segment& segment);

  // Device work of each op on one slot (the captured segments).
  // The transformer layers are layers/transformer_layer.h's TransformerLayer, the one
  // implementation GptStage runs too, on this stage's backend, stash and scratch.
  absl::Status ForwardSegment(Slot* slot, bool training);
  absl::Status HeadForward(Slot* slot);
  absl::Status BackwardInputSegment(Slot* slot);
  absl::Status BackwardWeightSegment(Slot* slot);
  bool SelectiveRecompute() const {
    return config_.recompute_granularity == RecomputeGranularity::kSelective;
  }
  // LayerCallFor: local layer i of `slot` as a TransformerLayer call on this backend.
  LayerCall LayerCallFor(const Slot& slot, int local_layer, bool training);
  // Weight-gradient helpers (see "Gradient accumulation").
  absl::Status AccumulateInto(int id, const std::function<absl::Status(float*)>& accumulate);
  class GradSink;  // WeightGradSink over the device gradient arena

  GptConfig config_;
  StageLayout layout_;
  DeviceKernels* kernels_;
  DeviceStageOptions options_;
  int64_t vocab_softmax_ = 0;  // columns in the softmax: V, or VP with the padded option
  ParameterStore store_;
  GptParameterIds ids_;
  std::vector<TransformerLayer> layers_;  // by local layer
  std::vector<void*> allocations_;  // every Allocate, freed in the destructor
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* exp_avg_ = nullptr;
  float* exp_avg_sq_ = nullptr;
  double* norm_partials_ = nullptr;  // [num tensors] fp64
  float* grad_temp_ = nullptr;       // the largest tensor (non-fused accumulation)
  int64_t grad_temp_floats_ = 0;
  float* embed_temp_ = nullptr;      // tied output/embedding gradient of one micro-batch
  float* shared_probs_ = nullptr;    // selective recomputation: every slot's probabilities
  struct Scratch;
  std::unique_ptr<Scratch> scratch_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<int64_t> forward_order_;  // training micro-batches awaiting W, F order
  int64_t slot_bytes_ = 0;
  int64_t arena_bytes_ = 0;
  int64_t scratch_bytes_ = 0;
  SegmentRunner runner_;
  std::vector<float> host_dloss_;
};

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_DEVICE_GPT_STAGE_H_
