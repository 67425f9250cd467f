// layers/modules/modules_test.cc: the modules give the same bits on the CPU backend and on
// the emulated device (memory the host cannot touch: a module that read or wrote device
// memory outside the interface would fault here), and equal the kernels/cpu calls they are
// made of; the zero-centred norm equals the plain norm with gamma = 1 + w formed on the host.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "layers/device/cpu_device_kernels.h"
#include "layers/device/emulated_device_kernels.h"
#include "layers/modules/embedding.h"
#include "layers/modules/linear.h"
#include "layers/modules/norm.h"

namespace mxmaca::layers::modules {
namespace {

using device::CpuDeviceKernels;
using device::EmulatedDeviceKernels;

uint32_t FreshSeed() { return std::random_device{}(); }

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Device: buffers on the emulated device, filled from and read back to host vectors.
class Device {
 public:
  Device() : k_(kernels::ExecContext{}) {}
  ~Device() {
    for (void* p : owned_) k_.Free(p);
  }
  template <typename T>
  T* Up(const std::vector<T>& host) {
    absl::StatusOr<void*> p = k_.Allocate(static_cast<int64_t>(host.size() * sizeof(T)));
    REQUIRE(p.ok());
    owned_.push_back(*p);
    REQUIRE(k_.CopyToDevice(*p, host.data(), host.size() * sizeof(T)).ok());
    return static_cast<T*>(*p);
  }
  std::vector<float> Down(const float* d, size_t n) {
    std::vector<float> host(n);
    REQUIRE(k_.CopyToHost(host.data(), d, n * sizeof(float)).ok());
    REQUIRE(k_.Synchronize().ok());
    return host;
  }
  EmulatedDeviceKernels& k() { return k_; }

 private:
  EmulatedDeviceKernels k_;
  std::vector<void*> owned_;
};

GptConfig NormConfig(Normalization n, bool one_p) {
  GptConfig c;
  c.normalization = n;
  c.norm_epsilon = 1e-5f;
  c.apply_layernorm_1p = one_p;
  return c;
}

TEST_CASE("Norm: CPU backend = emulated device = kernels/cpu with gamma = (1 +) w") {
  const uint32_t seed = FreshSeed();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 13, h = 40;
  const auto x = Random(n * h, rng), w = Random(h, rng), b = Random(h, rng),
             dy = Random(n * h, rng);
  CpuDeviceKernels cpu_k(kernels::ExecContext{});
  for (Normalization kind : {Normalization::kLayerNorm, Normalization::kRmsNorm}) {
    for (bool one_p : {false, true}) {
      INFO("layer norm " << (kind == Normalization::kLayerNorm) << ", 1p " << one_p);
      const Norm norm(NormConfig(kind, one_p));
      const float* bias = norm.has_bias() ? b.data() : nullptr;
      std::vector<float> y(n * h), mean(n), rstd(n), dx(n * h), dg(h, 0.0f), db(h, 0.0f);
      std::vector<float> scratch(static_cast<size_t>(std::max<int64_t>(norm.scratch_floats(h), 1)));
      REQUIRE(norm.Forward(cpu_k, x.data(), w.data(), bias, n, h, y.data(), mean.data(),
                           rstd.data(), scratch.data())
                  .ok());
      REQUIRE(norm.BackwardInput(cpu_k, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), n,
                                 h, dx.data(), scratch.data())
                  .ok());
      REQUIRE(norm.BackwardWeight(cpu_k, dy.data(), x.data(), mean.data(), rstd.data(), n, h,
                                  dg.data(), norm.has_bias() ? db.data() : nullptr)
                  .ok());
      // Reference: kernels/cpu with the multiplier formed on the host.
      std::vector<float> gamma = w;
      if (one_p) {
        for (float& g : gamma) g = 1.0f + g;
      }
      std::vector<float> ry(n * h), rmean(n), rrstd(n), rdx(n * h);
      const kernels::ExecContext ctx;
      if (kind == Normalization::kLayerNorm) {
        kernels::cpu::LayerNormForward(ctx, x.data(), gamma.data(), bias, 1e-5f, n, h, ry.data(),
                                       rmean.data(), rrstd.data());
        kernels::cpu::LayerNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), rmean.data(),
                                             rrstd.data(), n, h, rdx.data());
      } else {
        kernels::cpu::RmsNormForward(ctx, x.data(), gamma.data(), 1e-5f, n, h, ry.data(),
                                     rrstd.data());
        kernels::cpu::RmsNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), rrstd.data(), n,
                                           h, rdx.data());
      }
      CHECK(SameBits(y, ry));
      CHECK(SameBits(dx, rdx));
      // The same module on the emulated device.
      Device dev;
      float* dyp = dev.Up(std::vector<float>(n * h));
      float* dmean = dev.Up(std::vector<float>(n));
      float* drstd = dev.Up(std::vector<float>(n));
      float* ddx = dev.Up(std::vector<float>(n * h));
      float* ddg = dev.Up(std::vector<float>(h, 0.0f));
      float* ddb = dev.Up(std::vector<float>(h, 0.0f));
      float* dscratch = dev.Up(std::vector<float>(h));
      const float* dxin = dev.Up(x);
      const float* dw = dev.Up(w);
      const float* dbias = norm.has_bias() ? dev.Up(b) : nullptr;
      const float* ddy = dev.Up(dy);
      REQUIRE(norm.Forward(dev.k(), dxin, dw, dbias, n, h, dyp, dmean, drstd, dscratch).ok());
      REQUIRE(norm.BackwardInput(dev.k(), ddy, dxin, dw, dmean, drstd, n, h, ddx, dscratch).ok());
      REQUIRE(norm.BackwardWeight(dev.k(), ddy, dxin, dmean, drstd, n, h, ddg,
                                  norm.has_bias() ? ddb : nullptr)
                  .ok());
      CHECK(SameBits(dev.Down(dyp, n * h), y));
      CHECK(SameBits(dev.Down(ddx, n * h), dx));
      CHECK(SameBits(dev.Down(ddg, h), dg));
      if (norm.has_bias()) CHECK(SameBits(dev.Down(ddb, h), db));
    }
  }
  // The zero-centred gamma needs its scratch: refused by name without it.
  const Norm one_p(NormConfig(Normalization::kRmsNorm, true));
  std::vector<float> y(n * h), rstd(n);
  const absl::Status s = one_p.Forward(cpu_k, x.data(), w.data(), nullptr, n, h, y.data(), nullptr,
                                       rstd.data(), nullptr);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("--apply-layernorm-1p") != std::string::npos);
}

TEST_CASE("Linear: CPU backend = emulated device = kernels/cpu GEMMs; accumulate adds") {
  const uint32_t seed = FreshSeed();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  const int64_t t = 9, in = 24, out = 17;
  const auto x = Random(t * in, rng), w = Random(out * in, rng), bias = Random(out, rng),
             dy = Random(t * out, rng), dw0 = Random(out * in, rng);
  CpuDeviceKernels cpu_k(kernels::ExecContext{});
  std::vector<float> y(t * out), dx(t * in), dw(out * in), db(out), dwa = dw0;
  REQUIRE(LinearForward(cpu_k, x.data(), w.data(), bias.data(), t, in, out, y.data()).ok());
  REQUIRE(LinearBackwardInput(cpu_k, dy.data(), w.data(), t, in, out, dx.data()).ok());
  REQUIRE(LinearBackwardWeight(cpu_k, dy.data(), x.data(), t, in, out, dw.data(), db.data()).ok());
  REQUIRE(
      LinearBackwardWeight(cpu_k, dy.data(), x.data(), t, in, out, dwa.data(), nullptr, true).ok());
  const kernels::ExecContext ctx;
  std::vector<float> ry(t * out), rdx(t * in), rdw(out * in), rdwa = dw0;
  kernels::cpu::Gemm(ctx, false, true, t, out, in, 1.0f, x.data(), in, w.data(), in, 0.0f,
                     ry.data(), out);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t c = 0; c < out; ++c) ry[r * out + c] += bias[c];
  }
  kernels::cpu::Gemm(ctx, false, false, t, in, out, 1.0f, dy.data(), out, w.data(), in, 0.0f,
                     rdx.data(), in);
  kernels::cpu::Gemm(ctx, true, false, out, in, t, 1.0f, dy.data(), out, x.data(), in, 0.0f,
                     rdw.data(), in);
  kernels::cpu::Gemm(ctx, true, false, out, in, t, 1.0f, dy.data(), out, x.data(), in, 1.0f,
                     rdwa.data(), in);
  CHECK(SameBits(y, ry));
  CHECK(SameBits(dx, rdx));
  CHECK(SameBits(dw, rdw));
  CHECK(SameBits(dwa, rdwa));
  for (int64_t c = 0; c < out; ++c) {  // column sums, in row order
    float sum = 0.0f;
    for (int64_t r = 0; r < t; ++r) sum += dy[r * out + c];
    CHECK(db[c] == Approx(sum).epsilon(1e-5));
  }
  Device dev;
  const float *dxin = dev.Up(x), *dwt = dev.Up(w), *dbias = dev.Up(bias), *ddy = dev.Up(dy);
  float* dyo = dev.Up(std::vector<float>(t * out));
  float* ddx = dev.Up(std::vector<float>(t * in));
  float* ddw = dev.Up(std::vector<float>(out * in));
  float* ddb = dev.Up(std::vector<float>(out));
  REQUIRE(LinearForward(dev.k(), dxin, dwt, dbias, t, in, out, dyo).ok());
  REQUIRE(LinearBackwardInput(dev.k(), ddy, dwt, t, in, out, ddx).ok());
  REQUIRE(LinearBackwardWeight(dev.k(), ddy, dxin, t, in, out, ddw, ddb).ok());
  CHECK(SameBits(dev.Down(dyo, t * out), y));
  CHECK(SameBits(dev.Down(ddx, t * in), dx));
  CHECK(SameBits(dev.Down(ddw, out * in), dw));
  CHECK(SameBits(dev.Down(ddb, out), db));
}

TEST_CASE("Embedding: whole and sharded vocabulary, positions; CPU backend = emulated device") {
  const uint32_t seed = FreshSeed();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  const int64_t t = 21, h = 8, vocab = 30, max_pos = 12;
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1), pos(0, max_pos - 1);
  std::vector<int32_t> tokens(t), positions(t);
  for (auto& v : tokens) v = tok(rng);
  for (auto& v : positions) v = pos(rng);
  const auto word = Random(vocab * h, rng), ptab = Random(max_pos * h, rng),
             dout = Random(t * h, rng);
  CpuDeviceKernels cpu_k(kernels::ExecContext{});
  for (const VocabRows& rows : {VocabRows{}, VocabRows{true, 10, 12}}) {
    INFO("sharded " << rows.sharded);
    const int64_t table_rows = rows.sharded ? rows.rows : vocab;
    const std::vector<float> table(
        word.begin() + (rows.sharded ? rows.start * h : 0),
        word.begin() + (rows.sharded ? rows.start * h : 0) + table_rows * h);
    std::vector<float> out(t * h, 5.0f), dword(table_rows * h, 0.0f), dpos(max_pos * h, 0.0f);
    REQUIRE(WordEmbeddingForward(cpu_k, rows, tokens.data(), table.data(), t, h, out.data()).ok());
    REQUIRE(PositionEmbeddingAdd(cpu_k, positions.data(), ptab.data(), t, h, out.data()).ok());
    // Independent: the lookup written out here.
    for (int64_t i = 0; i < t; ++i) {
      const int64_t r = tokens[i] - (rows.sharded ? rows.start : 0);
      for (int64_t c = 0; c < h; ++c) {
        const float wv = r >= 0 && r < table_rows ? table[r * h + c] : 0.0f;
        CHECK(out[i * h + c] == wv + ptab[positions[i] * h + c]);
      }
    }
    REQUIRE(
        WordEmbeddingBackward(cpu_k, rows, tokens.data(), dout.data(), t, h, dword.data()).ok());
    REQUIRE(
        PositionEmbeddingBackward(cpu_k, positions.data(), dout.data(), t, h, dpos.data()).ok());
    std::vector<float> rword(table_rows * h, 0.0f);
    for (int64_t i = 0; i < t; ++i) {  // token order, as the kernels
      const int64_t r = tokens[i] - (rows.sharded ? rows.start : 0);
      if (r < 0 || r >= table_rows) continue;
      for (int64_t c = 0; c < h; ++c) rword[r * h + c] += dout[i * h + c];
    }
    CHECK(SameBits(dword, rword));
    Device dev;
    const int32_t *dtok = dev.Up(tokens), *dposn = dev.Up(positions);
    const float *dtable = dev.Up(table), *dptab = dev.Up(ptab), *ddout = dev.Up(dout);
    float* dout_dev = dev.Up(std::vector<float>(t * h, 5.0f));
    float* ddword = dev.Up(std::vector<float>(table_rows * h, 0.0f));
    float* ddpos = dev.Up(std::vector<float>(max_pos * h, 0.0f));
    REQUIRE(WordEmbeddingForward(dev.k(), rows, dtok, dtable, t, h, dout_dev).ok());
    REQUIRE(PositionEmbeddingAdd(dev.k(), dposn, dptab, t, h, dout_dev).ok());
    REQUIRE(WordEmbeddingBackward(dev.k(), rows, dtok, ddout, t, h, ddword).ok());
    REQUIRE(PositionEmbeddingBackward(dev.k(), dposn, ddout, t, h, ddpos).ok());
    CHECK(SameBits(dev.Down(dout_dev, t * h), out));
    CHECK(SameBits(dev.Down(ddword, table_rows * h), dword));
    CHECK(SameBits(dev.Down(ddpos, max_pos * h), dpos));
  }
}

}  // namespace
}  // namespace mxmaca::layers::modules
