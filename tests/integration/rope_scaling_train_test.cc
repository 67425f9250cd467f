// `mxmaca train` with Megatron's long-context RoPE flags (--use-rope-scaling,
// --rope-scaling-factor, --rotary-seq-len-interpolation-factor; the angles themselves are
// checked against Megatron's formulas in kernels/cpu:rope_scaling_test): the flags are
// honoured (no "cannot be honoured" error), change the run (head dim 8, base 10000: the
// lowest frequency's wavelength, 6283 tokens, is in _apply_scaling's medium band, so
// every factor moves it; interpolation halves every angle), and with context parallelism
// the scaled angles follow the original positions: CP 2 equals CP 1 within the CP parity
// tolerance (1e-5 relative per step; context_parallel_parity_test argues it).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tests/integration/parity_fixture.h"

namespace mxmaca::testing {
namespace {

std::vector<std::string> Args(const ParityCorpus& corpus, std::vector<std::string> extra) {
  std::vector<std::string> a = {
      "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
      "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
      "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
      "--global-batch-size", "4", "--train-iters", "3", "--lr", "3e-3",
      "--hidden-dropout", "0", "--attention-dropout", "0", "--eval-interval", "100",
      "--eval-iters", "0"};
  const std::vector<std::string> common = corpus.CommonArgs(1000);
  a.insert(a.end(), common.begin(), common.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

double MaxRelDiff(const Run& a, const Run& b) {
  double worst = 0;
  REQUIRE(a.summary.train_losses.size() == b.summary.train_losses.size());
  for (size_t i = 0; i < a.summary.train_losses.size(); ++i) {
    const double x = a.summary.train_losses[i], y = b.summary.train_losses[i];
    worst = std::max(worst, std::abs(x - y) / std::abs(y));
  }
  return worst;
}

TEST_CASE("mxmaca train honours --use-rope-scaling and --rotary-seq-len-interpolation-factor") {
  ParityCorpus corpus("rope_scaling");
  const Run plain = corpus.Train("plain", Args(corpus, {}), 3);
  const Run scaled =
      corpus.Train("scaled", Args(corpus, {"--use-rope-scaling", "--rope-scaling-factor", "8"}), 3);
  const Run scaled4 =
      corpus.Train("scaled4", Args(corpus, {"--use-rope-scaling", "--rope-scaling-factor", "4"}), 3);
  const Run interp =
      corpus.Train("interp", Args(corpus, {"--rotary-seq-len-interpolation-factor", "2"}), 3);
  // Same weights and batches, and a repeated run is bit-identical (checked below), so any
  // difference is the flag's. Llama 3 scaling only moves frequencies whose wavelength
  // exceeds 2048 tokens, i.e. angles under 2 pi 32 / 2048 = 0.1 rad at these 32
  // positions, so the loss moves by only ~1e-8..1e-6 relative; halving every angle
  // (interpolation) moves it much more. The corpus and seed are fresh each run: one run
  // moved the losses by only 6.8e-7 (under the former absolute bound of 1e-6), six more by
  // 3.8e-6..4.3e-5, each 12x..2000x what scaling did: so it is compared with scaling's move.
  CHECK(MaxRelDiff(scaled, plain) > 0);
  CHECK(MaxRelDiff(scaled4, scaled) > 0);
  CHECK(MaxRelDiff(interp, plain) > 2 * MaxRelDiff(scaled, plain));
  const Run again =
      corpus.Train("scaled again",
                   Args(corpus, {"--use-rope-scaling", "--rope-scaling-factor", "8"}), 3);
  CHECK(again.summary.train_losses == scaled.summary.train_losses);
  // Context parallelism: the scaled angles at the original positions.
  const Run cp2 = corpus.Train(
      "scaled cp2",
      Args(corpus, {"--use-rope-scaling", "--rope-scaling-factor", "8",
                    "--rotary-seq-len-interpolation-factor", "2", "--context-parallel-size",
                    "2", "--world-size", "2"}),
      3);
  const Run cp1 = corpus.Train(
      "scaled cp1",
      Args(corpus, {"--use-rope-scaling", "--rope-scaling-factor", "8",
                    "--rotary-seq-len-interpolation-factor", "2"}),
      3);
  CHECK(MaxRelDiff(cp2, cp1) <= 1e-5);
}

}  // namespace
}  // namespace mxmaca::testing
