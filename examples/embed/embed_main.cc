// examples/embed/embed_main.cc: a C++ program that trains a model with MXMACA, no CLI.
//
// Shows the public API (docs/API.md): a GPT defined in C++ as a ModelSpec, a layout
// (ParallelConfig) and TrainerOptions, turned into a Job by a Runtime; Job::Run trains
// and calls back once per iteration. The job is a tiny GPT (2 layers, hidden 64, two
// pipeline stages) on Megatron's mock data for 20 iterations; each iteration's loss is
// printed, and the equivalent `mxmaca train` command line is printed first. Exit code 1
// on any error.
//
//   bazel run //examples/embed:embed              # or: bazel-bin/examples/embed/embed
#include <cmath>
#include <cstdio>
#include <string>

#include "mxmaca/runtime.h"

int main() {
  // The model: Embedding -> 2 transformer layers -> final norm -> output layer -> loss.
  mxmaca::GptShape shape;
  shape.num_layers = 2;
  shape.hidden_size = 64;
  shape.num_attention_heads = 4;
  shape.position_embedding = mxmaca::PositionEmbedding::kRope;
  shape.normalization = mxmaca::Normalization::kRmsNorm;
  shape.activation = mxmaca::Activation::kSwiGlu;
  shape.hidden_dropout = 0.0;
  shape.attention_dropout = 0.0;
  const mxmaca::ModelSpec model = mxmaca::ModelSpec::Gpt(shape);

  // Two pipeline stages (one layer each, a stage actor per stage) under 1F1B, in-process.
  mxmaca::ParallelConfig parallel;
  parallel.pipeline = 2;

  mxmaca::TrainerOptions options;
  options.micro_batch_size = 4;
  options.global_batch_size = 8;  // 2 micro-batches per iteration
  options.seq_length = 32;
  options.train_iters = 20;
  options.lr.lr = 3e-3;
  options.lr.warmup_iters = 2;
  options.lr.decay_style = "cosine";
  options.mock_data = true;  // Megatron's MockGPTDataset: no files needed
  options.tokenizer.type = "NullTokenizer";
  options.tokenizer.vocab_size = 4095;  // mock data uses ids up to 4094
  options.eval_iters = 0;               // no validation in this example
  options.num_threads = 1;

  mxmaca::Runtime::Options runtime_options;
  runtime_options.log_sink = [](const std::string&) {};  // the callback below reports
  const mxmaca::Runtime runtime(runtime_options);

  absl::StatusOr<mxmaca::Job> job = runtime.CreateJob(model, parallel, options);
  if (!job.ok()) {
    std::fprintf(stderr, "embed: %s\n", job.status().ToString().c_str());
    return 1;
  }
  std::printf("equivalent CLI: %s\n", job->CommandLine().c_str());

  absl::StatusOr<mxmaca::JobResult> result = job->Run([](const mxmaca::IterationMetrics& m) {
    std::printf("iteration %2lld/%lld  loss %.4f  grad norm %.3f  lr %.2e  %.0f tokens/s\n",
                static_cast<long long>(m.iteration), static_cast<long long>(m.train_iters),
                m.lm_loss, m.grad_norm, m.learning_rate, m.tokens_per_second);
  });
  if (!result.ok() || result->train_losses.empty()) {
    std::fprintf(stderr, "embed: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const double first = result->train_losses.front();
  const double last = result->train_losses.back();
  std::printf("trained %lld iterations: loss %.4f -> %.4f, mean %.0f tokens/s\n",
              static_cast<long long>(result->last_iteration), first, last,
              result->mean_tokens_per_second);
  return std::isfinite(last) ? 0 : 1;
}
