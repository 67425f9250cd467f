// layers/context_parallel/ring_test_util.cc: see ring_test_util.h.
#include "layers/context_parallel/ring_test_util.h"

#include <random>

#include "kernels/exec_context.h"
#include "layers/context_parallel/cp_layout.h"
#include "layers/context_parallel/ring_attention.h"

namespace mxmaca::layers::cp::testing {

std::vector<float> RandomNormal(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

std::vector<int32_t> RandomDocStarts(int64_t b, int64_t s, int64_t max_len, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> len(1, max_len);
  std::vector<int32_t> ds(b * s);
  for (int64_t bi = 0; bi < b; ++bi) {
    int64_t start = 0;
    while (start < s) {
      const int64_t end = std::min(s, start + len(gen));
      for (int64_t i = start; i < end; ++i) ds[bi * s + i] = static_cast<int32_t>(start);
      start = end;
    }
  }
  return ds;
}

Result RunRing(const Shape& sh, int64_t cp, int64_t tile, const std::vector<float>& q,
               const std::vector<float>& k, const std::vector<float>& v,
               const std::vector<float>& dout, const std::vector<int32_t>& doc_start,
               int num_threads, std::function<int64_t(int64_t, int64_t)> order,
               bool travel) {
  if (!order) order = [cp](int64_t r, int64_t i) { return ((r - i) % cp + cp) % cp; };
  auto layout = MakeCpLayout(sh.s, cp);
  REQUIRE(layout.ok());
  const int64_t sl = layout->LocalSeq();
  RingAttentionConfig cfg;
  cfg.b = sh.b;
  cfg.heads = sh.np;
  cfg.groups = sh.ng;
  cfg.head_dim = sh.hn;
  cfg.layout = *layout;
  cfg.q_tile = tile;
  cfg.kv_tile = tile;
  kernels::ExecContext ctx;
  ctx.num_threads = num_threads;

  // Per-rank local tensors.
  std::vector<std::vector<float>> ql(cp), kl(cp), vl(cp), dol(cp), outl(cp), lsel(cp),
      dql(cp);
  std::vector<std::vector<int32_t>> dsl(cp);
  for (int64_t r = 0; r < cp; ++r) {
    ql[r].resize(sh.b * sh.np * sl * sh.hn);
    dol[r].resize(ql[r].size());
    kl[r].resize(sh.b * sh.ng * sl * sh.hn);
    vl[r].resize(kl[r].size());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.np, sh.hn, q.data(), ql[r].data()).ok());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.np, sh.hn, dout.data(), dol[r].data()).ok());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.ng, sh.hn, k.data(), kl[r].data()).ok());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.ng, sh.hn, v.data(), vl[r].data()).ok());
    if (!doc_start.empty()) {
      dsl[r].resize(sh.b * sl);
      REQUIRE(SliceSequence(*layout, r, sh.b, 1, doc_start.data(), dsl[r].data()).ok());
    }
  }

  auto fwd = RingAttentionForward::Create(cfg);
  REQUIRE(fwd.ok());
  auto bwd = RingAttentionBackward::Create(cfg);
  REQUIRE(bwd.ok());
  for (int64_t r = 0; r < cp; ++r) {
    const int32_t* ds = doc_start.empty() ? nullptr : dsl[r].data();
    REQUIRE((*fwd)->Begin(ctx, r, ql[r].data(), ds).ok());
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t src = order(r, i);
      REQUIRE((*fwd)->Step(ctx, src, kl[src].data(), vl[src].data()).ok());
    }
    outl[r].resize(ql[r].size());
    lsel[r].resize(sh.b * sh.np * sl);
    REQUIRE((*fwd)->Finish(ctx, outl[r].data(), lsel[r].data()).ok());
  }

  // Backward: contributions to block j's dk/dv, either kept per (rank, block) and summed
  // by the owner in rank order, or accumulated in a travelling buffer in ring order.
  std::vector<std::vector<float>> dk_sum(cp, std::vector<float>(kl[0].size(), 0.0f));
  std::vector<std::vector<float>> dv_sum(cp, std::vector<float>(kl[0].size(), 0.0f));
  std::vector<float> dk_part(kl[0].size()), dv_part(kl[0].size());
  for (int64_t r = 0; r < cp; ++r) {
    const int32_t* ds = doc_start.empty() ? nullptr : dsl[r].data();
    REQUIRE((*bwd)->Begin(ctx, r, ql[r].data(), ds, outl[r].data(), dol[r].data(),
                          lsel[r].data())
                .ok());
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t src = order(r, i);
      if (travel) {
        REQUIRE((*bwd)->Step(ctx, src, kl[src].data(), vl[src].data(), dk_sum[src].data(),
                             dv_sum[src].data(), /*accumulate=*/true)
                    .ok());
      } else {
        REQUIRE((*bwd)->Step(ctx, src, kl[src].data(), vl[src].data(), dk_part.data(),
                             dv_part.data())
                    .ok());
        for (size_t e = 0; e < dk_part.size(); ++e) {
          dk_sum[src][e] += dk_part[e];
          dv_sum[src][e] += dv_part[e];
        }
      }
    }
    dql[r].resize(ql[r].size());
    REQUIRE((*bwd)->Finish(ctx, dql[r].data()).ok());
  }

  Result res;
  res.out.resize(q.size());
  res.dq.resize(q.size());
  res.lse.resize(sh.b * sh.np * sh.s);
  res.dk.resize(k.size());
  res.dv.resize(v.size());
  for (int64_t r = 0; r < cp; ++r) {
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.np, sh.hn, outl[r].data(), res.out.data())
                .ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.np, sh.hn, dql[r].data(), res.dq.data())
                .ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.np, 1, lsel[r].data(), res.lse.data()).ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.ng, sh.hn, dk_sum[r].data(), res.dk.data())
                .ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.ng, sh.hn, dv_sum[r].data(), res.dv.data())
                .ok());
  }
  return res;
}

}  // namespace mxmaca::layers::cp::testing
