// layers/context_parallel/ring_attention.h: block-wise causal attention of one
// context-parallel rank's queries against K/V blocks that arrive one at a time around the
// CP ring (ring attention), forward and backward, on CPU in fp32.
//
// Shapes (row-major, fp32): b = micro-batch, np = query heads, ng = key/value groups
// (GQA, np % ng == 0, query head h uses group h / (np/ng) as kernels/cpu/attention.h),
// hn = head dim, s = full sequence, CP = context-parallel size, c = s / (2 CP),
// s_local = 2 c (layers/context_parallel/cp_layout.h: rank r holds global chunks r and
// 2 CP - 1 - r).
//   q, out, dout, dq   [b, np, s_local, hn]   (the rank's own tokens)
//   k, v, dk, dv       [b, ng, s_local, hn]   (the tokens of the block's SOURCE rank)
//   lse                [b, np, s_local]        (natural-log log-sum-exp of scaled scores)
//   doc_start          int32 [b, s_local]      (optional; original positions)
// Maths (Vaswani et al. 2017; FlashAttention-2, Dao 2023, Algorithms 1 and 2):
//   score(i, j) = scale * q_i . k_j   for allowed (i, j), with scale = 1/sqrt(hn);
//   allowed(i, j) <=> pos(j) <= pos(i) and pos(j) >= doc_start(i) (when given)
//   where pos is the ORIGINAL position (--reset-attention-mask: tokens attend only within
//   their document; doc_start as in layers/transformer_layer.h). Then
//   lse_i = log sum_j exp(score(i, j)),  out_i = sum_j exp(score(i, j) - lse_i) v_j.
// The forward keeps, per query row, a running max m, a running sum l and an unnormalised
// accumulator acc; each K/V tile updates them (m' = max(m, rowmax), l' = l e^(m - m') +
// sum e^(score - m'), acc' = acc e^(m - m') + P v); Finish gives out = acc / l and
// lse = m + log l. The backward recomputes P = exp(score - lse) per tile and, with
// D_i = dout_i . out_i: dv_j += P^T dout, dP = dout v^T, dS = P * (dP - D),
// dq += scale dS k, dk_j += scale dS^T q (GQA: a group's dk/dv sum its heads in head order).
//
// Block pairs (TransformerEngine's AttnFuncWithCPAndKVP2P with Megatron's 2-chunk layout):
// at ring step i rank r holds the K/V of rank j = (r - i) mod CP. j == r: causal within
// (chunk r vs r and 2CP-1-r vs 2CP-1-r diagonal, 2CP-1-r vs r full, r vs 2CP-1-r skipped);
// j < r: both local query chunks see only j's first chunk, fully; j > r: only the second
// local query chunk (2CP-1-r) sees both of j's chunks, fully. ClassifyChunkPair states the
// rule per chunk pair; the kernels apply it per (query tile, key tile) from the original
// positions, which gives exactly those pairs and also skips key tiles that lie wholly
// before every query row's document start.
//
// Memory: never an [s, s] or [s_local, s_local] matrix: queries are tiled too, so the
// scratch is O(q_tile * kv_tile) per thread, plus the O(b np s_local hn) accumulators
// (and, in the backward, per-head dk/dv partials of [b, np, s_local, hn]).
// Threads: the forward splits (b, head, query tile) items over ctx.num_threads threads,
// the backward (b, head) items; every item is the same sequence of fp32 operations
// whatever the thread count, so results are bit-identical across thread counts. They do
// depend on the ORDER the K/V blocks arrive in (the online softmax sums in that order),
// at the level of fp32 rounding. Products go through kernels/cpu/gemm.h per tile
// (ctx.precision == kBf16 rounds their inputs to bf16 as the unsharded kernel does).
// No dropout (attention dropout with CP is not supported here; the caller must pass
// attention_dropout = 0 or reject the configuration).
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_RING_ATTENTION_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_RING_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "layers/context_parallel/cp_layout.h"

namespace mxmaca::layers::cp {

// ChunkPairMask: how global query chunk `q_chunk` attends to global key chunk `kv_chunk`
// under the causal mask: kSkip (kv_chunk after q_chunk), kCausal (same chunk: lower
// triangle), kFull (kv_chunk before q_chunk). Document masks can only remove more.
enum class ChunkPairMask { kSkip, kCausal, kFull };
ChunkPairMask ClassifyChunkPair(int64_t q_chunk, int64_t kv_chunk);

// RingAttentionConfig: the static shape of one attention layer on one CP rank.
struct RingAttentionConfig {
  int64_t b = 1;
  int64_t heads = 1;     // np (local query heads, after TP)
  int64_t groups = 1;    // ng (local K/V groups, after TP)
  int64_t head_dim = 1;  // hn
  CpLayout layout;       // s, CP, c (from MakeCpLayout)
  // softmax_scale: 0 means 1/sqrt(hn) (Megatron's default); otherwise used as given.
  float softmax_scale = 0.0f;
  // Tile sizes in tokens (clamped to c); any value >= 1 gives the same maths.
  int64_t q_tile = 128;
  int64_t kv_tile = 128;
};

// RingAttentionForward: one CP rank's forward state for one micro-batch.
//   auto fwd = RingAttentionForward::Create(config);           // allocates accumulators
//   fwd->Begin(ctx, rank, q, doc_start);
//   for each arriving block: fwd->Step(ctx, source_rank, k, v);  // any order, each once
//   fwd->Finish(ctx, out, lse);
// q and doc_start are borrowed from Begin until Finish (not copied); k and v only for
// the duration of Step (the caller may then forward or free the block). The object may
// be reused for the next micro-batch by calling Begin again.
class RingAttentionForward {
 public:
  // Create: validates the config. Errors: InvalidArgument naming the value when b, heads,
  // groups, head_dim, tiles < 1, heads % groups != 0, softmax_scale < 0, or the layout
  // is not one MakeCpLayout accepts.
  static absl::StatusOr<std::unique_ptr<RingAttentionForward>> Create(
      const RingAttentionConfig& config);

  // Begin: starts rank `cp_rank`'s forward with q [b, np, s_local, hn] and doc_start int32
  // [b, s_local] (nullptr: plain causal). Errors: InvalidArgument for a rank outside
  // [0, CP), a null q, or a doc_start value outside [0, pos(i)] (naming b, i and value).
  absl::Status Begin(const kernels::ExecContext& ctx, int64_t cp_rank, const float* q,
                     const int32_t* doc_start);

  // Step: folds in the K/V block of rank `source_rank`, k and v [b, ng, s_local, hn] (the
  // source's own 2 chunks in its local order). Errors: FailedPrecondition without Begin;
  // InvalidArgument for a source outside [0, CP), a null k/v, or a source already seen.
  absl::Status Step(const kernels::ExecContext& ctx, int64_t source_rank, const float* k,
                    const float* v);

  // Finish: writes out [b, np, s_local, hn] and lse [b, np, s_local] (the stash for the
  // backward). Errors: FailedPrecondition without Begin or when some source rank's block
  // has not arrived (naming it) — every source contributes to some query of every rank.
  absl::Status Finish(const kernels::ExecContext& ctx, float* out, float* lse);

  // StateBytes: bytes this object holds (accumulators, 4 (b np s_local (hn + 2)) for a
  // valid config) plus the per-thread tile scratch of `num_threads` threads
  // (4 q_tile kv_tile each), for memory accounting against a per-shard cap. The K/V
  // blocks in flight and q/out are the caller's.
  static int64_t StateBytes(const RingAttentionConfig& config, int num_threads);

  const RingAttentionConfig& config() const { return config_; }

 private:
  explicit RingAttentionForward(const RingAttentionConfig& config) : config_(config) {}

  RingAttentionConfig config_;
  int64_t rank_ = -1;
  const float* q_ = nullptr;
  const int32_t* doc_start_ = nullptr;
  std::vector<bool> seen_;
  std::vector<float> acc_;  // [b, np, s_local, hn]
  std::vector<float> m_;    // [b, np, s_local]
  std::vector<float> l_;    // [b, np, s_local]
};

// RingAttentionBackward: one CP rank's backward state for one micro-batch.
//   auto bwd = RingAttentionBackward::Create(config);
//   bwd->Begin(ctx, rank, q, doc_start, out, dout, lse);
//   for each arriving block: bwd->Step(ctx, source_rank, k, v, dk, dv, accumulate);
//   bwd->Finish(ctx, dq);
// Step returns this rank's contribution to the block's dk, dv: the caller sends it back
// around the ring to the block's owner, which sums the CP contributions. With
// accumulate = true Step adds into dk/dv (a dK/dV buffer that travels with the block and
// collects every rank's contribution, as TransformerEngine does); with false it
// overwrites them. q, doc_start, out, dout and lse are borrowed from Begin until Finish.
class RingAttentionBackward {
 public:
  // Create: as RingAttentionForward::Create.
  static absl::StatusOr<std::unique_ptr<RingAttentionBackward>> Create(
      const RingAttentionConfig& config);

  // Begin: q, out, dout [b, np, s_local, hn], lse [b, np, s_local] from the forward,
  // doc_start as in the forward. Computes D = rowsum(dout * out) and zeroes dq.
  // Errors: as RingAttentionForward::Begin, and InvalidArgument for null out/dout/lse.
  absl::Status Begin(const kernels::ExecContext& ctx, int64_t cp_rank, const float* q,
                     const int32_t* doc_start, const float* out, const float* dout,
                     const float* lse);

  // Step: the block of rank `source_rank` (k, v [b, ng, s_local, hn]); writes (or adds,
  // see above) this rank's dk, dv [b, ng, s_local, hn] for it and accumulates dq.
  // Errors: as RingAttentionForward::Step, and InvalidArgument for null dk/dv.
  absl::Status Step(const kernels::ExecContext& ctx, int64_t source_rank, const float* k,
                    const float* v, float* dk, float* dv, bool accumulate = false);

  // Finish: writes dq [b, np, s_local, hn]. Errors: FailedPrecondition without Begin or
  // when a source rank's block has not arrived.
  absl::Status Finish(const kernels::ExecContext& ctx, float* dq);

  // StateBytes: as RingAttentionForward::StateBytes: D, dq and the per-head dk/dv
  // partials, 4 (b np s_local (3 hn + 1)), plus 2 tile buffers per thread.
  static int64_t StateBytes(const RingAttentionConfig& config, int num_threads);

  const RingAttentionConfig& config() const { return config_; }

 private:
  explicit RingAttentionBackward(const RingAttentionConfig& config) : config_(config) {}

  RingAttentionConfig config_;
  int64_t rank_ = -1;
  const float* q_ = nullptr;
  const int32_t* doc_start_ = nullptr;
  const float* dout_ = nullptr;
  const float* lse_ = nullptr;
  std::vector<bool> seen_;
  std::vector<float> delta_;   // D [b, np, s_local]
  std::vector<float> dq_;      // [b, np, s_local, hn]
  std::vector<float> dk_head_; // per-head dk partials [b, np, s_local, hn]
  std::vector<float> dv_head_; // per-head dv partials [b, np, s_local, hn]
};

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_RING_ATTENTION_H_
