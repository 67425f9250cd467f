// kernels/cpu/gemm.cc: Gemm and GemmStridedBatched on oneDNN.
//
// Determinism. oneDNN's multi-threaded GEMM may split the k dimension across threads for
// some shapes, which changes the summation order with the thread count. We therefore
// never let oneDNN thread: C is cut into a fixed set of tiles (row blocks of C, or column
// blocks when n > m) that depends only on (m, n, k), and each tile is one
// single-threaded oneDNN call; OpenMP distributes the tiles over ctx.num_threads threads.
// A tile's bits are those of the same single-threaded call whatever thread runs it.
//
// fp32: dnnl_sgemm (row-major, any transposition, alpha/beta).
// bf16: A and B are rounded to bf16 (round-to-nearest-even) into thread_local scratch
// in canonical row-major layouts (A [m, k], B [k, n]), then each tile is a oneDNN matmul
// primitive (src/weights bf16, dst f32, fp32 accumulation) with alpha as an output scale
// and beta as a sum post-op. Primitives are cached per thread by tile shape.
#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "dnnl.hpp"
#include "kernels/cpu/bf16.h"

namespace mxmaca::kernels::cpu {
namespace {

// A tiling of C [m, n]: `count` tiles of `size` rows (split_rows) or columns (the last
// one shorter).
struct Tiling {
  bool split_rows = true;
  int64_t size = 0;
  int64_t count = 1;
};

// Problems below this many multiply-adds run as one tile (thread start-up would cost
// more than it saves).
constexpr int64_t kMinParallelMacs = int64_t{1} << 20;
// At most this many tiles: balances 1, 2 or 4 threads. Every tile re-packs the operand
// it shares with the others (B when splitting rows: k * n elements), a memory-bound cost
// of roughly (tiles * k * n) against the (m * n * k) compute. Measured single-threaded on
// the GPT shapes (shared machine, best of runs): 4 tiles 123-158 GFLOP/s, 16 tiles
// 91-148 GFLOP/s; one tile per call is what dnnl_sgemm alone reaches (~150-165).
constexpr int64_t kMaxTiles = 4;
// Tiles are at least this many rows/columns.
constexpr int64_t kMinTile = 128;

Tiling PlanTiles(int64_t m, int64_t n, int64_t k) {
  Tiling t;
  t.split_rows = m >= n;
  const int64_t dim = t.split_rows ? m : n;
  t.size = dim;
  t.count = 1;
  if (m * n * k < kMinParallelMacs || dim < 2 * kMinTile) return t;
  int64_t count = std::min(kMaxTiles, dim / kMinTile);
  int64_t size = (dim + count - 1) / count;
  size = (size + 15) / 16 * 16;  // multiples of 16 rows/columns (one AVX-512 vector)
  t.size = size;
  t.count = (dim + size - 1) / size;
  return t;
}

void CheckDnnl(dnnl_status_t status, const char* what) {
  if (status != dnnl_success) {
    // A failure here means a shape or layout the caller guaranteed to be valid was
    // rejected: a broken internal invariant, not bad user input.
    std::fprintf(stderr, "mxmaca kernels: %s failed with oneDNN status %d\n", what,
                 static_cast<int>(status));
    std::abort();
  }
}

// ---- fp32 ------------------------------------------------------------------------

// One single-threaded row-major sgemm on a tile; `a`, `b`, `c` already offset.
void SgemmTile(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // dnnl_sgemm handles it, but keep beta == 0 NaN-free semantics explicit
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
      }
    }
    return;
  }
  CheckDnnl(dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                       ldb, beta, c, ldc),
            "dnnl_sgemm");
}

// ---- bf16 ------------------------------------------------------------------------

struct Bf16Key {
  int64_t m, n, k, ldb, ldc;
  uint32_t alpha_bits, beta_bits;
  bool operator<(const Bf16Key& o) const {
    return std::tie(m, n, k, ldb, ldc, alpha_bits, beta_bits) <
           std::tie(o.m, o.n, o.k, o.ldb, o.ldc, o.alpha_bits, o.beta_bits);
  }
};

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

struct DnnlThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // A cached primitive with memory objects whose data handles are set per call.
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory a, b, c;
  };
  std::map<Bf16Key, Entry> cache;
};

DnnlThreadState& ThreadState() {
  thread_local DnnlThreadState state;
  return state;
}

// bf16 tile: C[m, n] (ldc) = alpha * A[m, k] (ld k) · B[k, n] (ld ldb) + beta * C.
void Bf16Tile(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
              const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  DnnlThreadState& st = ThreadState();
  const Bf16Key key{m, n, k, ldb, ldc, Bits(alpha), Bits(beta)};
  auto it = st.cache.find(key);
  if (it == st.cache.end()) {
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc a_md({m, k}, dt::bf16, dnnl::memory::dims{k, 1});
    dnnl::memory::desc b_md({k, n}, dt::bf16, dnnl::memory::dims{ldb, 1});
    dnnl::memory::desc c_md({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, st.engine);
    DnnlThreadState::Entry e{dnnl::matmul(pd), dnnl::memory(a_md, st.engine, nullptr),
                             dnnl::memory(b_md, st.engine, nullptr),
                             dnnl::memory(c_md, st.engine, nullptr)};
    it = st.cache.emplace(key, std::move(e)).first;
  }
  DnnlThreadState::Entry& e = it->second;
  e.a.set_data_handle(const_cast<uint16_t*>(a));
  e.b.set_data_handle(const_cast<uint16_t*>(b));
  e.c.set_data_handle(c);
  e.prim.execute(st.stream, {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
  st.stream.wait();
}

// Rounds op(X) [rows, cols] (X stored with leading dimension ld, transposed when
// `trans`) to bf16 into dst [rows, cols] row-major. Parallel over output rows.
void ConvertToBf16(int num_threads, bool trans, int64_t rows, int64_t cols, const float* x,
                 int64_t ld, uint16_t* dst) {
  if (!trans) {
#pragma omp parallel for num_threads(std::max(num_threads, 1)) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = FloatToBf16(x[r * ld + c]);
    }
  } else {
    // op(X)[r, c] = X[c, r]: walk X's rows in blocks so both sides stay in cache.
    constexpr int64_t kBlock = 32;
#pragma omp parallel for num_threads(std::max(num_threads, 1)) schedule(static)
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock);
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[r * cols + c] = FloatToBf16(x[c * ld + r]);
      }
    }
  }
}

// Thread-local growable scratch for the bf16 copies of A and B.
uint16_t* Scratch(std::vector<uint16_t>& buf, int64_t size) {
  if (static_cast<int64_t>(buf.size()) < size) buf.resize(size);
  return buf.data();
}

// Runs `tile(index)` for index in [0, count) on up to num_threads threads, each with
// OpenMP's thread count forced to 1 so oneDNN never threads inside a tile. With one
// thread no parallel region is opened (the caller's setting is restored afterwards).
template <typename F>
void RunTiles(int num_threads, int64_t count, F tile) {
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_threads, count)));
  if (nt == 1) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int64_t i = 0; i < count; ++i) tile(i);
    omp_set_num_threads(saved);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    omp_set_num_threads(1);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < count; ++i) tile(i);
  }
}

}  // namespace

void Gemm(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  const Tiling t = PlanTiles(m, n, k);
  if (ctx.precision == Precision::kFp32 || k == 0) {
    RunTiles(ctx.num_threads, t.count, [&](int64_t i) {
      const int64_t begin = i * t.size;
      const int64_t len = std::min(t.size, (t.split_rows ? m : n) - begin);
      if (t.split_rows) {
        const float* ai = trans_a ? a + begin : a + begin * lda;
        SgemmTile(trans_a, trans_b, len, n, k, alpha, ai, lda, b, ldb, beta,
                  c + begin * ldc, ldc);
      } else {
        const float* bi = trans_b ? b + begin * ldb : b + begin;
        SgemmTile(trans_a, trans_b, m, len, k, alpha, a, lda, bi, ldb, beta, c + begin, ldc);
      }
    });
    return;
  }
  // bf16: canonical bf16 copies, then tiles.
  thread_local std::vector<uint16_t> a_buf, b_buf;
  uint16_t* a16 = Scratch(a_buf, m * k);
  uint16_t* b16 = Scratch(b_buf, k * n);
  ConvertToBf16(ctx.num_threads, trans_a, m, k, a, lda, a16);
  ConvertToBf16(ctx.num_threads, trans_b, k, n, b, ldb, b16);
  RunTiles(ctx.num_threads, t.count, [&](int64_t i) {
    const int64_t begin = i * t.size;
    const int64_t len = std::min(t.size, (t.split_rows ? m : n) - begin);
    if (t.split_rows) {
      Bf16Tile(len, n, k, alpha, a16 + begin * k, b16, n, beta, c + begin * ldc, ldc);
    } else {
      Bf16Tile(m, len, k, alpha, a16, b16 + begin, n, beta, c + begin, ldc);
    }
  });
}

void GemmStridedBatched(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t m,
                        int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                        int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                        float beta, float* c, int64_t ldc, int64_t stride_c,
                        int64_t batch) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  // Few large items: tile each one (Gemm's fixed tiling). Many items: one
  // single-threaded Gemm per item, items spread over the threads. The choice depends
  // only on the batch size, never on the thread count.
  constexpr int64_t kMinBatchForItemParallel = 4;
  if (batch < kMinBatchForItemParallel) {
    for (int64_t i = 0; i < batch; ++i) {
      Gemm(ctx, trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b,
           ldb, beta, c + i * stride_c, ldc);
    }
    return;
  }
  ExecContext one = ctx;
  one.num_threads = 1;
  RunTiles(ctx.num_threads, batch, [&](int64_t i) {
    Gemm(one, trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
         beta, c + i * stride_c, ldc);
  });
}

}  // namespace mxmaca::kernels::cpu
