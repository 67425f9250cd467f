// End-to-end training through the actor runtime on a tiny random corpus:
//  - a run stopped at iteration 4 (--exit-interval, which saves) and resumed with --load
//    reproduces the uninterrupted run's losses for iterations 5..8 bit for bit (dropout on:
//    masks are a function of (seed, iteration, micro-batch), the data position and the
//    optimizer and scheduler state come from the checkpoint);
//  - a second identical run gives bit-identical losses (determinism);
//  - the loss falls over a longer run.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

actors::TrainingSummary MustTrain(const std::vector<std::string>& args) {
  std::string log;
  auto s = api::Train(args, [&](const std::string& line) { log += line + "\n"; });
  INFO(log);
  REQUIRE(s.ok());
  INFO(s->error);
  REQUIRE(s->ok);
  return *s;
}

TEST_CASE("resume from a checkpoint continues the loss curve bit for bit") {
  const std::string dir = TempDir("train_resume");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 11);
  const auto base = TinyTrainArgs(prefix, dir + "/cache");

  const actors::TrainingSummary full = MustTrain(base);
  REQUIRE(full.train_losses.size() == 8);
  for (double l : full.train_losses) REQUIRE(std::isfinite(l));

  const actors::TrainingSummary again = MustTrain(base);
  CHECK(again.train_losses == full.train_losses);  // bit-identical

  const std::string ckpt = dir + "/ckpt";
  const actors::TrainingSummary first =
      MustTrain(With(base, {"--save", ckpt, "--save-interval", "100", "--exit-interval", "4"}));
  REQUIRE(first.last_iteration == 4);
  const actors::TrainingSummary resumed =
      MustTrain(With(base, {"--load", ckpt, "--save", ckpt, "--save-interval", "100"}));
  REQUIRE(resumed.first_iteration == 4);
  REQUIRE(resumed.train_losses.size() == 4);
  for (int i = 0; i < 4; ++i) {
    INFO("iteration " << 5 + i);
    CHECK(resumed.train_losses[i] == full.train_losses[4 + i]);  // bit-identical
  }
  // The validation at iteration 8 sees the same samples and weights too.
  REQUIRE(!resumed.valid_losses.empty());
  CHECK(resumed.valid_losses.back() == full.valid_losses.back());
}

// The iter_* directories `dir` holds, ascending.
std::vector<std::string> IterDirs(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter_", 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("--save-retain-interval keeps every K-th checkpoint and the latest") {
  // Megatron's rule (save_checkpoint's iter_finalize_fn): each save deletes the checkpoint
  // the tracker named before it unless that iteration is a multiple of K. Saves every 2 of
  // 9 iterations (and the final one at 9) with K = 4 leave 4, 8 and 9, synchronously, with
  // --async-save, and in Megatron's own format.
  const std::string dir = TempDir("train_retain");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 12);
  const auto base = TinyTrainArgs(prefix, dir + "/cache");
  const std::vector<std::string> kept = {"iter_0000004", "iter_0000008", "iter_0000009"};
  int n = 0;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--async-save"}, {"--ckpt-format", "torch"}}) {
    const std::string ckpt = dir + "/ckpt" + std::to_string(n++);
    INFO(ckpt);
    std::string log;
    auto s = api::Train(With(With(base, {"--train-iters", "9", "--save", ckpt, "--save-interval",
                                         "2", "--save-retain-interval", "4"}),
                             extra),
                        [&](const std::string& line) { log += line + "\n"; });
    INFO(log);
    REQUIRE(s.ok());
    REQUIRE(s->ok);
    CHECK(IterDirs(ckpt) == kept);
    CHECK(log.find("successfully deleted checkpoint from iteration       2 at " + ckpt) !=
          std::string::npos);
    CHECK(log.find("successfully deleted checkpoint from iteration       6 at " + ckpt) !=
          std::string::npos);
  }
  // Not a multiple of --save-interval: refused by name, as Megatron's assert.
  auto bad = api::Train(
      With(base, {"--save", dir + "/bad", "--save-interval", "2", "--save-retain-interval", "3"}),
      [](const std::string&) {});
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message())
            .find("--save-retain-interval 3 must be > 0 and a "
                  "multiple of --save-interval (2)") != std::string::npos);
}

TEST_CASE("--eval-global-batch-size: more micro-batches per evaluation iteration") {
  // Megatron-Core 0.19's evaluation batch: one evaluation iteration of 8 samples reads the
  // same validation samples as two of 4 (consumed_valid_samples advances by the evaluation
  // batch), so every validation loss agrees with the run at --eval-iters 2; the token sums
  // are added in the same micro-batch order, so bit for bit. Pipeline-parallel (PP2) and
  // data-parallel (DP2) layouts run the forward-only schedule for 4 and 2 micro-batches.
  const std::string dir = TempDir("train_eval_batch");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 15);
  const auto base = With(TinyTrainArgs(prefix, dir + "/cache"), {"--micro-batch-size", "1"});
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{},
        {"--pipeline-model-parallel-size", "2", "--world-size", "2"},
        {"--world-size", "2"}}) {
    const actors::TrainingSummary two = MustTrain(With(With(base, layout), {"--eval-iters", "2"}));
    const actors::TrainingSummary one =
        MustTrain(With(With(base, layout), {"--eval-iters", "1", "--eval-global-batch-size", "8"}));
    REQUIRE(two.valid_losses.size() >= 2);
    CHECK(one.valid_losses == two.valid_losses);
    CHECK(one.train_losses == two.train_losses);  // training is unchanged
  }
  // Another micro-batch size, or a batch the data-parallel ranks cannot split: refused.
  auto bad = api::Train(With(base, {"--eval-micro-batch-size", "2"}), [](const std::string&) {});
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("--eval-micro-batch-size 2 differs") !=
        std::string::npos);
  bad = api::Train(With(base, {"--world-size", "2", "--eval-global-batch-size", "5"}),
                   [](const std::string&) {});
  REQUIRE(!bad.ok());
  CHECK(
      std::string(bad.status().message()).find("--eval-global-batch-size (5) must be divisible") !=
      std::string::npos);
}

TEST_CASE("--start-eval-at-iter skips the periodic evaluations before it") {
  const std::string dir = TempDir("train_start_eval");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 16);
  const auto base = With(TinyTrainArgs(prefix, dir + "/cache"), {"--eval-interval", "2"});
  auto iterations = [](const actors::TrainingSummary& s) {
    std::vector<int64_t> out;
    for (const auto& [it, loss] : s.valid_losses) out.push_back(it);
    return out;
  };
  const actors::TrainingSummary all = MustTrain(base);
  const actors::TrainingSummary late = MustTrain(With(base, {"--start-eval-at-iter", "5"}));
  std::vector<int64_t> want;
  for (int64_t it : iterations(all)) {
    if (it >= 5) want.push_back(it);
  }
  CHECK(iterations(all).front() == 2);
  CHECK(iterations(late) == want);
  CHECK(late.train_losses == all.train_losses);  // training is unchanged
}

TEST_CASE("--skip-train, --exit-on-missing-checkpoint, --no-save-optim, --padded-vocab-size") {
  const std::string dir = TempDir("train_megatron_switches");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 17);
  const auto base = TinyTrainArgs(prefix, dir + "/cache");
  auto train = [](const std::vector<std::string>& args, std::string* log) {
    auto s = api::Train(args, [log](const std::string& line) { *log += line + "\n"; });
    INFO(*log);
    INFO(s.status().ToString());
    REQUIRE(s.ok());
    REQUIRE(s->ok);
    return *s;
  };
  const std::string ckpt = dir + "/ckpt";
  std::string log;
  train(With(base, {"--save", ckpt, "--save-interval", "4", "--exit-interval", "4"}), &log);
  // --skip-train (pretrain()): the loaded model is evaluated, nothing is trained or saved.
  log.clear();
  const actors::TrainingSummary skipped = train(
      With(base, {"--load", ckpt, "--save", ckpt, "--save-interval", "4", "--skip-train"}), &log);
  CHECK(log.find("skipping training (--skip-train is on) ...") != std::string::npos);
  CHECK(skipped.train_losses.empty());
  CHECK(log.find("validation loss at iteration 4 on validation set") != std::string::npos);
  CHECK(IterDirs(ckpt) == std::vector<std::string>{"iter_0000004"});
  // --exit-on-missing-checkpoint: Megatron's message, and the run ends (status ok).
  log.clear();
  const actors::TrainingSummary none =
      train(With(base, {"--load", dir + "/empty", "--exit-on-missing-checkpoint"}), &log);
  CHECK(log.find(">> '--exit-on-missing-checkpoint' set ... exiting. <<") != std::string::npos);
  CHECK(none.train_losses.empty());
  // --no-save-optim: the checkpoint holds no Adam state; a resume says so.
  log.clear();
  train(With(base, {"--save", dir + "/noopt", "--save-interval", "4", "--exit-interval", "4",
                    "--no-save-optim"}),
        &log);
  log.clear();
  train(With(base, {"--load", dir + "/noopt"}), &log);
  CHECK(log.find("has no optimizer state") != std::string::npos);
  // --padded-vocab-size: the model's vocabulary rows (kTinyVocab + 1 with NullTokenizer's eod).
  log.clear();
  train(With(base, {"--train-iters", "3", "--padded-vocab-size", "1100"}), &log);
  CHECK(log.find("(new size: 1100)") != std::string::npos);
  auto bad = api::Train(With(base, {"--padded-vocab-size", "999"}), [](const std::string&) {});
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("--padded-vocab-size 999 must be >=") !=
        std::string::npos);
}

TEST_CASE("--trace-file writes the stage's F/B/W timeline in schedule order") {
  const std::string dir = TempDir("train_trace");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 100, 13);
  const std::string trace = dir + "/trace.json";
  const actors::TrainingSummary s = MustTrain(
      With(TinyTrainArgs(prefix, dir + "/cache"), {"--train-iters", "3", "--lr-warmup-iters", "1",
                                                   "--eval-iters", "0", "--trace-file", trace}));
  REQUIRE(s.last_iteration == 3);
  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in);  // throws (fails the test) if malformed
  std::vector<std::string> iteration2;
  int optimizer_spans = 0;
  bool named = false;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") {
      named = named || e.at("args").at("name") == "stage 0";
      continue;
    }
    CHECK(e.at("ph") == "X");
    CHECK(e.at("dur").get<int64_t>() >= 0);
    if (e.at("name") == "optimizer") ++optimizer_spans;
    if (e.at("args").at("iteration") == 2 && e.at("cat") == "compute") {
      iteration2.push_back(e.at("name").get<std::string>());
    }
  }
  CHECK(named);
  CHECK(optimizer_spans == 3);
  // Two micro-batches per iteration (global 4 / micro 2), the single-stage schedule.
  CHECK(iteration2 == std::vector<std::string>{"F0", "B0", "W0", "F1", "B1", "W1"});
}

TEST_CASE("the loss falls when training the tiny model longer") {
  const std::string dir = TempDir("train_learns");
  const std::string prefix = dir + "/tiny";
  MakeTinyCorpus(prefix, 300, 12);
  auto args = TinyTrainArgs(prefix, dir + "/cache");
  args = With(args, {"--train-iters", "60", "--eval-interval", "60", "--lr", "3e-3"});
  const actors::TrainingSummary s = MustTrain(args);
  REQUIRE(s.train_losses.size() == 60);
  // ln(1001) = 6.9 at random init; the Zipf-like data has far lower entropy.
  CHECK(s.train_losses.front() > 6.5);
  double tail = 0;
  for (int i = 50; i < 60; ++i) tail += s.train_losses[i] / 10;
  CHECK(tail < s.train_losses.front() - 1.0);
}

}  // namespace
}  // namespace mxmaca::testing
