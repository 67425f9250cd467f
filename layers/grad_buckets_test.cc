// layers/grad_buckets_test.cc: Finalize padding, bucket layout and shards against a
// brute-force element-by-element model, the distributed optimizer's pieces (exact cover,
// bit-identical AdamW against a whole-tensor optimizer) and the shard gradient norm
// (fp64 reference; same bits whatever lies outside the shard).
#include "layers/grad_buckets.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::layers {
namespace {

// RegisterRandomTensors: 3..12 tensors of random 1-D / 2-D shapes (1..300 elements per
// dim, so most cross 16-element lines and many cross bucket boundaries), random decay.
void RegisterRandomTensors(std::mt19937& rng, ParameterStore* store) {
  std::uniform_int_distribution<int> count(3, 12), dim(1, 40), rank(1, 2), coin(0, 1);
  const int n = count(rng);
  for (int i = 0; i < n; ++i) {
    ParameterSpec spec;
    spec.name = "decoder.layers." + std::to_string(i) + ".w";
    spec.shape.push_back(dim(rng) * (coin(rng) ? 7 : 1));
    if (rank(rng) == 2) spec.shape.push_back(dim(rng));
    spec.init_std = 0.5f;
    spec.weight_decay = coin(rng) == 1;
    REQUIRE(store->Register(spec).ok());
  }
}

void FillRandom(std::mt19937& rng, absl::Span<float> values, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  for (float& v : values) v = nd(rng);
}

// ZeroPadding: sets the arena elements outside every tensor to 0 (the store's invariant).
void ZeroPadding(ParameterStore& store, absl::Span<float> arena) {
  std::vector<bool> in_tensor(arena.size(), false);
  for (int i = 0; i < store.size(); ++i) {
    for (int64_t e = 0; e < store.info(i).numel; ++e) in_tensor[store.info(i).arena_offset + e] = true;
  }
  for (size_t e = 0; e < arena.size(); ++e) {
    if (!in_tensor[e]) arena[e] = 0.0f;
  }
}

TEST_CASE("Finalize pads the arenas to the requested multiple with zeros") {
  for (int64_t pad : {16, 32, 48, 64, 16 * 7}) {
    ParameterStore store;
    REQUIRE(store.Register({"a", {5, 7}}).ok());    // 35 -> next at 48
    REQUIRE(store.Register({"b", {3}}).ok());       // [48, 51)
    store.Finalize(pad);
    const int64_t end = 51;
    INFO("pad " << pad);
    CHECK(store.arena_elements() % pad == 0);
    CHECK(store.arena_elements() >= end);
    CHECK(store.arena_elements() < end + pad);
    CHECK(store.params_arena().size() == static_cast<size_t>(store.arena_elements()));
    CHECK(store.grads_arena().size() == static_cast<size_t>(store.arena_elements()));
    CHECK(store.info(1).arena_offset == 48);
    CHECK(store.num_elements() == 38);
    store.Initialize(7);
    for (int64_t e = end; e < store.arena_elements(); ++e) {
      CHECK(store.params_arena()[e] == 0.0f);
      CHECK(store.grads_arena()[e] == 0.0f);
    }
  }
  ParameterStore plain;
  REQUIRE(plain.Register({"a", {5, 7}}).ok());
  plain.Finalize();  // default: 16, as before the padding option existed
  CHECK(plain.arena_elements() == 48);
}

TEST_CASE("BuildDataParallelBuckets rejects bad inputs with the sizes in the message") {
  ParameterStore store;
  REQUIRE(store.Register({"a", {40}}).ok());  // arena 48 with the default padding
  auto not_final = BuildDataParallelBuckets(store, 2, 0);
  CHECK(not_final.status().code() == absl::StatusCode::kFailedPrecondition);
  store.Finalize();
  auto zero_dp = BuildDataParallelBuckets(store, 0, 0);
  CHECK(zero_dp.status().code() == absl::StatusCode::kInvalidArgument);
  auto unpadded = BuildDataParallelBuckets(store, 2, 0);
  REQUIRE(unpadded.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(unpadded.status().message());
  INFO(msg);
  CHECK(msg.find("48") != std::string::npos);
  CHECK(msg.find("32") != std::string::npos);
  CHECK(msg.find("64") != std::string::npos);  // what it would pad to
  CHECK(BuildDataParallelBuckets(store, 3, 0).ok());  // 48 = 3 * 16
}

TEST_CASE("AlignNextTo starts a region at a bucket multiple; buckets can end there") {
  // Random dense tensors, then a region of "expert" tensors from an aligned offset (the
  // layout of a stage whose experts reduce over another group, layers/gpt_stage.h).
  std::mt19937 rng(Catch::rngSeed() + 11);
  for (int dp : {1, 2, 3, 4}) {
    ParameterStore store;
    RegisterRandomTensors(rng, &store);
    const int64_t unit = 16LL * dp;
    auto begin = store.AlignNextTo(unit);
    REQUIRE(begin.ok());
    CHECK(*begin % unit == 0);
    const int dense = store.size();
    CHECK(store.info(dense - 1).arena_offset + store.info(dense - 1).numel <= *begin);
    REQUIRE(store.Register({"experts.w0", {37, 5}}).ok());
    REQUIRE(store.Register({"experts.w1", {11}}).ok());
    CHECK(store.info(dense).arena_offset == *begin);  // the region starts exactly there
    CHECK(!store.AlignNextTo(24).ok());               // not a multiple of 16
    store.Finalize(unit);
    CHECK(store.AlignNextTo(unit).status().code() == absl::StatusCode::kFailedPrecondition);
    auto buckets = BuildDataParallelBuckets(store, dp, 64, *begin);
    REQUIRE(buckets.ok());
    REQUIRE(!buckets->buckets.empty());
    CHECK(buckets->buckets.front().begin == 0);
    CHECK(buckets->buckets.back().end == *begin);  // the experts are outside every bucket
    for (int b = 0; b < buckets->num_buckets(); ++b) {
      for (int t : buckets->TensorsOfBucket(b)) CHECK(t < dense);
    }
    if (dp > 1) CHECK(!BuildDataParallelBuckets(store, dp, 64, *begin - 16).ok());  // % unit
    CHECK(!BuildDataParallelBuckets(store, dp, 64, store.arena_elements() + unit).ok());
  }
}

TEST_CASE("Buckets cover the arena in dp*16 multiples; shards and tensor maps match") {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 60; ++trial) {
    const int dp = 1 + trial % 5;
    ParameterStore store;
    RegisterRandomTensors(rng, &store);
    store.Finalize(16 * dp);
    const int64_t arena = store.arena_elements();
    std::uniform_int_distribution<int64_t> size_dist(-5, arena + 40);
    const int64_t bucket_elements = trial % 7 == 0 ? 0 : size_dist(rng);
    INFO("trial " << trial << " dp " << dp << " arena " << arena << " bucket " << bucket_elements);
    auto built = BuildDataParallelBuckets(store, dp, bucket_elements);
    REQUIRE(built.ok());
    const DataParallelBuckets& b = *built;
    CHECK(b.data_parallel_size == dp);
    CHECK(b.arena_elements == arena);
    REQUIRE(b.num_buckets() >= 1);
    CHECK(b.buckets.front().begin == 0);
    CHECK(b.buckets.back().end == arena);
    const int64_t unit = 16 * dp;
    const int64_t expect_size =
        bucket_elements <= 0 ? arena : (bucket_elements + unit - 1) / unit * unit;
    for (int k = 0; k < b.num_buckets(); ++k) {
      CHECK(b.buckets[k].size() > 0);
      CHECK(b.buckets[k].size() % unit == 0);
      if (k + 1 < b.num_buckets()) {
        CHECK(b.buckets[k].end == b.buckets[k + 1].begin);
        CHECK(b.buckets[k].size() == expect_size);
      } else {
        CHECK(b.buckets[k].size() <= expect_size);
      }
    }
    // Element-by-element model: owner bucket and rank of every arena element.
    std::vector<int> owner_bucket(arena, -1), owner_rank(arena, -1);
    for (int k = 0; k < b.num_buckets(); ++k) {
      for (int r = 0; r < dp; ++r) {
        const GradBucket s = b.ShardOf(k, r);
        CHECK(s.size() == b.buckets[k].size() / dp);
        CHECK(s.begin % 16 == 0);
        for (int64_t e = s.begin; e < s.end; ++e) {
          CHECK(owner_rank[e] == -1);
          owner_bucket[e] = k;
          owner_rank[e] = r;
        }
      }
    }
    for (int64_t e = 0; e < arena; ++e) REQUIRE(owner_rank[e] >= 0);
    for (int i = 0; i < store.size(); ++i) {
      std::vector<int> expect;
      for (int64_t e = store.info(i).arena_offset;
           e < store.info(i).arena_offset + store.info(i).numel; ++e) {
        if (expect.empty() || expect.back() != owner_bucket[e]) expect.push_back(owner_bucket[e]);
      }
      CHECK(b.BucketsOfTensor(i) == expect);
      for (int k : expect) {
        const std::vector<int> in_bucket = b.TensorsOfBucket(k);
        CHECK(std::find(in_bucket.begin(), in_bucket.end(), i) != in_bucket.end());
      }
    }
    int listed = 0;
    for (int k = 0; k < b.num_buckets(); ++k) listed += b.TensorsOfBucket(k).size();
    int expected_listed = 0;
    for (int i = 0; i < store.size(); ++i) expected_listed += b.BucketsOfTensor(i).size();
    CHECK(listed == expected_listed);
  }
}

TEST_CASE("the embedding and output weights are in the decoupled-lr group, whole or in pieces") {
  // Megatron's is_embedding_or_output_parameter: --decoupled-lr applies to these two only,
  // on every DP rank's pieces of them under the distributed optimizer too.
  ParameterStore store;
  for (const char* name : {"embedding.word_embeddings.weight", "decoder.layers.0.w",
                           "output_layer.weight", "embedding.position_embeddings.weight"}) {
    ParameterSpec spec;
    spec.name = name;
    spec.shape = {13, 5};
    REQUIRE(store.Register(spec).ok());
  }
  store.Finalize(16 * 2);
  auto decoupled = [](const std::string& name) {
    return name == "embedding.word_embeddings.weight" || name == "output_layer.weight";
  };
  for (const OptimizerTensor& t : store.OptimizerTensors()) {
    INFO(t.name);
    CHECK(t.is_decoupled_lr == decoupled(t.name));
  }
  auto b = BuildDataParallelBuckets(store, 2, 40);
  REQUIRE(b.ok());
  int pieces = 0;
  for (int r = 0; r < 2; ++r) {
    for (const OptimizerTensor& t : DistributedOptimizerTensors(store, *b, r)) {
      INFO(t.name << " rank " << r);
      CHECK(t.is_decoupled_lr == decoupled(t.name));
      pieces += decoupled(t.name) ? 1 : 0;
    }
  }
  CHECK(pieces >= 2);
}

TEST_CASE("Distributed optimizer pieces cover every tensor element exactly once") {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 40; ++trial) {
    const int dp = 1 + trial % 4;
    ParameterStore store;
    RegisterRandomTensors(rng, &store);
    store.Finalize(16 * dp);
    std::uniform_int_distribution<int64_t> size_dist(1, store.arena_elements());
    auto b = BuildDataParallelBuckets(store, dp, size_dist(rng));
    REQUIRE(b.ok());
    INFO("trial " << trial << " dp " << dp);
    const float* params = store.params_arena().data();
    std::vector<int> covered(store.arena_elements(), 0);
    for (int r = 0; r < dp; ++r) {
      const std::vector<OptimizerTensor> pieces = DistributedOptimizerTensors(store, *b, r);
      const float* last = nullptr;
      for (const OptimizerTensor& t : pieces) {
        auto index = store.Index(t.name);
        REQUIRE(index.ok());
        const ParameterInfo& info = store.info(*index);
        CHECK(t.numel > 0);
        CHECK(t.flat_offset >= 0);
        CHECK(t.flat_offset + t.numel <= info.numel);
        CHECK(t.param == store.param(*index) + t.flat_offset);
        CHECK(t.grad == store.grad(*index) + t.flat_offset);
        CHECK(t.apply_weight_decay == info.spec.weight_decay);
        CHECK((last == nullptr || t.param > last));  // arena order
        last = t.param;
        const int64_t begin = t.param - params;
        // Inside one shard of rank r.
        bool in_shard = false;
        for (int k = 0; k < b->num_buckets(); ++k) {
          const GradBucket s = b->ShardOf(k, r);
          in_shard |= begin >= s.begin && begin + t.numel <= s.end;
        }
        CHECK(in_shard);
        for (int64_t e = begin; e < begin + t.numel; ++e) ++covered[e];
      }
    }
    for (int i = 0; i < store.size(); ++i) {
      for (int64_t e = 0; e < store.info(i).numel; ++e) {
        REQUIRE(covered[store.info(i).arena_offset + e] == 1);
        covered[store.info(i).arena_offset + e] = 0;
      }
    }
    for (int c : covered) REQUIRE(c == 0);  // padding is in no piece
  }
}

TEST_CASE("AdamW over per-rank pieces equals whole-tensor AdamW bit for bit") {
  std::mt19937 rng(4242);
  const int dp = 3;
  ParameterStore whole, pieces;
  std::mt19937 shape_rng(9);
  RegisterRandomTensors(shape_rng, &whole);
  shape_rng.seed(9);
  RegisterRandomTensors(shape_rng, &pieces);
  whole.Finalize(16 * dp);
  pieces.Finalize(16 * dp);
  whole.Initialize(1234);
  pieces.Initialize(1234);
  auto b = BuildDataParallelBuckets(pieces, dp, pieces.arena_elements() / 3 + 5);
  REQUIRE(b.ok());
  REQUIRE(b->num_buckets() >= 2);
  const AdamWOptions opts{0.9f, 0.95f, 1e-8f};
  AdamWOptimizer full(opts, whole.OptimizerTensors());
  std::vector<std::unique_ptr<AdamWOptimizer>> ranks;
  for (int r = 0; r < dp; ++r) {
    ranks.push_back(
        std::make_unique<AdamWOptimizer>(opts, DistributedOptimizerTensors(pieces, *b, r)));
  }
  kernels::ExecContext ctx;
  for (int step = 1; step <= 4; ++step) {
    FillRandom(rng, whole.grads_arena(), 0.1f);
    ZeroPadding(whole, whole.grads_arena());
    std::memcpy(pieces.grads_arena().data(), whole.grads_arena().data(),
                whole.grads_arena().size() * sizeof(float));
    const double lr = 1e-2 * step, wd = 0.1;
    full.Step(ctx, lr, wd);
    for (auto& r : ranks) r->Step(ctx, lr, wd);
  }
  // Same update formula per element with the same scalars: bits must agree exactly.
  REQUIRE(std::memcmp(whole.params_arena().data(), pieces.params_arena().data(),
                      whole.params_arena().size() * sizeof(float)) == 0);
  // The moments too: piece k of rank r holds exp_avg[flat_offset, + numel) of its tensor.
  for (auto& r : ranks) {
    for (size_t k = 0; k < r->tensors().size(); ++k) {
      const OptimizerTensor& t = r->tensors()[k];
      auto index = whole.Index(t.name);
      REQUIRE(index.ok());
      CHECK(std::memcmp(r->exp_avg(k).data(), full.exp_avg(*index).data() + t.flat_offset,
                        t.numel * sizeof(float)) == 0);
      CHECK(std::memcmp(r->exp_avg_sq(k).data(), full.exp_avg_sq(*index).data() + t.flat_offset,
                        t.numel * sizeof(float)) == 0);
    }
  }
  // And the parameters moved (the test can fail): compare with the initial values.
  ParameterStore initial;
  shape_rng.seed(9);
  RegisterRandomTensors(shape_rng, &initial);
  initial.Finalize(16 * dp);
  initial.Initialize(1234);
  CHECK(std::memcmp(initial.params_arena().data(), pieces.params_arena().data(),
                    initial.params_arena().size() * sizeof(float)) != 0);
}

TEST_CASE("Clipping every rank's ShardGradSpans equals clipping whole tensors bit for bit") {
  std::mt19937 rng(31337);
  const int dp = 4;
  ParameterStore whole, sharded;
  std::mt19937 shape_rng(12);
  RegisterRandomTensors(shape_rng, &whole);
  shape_rng.seed(12);
  RegisterRandomTensors(shape_rng, &sharded);
  whole.Finalize(16 * dp);
  sharded.Finalize(16 * dp);
  FillRandom(rng, whole.grads_arena(), 3.0f);
  ZeroPadding(whole, whole.grads_arena());
  std::memcpy(sharded.grads_arena().data(), whole.grads_arena().data(),
              whole.grads_arena().size() * sizeof(float));
  auto b = BuildDataParallelBuckets(sharded, dp, 200);
  REQUIRE(b.ok());
  kernels::ExecContext ctx;
  const std::vector<GradSpan> all = whole.GradSpans();
  const double norm = std::sqrt(GradNormSquared(ctx, all));
  const double max_norm = 0.25 * norm;  // forces clipping
  REQUIRE(ClipGradsByTotalNorm(ctx, all, norm, max_norm) < 1.0);
  for (int r = 0; r < dp; ++r) {
    const std::vector<GradSpan> spans = ShardGradSpans(sharded, *b, r);
    const std::vector<OptimizerTensor> pieces = DistributedOptimizerTensors(sharded, *b, r);
    REQUIRE(spans.size() == pieces.size());
    for (size_t k = 0; k < spans.size(); ++k) {
      CHECK(spans[k].grad == pieces[k].grad);
      CHECK(spans[k].numel == pieces[k].numel);
    }
    ClipGradsByTotalNorm(ctx, spans, norm, max_norm);
  }
  CHECK(std::memcmp(whole.grads_arena().data(), sharded.grads_arena().data(),
                    whole.grads_arena().size() * sizeof(float)) == 0);
}

TEST_CASE("ShardGradNormSquared sums the owned shard only, counting the chosen tensors") {
  std::mt19937 rng(555);
  for (int trial = 0; trial < 20; ++trial) {
    const int dp = 1 + trial % 4;
    ParameterStore store;
    RegisterRandomTensors(rng, &store);
    store.Finalize(16 * dp);
    std::uniform_int_distribution<int64_t> size_dist(1, store.arena_elements());
    auto b = BuildDataParallelBuckets(store, dp, size_dist(rng));
    REQUIRE(b.ok());
    FillRandom(rng, store.grads_arena(), 1.0f);
    ZeroPadding(store, store.grads_arena());
    const std::string skipped = store.info(trial % store.size()).spec.name;
    auto counts = [&](const ParameterInfo& info) { return info.spec.name != skipped; };
    // fp64 reference, element by element over whole tensors.
    double reference = 0.0;
    for (int i = 0; i < store.size(); ++i) {
      if (store.info(i).spec.name == skipped) continue;
      for (int64_t e = 0; e < store.info(i).numel; ++e) {
        reference += static_cast<double>(store.grad(i)[e]) * store.grad(i)[e];
      }
    }
    kernels::ExecContext ctx;
    double total = 0.0;
    std::vector<double> per_rank;
    for (int r = 0; r < dp; ++r) {
      per_rank.push_back(ShardGradNormSquared(ctx, store, *b, r, counts));
      total += per_rank.back();
    }
    // fp64 sums of ~1e3 terms of order 1 in two different orders: relative difference
    // bounded by ~n * 2^-53 ~ 1e-13; 1e-12 leaves margin.
    INFO("trial " << trial);
    CHECK(std::abs(total - reference) <= 1e-12 * reference);
    // After a reduce-scatter only the owned shard holds reduced values; everything else is
    // stale. Scribbling outside rank r's shards must not change rank r's value by one bit.
    for (int r = 0; r < dp; ++r) {
      std::vector<float> saved(store.grads_arena().begin(), store.grads_arena().end());
      std::vector<bool> owned(store.arena_elements(), false);
      for (int k = 0; k < b->num_buckets(); ++k) {
        const GradBucket s = b->ShardOf(k, r);
        for (int64_t e = s.begin; e < s.end; ++e) owned[e] = true;
      }
      std::normal_distribution<float> junk(0.0f, 100.0f);
      for (int64_t e = 0; e < store.arena_elements(); ++e) {
        if (!owned[e]) store.grads_arena()[e] = junk(rng);
      }
      kernels::ExecContext two_threads;
      two_threads.num_threads = 2;
      const double again = ShardGradNormSquared(two_threads, store, *b, r, counts);
      CHECK(std::memcmp(&again, &per_rank[r], sizeof(double)) == 0);
      std::copy(saved.begin(), saved.end(), store.grads_arena().begin());
    }
  }
}

}  // namespace
}  // namespace mxmaca::layers
