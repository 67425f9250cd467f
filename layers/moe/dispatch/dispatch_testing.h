// layers/moe/dispatch/dispatch_testing.h (testonly): random routings, the direct-gather
// reference every dispatcher is checked against, and a per-expert test function — shared
// by the in-process and UCX tests and the benchmark.
//
// The reference is written from the definition (token_dispatcher.h), not from
// DispatchLayout: for rank d, for each local expert e of d, for each source s, the rows of
// s whose expert is e, found by walking s's global-expert-major input.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_DISPATCH_TESTING_H_
#define MXMACA_LAYERS_MOE_DISPATCH_DISPATCH_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "layers/moe/dispatch/token_dispatcher.h"

namespace mxmaca::layers::moe::dispatch::testing {

// Routing: how rows pick experts.
enum class Routing {
  kUniform,    // each row: uniform over experts
  kZipf,       // each row: P(e) ~ 1 / (1 + perm(e))^1.2, perm a seeded permutation
  kOneExpert,  // every row of every rank to expert 0 (the skewed case)
  kSparse,     // each row: one of the experts {1, E-1} (most experts receive nothing)
};

// RankInput: one EP rank's dispatch input. rows [num_rows, h] fp32 in global-expert-major
// order; tokens_per_expert [E].
struct RankInput {
  std::vector<float> rows;
  std::vector<int64_t> tokens_per_expert;
  int64_t num_rows = 0;
};

// MakeInputs: P ranks' inputs. Rank s gets a row count drawn uniformly from
// [min_rows, max_rows] (ranks listed in `empty_ranks` get 0), routed by `routing`; values
// N(0, 1) with a few -0.0f and +-inf mixed in (exactness of the data movement includes
// signed zeros). Deterministic in `seed`.
std::vector<RankInput> MakeInputs(int ep_size, int num_experts, int64_t hidden, int64_t min_rows,
                                  int64_t max_rows, Routing routing, uint32_t seed,
                                  const std::vector<int>& empty_ranks = {});

// ExpectedDispatch: rank d's expert input [N_d, h] and tokens_per_local_expert [L].
struct ExpectedDispatch {
  std::vector<float> rows;
  std::vector<int64_t> tokens_per_local_expert;
};
ExpectedDispatch ReferenceDispatch(const std::vector<RankInput>& inputs, int num_experts,
                                   int64_t hidden, int d);

// ExpertFn: the test's "expert" e applied to one value: x * (e + 1) + 0.25 * e (fp32).
float ExpertFn(int e, float x);
// ApplyExperts: ExpertFn in place on rank d's expert input (rows grouped by
// tokens_per_local_expert, local expert l = global d * L + l).
void ApplyExperts(std::vector<float>& rows, const std::vector<int64_t>& tokens_per_local_expert,
                  int d, int64_t hidden);
// ReferenceCombine: rank s's combine output when every expert applies ExpertFn (or the
// identity when `identity`): each row of s, at its position, transformed by its expert.
std::vector<float> ReferenceCombine(const RankInput& input, int64_t hidden, bool identity);

// FirstDifference: "" when got and want are bit-identical, else where and what differs.
std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want,
                            const std::string& what);

// CheckOneRank: every call of EP rank d (of the group whose inputs are `inputs`) against
// the references, bit for bit: Dispatch (rows and tokens_per_local_expert), Combine of
// identity experts (gives back the input), Combine of ApplyExperts outputs
// (ReferenceCombine), CombineBackward of a random gradient (seeded by grad_seed + source
// rank; moves like Dispatch) and DispatchBackward (moves like Combine); then Recycles every
// output (so a second call runs on reused buffers). Every EP rank of the group must call
// it at the same time. Returns "" or the first failure.
std::string CheckOneRank(TokenDispatcher& disp, const std::vector<RankInput>& inputs,
                         int num_experts, int64_t h, int d, uint32_t grad_seed,
                         absl::Duration timeout);

// Imbalance: max / mean of per-expert row counts summed over ranks (1.0 = balanced).
double Imbalance(const std::vector<RankInput>& inputs, int num_experts);

}  // namespace mxmaca::layers::moe::dispatch::testing

#endif  // MXMACA_LAYERS_MOE_DISPATCH_DISPATCH_TESTING_H_
