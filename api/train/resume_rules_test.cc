// Tests of resume_rules.h against Megatron's behaviour (core_v0.19.0) written out by hand:
// OptimizerParamScheduler.load_state_dict's _check_and_set, _load_base_checkpoint's choice
// of checkpoint (--ckpt-step, non-persistent vs persistent) and the flag checks.
#include "api/train/resume_rules.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/train/checkpoint_args.h"
#include "api/train/train_setup.h"

namespace mxmaca::api {
namespace {

MegatronArgs Parse(std::vector<std::string> argv) {
  absl::StatusOr<MegatronArgs> a = ParseMegatronArgs(argv);
  REQUIRE(a.ok());
  return *a;
}

MegatronArgs Run(std::vector<std::string> more) {
  std::vector<std::string> argv = {"--train-iters", "8", "--global-batch-size", "4",
                                   "--lr", "1e-3", "--min-lr", "1e-4",
                                   "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
                                   "--weight-decay", "0.1"};
  argv.insert(argv.end(), more.begin(), more.end());
  MegatronArgs a = Parse(argv);
  a.lr_decay_iters = a.lr_decay_iters.value_or(*a.train_iters);  // validate_args derives it
  a.start_weight_decay = a.weight_decay;
  a.end_weight_decay = a.weight_decay;
  return a;
}

// The state_dict Megatron's scheduler writes for Run({}) after 3 iterations of 4 samples.
nlohmann::json StoredState() {
  return {{"max_lr", 1e-3},          {"lr_warmup_steps", 8},   {"num_steps", 12},
          {"lr_decay_style", "cosine"}, {"lr_decay_steps", 32}, {"min_lr", 1e-4},
          {"start_wd", 0.1},         {"end_wd", 0.1},          {"wd_incr_style", "constant"},
          {"wd_incr_steps", 32},     {"decoupled_lr", nullptr}, {"decoupled_min_lr", nullptr}};
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void Tracker(const std::string& dir, int64_t iteration) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/latest_checkpointed_iteration.txt") << iteration;
}

TEST_CASE("the same schedule restores the step count in samples") {
  const MegatronArgs a = Run({});
  const auto flags = SchedulerConfigFromArgs(a).value();
  CHECK(flags.lr_decay_steps == 32);  // 8 iterations x 4 samples
  CHECK(flags.lr_warmup_steps == 8);
  std::vector<std::string> log;
  const RestoredScheduler r = RestoreSchedulerState(StoredState(), flags, a, "D", &log).value();
  CHECK(r.num_steps == 12);
  CHECK(r.config.lr_decay_steps == 32);
  CHECK(log.front() == " > using checkpoint value 0.001 for learning rate");
}

TEST_CASE("a changed --train-iters or --global-batch-size is an error naming the value") {
  for (const auto& [more, key, flag, stored] :
       std::vector<std::tuple<std::vector<std::string>, std::string, std::string, std::string>>{
           {{"--train-iters", "16"}, "lr_decay_steps", "64", "32"},
           {{"--global-batch-size", "8"}, "lr_warmup_steps", "16", "8"},
           {{"--lr", "2e-3"}, "max_lr", "0.002", "0.001"},
           {{"--lr-decay-style", "linear"}, "lr_decay_style", "\"linear\"", "\"cosine\""}}) {
    const MegatronArgs a = Run(more);
    std::vector<std::string> log;
    const absl::StatusOr<RestoredScheduler> r =
        RestoreSchedulerState(StoredState(), SchedulerConfigFromArgs(a).value(), a, "D", &log);
    INFO(more.front());
    REQUIRE(!r.ok());
    const std::string m(r.status().message());
    INFO(m);
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(m.find(absl::StrCat(key, " ", flag)) != std::string::npos);
    CHECK(m.find(absl::StrCat("the checkpoint in D has ", stored)) != std::string::npos);
    CHECK(m.find("--override-opt_param-scheduler") != std::string::npos);
  }
  // The flag that gives the value is named.
  const MegatronArgs a = Run({"--train-iters", "16"});
  std::vector<std::string> log;
  const std::string m(RestoreSchedulerState(StoredState(), SchedulerConfigFromArgs(a).value(),
                                            a, "D", &log)
                          .status()
                          .message());
  CHECK(m.rfind("--lr-decay-iters (default --train-iters) x --global-batch-size gives", 0) == 0);
}

TEST_CASE("--override-opt_param-scheduler: the flags win, the step count is restored") {
  const MegatronArgs a = Run({"--train-iters", "16", "--override-opt_param-scheduler"});
  std::vector<std::string> log;
  const RestoredScheduler r =
      RestoreSchedulerState(StoredState(), SchedulerConfigFromArgs(a).value(), a, "D", &log)
          .value();
  CHECK(r.num_steps == 12);
  CHECK(r.config.lr_decay_steps == 64);
  CHECK(r.config.wd_incr_steps == 64);
  CHECK(log.front() == " > overriding learning rate value to 0.001");
}

TEST_CASE("--use-checkpoint-opt_param-scheduler: the checkpoint's schedule replaces the flags'") {
  const MegatronArgs a = Run({"--train-iters", "16", "--lr", "5e-3", "--lr-decay-style", "linear",
                              "--use-checkpoint-opt_param-scheduler"});
  std::vector<std::string> log;
  const RestoredScheduler r =
      RestoreSchedulerState(StoredState(), SchedulerConfigFromArgs(a).value(), a, "D", &log)
          .value();
  CHECK(r.num_steps == 12);
  CHECK(r.config.max_lr == 1e-3);
  CHECK(r.config.lr_decay_steps == 32);
  CHECK(r.config.lr_decay_style == layers::LrDecayStyle::kCosine);
}

TEST_CASE("the decoupled learning rate is part of the stored schedule") {
  const MegatronArgs a = Run({"--decoupled-lr", "5e-3"});
  std::vector<std::string> log;
  const absl::StatusOr<RestoredScheduler> r =
      RestoreSchedulerState(StoredState(), SchedulerConfigFromArgs(a).value(), a, "D", &log);
  REQUIRE(!r.ok());
  CHECK(std::string(r.status().message()).find("--decoupled-lr gives decoupled_lr 0.005 but "
                                               "the checkpoint in D has None") !=
        std::string::npos);
}

TEST_CASE("a malformed stored schedule is DataLoss") {
  const MegatronArgs a = Run({});
  nlohmann::json bad = StoredState();
  bad.erase("num_steps");
  std::vector<std::string> log;
  CHECK(RestoreSchedulerState(bad, SchedulerConfigFromArgs(a).value(), a, "D", &log)
            .status()
            .code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("LocateCheckpoint: the tracker, --ckpt-step and the newer non-persistent one") {
  const std::string dir = FreshDir("resume_locate");
  const std::string load = dir + "/ckpt";
  std::vector<std::string> notices;
  MegatronArgs a = Parse({"--load", load});
  CHECK(!LocateCheckpoint(a, &notices).value().has_value());  // nothing there
  Tracker(load, 20);
  CHECK(LocateCheckpoint(a, &notices).value()->iteration == 20);
  a.ckpt_step = 10;
  CHECK(LocateCheckpoint(a, &notices).value()->iteration == 10);
  CHECK(LocateCheckpoint(a, &notices).value()->dir == load);
  // Global non-persistent checkpoints in <load>/non_persistent by default.
  a = Parse({"--load", load, "--non-persistent-ckpt-type", "global"});
  Tracker(load + "/non_persistent", 24);
  std::optional<CheckpointToLoad> c = LocateCheckpoint(a, &notices).value();
  CHECK(c->non_persistent);
  CHECK(c->iteration == 24);
  CHECK(c->dir == load + "/non_persistent");
  Tracker(load + "/non_persistent", 16);  // older than the persistent one
  notices.clear();
  c = LocateCheckpoint(a, &notices).value();
  CHECK(!c->non_persistent);
  CHECK(c->iteration == 20);
  CHECK(notices.back().find("non-persistent checkpoints are older") != std::string::npos);
  // --non-persistent-global-ckpt-dir names another directory; equal iterations prefer it.
  a = Parse({"--load", load, "--non-persistent-ckpt-type", "global",
             "--non-persistent-global-ckpt-dir", dir + "/np"});
  Tracker(dir + "/np", 20);
  CHECK(LocateCheckpoint(a, &notices).value()->dir == dir + "/np");
  // Without the type, the non-persistent directory is not looked at.
  a = Parse({"--load", load});
  CHECK(!LocateCheckpoint(a, &notices).value()->non_persistent);
}

TEST_CASE("CheckResumeArgs names the flag") {
  auto message = [](std::vector<std::string> argv, bool multi = false) {
    return std::string(CheckResumeArgs(Parse(argv), multi).message());
  };
  CHECK(message({"--non-persistent-ckpt-type", "in_memory"})
            .find("--non-persistent-ckpt-type in_memory") != std::string::npos);
  CHECK(message({"--non-persistent-ckpt-type", "local"})
            .find("--non-persistent-local-ckpt-dir") != std::string::npos);
  CHECK(message({"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/x"},
                true)
            .find("one process") != std::string::npos);
  CHECK(message({"--non-persistent-save-interval", "2"}).find("--non-persistent-ckpt-type") !=
        std::string::npos);
  CHECK(message({"--non-persistent-save-interval", "0", "--non-persistent-ckpt-type", "global"})
            .find("expected >= 1") != std::string::npos);
  CHECK(message({"--use-checkpoint-args"}).find("requires --load") != std::string::npos);
  CHECK(message({"--ckpt-step", "-1"}).find("--ckpt-step -1") != std::string::npos);
  CHECK(CheckResumeArgs(Parse({"--non-persistent-save-interval", "2", "--non-persistent-ckpt-type",
                               "global", "--load", "x", "--use-checkpoint-args"}),
                        true)
            .ok());
}

TEST_CASE("ApplyCheckpointArgs: Megatron's load_args_from_checkpoint rules") {
  MegatronArgs saved = Parse({"--num-layers", "3", "--hidden-size", "96", "--num-attention-heads",
                              "6", "--seq-length", "64", "--max-position-embeddings", "128",
                              "--swiglu", "--normalization", "RMSNorm",
                              "--position-embedding-type", "rope", "--disable-bias-linear",
                              "--hidden-dropout", "0.0", "--tokenizer-type", "NullTokenizer"});
  saved.ffn_hidden_size = 256;  // as validate_args derives
  saved.kv_channels = 16;
  layers::GptConfig model;
  const nlohmann::json stored = CheckpointArgsJson({"--num-layers", "3"}, saved, model);
  // The new command line gives --hidden-size (kept: not forced) and --no-swiglu-free
  // defaults for the forced ones (replaced).
  MegatronArgs a = Parse({"--hidden-size", "128", "--attention-dropout", "0.2"});
  const std::vector<std::string> log = ApplyCheckpointArgs(stored, &a).value();
  CHECK(*a.num_layers == 3);
  CHECK(*a.hidden_size == 128);  // given on the command line, not forced
  CHECK(*a.ffn_hidden_size == 256);
  CHECK(*a.kv_channels == 16);
  CHECK(*a.seq_length == 64);
  CHECK(*a.max_position_embeddings == 128);
  CHECK(a.swiglu);
  CHECK(a.normalization == "RMSNorm");
  CHECK(a.position_embedding_type == "rope");
  CHECK(!a.add_bias_linear);
  CHECK(a.hidden_dropout == 0.0);
  CHECK(a.attention_dropout == 0.1);  // forced: the checkpoint's (Megatron's default)
  CHECK(*a.tokenizer_type == "NullTokenizer");
  CHECK(!a.num_experts.has_value());
  CHECK(std::find(log.begin(), log.end(), "Setting num_layers to 3 from checkpoint") != log.end());
  CHECK(std::find(log.begin(), log.end(), "Checkpoint did not provide arguments num_experts") !=
        log.end());
  // --no-use-tokenizer-model-from-checkpoint-args keeps the command line's tokenizer.
  MegatronArgs b = Parse({"--tokenizer-type", "GPT2BPETokenizer",
                          "--no-use-tokenizer-model-from-checkpoint-args"});
  REQUIRE(ApplyCheckpointArgs(stored, &b).ok());
  CHECK(*b.tokenizer_type == "GPT2BPETokenizer");
  // A checkpoint from before "megatron_args": its argv is read.
  nlohmann::json old = stored;
  old.erase("megatron_args");
  old["argv"] = {"--num-layers", "5", "--swiglu"};
  MegatronArgs c = Parse({});
  REQUIRE(ApplyCheckpointArgs(old, &c).ok());
  CHECK(c.swiglu);
}

}  // namespace
}  // namespace mxmaca::api
