// layers/context_parallel/ring_attention.cc: see ring_attention.h.
#include "layers/context_parallel/ring_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/gemm.h"

namespace mxmaca::layers::cp {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Tile: a run of consecutive local tokens inside one chunk, so their original positions
// are consecutive too: local indices [t0, t0 + n), positions [p0, p0 + n).
struct Tile {
  int64_t t0 = 0, n = 0, p0 = 0;
};

// MakeTiles: rank `rank`'s s_local tokens cut into tiles of at most `tile` tokens that
// never cross its chunk boundary.
std::vector<Tile> MakeTiles(const CpLayout& layout, int64_t rank, int64_t tile) {
  std::vector<Tile> tiles;
  const int64_t c = layout.chunk;
  const int64_t size = std::min(tile, c);
  for (int half = 0; half < 2; ++half) {
    for (int64_t off = 0; off < c; off += size) {
      Tile t;
      t.t0 = half * c + off;
      t.n = std::min(size, c - off);
      t.p0 = layout.GlobalPosition(rank, t.t0);
      tiles.push_back(t);
    }
  }
  return tiles;
}

// QueryTileInfo: a query tile plus the range of its rows' document starts.
struct QueryRows {
  Tile tile;
  const int32_t* lo = nullptr;  // doc_start of its rows, nullptr without documents
  int64_t lo_min = 0, lo_max = 0;
};

QueryRows MakeQueryRows(const Tile& tile, const int32_t* doc_row) {
  QueryRows r;
  r.tile = tile;
  if (doc_row == nullptr) return r;
  r.lo = doc_row + tile.t0;
  r.lo_min = r.lo[0];
  r.lo_max = r.lo[0];
  for (int64_t i = 1; i < tile.n; ++i) {
    r.lo_min = std::min<int64_t>(r.lo_min, r.lo[i]);
    r.lo_max = std::max<int64_t>(r.lo_max, r.lo[i]);
  }
  return r;
}

enum class TileMask { kSkip, kFull, kMasked };

// ClassifyTile: whether keys `kt` are all hidden from, all visible to, or partly visible
// to queries `q` (allowed: pos(j) <= pos(i) and pos(j) >= doc_start(i)).
TileMask ClassifyTile(const QueryRows& q, const Tile& kt) {
  const int64_t q_last = q.tile.p0 + q.tile.n - 1;
  const int64_t k_last = kt.p0 + kt.n - 1;
  if (kt.p0 > q_last) return TileMask::kSkip;
  if (q.lo != nullptr && k_last < q.lo_min) return TileMask::kSkip;
  const bool future = k_last > q.tile.p0;
  const bool before_doc = q.lo != nullptr && kt.p0 < q.lo_max;
  return (future || before_doc) ? TileMask::kMasked : TileMask::kFull;
}

// ApplyMask: scores [q.n, kt.n] (row stride kt.n) of disallowed pairs set to -inf.
void ApplyMask(const QueryRows& q, const Tile& kt, float* scores) {
  for (int64_t i = 0; i < q.tile.n; ++i) {
    const int64_t pi = q.tile.p0 + i;
    const int64_t lo = q.lo != nullptr ? q.lo[i] : 0;
    float* row = scores + i * kt.n;
    for (int64_t j = 0; j < kt.n; ++j) {
      const int64_t pj = kt.p0 + j;
      if (pj > pi || pj < lo) row[j] = kNegInf;
    }
  }
}

// Scratch: two [q_tile, kv_tile] buffers owned by the calling thread (thread_local, grown
// once, shared by the forward (slot 0) and the backward (slots 0 and 1)).
float* ThreadScratch(int64_t n, int slot) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(n);
  return b.data();
}

int ThreadsFor(const kernels::ExecContext& ctx, int64_t items) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(ctx.num_threads, items)));
}

absl::Status ValidateConfig(const RingAttentionConfig& c) {
  const auto positive = [](const char* name, int64_t v) -> absl::Status {
    if (v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring attention: ", name, " must be >= 1, got ", v));
    }
    return absl::OkStatus();
  };
  for (const auto& [name, v] :
       {std::pair<const char*, int64_t>{"b", c.b}, {"heads", c.heads}, {"groups", c.groups},
        {"head_dim", c.head_dim}, {"q_tile", c.q_tile}, {"kv_tile", c.kv_tile}}) {
    absl::Status st = positive(name, v);
    if (!st.ok()) return st;
  }
  if (c.heads % c.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ring attention: heads (", c.heads,
                                                   ") must be a multiple of groups (",
                                                   c.groups, ")"));
  }
  if (!(c.softmax_scale >= 0.0f) || !std::isfinite(c.softmax_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring attention: softmax_scale must be finite and >= 0 (0: 1/sqrt(hn)), got ",
        c.softmax_scale));
  }
  auto layout = MakeCpLayout(c.layout.seq, c.layout.cp_size);
  if (!layout.ok()) return layout.status();
  if (layout->chunk != c.layout.chunk) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring attention: layout chunk ", c.layout.chunk, " != s / (2 CP) = ", layout->chunk,
        " (build the layout with MakeCpLayout)"));
  }
  return absl::OkStatus();
}

float Scale(const RingAttentionConfig& c) {
  return c.softmax_scale > 0.0f ? c.softmax_scale
                                : static_cast<float>(1.0 / std::sqrt(static_cast<double>(
                                                               c.head_dim)));
}

absl::Status CheckRankArg(const RingAttentionConfig& c, int64_t rank, const char* what) {
  if (rank < 0 || rank >= c.layout.cp_size) {
    return absl::InvalidArgumentError(absl::StrCat("ring attention: ", what, " ", rank,
                                                   " is outside [0, ", c.layout.cp_size,
                                                   ")"));
  }
  return absl::OkStatus();
}

// CheckDocStart: 0 <= doc_start[b, t] <= pos(t) for every local token (a token must at
// least see itself, otherwise its softmax would be empty).
absl::Status CheckDocStart(const RingAttentionConfig& c, int64_t rank,
                           const int32_t* doc_start) {
  if (doc_start == nullptr) return absl::OkStatus();
  const int64_t s_local = c.layout.LocalSeq();
  for (int64_t bi = 0; bi < c.b; ++bi) {
    for (int64_t t = 0; t < s_local; ++t) {
      const int64_t v = doc_start[bi * s_local + t];
      const int64_t pos = c.layout.GlobalPosition(rank, t);
      if (v < 0 || v > pos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ring attention: doc_start[", bi, ", ", t, "] = ", v, " on CP rank ", rank,
            " must lie in [0, ", pos, "] (the token's original position)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStep(const RingAttentionConfig& c, int64_t rank,
                       const std::vector<bool>& seen, int64_t source) {
  if (rank < 0) {
    return absl::FailedPreconditionError("ring attention: Step before Begin");
  }
  absl::Status st = CheckRankArg(c, source, "source rank");
  if (!st.ok()) return st;
  if (seen[source]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring attention: the K/V block of source rank ", source,
        " arrived twice on CP rank ", rank));
  }
  return absl::OkStatus();
}

absl::Status CheckAllSeen(const std::vector<bool>& seen, int64_t rank) {
  if (rank < 0) {
    return absl::FailedPreconditionError("ring attention: Finish before Begin");
  }
  for (size_t j = 0; j < seen.size(); ++j) {
    if (!seen[j]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ring attention: Finish on CP rank ", rank, " before the K/V block of source rank ",
          j, " arrived"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ChunkPairMask ClassifyChunkPair(int64_t q_chunk, int64_t kv_chunk) {
  if (kv_chunk > q_chunk) return ChunkPairMask::kSkip;
  if (kv_chunk == q_chunk) return ChunkPairMask::kCausal;
  return ChunkPairMask::kFull;
}

// ---- forward -------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<RingAttentionForward>> RingAttentionForward::Create(
    const RingAttentionConfig& config) {
  absl::Status st = ValidateConfig(config);
  if (!st.ok()) return st;
  std::unique_ptr<RingAttentionForward> f(new RingAttentionForward(config));
  const int64_t rows = config.b * config.heads * config.layout.LocalSeq();
  f->acc_.resize(rows * config.head_dim);
  f->m_.resize(rows);
  f->l_.resize(rows);
  f->seen_.assign(config.layout.cp_size, false);
  return f;
}

int64_t RingAttentionForward::StateBytes(const RingAttentionConfig& c, int num_threads) {
  const int64_t rows = c.b * c.heads * c.layout.LocalSeq();
  const int64_t tile = std::min(c.q_tile, c.layout.chunk) * std::min(c.kv_tile, c.layout.chunk);
  return static_cast<int64_t>(sizeof(float)) *
         (rows * (c.head_dim + 2) + std::max(num_threads, 1) * tile);
}

absl::Status RingAttentionForward::Begin(const kernels::ExecContext& ctx, int64_t cp_rank,
                                         const float* q, const int32_t* doc_start) {
  (void)ctx;
  rank_ = -1;
  absl::Status st = CheckRankArg(config_, cp_rank, "CP rank");
  if (!st.ok()) return st;
  if (q == nullptr) return absl::InvalidArgumentError("ring attention: q is null");
  st = CheckDocStart(config_, cp_rank, doc_start);
  if (!st.ok()) return st;
  rank_ = cp_rank;
  q_ = q;
  doc_start_ = doc_start;
  seen_.assign(config_.layout.cp_size, false);
  std::fill(acc_.begin(), acc_.end(), 0.0f);
  std::fill(m_.begin(), m_.end(), kNegInf);
  std::fill(l_.begin(), l_.end(), 0.0f);
  return absl::OkStatus();
}

absl::Status RingAttentionForward::Step(const kernels::ExecContext& ctx, int64_t source_rank,
                                        const float* k, const float* v) {
  absl::Status st = CheckStep(config_, rank_, seen_, source_rank);
  if (!st.ok()) return st;
  if (k == nullptr || v == nullptr) {
    return absl::InvalidArgumentError("ring attention: k or v is null");
  }
  seen_[source_rank] = true;

  const RingAttentionConfig& c = config_;
  const int64_t s_local = c.layout.LocalSeq();
  const int64_t hn = c.head_dim;
  const int64_t hpg = c.heads / c.groups;
  const float scale = Scale(c);
  const std::vector<Tile> q_tiles = MakeTiles(c.layout, rank_, c.q_tile);
  const std::vector<Tile> kv_tiles = MakeTiles(c.layout, source_rank, c.kv_tile);
  const int64_t nq = static_cast<int64_t>(q_tiles.size());
  const int64_t items = c.b * c.heads * nq;
  const kernels::ExecContext one{nullptr, 1, ctx.precision};

  const auto run_item = [&](int64_t item) {
    const int64_t qt = item % nq;
    const int64_t bh = item / nq;  // bi * np + h
    const int64_t bi = bh / c.heads;
    const int64_t h = bh % c.heads;
    const QueryRows q_rows = MakeQueryRows(
        q_tiles[qt], doc_start_ != nullptr ? doc_start_ + bi * s_local : nullptr);
    const int64_t qn = q_rows.tile.n;
    const int64_t row0 = bh * s_local + q_rows.tile.t0;
    const float* q = q_ + row0 * hn;
    float* acc = acc_.data() + row0 * hn;
    float* m = m_.data() + row0;
    float* l = l_.data() + row0;
    const int64_t kv_base = (bi * c.groups + h / hpg) * s_local * hn;
    float* scores = ThreadScratch(std::min(c.q_tile, c.layout.chunk) *
                                      std::min(c.kv_tile, c.layout.chunk),
                                  0);
    for (const Tile& kt : kv_tiles) {
      const TileMask mask = ClassifyTile(q_rows, kt);
      if (mask == TileMask::kSkip) continue;
      const int64_t kn = kt.n;
      kernels::cpu::Gemm(one, false, true, qn, kn, hn, scale, q, hn,
                         k + kv_base + kt.t0 * hn, hn, 0.0f, scores, kn);
      if (mask == TileMask::kMasked) ApplyMask(q_rows, kt, scores);
      for (int64_t i = 0; i < qn; ++i) {
        float* row = scores + i * kn;
        float mx = kNegInf;
        for (int64_t j = 0; j < kn; ++j) mx = std::max(mx, row[j]);
        const float m_new = std::max(m[i], mx);
        if (m_new == kNegInf) {  // nothing visible yet in this row
          std::fill(row, row + kn, 0.0f);
          continue;
        }
        const float corr = m[i] == kNegInf ? 0.0f : std::exp(m[i] - m_new);
        float sum = 0.0f;
        for (int64_t j = 0; j < kn; ++j) {
          const float p = std::exp(row[j] - m_new);  // exp(-inf) = 0 for masked keys
          row[j] = p;
          sum += p;
        }
        l[i] = l[i] * corr + sum;
        m[i] = m_new;
        if (corr != 1.0f) {
          float* a = acc + i * hn;
          for (int64_t d = 0; d < hn; ++d) a[d] *= corr;
        }
      }
      kernels::cpu::Gemm(one, false, false, qn, hn, kn, 1.0f, scores, kn,
                         v + kv_base + kt.t0 * hn, hn, 1.0f, acc, hn);
    }
  };

  const int nt = ThreadsFor(ctx, items);
  if (nt <= 1) {
    for (int64_t it = 0; it < items; ++it) run_item(it);
  } else {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) run_item(it);
  }
  return absl::OkStatus();
}

absl::Status RingAttentionForward::Finish(const kernels::ExecContext& ctx, float* out,
                                          float* lse) {
  (void)ctx;
  absl::Status st = CheckAllSeen(seen_, rank_);
  if (!st.ok()) return st;
  if (out == nullptr || lse == nullptr) {
    return absl::InvalidArgumentError("ring attention: out or lse is null");
  }
  const int64_t hn = config_.head_dim;
  const int64_t rows = static_cast<int64_t>(m_.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float l = l_[r];
    if (l > 0.0f) {
      const float inv = 1.0f / l;
      for (int64_t d = 0; d < hn; ++d) out[r * hn + d] = acc_[r * hn + d] * inv;
      lse[r] = m_[r] + std::log(l);
    } else {  // unreachable with validated doc_start (every token sees itself)
      std::fill(out + r * hn, out + (r + 1) * hn, 0.0f);
      lse[r] = kNegInf;
    }
  }
  rank_ = -1;
  return absl::OkStatus();
}

// ---- backward ------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<RingAttentionBackward>> RingAttentionBackward::Create(
    const RingAttentionConfig& config) {
  absl::Status st = ValidateConfig(config);
  if (!st.ok()) return st;
  std::unique_ptr<RingAttentionBackward> bwd(new RingAttentionBackward(config));
  const int64_t rows = config.b * config.heads * config.layout.LocalSeq();
  bwd->delta_.resize(rows);
  bwd->dq_.resize(rows * config.head_dim);
  bwd->dk_head_.resize(rows * config.head_dim);
  bwd->dv_head_.resize(rows * config.head_dim);
  bwd->seen_.assign(config.layout.cp_size, false);
  return bwd;
}

int64_t RingAttentionBackward::StateBytes(const RingAttentionConfig& c, int num_threads) {
  const int64_t rows = c.b * c.heads * c.layout.LocalSeq();
  const int64_t tile = std::min(c.q_tile, c.layout.chunk) * std::min(c.kv_tile, c.layout.chunk);
  return static_cast<int64_t>(sizeof(float)) *
         (rows * (3 * c.head_dim + 1) + 2 * std::max(num_threads, 1) * tile);
}

absl::Status RingAttentionBackward::Begin(const kernels::ExecContext& ctx, int64_t cp_rank,
                                          const float* q, const int32_t* doc_start,
                                          const float* out, const float* dout,
                                          const float* lse) {
  (void)ctx;
  rank_ = -1;
  absl::Status st = CheckRankArg(config_, cp_rank, "CP rank");
  if (!st.ok()) return st;
  if (q == nullptr || out == nullptr || dout == nullptr || lse == nullptr) {
    return absl::InvalidArgumentError("ring attention backward: q, out, dout or lse is null");
  }
  st = CheckDocStart(config_, cp_rank, doc_start);
  if (!st.ok()) return st;
  rank_ = cp_rank;
  q_ = q;
  doc_start_ = doc_start;
  dout_ = dout;
  lse_ = lse;
  seen_.assign(config_.layout.cp_size, false);
  const int64_t hn = config_.head_dim;
  const int64_t rows = static_cast<int64_t>(delta_.size());
  for (int64_t r = 0; r < rows; ++r) {
    float d = 0.0f;
    for (int64_t e = 0; e < hn; ++e) d += dout[r * hn + e] * out[r * hn + e];
    delta_[r] = d;
  }
  std::fill(dq_.begin(), dq_.end(), 0.0f);
  return absl::OkStatus();
}

absl::Status RingAttentionBackward::Step(const kernels::ExecContext& ctx,
                                         int64_t source_rank, const float* k, const float* v,
                                         float* dk, float* dv, bool accumulate) {
  absl::Status st = CheckStep(config_, rank_, seen_, source_rank);
  if (!st.ok()) return st;
  if (k == nullptr || v == nullptr || dk == nullptr || dv == nullptr) {
    return absl::InvalidArgumentError("ring attention backward: k, v, dk or dv is null");
  }
  seen_[source_rank] = true;

  const RingAttentionConfig& c = config_;
  const int64_t s_local = c.layout.LocalSeq();
  const int64_t hn = c.head_dim;
  const int64_t hpg = c.heads / c.groups;
  const float scale = Scale(c);
  const std::vector<Tile> q_tiles = MakeTiles(c.layout, rank_, c.q_tile);
  const std::vector<Tile> kv_tiles = MakeTiles(c.layout, source_rank, c.kv_tile);
  const int64_t items = c.b * c.heads;
  const kernels::ExecContext one{nullptr, 1, ctx.precision};
  const int64_t scratch = std::min(c.q_tile, c.layout.chunk) * std::min(c.kv_tile, c.layout.chunk);

  // Item (bi, h): all of head h's query tiles against the block; writes only head h's
  // rows of dq and its own dk/dv partials, so items never share an output.
  const auto run_item = [&](int64_t bh) {
    const int64_t bi = bh / c.heads;
    const int64_t h = bh % c.heads;
    const int64_t kv_base = (bi * c.groups + h / hpg) * s_local * hn;
    float* dk_h = dk_head_.data() + bh * s_local * hn;
    float* dv_h = dv_head_.data() + bh * s_local * hn;
    std::fill(dk_h, dk_h + s_local * hn, 0.0f);
    std::fill(dv_h, dv_h + s_local * hn, 0.0f);
    float* p = ThreadScratch(scratch, 0);
    float* ds = ThreadScratch(scratch, 1);
    for (const Tile& q_tile : q_tiles) {
      const QueryRows q_rows = MakeQueryRows(
          q_tile, doc_start_ != nullptr ? doc_start_ + bi * s_local : nullptr);
      const int64_t qn = q_tile.n;
      const int64_t row0 = bh * s_local + q_tile.t0;
      const float* q = q_ + row0 * hn;
      const float* dout = dout_ + row0 * hn;
      const float* lse = lse_ + row0;
      const float* delta = delta_.data() + row0;
      float* dq = dq_.data() + row0 * hn;
      for (const Tile& kt : kv_tiles) {
        const TileMask mask = ClassifyTile(q_rows, kt);
        if (mask == TileMask::kSkip) continue;
        const int64_t kn = kt.n;
        const float* kb = k + kv_base + kt.t0 * hn;
        const float* vb = v + kv_base + kt.t0 * hn;
        kernels::cpu::Gemm(one, false, true, qn, kn, hn, scale, q, hn, kb, hn, 0.0f, p, kn);
        if (mask == TileMask::kMasked) ApplyMask(q_rows, kt, p);
        for (int64_t i = 0; i < qn; ++i) {
          float* row = p + i * kn;
          if (lse[i] == kNegInf) {
            std::fill(row, row + kn, 0.0f);
            continue;
          }
          for (int64_t j = 0; j < kn; ++j) row[j] = std::exp(row[j] - lse[i]);
        }
        // dv_j += P^T dout
        kernels::cpu::Gemm(one, true, false, kn, hn, qn, 1.0f, p, kn, dout, hn, 1.0f,
                           dv_h + kt.t0 * hn, hn);
        // dP = dout v^T, then dS = P * (dP - D)
        kernels::cpu::Gemm(one, false, true, qn, kn, hn, 1.0f, dout, hn, vb, hn, 0.0f, ds,
                           kn);
        for (int64_t i = 0; i < qn; ++i) {
          const float* prow = p + i * kn;
          float* drow = ds + i * kn;
          for (int64_t j = 0; j < kn; ++j) drow[j] = prow[j] * (drow[j] - delta[i]);
        }
        // dq += scale dS k ; dk_j += scale dS^T q
        kernels::cpu::Gemm(one, false, false, qn, hn, kn, scale, ds, kn, kb, hn, 1.0f, dq,
                           hn);
        kernels::cpu::Gemm(one, true, false, kn, hn, qn, scale, ds, kn, q, hn, 1.0f,
                           dk_h + kt.t0 * hn, hn);
      }
    }
  };

  const int nt = ThreadsFor(ctx, items);
  if (nt <= 1) {
    for (int64_t it = 0; it < items; ++it) run_item(it);
  } else {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) run_item(it);
  }

  // dk/dv of group g: its heads' partials summed in head order (after the caller's value
  // when accumulating). Element-wise, so any split over threads gives the same bits.
  const int64_t group_elems = s_local * hn;
  const int64_t n_groups = c.b * c.groups;
  const int nt2 = ThreadsFor(ctx, n_groups);
#pragma omp parallel for num_threads(nt2) schedule(static) if (nt2 > 1)
  for (int64_t bg = 0; bg < n_groups; ++bg) {
    const int64_t bi = bg / c.groups;
    const int64_t g = bg % c.groups;
    float* dkg = dk + bg * group_elems;
    float* dvg = dv + bg * group_elems;
    if (!accumulate) {
      std::fill(dkg, dkg + group_elems, 0.0f);
      std::fill(dvg, dvg + group_elems, 0.0f);
    }
    for (int64_t hh = 0; hh < hpg; ++hh) {
      const int64_t bh = bi * c.heads + g * hpg + hh;
      const float* dk_h = dk_head_.data() + bh * group_elems;
      const float* dv_h = dv_head_.data() + bh * group_elems;
      for (int64_t e = 0; e < group_elems; ++e) {
        dkg[e] += dk_h[e];
        dvg[e] += dv_h[e];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RingAttentionBackward::Finish(const kernels::ExecContext& ctx, float* dq) {
  (void)ctx;
  absl::Status st = CheckAllSeen(seen_, rank_);
  if (!st.ok()) return st;
  if (dq == nullptr) return absl::InvalidArgumentError("ring attention backward: dq is null");
  std::copy(dq_.begin(), dq_.end(), dq);
  rank_ = -1;
  return absl::OkStatus();
}

}  // namespace mxmaca::layers::cp
