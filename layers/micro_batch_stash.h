// layers/micro_batch_stash.h: what a stage's forward saves for its backward, per
// micro-batch, with exact byte accounting.
//
// docs/ARCHITECTURE.md, "Layers expose F, B and W": each micro-batch in flight on a stage owns one
// MicroBatchStash. F fills it; B (backward-input) consumes the forward tensors it no longer
// needs and adds the output gradients of every linear/norm that W (backward-weight) needs;
// W computes the weight gradients and the stash is dropped. Every buffer is allocated
// through a MemoryTracker, so the stage knows its live and peak activation bytes.
// T = b * s tokens, h = hidden, np/ng = query heads/groups, hn = head dim, f = ffn,
// f1 = width of linear_fc1 (f, or 2f with SwiGLU), VP = padded vocab.
// Tensor parallelism (layers/tensor_parallel.h, p ranks): np, ng, f, f1 and VP below are
// the rank's local widths (np/p, ...); with sequence parallelism the buffers of the
// residual stream (layer input, residual2, norm statistics, d_ln*_out, final_input,
// d_lnf_out) hold b s/p rows, while ln1_out, ln2_out, d_proj, d_fc2, lnf_out and
// d_embedding hold the gathered T rows (what W multiplies with).
#ifndef MXMACA_LAYERS_MICRO_BATCH_STASH_H_
#define MXMACA_LAYERS_MICRO_BATCH_STASH_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::layers {

namespace moe {
struct MoEStash;  // layers/moe/moe_layer.h
}  // namespace moe

// MemoryTracker: live and peak bytes of the stash buffers that report to it, and a cache
// of released blocks so that the next micro-batch reuses them (no page faults, no
// re-zeroing of fresh pages; docs/ARCHITECTURE.md "Messages reference pooled memory"). A released
// block is cached while the cache holds at most peak() bytes; a request takes the smallest
// cached block of at least its size and at most twice it. Counts requested bytes (not
// block sizes). Not thread-safe (one stage, one caller).
class MemoryTracker {
 public:
  MemoryTracker() = default;
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;
  ~MemoryTracker();

  // Acquire: an uninitialised 64-byte-aligned block of >= `bytes`; *capacity = its size.
  void* Acquire(int64_t bytes, int64_t* capacity);
  // Return: gives back a block from Acquire of `bytes` requested, `capacity` held.
  void Return(void* block, int64_t bytes, int64_t capacity);

  // Charge / Discharge: bytes held outside the tracker's blocks (TrackedBytes) that count
  // toward live() and peak() as if they were.
  void Charge(int64_t bytes) {
    if (cap_bytes_ > 0) CheckCap(bytes);
    live_ += bytes;
    if (live_ > peak_) peak_ = live_;
  }
  void Discharge(int64_t bytes) { live_ -= bytes; }

  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }
  void ResetPeak() { peak_ = live_; }
  int64_t cached_bytes() const { return cached_; }

  // SetCap: a cap on live() in bytes (--memory-cap-per-shard; 0 = none), checked by every
  // Acquire and Charge. `shard` names the owner in the error (e.g. "rank 3 (pipeline stage
  // 1, ...)"). The callers of Acquire (StashBuffer::Allocate) have no error path, so an
  // allocation over the cap still happens; the first one is recorded as cap_error() and
  // the owner (GptStage) returns that error from the call in progress (checked after every
  // layer), which ends the run. Only an allocation the machine cannot make at all still
  // fails in operator new.
  void SetCap(int64_t cap_bytes, std::string shard);
  int64_t cap_bytes() const { return cap_bytes_; }
  // set_activity: what the owner is doing, for the error ("the forward of layer 3 of
  // micro-batch 0"): phase (a string literal), global layer (-1: none), micro-batch.
  void set_activity(const char* phase, int64_t layer, int64_t micro_batch) {
    phase_ = phase;
    layer_ = layer;
    micro_batch_ = micro_batch;
  }
  // cap_error: OK, or ResourceExhausted "shard <shard>: allocating <n> bytes for <activity>
  // would use <total> of the <cap>-byte cap (--memory-cap-per-shard; <live> bytes already
  // held)" for the first allocation over the cap (sticky).
  const absl::Status& cap_error() const { return cap_error_; }

  // Block allocation without a tracker (eval, inference).
  static void* NewBlock(int64_t bytes);
  static void DeleteBlock(void* block);

 private:
  int64_t live_ = 0;
  int64_t peak_ = 0;
  int64_t cached_ = 0;
  std::multimap<int64_t, void*> cache_;  // capacity -> block
  // The cap (SetCap) and what the owner is doing (set_activity).
  void CheckCap(int64_t bytes);
  int64_t cap_bytes_ = 0;
  std::string shard_;
  const char* phase_ = "a stage call";
  int64_t layer_ = -1, micro_batch_ = -1;
  absl::Status cap_error_;
};

// BoundOverflow: a bound StashBuffer asked for more than its capacity (a slot planned
// smaller than the layer's stash: a programming error); prints both and aborts.
[[noreturn]] void BoundOverflow(int64_t requested, int64_t capacity);

// StashBuffer: an array of T (uninitialised unless AllocateZeroed) whose bytes are
// reported to a tracker (nullptr: plain allocation, not counted). Move-only; releases on
// destruction.
//
// A BOUND buffer (Bind) is a view of caller-owned memory at a fixed address — a device
// stage's slot (layers/gpt_stage.h "Backends"), whose addresses captured CUDA graphs
// reuse: Allocate then only sets the size (at most the bound capacity; more is a
// programming error and aborts with a message), Free only clears it, and data() is the
// bound address throughout. Nothing is counted by a tracker and nothing is written by the
// buffer itself, so a bound buffer may be device memory the host cannot touch
// (AllocateZeroed is not for bound buffers).
template <typename T>
class StashBuffer {
 public:
  StashBuffer() = default;
  StashBuffer(const StashBuffer&) = delete;
  StashBuffer& operator=(const StashBuffer&) = delete;
  StashBuffer(StashBuffer&& o) noexcept { *this = std::move(o); }
  StashBuffer& operator=(StashBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = o.data_;
      size_ = o.size_;
      capacity_ = o.capacity_;
      tracker_ = o.tracker_;
      bound_ = o.bound_;
      o.data_ = nullptr;
      o.size_ = o.capacity_ = 0;
      o.tracker_ = nullptr;
      o.bound_ = false;
    }
    return *this;
  }
  ~StashBuffer() { Free(); }

  // Bind: makes this a view of `capacity` elements at `fixed` (see the class comment).
  void Bind(T* fixed, int64_t capacity) {
    Free();
    bound_ = true;
    data_ = fixed;
    capacity_ = capacity;
  }
  bool bound() const { return bound_; }
  // Allocate: n elements, contents unspecified (frees what was there first).
  void Allocate(MemoryTracker* tracker, int64_t n) {
    Free();
    if (bound_) {
      if (n > capacity_) BoundOverflow(n, capacity_);
      size_ = n > 0 ? n : 0;
      return;
    }
    if (n <= 0) return;
    tracker_ = tracker;
    size_ = n;
    const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
    if (tracker_ != nullptr) {
      data_ = static_cast<T*>(tracker_->Acquire(bytes, &capacity_));
    } else {
      data_ = static_cast<T*>(MemoryTracker::NewBlock(bytes));
      capacity_ = bytes;
    }
  }
  // AllocateZeroed: n zero elements.
  void AllocateZeroed(MemoryTracker* tracker, int64_t n) {
    Allocate(tracker, n);
    if (n > 0) std::memset(static_cast<void*>(data_), 0, n * sizeof(T));
  }
  void Free() {
    if (bound_) {
      size_ = 0;
      return;
    }
    if (data_ != nullptr) {
      if (tracker_ != nullptr) {
        tracker_->Return(data_, bytes(), capacity_);
      } else {
        MemoryTracker::DeleteBlock(data_);
      }
    }
    data_ = nullptr;
    size_ = capacity_ = 0;
    tracker_ = nullptr;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t bytes() const { return size_ * static_cast<int64_t>(sizeof(T)); }

 private:
  T* data_ = nullptr;
  int64_t size_ = 0;
  int64_t capacity_ = 0;  // bytes held (elements when bound)
  MemoryTracker* tracker_ = nullptr;
  bool bound_ = false;
};

// TrackedBytes: a byte count held elsewhere (the MoE stash's vectors) reported to a
// tracker (MemoryTracker::Charge) while held; Set replaces it, destruction releases it.
// Move-only.
class TrackedBytes {
 public:
  TrackedBytes() = default;
  TrackedBytes(TrackedBytes&& o) noexcept : tracker_(o.tracker_), bytes_(o.bytes_) {
    o.tracker_ = nullptr;
    o.bytes_ = 0;
  }
  TrackedBytes& operator=(TrackedBytes&& o) noexcept {
    if (this != &o) {
      Set(nullptr, 0);
      tracker_ = o.tracker_;
      bytes_ = o.bytes_;
      o.tracker_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  TrackedBytes(const TrackedBytes&) = delete;
  TrackedBytes& operator=(const TrackedBytes&) = delete;
  ~TrackedBytes() { Set(nullptr, 0); }

  // Set: releases the current count and charges `bytes` to `tracker` (nullptr: not counted).
  void Set(MemoryTracker* tracker, int64_t bytes) {
    if (tracker_ != nullptr) tracker_->Discharge(bytes_);
    tracker_ = tracker;
    bytes_ = bytes;
    if (tracker_ != nullptr) tracker_->Charge(bytes_);
  }
  int64_t bytes() const { return bytes_; }

 private:
  MemoryTracker* tracker_ = nullptr;
  int64_t bytes_ = 0;
};

// LayerStash: one transformer layer's saved tensors (fp32 unless noted).
struct LayerStash {
  // Saved by F (freed by B where W does not need them).
  StashBuffer<float> input;               // [T, h] layer input x (also the residual)
  StashBuffer<float> ln1_out;             // [T, h] input_layernorm(x)
  StashBuffer<float> ln1_mean, ln1_rstd;  // [T] (mean only for LayerNorm)
  StashBuffer<float> q;                   // [b, np, s, hn] after RoPE
  StashBuffer<float> k, v;                // [b, ng, s, hn] (k after RoPE)
  // --qk-layernorm: q and k before their norms, the norms' statistics ([b, np|ng, s]) and
  // (saved by B for W) the gradients w.r.t. the norms' outputs.
  StashBuffer<float> q_pre, k_pre, q_mean, q_rstd, k_mean, k_rstd, d_q_norm, d_k_norm;
  StashBuffer<float>
      probs;  // [b, np, s, s] softmax before dropout; absent under selective recompute
  StashBuffer<float> context;             // [T, np hn] attention output, input of linear_proj
  StashBuffer<float> residual2;           // [T, h] x + dropout(linear_proj(...))
  StashBuffer<float> ln2_out;             // [T, h] pre_mlp_layernorm(residual2)
  StashBuffer<float> ln2_mean, ln2_rstd;  // [T]
  StashBuffer<float> fc1_out;             // [T, f1] linear_fc1 output incl. bias (activation input)
  StashBuffer<float> act_out;             // [T, f] GELU / SwiGLU output, input of linear_fc2
  // Saved by B for W: gradients w.r.t. each weight-bearing op's output.
  StashBuffer<float> d_qkv;      // [T, (np + 2 ng) hn]
  StashBuffer<float> d_ln1_out;  // [T, h]
  StashBuffer<float> d_proj;     // [T, h] (before dropout)
  StashBuffer<float> d_ln2_out;  // [T, h]
  StashBuffer<float> d_fc1;      // [T, f1]
  StashBuffer<float> d_fc2;      // [T, h] (before dropout; MoE layers: of the MoE output)
  // MoE layers: the MoELayer's stash (router state, permuted rows, expert activations),
  // kept from F to W, and its size (moe::MoEStashBytes after F and after B) as charged to
  // the layer call's tracker; counted in bytes().
  std::shared_ptr<moe::MoEStash> moe;
  TrackedBytes moe_bytes;

  int64_t bytes() const;
  // FreeAll: every buffer.
  void FreeAll();
  // FreeAllButInput: every buffer except `input` (full recompute keeps only the input).
  void FreeAllButInput();
};

// MicroBatchStash: everything one micro-batch keeps on a stage between F, B and W.
struct MicroBatchStash {
  enum class Phase { kForwardDone, kBackwardInputDone, kWeightGradPending };

  int64_t micro_batch_id = 0;  // global micro-batch id (dropout keys, ordering)
  int64_t iteration = 0;       // dropout keys
  double moe_aux_loss_grad_scale = 1.0;  // MicroBatchInput's, for the MoE layers' B
  int64_t b = 0, s = 0;        // micro-batch size and sequence length
  Phase phase = Phase::kForwardDone;
  int slot = -1;  // a device stage's slot holding this stash (layers/gpt_stage.h); -1: none

  // Inputs kept for B/W (int32 [T]).
  StashBuffer<int32_t> tokens;        // first stage: word-embedding rows (W)
  StashBuffer<int32_t> position_ids;  // first stage with learned positions (W)
  StashBuffer<int32_t> doc_start;     // --reset-attention-mask: [T]; empty = plain causal
  StashBuffer<int32_t> labels;        // last stage [T]
  StashBuffer<float> loss_mask;       // last stage [T]

  // Embedding (first stage): gradient of the embedding sum before dropout, saved by B.
  StashBuffer<float> d_embedding;  // [T, h]

  // Transformer layers, local order.
  std::vector<LayerStash> layers;

  // Loss head (last stage).
  StashBuffer<float> final_input;         // [T, h] output of the last layer
  StashBuffer<float> lnf_out;             // [T, h] final_layernorm output
  StashBuffer<float> lnf_mean, lnf_rstd;  // [T]
  StashBuffer<float> logits;              // [T, VP]; B turns it into dlogits in place (saved for W)
  StashBuffer<float> lse;                 // [T] logsumexp per token
  // Chunked loss head (layers/chunked_loss_head.h, T > GptConfig::loss_chunk_tokens):
  // `logits` stays empty, B and W recompute each chunk's logits from lnf_out and lse (kept
  // until W), W with the loss_grad_scale that B was given.
  bool loss_head_chunked = false;
  float loss_grad_scale = 0.0f;
  StashBuffer<float> d_lnf_out;           // [T, h] saved by B for W

  // The micro-batch's weight gradient when W ran before an earlier micro-batch's W
  // (arena-shaped; added to the grad arena in micro-batch order).
  StashBuffer<float> pending_grads;

  // bytes: all buffers currently held.
  int64_t bytes() const;
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_MICRO_BATCH_STASH_H_
