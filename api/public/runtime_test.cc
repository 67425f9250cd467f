// api/public/runtime_test.cc: Runtime::CreateJob's translation into pretrain_gpt.py flags
// (every value survives ParseMegatronArgs; defaults produce no flag), its errors, and a
// tiny real run whose callback and result match calling Train with hand-written flags.
// (PP/DP runs against the single-device run: runtime_parity_test.cc.)
#include "mxmaca/runtime.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "actors/messages.h"
#include "actors/training_log.h"
#include "api/args/megatron_args.h"
#include "api/train/train_command.h"

namespace mxmaca {
namespace {

// The tiny model of the run tests: 2 layers, h 32, 4 heads, s 16. Mock data draws token
// ids up to 4094 (data/mock_dataset.h), so the NullTokenizer needs --vocab-size >= 4095.
constexpr int64_t kNullVocab = 4095;

TrainerOptions TinyOptions(int64_t seed) {
  TrainerOptions o;
  o.micro_batch_size = 2;
  o.global_batch_size = 4;
  o.seq_length = 16;
  o.train_iters = 3;
  o.lr.lr = 1e-3;
  o.mock_data = true;
  o.tokenizer.type = "NullTokenizer";
  o.tokenizer.vocab_size = kNullVocab;
  o.log_interval = 1;
  o.eval_iters = 0;
  o.seed = seed;
  o.num_threads = 1;
  return o;
}

ModelSpec TinyModel() {
  GptShape shape;
  shape.num_layers = 2;
  shape.hidden_size = 32;
  shape.num_attention_heads = 4;
  return ModelSpec::Gpt(shape);
}

api::MegatronArgs Parse(const Job& job) {
  absl::StatusOr<api::MegatronArgs> a = api::ParseMegatronArgs(job.MegatronArgs());
  INFO(job.CommandLine());
  REQUIRE(a.ok());
  return *a;
}

TEST_CASE("CreateJob's flags keep every value through ParseMegatronArgs") {
  std::mt19937 rng(91);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 4; ++trial) {
    // Non-default values everywhere, drawn fresh per trial.
    TransformerLayerSpec t;
    t.num_attention_heads = 4 << (rng() % 3);                 // 4, 8, 16
    t.hidden_size = t.num_attention_heads * (8 + rng() % 9);  // divisible by heads
    t.num_query_groups = t.num_attention_heads / 2;
    t.kv_channels = 8 + rng() % 8;
    t.ffn_hidden_size = 3 * t.hidden_size + rng() % 7;
    t.normalization = Normalization::kRmsNorm;
    t.norm_epsilon = 1e-6 * (1.0 + unit(rng));
    t.activation = trial % 2 ? Activation::kSwiGlu : Activation::kGelu;
    t.hidden_dropout = 0.5 * unit(rng);
    t.attention_dropout = 0.5 * unit(rng);
    t.add_bias_linear = trial % 2 == 0;
    EmbeddingSpec e;
    e.vocab_size = 5000 + rng() % 100;
    e.make_vocab_size_divisible_by = 64;
    e.max_position_embeddings = 4096 + rng() % 64;
    e.position_embedding = PositionEmbedding::kRope;
    e.rotary_base = 500000 + rng() % 1000;
    e.rotary_percent = 0.5;
    const int64_t num_layers = 4 + rng() % 4;
    ModelSpec model;
    model.Add(e);
    for (int64_t i = 0; i < num_layers; ++i) model.Add(t);
    model.Add(FinalNormSpec{t.normalization, t.norm_epsilon});
    model.Add(OutputLayerSpec{false}).Add(LossSpec{true});

    ParallelConfig p;
    p.tensor = 2;
    p.pipeline = 2;
    p.layers_per_virtual_stage = 1;
    p.context = 2;
    p.expert = 2;
    p.sequence_parallel = true;
    p.schedule = "interleaved";
    p.distributed_optimizer = true;
    p.data = 1 + trial % 2;
    p.ddp_bucket_size = 1000 + rng() % 1000;

    TrainerOptions o;
    o.micro_batch_size = 1 + rng() % 4;
    o.global_batch_size = 64;
    o.seq_length = 256 + rng() % 256;
    o.train_iters = 100 + rng() % 1000;
    o.lr.lr = 1e-4 * (1.0 + unit(rng));
    o.lr.min_lr = 1e-6 * unit(rng);
    o.lr.decay_style = "cosine";
    o.lr.decay_iters = 90 + rng() % 10;
    o.lr.warmup_fraction = 0.1 * unit(rng);
    o.lr.warmup_init = 1e-7 * unit(rng);
    o.optimizer.adam_beta1 = 0.8 + 0.1 * unit(rng);
    o.optimizer.adam_beta2 = 0.95 + 0.01 * unit(rng);
    o.optimizer.adam_eps = 1e-6 * (1.0 + unit(rng));
    o.optimizer.weight_decay = 0.1 * unit(rng);
    o.optimizer.clip_grad = 0.5 + unit(rng);
    o.data_path = {"0.3", "/data/a_text_document", "0.7", "/data/b text_document"};
    o.split = "98,1,1";
    o.data_cache_path = "/tmp/cache";
    o.tokenizer.type = "NullTokenizer";  // --vocab-size derived from EmbeddingSpec
    o.save = "/tmp/ckpt";
    o.save_interval = 50;
    o.load = "/tmp/ckpt";
    o.log_interval = 1 + rng() % 10;
    o.eval_interval = 10 + rng() % 10;
    o.eval_iters = 1 + rng() % 5;
    o.seed = 1 + rng() % 100000;
    o.init_method_std = 0.01 * (1.0 + unit(rng));
    o.bf16 = true;
    o.num_threads = 3;
    o.trace_file = "/tmp/trace.json";
    o.extra_megatron_args = {"--eod-mask-loss"};

    absl::StatusOr<Job> job = Runtime().CreateJob(model, p, o);
    REQUIRE(job.ok());
    const api::MegatronArgs a = Parse(*job);
    CHECK(a.num_layers == num_layers);
    CHECK(a.hidden_size == t.hidden_size);
    CHECK(a.num_attention_heads == t.num_attention_heads);
    CHECK(a.group_query_attention);
    CHECK(a.num_query_groups == t.num_query_groups);
    CHECK(a.kv_channels == t.kv_channels);
    CHECK(a.ffn_hidden_size == t.ffn_hidden_size);
    CHECK(a.normalization == "RMSNorm");
    CHECK(a.norm_epsilon == t.norm_epsilon);  // exact: the flag text round-trips
    CHECK(a.swiglu == (t.activation == Activation::kSwiGlu));
    CHECK(a.bias_gelu_fusion == (t.activation != Activation::kGelu));
    CHECK(a.hidden_dropout == t.hidden_dropout);
    CHECK(a.attention_dropout == t.attention_dropout);
    CHECK(a.add_bias_linear == t.add_bias_linear);
    CHECK(a.max_position_embeddings == e.max_position_embeddings);
    CHECK(a.position_embedding_type == "rope");
    CHECK(a.rotary_base == e.rotary_base);
    CHECK(a.rotary_percent == e.rotary_percent);
    CHECK(a.make_vocab_size_divisible_by == e.make_vocab_size_divisible_by);
    CHECK(a.untie_embeddings_and_output_weights);
    CHECK(a.calculate_per_token_loss);
    CHECK(a.tensor_model_parallel_size == 2);
    CHECK(a.pipeline_model_parallel_size == 2);
    CHECK(a.num_layers_per_virtual_pipeline_stage == 1);
    CHECK(a.context_parallel_size == 2);
    CHECK(a.expert_model_parallel_size == 2);
    CHECK(a.sequence_parallel);
    CHECK(a.use_distributed_optimizer);
    CHECK(a.pipeline_schedule == "interleaved-1f1b");
    CHECK(a.ddp_bucket_size == p.ddp_bucket_size);
    if (p.data > 1) {
      CHECK(a.world_size_flag == 2 * 2 * 2 * p.data);  // TP x CP x PP x DP
    } else {
      CHECK_FALSE(a.world_size_flag.has_value());  // the default, TP x PP x CP
    }
    CHECK(a.micro_batch_size == o.micro_batch_size);
    CHECK(a.global_batch_size == o.global_batch_size);
    CHECK(a.seq_length == o.seq_length);
    CHECK(a.train_iters == o.train_iters);
    CHECK(a.lr == o.lr.lr);
    CHECK(a.min_lr == o.lr.min_lr);
    CHECK(a.lr_decay_style == "cosine");
    CHECK(a.lr_decay_iters == o.lr.decay_iters);
    CHECK(a.lr_warmup_fraction == o.lr.warmup_fraction);
    CHECK(a.lr_warmup_init == o.lr.warmup_init);
    CHECK(a.adam_beta1 == o.optimizer.adam_beta1);
    CHECK(a.adam_beta2 == o.optimizer.adam_beta2);
    CHECK(a.adam_eps == o.optimizer.adam_eps);
    CHECK(a.weight_decay == o.optimizer.weight_decay);
    CHECK(a.clip_grad == o.optimizer.clip_grad);
    CHECK(a.data_path == o.data_path);
    CHECK(a.split == o.split);
    CHECK(a.data_cache_path == o.data_cache_path);
    CHECK(a.tokenizer_type == "NullTokenizer");
    CHECK(a.vocab_size == e.vocab_size - 1);  // NullTokenizer adds the eod id
    CHECK(a.save == o.save);
    CHECK(a.save_interval == o.save_interval);
    CHECK(a.load == o.load);
    CHECK(a.log_interval == o.log_interval);
    CHECK(a.eval_interval == o.eval_interval);
    CHECK(a.eval_iters == o.eval_iters);
    CHECK(a.seed == o.seed);
    CHECK(a.init_method_std == o.init_method_std);
    CHECK(a.bf16);
    CHECK(a.num_threads == 3);
    CHECK(a.trace_file == o.trace_file);
    CHECK(a.eod_mask_loss);
  }
}

TEST_CASE("fields at Megatron's default produce no flag") {
  TrainerOptions o = TinyOptions(1234);
  o.log_interval = 100;  // Megatron's defaults
  o.eval_iters = 100;
  o.num_threads = 0;
  absl::StatusOr<Job> job = Runtime().CreateJob(TinyModel(), ParallelConfig{}, o);
  REQUIRE(job.ok());
  const std::vector<std::string> changed = api::ChangedArgs(Parse(*job));
  const std::set<std::string> got(changed.begin(), changed.end());
  const std::set<std::string> want = {"num_layers",
                                      "hidden_size",
                                      "num_attention_heads",
                                      "max_position_embeddings",
                                      "micro_batch_size",
                                      "global_batch_size",
                                      "seq_length",
                                      "train_iters",
                                      "lr",
                                      "mock_data",
                                      "tokenizer_type",
                                      "vocab_size"};
  CHECK(got == want);
  // The Runtime's default thread count applies when the options leave it 0.
  Runtime::Options ro;
  ro.num_threads = 2;
  absl::StatusOr<Job> threaded = Runtime(ro).CreateJob(TinyModel(), ParallelConfig{}, o);
  REQUIRE(threaded.ok());
  CHECK(Parse(*threaded).num_threads == 2);
}

TEST_CASE("CreateJob errors name the field") {
  const Runtime rt;
  auto error = [&](const ModelSpec& m, const ParallelConfig& p, const TrainerOptions& o) {
    absl::StatusOr<Job> job = rt.CreateJob(m, p, o);
    REQUIRE_FALSE(job.ok());
    return job.status();
  };
  const TrainerOptions o = TinyOptions(5);

  ModelSpec bad = TinyModel();
  bad.Add(LossSpec{});
  absl::Status s = error(bad, {}, o);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(s.message(), "layer 6 (Loss): nothing may follow the Loss"));

  TrainerOptions no_iters = o;
  no_iters.train_iters = 0;
  s = error(TinyModel(), {}, no_iters);
  CHECK(s.message() == "TrainerOptions::train_iters is 0; it must be >= 1");

  ParallelConfig both;
  both.layers_per_virtual_stage = 1;
  both.virtual_stages_per_rank = 2;
  CHECK(absl::StrContains(error(TinyModel(), both, o).message(), "not both"));

  ParallelConfig zero_tp;
  zero_tp.tensor = 0;
  CHECK(error(TinyModel(), zero_tp, o).message() == "ParallelConfig::tensor is 0; it must be >= 1");

  ParallelConfig unknown;
  unknown.schedule = "round-robin";
  s = error(TinyModel(), unknown, o);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(s.message(), "ParallelConfig::schedule \"round-robin\": expected"));

  // The vocabulary: the NullTokenizer's must match an explicit EmbeddingSpec::vocab_size;
  // with the GPT-2 tokenizer the vocabulary is the tokenizer's.
  GptShape shape;
  shape.num_layers = 1;
  shape.hidden_size = 32;
  shape.num_attention_heads = 4;
  shape.vocab_size = 1000;
  s = error(ModelSpec::Gpt(shape), {}, o);
  CHECK(absl::StrContains(s.message(),
                          "EmbeddingSpec::vocab_size 1000 does not match the "
                          "NullTokenizer's 4096"));
  TrainerOptions gpt2 = o;
  gpt2.tokenizer = TokenizerOptions{};
  CHECK(error(ModelSpec::Gpt(shape), {}, gpt2).code() == absl::StatusCode::kInvalidArgument);
  TrainerOptions bad_flag = o;
  bad_flag.extra_megatron_args = {"--hiden-size", "3"};
  CHECK(absl::StrContains(error(TinyModel(), {}, bad_flag).message(), "--hiden-size"));
}

TEST_CASE("FromMegatronArgs reports ParseMegatronArgs' errors and keeps the flags") {
  const std::vector<std::string> bad = {"--num-layers", "2x"};
  absl::StatusOr<Job> job = Job::FromMegatronArgs(bad);
  REQUIRE_FALSE(job.ok());
  CHECK(job.status() == api::ParseMegatronArgs(bad).status());

  const std::vector<std::string> args = {"--num-layers", "2", "--data-path", "a b", "it's"};
  job = Job::FromMegatronArgs(args);
  REQUIRE(job.ok());
  CHECK(job->MegatronArgs() == args);
  CHECK(job->CommandLine() == "mxmaca train --num-layers 2 --data-path 'a b' 'it'\\''s'");
}

TEST_CASE("a tiny job runs, reports each iteration, and equals Train with the same flags") {
  std::mt19937 rng(20261130);
  const int64_t seed = 1 + rng() % 100000;
  std::vector<std::string> lines;
  Runtime::Options ro;
  ro.log_sink = [&lines](const std::string& l) { lines.push_back(l); };
  absl::StatusOr<Job> job = Runtime(ro).CreateJob(TinyModel(), ParallelConfig{}, TinyOptions(seed));
  REQUIRE(job.ok());
  INFO(job->CommandLine());

  std::vector<IterationMetrics> seen;
  absl::StatusOr<JobResult> result =
      job->Run([&seen](const IterationMetrics& m) { seen.push_back(m); });
  REQUIRE(result.ok());
  CHECK_FALSE(lines.empty());  // the log went to the sink, not stdout
  REQUIRE(seen.size() == 3);
  for (size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i].iteration == static_cast<int64_t>(i + 1));
    CHECK(seen[i].train_iters == 3);
    CHECK(std::isfinite(seen[i].lm_loss));
    // Untrained: close to ln(V) = ln(4096) = 8.3 nats; loose bounds, only a sanity check.
    CHECK(seen[i].lm_loss > 7.0);
    CHECK(seen[i].lm_loss < 10.0);
    CHECK(std::isfinite(seen[i].grad_norm));
    CHECK(seen[i].grad_norm > 0.0);
    CHECK(seen[i].tokens_per_second > 0.0);
    CHECK(seen[i].elapsed_ms > 0.0);
    CHECK_FALSE(seen[i].skipped);
    CHECK(seen[i].consumed_samples == 4 * static_cast<int64_t>(i + 1));
  }
  CHECK(seen[0].learning_rate > seen[2].learning_rate);  // linear decay over 3 iterations
  REQUIRE(result->train_losses.size() == 3);
  CHECK(result->first_iteration == 0);
  CHECK(result->last_iteration == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(result->train_losses[i] == seen[i].lm_loss);

  // The same run through Train, with flags written by hand (not taken from the job): the
  // translation built the intended model and the Job adds nothing, bit for bit.
  const std::vector<std::string> flags = {"--num-layers",
                                          "2",
                                          "--hidden-size",
                                          "32",
                                          "--num-attention-heads",
                                          "4",
                                          "--max-position-embeddings",
                                          "16",
                                          "--micro-batch-size",
                                          "2",
                                          "--global-batch-size",
                                          "4",
                                          "--seq-length",
                                          "16",
                                          "--train-iters",
                                          "3",
                                          "--lr",
                                          "0.001",
                                          "--mock-data",
                                          "--log-interval",
                                          "1",
                                          "--eval-iters",
                                          "0",
                                          "--seed",
                                          absl::StrCat(seed),
                                          "--num-threads",
                                          "1",
                                          "--tokenizer-type",
                                          "NullTokenizer",
                                          "--vocab-size",
                                          absl::StrCat(kNullVocab)};
  absl::StatusOr<actors::TrainingSummary> direct = api::Train(flags, [](const std::string&) {});
  REQUIRE(direct.ok());
  REQUIRE(direct->ok);
  REQUIRE(direct->train_losses.size() == result->train_losses.size());
  CHECK(std::memcmp(direct->train_losses.data(), result->train_losses.data(), 3 * sizeof(double)) ==
        0);
  REQUIRE(direct->grad_norms.size() == result->grad_norms.size());
  CHECK(std::memcmp(direct->grad_norms.data(), result->grad_norms.data(), 3 * sizeof(double)) == 0);
  CHECK(direct->last_iteration == result->last_iteration);
  CHECK(direct->skipped_iterations == result->skipped_iterations);
}

TEST_CASE("Run returns the runtime's error for a combination only it checks") {
  TrainerOptions o = TinyOptions(3);
  o.global_batch_size = 3;  // not divisible by micro-batch 2 x data 1
  absl::StatusOr<Job> job = Runtime().CreateJob(TinyModel(), ParallelConfig{}, o);
  REQUIRE(job.ok());
  job->set_log_sink([](const std::string&) {});
  absl::StatusOr<JobResult> r = job->Run();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(r.status().message(), "global"));
}

}  // namespace
}  // namespace mxmaca
