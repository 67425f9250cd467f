// actors/stage_checkpoint_test.cc: a stage's parameters and Adam state through a real
// checkpoint directory: whole tensors (the default), distributed-optimizer pieces of
// several DP ranks loaded into whole-tensor optimizers and into another DP size, the
// reverse, coverage across DP ranks, the write options and the errors. Every comparison
// is bit for bit against values assembled independently of the code under test (random
// state scattered by each piece's flat_offset).
#include "actors/stage_checkpoint.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "layers/grad_buckets.h"

namespace mxmaca::actors {
namespace {

using checkpoint::CheckpointReader;
using checkpoint::CheckpointWriter;
using layers::AdamWOptimizer;
using layers::ParameterStore;

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/stage_ckpt_XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + templ);
  return templ;
}

// Shapes of 1 to 3 dims (10 tensors), several not multiples of 16 elements, so DP
// pieces start and end mid-row.
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {37, 5}, {19}, {3, 7, 11}, {64, 3}, {1}, {13, 17}, {100}, {2, 2, 2}, {9, 31}, {40}};
  return shapes;
}

// MakeStore: the model (Shapes(), names "t<i>.weight"), arena padded to `pad`, weights
// drawn from `seed`.
std::unique_ptr<ParameterStore> MakeStore(int64_t pad, uint64_t seed,
                                          const std::vector<std::vector<int64_t>>& shapes = Shapes()) {
  auto store = std::make_unique<ParameterStore>();
  for (size_t i = 0; i < shapes.size(); ++i) {
    layers::ParameterSpec spec;
    spec.name = "t" + std::to_string(i) + ".weight";
    spec.shape = shapes[i];
    spec.init_std = 0.7f;
    spec.weight_decay = i % 3 != 0;
    if (!store->Register(spec).ok()) throw std::runtime_error("register " + spec.name);
  }
  store->Finalize(pad);
  store->Initialize(seed);
  return store;
}

// FullState: per tensor, the reference exp_avg and exp_avg_sq of the whole tensor.
struct FullState {
  std::vector<std::vector<float>> exp_avg, exp_avg_sq;
};

FullState RandomFullState(const ParameterStore& store, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> m(0.0f, 0.01f);
  std::uniform_real_distribution<float> v(0.0f, 1e-4f);
  FullState s;
  for (int i = 0; i < store.size(); ++i) {
    s.exp_avg.emplace_back(store.info(i).numel);
    s.exp_avg_sq.emplace_back(store.info(i).numel);
    for (float& x : s.exp_avg.back()) x = m(rng);
    for (float& x : s.exp_avg_sq.back()) x = v(rng);
  }
  return s;
}

// Scatter / Gather: the reference state into / out of an optimizer's entries, using only
// each entry's name, flat_offset and numel.
void Scatter(const FullState& s, const ParameterStore& store, AdamWOptimizer& opt) {
  for (size_t k = 0; k < opt.tensors().size(); ++k) {
    const layers::OptimizerTensor& t = opt.tensors()[k];
    const int i = *store.Index(t.name);
    std::memcpy(opt.exp_avg(k).data(), s.exp_avg[i].data() + t.flat_offset, t.numel * 4);
    std::memcpy(opt.exp_avg_sq(k).data(), s.exp_avg_sq[i].data() + t.flat_offset, t.numel * 4);
  }
}

// Matches: whether every entry of `opt` holds exactly the reference values of its range.
bool Matches(const FullState& s, const ParameterStore& store, AdamWOptimizer& opt) {
  for (size_t k = 0; k < opt.tensors().size(); ++k) {
    const layers::OptimizerTensor& t = opt.tensors()[k];
    const int i = *store.Index(t.name);
    if (std::memcmp(opt.exp_avg(k).data(), s.exp_avg[i].data() + t.flat_offset, t.numel * 4) != 0 ||
        std::memcmp(opt.exp_avg_sq(k).data(), s.exp_avg_sq[i].data() + t.flat_offset,
                    t.numel * 4) != 0) {
      return false;
    }
  }
  return true;
}

bool SameParams(ParameterStore& a, ParameterStore& b) {
  for (int i = 0; i < a.size(); ++i) {
    if (std::memcmp(a.param(i), b.param(i), a.info(i).numel * 4) != 0) return false;
  }
  return true;
}

// DpOptimizers: one optimizer per DP rank over its distributed-optimizer pieces.
std::vector<std::unique_ptr<AdamWOptimizer>> DpOptimizers(ParameterStore& store, int dp,
                                                          int64_t bucket_elements) {
  auto buckets = layers::BuildDataParallelBuckets(store, dp, bucket_elements);
  if (!buckets.ok()) throw std::runtime_error(std::string(buckets.status().message()));
  std::vector<std::unique_ptr<AdamWOptimizer>> out;
  for (int r = 0; r < dp; ++r) {
    out.push_back(std::make_unique<AdamWOptimizer>(
        layers::AdamWOptions{}, layers::DistributedOptimizerTensors(store, *buckets, r)));
  }
  return out;
}

// SaveDp: each DP rank writes shard "dp<r>" (rank 0 with the parameters), then Commit.
absl::Status SaveDp(const std::string& dir, ParameterStore& store,
                    std::vector<std::unique_ptr<AdamWOptimizer>>& ranks, int ranks_to_write) {
  absl::StatusOr<CheckpointWriter> w = CheckpointWriter::Begin(dir, 10);
  if (!w.ok()) return w.status();
  for (int r = 0; r < ranks_to_write; ++r) {
    StageShardOptions options;
    options.parameters = r == 0;
    absl::Status s = WriteStageShard(*w, "dp" + std::to_string(r), store, ranks[r].get(), options);
    if (!s.ok()) return s;
  }
  return w->Commit(nlohmann::json::object(), nlohmann::json::object());
}

absl::Status SaveWhole(const std::string& dir, ParameterStore& store, AdamWOptimizer* opt,
                       const StageShardOptions& options = {}) {
  absl::StatusOr<CheckpointWriter> w = CheckpointWriter::Begin(dir, 10);
  if (!w.ok()) return w.status();
  absl::Status s = WriteStageShard(*w, "stage0", store, opt, options);
  if (!s.ok()) return s;
  return w->Commit(nlohmann::json::object(), nlohmann::json::object());
}

TEST_CASE("Whole-tensor parameters and Adam state round-trip bit for bit (default options)") {
  const std::string dir = MakeTempDir();
  auto saved = MakeStore(16, 1);
  AdamWOptimizer saved_opt({}, saved->OptimizerTensors());
  const FullState state = RandomFullState(*saved, 2);
  Scatter(state, *saved, saved_opt);
  REQUIRE(SaveWhole(dir, *saved, &saved_opt).ok());

  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  auto loaded = MakeStore(16, 99);  // other initial weights: the load must replace them
  REQUIRE_FALSE(SameParams(*saved, *loaded));
  AdamWOptimizer loaded_opt({}, loaded->OptimizerTensors());
  REQUIRE_FALSE(Matches(state, *loaded, loaded_opt));
  REQUIRE(LoadStageParameters(*reader, *loaded).ok());
  REQUIRE(LoadOptimizerState(*reader, loaded_opt, *loaded).ok());
  CHECK(SameParams(*saved, *loaded));
  CHECK(Matches(state, *loaded, loaded_opt));
}

TEST_CASE("dp=2 distributed-optimizer pieces load into whole tensors and into dp=3 pieces") {
  const std::string dir = MakeTempDir();
  auto saved = MakeStore(2 * 16, 3);
  // About a third of the arena per bucket: several buckets, tensors cut mid-row.
  auto ranks = DpOptimizers(*saved, 2, saved->arena_elements() / 3);
  const FullState state = RandomFullState(*saved, 4);
  for (auto& r : ranks) Scatter(state, *saved, *r);
  bool mid_tensor_piece = false;
  for (auto& r : ranks) {
    for (const auto& t : r->tensors()) {
      const auto& info = saved->info(*saved->Index(t.name));
      mid_tensor_piece |= t.flat_offset > 0 && t.flat_offset % info.spec.shape.back() != 0;
    }
  }
  REQUIRE(mid_tensor_piece);  // the layout really exercises multi-box pieces
  REQUIRE(SaveDp(dir, *saved, ranks, 2).ok());

  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  REQUIRE(reader->VerifyChecksums().ok());

  SECTION("into whole-tensor optimizers") {
    auto loaded = MakeStore(16, 5);
    AdamWOptimizer whole({}, loaded->OptimizerTensors());
    REQUIRE(LoadStageParameters(*reader, *loaded).ok());
    REQUIRE(LoadOptimizerState(*reader, whole, *loaded).ok());
    CHECK(SameParams(*saved, *loaded));
    CHECK(Matches(state, *loaded, whole));
  }
  SECTION("into dp=3 pieces with another bucket size") {
    auto loaded = MakeStore(3 * 16, 5);
    auto other = DpOptimizers(*loaded, 3, 100);
    for (auto& r : other) {
      REQUIRE_FALSE(Matches(state, *loaded, *r));
      REQUIRE(LoadOptimizerState(*reader, *r, *loaded).ok());
      CHECK(Matches(state, *loaded, *r));
    }
  }
}

TEST_CASE("Whole-tensor Adam state loads into dp=2 pieces") {
  const std::string dir = MakeTempDir();
  auto saved = MakeStore(16, 6);
  AdamWOptimizer whole({}, saved->OptimizerTensors());
  const FullState state = RandomFullState(*saved, 7);
  Scatter(state, *saved, whole);
  REQUIRE(SaveWhole(dir, *saved, &whole).ok());
  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  auto loaded = MakeStore(2 * 16, 8);
  auto ranks = DpOptimizers(*loaded, 2, 64);
  for (auto& r : ranks) {
    REQUIRE(LoadOptimizerState(*reader, *r, *loaded).ok());
    CHECK(Matches(state, *loaded, *r));
  }
}

TEST_CASE("Commit fails when the pieces of some DP rank are missing") {
  const std::string dir = MakeTempDir();
  auto store = MakeStore(2 * 16, 9);
  auto ranks = DpOptimizers(*store, 2, 0);
  absl::Status s = SaveDp(dir, *store, ranks, 1);  // rank 1 never writes
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_FALSE(CheckpointReader::Open(dir).ok());
}

TEST_CASE("Write options select parameters, optimizer state and skipped tensors") {
  auto store = MakeStore(16, 10);
  AdamWOptimizer opt({}, store->OptimizerTensors());
  Scatter(RandomFullState(*store, 11), *store, opt);
  auto names = [&](const StageShardOptions& options) {
    const std::string dir = MakeTempDir();
    REQUIRE(SaveWhole(dir, *store, &opt, options).ok());
    auto reader = CheckpointReader::Open(dir);
    REQUIRE(reader.ok());
    return reader->TensorNames();
  };
  const std::vector<std::string> all = names({});
  CHECK(all.size() == 3 * Shapes().size());
  StageShardOptions no_params;
  no_params.parameters = false;
  for (const std::string& n : names(no_params)) CHECK(n.rfind("optimizer/", 0) == 0);
  CHECK(names(no_params).size() == 2 * Shapes().size());
  StageShardOptions no_state;
  no_state.optimizer_state = false;
  for (const std::string& n : names(no_state)) CHECK(n.rfind("model/", 0) == 0);
  CHECK(names(no_state).size() == Shapes().size());
  StageShardOptions skip;
  skip.skip_parameter = [](const layers::ParameterInfo& info) {
    return info.spec.name == "t3.weight";
  };
  const std::vector<std::string> skipped = names(skip);
  CHECK(skipped.size() == 3 * (Shapes().size() - 1));
  for (const std::string& n : skipped) CHECK(n.find("t3.weight") == std::string::npos);
}

TEST_CASE("Errors name the tensor: unknown optimizer entry, missing state, other shapes") {
  auto store = MakeStore(16, 12);
  SECTION("an optimizer entry that is not a parameter") {
    std::vector<float> p(4), g(4);
    AdamWOptimizer stray({}, {{"nope.weight", p.data(), g.data(), 4, true}});
    const std::string dir = MakeTempDir();
    absl::Status s = SaveWhole(dir, *store, &stray);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("nope.weight") != std::string::npos);
  }
  SECTION("a piece outside its tensor") {
    std::vector<float> p(8), g(8);
    layers::OptimizerTensor t{"t1.weight", p.data(), g.data(), 8, true};
    t.flat_offset = 15;  // t1 has 19 elements
    AdamWOptimizer bad({}, {t});
    const std::string dir = MakeTempDir();
    absl::Status s = SaveWhole(dir, *store, &bad);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("t1.weight") != std::string::npos);
  }
  const std::string dir = MakeTempDir();
  StageShardOptions no_state;
  no_state.optimizer_state = false;
  AdamWOptimizer opt({}, store->OptimizerTensors());
  REQUIRE(SaveWhole(dir, *store, &opt, no_state).ok());
  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  SECTION("state missing from the checkpoint") {
    absl::Status s = LoadOptimizerState(*reader, opt, *store);
    CHECK(s.code() == absl::StatusCode::kNotFound);
    CHECK(std::string(s.message()).find("optimizer/exp_avg/t0.weight") != std::string::npos);
  }
  SECTION("a model of another shape") {
    std::vector<std::vector<int64_t>> shapes = Shapes();
    shapes[0] = {38, 5};
    auto other = MakeStore(16, 12, shapes);
    absl::Status s = LoadStageParameters(*reader, *other);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("[37, 5]") != std::string::npos);
  }
}

// Issue 22, finding 3: vocab-padded tensors (ParameterSpec::vocab_rows) are stored as
// their logical rows and re-padded on load, so a checkpoint of one padded size (TP 2:
// V_pad 16) loads into another (TP 1: V_pad 12) and back; padding rows keep the loading
// store's initial values and Adam's zero moments. The reference values are the (seed,
// full index) initialisation of a whole [16, 5] tensor, independent of the checkpoint code.
constexpr int64_t kVocab = 10, kCols = 5;

// VocabStore: TP rank `r` of `tp` of a [vp, 5] vocab tensor (rows split evenly) plus a
// small ordinary tensor, initialised from `seed`. `vocab_rows` 0 gives a store as written
// before vocab rows were known (every row stored).
std::unique_ptr<ParameterStore> VocabStore(int64_t vp, int r, int tp, uint64_t seed,
                                           int64_t vocab_rows = kVocab) {
  auto store = std::make_unique<ParameterStore>();
  layers::ParameterSpec word;
  word.name = "embedding.word_embeddings.weight";
  word.shape = {vp, kCols};
  word.init_std = 0.5f;
  word.vocab_rows = vocab_rows;
  const int64_t rows = vp / tp;
  if (!store->RegisterShard(word, {r * rows, 0}, {rows, kCols}, 1).ok()) {
    throw std::runtime_error("register word embeddings");
  }
  layers::ParameterSpec bias;
  bias.name = "t.bias";
  bias.shape = {3};
  bias.init_std = 0.5f;
  if (!store->Register(bias).ok()) throw std::runtime_error("register bias");
  store->Finalize(16);
  store->Initialize(seed);
  return store;
}

// Row `row` of the whole [16, 5] tensor initialised from `seed`.
std::vector<float> ReferenceRow(uint64_t seed, int64_t row) {
  auto whole = VocabStore(16, 0, 1, seed);
  const float* p = whole->param(0) + row * kCols;
  return std::vector<float>(p, p + kCols);
}

// SetMoments: exp_avg = 1 + full index, exp_avg_sq = 2 + full index for every element of
// every entry of `opt` over `store` (whole-tensor entries).
void SetMoments(const ParameterStore& store, AdamWOptimizer& opt) {
  for (size_t k = 0; k < opt.tensors().size(); ++k) {
    const layers::ParameterInfo& info = store.info(*store.Index(opt.tensors()[k].name));
    for (int64_t e = 0; e < info.numel; ++e) {
      opt.exp_avg(k)[e] = 1.0f + static_cast<float>(info.FullIndex(e));
      opt.exp_avg_sq(k)[e] = 2.0f + static_cast<float>(info.FullIndex(e));
    }
  }
}

// CheckLoaded: `store` (rank r of tp, [vp, 5]) holds the reference rows of `saved_seed`
// below kVocab and of `own_seed` (its own initial values) above; its Adam moments are
// SetMoments' values below kVocab and 0 above.
void CheckLoaded(ParameterStore& store, AdamWOptimizer& opt, int64_t vp, int r, int tp,
                 uint64_t saved_seed, uint64_t own_seed) {
  const int64_t rows = vp / tp;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = r * rows + i;
    INFO("rank " << r << " of " << tp << ", row " << row);
    const std::vector<float> want = ReferenceRow(row < kVocab ? saved_seed : own_seed, row);
    CHECK(std::memcmp(store.param(0) + i * kCols, want.data(), kCols * 4) == 0);
    for (int64_t c = 0; c < kCols; ++c) {
      const float index = static_cast<float>(row * kCols + c);
      CHECK(opt.exp_avg(0)[i * kCols + c] == (row < kVocab ? 1.0f + index : 0.0f));
      CHECK(opt.exp_avg_sq(0)[i * kCols + c] == (row < kVocab ? 2.0f + index : 0.0f));
    }
  }
}

TEST_CASE("vocab-padded tensors are stored as their logical rows and re-padded on load") {
  for (const auto& [saved_vp, saved_tp, loaded_vp, loaded_tp] :
       {std::tuple<int64_t, int, int64_t, int>{16, 2, 12, 1}, {12, 1, 16, 2}, {16, 2, 16, 4}}) {
    INFO("saved V_pad " << saved_vp << " at TP " << saved_tp << ", loaded V_pad " << loaded_vp
                        << " at TP " << loaded_tp);
    const std::string dir = MakeTempDir();
    {
      absl::StatusOr<CheckpointWriter> w = CheckpointWriter::Begin(dir, 10);
      REQUIRE(w.ok());
      for (int r = 0; r < saved_tp; ++r) {
        auto saved = VocabStore(saved_vp, r, saved_tp, 1);
        AdamWOptimizer opt({}, saved->OptimizerTensors());
        SetMoments(*saved, opt);
        StageShardOptions options;
        const int rank = r;
        options.skip_parameter = [rank](const layers::ParameterInfo& info) {
          return rank > 0 && info.spec.name == "t.bias";  // replicated: rank 0 writes it
        };
        REQUIRE(WriteStageShard(*w, "tp" + std::to_string(r), *saved, &opt, options).ok());
      }
      REQUIRE(w->Commit(nlohmann::json::object(), nlohmann::json::object()).ok());
    }
    auto reader = CheckpointReader::Open(dir);
    REQUIRE(reader.ok());
    // The logical vocabulary, whatever the padded size.
    CHECK(*reader->FullShape("model/embedding.word_embeddings.weight") ==
          std::vector<int64_t>{kVocab, kCols});
    CHECK(*reader->FullShape("optimizer/exp_avg/embedding.word_embeddings.weight") ==
          std::vector<int64_t>{kVocab, kCols});
    for (int r = 0; r < loaded_tp; ++r) {
      auto loaded = VocabStore(loaded_vp, r, loaded_tp, 2);
      AdamWOptimizer opt({}, loaded->OptimizerTensors());
      REQUIRE(LoadStageParameters(*reader, *loaded).ok());
      REQUIRE(LoadOptimizerState(*reader, opt, *loaded).ok());
      CheckLoaded(*loaded, opt, loaded_vp, r, loaded_tp, 1, 2);
    }
  }
}

TEST_CASE("checkpoints with padded vocab rows (written before) load on any padded size") {
  const std::string dir = MakeTempDir();
  auto saved = VocabStore(16, 0, 1, 1, /*vocab_rows=*/0);  // every row stored, as before
  AdamWOptimizer saved_opt({}, saved->OptimizerTensors());
  SetMoments(*saved, saved_opt);
  REQUIRE(SaveWhole(dir, *saved, &saved_opt).ok());
  auto reader = CheckpointReader::Open(dir);
  REQUIRE(reader.ok());
  REQUIRE(*reader->FullShape("model/embedding.word_embeddings.weight") ==
          std::vector<int64_t>{16, kCols});
  SECTION("the same padded size: every row, padding included, bit for bit") {
    auto loaded = VocabStore(16, 0, 1, 2);
    AdamWOptimizer opt({}, loaded->OptimizerTensors());
    REQUIRE(LoadStageParameters(*reader, *loaded).ok());
    REQUIRE(LoadOptimizerState(*reader, opt, *loaded).ok());
    CHECK(SameParams(*saved, *loaded));
    CHECK(std::memcmp(opt.exp_avg(0).data(), saved_opt.exp_avg(0).data(), 16 * kCols * 4) == 0);
  }
  SECTION("another padded size: the vocabulary rows, the padding re-initialised") {
    auto loaded = VocabStore(12, 0, 1, 2);
    AdamWOptimizer opt({}, loaded->OptimizerTensors());
    REQUIRE(LoadStageParameters(*reader, *loaded).ok());
    REQUIRE(LoadOptimizerState(*reader, opt, *loaded).ok());
    CheckLoaded(*loaded, opt, 12, 0, 1, 1, 2);
  }
  SECTION("fewer rows than the vocabulary is a shape error") {
    auto loaded = VocabStore(24, 0, 1, 2, /*vocab_rows=*/20);
    absl::Status s = LoadStageParameters(*reader, *loaded);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("at least the 20 rows of the vocabulary") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace mxmaca::actors
