// actors/gpt_stage_program.h: StageProgram over the GPT layers (layers::GptStage), one
// GptStage per model chunk (virtual pipeline stage).
//
// Maps a micro-batch message (data::GptMicroBatch) and its MicroBatchKey to the layers'
// MicroBatchInput: tokens and position ids on the chunk with the embedding, labels and
// loss mask on the chunk with the loss head, document starts everywhere with
// --reset-attention-mask; the key's global micro-batch id and iteration select the
// dropout masks. Eval ops run EvalForward (no dropout, no stash). With context
// parallelism (GptStage::context_parallel()) every array is first cut to the CP rank's
// two chunks (layers/context_parallel/cp_batch.h SliceMicroBatchForCpRank).
//
// Device backends (--device cuda, or the emulated device of --device device-on-cpu): the
// chunks are GptStages built by GptStage::CreateOnDevice on the actor's own DeviceKernels,
// which the program owns (on the GPU its CUDA stream, cuBLASLt handle and device memory:
// each StageActor owns one, so its work queues on its own stream). Activations travel
// between stages as host messages (copied from/to the device at each op), and the
// trainer's optimizer, data-parallel gradient reduction, grad norm and checkpoints work
// on the host ParameterStore of each chunk (the fp32 master weights, as Megatron's
// --optimizer-cpu-offload keeps them). The device holds the working copy: the first op
// of every (iteration, train/eval) uploads the host parameters, and the W op that
// completes a chunk's last micro-batch of the iteration downloads its gradients to the
// host arena (before the actor reduces them) and zeroes the device gradients. So each
// iteration moves the parameters host->device and the gradients device->host once per
// chunk, and AdamW runs on the host CPU. With the training state on the device
// (set_state_on_backend: stages whose gradients need no host-side reduction) the
// parameters are uploaded once, the gradients, AdamW moments and step stay on the
// device, and only checkpoints download the state: docs/CUDA.md "Training state on the
// device".
#ifndef MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_
#define MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/stage_program.h"
#include "layers/device/cuda_graph_runner.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_stage.h"

namespace mxmaca::actors {

// GptStageProgram: owns the stage's chunks (chunks[c] = model chunk c).
class GptStageProgram : public StageProgram {
 public:
  // reset_attention_mask: pass the batch's document starts to attention (else causal).
  // chunks: at least one; their layouts come from the pipeline placement.
  GptStageProgram(std::vector<std::unique_ptr<layers::GptStage>> chunks,
                  bool reset_attention_mask);
  // Single-chunk convenience.
  GptStageProgram(std::unique_ptr<layers::GptStage> stage, bool reset_attention_mask);
  // A device backend: `kernels` owned (outlives the chunks, which were built on it with
  // GptStage::CreateOnDevice); num_microbatches: micro-batches per training iteration on
  // this stage (Megatron's num_microbatches).
  GptStageProgram(std::unique_ptr<layers::device::DeviceKernels> kernels,
                  std::vector<std::unique_ptr<layers::GptStage>> chunks, int64_t num_microbatches,
                  bool reset_attention_mask);
  ~GptStageProgram() override;

  int num_chunks() const override { return static_cast<int>(chunks_.size()); }
  absl::Status Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const Activation* input, ForwardResult* result) override;
  absl::Status BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                             float loss_grad_scale, std::vector<float>* d_input) override;
  absl::Status BackwardWeight(const MicroBatchKey& key) override;

  layers::ParameterStore& parameters(int chunk) override { return chunks_[chunk]->parameters(); }
  int tied_embedding_parameter(int chunk) const override;
  bool is_tied_copy(int chunk, int param) const override;
  bool counts_toward_grad_norm(int chunk, int param) const override;
  // peak_activation_bytes: the peak of the chunks' stashes; on a device backend the device
  // bytes of the micro-batch slots (each holds a whole stash at fixed addresses).
  int64_t peak_activation_bytes() const override;
  void ResetPeakActivationBytes() override;
  std::vector<layers::moe::MoELayerStats> TakeMoEStats() override;
  // FinishTrainingIteration: every chunk's GptStage::UpdateExpertBias over the
  // reduction given to SetExpertBiasReduction (none: this rank's counts alone).
  absl::Status FinishTrainingIteration() override;
  std::vector<std::pair<std::string, std::vector<float>*>> persistent_buffers(
      int chunk) override {
    return chunks_[chunk]->ExpertBiasBuffers();
  }
  int64_t expert_region_begin(int chunk) override {
    return chunks_[chunk]->expert_region_begin();
  }
  int expert_data_parallel_rank(int chunk) const override {
    return chunks_[chunk]->expert_data_parallel_rank();
  }
  bool is_expert_shard(int chunk, int param) const override {
    return chunks_[chunk]->holds_expert_shard(param);
  }
  double ExpertGradNormSquared(int chunk) override {
    return chunks_[chunk]->ExpertGradNormSquared();
  }
  // SetExpertBiasReduction: the in-place fp32 sum over the stage's TP x DP ranks.
  void SetExpertBiasReduction(std::function<absl::Status(float* data, int64_t n)> all_reduce) {
    expert_bias_all_reduce_ = std::move(all_reduce);
  }

  layers::GptStage& stage(int chunk = 0) { return *chunks_[chunk]; }

  // Device backends: on_device, the kernels (null on the CPU backend), the actor's CUDA
  // graph cache (kept alive with the program; its runners are the chunks' segment
  // runners) and its Summary() ("" without graphs), and parameter_bytes: fp32 bytes of
  // every chunk's parameters (what one full upload or download of the weights moves).
  bool on_device() const { return kernels_ != nullptr; }
  const layers::device::DeviceKernels* kernels() const { return kernels_.get(); }
  void set_cuda_graphs(std::shared_ptr<layers::device::CudaGraphs> graphs) {
    graphs_ = std::move(graphs);
  }
  std::string cuda_graph_summary() const { return graphs_ ? graphs_->Summary() : ""; }
  int64_t parameter_bytes() const;

  // Training state on the device (StageProgram::state_on_backend; set by
  // api/train/stage_ranks.cc before the first op, device backends only): the parameters
  // are uploaded once, at the first op (after any checkpoint load into the host stores),
  // gradients stay on the device, and the step runs there (GptStage::StepOptimizer).
  void set_state_on_backend(bool on) { state_on_backend_ = on && on_device(); }
  bool state_on_backend() const override { return state_on_backend_; }
  absl::StatusOr<double> GradSumSquaresOnBackend(
      int chunk, absl::Span<const layers::GradBucket> ranges) override;
  absl::Status StepOnBackend(int chunk, layers::AdamWOptimizer& optimizer, bool skip,
                             absl::Span<const double> grad_factors, double lr, double decoupled_lr,
                             double weight_decay) override;
  absl::Status DownloadTrainingState(int chunk, layers::AdamWOptimizer& optimizer) override;
  absl::Status DownloadGradientFromBackend(int chunk, int param) override {
    return state_on_backend_ ? chunks_[chunk]->DownloadGradient(param) : absl::OkStatus();
  }
  absl::Status UploadGradientToBackend(int chunk, int param) override {
    return state_on_backend_ ? chunks_[chunk]->UploadGradient(param) : absl::OkStatus();
  }

 private:
  absl::StatusOr<layers::GptStage*> Chunk(const MicroBatchKey& key);
  // ForwardOn: Forward on `stage` with the batch as the stage sees it (CP: its slice).
  absl::Status ForwardOn(layers::GptStage& stage, const MicroBatchKey& key,
                         const data::GptMicroBatch& batch, const Activation* input,
                         ForwardResult* result);
  // Around each F/B/W call: track the stage's peak stash over all chunks.
  void BeginCall(int chunk);
  void EndCall(int chunk);

  // SyncParameters: on a device backend, uploads every chunk's host parameters at the
  // first op of a new (iteration, eval) group; with the state on the device, at the first
  // op only.
  absl::Status SyncParameters(const MicroBatchKey& key);

  // Declared before the chunks, destroyed after them (they allocated from it).
  std::unique_ptr<layers::device::DeviceKernels> kernels_;
  std::vector<std::unique_ptr<layers::GptStage>> chunks_;
  bool reset_attention_mask_;
  int64_t peak_ = 0;
  int64_t num_microbatches_ = 0;
  bool synced_ = false;
  int64_t synced_iteration_ = -1;
  bool synced_eval_ = false;
  bool state_on_backend_ = false;
  std::vector<int64_t> w_done_;  // per chunk: W ops of the current iteration
  std::shared_ptr<layers::device::CudaGraphs> graphs_;
  std::function<absl::Status(float* data, int64_t n)> expert_bias_all_reduce_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_
