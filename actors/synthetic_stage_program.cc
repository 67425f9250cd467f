// actors/synthetic_stage_program.cc: see synthetic_stage_program.h.
#include "actors/synthetic_stage_program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "layers/grad_buckets.h"
#include "layers/lr_schedule.h"
#include "layers/optimizer.h"

namespace mxmaca::actors {
namespace {

using Clock = std::chrono::steady_clock;
using scheduler::OpKind;

// Sleeps until `seconds` after `start` (never returns early; a zero time returns at once).
void WaitUntil(Clock::time_point start, double seconds) {
  if (seconds <= 0.0) return;
  std::this_thread::sleep_until(
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

const char* OpLetter(OpKind op) {
  switch (op) {
    case OpKind::kForward: return "F";
    case OpKind::kBackwardInput: return "B";
    case OpKind::kBackwardWeight: return "W";
  }
  return "?";
}

bool ValidSeconds(double s) { return std::isfinite(s) && s >= 0.0; }

}  // namespace

absl::StatusOr<std::unique_ptr<SyntheticStageProgram>> SyntheticStageProgram::Create(
    const SyntheticStageOptions& o) {
  if (o.pipeline_size < 1 || o.pipeline_rank < 0 || o.pipeline_rank >= o.pipeline_size) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic stage: pipeline rank ",
                                                   o.pipeline_rank, " not in [0, ",
                                                   o.pipeline_size, ")"));
  }
  if (o.data_parallel_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic stage: data parallel size ", o.data_parallel_size, " < 1"));
  }
  if (o.chunks.empty()) return absl::InvalidArgumentError("synthetic stage: no model chunks");
  for (size_t c = 0; c < o.chunks.size(); ++c) {
    const SyntheticOpSeconds& t = o.chunks[c];
    if (!ValidSeconds(t.forward) || !ValidSeconds(t.backward_input) ||
        !ValidSeconds(t.backward_weight)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic stage ", o.pipeline_rank, " chunk ", c, ": op times F ", t.forward,
          " B ", t.backward_input, " W ", t.backward_weight, " s must be finite and >= 0"));
    }
  }
  if (o.micro_batch_size < 1 || o.seq_length < 1 || o.hidden_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic stage: activation shape [", o.micro_batch_size, ", ",
                     o.seq_length, ", ", o.hidden_size, "] needs every dim >= 1"));
  }
  if (o.parameters_per_chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "synthetic stage: parameters_per_chunk ", o.parameters_per_chunk, " < 1"));
  }
  if (o.failure.kind != SyntheticFailureKind::kNone &&
      (o.failure.chunk < 0 || o.failure.chunk >= static_cast<int32_t>(o.chunks.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic stage: injected failure names chunk ",
                                                   o.failure.chunk, " of ", o.chunks.size()));
  }
  std::unique_ptr<SyntheticStageProgram> program(new SyntheticStageProgram(o));
  for (int c = 0; c < program->num_chunks(); ++c) {
    auto store = std::make_unique<layers::ParameterStore>();
    layers::ParameterSpec spec;
    spec.name = absl::StrCat("synthetic.virtual_stage.",
                             scheduler::VirtualStage(c, o.pipeline_rank, o.pipeline_size,
                                                     o.placement),
                             ".weight");
    spec.shape = {o.parameters_per_chunk};
    spec.init_std = 0.02f;
    absl::StatusOr<int> id = store->Register(spec);
    if (!id.ok()) return id.status();
    store->Finalize(16LL * o.data_parallel_size);
    store->Initialize(o.seed);
    program->stores_.push_back(std::move(store));
  }
  return program;
}

SyntheticStageProgram::SyntheticStageProgram(const SyntheticStageOptions& options)
    : options_(options) {
  stash_bytes_ = options_.stash_bytes >= 0 ? options_.stash_bytes
                                           : options_.micro_batch_size * options_.seq_length *
                                                 options_.hidden_size *
                                                 static_cast<int64_t>(sizeof(float));
}

bool SyntheticStageProgram::first_virtual(int chunk) const {
  return scheduler::VirtualStage(chunk, options_.pipeline_rank, options_.pipeline_size,
                                 options_.placement) == 0;
}

bool SyntheticStageProgram::last_virtual(int chunk) const {
  return scheduler::VirtualStage(chunk, options_.pipeline_rank, options_.pipeline_size,
                                 options_.placement) ==
         options_.pipeline_size * num_chunks() - 1;
}

absl::Status SyntheticStageProgram::Check(const MicroBatchKey& key, OpKind op) const {
  if (key.chunk < 0 || key.chunk >= num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat("model chunk ", key.chunk,
                                                   " out of range: this stage has ",
                                                   num_chunks(), " chunk(s)"));
  }
  const SyntheticFailure& f = options_.failure;
  if (f.kind == SyntheticFailureKind::kNone || key.eval || f.iteration != key.iteration ||
      f.microbatch != key.microbatch || f.chunk != key.chunk || f.op != op) {
    return absl::OkStatus();
  }
  const std::string where =
      absl::StrCat(OpLetter(op), key.microbatch, " chunk ", key.chunk, " of iteration ",
                   key.iteration, " on synthetic stage ", options_.pipeline_rank);
  if (f.kind == SyntheticFailureKind::kThrow) {
    throw std::runtime_error(absl::StrCat("injected exception at ", where));
  }
  return absl::InternalError(absl::StrCat("injected failure at ", where));
}

void SyntheticStageProgram::MakeTensor(const Activation* from, float fill,
                                       std::vector<float>* out) const {
  if (!options_.real_payload) {
    out->assign(1, 0.0f);  // the one-float payload
    return;
  }
  const size_t n = static_cast<size_t>(options_.micro_batch_size * options_.seq_length *
                                       options_.hidden_size);
  if (from != nullptr && from->data) {
    out->assign(from->data->begin(), from->data->end());  // the copy measured
  } else {
    out->assign(n, fill);
  }
}

absl::Status SyntheticStageProgram::Forward(const MicroBatchKey& key, const data::GptMicroBatch&,
                                            const Activation* input, ForwardResult* result) {
  const Clock::time_point start = Clock::now();
  if (absl::Status s = Check(key, OpKind::kForward); !s.ok()) return s;
  const int64_t n = options_.micro_batch_size * options_.seq_length * options_.hidden_size;
  if (!first_virtual(key.chunk)) {
    if (input == nullptr || !input->data) {
      return absl::InvalidArgumentError(absl::StrCat("F", key.microbatch, " chunk ", key.chunk,
                                                     ": no input activation"));
    }
    if (options_.real_payload && static_cast<int64_t>(input->data->size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "F", key.microbatch, " chunk ", key.chunk, ": input has ", input->data->size(),
          " values, expected b * s * h = ", n));
    }
  }
  if (!key.eval) {
    const auto stash_key = std::make_pair(key.chunk, key.global_microbatch);
    if (stash_.count(stash_key) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "F", key.microbatch, " chunk ", key.chunk, " ran twice (stash still held)"));
    }
    stash_[stash_key] = stash_bytes_;
    live_ += stash_bytes_;
    peak_ = std::max(peak_, live_);
  }
  if (last_virtual(key.chunk)) {
    const double tokens = static_cast<double>(options_.micro_batch_size * options_.seq_length);
    result->loss_sum = options_.loss_per_token * tokens;
    result->num_tokens = tokens;
  } else {
    result->output_shape = {options_.micro_batch_size, options_.seq_length, options_.hidden_size};
    MakeTensor(first_virtual(key.chunk) ? nullptr : input, 1.0f, &result->output);
  }
  WaitUntil(start, options_.chunks[key.chunk].forward);
  return absl::OkStatus();
}

absl::Status SyntheticStageProgram::BackwardInput(const MicroBatchKey& key,
                                                  const Activation* d_output, float,
                                                  std::vector<float>* d_input) {
  const Clock::time_point start = Clock::now();
  if (absl::Status s = Check(key, OpKind::kBackwardInput); !s.ok()) return s;
  if (stash_.count(std::make_pair(key.chunk, key.global_microbatch)) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("B", key.microbatch, " chunk ", key.chunk,
                                                      ": no stash (F did not run)"));
  }
  if (!last_virtual(key.chunk) && (d_output == nullptr || !d_output->data)) {
    return absl::InvalidArgumentError(absl::StrCat("B", key.microbatch, " chunk ", key.chunk,
                                                   ": no output gradient"));
  }
  if (!first_virtual(key.chunk) && d_input != nullptr) {
    MakeTensor(last_virtual(key.chunk) ? nullptr : d_output, 0.5f, d_input);
  }
  WaitUntil(start, options_.chunks[key.chunk].backward_input);
  return absl::OkStatus();
}

absl::Status SyntheticStageProgram::BackwardWeight(const MicroBatchKey& key) {
  const Clock::time_point start = Clock::now();
  if (absl::Status s = Check(key, OpKind::kBackwardWeight); !s.ok()) return s;
  auto it = stash_.find(std::make_pair(key.chunk, key.global_microbatch));
  if (it == stash_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("W", key.microbatch, " chunk ", key.chunk,
                                                      ": no stash (F did not run)"));
  }
  live_ -= it->second;
  stash_.erase(it);
  layers::ParameterStore& store = *stores_[key.chunk];
  float* g = store.grad(0);
  for (int64_t i = 0; i < store.info(0).numel; ++i) g[i] += options_.grad_per_microbatch;
  WaitUntil(start, options_.chunks[key.chunk].backward_weight);
  return absl::OkStatus();
}

absl::Status SyntheticSampleDataset::GetSample(int64_t i, absl::Span<int32_t> out) const {
  if (i < 0 || i >= size_) {
    return absl::OutOfRangeError(
        absl::StrCat("synthetic dataset: sample ", i, " not in [0, ", size_, ")"));
  }
  if (static_cast<int64_t>(out.size()) != seq_length_ + 1) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic dataset: buffer of ", out.size(),
                                                   " tokens, expected ", seq_length_ + 1));
  }
  for (int64_t j = 0; j < seq_length_ + 1; ++j) {
    out[static_cast<size_t>(j)] = 1 + static_cast<int32_t>((7 * i + j) % (vocab_ - 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PipelineRank>> BuildSyntheticRanks(const SyntheticJobOptions& o) {
  const int32_t p = o.pipeline_size, dp = o.data_parallel_size, v = o.num_chunks;
  if (p < 1 || dp < 1 || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic job: p ", p, ", dp ", dp, ", v ",
                                                   v, " must all be >= 1"));
  }
  if (!o.op_seconds.empty()) {
    bool shaped = static_cast<int32_t>(o.op_seconds.size()) == p;
    for (const auto& row : o.op_seconds) shaped = shaped && static_cast<int32_t>(row.size()) == v;
    if (!shaped) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic job: op_seconds must be [p = ", p, "][v = ", v, "]"));
    }
  }
  for (const auto& [rank, failure] : o.failures) {
    if (rank < 0 || rank >= p * dp * std::max(1, o.tensor_parallel_size)) {
      return absl::InvalidArgumentError(absl::StrCat("synthetic job: failure injected into rank ",
                                                     rank, " of ", p * dp));
    }
  }
  std::vector<PipelineRank> ranks;
  const int32_t tp = std::max(1, o.tensor_parallel_size);
  for (int32_t rank = 0; rank < p * dp * tp; ++rank) {
    const int32_t s = rank / (dp * tp), r = (rank / tp) % dp, t = rank % tp;
    SyntheticStageOptions so;
    so.placement = o.schedule == scheduler::ScheduleKind::kZeroBubbleV
                       ? scheduler::Placement::kVShape
                       : scheduler::Placement::kInterleaved;
    so.pipeline_rank = s;
    so.pipeline_size = p;
    so.data_parallel_size = dp;
    so.chunks = o.op_seconds.empty() ? std::vector<SyntheticOpSeconds>(v, o.uniform)
                                     : o.op_seconds[s];
    so.micro_batch_size = o.micro_batch_size;
    so.seq_length = o.seq_length;
    so.hidden_size = o.hidden_size;
    so.real_payload = o.real_payload;
    so.loss_per_token = o.loss_per_token;
    so.stash_bytes = o.stash_bytes;
    so.parameters_per_chunk = o.parameters_per_chunk;
    for (const auto& [at, failure] : o.failures) {
      if (at == rank) so.failure = failure;
    }
    absl::StatusOr<std::unique_ptr<SyntheticStageProgram>> program =
        SyntheticStageProgram::Create(so);
    if (!program.ok()) return program.status();
    PipelineRank pr;
    pr.rank = rank;
    pr.pipeline_rank = s;
    pr.data_parallel_rank = r;
    pr.tensor_parallel_rank = t;
    for (int c = 0; c < v; ++c) {
      layers::ParameterStore& store = (*program)->parameters(c);
      absl::StatusOr<layers::DataParallelBuckets> buckets =
          layers::BuildDataParallelBuckets(store, dp, /*bucket_elements=*/0);
      if (!buckets.ok()) return buckets.status();
      std::vector<layers::OptimizerTensor> tensors =
          o.distributed_optimizer ? layers::DistributedOptimizerTensors(store, *buckets, r)
                                  : store.OptimizerTensors();
      pr.optimizers.push_back(
          std::make_shared<layers::AdamWOptimizer>(layers::AdamWOptions{}, std::move(tensors)));
      pr.buckets.push_back(std::move(*buckets));
    }
    pr.program = std::move(*program);
    ranks.push_back(std::move(pr));
  }
  return ranks;
}

absl::StatusOr<TrainingSummary> RunSyntheticJob(const SyntheticJobOptions& o) {
  if (!ValidSeconds(o.optimizer_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "synthetic job: optimizer step time ", o.optimizer_seconds, " s must be finite and >= 0"));
  }
  absl::StatusOr<std::vector<PipelineRank>> ranks = BuildSyntheticRanks(o);
  if (!ranks.ok()) return ranks.status();
  scheduler::ScheduleOptions so;
  so.kind = o.schedule;
  so.num_stages = o.pipeline_size;
  so.num_chunks = o.num_chunks;
  so.num_microbatches = o.num_microbatches;
  absl::StatusOr<scheduler::PipelineSchedule> schedule = scheduler::BuildSchedule(so);
  if (!schedule.ok()) return schedule.status();

  layers::OptimizerParamSchedulerConfig lr;
  lr.max_lr = 1.0e-4;
  lr.min_lr = 1.0e-4;
  lr.lr_decay_style = layers::LrDecayStyle::kConstant;
  lr.start_wd = lr.end_wd = 0.0;
  absl::StatusOr<layers::OptimizerParamScheduler> lr_scheduler =
      o.scheduler ? absl::StatusOr<layers::OptimizerParamScheduler>(*o.scheduler)
                  : layers::OptimizerParamScheduler::Create(lr);
  if (!lr_scheduler.ok()) return lr_scheduler.status();

  const int64_t gbs = o.micro_batch_size * o.num_microbatches * o.data_parallel_size;
  auto cc = std::make_shared<CoordinatorConfig>();
  cc->train_iters = o.train_iters;
  cc->global_batch_size = gbs;
  cc->micro_batch_size = o.micro_batch_size;
  cc->num_microbatches = o.num_microbatches;
  cc->seq_length = o.seq_length;
  cc->clip_grad = o.clip_grad;
  cc->log_interval = o.log_interval;
  cc->eval_interval = 0;
  cc->eval_iters = 0;
  cc->do_valid = false;
  cc->scheduler = *lr_scheduler;
  cc->train_schedule = std::move(*schedule);
  cc->print = o.print;
  cc->trace_file = o.trace_file;
  cc->pipeline_channel_slots = o.channel_slots;
  cc->dynamic_pipeline = o.dynamic;
  cc->on_iteration = o.on_iteration;
  cc->metrics = o.metrics;
  cc->optimizer_post_validation = o.optimizer_post_validation;
  cc->synthetic_optimizer_seconds = o.optimizer_seconds;
  cc->max_stashed_microbatches = o.max_stashed_microbatches;

  DataActorConfig dc;
  dc.train = std::make_shared<SyntheticSampleDataset>(std::max<int64_t>(1, o.train_iters) * gbs,
                                                      o.seq_length);
  dc.micro_batch_size = o.micro_batch_size;
  dc.seq_length = o.seq_length;
  dc.eod = 0;

  PipelineRuntimeOptions ro;
  ro.pipeline_size = o.pipeline_size;
  ro.data_parallel_size = o.data_parallel_size;
  ro.tensor_parallel_size = std::max(1, o.tensor_parallel_size);
  ro.compute_threads =
      o.compute_threads > 0 ? o.compute_threads : o.pipeline_size * o.data_parallel_size;
  ro.distributed_optimizer = o.distributed_optimizer;
  ro.overlap_grad_reduce = o.overlap_grad_reduce;
  ro.trace = o.trace_file.has_value();
  ro.slowdown_stage = o.slowdown_stage;
  ro.slowdown_factor = o.slowdown_factor;
  ro.slowdown_from_iteration = o.slowdown_from_iteration;
  return RunPipelineJob(std::move(*ranks), ro, cc, std::move(dc));
}

}  // namespace mxmaca::actors
