// tests/gpu/pipeline_loop.cc
#include "tests/gpu/pipeline_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::gpu_check {

namespace {

using layers::GptConfig;
using layers::GptStage;
using layers::MicroBatchInput;
using layers::StageOutput;
using layers::device::Segment;
using layers::device::SegmentRunner;

// Message: activations (forward) or input gradients (backward) of one micro-batch.
struct Message {
  int micro_batch = 0;
  std::vector<float> data;  // [b, s, h]
};

// Channel: a FIFO between the two stage threads. Close() wakes a waiting Pop, which then
// fails (the peer stopped).
class Channel {
 public:
  void Push(Message m) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(m));
    }
    cv_.notify_all();
  }
  absl::StatusOr<Message> Pop(const char* name, int expected) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return absl::CancelledError(absl::StrCat(name, ": the peer stage stopped"));
    Message m = std::move(queue_.front());
    queue_.pop_front();
    if (m.micro_batch != expected) {
      return absl::InternalError(absl::StrCat(name, ": micro-batch ", m.micro_batch,
                                              " arrived, expected ", expected));
    }
    return m;
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  bool closed_ = false;
};

// StageStep: one stage's operations of one step in 1F1B order.
absl::Status StageStep(int rank, GptStage& stage, int step, const TrainingLoopOptions& o,
                       const std::vector<TokenBatch>& batches, float loss_grad_scale,
                       Channel& forward, Channel& backward, double* loss_sum) {
  const int m_count = o.num_micro_batches;
  for (const auto& [op, m] : OneFOneBOrder(rank, 2, m_count)) {
    const int64_t id = static_cast<int64_t>(step) * m_count + m;
    const TokenBatch& bt = batches[m];
    if (op == 'F') {
      MicroBatchInput in;
      in.micro_batch_id = id;
      in.iteration = step;
      in.micro_batch_size = bt.b;
      in.seq_length = bt.s;
      Message received;
      if (rank == 0) {
        in.tokens = bt.tokens;
      } else {
        MXMACA_ASSIGN_OR_RETURN(received, forward.Pop("stage 1 forward input", m));
        in.hidden = received.data;
        in.labels = bt.labels;
        in.loss_mask = bt.loss_mask;
      }
      StageOutput out;
      MXMACA_RETURN_IF_ERROR(stage.Forward(in, &out));
      if (rank == 0) {
        forward.Push(Message{m, std::move(out.hidden)});
      } else {
        *loss_sum += out.loss_sum;
      }
    } else {
      std::vector<float> d_input;
      if (rank == 1) {
        MXMACA_RETURN_IF_ERROR(stage.BackwardInput(id, {}, loss_grad_scale, &d_input));
        backward.Push(Message{m, std::move(d_input)});
      } else {
        MXMACA_ASSIGN_OR_RETURN(Message grad, backward.Pop("stage 0 output gradient", m));
        MXMACA_RETURN_IF_ERROR(stage.BackwardInput(id, grad.data, 1.0f, &d_input));
      }
      MXMACA_RETURN_IF_ERROR(stage.BackwardWeight(id));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::pair<char, int>> OneFOneBOrder(int rank, int stages, int micro_batches) {
  const int warmup = std::min(stages - rank - 1, micro_batches);
  std::vector<std::pair<char, int>> ops;
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({'F', f});
  for (; f < micro_batches; ++f, ++b) {
    ops.push_back({'F', f});
    ops.push_back({'B', b});
  }
  for (; b < micro_batches; ++b) ops.push_back({'B', b});
  return ops;
}

absl::StatusOr<PipelineResult> RunTwoStagePipeline(
    std::array<layers::device::DeviceKernels*, 2> kernels, const GptConfig& config,
    const TrainingLoopOptions& options, layers::DeviceStageOptions stage_options,
    std::array<SegmentRunner, 2> runners) {
  if (config.num_layers < 2 || config.tied_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "two-stage pipeline: needs >= 2 layers (got ", config.num_layers,
        ") and untied embeddings (--untie-embeddings-and-output-weights)"));
  }
  stage_options.micro_batch_size =
      std::max(stage_options.micro_batch_size, options.micro_batch_size);
  const int64_t half = config.num_layers / 2;
  const std::array<layers::StageLayout, 2> layouts = {
      layers::StageLayout{0, half, true, false},
      layers::StageLayout{half, config.num_layers, false, true}};
  std::array<std::unique_ptr<GptStage>, 2> stages;
  PipelineStepTiming timing;  // of the running step; stage r touches only index r
  for (int r = 0; r < 2; ++r) {
    MXMACA_ASSIGN_OR_RETURN(
        stages[r], GptStage::CreateOnDevice(config, layouts[r], kernels[r], stage_options));
    stages[r]->set_segment_runner([r, &timing, runner = runners[r]](
                                      const layers::device::SegmentInfo& info,
                                      const Segment& segment) {
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status s = runner ? runner(info, segment) : segment();
      timing.runner_seconds[r] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++timing.segments[r];
      return s;
    });
  }
  PipelineResult result;
  for (int step = 0; step < options.steps; ++step) {
    std::vector<TokenBatch> batches;
    for (int m = 0; m < options.num_micro_batches; ++m) {
      batches.push_back(MakeTokenBatch(config, options, step, m));
    }
    const double tokens = StepTokens(config, options, step);
    const float loss_grad_scale = static_cast<float>(1.0 / tokens);
    timing = PipelineStepTiming();
    Channel forward, backward;
    std::array<absl::Status, 2> status;
    double loss_sum = 0.0;
    auto actor = [&](int r) {
      status[r] = StageStep(r, *stages[r], step, options, batches, loss_grad_scale, forward,
                            backward, &loss_sum);
      if (!status[r].ok()) {
        forward.Close();
        backward.Close();
      }
    };
    std::thread t0(actor, 0), t1(actor, 1);
    t0.join();
    t1.join();
    for (const absl::Status& s : status) {  // the root cause before the peer's cancellation
      if (!s.ok() && s.code() != absl::StatusCode::kCancelled) return s;
    }
    for (const absl::Status& s : status) MXMACA_RETURN_IF_ERROR(s);
    // The optimizer step (training_loop.h), the norm summed over both stages.
    double norm_sq = 0.0;
    for (auto& st : stages) {
      MXMACA_ASSIGN_OR_RETURN(const double part, st->GradNormSquared(nullptr));
      norm_sq += part;
    }
    StepRecord rec{loss_sum / tokens, std::sqrt(norm_sq)};
    if (!std::isfinite(rec.loss) || !std::isfinite(rec.grad_norm)) {
      return absl::InternalError(absl::StrCat("two-stage pipeline: step ", step, " loss ",
                                              rec.loss, ", grad norm ", rec.grad_norm));
    }
    const double clip = ClipCoefficient(rec.grad_norm, options.clip_grad);
    for (auto& st : stages) {
      if (clip != 1.0) MXMACA_RETURN_IF_ERROR(st->ScaleGrads(static_cast<float>(clip)));
      MXMACA_RETURN_IF_ERROR(st->AdamWStep(LearningRate(options, step), options.weight_decay,
                                           0.9f, 0.999f, 1e-8f, step + 1));
      MXMACA_RETURN_IF_ERROR(st->ZeroGrads());
      MXMACA_RETURN_IF_ERROR(st->kernels().Synchronize());
    }
    result.steps.push_back(rec);
    result.timing.push_back(timing);
  }
  return result;
}

}  // namespace mxmaca::gpu_check
