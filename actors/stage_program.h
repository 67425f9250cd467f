// actors/stage_program.h: the compute a StageActor runs, F / B / W separately callable.
//
// A StageActor owns one StageProgram (its layers, parameters and stashes) and calls it
// on its compute strand, one op at a time, in the order of its schedule. The GPT model
// (GptStageProgram) is one implementation; a synthetic one with declared op times lets
// pipelines larger than this machine run on real actors and messages.
#ifndef MXMACA_ACTORS_STAGE_PROGRAM_H_
#define MXMACA_ACTORS_STAGE_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/gpt_batch.h"
#include "layers/grad_buckets.h"
#include "layers/moe/moe_stats.h"
#include "layers/optimizer.h"
#include "layers/parameter_store.h"

namespace mxmaca::actors {

// MicroBatchKey: the micro-batch an op works on. `global_microbatch` numbers the
// micro-batches of the whole run (iteration-major), so dropout masks keyed by it do not
// depend on the layout. `eval` ops keep no stash.
struct MicroBatchKey {
  int64_t iteration = 0;
  int32_t microbatch = 0;        // within the iteration, 0-based
  int32_t chunk = 0;             // model chunk (virtual stage)
  int64_t global_microbatch = 0;
  bool eval = false;
  // MoE layers: the aux / z-loss gradient scale (1 / micro-batches per replica, or 1 with
  // --calculate-per-token-loss; Megatron's MoEAuxLossAutoScaler).
  double moe_aux_loss_grad_scale = 1.0;
};

// Activation: a [b, s, h] fp32 tensor passed between stages (shared, immutable once sent).
struct Activation {
  std::vector<int64_t> shape;
  std::shared_ptr<const std::vector<float>> data;
};

// ForwardResult: what F produced: the output activation (not on the last virtual stage)
// or, on the last, the sum of masked token losses and the number of unmasked tokens.
// `output` holds, on entry, a buffer recycled from the stage's ActivationPool (any size;
// fill it with assign/resize so its capacity is reused) and, on return, the output
// activation's values; the actor publishes it as the message payload.
struct ForwardResult {
  std::vector<int64_t> output_shape;  // [b, s, h]
  std::vector<float> output;
  double loss_sum = 0.0;
  double num_tokens = 0.0;
};

// StageProgram: see file comment. A stage may own several model chunks (virtual
// pipeline stages, interleaved 1F1B): MicroBatchKey::chunk selects one. Calls come from
// one strand at a time (never concurrently), in schedule order. Errors are absl::Status
// (bad shapes, missing stash, chunk out of range).
class StageProgram {
 public:
  virtual ~StageProgram() = default;

  // num_chunks: model chunks on this stage (v; 1 without virtual stages).
  virtual int num_chunks() const = 0;

  // Forward: F for `key`. `batch` is the micro-batch's data (tokens and positions for
  // the chunk with the embedding, labels and loss mask for the one with the loss head,
  // document starts everywhere with --reset-attention-mask); `input` is the previous
  // virtual stage's output (null on the first).
  virtual absl::Status Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                               const Activation* input, ForwardResult* result) = 0;
  // BackwardInput: B for `key`. `d_output` is the next virtual stage's input gradient
  // (null on the last, which starts from its loss with dL/d(loss_sum) = loss_grad_scale).
  // Writes the gradient w.r.t. this chunk's input, [b, s, h], into d_input (on entry a
  // recycled pool buffer, as ForwardResult::output; left empty on the first virtual stage).
  virtual absl::Status BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                                     float loss_grad_scale, std::vector<float>* d_input) = 0;
  // BackwardWeight: W for `key`: accumulates weight gradients, frees the stash.
  virtual absl::Status BackwardWeight(const MicroBatchKey& key) = 0;

  // parameters: chunk `chunk`'s parameters and gradients (0 <= chunk < num_chunks()).
  virtual layers::ParameterStore& parameters(int chunk) = 0;
  // tied_embedding_parameter: the index in parameters(chunk) of the word-embedding
  // tensor that is shared with the output layer on ANOTHER stage (Megatron's embedding
  // group: the first virtual stage's embedding and the last one's copy), whose
  // gradients are summed across the two; -1 when the chunk has none (untied
  // embeddings, or one stage holding both ends).
  virtual int tied_embedding_parameter(int chunk) const = 0;
  // is_tied_copy: parameter `param` of chunk `chunk` duplicates a tensor another stage
  // owns (the last stage's copy of the tied word embeddings): it is not counted in the
  // global grad norm and not written to checkpoints.
  virtual bool is_tied_copy(int chunk, int param) const = 0;
  // counts_toward_grad_norm: whether parameter `param` of chunk `chunk` is counted in the
  // global grad norm on this rank — each logical parameter exactly once: not the tied copy,
  // and a tensor replicated across tensor-parallel ranks only on TP rank 0.
  virtual bool counts_toward_grad_norm(int chunk, int param) const {
    return !is_tied_copy(chunk, param);
  }
  // peak_activation_bytes: the largest total stash held so far over all chunks (bytes);
  // ResetPeakActivationBytes starts a new measurement.
  virtual int64_t peak_activation_bytes() const = 0;
  virtual void ResetPeakActivationBytes() = 0;
  // TakeMoEStats: the MoE layers' routing statistics since the last call, reset (on the
  // strand, after an iteration's last op); empty for dense programs.
  virtual std::vector<layers::moe::MoELayerStats> TakeMoEStats() { return {}; }
  // FinishTrainingIteration: called once per training iteration on the strand after the
  // last op and the gradient reduction, before the grad norm (MoE: the expert-bias update,
  // which may run a blocking collective over the stage's TP x DP ranks; every rank of the
  // stage calls it for the same iterations). Errors end the run.
  virtual absl::Status FinishTrainingIteration() { return absl::OkStatus(); }
  // Expert parallelism across data-parallel ranks (layers/gpt_stage.h "Expert region"):
  // expert_region_begin: the arena element where chunk `chunk`'s routed experts start (the
  // data-parallel buckets end there); the arena end when there is no such region.
  // expert_data_parallel_rank: this rank's index in the expert-data-parallel group, -1
  // without a region (experts then follow the data-parallel rank). is_expert_shard: param
  // `param` is one of this rank's routed experts. ExpertGradNormSquared: the region's
  // share of the grad norm on this rank (after FinishTrainingIteration's reduction).
  virtual int64_t expert_region_begin(int chunk) { return parameters(chunk).arena_elements(); }
  virtual int expert_data_parallel_rank(int chunk) const {
    (void)chunk;
    return -1;
  }
  virtual bool is_expert_shard(int chunk, int param) const {
    (void)chunk;
    (void)param;
    return false;
  }
  virtual double ExpertGradNormSquared(int chunk) {
    (void)chunk;
    return 0.0;
  }
  // persistent_buffers: chunk `chunk`'s state that is not a parameter but travels with
  // checkpoints (Megatron's persistent buffers: the MoE routers' expert_bias [E] fp32),
  // by logical name; replicated on the stage's TP and DP ranks. Empty by default.
  virtual std::vector<std::pair<std::string, std::vector<float>*>> persistent_buffers(int chunk) {
    (void)chunk;
    return {};
  }

  // Training state on the backend (docs/CUDA.md "Training state on the device"):
  // state_on_backend: the program keeps parameters, gradients and the AdamW moments on its
  // backend (device memory) between iterations. The stage actor then never touches
  // parameters(c)'s host arenas during training: it takes the grad norm with
  // GradSumSquaresOnBackend (over layers::ShardGradNormRanges), steps with StepOnBackend,
  // and calls DownloadTrainingState before a checkpoint writes parameters(c) and the
  // optimizer. Only for stages whose gradients need no host-side reduction but, at most,
  // the tied embedding's sum across stages (data-parallel group of 1:
  // api/train/stage_ranks.h), which runs on a host copy of that one gradient
  // (DownloadGradientFromBackend / UploadGradientToBackend). False by default.
  virtual bool state_on_backend() const { return false; }
  // GradSumSquaresOnBackend: chunk `chunk`'s sum of g^2 over `ranges` of its gradient
  // arena (fp64, one partial per range added in range order: ShardGradNormSquared's
  // arithmetic). Errors: the backend's; Unimplemented without state on the backend.
  virtual absl::StatusOr<double> GradSumSquaresOnBackend(
      int chunk, absl::Span<const layers::GradBucket> ranges) {
    (void)chunk;
    (void)ranges;
    return absl::UnimplementedError("GradSumSquaresOnBackend: the state is on the host");
  }
  // StepOnBackend: unless `skip`, chunk `chunk`'s gradients *= each factor != 1 of
  // `grad_factors` in turn (the loss scale, then the clip coefficient) and `optimizer`'s
  // AdamW step (learning rates and weight decay as AdamWOptimizer::Step) on the backend;
  // then its gradients are zeroed. Errors: the backend's; Unimplemented without state on
  // the backend.
  virtual absl::Status StepOnBackend(int chunk, layers::AdamWOptimizer& optimizer, bool skip,
                                     absl::Span<const double> grad_factors, double lr,
                                     double decoupled_lr, double weight_decay) {
    (void)chunk, (void)optimizer, (void)skip, (void)grad_factors, (void)lr, (void)decoupled_lr,
        (void)weight_decay;
    return absl::UnimplementedError("StepOnBackend: the state is on the host");
  }
  // DownloadGradientFromBackend / UploadGradientToBackend: parameter `param` of chunk
  // `chunk`: its gradient into parameters(chunk)'s host arena, and back (synchronous): the
  // tied embedding's cross-stage sum runs on the host copy. No-ops without state on the
  // backend.
  virtual absl::Status DownloadGradientFromBackend(int chunk, int param) {
    (void)chunk;
    (void)param;
    return absl::OkStatus();
  }
  virtual absl::Status UploadGradientToBackend(int chunk, int param) {
    (void)chunk;
    (void)param;
    return absl::OkStatus();
  }
  // DownloadTrainingState: chunk `chunk`'s parameters into parameters(chunk) and its
  // moments into `optimizer` (synchronous; before a checkpoint is written). No-op without
  // state on the backend.
  virtual absl::Status DownloadTrainingState(int chunk, layers::AdamWOptimizer& optimizer) {
    (void)chunk;
    (void)optimizer;
    return absl::OkStatus();
  }
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STAGE_PROGRAM_H_
