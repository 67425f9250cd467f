// tests/integration/parity_fixture.h: running `mxmaca train` (api::Train) under different
// parallel layouts on the same tiny corpus, seed and global batch, and comparing the runs:
// losses, grad norms and the final weights read back from each run's checkpoint.
#ifndef MXMACA_TESTS_INTEGRATION_PARITY_FIXTURE_H_
#define MXMACA_TESTS_INTEGRATION_PARITY_FIXTURE_H_

#include <map>
#include <string>
#include <vector>

#include "actors/messages.h"

namespace mxmaca::testing {

// Weights: full logical tensors by name.
using Weights = std::map<std::string, std::vector<float>>;

// Run: one training run's summary and final weights.
struct Run {
  std::string label;
  actors::TrainingSummary summary;
  Weights weights;
  std::string log;  // the run's printed lines
};

// ParityCorpus: a tiny corpus (tiny_corpus.h) in a fresh temporary directory and a fresh
// random seed (weights and dropout differ from test run to test run), printed to stderr;
// the environment variable MXMACA_TEST_SEED fixes it (to replay a failure).
class ParityCorpus {
 public:
  explicit ParityCorpus(const std::string& name);

  // CommonArgs: data, tokenizer (NullTokenizer with `vocab_size` tokens), seed, logging.
  std::vector<std::string> CommonArgs(int64_t vocab_size) const;
  // Redraw: a fresh random seed for the CommonArgs built after it (printed to stderr).
  void Redraw();
  // Train: api::Train(args), adding --save <fresh dir> unless args have --save; REQUIREs
  // success and `iterations` losses; reads every model/ tensor of the last checkpoint in
  // the --save directory.
  Run Train(const std::string& label, std::vector<std::string> args, int iterations);
  // InitialWeights: the single-device initial weights for `args` (a function of (seed,
  // name)): GptStage::Create + InitializeParameters with the args' config.
  Weights InitialWeights(const std::vector<std::string>& args, int64_t vocab_size) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string name_, dir_, prefix_;
  int seed_ = 1;
  int count_ = 0;
};

// CheckBitIdentical: losses, validation losses and weights equal bit for bit; the grad
// norm within 1e-12 relative (its fp64 partial sums are grouped by stage and shard).
void CheckBitIdentical(const Run& ref, const Run& run);

// CheckClose: per-step loss within `loss_rtol` relative; per tensor, the change from w0
// within `weight_rtol` relative norm-wise. Tensors whose sizes differ (the vocabulary is
// padded per tensor-parallel size) are compared on their common prefix — the real
// vocabulary rows (padding rows come last and never train).
void CheckClose(const Run& ref, const Run& run, const Weights& w0, double loss_rtol = 1e-5,
                double weight_rtol = 1e-3);

}  // namespace mxmaca::testing

#endif  // MXMACA_TESTS_INTEGRATION_PARITY_FIXTURE_H_
