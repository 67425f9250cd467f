// layers/chunked_loss_head_test.cc: GptStage's loss head in sequence chunks
// (GptConfig::loss_chunk_tokens, layers/chunked_loss_head.h) against the whole-logits head.
//
// Checked on fresh random batches (two micro-batches, W out of order so one gradient goes
// through the pending buffer), GPT-2-like (tied, LayerNorm) and Llama-like (untied,
// RMSNorm, RoPE):
//   - single device, chunks of 24 and 5 tokens (uneven last chunk) against 0 (never
//     chunk): token losses, eval losses, stage input gradients and every weight gradient
//     within kTol; the chunked peak activation bytes below the unchunked ones by the
//     logits minus one chunk's scratch;
//   - fused Backward against BackwardInput + BackwardWeight with chunks: bit for bit (the
//     same GEMM calls on the same inputs);
//   - TP 2 with and without SP, chunked, against the single-device unchunked head: losses
//     within kTol and the same bits on both TP ranks (the vocab-parallel logsumexp is
//     all-reduced per chunk);
//   - the functions alone: chunk_rows >= T is the unchunked head's arithmetic bit for bit.
//
// Tolerance. Per row the chunked head does the unchunked head's arithmetic; only the
// GEMMs' row counts differ (a chunk of R rows instead of T), which oneDNN may block
// differently, and the output weight gradient sums its T rows in ceil(T/R) chunk partial
// sums. Each logit / gradient element is an h- or T-term fp32 dot product (h = 32, T = 64
// here): a different blocking moves it by at most ~k u sum|terms| (u = 6e-8): ~4e-6
// relative; the three layers' backward compounds a few of these. kTol = 2e-5 of each
// tensor's largest magnitude per element, as layers/gpt_stage_tp_test.cc argues for the
// same kind of reordering; a wrong chunk offset, a missing chunk or a dropped scale gives
// O(1e-2..1) (checked once by giving every chunk the first chunk's dloss).
#include "layers/chunked_loss_head.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gemm.h"
#include "layers/gpt_stage.h"
#include "layers/testing/gpt_test_configs.h"
#include "layers/testing/stage_batches.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers {
namespace {

constexpr double kTol = 2e-5;

GptConfig Gpt2Like() {
  return testing::Gpt2StyleConfig({2, 32, 64, 4, 32, 32, 300, 320}, /*seed=*/99, /*dropout=*/0.1f);
}

GptConfig LlamaLike() { return testing::LlamaStyle(Gpt2Like()); }

using Batch = testing::StageBatch;

Batch MakeBatch(const GptConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::MakeStageBatch(rng, c.vocab_size, 2, c.seq_length);
}

struct Result {
  std::string error;
  std::vector<std::vector<float>> losses;
  std::vector<float> eval_losses;
  int64_t peak = 0;
  std::unique_ptr<GptStage> stage;
};

// Run: F0 F1, then B1 B0 W1 W0 (split) or Backward 1, Backward 0 (fused), then an eval.
void Run(const GptConfig& c, const std::vector<Batch>& batches, bool fused,
         const TensorParallelContext* tp, Result* res) {
  const StageLayout whole{0, c.num_layers, true, true};
  auto created = GptStage::Create(c, whole, 16, tp);
  if (!created.ok()) {
    res->error = created.status().ToString();
    return;
  }
  res->stage = std::move(*created);
  GptStage& st = *res->stage;
  st.InitializeParameters();
  auto input = [&](size_t m) {
    MicroBatchInput in;
    in.micro_batch_id = static_cast<int64_t>(m);
    in.iteration = 2;
    in.micro_batch_size = batches[m].b;
    in.seq_length = batches[m].s;
    in.tokens = batches[m].tokens;
    in.labels = batches[m].labels;
    in.loss_mask = batches[m].mask;
    return in;
  };
  auto fail = [&](const absl::Status& s, const char* what) {
    if (s.ok()) return false;
    res->error = std::string(what) + ": " + s.ToString();
    return true;
  };
  std::vector<double> tokens(batches.size());
  for (size_t m = 0; m < batches.size(); ++m) {
    StageOutput out;
    if (fail(st.Forward(input(m), &out), "Forward")) return;
    res->losses.push_back(out.token_losses);
    tokens[m] = out.num_tokens;
  }
  for (size_t m = batches.size(); m-- > 0;) {
    const float scale = static_cast<float>(1.0 / tokens[m]);
    if (fused) {
      if (fail(st.Backward(m, {}, scale, nullptr), "Backward")) return;
    } else {
      if (fail(st.BackwardInput(m, {}, scale, nullptr), "BackwardInput")) return;
    }
  }
  if (!fused) {
    for (size_t m = batches.size(); m-- > 0;) {
      if (fail(st.BackwardWeight(m), "BackwardWeight")) return;
    }
  }
  res->peak = st.peak_activation_bytes();
  StageOutput eval;
  if (fail(st.EvalForward(input(0), &eval), "EvalForward")) return;
  res->eval_losses = eval.token_losses;
}

bool Close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  if (a.size() != b.size()) {
    UNSCOPED_INFO(what << ": size " << a.size() << " vs " << b.size());
    return false;
  }
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(double(b[i])));
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = std::abs(double(a[i]) - double(b[i]));
    if (d > worst) worst = d, at = i;
  }
  if (worst <= kTol * scale && scale > 0) return true;
  UNSCOPED_INFO(what << ": element " << at << " " << a[at] << " vs " << b[at] << " (max |ref| "
                     << scale << ")");
  return false;
}

std::vector<float> Grad(const GptStage& st, int i) {
  const ParameterStore& p = st.parameters();
  return std::vector<float>(p.grad(i), p.grad(i) + p.info(i).numel);
}

TEST_CASE("chunked loss head matches the whole-logits head on one device") {
  for (const GptConfig& base : {Gpt2Like(), LlamaLike()}) {
    const std::vector<Batch> batches = {MakeBatch(base, 1), MakeBatch(base, 2)};
    GptConfig whole_cfg = base;
    whole_cfg.loss_chunk_tokens = 0;
    Result whole;
    Run(whole_cfg, batches, /*fused=*/false, nullptr, &whole);
    REQUIRE(whole.error.empty());
    for (int64_t chunk : {24, 5}) {
      INFO("swiglu " << base.swiglu << ", chunks of " << chunk << " tokens");
      GptConfig c = base;
      c.loss_chunk_tokens = chunk;
      c.loss_chunk_min_logits_bytes = 0;  // chunk these tiny logits too
      Result split, fused;
      Run(c, batches, false, nullptr, &split);
      Run(c, batches, true, nullptr, &fused);
      REQUIRE(split.error.empty());
      REQUIRE(fused.error.empty());
      for (size_t m = 0; m < batches.size(); ++m) {
        CHECK(Close(split.losses[m], whole.losses[m], "token losses"));
      }
      CHECK(Close(split.eval_losses, whole.eval_losses, "eval losses"));
      const ParameterStore& ps = split.stage->parameters();
      for (int i = 0; i < ps.size(); ++i) {
        INFO(ps.info(i).spec.name);
        CHECK(Close(Grad(*split.stage, i), Grad(*whole.stage, i), "gradient"));
        // Fused B+W recomputes the logits once, split B and W twice: same calls, same bits.
        CHECK(Grad(*fused.stage, i) == Grad(*split.stage, i));
      }
      CHECK(fused.losses == split.losses);
      // Memory: the unchunked stash holds [T, VP] logits ([64, 320] fp32 = 80 KiB per
      // micro-batch, two in flight); the chunked one a [chunk, VP] scratch during a call.
      const int64_t t = batches[0].b * batches[0].s, vp = base.padded_vocab_size;
      CHECK(whole.peak - split.peak >= 2 * t * vp * 4 - 2 * chunk * vp * 4 - 4096);
    }
  }
}

TEST_CASE("chunked loss head under TP 2 (vocab-parallel lse per chunk) matches one device") {
  for (int mode = 0; mode < 4; ++mode) {
    const bool sp = mode % 2 == 1, fused = mode >= 2;
    INFO("sp " << sp << " fused " << fused);
    GptConfig base = Gpt2Like();
    const std::vector<Batch> batches = {MakeBatch(base, 3), MakeBatch(base, 4)};
    GptConfig whole_cfg = base;
    whole_cfg.loss_chunk_tokens = 0;
    Result single;
    Run(whole_cfg, batches, false, nullptr, &single);
    REQUIRE(single.error.empty());
    GptConfig c = base;
    c.loss_chunk_tokens = 24;
    c.loss_chunk_min_logits_bytes = 0;
    const int p = 2;
    transport::InProcessHub hub(p);
    auto grid = transport::RankGrid::Create(p, p, 1);
    REQUIRE(grid.ok());
    std::vector<TensorParallelContext> ctx(p);
    std::vector<Result> ranks(p);
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) {
      auto view = grid->ForRank(r);
      REQUIRE(view.ok());
      ctx[r] = TensorParallelContextFor(*view, hub.ForRank(r), sp);
      ctx[r].timeout = absl::Seconds(60);
      threads.emplace_back([&, r] { Run(c, batches, fused, &ctx[r], &ranks[r]); });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < p; ++r) {
      INFO("TP rank " << r << ": " << ranks[r].error);
      REQUIRE(ranks[r].error.empty());
      for (size_t m = 0; m < batches.size(); ++m) {
        CHECK(Close(ranks[r].losses[m], single.losses[m], "token losses"));
        CHECK(ranks[r].losses[m] == ranks[0].losses[m]);
      }
      CHECK(Close(ranks[r].eval_losses, single.eval_losses, "eval losses"));
      // The final norm's weight gradient is replicated: compare it whole.
      const ParameterStore& ps = ranks[r].stage->parameters();
      const int id = ranks[r].stage->parameter_ids().final_norm_weight;
      CHECK(Close(Grad(*ranks[r].stage, id), Grad(*single.stage, id), "final norm gradient"));
      // The output (= word embedding) weight: rank r holds rows [r VP/2, (r+1) VP/2).
      const int out = ranks[r].stage->parameter_ids().output_weight;
      const std::vector<float> full = Grad(*single.stage, out);
      const int64_t n = ps.info(out).numel;
      CHECK(Close(Grad(*ranks[r].stage, out),
                  std::vector<float>(full.begin() + r * n, full.begin() + (r + 1) * n),
                  "output weight gradient shard"));
    }
  }
}

TEST_CASE("chunked loss head functions: one chunk is the unchunked arithmetic bit for bit") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t t = 37, h = 16, v = 50;
  VocabShard vocab;
  vocab.rows = 64;
  vocab.real = v;
  vocab.softmax = v;
  std::vector<float> x(t * h), w(vocab.rows * h), dloss(t);
  std::vector<int32_t> labels(t);
  for (float& e : x) e = normal(rng);
  for (float& e : w) e = 0.3f * normal(rng);
  for (int64_t i = 0; i < t; ++i) {
    labels[i] = static_cast<int32_t>(rng() % v);
    dloss[i] = (rng() % 4 == 0) ? 0.0f : 0.05f;
  }
  kernels::ExecContext ctx;
  TensorParallelContext tp;
  // Reference: the unchunked head as GptStage computes it.
  std::vector<float> logits(t * vocab.rows), loss(t), lse(t), dx(t * h), dw(vocab.rows * h);
  kernels::cpu::Gemm(ctx, false, true, t, vocab.rows, h, 1.0f, x.data(), h, w.data(), h, 0.0f,
                     logits.data(), vocab.rows);
  kernels::cpu::CrossEntropyForward(ctx, logits.data(), labels.data(), t, vocab.rows, v,
                                    loss.data(), lse.data());
  kernels::cpu::CrossEntropyBackward(ctx, logits.data(), labels.data(), lse.data(), dloss.data(),
                                     t, vocab.rows, v, logits.data());
  kernels::cpu::Gemm(ctx, false, false, t, h, vocab.rows, 1.0f, logits.data(), vocab.rows,
                     w.data(), h, 0.0f, dx.data(), h);
  kernels::cpu::Gemm(ctx, true, false, vocab.rows, h, t, 1.0f, logits.data(), vocab.rows,
                     x.data(), h, 0.0f, dw.data(), h);
  for (int64_t chunk : {t, int64_t{1000}, int64_t{8}}) {
    INFO("chunk " << chunk);
    MemoryTracker tracker;
    std::vector<float> loss2(t), lse2(t), dx2(t * h, 7.0f), dw2(vocab.rows * h, 7.0f);
    REQUIRE(ChunkedLossHeadForward(ctx, tp, vocab, chunk, t, h, x.data(), w.data(),
                                   labels.data(), loss2.data(), lse2.data(), &tracker)
                .ok());
    REQUIRE(ChunkedLossHeadBackward(ctx, tp, vocab, chunk, t, h, x.data(), w.data(),
                                    labels.data(), lse2.data(), dloss.data(), dx2.data(),
                                    nullptr, &tracker)
                .ok());
    REQUIRE(ChunkedLossHeadBackward(ctx, tp, vocab, chunk, t, h, x.data(), w.data(),
                                    labels.data(), lse2.data(), dloss.data(), nullptr,
                                    dw2.data(), &tracker)
                .ok());
    CHECK(tracker.live() == 0);
    CHECK(tracker.peak() == std::min(chunk, t) * vocab.rows * 4);
    if (chunk >= t) {
      CHECK(loss2 == loss);
      CHECK(lse2 == lse);
      CHECK(dx2 == dx);
      CHECK(dw2 == dw);
    } else {
      CHECK(Close(loss2, loss, "loss"));
      CHECK(Close(dx2, dx, "d_x"));
      CHECK(Close(dw2, dw, "d_w"));
    }
  }
  MemoryTracker tracker;
  CHECK(ChunkedLossHeadForward(ctx, tp, vocab, 0, t, h, x.data(), w.data(), labels.data(),
                               loss.data(), lse.data(), &tracker)
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(ChunkedLossHeadBackward(ctx, tp, vocab, 4, t, h, x.data(), w.data(), labels.data(),
                                lse.data(), dloss.data(), nullptr, nullptr, &tracker)
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::layers
