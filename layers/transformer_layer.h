// layers/transformer_layer.h: one Megatron-Core GPT transformer layer (pre-norm) with
// separate forward (F), backward-input (B) and backward-weight (W).
//
// Source: megatron/core/transformer/transformer_layer.py (TransformerLayer.forward),
// attention.py (SelfAttention), mlp.py (MLP), with the local spec. T = b * s tokens
// (row t = bi * s + si), h = hidden, np/ng = query heads/groups, hn = head dim,
// f = ffn hidden, f1 = f (GELU) or 2f (SwiGLU, [gate | up]).
//   ln1  = Norm1(x)                                   [T, h]
//   qkv  = ln1 Wqkv^T + bqkv                   [T, (np + 2 ng) hn], per token [ng, np/ng + 2, hn]
//   q, k = RoPE(q), RoPE(k)                           (rope only; positions 0..s-1 in each row)
//   ctx  = softmax(q k^T / sqrt(hn), causal [doc]) v  (attention dropout on the probabilities)
//   x2   = x + dropout(ctx Wproj^T + bproj)            [T, h]
//   ln2  = Norm2(x2)
//   y    = x2 + dropout(act(ln2 W1^T + b1) W2^T + b2)  act = GELU (exact, or tanh
//                                                     approximation) or SwiGLU
// B computes dx from dy and saves, per weight-bearing op, the gradient of its output
// (d_qkv, d_proj, d_fc1, d_fc2 for the linears; d_ln1_out, d_ln2_out for the norms); W
// turns those into weight gradients (dW = dY^T X, dbias = column sums, norm weights).
// Dropout masks are a function of (seed, global layer, site, iteration, micro-batch,
// element index) — see DropoutKey — so recomputation and any layout reproduce them.
//
// Tensor parallelism (layers/tensor_parallel.h): with LayerCall::tp of size p > 1 the
// layer holds TP rank r's shards, LayerCall::config is LocalLayerConfig (np/p heads, ng/p
// groups, f/p ffn: the widths above are the local ones), linear_qkv and linear_fc1 are
// column-parallel (their input gradients all-reduced in B), linear_proj and linear_fc2
// row-parallel (their outputs all-reduced in F, bias added after). With sequence
// parallelism the layer's input/output, residuals, norms and hidden dropout are [b s/p, h]
// (each sequence's positions [r s/p, (r+1) s/p)); the norm outputs are all-gathered before
// the column-parallel linears, the row-parallel outputs reduce-scattered, and the norm
// weight gradients all-reduced in W. Stash: ln1_out, ln2_out, d_proj, d_fc2 are then the
// full [T, h] (gathered), the others local.
//
// Context parallelism (issue 9; layers/context_parallel/cp_context.h): with
// LayerCall::cp_attention set, s is the CP rank's s_local = s / CP tokens (its two chunks
// of the 2 x CP layout), rope_positions and doc_start hold ORIGINAL positions, and the
// core attention is ContextParallelAttention (K/V around the CP ring; forward and
// backward), not the local [s, s] kernel. Its stash keeps the log-sum-exp [b, np, s_local]
// in LayerStash::probs instead of the probabilities (B rebuilds the attention output from
// `context`); selective recompute reruns the ring forward in B on every CP rank alike.
// Everything else is per token and unchanged; with SP the rows are [b s_local/p, h].
// Hidden dropout masks stay keyed by the unsharded [b, s, h] element index (one kernel
// call per run of consecutive original positions), so they do not depend on CP. No
// attention dropout with CP (GptStage::Create rejects it).
#ifndef MXMACA_LAYERS_TRANSFORMER_LAYER_H_
#define MXMACA_LAYERS_TRANSFORMER_LAYER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/exec_context.h"
#include "layers/context_parallel/cp_attention.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_config.h"
#include "layers/gpt_parameters.h"
#include "layers/micro_batch_stash.h"
#include "layers/moe/moe_layer.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"

namespace mxmaca::layers {

// DropoutSite: where a dropout mask is drawn.
enum class DropoutSite : uint64_t {
  kEmbedding = 0,        // embedding output (Megatron's embedding_dropout = hidden_dropout)
  kAttentionProbs = 1,   // attention probabilities (attention_dropout)
  kAttentionOutput = 2,  // after linear_proj, before the residual add (hidden_dropout)
  kMlpOutput = 3,        // after linear_fc2, before the residual add (hidden_dropout)
};

// DropoutKey: RngKey{seed, MakeRngStream(layer + 1, site, iteration, micro_batch_id)} with
// `layer` the GLOBAL layer number (-1 for the embedding); the element index is the
// row-major index in the micro-batch's [b, s, h] (or [b, np, s, s]) tensor.
// LayerDropoutKeyIndex: where a layer's key for `site` sits among its three keys
// (LayerCall::dropout_keys): 0 attention probabilities, 1 attention output, 2 MLP output.
inline int LayerDropoutKeyIndex(DropoutSite site) {
  return site == DropoutSite::kAttentionProbs    ? 0
         : site == DropoutSite::kAttentionOutput ? 1
                                                 : 2;
}

kernels::RngKey DropoutKey(uint64_t seed, int64_t layer, DropoutSite site, int64_t iteration,
                           int64_t micro_batch_id);

// LayerCall: the per-call facts a layer needs.
struct LayerCall {
  const GptConfig* config = nullptr;
  // kernels: the backend every dense computation of the layer runs on (required; not
  // owned). The stash, scratch, parameters and sink buffers are its memory. The TP/SP
  // mappings, the context-parallel ring and the MoE block still address that memory from
  // the host, so with tensor, context or expert parallelism it must be host memory (the
  // CPU backend).
  device::DeviceKernels* kernels = nullptr;
  // ctx: threads and precision of the host-side parts (context-parallel ring, MoE).
  kernels::ExecContext ctx;
  int64_t global_layer = 0;
  int64_t b = 0, s = 0;
  const int32_t* doc_start = nullptr;       // [b, s] or nullptr (plain causal)
  const int32_t* rope_positions = nullptr;  // [b, s] (rope only)
  bool training = true;                     // false: no dropout
  int64_t iteration = 0;
  int64_t micro_batch_id = 0;
  MemoryTracker* tracker = nullptr;  // stash allocation and accounting (nullptr: plain)
  // tp: the TP rank's context (nullptr or size 1: no tensor parallelism). Not owned.
  const TensorParallelContext* tp = nullptr;
  // MoE layers: the aux / z-loss gradient scale (Megatron's MoEAuxLossAutoScaler: the main
  // loss's backward scale, 1 / num_microbatches, or 1 with --calculate-per-token-loss), and
  // where F reports the routing metrics (null: not reported, e.g. a recomputation).
  double moe_aux_loss_grad_scale = 1.0;
  moe::MoEMetrics* moe_metrics = nullptr;
  // cp_attention: context parallelism (see the file comment); nullptr: none. Not owned;
  // every CP rank of the group must make the same sequence of layer calls.
  cp::ContextParallelAttention* cp_attention = nullptr;
  // params: the backend's copy of the parameter arena (ParameterStore arena offsets);
  // nullptr: the store's own (host) arena.
  const float* params = nullptr;
  // dropout_keys: this layer's three dropout keys in backend memory, in
  // LayerDropoutKeyIndex order (DropoutKey of each site), read by the
  // kernels when they run (so a captured CUDA graph replays with the keys the buffer
  // holds then); nullptr: computed on the host per call (host-addressable backends).
  const kernels::RngKey* dropout_keys = nullptr;
  // fused_attention: the backend's fused (flash-style) attention; the stash's `probs`
  // then holds the log-sum-exp [b, np, s] (DeviceKernels::has_fused_attention).
  bool fused_attention = false;
};

// ForwardKeep: what F leaves in the stash.
//   kAll: everything B and W need.
//   kNoProbs: all but the attention probabilities (selective recompute: B recomputes them).
//   kInputOnly: only the layer input (full recompute, eval, inference).
enum class ForwardKeep { kAll, kNoProbs, kInputOnly };

// WeightGradSink: where W writes one micro-batch's weight gradients. Begin(id) returns a
// buffer of the tensor's numel fp32 values, zeroed on the first Begin of the micro-batch
// (later Begins of the same tensor return the same buffer); End(id) folds it into the
// gradient arena (or leaves it pending). Each tensor's gradient for a micro-batch is
// therefore computed on its own and then added to the arena: accumulation order across
// micro-batches is whatever order the End calls (or pending flushes) happen in.
// accumulates(id): Begin(id) returns the gradient arena itself, holding the earlier
// micro-batches' sum (Megatron's --gradient-accumulation-fusion): the caller must ADD this
// micro-batch's gradient (a GEMM with beta = 1). Only for 2-D weights; false by default.
class WeightGradSink {
 public:
  virtual ~WeightGradSink() = default;
  virtual float* Begin(int param_id) = 0;
  virtual void End(int param_id) = 0;
  // status: the first error of the backend work Begin / End enqueued (they have no error
  // path of their own); OK by default.
  virtual absl::Status status() const { return absl::OkStatus(); }
  virtual bool accumulates(int param_id) const {
    (void)param_id;
    return false;
  }
};

// ScratchBuffer: a temporary that grows on the host, or (Bind) a fixed piece of backend
// memory of a planned capacity (a device stage's scratch; asking for more is a
// programming error and aborts with a message, as micro_batch_stash.h BoundOverflow).
class ScratchBuffer {
 public:
  float* Get(int64_t n) {
    if (bound_) {
      if (n > capacity_) BoundOverflow(n, capacity_);
      return fixed_;
    }
    if (static_cast<int64_t>(host_.size()) < n) host_.resize(n);
    return host_.data();
  }
  void Bind(float* fixed, int64_t capacity) {
    bound_ = true;
    fixed_ = fixed;
    capacity_ = capacity;
  }

 private:
  std::vector<float> host_;
  bool bound_ = false;
  float* fixed_ = nullptr;
  int64_t capacity_ = 0;
};

// LayerScratch: temporaries of one layer call (not stashed, reused across calls). Sizes
// (T = b s, tl = local rows, widths local): a <= T max(qkv, h, f, np hn), b, d <= T
// max(np hn, h), c <= tl h, e <= 2 b ng s hn, gamma <= max(h, hn), delta <= b np s.
struct LayerScratch {
  ScratchBuffer a, b, c, d, e;
  ScratchBuffer gamma;  // the 1 + w norm multiplier (--apply-layernorm-1p)
  ScratchBuffer delta;  // the fused attention backward's [b, np, s]
  static float* Get(ScratchBuffer& v, int64_t n) { return v.Get(n); }
};

// TransformerLayer: stateless F/B/W of one layer over the parameters `ids` in `store`.
//
// MoE layers (`moe` non-null; GptConfig::is_moe_layer): the MLP block is the MoELayer
// (layers/moe/moe_layer.h). At expert-parallel size 1, with tensor parallelism every TP
// rank routes all T tokens of the micro-batch (the norm output is whole on every rank:
// gathered with SP) through all experts, so the MoE output, its input gradient and its
// weight gradients are the same on every TP rank (no TP collective; the experts count
// toward the grad norm once, as replicated tensors do); with SP each rank keeps its rows.
// With expert parallelism (EP > 1, expert tensor parallel size 1, the EP group being the
// TP group) and SP, each TP rank routes only its own rows [b s/p, h] and the MoELayer's
// dispatcher moves them to the ranks of their experts (Megatron's layout; EP > 1 with TP
// but without SP is InvalidArgument). Its stash (LayerStash::moe) is charged to the call's
// tracker (LayerStash::moe_bytes) after F and after B, so the measured peak includes it.
class TransformerLayer {
 public:
  TransformerLayer(const ParameterStore* store, const LayerParameterIds& ids,
                   moe::MoELayer* moe = nullptr)
      : store_(store), ids_(ids), moe_(moe) {}

  // Forward: st->input holds x [T, h] ([b s/p, h] with SP); writes y of the same shape
  // to `out` (not aliasing x) and leaves in `st` what `keep` says. Errors: only those of
  // the TP collectives (tensor_parallel.h); none without TP.
  absl::Status Forward(const LayerCall& call, LayerStash* st, float* out, ForwardKeep keep,
                       LayerScratch* scratch) const;

  // BackwardInput: from dy [T, h] writes dx [T, h] (may not alias dy; both [b s/p, h]
  // with SP). Requires the stash
  // of Forward(kAll) or Forward(kNoProbs) (then the probabilities are recomputed from
  // the stashed q, k, v with the same kernel, so results are bit-identical). Frees the
  // forward tensors W does not need and saves the d_* tensors.
  absl::Status BackwardInput(const LayerCall& call, LayerStash* st, const float* dy, float* dx,
                             LayerScratch* scratch) const;

  // BackwardWeight: weight gradients of this micro-batch into `sink` (Begin/End per
  // tensor); frees the whole stash, input included.
  absl::Status BackwardWeight(const LayerCall& call, LayerStash* st, WeightGradSink* sink) const;

 private:
  // P: parameter `id` in the call's backend memory (nullptr for id < 0: absent).
  const float* P(const LayerCall& call, int id) const {
    if (id < 0) return nullptr;
    return call.params != nullptr ? call.params + store_->info(id).arena_offset
                                  : store_->param(id);
  }
  // The MLP block of a MoE layer (see the class comment).
  absl::Status MoEForward(const LayerCall& call, LayerStash* st, float* out, ForwardKeep keep,
                          LayerScratch* scratch) const;
  absl::Status MoEBackwardInput(const LayerCall& call, LayerStash* st,
                                LayerScratch* scratch) const;
  bool MoEOnLocalTokens(const LayerCall& call) const;
  const ParameterStore* store_;
  LayerParameterIds ids_;
  moe::MoELayer* moe_ = nullptr;  // not owned (GptStage)
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_TRANSFORMER_LAYER_H_
