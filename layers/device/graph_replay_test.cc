// layers/device/graph_replay_test.cc: a device GptStage's op segments are safe to capture
// into CUDA graphs — checked without a GPU.
//
// A CUDA graph freezes every kernel argument at capture and replays the same calls on
// the same addresses. ReplayKernels emulates that on the CPU kernels: while a segment is
// being "captured" every kernel call is recorded (its arguments copied) instead of run;
// afterwards the recording is replayed and the segment's own code is never called again,
// exactly as cudaGraphLaunch would. Training through it must give the eager run's losses,
// gradients and parameters bit for bit: every value that changes between micro-batches
// (tokens, labels, the loss scale, the shape, the dropout keys) must reach the segment
// through device buffers uploaded before it, not as an argument — with dropout on, too.
// A control keys the graphs without the slot (so slot 1 replays slot 0's recording, on
// slot 0's buffers): that run differs, which shows the comparison can fail.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "layers/device/cpu_device_kernels.h"
#include "layers/gpt_stage.h"
#include "layers/testing/gpt_test_configs.h"

namespace mxmaca::layers::device {
namespace {

using Thunk = std::function<absl::Status()>;

// ReplayKernels: CpuDeviceKernels whose compute calls are recorded instead of run while
// `recording` is set. Host copies inside a recording are an error (a CUDA graph cannot
// hold them either: the segments must be device-only).
class ReplayKernels : public CpuDeviceKernels {
 public:
  explicit ReplayKernels(const kernels::ExecContext& ctx) : CpuDeviceKernels(ctx) {}
  std::vector<Thunk>* recording = nullptr;

#define MXMACA_RECORD(call)                                       \
  if (recording != nullptr) {                                     \
    recording->push_back([=] { return CpuDeviceKernels::call; }); \
    return absl::OkStatus();                                      \
  }                                                               \
  return CpuDeviceKernels::call

  absl::Status CopyToDevice(void* dst, const void* src, int64_t bytes) override {
    if (recording != nullptr) return absl::FailedPreconditionError("host copy in a segment");
    return CpuDeviceKernels::CopyToDevice(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, int64_t bytes) override {
    if (recording != nullptr) return absl::FailedPreconditionError("host copy in a segment");
    return CpuDeviceKernels::CopyToHost(dst, src, bytes);
  }
  absl::Status Synchronize() override {
    if (recording != nullptr) return absl::FailedPreconditionError("sync in a segment");
    return absl::OkStatus();
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) override {
    MXMACA_RECORD(CopyDeviceToDevice(dst, src, bytes));
  }
  absl::Status Zero(void* p, int64_t bytes) override { MXMACA_RECORD(Zero(p, bytes)); }
  absl::Status Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) override {
    MXMACA_RECORD(Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  }
  absl::Status AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    MXMACA_RECORD(AddBias(y, bias, rows, cols));
  }
  absl::Status BiasGrad(const float* dy, int64_t rows, int64_t cols, float* db) override {
    MXMACA_RECORD(BiasGrad(dy, rows, cols, db));
  }
  absl::Status Add(const float* a, const float* b, float* out, int64_t n) override {
    MXMACA_RECORD(Add(a, b, out, n));
  }
  absl::Status Scale(float* x, int64_t n, float s) override { MXMACA_RECORD(Scale(x, n, s)); }
  absl::Status AddScalar(const float* x, float c, float* y, int64_t n) override {
    MXMACA_RECORD(AddScalar(x, c, y, n));
  }
  absl::Status GeluForward(const float* x, float* y, int64_t n) override {
    MXMACA_RECORD(GeluForward(x, y, n));
  }
  absl::Status GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    MXMACA_RECORD(GeluBackward(x, dy, dx, n));
  }
  absl::Status GeluTanhForward(const float* x, float* y, int64_t n) override {
    MXMACA_RECORD(GeluTanhForward(x, y, n));
  }
  absl::Status GeluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    MXMACA_RECORD(GeluTanhBackward(x, dy, dx, n));
  }
  absl::Status SwigluForward(const float* x, float* y, int64_t rows, int64_t f) override {
    MXMACA_RECORD(SwigluForward(x, y, rows, f));
  }
  absl::Status SwigluBackward(const float* x, const float* dy, float* dx, int64_t rows,
                              int64_t f) override {
    MXMACA_RECORD(SwigluBackward(x, dy, dx, rows, f));
  }
  absl::Status DropoutForward(const float* x, float* y, int64_t n, float p,
                              const kernels::RngKey* key, int64_t offset) override {
    MXMACA_RECORD(DropoutForward(x, y, n, p, key, offset));
  }
  absl::Status DropoutBackward(const float* dy, float* dx, int64_t n, float p,
                               const kernels::RngKey* key, int64_t offset) override {
    MXMACA_RECORD(DropoutBackward(dy, dx, n, p, key, offset));
  }
  absl::Status LayerNormForward(const float* x, const float* g, const float* b, float eps,
                                int64_t n, int64_t h, float* y, float* mean, float* rstd) override {
    MXMACA_RECORD(LayerNormForward(x, g, b, eps, n, h, y, mean, rstd));
  }
  absl::Status LayerNormBackwardInput(const float* dy, const float* x, const float* g,
                                      const float* mean, const float* rstd, int64_t n, int64_t h,
                                      float* dx) override {
    MXMACA_RECORD(LayerNormBackwardInput(dy, x, g, mean, rstd, n, h, dx));
  }
  absl::Status LayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                       const float* rstd, int64_t n, int64_t h, float* dg,
                                       float* db) override {
    MXMACA_RECORD(LayerNormBackwardWeight(dy, x, mean, rstd, n, h, dg, db));
  }
  absl::Status RmsNormForward(const float* x, const float* g, float eps, int64_t n, int64_t h,
                              float* y, float* rstd) override {
    MXMACA_RECORD(RmsNormForward(x, g, eps, n, h, y, rstd));
  }
  absl::Status RmsNormBackwardInput(const float* dy, const float* x, const float* g,
                                    const float* rstd, int64_t n, int64_t h, float* dx) override {
    MXMACA_RECORD(RmsNormBackwardInput(dy, x, g, rstd, n, h, dx));
  }
  absl::Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, int64_t n,
                                     int64_t h, float* dg) override {
    MXMACA_RECORD(RmsNormBackwardWeight(dy, x, rstd, n, h, dg));
  }
  absl::Status VocabShardEmbeddingForward(const int32_t* ids, int64_t n, const float* table,
                                          int64_t start, int64_t rows, int64_t h, float* out,
                                          bool accumulate) override {
    MXMACA_RECORD(VocabShardEmbeddingForward(ids, n, table, start, rows, h, out, accumulate));
  }
  absl::Status VocabShardEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout,
                                           int64_t start, int64_t rows, int64_t h,
                                           float* dtable) override {
    MXMACA_RECORD(VocabShardEmbeddingBackward(ids, n, dout, start, rows, h, dtable));
  }
  absl::Status EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t h,
                                float* out, bool accumulate) override {
    MXMACA_RECORD(EmbeddingForward(ids, n, table, h, out, accumulate));
  }
  absl::Status EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t h,
                                 float* dtable) override {
    MXMACA_RECORD(EmbeddingBackward(ids, n, dout, h, dtable));
  }
  absl::Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n,
                                   int64_t vp, int64_t v, float* loss, float* lse) override {
    MXMACA_RECORD(CrossEntropyForward(logits, targets, n, vp, v, loss, lse));
  }
  absl::Status CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                                    const float* dloss, int64_t n, int64_t vp, int64_t v,
                                    float* dlogits) override {
    MXMACA_RECORD(CrossEntropyBackward(logits, targets, lse, dloss, n, vp, v, dlogits));
  }
  absl::Status SplitQkv(const AttentionDims& d, const float* qkv, float* q, float* k,
                        float* v) override {
    MXMACA_RECORD(SplitQkv(d, qkv, q, k, v));
  }
  absl::Status MergeQkvGrad(const AttentionDims& d, const float* dq, const float* dk,
                            const float* dv, float* dqkv) override {
    MXMACA_RECORD(MergeQkvGrad(d, dq, dk, dv, dqkv));
  }
  absl::Status HeadsToTokens(const AttentionDims& d, const float* o, float* out) override {
    MXMACA_RECORD(HeadsToTokens(d, o, out));
  }
  absl::Status TokensToHeads(const AttentionDims& d, const float* in, float* o) override {
    MXMACA_RECORD(TokensToHeads(d, in, o));
  }
  absl::Status AttentionForward(const AttentionDims& d, const float* q, const float* k,
                                const float* v, const int32_t* doc, float scale, float p,
                                const kernels::RngKey* key, float* probs, float* o) override {
    MXMACA_RECORD(AttentionForward(d, q, k, v, doc, scale, p, key, probs, o));
  }
  absl::Status AttentionBackward(const AttentionDims& d, const float* q, const float* k,
                                 const float* v, const float* probs, const int32_t* doc,
                                 float scale, float p, const kernels::RngKey* key,
                                 const float* dout, float* dq, float* dk, float* dv) override {
    MXMACA_RECORD(AttentionBackward(d, q, k, v, probs, doc, scale, p, key, dout, dq, dk, dv));
  }
  absl::Status RopeForward(float* x, const int32_t* pos, int64_t b, int64_t s, int64_t heads,
                           int64_t d, int64_t rotary_dim,
                           const kernels::RopeFrequencies& f) override {
    MXMACA_RECORD(RopeForward(x, pos, b, s, heads, d, rotary_dim, f));
  }
  absl::Status RopeBackward(float* dx, const int32_t* pos, int64_t b, int64_t s, int64_t heads,
                            int64_t d, int64_t rotary_dim,
                            const kernels::RopeFrequencies& f) override {
    MXMACA_RECORD(RopeBackward(dx, pos, b, s, heads, d, rotary_dim, f));
  }
#undef MXMACA_RECORD
};

// GraphEmulator: the SegmentRunner of a graph cache with one warm-up run: the first run of
// a key is eager, the second is recorded and replayed, later ones only replay.
struct GraphEmulator {
  ReplayKernels* kernels;
  bool ignore_slot = false;  // the control: a key that forgets the slot's addresses
  std::map<std::string, int> runs;
  std::map<std::string, std::vector<Thunk>> graphs;
  int replays = 0;

  absl::Status Run(const SegmentInfo& info, const Segment& segment) {
    SegmentInfo keyed = info;
    if (ignore_slot) keyed.slot = 0;
    const std::string key = keyed.ToString();
    auto it = graphs.find(key);
    if (it == graphs.end()) {
      if (runs[key]++ == 0) return segment();  // warm-up
      std::vector<Thunk> recorded;
      kernels->recording = &recorded;
      const absl::Status captured = segment();
      kernels->recording = nullptr;
      if (!captured.ok()) return captured;
      it = graphs.emplace(key, std::move(recorded)).first;
    } else {
      ++replays;
    }
    for (const Thunk& call : it->second) {
      const absl::Status s = call();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
};

GptConfig Config(float dropout) {
  // Llama's layers (RoPE, RMSNorm, SwiGLU, GQA) with GPT-2's biases and tied embeddings.
  GptConfig c = testing::Gpt2StyleConfig({2, 32, 48, 4, 12, 16, 90, 96}, /*seed=*/5, dropout);
  c.num_query_groups = 2;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.normalization = Normalization::kRmsNorm;
  c.swiglu = true;
  return c;
}

struct Run {
  std::vector<double> losses;
  std::vector<float> params;
  int replays = 0;
};

// Train: 4 iterations of 2 micro-batches (fresh random tokens, labels, masks and a
// per-iteration loss scale), pipelined F F B B W W, then the device AdamW.
Run Train(const GptConfig& c, bool graphs, bool ignore_slot = false) {
  kernels::ExecContext ctx;
  ReplayKernels kernels(ctx);
  DeviceStageOptions opts;
  opts.micro_batch_size = 2;
  auto stage = GptStage::CreateOnDevice(c, StageLayout{0, c.num_layers, true, true}, &kernels, opts);
  REQUIRE(stage.ok());
  GraphEmulator emulator{&kernels, ignore_slot};
  if (graphs) {
    (*stage)->set_segment_runner([&](const SegmentInfo& info, const Segment& segment) {
      return emulator.Run(info, segment);
    });
  }
  Run run;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size) - 1);
  for (int64_t it = 0; it < 4; ++it) {
    std::vector<std::vector<int32_t>> tokens(2), labels(2);
    std::vector<std::vector<float>> masks(2);
    double count = 0.0;
    for (int m = 0; m < 2; ++m) {
      for (int i = 0; i < 24; ++i) {
        tokens[m].push_back(tok(rng));
        labels[m].push_back(tok(rng));
        masks[m].push_back(rng() % 4 == 0 ? 0.0f : 1.0f);
        count += masks[m].back();
      }
      MicroBatchInput in;
      in.micro_batch_id = 2 * it + m;
      in.iteration = it;
      in.micro_batch_size = 2;
      in.seq_length = 12;
      in.tokens = tokens[m];
      in.labels = labels[m];
      in.loss_mask = masks[m];
      StageOutput out;
      REQUIRE((*stage)->Forward(in, &out).ok());
      run.losses.push_back(out.loss_sum);
    }
    std::vector<float> unused;
    for (int m = 0; m < 2; ++m) {
      REQUIRE(
          (*stage)->BackwardInput(2 * it + m, {}, static_cast<float>(1.0 / count), &unused).ok());
    }
    for (int m = 0; m < 2; ++m) REQUIRE((*stage)->BackwardWeight(2 * it + m).ok());
    REQUIRE((*stage)->AdamWStep(1e-2f, 0.01f, 0.9f, 0.999f, 1e-8f, it + 1).ok());
    REQUIRE((*stage)->ZeroGrads().ok());
  }
  REQUIRE((*stage)->DownloadParameters().ok());
  absl::Span<const float> p = (*stage)->parameters().params_arena();
  run.params.assign(p.begin(), p.end());
  run.replays = emulator.replays;
  return run;
}

TEST_CASE("replayed segments (emulated CUDA graphs) give the eager run bit for bit", "[device]") {
  for (const float dropout : {0.0f, 0.2f}) {
    INFO("dropout " << dropout);
    const GptConfig c = Config(dropout);
    const Run eager = Train(c, false);
    const Run replayed = Train(c, true);
    CHECK(replayed.replays > 0);  // F, B and W of both slots replayed from iteration 3 on
    CHECK(replayed.losses == eager.losses);
    CHECK(std::memcmp(replayed.params.data(), eager.params.data(), 4 * eager.params.size()) == 0);
  }
}

TEST_CASE("the control: graphs keyed without the slot replay the wrong buffers", "[device]") {
  const GptConfig c = Config(0.0f);
  const Run eager = Train(c, false);
  const Run wrong = Train(c, true, /*ignore_slot=*/true);
  CHECK(wrong.replays > 0);
  CHECK(wrong.losses != eager.losses);
}

}  // namespace
}  // namespace mxmaca::layers::device
