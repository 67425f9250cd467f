// layers/parameter_store.h: a stage's parameters and gradients as two flat fp32 arenas,
// each tensor registered under its Megatron logical name.
//
// docs/ARCHITECTURE.md: "Checkpoints store logical tensors" and "Randomness is a function, not a
// stream". Every tensor carries its logical name (MEGATRON_FORMATS.md, GPT parameter
// names), its full logical shape and the offsets of the shard held here (the whole
// tensor until tensor parallelism shards it), so checkpoints and the optimizer can address
// it by name. Initial values are a pure function of (seed, name, element index of the
// FULL tensor): any later sharding or pipeline layout reproduces them exactly.
#ifndef MXMACA_LAYERS_PARAMETER_STORE_H_
#define MXMACA_LAYERS_PARAMETER_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "layers/grad_clip.h"
#include "layers/optimizer.h"

namespace mxmaca::layers {

// ParameterInit: how a tensor's initial values are drawn.
//   kNormal: normal(0, init_std) (Megatron's init_method_normal / scaled_init_method_normal)
//   kZeros:  0 (biases, norm biases)
//   kOnes:   1 (norm weights)
enum class ParameterInit { kNormal, kZeros, kOnes };

// ParameterSpec: what a caller registers.
struct ParameterSpec {
  std::string name;            // logical name, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::vector<int64_t> shape;  // full logical shape, every dim > 0
  ParameterInit init = ParameterInit::kNormal;
  float init_std = 0.0f;  // for kNormal
  // Megatron (megatron/core/optimizer/__init__.py, _get_param_groups): no weight decay for
  // biases and 1-D tensors (norm weights and biases).
  bool weight_decay = true;
  // Shared with another tensor of the model (word embeddings used as output layer with
  // tied embeddings); under pipeline parallelism the two copies' gradients are summed.
  bool tied = false;
  // vocab_rows: for a tensor whose dim 0 is the padded vocabulary (the word embeddings and
  // the output layer, padded by Megatron's _vocab_size_with_padding to a multiple of
  // --make-vocab-size-divisible-by x TP), the true vocabulary size V; rows [V, shape[0])
  // are padding. 0: every row is data. Checkpoints store the logical rows [0, V) and
  // re-pad on load, so any padded size loads (actors/stage_checkpoint.h).
  int64_t vocab_rows = 0;
  // save_padding_rows: the padding rows take part in the loss (--softmax-over-padded-vocab
  // trains them), so checkpoints keep every row; they still load into another padded size
  // (rows [0, V) are read, the rest re-padded).
  bool save_padding_rows = false;
};

// ParameterInfo: a registered tensor. The shard held here is [shard_offset, shard_offset +
// shard_shape) of the full tensor (the whole tensor without tensor parallelism:
// shard_offset 0, shard_shape = shape), stored in C order over shard_shape.
//
// shard_chunks > 1 (tensor parallelism of SwiGLU's linear_fc1, whose rows are [gate; up]):
// dim 0 of the FULL tensor is `shard_chunks` equal chunks of shape[0] / shard_chunks rows
// and the shard holds the same row range of every chunk, chunk after chunk. shard_offset[0]
// is then the first row WITHIN a chunk and shard_shape[0] the rows of all chunks together:
// local row c * (shard_shape[0] / shard_chunks) + i is full row
// c * (shape[0] / shard_chunks) + shard_offset[0] + i (Megatron's per-rank
// [gate_shard; up_shard]). Such a shard is not one box of the full tensor: ShardBoxes
// lists its boxes (a checkpoint writer/reader must use them, not shard_offset/shard_shape).
struct ParameterInfo {
  ParameterSpec spec;
  std::vector<int64_t> shard_offset;
  std::vector<int64_t> shard_shape;
  int64_t shard_chunks = 1;
  int64_t numel = 0;         // elements in the shard
  int64_t arena_offset = 0;  // first element in the arenas (a multiple of 16: 64-byte aligned)

  // is_whole: the shard is the whole tensor (nothing split).
  bool is_whole() const;
  // FullIndex: the row-major index in the FULL tensor of shard element `local` (C order
  // over shard_shape; shard_chunks respected).
  int64_t FullIndex(int64_t local) const;
};

// ShardBox: one box of a shard: full-tensor offsets and extents, and the flat index in the
// shard (C order over ParameterInfo::shard_shape) of the box's first element; the box's
// elements are consecutive in the shard, in C order over `shape`.
struct ShardBox {
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
  int64_t local_offset = 0;
};

// ShardBoxes: the boxes that make up `info`'s shard: one box {shard_offset, shard_shape,
// 0} when shard_chunks == 1, else one box per chunk, in local order.
std::vector<ShardBox> ShardBoxes(const ParameterInfo& info);

// ParameterStream: the RngKey stream of a tensor's initial values: MakeRngStream(
// FNV-1a-64(name), 0x1A17, 0, 0) (kernels/philox.h); the tag keeps it apart from dropout
// streams.
uint64_t ParameterStream(const std::string& name);

// InitialValue: element `index` (row-major in the FULL tensor) of a tensor initialised
// with `spec` under `seed`. kNormal: Box-Muller in fp64 on u1 = UniformAt(key, 2 index),
// u2 = UniformAt(key, 2 index + 1): init_std * sqrt(-2 ln(1 - u1)) * cos(2 pi u2),
// rounded to fp32.
float InitialValue(uint64_t seed, const ParameterSpec& spec, int64_t index);

// ParameterStore: register tensors, Finalize() once (allocates both arenas, zeroed),
// then Initialize(seed). Pointers returned after Finalize stay valid for the store's
// lifetime. Not thread-safe for registration; concurrent reads/writes of distinct tensors
// are fine.
class ParameterStore {
 public:
  ParameterStore() = default;
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // Register: adds a tensor; returns its index. InvalidArgument on a duplicate name or a
  // shape with a dimension <= 0; FailedPrecondition after Finalize.
  absl::StatusOr<int> Register(const ParameterSpec& spec);
  // RegisterShard: adds the shard [shard_offset, shard_offset + shard_shape) of the tensor
  // `spec` (full shape), with `shard_chunks` as ParameterInfo documents. Errors of
  // Register, and InvalidArgument when the shard does not fit in the full shape (rank
  // mismatch, negative offset, extent <= 0, end past the dim; with chunks: shape[0] or
  // shard_shape[0] not divisible by shard_chunks).
  absl::StatusOr<int> RegisterShard(const ParameterSpec& spec,
                                    const std::vector<int64_t>& shard_offset,
                                    const std::vector<int64_t>& shard_shape,
                                    int64_t shard_chunks = 1);
  // AlignNextTo: the next registered tensor starts at a multiple of `multiple` elements
  // (a positive multiple of 16), and returns that offset: the end of a region the tensors
  // registered so far fill (e.g. the data-parallel buckets' range, grad_buckets.h).
  // FailedPrecondition after Finalize; InvalidArgument for a bad multiple.
  absl::StatusOr<int64_t> AlignNextTo(int64_t multiple);

  // Finalize: allocates the parameter and gradient arenas (zero-filled). Their length is
  // the end of the last tensor rounded up to a multiple of `pad_to_multiple_of` (elements),
  // e.g. dp * 16 so the arena splits into data-parallel buckets and shards of whole 64-byte
  // lines (layers/grad_buckets.h); the padding stays 0. `pad_to_multiple_of` must be a
  // positive multiple of 16 (a caller bug otherwise: the store aborts with a message).
  void Finalize(int64_t pad_to_multiple_of = 16);
  bool finalized() const { return finalized_; }
  // Initialize: sets every parameter to InitialValue(seed, spec, full index) (the full
  // index of each shard element: ParameterInfo::FullIndex), so any sharding holds the
  // slice of the same full tensor.
  void Initialize(uint64_t seed);
  // ZeroGrads: the gradient arena to 0.
  void ZeroGrads();

  int size() const { return static_cast<int>(infos_.size()); }
  const ParameterInfo& info(int i) const { return infos_[i]; }
  // Index: NotFound naming `name` when it was never registered.
  absl::StatusOr<int> Index(const std::string& name) const;
  // param / grad: the shard of tensor i (numel fp32 values); only after Finalize.
  float* param(int i) { return params_.data() + infos_[i].arena_offset; }
  const float* param(int i) const { return params_.data() + infos_[i].arena_offset; }
  float* grad(int i) { return grads_.data() + infos_[i].arena_offset; }
  const float* grad(int i) const { return grads_.data() + infos_[i].arena_offset; }
  // The whole arenas (including alignment padding, which stays 0).
  absl::Span<float> params_arena() { return absl::MakeSpan(params_); }
  absl::Span<float> grads_arena() { return absl::MakeSpan(grads_); }
  absl::Span<const float> grads_arena() const { return absl::MakeConstSpan(grads_); }
  int64_t num_elements() const;  // sum of numel (no padding)
  // arena_elements: the length of each arena, padding included (0 before Finalize).
  int64_t arena_elements() const { return static_cast<int64_t>(params_.size()); }

  // OptimizerTensors: one entry per tensor, in registration order, for AdamWOptimizer
  // (apply_weight_decay = spec.weight_decay).
  std::vector<OptimizerTensor> OptimizerTensors();
  // GradSpans: one entry per tensor, in registration order, for the grad norm / clipping.
  std::vector<GradSpan> GradSpans();

 private:
  std::vector<ParameterInfo> infos_;
  absl::flat_hash_map<std::string, int> index_;
  std::vector<float> params_;
  std::vector<float> grads_;
  bool finalized_ = false;
  int64_t next_offset_ = 0;  // AlignNextTo
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_PARAMETER_STORE_H_
