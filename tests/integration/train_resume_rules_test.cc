// The resume rules of `mxmaca train --load` end to end (api/train/resume_rules.h), against
// Megatron's behaviour (core_v0.19.0) and a hand computation of its schedule:
//  - a changed --train-iters / --global-batch-size is an error naming the value, unless
//    --override-opt_param-scheduler (the flags' schedule continues from the stored sample
//    count) or --use-checkpoint-opt_param-scheduler (the checkpoint's schedule continues);
//  - --no-load-optim restarts the schedule, --finetune restarts the iteration;
//  - --ckpt-step loads an older iteration; a newer non-persistent checkpoint wins;
//  - --use-checkpoint-args takes the model's shape from the checkpoint;
//  - --decoupled-lr 0 freezes exactly the embedding and output weights.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_retention.h"
#include "api/train/train_command.h"
#include "tests/integration/tiny_corpus.h"

namespace mxmaca::testing {
namespace {

std::vector<std::string> With(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

struct Run {
  actors::TrainingSummary summary;
  std::vector<double> lrs;               // per iteration run, as logged
  std::vector<int64_t> consumed;         // consumed samples after each iteration
  std::string log;
};

Run MustTrain(const std::vector<std::string>& args) {
  Run r;
  auto s = api::Train(
      args, [&](const std::string& line) { r.log += line + "\n"; },
      [&](const actors::IterationLogRecord& rec) {
        r.lrs.push_back(rec.learning_rate);
        r.consumed.push_back(rec.consumed_samples);
      });
  INFO(r.log);
  INFO((s.ok() ? std::string() : std::string(s.status().message())));
  REQUIRE(s.ok());
  INFO(s->error);
  REQUIRE(s->ok);
  r.summary = *s;
  return r;
}

std::string TrainError(const std::vector<std::string>& args) {
  auto s = api::Train(args, [](const std::string&) {});
  if (!s.ok()) return std::string(s.status().message());
  return s->ok ? "" : s->error;
}

// Megatron's get_lr (cosine, linear warmup from 0) at `n` samples, written out by hand.
double CosineLr(int64_t n, double max_lr, double min_lr, int64_t warmup, int64_t decay) {
  if (warmup > 0 && n <= warmup) return max_lr * static_cast<double>(n) / warmup;
  if (n > decay) return min_lr;
  const double ratio = static_cast<double>(n - warmup) / static_cast<double>(decay - warmup);
  return min_lr + 0.5 * (std::cos(M_PI * ratio) + 1.0) * (max_lr - min_lr);
}

// One corpus for every test case, its uninterrupted 8-iteration run and a checkpoint of
// the run stopped (and saved) after iteration 4, made once (the test cases only read it).
struct Fixture {
  std::string dir, ckpt;
  std::vector<std::string> base;  // TinyTrainArgs: 8 iterations x 4 samples, warmup 2 iters
  Run full;
};

const Fixture& Shared() {
  static const Fixture* f = [] {
    auto* x = new Fixture;
    x->dir = TempDir("resume_rules");
    MakeTinyCorpus(x->dir + "/tiny", 200, 21);
    x->base = TinyTrainArgs(x->dir + "/tiny", x->dir + "/cache");
    x->ckpt = x->dir + "/ckpt";
    x->full = MustTrain(x->base);
    MustTrain(With(x->base, {"--save", x->ckpt, "--save-interval", "100", "--exit-interval", "4"}));
    return x;
  }();
  return *f;
}

TEST_CASE("a changed --train-iters on resume: error, --override or --use-checkpoint") {
  const Fixture& f = Shared();
  const Run& full = f.full;
  REQUIRE(full.lrs.size() == 8);
  // The convention checked once: the logged lr of iteration k is get_lr(k x 4 samples), decay
  // over 8 x 4 = 32 samples, warmup 2 x 4 = 8.
  for (int k = 1; k <= 8; ++k) {
    CHECK(full.lrs[k - 1] == Approx(CosineLr(4 * k, 1e-3, 1e-4, 8, 32)).epsilon(1e-12));
  }
  const std::vector<std::string> longer = With(f.base, {"--load", f.ckpt, "--train-iters", "12"});
  const std::string error = TrainError(longer);
  INFO(error);
  CHECK(error.find("lr_decay_steps 48 (samples) but the checkpoint in") != std::string::npos);
  CHECK(error.find(" has 32") != std::string::npos);
  CHECK(error.find("--override-opt_param-scheduler") != std::string::npos);

  // Flags win: decay over 12 x 4 = 48 samples, continuing at sample 16.
  const Run over = MustTrain(With(longer, {"--override-opt_param-scheduler"}));
  REQUIRE(over.summary.first_iteration == 4);
  REQUIRE(over.lrs.size() == 8);
  for (int k = 5; k <= 12; ++k) {
    INFO("iteration " << k);
    CHECK(over.lrs[k - 5] == Approx(CosineLr(4 * k, 1e-3, 1e-4, 8, 48)).epsilon(1e-12));
  }
  CHECK(over.consumed.front() == 20);

  // Checkpoint wins: the 32-sample schedule continues (min_lr past its end).
  const Run keep = MustTrain(With(longer, {"--use-checkpoint-opt_param-scheduler"}));
  REQUIRE(keep.lrs.size() == 8);
  for (int k = 5; k <= 12; ++k) {
    INFO("iteration " << k);
    CHECK(keep.lrs[k - 5] == Approx(CosineLr(4 * k, 1e-3, 1e-4, 8, 32)).epsilon(1e-12));
  }
}

TEST_CASE("a changed --global-batch-size on resume continues the schedule in samples") {
  const Fixture& f = Shared();
  const std::vector<std::string> bigger =
      With(f.base, {"--load", f.ckpt, "--global-batch-size", "8"});
  CHECK(TrainError(bigger).find("lr_warmup_steps 16 (samples) but the checkpoint") !=
        std::string::npos);
  // Megatron: consumed samples restored (16), each iteration now adds 8; the flags'
  // schedule (warmup 2 x 8, decay 8 x 8 samples) at the restored sample count.
  const Run r = MustTrain(With(bigger, {"--override-opt_param-scheduler"}));
  REQUIRE(r.summary.first_iteration == 4);
  REQUIRE(r.lrs.size() == 4);
  for (int i = 0; i < 4; ++i) {
    const int64_t samples = 16 + 8 * (i + 1);
    INFO("iteration " << 5 + i);
    CHECK(r.consumed[i] == samples);
    CHECK(r.lrs[i] == Approx(CosineLr(samples, 1e-3, 1e-4, 16, 64)).epsilon(1e-12));
  }
}

TEST_CASE("--no-load-optim restarts the schedule; --finetune restarts the iteration") {
  const Fixture& f = Shared();
  const Run& full = f.full;
  // --no-load-optim: iteration and data position restored, the schedule from step 0.
  const Run no_optim = MustTrain(With(f.base, {"--load", f.ckpt, "--no-load-optim"}));
  REQUIRE(no_optim.summary.first_iteration == 4);
  REQUIRE(no_optim.lrs.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(no_optim.lrs[i] == Approx(CosineLr(4 * (i + 1), 1e-3, 1e-4, 8, 32)).epsilon(1e-12));
    CHECK(no_optim.consumed[i] == 16 + 4 * (i + 1));
  }
  // --finetune: weights only; iteration 0, samples 0, the schedule from its start (even
  // with a schedule that would not match the checkpoint's).
  const Run fine = MustTrain(With(f.base, {"--load", f.ckpt, "--finetune"}));
  REQUIRE(fine.summary.first_iteration == 0);
  REQUIRE(fine.lrs == full.lrs);
  CHECK(fine.consumed.front() == 4);
  CHECK(fine.summary.train_losses.front() < full.summary.train_losses.front());  // trained weights
  const Run shorter =
      MustTrain(With(f.base, {"--load", f.ckpt, "--finetune", "--train-iters", "4"}));
  CHECK(shorter.summary.first_iteration == 0);
  CHECK(shorter.summary.last_iteration == 4);
}

TEST_CASE("--ckpt-step loads an older iteration; a newer non-persistent checkpoint wins") {
  const Fixture& shared = Shared();
  const Run& full = shared.full;
  struct {
    std::vector<std::string> base;
    std::string ckpt;
  } f{shared.base, shared.dir + "/step_ckpt"};  // written here
  // Persistent saves at 2 (--save-interval 2), non-persistent after 1 and 3, exit at 3
  // without another save (Megatron: the iteration saved already).
  MustTrain(With(f.base, {"--save", f.ckpt, "--save-interval", "2",
                          "--non-persistent-save-interval", "1", "--non-persistent-ckpt-type",
                          "global", "--exit-interval", "3"}));
  CHECK(actors::checkpoint::CompleteIterations(f.ckpt) == std::vector<int64_t>{2});
  // Cleanup before each save keeps the newest one: 1 stays while 3 is written.
  CHECK(actors::checkpoint::CompleteIterations(f.ckpt + "/non_persistent") ==
        std::vector<int64_t>{1, 3});
  auto continues = [&](const Run& r, int from) {
    REQUIRE(r.summary.first_iteration == from);
    REQUIRE(r.summary.train_losses.size() == static_cast<size_t>(8 - from));
    for (int i = from; i < 8; ++i) {
      INFO("iteration " << i + 1);
      CHECK(r.summary.train_losses[i - from] == full.summary.train_losses[i]);  // bit for bit
    }
  };
  continues(MustTrain(With(f.base, {"--load", f.ckpt, "--non-persistent-ckpt-type", "global"})), 3);
  continues(MustTrain(With(f.base, {"--load", f.ckpt})), 2);  // persistent only
  // --ckpt-step 1 names a persistent iteration that does not exist: an error naming it.
  CHECK(TrainError(With(f.base, {"--load", f.ckpt, "--ckpt-step", "1"})).find("iter_0000001") !=
        std::string::npos);
  // A newer persistent checkpoint beats the non-persistent one; --ckpt-step picks an older.
  MustTrain(With(f.base, {"--load", f.ckpt, "--save", f.ckpt, "--save-interval", "2",
                          "--exit-interval", "4"}));
  continues(MustTrain(With(f.base, {"--load", f.ckpt, "--non-persistent-ckpt-type", "global"})), 4);
  continues(MustTrain(With(f.base, {"--load", f.ckpt, "--ckpt-step", "2"})), 2);
}

TEST_CASE("the RNG state (the seed) is restored unless --no-load-rng") {
  const Fixture& f = Shared();  // the checkpoint of --seed 7
  auto seed_of = [](const std::string& dir) {
    auto r = actors::checkpoint::CheckpointReader::Open(dir).value();
    return r.state().at("rng").at("seed").get<int64_t>();
  };
  CHECK(seed_of(f.ckpt) == 7);
  // --seed 8 on resume: the data order is --seed's in both runs (as Megatron's datasets);
  // the dropout streams are the checkpoint's unless --no-load-rng.
  const std::vector<std::string> resume =
      With(f.base, {"--load", f.ckpt, "--seed", "8", "--save-interval", "100"});
  const Run loaded = MustTrain(With(resume, {"--save", f.dir + "/a"}));
  CHECK(loaded.log.find("RNG state from the checkpoint: dropout seed 7") != std::string::npos);
  CHECK(seed_of(f.dir + "/a") == 7);
  const Run fresh = MustTrain(With(resume, {"--no-load-rng", "--save", f.dir + "/b"}));
  CHECK(seed_of(f.dir + "/b") == 8);
  REQUIRE(loaded.summary.train_losses.size() == 4);
  CHECK(loaded.summary.train_losses != fresh.summary.train_losses);  // other dropout masks
  // Without dropout the seed draws nothing: the two are the same run.
  const std::vector<std::string> no_dropout = {"--hidden-dropout", "0", "--attention-dropout",
                                               "0"};
  MustTrain(With(With(f.base, no_dropout), {"--save", f.dir + "/nd", "--save-interval", "100",
                                            "--exit-interval", "4"}));
  const std::vector<std::string> nd_resume =
      With(With(f.base, no_dropout), {"--load", f.dir + "/nd", "--seed", "8"});
  CHECK(MustTrain(nd_resume).summary.train_losses ==
        MustTrain(With(nd_resume, {"--no-load-rng"})).summary.train_losses);
}

TEST_CASE("--use-checkpoint-args takes the model's shape from the checkpoint") {
  const Fixture& f = Shared();
  const Run& full = f.full;
  // The resumed command line without the model flags: Megatron's load_args_from_checkpoint
  // sets them (num_layers, hidden_size, heads, seq_length, ...; dropout forced).
  std::vector<std::string> no_model;
  for (size_t i = 0; i < f.base.size(); i += 2) {
    const std::string& flag = f.base[i];
    if (flag == "--num-layers" || flag == "--hidden-size" || flag == "--num-attention-heads" ||
        flag == "--seq-length" || flag == "--max-position-embeddings") {
      continue;
    }
    no_model.push_back(f.base[i]);
    no_model.push_back(f.base[i + 1]);
  }
  const Run r = MustTrain(With(no_model, {"--load", f.ckpt, "--use-checkpoint-args",
                                          "--hidden-dropout", "0.3"}));
  CHECK(r.log.find("Setting hidden_size to 64 from checkpoint") != std::string::npos);
  REQUIRE(r.summary.first_iteration == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(r.summary.train_losses[i] == full.summary.train_losses[4 + i]);  // bit for bit
  }
  // Without it, the missing flags are an error.
  CHECK(!TrainError(With(no_model, {"--load", f.ckpt})).empty());
}

TEST_CASE("--decoupled-lr 0 freezes exactly the embedding and output weights") {
  const Fixture& f = Shared();
  // Untied, so the output layer is a separate weight. --lr 0 freezes everything: the
  // initial weights (AdamW with lr 0 changes nothing, weight decay included). One
  // iteration without warmup (it runs at max_lr): every other weight's gradient then comes
  // from the same initial weights in all three runs.
  const std::vector<std::string> run =
      With(f.base, {"--untie-embeddings-and-output-weights", "--train-iters", "1",
                    "--lr-warmup-iters", "0", "--eval-iters", "0", "--save-interval", "100"});
  MustTrain(With(run, {"--lr", "0", "--min-lr", "0", "--save", f.dir + "/frozen"}));
  const Run logged = MustTrain(With(run, {"--decoupled-lr", "0", "--decoupled-min-lr", "0",
                                          "--save", f.dir + "/decoupled"}));
  MustTrain(With(run, {"--save", f.dir + "/plain"}));
  auto frozen = actors::checkpoint::CheckpointReader::Open(f.dir + "/frozen").value();
  auto decoupled = actors::checkpoint::CheckpointReader::Open(f.dir + "/decoupled").value();
  auto plain = actors::checkpoint::CheckpointReader::Open(f.dir + "/plain").value();
  auto read = [](const actors::checkpoint::CheckpointReader& r, const std::string& name) {
    const std::vector<int64_t> shape = r.FullShape(name).value();
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> out(static_cast<size_t>(n));
    REQUIRE(r.ReadSlice(name, std::vector<int64_t>(shape.size(), 0), shape, out.data()).ok());
    return out;
  };
  for (const std::string name : frozen.TensorNames()) {
    if (name.rfind("model/", 0) != 0) continue;
    const bool decoupled_group = name == "model/embedding.word_embeddings.weight" ||
                                 name == "model/output_layer.weight";
    INFO(name);
    if (decoupled_group) {
      CHECK(read(decoupled, name) == read(frozen, name));  // lr 0 throughout
      CHECK(read(plain, name) != read(frozen, name));
    } else {
      CHECK(read(decoupled, name) == read(plain, name));  // the main schedule, bit for bit
    }
  }
  // The logged lr is the main group's (Megatron logs the default_config group).
  // One iteration: the decay is over 4 samples.
  CHECK(logged.lrs.front() == Approx(CosineLr(4, 1e-3, 1e-4, 0, 4)).epsilon(1e-12));
}

}  // namespace
}  // namespace mxmaca::testing
