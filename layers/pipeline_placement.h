// layers/pipeline_placement.h: which transformer layers (and the embedding / loss head)
// each pipeline rank and model chunk owns, from Megatron-LM's layer-split flags.
//
// docs/ARCHITECTURE.md, "Placement is data": a placement is a table layouts[rank][chunk] of
// StageLayout, printable in Megatron's --pipeline-model-parallel-layout syntax.
//
// Semantics follow Megatron-Core core_v0.15:
//   megatron/core/transformer/transformer_block.py  get_num_layers_to_build
//   megatron/core/transformer/transformer_layer.py  get_transformer_layer_offset
//   megatron/core/transformer/pipeline_parallel_layer_layout.py  PipelineParallelLayerLayout
//   megatron/core/transformer/transformer_config.py __post_init__ (uneven-PP checks)
//   megatron/training/arguments.py validate_args (VP size, flag conflicts)
// p = pipeline ranks, v = model chunks per rank (virtual stages; 1 = not interleaved),
// L = transformer layers. The virtual stage of (rank r, chunk c) is g = c * p + r; the
// model is cut into p * v contiguous blocks in the order g = 0, 1, ..., p v - 1, so chunk
// c of rank r holds block c * p + r. The embedding lives on g = 0 (rank 0, chunk 0) and
// the loss head (final norm, output layer, cross-entropy) on g = p v - 1 (rank p - 1,
// chunk v - 1).
#ifndef MXMACA_LAYERS_PIPELINE_PLACEMENT_H_
#define MXMACA_LAYERS_PIPELINE_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/gpt_parameters.h"

namespace mxmaca::layers {

// PipelinePlacementConfig: Megatron's flags that decide the split. At most one of
// num_layers_per_virtual_pipeline_stage, num_virtual_stages_per_pipeline_rank and
// pipeline_model_parallel_layout may be set; the layout excludes the first/last and
// account_for_* flags; first/last exclude account_for_*.
struct PipelinePlacementConfig {
  int64_t num_layers = 0;                    // --num-layers (L)
  int64_t pipeline_model_parallel_size = 1;  // --pipeline-model-parallel-size (p)
  // --num-layers-per-virtual-pipeline-stage (n): v = ((L + extras) / p) / n, with
  // extras = account_for_embedding + account_for_loss (Megatron's arguments.py).
  std::optional<int64_t> num_layers_per_virtual_pipeline_stage;
  // --num-virtual-stages-per-pipeline-rank: v directly.
  std::optional<int64_t> num_virtual_stages_per_pipeline_rank;
  // --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers: layers on
  // pipeline rank 0 / p - 1 (over all its chunks); the rest split evenly over the others.
  std::optional<int64_t> decoder_first_pipeline_num_layers;
  std::optional<int64_t> decoder_last_pipeline_num_layers;
  // --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split:
  // the embedding (loss) counts as one layer of the first (last) virtual stage.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // --pipeline-model-parallel-layout, e.g. "Ettt|tttt|ttttL" or "E|(t*4|)*2,tL".
  std::optional<std::string> pipeline_model_parallel_layout;
};

// PipelinePlacement: the resolved placement.
struct PipelinePlacement {
  int64_t pipeline_model_parallel_size = 1;          // p
  int64_t virtual_pipeline_model_parallel_size = 1;  // v (1 = not interleaved)
  // layouts[rank][chunk]: the StageLayout of model chunk `chunk` on pipeline rank `rank`
  // ([p][v]); an empty chunk has first_layer == last_layer.
  std::vector<std::vector<StageLayout>> layouts;
  // v_shape: chunk c of rank r holds virtual stage c p + r for even c and c p + p - 1 - r
  // for odd c (ZB-V's "V": chunk 0 runs down the ranks, chunk 1 back up, so the first and
  // the last virtual stage both sit on rank 0); false: Megatron's interleaving, c p + r.
  bool v_shape = false;

  // VirtualStageOf: the virtual stage model chunk `chunk` of rank `rank` holds.
  int64_t VirtualStageOf(int64_t rank, int64_t chunk) const {
    const int64_t p = pipeline_model_parallel_size;
    return v_shape && chunk % 2 == 1 ? chunk * p + p - 1 - rank : chunk * p + rank;
  }
  // virtual_stage: layouts of virtual stage g.
  const StageLayout& virtual_stage(int64_t g) const {
    const int64_t p = pipeline_model_parallel_size, c = g / p, o = g % p;
    return layouts[v_shape && c % 2 == 1 ? p - 1 - o : o][c];
  }
  int64_t num_virtual_stages() const {
    return pipeline_model_parallel_size * virtual_pipeline_model_parallel_size;
  }

  // ToLayoutString: the placement in --pipeline-model-parallel-layout syntax: virtual
  // stages in order g = 0..p v - 1 separated by '|', each "E"? "t"* "L"?; runs of more
  // than 3 t's written "t*n". BuildPipelinePlacement of the string (same p) gives this
  // placement back.
  std::string ToLayoutString() const;

  // Describe: multi-line text for the start-up log: a header (p, v, layout string) and
  // one line per (rank, chunk) with the virtual stage, layer range, count and E / L.
  std::string Describe() const;
};

// BuildPipelinePlacement: the placement Megatron would build for `config`. Errors
// (InvalidArgument, naming the flags and values involved): L < 1 or p < 1; two of the
// VP-size flags (or a VP flag and the layout); the layout with first/last or
// account_for_*; first/last with account_for_*; v > 1 with p == 1 (Megatron needs p > 1
// to interleave); v < 1 or v > L + extras; first/last with p == 1, with
// --num-layers-per-virtual-pipeline-stage, <= 0, not divisible by v, leaving a negative
// remainder, or a remainder that the middle ranks (or their chunks) do not divide, or
// that is not 0 when there are no middle ranks; L (+ extras) not divisible by p, or by
// p v; layout syntax errors (position and character, what was expected), 'm' (MTP
// layers, unsupported), a stage count that p does not divide, E not first in virtual
// stage 0, L not last in the last virtual stage, E or L not exactly once, or a count of
// t other than L.
absl::StatusOr<PipelinePlacement> BuildPipelinePlacement(const PipelinePlacementConfig& config);

// ToVShape: the same split of layers into virtual stages (the same layer ranges for
// virtual stage g), placed in the V of ZB-V (PipelinePlacement::v_shape). Errors:
// InvalidArgument unless v == 2 (ZB-V's two chunks per rank).
absl::StatusOr<PipelinePlacement> ToVShape(const PipelinePlacement& interleaved);

// ParsePipelineLayout: the layout string expanded to one string per virtual stage over
// {E, L, t, m} (Megatron's parse_str_to_list): ',' is ignored; "x*n" repeats the
// symbol x (any of E L t m |) n times; "(...)*n" repeats a group (no nested groups, and
// a group must be followed by *n); '|' separates stages. InvalidArgument naming the
// position (0-based, in the original string) and character, and what was expected.
absl::StatusOr<std::vector<std::string>> ParsePipelineLayout(const std::string& layout);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_PIPELINE_PLACEMENT_H_
