// `mxmaca train` with Megatron's legacy checkpoint format (--ckpt-format torch):
//  - a run stopped at iteration 4 saves iter_0000004/mp_rank_*/model_optim_rng.pt (+ the
//    tracker, no MXMACA files left behind); Debian's torch.load reads every rank file with
//    Megatron's top-level entries and GPTModel keys; --load of it resumes so that
//    iterations 5..8 equal the uninterrupted run's losses bit for bit (weights, Adam
//    moments and step, iteration, consumed samples and the scheduler from the Megatron
//    files) — single device, TP2 x PP2 with SwiGLU and the local layer spec, and MoE
//    (TEGroupedMLP keys, the router's expert bias), and PP2 with virtual stages (model0,
//    model1); the TP2 x PP2 files also load into a
//    single-device run, whose losses match within 1e-5 relative;
//  - a Megatron checkpoint with the distributed optimizer's distrib_optim.pt resumes
//    exactly as the same state in the non-distributed layout;
//  - --ckpt-format torch_dist given explicitly is refused by name; loading a Megatron
//    checkpoint into a model of another size names the field.
#include <catch2/catch.hpp>

#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "api/train/train_command.h"
#include "tests/integration/tiny_corpus.h"

namespace mxmaca::testing {
namespace {

std::vector<std::string> With(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

actors::TrainingSummary MustTrain(const std::vector<std::string>& args,
                                  std::string* out = nullptr) {
  std::string log;
  auto s = api::Train(args, [&](const std::string& line) { log += line + "\n"; });
  INFO(log);
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  INFO(s->error);
  REQUIRE(s->ok);
  if (out != nullptr) *out = log;
  return *s;
}

std::string Python(const std::string& script, int* code) {
  const std::string cmd = "/usr/bin/python3 -c '" + script + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// Checks every rank file with torch.load: Megatron's entries and the keys of the layer.
void CheckWithTorch(const std::string& iter_dir, const std::vector<std::string>& rank_dirs,
                    const std::string& some_key) {
  for (const std::string& r : rank_dirs) {
    const std::string file = iter_dir + "/" + r + "/model_optim_rng.pt";
    int code = 0;
    const std::string out = Python(
        "import torch, sys\n"
        "sd = torch.load(\"" + file + "\")\n"
        "need = [\"args\", \"checkpoint_version\", \"iteration\", \"optimizer\", \"opt_param_scheduler\"]\n"
        "assert (\"model\" in sd) != (\"model0\" in sd and \"model1\" in sd), list(sd)\n"
        "assert all(k in sd for k in need), list(sd)\n"
        "assert sd[\"checkpoint_version\"] == 3.0 and sd[\"iteration\"] == 4\n"
        "assert sd[\"args\"].consumed_train_samples == 16, sd[\"args\"].consumed_train_samples\n"
        "sched = [\"max_lr\", \"lr_warmup_steps\", \"num_steps\", \"lr_decay_style\", \"lr_decay_steps\",\n"
        "         \"min_lr\", \"start_wd\", \"end_wd\", \"wd_incr_style\", \"wd_incr_steps\"]\n"
        "assert set(sched) <= set(sd[\"opt_param_scheduler\"]), sd[\"opt_param_scheduler\"]\n"
        "assert sd[\"opt_param_scheduler\"][\"num_steps\"] == 16\n"
        "chunks = [sd[\"model\"]] if \"model\" in sd else [sd[\"model0\"], sd[\"model1\"]]\n"
        "keys = [k for c in chunks for k in c]\n"
        "print(\"KEYS\", \" \".join(keys))\n",
        &code);
    INFO(file << "\n" << out);
    REQUIRE(code == 0);
    if (r == rank_dirs.front()) REQUIRE(out.find(some_key) != std::string::npos);
  }
}

// ResumeMatches: returns the uninterrupted run's losses.
std::vector<double> ResumeMatches(const std::vector<std::string>& base, const std::string& dir,
                                  const std::vector<std::string>& rank_dirs, const std::string& some_key) {
  const actors::TrainingSummary full = MustTrain(base);
  REQUIRE(full.train_losses.size() == 8);
  const std::string ckpt = dir + "/megatron";
  const actors::TrainingSummary first = MustTrain(
      With(base, {"--save", ckpt, "--ckpt-format", "torch", "--save-interval", "100", "--exit-interval", "4"}));
  REQUIRE(first.last_iteration == 4);
  namespace fs = std::filesystem;
  REQUIRE(fs::exists(ckpt + "/latest_checkpointed_iteration.txt"));
  REQUIRE(!fs::exists(ckpt + "/.mxmaca-torch-staging/iter_0000004"));
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(ckpt + "/iter_0000004")) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  REQUIRE(found == rank_dirs);
  CheckWithTorch(ckpt + "/iter_0000004", rank_dirs, some_key);

  const actors::TrainingSummary resumed = MustTrain(With(base, {"--load", ckpt}));
  REQUIRE(resumed.first_iteration == 4);
  REQUIRE(resumed.train_losses.size() == 4);
  for (int i = 0; i < 4; ++i) {
    INFO("iteration " << 5 + i);
    CHECK(resumed.train_losses[i] == full.train_losses[4 + i]);  // bit-identical
  }
  return full.train_losses;
}

TEST_CASE("Megatron legacy checkpoint: save, torch.load, resume bit for bit (single device)") {
  const std::string dir = TempDir("megatron_ckpt_dense");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 11);
  const std::vector<double> full =
      ResumeMatches(TinyTrainArgs(prefix, dir + "/cache"), dir, {"mp_rank_00"},
                    "decoder.layers.1.self_attention.linear_qkv.layer_norm_weight");
  // --use-checkpoint-args reads the model flags from the file's 'args' namespace: without
  // them on the command line the resume is the same.
  std::vector<std::string> no_model;
  const std::vector<std::string> base = TinyTrainArgs(prefix, dir + "/cache");
  for (size_t i = 0; i < base.size(); ++i) {
    const std::string& f = base[i];
    if (f == "--num-layers" || f == "--hidden-size" || f == "--num-attention-heads" ||
        f == "--seq-length" || f == "--max-position-embeddings") {
      ++i;  // and its value
      continue;
    }
    no_model.push_back(f);
  }
  std::string log;
  const actors::TrainingSummary resumed =
      MustTrain(With(no_model, {"--load", dir + "/megatron", "--use-checkpoint-args"}), &log);
  CHECK(log.find("Setting num_layers to 2 from checkpoint") != std::string::npos);
  REQUIRE(resumed.first_iteration == 4);
  REQUIRE(resumed.train_losses.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(resumed.train_losses[i] == full[4 + i]);
}

TEST_CASE("Megatron legacy checkpoint: TP2 x PP2, SwiGLU, local spec, resume bit for bit") {
  const std::string dir = TempDir("megatron_ckpt_tp2pp2");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 11);
  const std::vector<std::string> single = With(TinyTrainArgs(prefix, dir + "/cache"),
                                               {"--swiglu", "--transformer-impl", "local", "--micro-batch-size", "1"});
  const std::vector<double> full = ResumeMatches(
      With(single, {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--world-size", "4"}),
      dir, {"mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000", "mp_rank_01_001"},
      "decoder.layers.0.input_layernorm.weight");
  // The TP2 x PP2 files merge into a single-device run: the same losses up to the
  // arithmetic order of the TP reductions (docs/ARCHITECTURE.md: 1e-5 relative per step).
  const actors::TrainingSummary merged = MustTrain(With(single, {"--load", dir + "/megatron"}));
  REQUIRE(merged.first_iteration == 4);
  REQUIRE(merged.train_losses.size() == 4);
  for (int i = 0; i < 4; ++i) {
    INFO("iteration " << 5 + i);
    CHECK(std::abs(merged.train_losses[i] - full[4 + i]) <= 1e-5 * std::abs(full[4 + i]));
  }
}

TEST_CASE("Megatron legacy checkpoint: virtual pipeline stages (model0, model1), resume bit for bit") {
  const std::string dir = TempDir("megatron_ckpt_vp");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 11);
  std::vector<std::string> args = TinyTrainArgs(prefix, dir + "/cache");
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--num-layers") args[i + 1] = "4";
  }
  ResumeMatches(With(args, {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                            "--world-size", "2", "--micro-batch-size", "1"}),
                dir, {"mp_rank_00_000", "mp_rank_00_001"}, "decoder.layers.0.self_attention.linear_qkv.weight");
}

// (EP 1: a resume with --expert-model-parallel-size > 1 fails in ModelConfigFromCheckpointArgs
// for either format — it re-parses the stored argv without the world size.)
TEST_CASE("Megatron legacy checkpoint: MoE (grouped GEMM keys, expert bias), resume bit for bit") {
  const std::string dir = TempDir("megatron_ckpt_moe");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 11);
  ResumeMatches(With(TinyTrainArgs(prefix, dir + "/cache"),
                     {"--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48",
                      "--moe-grouped-gemm", "--moe-router-enable-expert-bias", "--moe-router-score-function",
                      "sigmoid"}),
                dir, {"mp_rank_00"}, "decoder.layers.0.mlp.experts.linear_fc1.weight3");
}

// A Megatron run with --use-distributed-optimizer keeps Adam's state in distrib_optim.pt:
// make_megatron_checkpoint.py torch.saves the same random state (seed 11) once that way
// (DP2, buckets of 300 elements) and once as the non-distributed optimizer does; --load of
// either must continue bit for bit alike, and unlike a start without the optimizer state.
TEST_CASE("Megatron legacy checkpoint: distrib_optim.pt resumes as the same state without it") {
  const std::string dir = TempDir("megatron_ckpt_distopt");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 13);
  const std::string make =
      "/usr/bin/python3 actors/checkpoint/megatron/make_megatron_checkpoint.py ";
  const std::string model = " spec=local vocab=1001 layers=4 hidden=8 heads=2 ffn=16";
  for (const std::string& c : {std::string("plain"), std::string("distopt=1 dp=2 bucket=300")}) {
    const std::string cmd = make + dir + "/" + (c == "plain" ? "plain" : "dist") + model +
                            (c == "plain" ? "" : " " + c) + " 2>&1";
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  REQUIRE(std::filesystem::exists(dir + "/dist/iter_0000005/mp_rank_00/distrib_optim.pt"));
  const std::vector<std::string> base = {"--num-layers",
                                         "4",
                                         "--hidden-size",
                                         "8",
                                         "--num-attention-heads",
                                         "2",
                                         "--ffn-hidden-size",
                                         "16",
                                         "--seq-length",
                                         "16",
                                         "--max-position-embeddings",
                                         "16",
                                         "--position-embedding-type",
                                         "rope",
                                         "--transformer-impl",
                                         "local",
                                         "--micro-batch-size",
                                         "2",
                                         "--global-batch-size",
                                         "4",
                                         "--train-iters",
                                         "8",
                                         "--lr",
                                         "1e-3",
                                         "--min-lr",
                                         "1e-4",
                                         "--lr-decay-style",
                                         "cosine",
                                         "--weight-decay",
                                         "0.1",
                                         "--clip-grad",
                                         "1.0",
                                         "--seed",
                                         "7",
                                         "--data-path",
                                         prefix,
                                         "--split",
                                         "90,10,0",
                                         "--data-cache-path",
                                         dir + "/cache",
                                         "--tokenizer-type",
                                         "NullTokenizer",
                                         "--vocab-size",
                                         std::to_string(kTinyVocab),
                                         "--make-vocab-size-divisible-by",
                                         "1",
                                         "--eval-iters",
                                         "0",
                                         "--log-interval",
                                         "1",
                                         "--num-threads",
                                         "1",
                                         "--use-checkpoint-opt_param-scheduler"};
  std::string plain_log, dist_log;
  const actors::TrainingSummary plain =
      MustTrain(With(base, {"--load", dir + "/plain"}), &plain_log);
  const actors::TrainingSummary dist = MustTrain(With(base, {"--load", dir + "/dist"}), &dist_log);
  CHECK(plain_log.find("Adam's state (step 5) from model_optim_rng.pt") != std::string::npos);
  CHECK(dist_log.find("Adam's state (step 5) from distrib_optim.pt") != std::string::npos);
  const actors::TrainingSummary fresh =
      MustTrain(With(base, {"--load", dir + "/plain", "--no-load-optim"}));
  REQUIRE(plain.first_iteration == 5);
  REQUIRE(dist.first_iteration == 5);
  REQUIRE(plain.train_losses.size() == 3);
  CHECK(dist.train_losses == plain.train_losses);  // bit for bit
  CHECK(dist.grad_norms == plain.grad_norms);
  CHECK(fresh.train_losses != plain.train_losses);  // the moments matter
}

// And MXMACA writes distrib_optim.pt itself when it trains with the distributed optimizer:
// PP2 x DP2 with buckets of 300 elements on the first stage (the tied embedding in its own
// bucket), saved at iteration 4 in Megatron's format, resumed from it bit for bit, the
// state read back from distrib_optim.pt (the file's layout is checked against the Python
// transcription of Megatron-Core's in //actors/checkpoint/megatron:megatron_checkpoint_test).
TEST_CASE("Megatron legacy checkpoint: a distributed-optimizer run writes distrib_optim.pt") {
  const std::string dir = TempDir("megatron_ckpt_distopt_write");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 14);
  const std::vector<std::string> base =
      With(TinyTrainArgs(prefix, dir + "/cache"),
           {"--pipeline-model-parallel-size", "2", "--world-size", "4", "--micro-batch-size", "1",
            "--use-distributed-optimizer", "--overlap-grad-reduce", "--ddp-bucket-size", "300"});
  ResumeMatches(base, dir, {"mp_rank_00_000", "mp_rank_00_001"},
                "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight");
  for (const char* rank : {"mp_rank_00_000", "mp_rank_00_001"}) {
    INFO(rank);
    CHECK(std::filesystem::exists(dir + "/megatron/iter_0000004/" + rank + "/distrib_optim.pt"));
  }
  std::string log;
  MustTrain(With(base, {"--load", dir + "/megatron"}), &log);
  CHECK(log.find("from distrib_optim.pt") != std::string::npos);
}

TEST_CASE("--ckpt-format torch_dist is refused by name; a model of another size is refused") {
  const std::string dir = TempDir("megatron_ckpt_errors");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 100, 12);
  const auto base = TinyTrainArgs(prefix, dir + "/cache");
  auto s = api::Train(With(base, {"--save", dir + "/x", "--ckpt-format", "torch_dist"}), [](const std::string&) {});
  REQUIRE(!s.ok());
  REQUIRE(std::string(s.status().message()).find("torch_dist") != std::string::npos);

  const std::string ckpt = dir + "/megatron";
  MustTrain(With(base, {"--save", ckpt, "--ckpt-format", "torch", "--save-interval", "3", "--train-iters", "3", "--lr-warmup-iters", "1", "--eval-iters", "0"}));
  std::vector<std::string> bigger = base;
  for (size_t i = 0; i + 1 < bigger.size(); ++i) {
    if (bigger[i] == "--hidden-size") bigger[i + 1] = "128";
  }
  auto r = api::Train(With(bigger, {"--load", ckpt}), [](const std::string&) {});
  REQUIRE(!r.ok());
  const std::string msg(r.status().message());
  INFO(msg);
  REQUIRE(msg.find("--hidden-size is 128") != std::string::npos);
  REQUIRE(msg.find(ckpt) != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::testing
