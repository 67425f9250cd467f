// actors/device_stage_program.h: the StageProgram of the device backend (issue 8): a
// stage actor's model chunks as layers/device DeviceGptStages on the actor's own
// DeviceKernels — on the GPU its CUDA stream, cuBLASLt handle and device memory (each
// StageActor owns one, so its work queues on its own stream), or the CPU kernels for
// `--device device-on-cpu`, which runs this whole path in CI without a GPU.
//
// The actor's machinery is unchanged: activations travel between stages as host
// messages (copied from/to the device at each op), and the trainer's optimizer,
// data-parallel gradient reduction, grad norm and checkpoints work on the host
// ParameterStore of each chunk (the fp32 master weights, as Megatron's
// --optimizer-cpu-offload keeps them). The device holds the working copy: the first
// op of every (iteration, train/eval) uploads the host parameters, and the W op that
// completes a chunk's last micro-batch of the iteration downloads its gradients to the
// host arena (before the actor reduces them) and zeroes the device gradients.
// Consequences, stated: each iteration moves the parameters host->device and the
// gradients device->host once per chunk, and AdamW runs on the host CPU.
//
// Requires W calls in forward order per chunk (every static schedule); the dynamic
// policy and layer migration are refused by the trainer with --device other than cpu.
#ifndef MXMACA_ACTORS_DEVICE_STAGE_PROGRAM_H_
#define MXMACA_ACTORS_DEVICE_STAGE_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/stage_program.h"
#include "layers/device/cuda_graph_runner.h"
#include "layers/device/device_gpt_stage.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::actors {

class DeviceStageProgram : public StageProgram {
 public:
  // kernels: the actor's device (owned; outlives the chunks). chunks: at least one, built
  // on `kernels`. num_microbatches: micro-batches per training iteration on this stage
  // (Megatron's num_microbatches). reset_attention_mask as GptStageProgram.
  DeviceStageProgram(std::unique_ptr<layers::device::DeviceKernels> kernels,
                     std::vector<std::unique_ptr<layers::device::DeviceGptStage>> chunks,
                     int64_t num_microbatches, bool reset_attention_mask);
  ~DeviceStageProgram() override;

  int num_chunks() const override { return static_cast<int>(chunks_.size()); }
  // Forward / BackwardInput / BackwardWeight: StageProgram's contract. Errors: those of
  // DeviceGptStage (kInvalidArgument for bad input, kFailedPrecondition for W out of
  // forward order, kInternal for a CUDA failure naming the call), chunk out of range.
  absl::Status Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const Activation* input, ForwardResult* result) override;
  absl::Status BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                             float loss_grad_scale, std::vector<float>* d_input) override;
  absl::Status BackwardWeight(const MicroBatchKey& key) override;

  layers::ParameterStore& parameters(int chunk) override {
    return chunks_[chunk]->host_parameters();
  }
  int tied_embedding_parameter(int chunk) const override;
  bool is_tied_copy(int chunk, int param) const override;
  // peak_activation_bytes: device bytes of the micro-batch slots (every slot holds a
  // whole stash at fixed addresses; layers/device/device_gpt_stage.h).
  int64_t peak_activation_bytes() const override;
  void ResetPeakActivationBytes() override {}

  layers::device::DeviceGptStage& stage(int chunk) { return *chunks_[chunk]; }
  // set_cuda_graphs: the actor's graph cache (kept alive with the program; its runners are
  // the chunks' segment runners). cuda_graph_summary: its Summary(), "" without graphs.
  void set_cuda_graphs(std::shared_ptr<layers::device::CudaGraphs> graphs) {
    graphs_ = std::move(graphs);
  }
  std::string cuda_graph_summary() const { return graphs_ ? graphs_->Summary() : ""; }
  layers::device::DeviceKernels& kernels() { return *kernels_; }
  const layers::device::DeviceKernels& kernels() const { return *kernels_; }
  // parameter_bytes: fp32 bytes of every chunk's parameters (the size one full upload or
  // download of the weights moves).
  int64_t parameter_bytes() const {
    int64_t bytes = 0;
    for (const auto& chunk : chunks_) bytes += 4 * chunk->host_parameters().arena_elements();
    return bytes;
  }

 private:
  absl::StatusOr<layers::device::DeviceGptStage*> Chunk(const MicroBatchKey& key);
  // SyncParameters: uploads every chunk's host parameters at the first op of a new
  // (iteration, eval) group.
  absl::Status SyncParameters(const MicroBatchKey& key);

  std::unique_ptr<layers::device::DeviceKernels> kernels_;
  std::vector<std::unique_ptr<layers::device::DeviceGptStage>> chunks_;
  int64_t num_microbatches_;
  bool reset_attention_mask_;
  bool synced_ = false;
  int64_t synced_iteration_ = -1;
  bool synced_eval_ = false;
  std::vector<int64_t> w_done_;  // per chunk: W ops of the current iteration
  std::shared_ptr<layers::device::CudaGraphs> graphs_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_DEVICE_STAGE_PROGRAM_H_
