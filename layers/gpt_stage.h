// layers/gpt_stage.h: the part of a Megatron-Core GPT one pipeline stage owns, with
// per-micro-batch forward (F), backward-input (B) and backward-weight (W).
//
// Source: megatron/core/models/gpt/gpt_model.py (GPTModel: LanguageModelEmbedding ->
// TransformerBlock -> final_layernorm -> output_layer -> cross-entropy),
// megatron/core/transformer/transformer_block.py (_checkpointed_forward for
// --recompute-granularity full with --recompute-method uniform|block) and docs/ARCHITECTURE.md
// ("Layers expose F, B and W"; "Order is defined where numerics depend on it").
// A single device is one stage with layers [0, L), has_embedding and has_loss_head.
//
// b = micro-batch size, s = sequence length, T = b s, h = hidden, VP = padded vocab,
// V = real vocab. Token-major layouts: row t = bi * s + si.
//
// Lifecycle of micro-batch m on a stage: Forward(m) -> BackwardInput(m) ->
// BackwardWeight(m) (or Backward(m) = B and W fused layer by layer). Several micro-batches
// may be in flight (pipelining); each owns a MicroBatchStash until its W. Weight
// gradients are added to the gradient arena in the order the micro-batches' Forward calls
// happened (micro-batch order), whatever order their W calls run in: a W that runs early
// keeps its gradient in the stash (pending_grads) until every earlier micro-batch has
// been added. So interleavings such as F1 F2 B1 B2 W2 W1 give bit-identical gradients to
// F1 B1 W1 F2 B2 W2.
//
// Tensor parallelism (layers/tensor_parallel.h): Create with a TensorParallelContext of
// size p > 1 makes this the stage of TP rank r: its parameters are the rank's shards (the
// slices of the single-device tensors), F/B/W call the TP collectives (blocking; every TP
// rank of the stage must run the same F/B/W sequence on the same micro-batches, each on
// its own thread), and the results equal the single-device stage's within fp32 rounding:
// losses identical on every TP rank; gradients of split tensors are the rank's slices,
// gradients of replicated tensors equal on every rank bit for bit. With sequence
// parallelism, hidden/d_output/d_input are [b, s/p, h]: the rank's positions
// [r s/p, (r+1) s/p) of every sequence (tensor_parallel.h). Tokens, labels, loss_mask,
// position_ids and doc_start are always the full [b, s] on every rank.
//
// Context parallelism (layers/context_parallel/cp_context.h): Create with a
// ContextParallelContext of size CP > 1 makes this CP rank r's stage: every [b, s] input
// above is the rank's [b, s_local] slice (s_local = config.seq_length / CP, chunks r and
// 2 CP - 1 - r; cp_batch.h SliceMicroBatchForCpRank), hidden states [b, s_local, h]
// ([b, s_local/p, h] with SP); RoPE, default position ids and doc_start use the original
// positions; attention runs around the CP ring (every CP rank of the group must run the
// same F/B sequence, each on its own thread); StageOutput::loss_sum and num_tokens are
// summed over the CP group (the same on every CP rank; token_losses stay local). Weight
// gradients are this rank's part; the caller sums them over CP (and DP).
//
// Loss head: a last stage whose micro-batch has more than config.loss_chunk_tokens tokens
// (b s, per rank) and whose whole logits would exceed config.loss_chunk_min_logits_bytes
// (GptConfig::chunked_loss_head) computes the output layer and cross-entropy in chunks of
// that many tokens and never holds the whole [T, VP/p] logits (layers/chunked_loss_head.h;
// B and W recompute each chunk's logits); otherwise the logits are kept for B and W.
//
// Backends. Create builds the stage on the CPU backend (device::CpuDeviceKernels over the
// ParameterStore's host arenas and host stashes that grow as needed). CreateOnDevice builds
// the same stage on a given DeviceKernels (CUDA, or the emulated device that CI runs):
// parameters, gradients and AdamW moments in device arenas of the store's layout (the host
// store keeps names, shapes and a copy for checkpoints and a host optimizer:
// UploadParameters / DownloadGradients), and each micro-batch in flight in a SLOT: a
// MicroBatchStash whose buffers are bound (StashBuffer::Bind) to one device allocation
// sized for DeviceStageOptions' micro_batch_size x seq_length, at fixed addresses for the
// slot's lifetime, so each op's device work (a SEGMENT, layers/device/segment_runner.h) can
// be captured into a CUDA graph once and replayed. A micro-batch takes the first free slot
// at F and frees it at W; a new slot is allocated when all are busy (pipeline depth). Each
// op is: host -> device copies of its inputs (tokens, labels, document starts, RoPE
// positions, dropout keys, loss gradients, incoming hidden states), the segment, device ->
// host copies of its outputs, one Synchronize. The F/B/W code is the same for both: the
// CPU backend's copies are memcpy, and on the CPU kernels the device stage reproduces the
// CPU stage bit for bit (layers/device/device_stage_test.cc).
// Tensor (and sequence) parallelism on a device backend: the TP collectives copy their
// device tensors to the host and back (TensorParallelContext::device), and so does the
// vocab-parallel cross-entropy's forward (its logits); no CUDA graphs then.
// On a device backend, not yet (InvalidArgument naming the flag, FailedPrecondition for
// the call): context and expert parallelism and MoE layers (the ring and the MoE block
// address host memory), the chunked loss head (the whole logits are kept),
// and InferenceForward. W out of forward order (the dynamic pipeline) keeps the
// micro-batch's gradient in an arena-sized pending buffer of its slot, as the CPU backend
// keeps it in the stash.
//
// Gradient accumulation on a device: DeviceStageOptions::gradient_accumulation_fusion
// (Megatron's --gradient-accumulation-fusion) makes the 2-D weights' GEMMs accumulate into
// the arena (beta = 1; biases and norms still pass through a zeroed temporary); without it
// each gradient goes to a zeroed temporary first and is then added (the CPU order, bit for
// bit).
//
// Not thread-safe: one caller (the stage actor) at a time.
#ifndef MXMACA_LAYERS_GPT_STAGE_H_
#define MXMACA_LAYERS_GPT_STAGE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/exec_context.h"
#include "layers/context_parallel/cp_attention.h"
#include "layers/context_parallel/cp_context.h"
#include "layers/context_parallel/cp_layout.h"
#include "layers/device/cpu_device_kernels.h"
#include "layers/device/device_kernels.h"
#include "layers/device/segment_runner.h"
#include "layers/gpt_config.h"
#include "layers/gpt_parameters.h"
#include "layers/grad_buckets.h"
#include "layers/micro_batch_stash.h"
#include "layers/modules/embedding.h"
#include "layers/moe/dispatch/token_dispatcher.h"
#include "layers/moe/moe_layer.h"
#include "layers/moe/moe_stats.h"
#include "layers/optimizer.h"
#include "layers/parameter_store.h"
#include "layers/stage_io.h"
#include "layers/tensor_parallel.h"
#include "layers/transformer_layer.h"

namespace mxmaca::layers {

// ExpertParallelContext: this rank's place for expert parallelism (MoE models with
// --expert-model-parallel-size P > 1): the endpoint and the expert_model_parallel group
// its MoE layers' TokenDispatcher uses (layers/moe/dispatch). Not owned.
struct ExpertParallelContext {
  transport::Communicator* comm = nullptr;
  transport::ProcessGroup group;  // RankView::expert_model_parallel_group()
  int ranks_per_node = 1;         // the hierarchical dispatcher's node size
  // With context parallelism: RankView::tensor_and_context_parallel_group(), the token
  // group of MoE layers that route sequence-parallel rows (layers/moe/moe_layer.h).
  std::optional<transport::ProcessGroup> tensor_and_context_parallel_group;
  // When the EP group reaches across data-parallel ranks (EP > TP): the
  // expert_data_parallel group (RankView::expert_data_parallel_group()), over which the
  // experts' gradients are summed instead of the data-parallel group. The stage then puts
  // the routed experts of all its MoE layers in their own arena region after the other
  // tensors (expert_region_begin), outside the data-parallel buckets.
  std::optional<transport::ProcessGroup> expert_data_parallel_group;
};

// DeviceStageOptions: what a stage on a device backend is sized and built for.
struct DeviceStageOptions {
  int64_t micro_batch_size = 1;  // b of every slot (a micro-batch may use fewer rows)
  int64_t seq_length = 0;        // s of every slot; 0 = config.seq_length
  // Weight GEMMs accumulate straight into the gradient arena (Megatron's
  // --gradient-accumulation-fusion); false = the CPU stage's temporary-then-add order.
  bool gradient_accumulation_fusion = false;
  // Fused (flash-style) attention: no [b, np, s, s] probabilities in the stash; needs
  // DeviceKernels::has_fused_attention for the head dim (CUDA). false = materialised
  // probabilities (the CPU backend's kernel and numerics).
  bool fused_attention = false;
  // arena_multiple: the arenas are padded to a multiple of this many elements (16 x the
  // data-parallel size for the buckets, ParameterStore::Finalize).
  int64_t arena_multiple = 16;
};

// GptStage: parameters (ParameterStore under Megatron names) and F/B/W of one stage.
class GptStage {
 public:
  // Create: validates the config and layout (InvalidArgument naming the field), registers
  // and allocates the parameters (zero; call InitializeParameters or load a checkpoint).
  // arena_multiple: the parameter/gradient arenas are padded to a multiple of this many
  // elements (a multiple of 16; data parallelism needs dp * 16, see grad_buckets.h).
  // tp: this stage's TP rank (copied; the communicator must outlive the stage); nullptr
  // or size 1: no tensor parallelism (the single-device code path, bit for bit).
  // InvalidArgument also for a bad context (ValidateTensorParallelContext) or a config
  // that does not split over tp->size ranks (ValidateTensorParallelConfig).
  // ep: required when config.moe has expert_model_parallel_size P > 1 (InvalidArgument
  // otherwise, or when its group is not of P ranks): this rank then holds the experts of
  // its EP rank (the rank's index in ep->group; layers/moe/moe_layer.h), its MoE layers
  // move tokens with a --moe-token-dispatcher-type dispatcher over ep->group, and with
  // sequence parallelism the TP group is their token group (the z-loss coefficient is
  // divided by the TP size, as Megatron does).
  // cp: this stage's CP rank (copied; see the file comment); nullptr or size 1: none.
  // InvalidArgument (naming the flags) for a bad context, a sequence not divisible by
  // 2 x CP (x TP with SP), attention dropout with CP (the ring attention has none; hidden
  // dropout is fine: its masks stay keyed by unsharded positions). MoE layers with CP
  // route their CP rank's tokens with the CP group (or TP x CP with EP and SP, from
  // ep->tensor_and_context_parallel_group) as token group.
  static absl::StatusOr<std::unique_ptr<GptStage>> Create(
      const GptConfig& config, const StageLayout& layout, int64_t arena_multiple = 16,
      const TensorParallelContext* tp = nullptr, const ExpertParallelContext* ep = nullptr,
      const cp::ContextParallelContext* cp = nullptr);

  // CreateOnDevice: the stage on `kernels` (not owned; must outlive the stage; see
  // "Backends"): registers the parameters, initialises them from config.seed (the weights
  // equal Create's + InitializeParameters), allocates the device arenas and uploads them.
  // InvalidArgument for an invalid config, one the device path does not run yet (naming
  // the flag), options out of range, or fused attention the kernels lack;
  // ResourceExhausted when the device memory does not suffice.
  // tp: this stage's TP rank as in Create (nullptr or size 1: none); its collectives pass
  // through host memory (TensorParallelContext::device) with synchronous copies, which a
  // CUDA graph cannot capture: with TP > 1 the segments run eagerly (a segment runner is
  // not used).
  static absl::StatusOr<std::unique_ptr<GptStage>> CreateOnDevice(
      const GptConfig& config, const StageLayout& layout, device::DeviceKernels* kernels,
      const DeviceStageOptions& options, const TensorParallelContext* tp = nullptr);
  ~GptStage();
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;

  // on_device: built by CreateOnDevice. kernels: the backend every computation runs on.
  bool on_device() const { return device_ != nullptr; }
  device::DeviceKernels& kernels() { return *kernels_; }
  const device::DeviceKernels& kernels() const { return *kernels_; }

  // The backend's arenas. On the CPU backend they are the ParameterStore's own and the
  // transfers below are no-ops. UploadParameters: host parameter arena -> backend;
  // DownloadParameters / DownloadGradients: backend -> host arena (each synchronous).
  absl::Status UploadParameters();
  absl::Status DownloadParameters();
  absl::Status DownloadGradients();
  // backend_param / backend_grad: backend pointers of parameter `id`.
  float* backend_param(int id);
  float* backend_grad(int id);
  // ZeroGrads: the backend's gradient arena to 0 (enqueued).
  absl::Status ZeroGrads();
  // GradNormSquared: sum of squared gradients over the tensors `counts(id)` selects
  // (nullptr: all; fp64, one fp64 partial per tensor, summed on the host in index order).
  // Synchronous.
  absl::StatusOr<double> GradNormSquared(const std::function<bool(int)>& counts);
  // ScaleGrads: every gradient *= factor (enqueued).
  absl::Status ScaleGrads(float factor);
  // AdamWStep: torch.optim.AdamW's update of every parameter on the backend
  // (layers/optimizer.h; weight decay where ParameterSpec::weight_decay), `step` the
  // 1-based Adam step; the moments are allocated (zero) by the first call. Enqueued.
  absl::Status AdamWStep(float lr, float weight_decay, float beta1, float beta2, float eps,
                         int64_t step);

  // Training state on the device (docs/CUDA.md "Training state on the device"): the
  // parameters, gradients and AdamW moments stay in the backend's arenas between
  // iterations; the host reads scalars, and whole tensors only for a checkpoint.
  //
  // GradSumSquares: sum of g^2 over `ranges` (elements [begin, end) of the gradient arena,
  // e.g. ShardGradNormRanges): one fp64 SumSquares per range on the backend, added on the
  // host in range order — ShardGradNormSquared's arithmetic for the same ranges, so the
  // emulated device gives the CPU backend's bits. Synchronous. Errors: InvalidArgument for
  // a range outside the arena; the backend's.
  absl::StatusOr<double> GradSumSquares(absl::Span<const GradBucket> ranges);
  // StepOptimizer: `optimizer`'s update (AdamWOptimizer::Step: its tensors, betas, eps,
  // decoupled-lr and weight-decay groups, Adam step optimizer.step() + 1, then
  // optimizer.step() advanced) applied on the backend to its parameters, gradients and
  // moments with kernels' AdamWStep (the same per-element arithmetic). The first call
  // allocates the moments on the backend and uploads the optimizer's (zeros, or a loaded
  // checkpoint's); from then on `optimizer`'s host moments are stale until
  // DownloadOptimizerState. Enqueued. Errors: FailedPrecondition on the CPU backend (its
  // optimizer steps the host store: AdamWOptimizer::Step); InvalidArgument when a tensor
  // of `optimizer` is not a whole tensor of this stage's store (the distributed
  // optimizer's pieces); the backend's (ResourceExhausted for the moments).
  absl::Status StepOptimizer(AdamWOptimizer& optimizer, double lr, double decoupled_lr,
                             double weight_decay);
  // DownloadGradient / UploadGradient: tensor `id`'s gradient backend -> host store, and
  // host store -> backend (synchronous; no-ops on the CPU backend): a gradient reduced on
  // the host (the tied embedding's sum across stages) while the rest stay on the device.
  absl::Status DownloadGradient(int id);
  absl::Status UploadGradient(int id);
  // DownloadOptimizerState: the backend's parameters into the host store and, once
  // StepOptimizer ran, its moments into `optimizer`'s (for a checkpoint). Synchronous.
  absl::Status DownloadOptimizerState(AdamWOptimizer& optimizer);

  // Device backends: set_segment_runner (nullptr runs segments eagerly; see "Backends"),
  // num_slots (slots allocated so far), slot_bytes (device bytes of one slot),
  // device_bytes (arenas, slots and scratch). 0 on the CPU backend.
  void set_segment_runner(device::SegmentRunner runner);
  int num_slots() const;
  int64_t slot_bytes() const;
  int64_t device_bytes() const;

  // holds_expert_shard: tensor `id` is an expert of this rank's EP shard (P > 1), held by
  // no other rank of its EP group: its gradient counts toward the grad norm and it is
  // written to checkpoints on every TP rank.
  bool holds_expert_shard(int id) const { return expert_shard_ids_.count(id) > 0; }

  // Expert region (ExpertParallelContext::expert_data_parallel_group set): the routed
  // experts' tensors occupy arena elements [expert_region_begin(), arena end); the
  // data-parallel buckets cover [0, expert_region_begin()). Without it the begin is the
  // arena end (no region) and expert_data_parallel_rank() is -1.
  int64_t expert_region_begin() const { return expert_region_begin_; }
  int expert_data_parallel_rank() const { return has_expert_region_ ? expert_dp_.rank : -1; }
  bool has_expert_region() const { return has_expert_region_; }
  // AllReduceExpertGrads: sums the expert region's gradients over the expert-data-parallel
  // group (in place; they were scaled like every gradient before the data-parallel sum).
  // No-op without a region or with a group of 1. Errors: the collective's.
  absl::Status AllReduceExpertGrads();
  // ExpertGradNormSquared: the sum of squares of the expert region's gradients on
  // expert-data-parallel rank 0 (each expert counted once in the job), 0 elsewhere.
  double ExpertGradNormSquared();

  const GptConfig& config() const { return config_; }
  const StageLayout& layout() const { return layout_; }
  ParameterStore& parameters() { return store_; }
  const ParameterStore& parameters() const { return store_; }
  const GptParameterIds& parameter_ids() const { return ids_; }
  const TensorParallelContext& tensor_parallel() const { return tp_; }
  // context_parallel / cp_layout: the CP context (size 1 without CP) and the 2 x CP layout
  // of config.seq_length (meaningful when context_parallel().enabled()).
  const cp::ContextParallelContext& context_parallel() const { return cp_; }
  const cp::CpLayout& cp_layout() const { return cp_layout_; }
  // InitializeParameters: every tensor from (config.seed, name, index) (parameter_store.h).
  void InitializeParameters() { store_.Initialize(config_.seed); }

  // Forward: training forward of one micro-batch; keeps its stash (recomputation per
  // config). Output: hidden [b, s, h], or on the last stage token_losses, loss_sum and
  // num_tokens. Errors: InvalidArgument for wrong span sizes or out-of-range ids /
  // positions / labels / doc_start (naming the index and value), or, with SP, a seq_length
  // not divisible by the TP size; AlreadyExists when a stash for micro_batch_id is held;
  // errors of the TP collectives.
  absl::Status Forward(const MicroBatchInput& input, StageOutput* output);

  // BackwardInput: B of micro-batch `micro_batch_id`. Last stage: `loss_grad_scale` =
  // dL / d(sum of masked token losses of this micro-batch) (Megatron default:
  // 1 / (num_tokens * num_microbatches); --calculate-per-token-loss: 1 / global tokens);
  // `d_output` is ignored. Other stages: d_output = dL/d(hidden output) [b, s, h].
  // d_input: resized to [b, s, h] and filled (stages without the embedding); left empty on
  // the first stage. Errors: NotFound (no stash), FailedPrecondition (B already done),
  // InvalidArgument (d_output size).
  absl::Status BackwardInput(int64_t micro_batch_id, absl::Span<const float> d_output,
                             float loss_grad_scale, std::vector<float>* d_input);

  // BackwardWeight: W of the micro-batch: weight gradients added to the gradient arena in
  // micro-batch order (see the file comment); frees the stash once added. Errors:
  // NotFound, FailedPrecondition (B not done yet, or W already done).
  absl::Status BackwardWeight(int64_t micro_batch_id);

  // Backward: B and W fused layer by layer (Megatron's usual backward; each layer's stash
  // is freed as soon as its W ran). Same results, bit for bit, as BackwardInput followed
  // by BackwardWeight.
  absl::Status Backward(int64_t micro_batch_id, absl::Span<const float> d_output,
                        float loss_grad_scale, std::vector<float>* d_input);

  // EvalForward: forward without dropout and without a stash (Megatron's evaluate):
  // hidden or losses as Forward. Same errors as Forward except AlreadyExists.
  absl::Status EvalForward(const MicroBatchInput& input, StageOutput* output);

  // InferenceForward: as EvalForward, but the last stage returns logits [b, VP] of the
  // last position (s - 1) of every row instead of losses (labels not needed); with TP the
  // vocab shards are gathered, so every rank returns the full [b, VP].
  absl::Status InferenceForward(const MicroBatchInput& input, StageOutput* output);

  // Stash accounting (bytes of training MicroBatchStash buffers; temporaries of a call and
  // eval/inference buffers excluded).
  int64_t live_activation_bytes() const { return tracker_.live(); }
  // SetMemoryCap: --memory-cap-per-shard: a cap in bytes (0: none) on this stage's
  // training stash bytes (what live_activation_bytes counts, chunked loss head scratch
  // included). A Forward / BackwardInput / Backward / BackwardWeight whose allocations go
  // over it returns ResourceExhausted "out of memory: shard <shard>: allocating <n> bytes
  // for the forward of layer <l> of micro-batch <m> would use ... of the <cap>-byte cap"
  // (MemoryTracker::SetCap; checked after every layer, so at most one layer's
  // allocations pass the cap) and every later call returns it too. Eval and inference
  // temporaries are not capped. One cap per GptStage: a rank with virtual pipeline stages
  // (several model chunks) caps each chunk separately.
  // On a device backend the cap is on the micro-batch slots' device bytes (slots x
  // slot_bytes, what GptStageProgram reports as the peak): a Forward that needs a new slot
  // beyond it returns ResourceExhausted "out of memory: shard <shard>: allocating <n> bytes
  // for the slot of micro-batch <m> would use ... of the <cap>-byte cap".
  void SetMemoryCap(int64_t cap_bytes, std::string shard);
  int64_t peak_activation_bytes() const { return tracker_.peak(); }
  void ResetPeakActivationBytes() { tracker_.ResetPeak(); }

  // ExpertBiasBuffers: (Megatron's buffer name "decoder.layers.N.mlp.router.expert_bias",
  // the [E] fp32 bias) of this stage's MoE layers with --moe-router-enable-expert-bias, in
  // layer order; empty otherwise. For checkpoints (replicated on every TP and DP rank).
  std::vector<std::pair<std::string, std::vector<float>*>> ExpertBiasBuffers();
  // UpdateExpertBias: Megatron's _update_router_expert_bias (finalize_model_grads), once
  // per training iteration after the last backward: per MoE layer with the bias, the tokens
  // routed to each expert since the last update [E] (fp32), summed by `all_reduce` over
  // the ranks that routed this stage's tokens (TP x DP; every TP rank's copy of the counts
  // scales them alike, which the sign rule ignores), then bias += sign(mean - count) x
  // rate. Errors: the all-reduce's.
  absl::Status UpdateExpertBias(const std::function<absl::Status(float* data, int64_t n)>& all_reduce);

  // TakeMoEStats: the routing statistics of this stage's MoE layers (one entry per MoE
  // layer, in layer order) summed over the training forwards since the last call, and
  // reset. Empty for a dense stage.
  std::vector<moe::MoELayerStats> TakeMoEStats();

 private:
  void AddMoEStats(int64_t local_layer, const moe::MoEMetrics& metrics);

 public:
  int num_stashes() const { return static_cast<int>(stashes_.size()); }
  // StashBytes: bytes held by micro-batch m's stash; NotFound if none.
  absl::StatusOr<int64_t> StashBytes(int64_t micro_batch_id) const;

 private:
  // A run of local layers checkpointed (recomputed in B) or not.
  struct Chunk {
    int begin, end;
    bool recompute;
  };
  enum class Mode { kTrain, kEval, kInference };

  GptStage(const GptConfig& config, const StageLayout& layout, device::DeviceKernels* kernels);
  // CreateOn: Create on `kernels` (nullptr: the CPU backend, owned).
  static absl::StatusOr<std::unique_ptr<GptStage>> CreateOn(
      const GptConfig& config, const StageLayout& layout, int64_t arena_multiple,
      const TensorParallelContext* tp, const ExpertParallelContext* ep,
      const cp::ContextParallelContext* cp, device::DeviceKernels* kernels);

  // ---- device backends (gpt_stage_device.cc): arenas, scratch and slots ----
  struct DeviceState;
  absl::Status InitDevice(const DeviceStageOptions& options);
  const DeviceStageOptions& device_options() const;
  absl::StatusOr<float*> AllocateBackend(int64_t floats);
  // AcquireSlot: the first free slot (a new one when all are busy), its stash reset for
  // a new micro-batch. FindSlot: the busy slot of a micro-batch (nullptr: none).
  absl::StatusOr<MicroBatchStash*> AcquireSlot(int64_t micro_batch_id);
  MicroBatchStash* FindSlot(int64_t micro_batch_id);
  void ReleaseSlot(const MicroBatchStash* st);
  // UploadDropoutKeys: the micro-batch's dropout keys into its slot (training F).
  // SlotDropoutKeys: where local layer `local_layer`'s three keys (-1: the embedding's
  // one) are in the slot of `st`; nullptr on the CPU backend (keys computed per call).
  absl::Status UploadDropoutKeys(MicroBatchStash* st);
  const kernels::RngKey* SlotDropoutKeys(const MicroBatchStash& st, int local_layer) const;
  // The device's per-op buffers (shared by all slots): the RoPE positions [T], the
  // stage's output hidden states [T, h] (also recomputation's discarded output), the
  // token losses [T] and the loss gradient [T].
  const int32_t* DeviceRopePositions() const;
  float* DeviceStageOutput();
  float* DeviceTokenLosses(StageOutput* output);  // output's own vector on the CPU backend
  float* DeviceLossGrad();
  int32_t* DeviceLocalTargets();  // [T] the vocab-parallel cross-entropy's shard targets
  absl::Status RunDeviceSegment(const char* op, const MicroBatchStash& st,
                                const device::Segment& segment);
  class DeviceGradSink;     // WeightGradSink over the device gradient arena
  class DevicePendingSink;  // into the slot's pending buffer (W out of forward order)
  std::unique_ptr<WeightGradSink> MakeDeviceSink(const MicroBatchStash& st, bool direct);
  // DevicePendingGrads: the slot's arena-shaped pending gradient buffer (MakeDeviceSink).
  float* DevicePendingGrads(const MicroBatchStash& st);

  // ---- one op: inputs in, the segment, outputs out ----
  // RunSegment: `segment` (an op's backend work on `st`) through the segment runner on a
  // device backend, directly on the CPU backend.
  absl::Status RunSegment(const char* op, const MicroBatchStash& st,
                          const device::Segment& segment);
  // Upload / Download: host <-> backend copies (memcpy on the CPU backend; skipped when
  // both are the same memory).
  absl::Status Upload(void* dst, const void* src, int64_t bytes);
  absl::Status Download(void* dst, const void* src, int64_t bytes);
  template <typename T>
  absl::Status UploadInto(StashBuffer<T>* dst, MemoryTracker* tracker, absl::Span<const T> src) {
    dst->Allocate(tracker, static_cast<int64_t>(src.size()));
    if (src.empty()) return absl::OkStatus();
    return Upload(dst->data(), src.data(), static_cast<int64_t>(src.size() * sizeof(T)));
  }
  // PrepareRopePositions: the original position of every row of a [b, s] micro-batch
  // where the kernels read them (rope_positions_, or the device's copy).
  absl::Status PrepareRopePositions(int64_t b, int64_t s);
  // HiddenIn: the input buffer of local layer i ([tl, h], allocated in the stash); i = the
  // number of layers: the loss head's input, or `stage_out` without the loss head.
  float* HiddenIn(int i, MicroBatchStash* st, MemoryTracker* tracker, float* stage_out);
  // The segments' bodies: F (embedding, layers, loss head), B (from the loss gradient
  // `dloss` or the incoming gradient already in grad_a; sink: fused B+W).
  absl::Status ForwardCompute(const MicroBatchInput& in, Mode mode, MicroBatchStash* st,
                              StageOutput* output, float* x0, float* stage_out);
  absl::Status HeadForward(const MicroBatchInput& in, Mode mode, MicroBatchStash* st,
                           StageOutput* output);
  absl::Status BackwardCompute(MicroBatchStash* st, const float* dloss, float* grad_a,
                               float* grad_b, WeightGradSink* sink);
  absl::Status ValidateInput(const MicroBatchInput& input, Mode mode) const;
  absl::Status RunForward(const MicroBatchInput& input, Mode mode, MicroBatchStash* st,
                          StageOutput* output);
  absl::Status RunBackward(int64_t micro_batch_id, absl::Span<const float> d_output,
                           float loss_grad_scale, std::vector<float>* d_input, bool fused);
  LayerCall MakeCall(const MicroBatchStash& st, int local_layer, bool training);
  absl::Status RecomputeChunk(const Chunk& chunk, MicroBatchStash* st);
  absl::Status EmbeddingForward(const MicroBatchStash& st, bool training, float* x0);
  // EmbeddingDropoutKey: where the kernels read the embedding's dropout key (the slot's,
  // or `host` filled here). StageDropoutBackward: the embedding dropout's backward.
  const kernels::RngKey* EmbeddingDropoutKey(const MicroBatchStash& st,
                                             kernels::RngKey* host) const;
  absl::Status StageDropoutBackward(const float* dy, float* dx, const MicroBatchStash& st,
                                    kernels::RngKey* host_key);
  // HeadBackwardInput: the loss head's B; with a chunked head and fused_sink (fused B+W)
  // also the output weight's gradient. HeadBackwardWeight: its W (output_weight_done:
  // that gradient was already added by HeadBackwardInput).
  absl::Status HeadBackwardInput(MicroBatchStash* st, const float* dloss, float* d_final_input,
                                 WeightGradSink* fused_sink = nullptr);
  absl::Status HeadBackwardWeight(MicroBatchStash* st, WeightGradSink* sink,
                                  bool output_weight_done = false);
  absl::Status EmbeddingBackwardWeight(MicroBatchStash* st, WeightGradSink* sink);
  // VocabRowsOf: this rank's word-embedding rows (sharded with tensor parallelism).
  modules::VocabRows VocabRowsOf() const;
  // local_tokens: rows of this rank's hidden states: b s, or b s/p with SP.
  int64_t local_tokens(int64_t b, int64_t s) const { return tp_.sp() ? b * (s / tp_.size) : b * s; }
  // Position: the original position of local sequence index i (i itself without CP).
  int64_t Position(int64_t i) const {
    return cp_.enabled() ? cp_layout_.GlobalPosition(cp_.rank, i) : i;
  }
  // EnsureCpAttention: with CP, the ring attention object for micro-batch size b.
  absl::Status EnsureCpAttention(int64_t b);
  // Adds the stash's pending gradient (if any) to the arena and retires flushed stashes
  // in micro-batch order. Errors: the backend's add.
  absl::Status RetireInOrder();
  // RetireWeightGrads: after the W of `st`: retired (direct: it was the oldest) or pending.
  absl::Status RetireWeightGrads(MicroBatchStash* st, bool direct);
  std::unique_ptr<WeightGradSink> MakeSink(MicroBatchStash* st, bool direct);
  // Stash lookup and release over the host map or the device slots.
  MicroBatchStash* FindStash(int64_t micro_batch_id);
  void ReleaseStash(int64_t micro_batch_id);

  GptConfig config_;
  GptConfig layer_config_;  // LocalLayerConfig(config_, tp size): what the layers see
  StageLayout layout_;
  TensorParallelContext tp_;  // size 1 without tensor parallelism
  cp::ContextParallelContext cp_;  // size 1 without context parallelism
  cp::CpLayout cp_layout_;
  std::unique_ptr<cp::ContextParallelAttention> cp_attention_;  // for micro-batch size cp_b_
  int64_t cp_b_ = 0;
  VocabShard vocab_;          // this rank's rows of the padded vocabulary
  kernels::ExecContext ctx_;
  // The backend everything computes on: CreateOnDevice's, or the CPU instance
  // (owned_kernels_, ctx_'s threads and precision).
  device::DeviceKernels* kernels_ = nullptr;
  std::unique_ptr<device::CpuDeviceKernels> owned_kernels_;
  std::unique_ptr<DeviceState> device_;  // device backends only
  // The backend's parameter and gradient arenas (the store's own on the CPU backend).
  float* params_ = nullptr;
  float* grads_ = nullptr;
  // AllocateMoments: exp_avg_ / exp_avg_sq_ on the backend, zeroed (once).
  absl::Status AllocateMoments();
  // OptimizerTensorOffsets: the arena offset of each of `optimizer`'s tensors, which must
  // be whole tensors of the store (StepOptimizer's InvalidArgument otherwise).
  absl::StatusOr<std::vector<int64_t>> OptimizerTensorOffsets(const AdamWOptimizer& optimizer);
  float* exp_avg_ = nullptr;  // AdamWStep's moments (allocated by its first call)
  float* exp_avg_sq_ = nullptr;
  bool moments_from_optimizer_ = false;  // StepOptimizer uploaded an optimizer's moments
  std::vector<double> host_norm_partials_;
  std::vector<void*> backend_allocations_;  // AllocateBackend's, freed by the destructor
  ScratchBuffer gamma_scratch_;             // the final norm's 1 + w (--apply-layernorm-1p)
  ParameterStore store_;
  GptParameterIds ids_;
  std::vector<TransformerLayer> layers_;
  // MoE layers (null for dense layers), by local layer, and their statistics.
  std::vector<std::unique_ptr<moe::MoELayer>> moe_layers_;
  std::vector<moe::MoELayerStats> moe_stats_;
  std::unique_ptr<moe::dispatch::TokenDispatcher> dispatcher_;  // EP > 1
  // The MoE layers' token group (MoETokenGroup), as a context for AllReduceSum: TP, CP or
  // TP x CP; size 1 when the tokens are not split.
  TensorParallelContext moe_token_group_;
  // Expert region (has_expert_region_): its first arena element and the expert-data-
  // parallel group as a context for AllReduceSum.
  bool has_expert_region_ = false;
  int64_t expert_region_begin_ = 0;
  TensorParallelContext expert_dp_;
  std::set<int> expert_shard_ids_;                              // EP > 1
  std::vector<Chunk> chunks_;
  MemoryTracker tracker_;       // training stashes (live/peak reported)
  MemoryTracker eval_tracker_;  // eval/inference temporaries: pooled, not reported
  std::map<int64_t, std::unique_ptr<MicroBatchStash>> stashes_;
  std::deque<int64_t> forward_order_;  // micro-batches whose W is not yet in the arena
  std::vector<int32_t> rope_positions_;
  const int32_t* rope_backend_ = nullptr;  // PrepareRopePositions' result
  LayerScratch scratch_;
  ScratchBuffer grad_a_, grad_b_;    // B's gradient between layers
  ScratchBuffer recompute_discard_;  // a recomputed chunk's output (CPU backend)
  // Sequence parallelism: a full [T, h] and a local [T/p, h] temporary (the embedding sum
  // before its scatter, the output layer's partial input gradient; the final norm's local
  // output, the embedding's local gradient).
  ScratchBuffer sp_full_, sp_local_;
  std::vector<float> dloss_;                   // the last stage's dL/d(token loss), host
  std::vector<std::vector<float>> sink_pool_;  // reusable per-tensor gradient buffers
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_GPT_STAGE_H_
