// Tests for ValidateAndDeriveArgs and PaddedVocabSize (api/args/megatron_args.h):
// Megatron's validate_args derivations and each check's message.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {
namespace {

using Argv = std::vector<std::string>;

// A small valid GPT run, as a Megatron user would write it.
Argv BaseArgv() {
  return {"--num-layers",
          "4",
          "--hidden-size",
          "64",
          "--num-attention-heads",
          "4",
          "--seq-length",
          "32",
          "--max-position-embeddings",
          "32",
          "--micro-batch-size",
          "2",
          "--train-iters",
          "10",
          "--lr",
          "1e-3",
          "--vocab-file",
          "v.json",
          "--merge-file",
          "m.bpe",
          "--mock-data"};
}

absl::StatusOr<MegatronArgs> Validate(Argv extra, int world_size = 1) {
  Argv argv = BaseArgv();
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<MegatronArgs> args = ParseMegatronArgs(argv);
  REQUIRE(args.ok());
  absl::Status status = ValidateAndDeriveArgs(&*args, world_size);
  if (!status.ok()) return status;
  return args;
}

MegatronArgs ValidOk(Argv extra, int world_size = 1) {
  absl::StatusOr<MegatronArgs> args = Validate(std::move(extra), world_size);
  INFO(args.status().ToString());
  REQUIRE(args.ok());
  return *std::move(args);
}

std::string ValidError(Argv extra, int world_size = 1) {
  absl::StatusOr<MegatronArgs> args = Validate(std::move(extra), world_size);
  REQUIRE_FALSE(args.ok());
  CHECK(args.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(args.status().message());
}

TEST_CASE("PaddedVocabSize matches MEGATRON_FORMATS.md's GPT-2 examples") {
  CHECK(PaddedVocabSize(50257, 128, 1) == 50304);
  CHECK(PaddedVocabSize(50257, 128, 2) == 50432);
  CHECK(PaddedVocabSize(50257, 128, 4) == 50688);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t vocab = 1 + rng() % 200000, div = 1 + rng() % 256, tp = 1 + rng() % 8;
    const int64_t padded = PaddedVocabSize(vocab, div, tp);
    CHECK(padded % (div * tp) == 0);
    CHECK(padded >= vocab);
    CHECK(padded - vocab < div * tp);
  }
}

TEST_CASE("derivations follow validate_args") {
  const MegatronArgs a = ValidOk({});
  CHECK(a.data_parallel_size == 1);
  CHECK(*a.global_batch_size == 2);  // micro x dp
  CHECK(*a.ffn_hidden_size == 4 * 64);
  CHECK(*a.kv_channels == 64 / 4);
  CHECK(a.num_query_groups == 4);  // = heads without --group-query-attention
  CHECK(*a.lr_decay_iters == 10);  // = train iters
  CHECK(*a.start_weight_decay == 0.01);
  CHECK(*a.end_weight_decay == 0.01);
  CHECK(*a.tokenizer_type == "GPT2BPETokenizer");  // pretrain_gpt's args_defaults
  CHECK(*a.expert_tensor_parallel_size == 1);
  CHECK(*a.dataloader_type == "single");
  CHECK(a.add_qkv_bias);  // follows add_bias_linear
  CHECK(*a.num_threads >= 1);
  CHECK(!a.virtual_pipeline_model_parallel_size.has_value());
}

TEST_CASE("SwiGLU ffn default: int((4h*2/3)/64)*64") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t heads = 1 + rng() % 16, hidden = heads * (8 + rng() % 64);
    const MegatronArgs a = ValidOk({"--swiglu", "--hidden-size", absl::StrCat(hidden),
                                    "--num-attention-heads", absl::StrCat(heads)});
    // Python: int((4 * h * 2 / 3) / 64) * 64, float division then truncation.
    const double python_value = (4.0 * hidden * 2.0 / 3.0) / 64.0;
    CHECK(*a.ffn_hidden_size == static_cast<int64_t>(python_value) * 64);
  }
  CHECK(*ValidOk({"--swiglu", "--hidden-size", "4096", "--num-attention-heads", "32"})
             .ffn_hidden_size == 10880);
  CHECK(*ValidOk({"--swiglu", "--ffn-hidden-size", "100"}).ffn_hidden_size == 100);
}

TEST_CASE("parallel sizes derive dp and check divisibility") {
  const MegatronArgs a =
      ValidOk({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
               "--global-batch-size", "8", "--sequence-parallel"},
              8);
  CHECK(a.data_parallel_size == 2);
  CHECK(a.sequence_parallel);
  CHECK(*a.expert_tensor_parallel_size == 2);
  CHECK_FALSE(ValidOk({"--sequence-parallel"}).sequence_parallel);  // tp = 1 turns it off
  CHECK(
      ValidError({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}, 6) ==
      "world size (6) is not divisible by tensor (2) x pipeline (2) x context (1) parallel "
      "size = 4");
  CHECK(ValidError({"--global-batch-size", "6"}, 4) ==
        "--global-batch-size (6) is not divisible by --micro-batch-size (2) x data-parallel "
        "size (4) = 8");
  CHECK(ValidError({"--pipeline-model-parallel-size", "3"}, 3) ==
        "number of layers (4) is not divisible by --pipeline-model-parallel-size (3)");
  CHECK(absl::StrContains(ValidError({"--tensor-model-parallel-size", "3"}, 3),
                          "must be divisible by --tensor-model-parallel-size (3)"));
  CHECK(
      absl::StrContains(ValidError({"--context-parallel-size", "3"}, 3),
                        "--seq-length (32) must be a multiple of 2 x --context-parallel-size (3)"));
  CHECK(ValidError({"--expert-tensor-parallel-size", "2", "--num-experts", "4",
                    "--expert-model-parallel-size", "2"},
                   2) ==
        "world size (2) is not divisible by expert tensor (2) x expert (2) x pipeline (1) "
        "parallel size = 4");
  CHECK(ValidError({"--tensor-model-parallel-size", "2", "--global-batch-size", "2",
                    "--sequence-parallel", "--seq-length", "31"},
                   2) ==
        "--seq-length (31) must be divisible by --tensor-model-parallel-size (2) with "
        "--sequence-parallel");
  CHECK(ValidError({"--tensor-model-parallel-size", "0"}) ==
        "--tensor-model-parallel-size must be >= 1, got 0");
}

TEST_CASE("virtual and uneven pipeline stages") {
  Argv pp4 = {"--num-layers", "8", "--pipeline-model-parallel-size", "4"};
  Argv v = pp4;
  v.insert(v.end(), {"--num-layers-per-virtual-pipeline-stage", "1"});
  CHECK(*ValidOk(v, 4).virtual_pipeline_model_parallel_size == 2);
  v = pp4;
  v.insert(v.end(), {"--num-virtual-stages-per-pipeline-rank", "2"});
  CHECK(*ValidOk(v, 4).virtual_pipeline_model_parallel_size == 2);
  v = pp4;
  v.insert(v.end(), {"--pipeline-model-parallel-layout", "Et|(tt|)*2,tL"});
  CHECK(!ValidOk(v, 4).virtual_pipeline_model_parallel_size.has_value());  // 4 stages / pp 4
  v = pp4;
  v.insert(v.end(), {"--pipeline-model-parallel-layout", "Et|(t|)*6,tL"});
  CHECK(*ValidOk(v, 4).virtual_pipeline_model_parallel_size == 2);  // 8 stages
  v = pp4;
  v.insert(v.end(), {"--pipeline-model-parallel-layout", "E|t|tL"});
  CHECK(ValidError(v, 4) ==
        "--pipeline-model-parallel-layout has 3 stages, not divisible by "
        "--pipeline-model-parallel-size 4");
  v = pp4;
  v.insert(v.end(), {"--num-layers-per-virtual-pipeline-stage", "1",
                     "--num-virtual-stages-per-pipeline-rank", "2"});
  CHECK(absl::StartsWith(ValidError(v, 4), "no more than one of"));
  v = pp4;
  v.insert(v.end(), {"--num-layers-per-virtual-pipeline-stage", "3"});
  CHECK(ValidError(v, 4) ==
        "layers per pipeline stage (2) is not divisible by "
        "--num-layers-per-virtual-pipeline-stage (3)");
  // Uneven: 10 layers, first 1 and last 3 leave 6 for 2 middle stages.
  const Argv uneven = {"--num-layers",
                       "10",
                       "--pipeline-model-parallel-size",
                       "4",
                       "--decoder-first-pipeline-num-layers",
                       "1",
                       "--decoder-last-pipeline-num-layers",
                       "3"};
  CHECK(ValidOk(uneven, 4).pipeline_model_parallel_size == 4);
  Argv bad = uneven;
  bad[1] = "11";
  CHECK(absl::StrContains(ValidError(bad, 4), "leave 7 layers, which do not split evenly"));
  CHECK(ValidOk({"--num-layers", "9", "--pipeline-model-parallel-size", "2",
                 "--account-for-embedding-in-pipeline-split"},
                2)
            .pipeline_model_parallel_size == 2);
}

TEST_CASE("model shape checks") {
  CHECK(ValidError({"--hidden-size", "66"}) ==
        "--hidden-size (66) is not divisible by --num-attention-heads (4); give --kv-channels "
        "to use another head size");
  CHECK(*ValidOk({"--hidden-size", "66", "--kv-channels", "16"}).kv_channels == 16);
  CHECK(ValidError({"--seq-length", "64"}) ==
        "--max-position-embeddings (32) must be >= --seq-length (64)");
  const MegatronArgs gqa = ValidOk({"--group-query-attention", "--num-query-groups", "2"});
  CHECK(gqa.num_query_groups == 2);
  CHECK(ValidError({"--group-query-attention", "--num-query-groups", "3"}) ==
        "--num-attention-heads (4) is not divisible by --num-query-groups (3)");
  CHECK(ValidError({"--max-position-embeddings", "0"}) ==
        "--max-position-embeddings must be >= 1, got 0");
  Argv no_layers = {};
  absl::StatusOr<MegatronArgs> parsed = ParseMegatronArgs({"--hidden-size", "8"});
  REQUIRE(parsed.ok());
  CHECK(ValidateAndDeriveArgs(&*parsed, 1).message() ==
        "--micro-batch-size is required and must be >= 1");
  CHECK(ValidOk({"--use-rotary-position-embeddings"}).position_embedding_type == "rope");
  CHECK(ValidError({"--no-position-embedding"}) ==
        "--no-position-embedding is deprecated, use --position-embedding-type");
  CHECK(absl::StrContains(ValidError({"--position-embedding-type", "mrope"}),
                          "mrope is not supported by MXMACA yet"));
  CHECK(ValidOk({"--apply-query-key-layer-scaling"}).attention_softmax_in_fp32);
  CHECK(ValidError({"--hidden-dropout", "1.5"}) == "--hidden-dropout must be in [0, 1], got 1.5");
  CHECK(ValidError({"--attention-dropout", "-0.1"}) ==
        "--attention-dropout must be in [0, 1], got -0.1");
  CHECK(ValidError({"--rotary-percent", "0"}) == "--rotary-percent must be in (0, 1], got 0");
  CHECK(ValidError({"--log-interval", "0"}) == "--log-interval must be >= 1, got 0");
  CHECK_FALSE(ValidOk({"--disable-bias-linear"}).add_qkv_bias);
}

TEST_CASE("iteration/sample exclusivity and learning-rate checks") {
  CHECK(ValidError({"--train-samples", "100"}) ==
        "--train-iters (10) and --train-samples (100) are exclusive");
  CHECK(ValidError({"--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "2"}) ==
        "--lr-warmup-fraction (0.1) and --lr-warmup-iters (2) are exclusive");
  CHECK(absl::StartsWith(ValidError({"--lr-decay-samples", "5"}), "--lr-decay-samples needs"));
  CHECK(absl::StartsWith(ValidError({"--lr-warmup-samples", "5"}), "--lr-warmup-samples (5)"));
  CHECK(ValidError({"--min-lr", "0.01"}) == "--min-lr (0.01) must be <= --lr (0.001)");
  CHECK(ValidError({"--lr-decay-style", "WSD"}) ==
        "--lr-decay-style WSD is not supported by MXMACA yet (constant, linear, cosine)");
  CHECK(ValidError({"--optimizer", "sgd"}) ==
        "--optimizer sgd is not supported by MXMACA yet (adam)");
  CHECK(*ValidOk({"--lr-decay-iters", "7"}).lr_decay_iters == 7);
  CHECK(ValidError({"--start-weight-decay", "0.1"}) ==
        "--start-weight-decay/--end-weight-decay need --weight-decay-incr-style linear or "
        "cosine (got constant)");
  CHECK(ValidError({"--weight-decay-incr-style", "linear"}) ==
        "--weight-decay-incr-style linear needs --start-weight-decay and --end-weight-decay");
  CHECK(ValidError({"--save", "/tmp/x"}) == "--save needs --save-interval > 0");
  CHECK(ValidOk({"--save", "/tmp/x", "--save-interval", "5"}).save_interval == 5);
  // Sample-based training.
  absl::StatusOr<MegatronArgs> samples = ParseMegatronArgs({"--num-layers",
                                                            "2",
                                                            "--hidden-size",
                                                            "8",
                                                            "--num-attention-heads",
                                                            "2",
                                                            "--seq-length",
                                                            "8",
                                                            "--max-position-embeddings",
                                                            "8",
                                                            "--micro-batch-size",
                                                            "1",
                                                            "--train-samples",
                                                            "64",
                                                            "--lr",
                                                            "0.1",
                                                            "--lr-warmup-fraction",
                                                            "0.1",
                                                            "--mock-data",
                                                            "--vocab-file",
                                                            "v",
                                                            "--merge-file",
                                                            "m"});
  REQUIRE(samples.ok());
  REQUIRE(ValidateAndDeriveArgs(&*samples, 1).ok());
  CHECK(*samples->lr_decay_samples == 64);
  CHECK(!samples->lr_decay_iters.has_value());
}

TEST_CASE("recompute, data, tokenizer and MXMACA flag checks") {
  CHECK(*ValidOk({"--recompute-activations"}).recompute_granularity == "selective");
  CHECK(ValidError({"--recompute-granularity", "full"}) ==
        "--recompute-granularity full needs --recompute-method uniform or block");
  CHECK(ValidError({"--recompute-granularity", "full", "--recompute-method", "block"}) ==
        "--recompute-granularity full needs --recompute-num-layers between 1 and the layers "
        "per pipeline rank (4)");
  CHECK(ValidError({"--recompute-granularity", "selective", "--recompute-method", "block"}) ==
        "--recompute-method block is not supported with --recompute-granularity selective");
  CHECK(ValidError({"--recompute-activations", "--recompute-num-layers", "1"}) ==
        "--recompute-num-layers must not be given with --recompute-granularity selective");
  // Ignored without a granularity, as in Megatron.
  CHECK(ValidOk({"--recompute-method", "block"}).recompute_method == "block");
  CHECK(ValidOk({"--recompute-granularity", "full", "--recompute-method", "uniform",
                 "--recompute-num-layers", "1"})
            .recompute_num_layers == 1);
  CHECK(ValidError({"--data-path", "x"}) ==
        "give one data source: --mock-data, --data-path, or "
        "--train-data-path/--valid-data-path/--test-data-path");
  CHECK(ValidError({"--dataloader-type", "cyclic"}) ==
        "--dataloader-type cyclic is not supported by MXMACA yet (single)");
  CHECK(absl::StrContains(ValidError({"--split", "90,x"}), "'x' is not a non-negative number"));
  const MegatronArgs null_tok =
      ValidOk({"--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
               "--tensor-model-parallel-size", "2", "--global-batch-size", "2"},
              2);
  CHECK(*null_tok.padded_vocab_size == PaddedVocabSize(1001, 128, 2));
  CHECK(ValidError({"--tokenizer-type", "NullTokenizer"}) ==
        "--tokenizer-type NullTokenizer needs --vocab-size >= 1");
  CHECK(ValidError({"--tokenizer-type", "TikTokenizer"}) ==
        "--tokenizer-type TikTokenizer needs --tokenizer-model");
  CHECK(ValidError({"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "v.json"}) ==
        "--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2");
  CHECK(ValidError({"--tokenizer-type", "HuggingFaceTokenizer"}) ==
        "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model");
  CHECK(absl::StrContains(ValidError({"--tokenizer-type", "BertWordPieceCase"}),
                          "BertWordPieceCase is not supported by MXMACA yet"));
  // TikTokenizer's vocab_size is --vocab-size (default 2^17), padded as Megatron.
  const MegatronArgs tik =
      ValidOk({"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "v.json",
               "--tiktoken-pattern", "v2", "--vocab-size", "1000",
               "--tensor-model-parallel-size", "2", "--global-batch-size", "2"},
              2);
  CHECK(*tik.padded_vocab_size == PaddedVocabSize(1000, 128, 2));
  CHECK(*ValidOk({"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "v.json",
                  "--tiktoken-pattern", "v1"})
             .padded_vocab_size == 131072);
  CHECK(ValidError({"--max-consecutive-nan-iterations", "0"}) ==
        "--max-consecutive-nan-iterations must be >= 1, got 0");
  CHECK(*ValidOk({"--num-threads", "3"}).num_threads == 3);
  CHECK(ValidError({"--overlap-param-gather"}) ==
        "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce");
  CHECK(absl::StrContains(ValidError({"--optimizer-cpu-offload"}),
                          "--optimizer-cpu-offload must be used together with "
                          "--use-precision-aware-optimizer"));
  const MegatronArgs offload =
      ValidOk({"--optimizer-cpu-offload", "--use-precision-aware-optimizer"});
  CHECK(offload.optimizer_cpu_offload);
  CHECK(offload.use_precision_aware_optimizer);
  CHECK(absl::StrContains(
      ValidError({"--expert-model-parallel-size", "2"}, 2),
      "--num-experts (None) must be a multiple of --expert-model-parallel-size (2)"));
  const MegatronArgs moe = ValidOk({"--num-experts", "4", "--expert-model-parallel-size", "2"}, 2);
  CHECK(*moe.moe_ffn_hidden_size == *moe.ffn_hidden_size);
  CHECK(absl::StrContains(ValidError({"--num-experts", "4", "--moe-router-topk", "5"}),
                          "--moe-router-topk (5) must be in [1, --num-experts (4)]"));
}

TEST_CASE("the remaining checks, one by one") {
  CHECK(ValidError({}, 0) == "world size must be >= 1, got 0");
  // Megatron-Core 0.19's flags MXMACA honours in part: Unimplemented, naming the value.
  absl::StatusOr<MegatronArgs> part = Validate({"--exit-signal", "SIGUSR1"}, 1);
  CHECK(part.status().code() == absl::StatusCode::kUnimplemented);
  CHECK(part.status().message() ==
        "--exit-signal SIGUSR1: MXMACA's --exit-signal-handler catches SIGTERM only (Megatron's "
        "default)");
  CHECK(Validate({"--exit-signal", "SIGTERM"}, 1).ok());
  CHECK(Validate({"--rope-type", "rope"}, 1).ok());
  CHECK(Validate({"--rope-type", "yarn"}, 1).status().code() == absl::StatusCode::kUnimplemented);
  part = Validate({"--eval-micro-batch-size", "3"}, 1);
  CHECK(part.status().code() == absl::StatusCode::kUnimplemented);
  CHECK(absl::StartsWith(part.status().message(), "--eval-micro-batch-size 3 differs"));
  CHECK(ValidError({"--save", "/s", "--save-interval", "2", "--save-retain-interval", "3"}) ==
        "--save-retain-interval 3 must be > 0 and a multiple of --save-interval (2)");
  CHECK(ValidError({"--num-layers", "8", "--pipeline-model-parallel-size", "4",
                    "--num-layers-per-virtual-pipeline-stage", "1",
                    "--decoder-first-pipeline-num-layers", "2"},
                   4) ==
        "use --num-virtual-stages-per-pipeline-rank, not --num-layers-per-virtual-pipeline-stage, "
        "with uneven pipeline stages");
  CHECK(ValidError({"--num-virtual-stages-per-pipeline-rank", "2"}) ==
        "interleaved pipeline stages need --pipeline-model-parallel-size > 1");
  CHECK(ValidError({"--num-virtual-stages-per-pipeline-rank", "0"}) ==
        "--num-virtual-stages-per-pipeline-rank must be >= 1, got 0");
  CHECK(ValidError(
            {"--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers", "-1"},
            2) == "--decoder-first-pipeline-num-layers must be >= 0, got -1");
  CHECK(ValidError({"--decoder-last-pipeline-num-layers", "1"}) ==
        "--decoder-first-pipeline-num-layers/--decoder-last-pipeline-num-layers need "
        "--pipeline-model-parallel-size > 1");
  CHECK(ValidError({"--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers",
                    "1", "--decoder-last-pipeline-num-layers", "2"},
                   2) ==
        "uneven pipeline: 4 layers minus the first/last stage's leave 1 layers, which do not "
        "split evenly over the other 0 of 2 pipeline stages");
  CHECK(absl::StrContains(ValidError({"--pipeline-model-parallel-size", "2",
                                      "--pipeline-model-parallel-layout", "E|t)*2|L"},
                                     2),
                          "unbalanced ')'"));
  CHECK(absl::StrContains(
      ValidError(
          {"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "*2|L"}, 2),
      "'*' must follow a layer or a (group) and precede a count"));
  CHECK(ValidError({"--override-opt-param-scheduler", "--use-checkpoint-opt_param-scheduler"}) ==
        "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler are exclusive");
  CHECK(ValidError({"--lr-warmup-fraction", "1.5"}) ==
        "--lr-warmup-fraction must be in [0, 1], got 1.5");
  CHECK(ValidError({"--make-vocab-size-divisible-by", "0"}) ==
        "--make-vocab-size-divisible-by must be >= 1, got 0");
  CHECK(ValidError({"--num-threads", "0"}) == "--num-threads must be >= 1, got 0");
  CHECK(absl::StrContains(ValidError({"--split", "1,2,3,4"}), "expected up to 3 weights"));
  CHECK(absl::StrContains(ValidError({"--split", "0,0,0"}), "expected up to 3 weights"));
  CHECK(ValidError({"--ffn-hidden-size", "33", "--tensor-model-parallel-size", "2",
                    "--global-batch-size", "2"},
                   2) ==
        "ffn hidden size (33) is not divisible by --tensor-model-parallel-size (2)");
  // Required flags, and the checks only reachable without the base command line.
  const Argv model = {"--num-layers",
                      "2",
                      "--hidden-size",
                      "8",
                      "--num-attention-heads",
                      "2",
                      "--seq-length",
                      "8",
                      "--max-position-embeddings",
                      "8",
                      "--micro-batch-size",
                      "1",
                      "--mock-data"};
  auto validate = [](Argv argv) {
    absl::StatusOr<MegatronArgs> a = ParseMegatronArgs(argv);
    REQUIRE(a.ok());
    return std::string(ValidateAndDeriveArgs(&*a, 1).message());
  };
  Argv argv = model;
  CHECK(validate(argv) == "give --train-iters or --train-samples (a positive number)");
  argv.insert(argv.end(), {"--train-iters", "5"});
  CHECK(validate(argv) == "--lr is required for training");
  argv.insert(argv.end(), {"--lr", "0.1"});
  CHECK(validate(argv) == "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
  argv = model;
  argv.insert(argv.end(),
              {"--skip-train", "--tokenizer-type", "NullTokenizer", "--vocab-size", "5"});
  CHECK(validate(argv).empty());  // evaluation-only runs need neither iterations nor --lr
  argv = model;
  argv.insert(argv.end(), {"--train-samples", "64", "--lr", "0.1", "--lr-decay-iters", "3"});
  CHECK(absl::StartsWith(validate(argv), "--lr-decay-iters needs iteration-based training"));
  argv = model;
  argv.insert(argv.end(), {"--train-samples", "64", "--lr", "0.1", "--lr-warmup-iters", "3"});
  CHECK(absl::StartsWith(validate(argv), "--lr-warmup-iters (3) needs iteration-based"));
  argv = model;
  argv.insert(argv.end(), {"--train-samples", "64", "--lr", "0.1", "--lr-warmup-fraction", "0.1",
                           "--lr-warmup-samples", "3"});
  CHECK(validate(argv) == "--lr-warmup-fraction (0.1) and --lr-warmup-samples (3) are exclusive");
  argv = model;
  argv[1] = "0";
  CHECK(validate(argv) == "--num-layers must be >= 1, got 0");
  argv = model;
  argv.erase(argv.begin() + 6, argv.begin() + 8);  // drop --seq-length
  CHECK(validate(argv) == "--seq-length is required");
  // --fp16 cannot be parsed; a caller that sets the field directly still gets an error.
  absl::StatusOr<MegatronArgs> direct = ParseMegatronArgs(BaseArgv());
  REQUIRE(direct.ok());
  direct->fp16 = true;
  CHECK(ValidateAndDeriveArgs(&*direct, 1).message() ==
        "--fp16 is not supported by MXMACA yet (use --bf16 or fp32)");
}

TEST_CASE("Megatron's examples/gpt3/train_gpt3_175b_distributed.sh command line") {
  // The flags of that script (NVIDIA/Megatron-LM, stored commit 157006d6), paths filled in.
  const Argv script = {"--num-layers",
                       "96",
                       "--hidden-size",
                       "12288",
                       "--num-attention-heads",
                       "96",
                       "--seq-length",
                       "2048",
                       "--max-position-embeddings",
                       "2048",
                       "--attention-backend",
                       "auto",
                       "--micro-batch-size",
                       "1",
                       "--global-batch-size",
                       "1536",
                       "--rampup-batch-size",
                       "16",
                       "16",
                       "5859375",
                       "--train-iters",
                       "500000",
                       "--weight-decay",
                       "0.1",
                       "--adam-beta1",
                       "0.9",
                       "--adam-beta2",
                       "0.95",
                       "--init-method-std",
                       "0.006",
                       "--clip-grad",
                       "1.0",
                       "--fp16",
                       "--lr",
                       "6.0e-5",
                       "--lr-decay-style",
                       "cosine",
                       "--min-lr",
                       "6.0e-6",
                       "--lr-warmup-fraction",
                       ".001",
                       "--lr-decay-iters",
                       "430000",
                       "--tensor-model-parallel-size",
                       "8",
                       "--pipeline-model-parallel-size",
                       "16",
                       "--data-path",
                       "/data/gpt_text_document",
                       "--vocab-file",
                       "/data/gpt2-vocab.json",
                       "--merge-file",
                       "/data/gpt2-merges.txt",
                       "--split",
                       "949,50,1",
                       "--log-interval",
                       "100",
                       "--save-interval",
                       "10000",
                       "--eval-interval",
                       "1000",
                       "--save",
                       "/ckpt",
                       "--load",
                       "/ckpt",
                       "--eval-iters",
                       "10",
                       "--tensorboard-dir",
                       "/tb"};
  // Batch ramp-up and fp16 are the two things MXMACA rejects in it.
  absl::StatusOr<MegatronArgs> parsed = ParseMegatronArgs(script);
  REQUIRE_FALSE(parsed.ok());
  CHECK(absl::StartsWith(parsed.status().message(), "--rampup-batch-size is a Megatron flag"));
  Argv supported;
  for (size_t i = 0; i < script.size(); ++i) {
    if (script[i] == "--fp16") continue;
    if (script[i] == "--rampup-batch-size") {
      i += 3;
      continue;
    }
    supported.push_back(script[i]);
  }
  parsed = ParseMegatronArgs(supported);
  REQUIRE(parsed.ok());
  CHECK(parsed->notices ==
        std::vector<std::string>{"notice: --attention-backend is accepted and has no effect in "
                                 "MXMACA (kernel and fusion choices are MXMACA's own)"});
  REQUIRE(ValidateAndDeriveArgs(&*parsed, 8 * 16).ok());
  CHECK(parsed->data_parallel_size == 1);
  CHECK(*parsed->ffn_hidden_size == 4 * 12288);
  CHECK(*parsed->kv_channels == 128);
  CHECK(*parsed->lr_decay_iters == 430000);
  CHECK(*parsed->lr_warmup_fraction == 0.001);
  CHECK(*parsed->split == "949,50,1");
  // The same script on 256 ranks gets dp = 2; 1536 is still divisible by 1 x 2.
  parsed = ParseMegatronArgs(supported);
  REQUIRE(parsed.ok());
  REQUIRE(ValidateAndDeriveArgs(&*parsed, 256).ok());
  CHECK(parsed->data_parallel_size == 2);
}


// Issue 22, finding 6: every optimizer and schedule flag is range-checked by name
// (Megatron's asserts and torch.optim's constructor checks), NaN and infinities included;
// before, --clip-grad nan and --adam-beta1 2 trained, --adam-beta2 -0.5 and --adam-eps nan
// were caught only by the NaN guard, and --eval-iters -1 failed as a negative sample count.
TEST_CASE("optimizer and schedule flags are range-checked by name") {
  struct Bad {
    Argv extra;
    const char* message;
  };
  const Bad cases[] = {
      {{"--clip-grad", "nan"}, "--clip-grad nan: expected a finite number >= 0"},
      {{"--clip-grad", "-1"}, "--clip-grad -1: expected a finite number >= 0"},
      {{"--adam-beta1", "2"}, "--adam-beta1 2: expected a finite number in [0, 1)"},
      {{"--adam-beta1", "1"}, "--adam-beta1 1: expected a finite number in [0, 1)"},
      {{"--adam-beta2", "-0.5"}, "--adam-beta2 -0.5: expected a finite number in [0, 1)"},
      {{"--adam-eps", "nan"}, "--adam-eps nan: expected a finite number > 0"},
      {{"--adam-eps", "0"}, "--adam-eps 0: expected a finite number > 0"},
      {{"--adam-eps", "inf"}, "--adam-eps inf: expected a finite number > 0"},
      {{"--sgd-momentum", "-0.1"}, "--sgd-momentum -0.1: expected a finite number >= 0"},
      {{"--lr", "nan"}, "--lr nan: expected a finite number >= 0"},
      {{"--lr", "-0.001"}, "--lr -0.001: expected a finite number >= 0"},
      {{"--min-lr", "-1"}, "--min-lr -1: expected a finite number >= 0"},
      {{"--min-lr", "nan"}, "--min-lr nan: expected a finite number >= 0"},
      {{"--lr-warmup-init", "0.1"}, "--lr-warmup-init (0.1) must be <= --lr (0.001)"},
      {{"--lr-warmup-init", "-1"}, "--lr-warmup-init -1: expected a finite number >= 0"},
      {{"--lr-warmup-fraction", "nan"}, "--lr-warmup-fraction must be in [0, 1], got nan"},
      {{"--lr-warmup-iters", "-1"}, "--lr-warmup-iters must be >= 0, got -1"},
      {{"--lr-decay-iters", "0"}, "--lr-decay-iters must be >= 1, got 0"},
      {{"--weight-decay", "-0.1"}, "--weight-decay -0.1: expected a finite number >= 0"},
      {{"--weight-decay", "inf"}, "--weight-decay inf: expected a finite number >= 0"},
      {{"--weight-decay-incr-style", "linear", "--start-weight-decay", "-1",
        "--end-weight-decay", "0.1"},
       "--start-weight-decay -1: expected a finite number >= 0"},
      {{"--weight-decay-incr-style", "linear", "--start-weight-decay", "0.1",
        "--end-weight-decay", "nan"},
       "--end-weight-decay nan: expected a finite number >= 0"},
      {{"--weight-decay-incr-style", "linear", "--start-weight-decay", "0.1",
        "--end-weight-decay", "0.01"},
       "--end-weight-decay (0.01) must be >= --start-weight-decay (0.1)"},
      {{"--eval-iters", "-1"}, "--eval-iters must be >= 0, got -1"},
      {{"--eval-interval", "0"}, "--eval-interval must be >= 1, got 0"},
      {{"--lr-warmup-iters", "10"},
       "--lr-warmup-iters gives 10 warmup iterations, which must be fewer than the 10 decay "
       "iterations (--lr-decay-iters, default --train-iters)"},
      {{"--lr-warmup-fraction", "1"},
       "--lr-warmup-fraction gives 10 warmup iterations, which must be fewer than the 10 "
       "decay iterations (--lr-decay-iters, default --train-iters)"},
  };
  for (const Bad& bad : cases) {
    INFO(absl::StrJoin(bad.extra, " "));
    CHECK(ValidError(bad.extra) == bad.message);
  }
  // The edges that are allowed: no clipping, no decay, beta 0, eval off.
  ValidOk({"--clip-grad", "0", "--weight-decay", "0", "--adam-beta1", "0", "--adam-beta2", "0",
           "--eval-iters", "0", "--lr", "0", "--lr-warmup-iters", "9"});
}

}  // namespace
}  // namespace mxmaca::api
