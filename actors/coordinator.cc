// actors/coordinator.cc: see coordinator.h.
#include "actors/coordinator.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "actors/checkpoint/async_writer.h"
#include "actors/checkpoint/checkpoint_retention.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/stage_checkpoint.h"
#include "actors/trace.h"
#include "scheduler/edge_slots.h"
#include "scheduler/schedule_simulator.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::actors {
namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { kIdle, kTrain, kStep, kRebalance, kEval, kSave, kDone };

// RankReport: what one rank reported for the phase in progress. Plain data: in a
// multi-process job the coordinators all-gather these bytes (same binary, same layout).
struct RankReport {
  int32_t present = 0;
  int32_t pipeline_rank = 0;
  int32_t tensor_parallel_rank = 0;
  int32_t grads_finite = 1;
  double loss_sum = 0.0;
  double num_tokens = 0.0;
  double grad_norm_sq = 0.0;
  double busy_seconds = 0.0;
  double wall_seconds = 0.0;
  int64_t peak_activation_bytes = 0;
  // exit_flags: the sender's exit requests (kExitByTime | kExitBySignal), multi-process.
  int32_t exit_flags = 0;
  // --optimizer-post-validation: the sender's optimistic steps confirmed / rolled back so
  // far (its local stages; summed over the ranks for the job's totals).
  int32_t optimistic_confirmed = 0;
  int32_t optimistic_rolled_back = 0;
  // async_save_ended: 1 when the sender's --async-save background write has ended (written
  // or failed) and its result is not taken yet (multi-process: when every rank says so in
  // the same reports, every rank takes the results at that iteration's end: AfterStep).
  int32_t async_save_ended = 0;
  // The smallest MoELayerStats::min_topk_margin of the sender's MoE layers in a training
  // step (+inf: none).
  double moe_min_topk_margin = std::numeric_limits<double>::infinity();
};
constexpr int32_t kExitByTime = 1;
constexpr int32_t kExitBySignal = 2;

// Sums over the reports of the stages for the phase in progress. Per-rank reports are
// kept and summed in rank order (Aggregate), so the totals do not depend on the order the
// reports arrived in (nor on which process computes them).
// MoE statistics travel as flat doubles: per MoE layer (CoordinatorConfig::moe_layers
// order) [calls, dropped tokens, load-balancing loss, z-loss, tokens of expert 0..E-1],
// each summed over the micro-batches; TP rank 0's only (every TP rank routes the same
// tokens).
constexpr int kMoEHeader = 4;
int64_t MoEStride(const CoordinatorConfig& c) { return kMoEHeader + c.moe_num_experts; }
std::vector<double> FlattenMoEStats(const CoordinatorConfig& c,
                                    const std::vector<layers::moe::MoELayerStats>& stats) {
  std::vector<double> flat(c.moe_layers.size() * static_cast<size_t>(MoEStride(c)), 0.0);
  for (const layers::moe::MoELayerStats& s : stats) {
    for (size_t l = 0; l < c.moe_layers.size(); ++l) {
      if (c.moe_layers[l] != s.layer) continue;
      double* row = flat.data() + l * static_cast<size_t>(MoEStride(c));
      row[0] += static_cast<double>(s.calls);
      row[1] += s.dropped_tokens;
      row[2] += s.load_balancing_loss;
      row[3] += s.z_loss;
      for (size_t e = 0; e < s.tokens_per_expert.size() &&
                         e < static_cast<size_t>(c.moe_num_experts);
           ++e) {
        row[kMoEHeader + e] += s.tokens_per_expert[e];
      }
    }
  }
  return flat;
}

const std::vector<layers::moe::MoELayerStats>& NoMoEStats() {
  static const auto* none = new std::vector<layers::moe::MoELayerStats>();
  return *none;
}

struct PhaseReports {
  int pending = 0;
  std::vector<RankReport> ranks;
  std::vector<std::vector<double>> rank_moe;  // per rank, FlattenMoEStats
  std::vector<double> moe;                    // their sum
  double moe_min_topk_margin = std::numeric_limits<double>::infinity();  // min over ranks
  double loss_sum = 0.0;
  double num_tokens = 0.0;
  double grad_norm_sq = 0.0;
  bool grads_finite = true;
  int64_t peak_activation_bytes = 0;
  std::vector<int64_t> rank_peak_activation_bytes;
  std::vector<double> stage_busy;  // per pipeline rank, mean over DP x TP ranks
  double wall = 0.0;
  void Reset(int world, int local_ranks, int pipeline_size) {
    *this = PhaseReports();
    pending = local_ranks;
    ranks.assign(static_cast<size_t>(world), RankReport{});
    rank_moe.assign(static_cast<size_t>(world), {});
    rank_peak_activation_bytes.assign(static_cast<size_t>(world), 0);
    stage_busy.assign(static_cast<size_t>(pipeline_size), 0.0);
  }
  // Aggregate: the totals from `ranks`, in rank order. Every TP rank of the last stage
  // computes the same loss: TP rank 0's counts.
  void Aggregate(int ranks_per_pipeline_rank) {
    loss_sum = num_tokens = grad_norm_sq = 0.0;
    moe_min_topk_margin = std::numeric_limits<double>::infinity();
    grads_finite = true;
    peak_activation_bytes = 0;
    wall = 0.0;
    for (double& b : stage_busy) b = 0.0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const RankReport& r = ranks[i];
      if (r.tensor_parallel_rank == 0) {
        loss_sum += r.loss_sum;
        num_tokens += r.num_tokens;
      }
      grad_norm_sq += r.grad_norm_sq;
      moe_min_topk_margin = std::min(moe_min_topk_margin, r.moe_min_topk_margin);
      grads_finite = grads_finite && r.grads_finite != 0;
      peak_activation_bytes = std::max(peak_activation_bytes, r.peak_activation_bytes);
      rank_peak_activation_bytes[i] = r.peak_activation_bytes;
      if (r.pipeline_rank >= 0 && r.pipeline_rank < static_cast<int32_t>(stage_busy.size())) {
        stage_busy[r.pipeline_rank] += r.busy_seconds / ranks_per_pipeline_rank;
      }
      wall = std::max(wall, r.wall_seconds);
    }
    moe.clear();
    for (const std::vector<double>& m : rank_moe) {
      if (moe.size() < m.size()) moe.resize(m.size(), 0.0);
      for (size_t i = 0; i < m.size(); ++i) moe[i] += m[i];
    }
  }
};

// Accumulates the log interval (Megatron's total_loss_dict / timers).
struct LogInterval {
  int64_t iterations = 0;
  int64_t counted_losses = 0;
  double loss_total = 0.0;
  int64_t skipped = 0;
  int64_t nan = 0;
  Clock::time_point start = Clock::now();
  std::vector<double> stage_busy;
  double stage_wall = 0.0;
  int64_t peak_activation_bytes = 0;
  std::vector<double> moe;  // summed PhaseReports::moe
};

struct CoordinatorState {
  std::shared_ptr<CoordinatorConfig> cfg;
  caf::typed_response_promise<TrainingSummary> promise;
  bool started = false;
  Phase phase = Phase::kIdle;
  int64_t iteration = 0;
  PhaseReports reports;
  LogInterval interval;
  TrainingSummary summary;
  Clock::time_point run_start;
  int64_t consecutive_nan = 0;
  int64_t total_skipped = 0;
  // The step in flight.
  bool step_skip = false;
  double step_loss = 0.0;
  double step_grad_norm = 0.0;
  std::optional<double> step_params_norm;  // --log-params-norm
  std::optional<int64_t> step_num_zeros;   // --log-num-zeros-in-grad
  // Evaluation in progress.
  int64_t eval_done = 0;
  double eval_loss_sum = 0.0;
  double eval_tokens = 0.0;
  std::string eval_where;
  bool eval_then_finish = false;
  bool final_eval_done = false;
  // What is due after the step in flight.
  bool pending_eval = false;
  bool pending_save = false;
  bool pending_non_persistent_save = false;  // --non-persistent-save-interval
  // Saving in progress.
  bool saving_non_persistent = false;  // into CoordinatorConfig::non_persistent_dir
  int64_t last_non_persistent_iteration = -1;
  // Megatron's exit paths save only if this iteration saved nothing (saved_checkpoint).
  bool skip_final_save = false;
  std::shared_ptr<checkpoint::CheckpointWriter> writer;
  int64_t last_saved_iteration = -1;
  bool save_then_finish = false;
  Clock::time_point save_start;  // StartSave: the training thread's blocked time from here
  bool save_deferred = false;    // this save snapshots and writes in the background
  // --async-save: the save in flight in the background, and what its log line says.
  std::unique_ptr<checkpoint::AsyncCheckpointWriter> async_writer;
  bool async_non_persistent = false;
  double async_blocked_seconds = 0.0;
  // Multi-process: rank 0's Commit of the save in flight, run on this thread once every
  // rank reported its background write done (DrainAsyncSave); empty on the other ranks.
  std::function<absl::Status()> async_commit;
  // --save-retain-interval: the deletion line of the save in flight, set by its commit.
  std::shared_ptr<std::string> async_retention_line;
  // Throughput (iterations after the first, which includes warm-up).
  double timed_seconds = 0.0;
  int64_t timed_iterations = 0;
  // Busy seconds per pipeline rank and the stages' wall time, summed over the timed
  // iterations (for TrainingSummary::stage_bubble_fraction).
  std::vector<double> bubble_busy;
  double bubble_wall = 0.0;
  Clock::time_point iteration_start;
  std::unique_ptr<ChromeTraceWriter> trace;
  // Per-stage payload quotas of the train and eval schedules (scheduler/edge_slots.h).
  std::optional<scheduler::EdgeSlots> train_slots, eval_slots;
  std::vector<int32_t> peak_stashed;  // the train schedule's, per pipeline rank
  std::string rebalance_log;          // printed once every stage took its new program
  // Multi-process jobs: the exchange in flight and what runs when it completes; the exit
  // requests agreed at the last exchange; the first local shard error of a save.
  uint64_t control_sequence = 0;
  std::string control_what;
  std::function<void(const ControlPlane::Blocks&)> control_next;
  int32_t agreed_exit_flags = 0;
  // Multi-process --async-save: every rank's last reports said its background write ended.
  bool agreed_async_save_ended = false;
  std::string save_error;
  std::string metrics_error;  // the first error of a metrics sink (CoordinatorConfig::metrics)
  // --optimizer-post-validation: the partial reduction of this iteration's reports so far
  // (arrival order; it only picks the optimistic step, never the final one), and the final
  // steps still in flight of an iteration whose successor already started.
  double partial_grad_norm_sq = 0.0;
  bool partial_finite = true;
  double partial_tokens = 0.0;       // --calculate-per-token-loss: loss heads' token counts
  int32_t partial_loss_reports = 0;  // and how many loss heads (TP rank 0) reported
  int64_t overlap_iteration = -1;
  int overlap_pending = 0;
  // This process's optimistic steps confirmed / rolled back (the summary's counts in a
  // one-process job; with a control plane the summary holds the job's, summed over the
  // ranks' reports at each exchange).
  int64_t local_confirmed = 0;
  int64_t local_rolled_back = 0;
};

using CoordinatorPointer = CoordinatorActor::stateful_pointer<CoordinatorState>;

void Print(CoordinatorState& st, const std::string& text) {
  if (st.cfg->print) st.cfg->print(text);
}

// ToMetrics: hands `send` every metrics sink until one fails; the first error is kept and
// ends the run at the next step boundary (AfterStep) or in Finish.
template <typename Send>
void ToMetrics(CoordinatorState& st, Send send) {
  if (!st.metrics_error.empty()) return;
  for (const auto& sink : st.cfg->metrics) {
    absl::Status s = send(*sink);
    if (!s.ok()) {
      st.metrics_error = std::string(s.message());
      return;
    }
  }
}

// LocalStages: the stage actors of this process (all of them in a one-process job).
int LocalStages(const CoordinatorConfig& c) {
  int n = 0;
  for (const StageActorHandle& s : c.stages) n += s ? 1 : 0;
  return n;
}

void ResetReports(CoordinatorState& st) {
  st.reports.Reset(static_cast<int>(st.cfg->stages.size()), LocalStages(*st.cfg),
                   st.cfg->pipeline_size);
}

// LocalExitFlags: this process's exit requests (--exit-duration-in-mins, a signal).
int32_t LocalExitFlags(const CoordinatorState& st) {
  const CoordinatorConfig& c = *st.cfg;
  int32_t flags = 0;
  if (c.exit_duration_in_mins &&
      std::chrono::duration<double>(Clock::now() - st.run_start).count() / 60.0 >
          *c.exit_duration_in_mins) {
    flags |= kExitByTime;
  }
  if (c.exit_signal_received && c.exit_signal_received()) flags |= kExitBySignal;
  return flags;
}

// Exchange: multi-process jobs: all-gathers `block` with the other processes'
// coordinators and runs `next` on this actor with every rank's block; a failed exchange
// ends the run naming `what`.
void Exchange(CoordinatorPointer self, std::vector<uint8_t> block, std::string what,
              std::function<void(const ControlPlane::Blocks&)> next) {
  auto& st = self->state;
  const uint64_t sequence = ++st.control_sequence;
  st.control_what = std::move(what);
  st.control_next = std::move(next);
  CoordinatorActor me = self;
  st.cfg->control->AllGather(std::move(block), [me, sequence](absl::Status status,
                                                              ControlPlane::Blocks blocks) {
    caf::anon_send(me, ControlExchanged{sequence, status.ok(), std::string(status.message()),
                                        std::move(blocks)});
  });
}

// Block <-> RankReport / text, for Exchange.
std::vector<uint8_t> ReportBlock(const RankReport& r, const std::vector<double>& moe) {
  std::vector<uint8_t> block(sizeof(RankReport) + moe.size() * sizeof(double));
  std::memcpy(block.data(), &r, sizeof(RankReport));
  if (!moe.empty()) {
    std::memcpy(block.data() + sizeof(RankReport), moe.data(), moe.size() * sizeof(double));
  }
  return block;
}
constexpr size_t kTextBlockBytes = 2048;
// TextBlock: [ok byte][text, NUL-padded, truncated to fit].
std::vector<uint8_t> TextBlock(bool ok, const std::string& text) {
  std::vector<uint8_t> block(kTextBlockBytes, 0);
  block[0] = ok ? 1 : 0;
  std::memcpy(block.data() + 1, text.data(), std::min(text.size(), kTextBlockBytes - 2));
  return block;
}
bool BlockOk(const std::vector<uint8_t>& block) { return !block.empty() && block[0] == 1; }
std::string BlockText(const std::vector<uint8_t>& block) {
  if (block.size() < 2) return "";
  const char* begin = reinterpret_cast<const char*>(block.data() + 1);
  return std::string(begin, strnlen(begin, block.size() - 1));
}

bool ReapAsyncSave(CoordinatorPointer self, const checkpoint::AsyncSaveResult& r);

void Finish(CoordinatorPointer self, bool ok, std::string error) {
  auto& st = self->state;
  if (st.phase == Phase::kDone) return;
  // --async-save: the run ends only once the save in flight is on disk (or failed).
  if (st.async_writer) {
    std::optional<checkpoint::AsyncSaveResult> r = st.async_writer->Wait();
    if (r && ok && !ReapAsyncSave(self, *r)) return;  // ReapAsyncSave finished the run
  }
  if (ok && st.async_commit) {  // multi-process: FinishTraining drains first; never here
    ok = false;
    error = "an --async-save checkpoint was written but not published (the run ended "
            "before its ranks agreed); the previous checkpoint stays the latest";
  }
  st.async_commit = nullptr;
  st.phase = Phase::kDone;
  if (st.trace) {
    absl::Status closed = st.trace->Close();
    if (ok && !closed.ok()) {
      ok = false;
      error = std::string(closed.message());
    }
    st.trace.reset();
  }
  for (const auto& sink : st.cfg->metrics) {
    absl::Status closed = sink->Close();
    if (st.metrics_error.empty() && !closed.ok()) st.metrics_error = std::string(closed.message());
  }
  if (ok && !st.metrics_error.empty()) {
    ok = false;
    error = st.metrics_error;
  }
  if (st.cfg->optimizer_post_validation) {
    Print(st, absl::StrCat(" optimizer post-validation: ", st.summary.optimistic_steps_confirmed,
                           " optimistic steps confirmed, ",
                           st.summary.optimistic_steps_rolled_back, " rolled back and redone",
                           st.cfg->control ? " (all ranks, as of the last report exchange)"
                                           : ""));
  }
  st.summary.ok = ok;
  st.summary.error = error;
  st.summary.last_iteration = st.iteration;
  st.summary.skipped_iterations = st.total_skipped;
  st.summary.stage_bubble_fraction.clear();
  for (double busy : st.bubble_busy) {
    st.summary.stage_bubble_fraction.push_back(
        st.bubble_wall > 0 ? std::max(0.0, 1.0 - busy / st.bubble_wall) : 0.0);
  }
  if (st.timed_iterations > 0 && st.timed_seconds > 0) {
    st.summary.mean_tokens_per_second =
        static_cast<double>(st.timed_iterations * st.cfg->global_batch_size * st.cfg->seq_length) /
        st.timed_seconds;
  }
  st.promise.deliver(st.summary);
}

void StartIteration(CoordinatorPointer self);

// SaveDir: where a save goes: --save, or the non-persistent checkpoint directory.
const std::string& SaveDir(const CoordinatorConfig& c, bool non_persistent) {
  return non_persistent ? *c.non_persistent_dir : *c.save_dir;
}
void StartEval(CoordinatorPointer self, const std::string& where, bool then_finish);
void StartSave(CoordinatorPointer self, bool then_finish, bool non_persistent = false);

// Runs the end of training as Megatron's pretrain() does: a last evaluation on the
// validation set (always, when there is one), then a last save (unless just saved).
void DrainAsyncSave(CoordinatorPointer self, std::function<void()> next);

void FinishTraining(CoordinatorPointer self) {
  auto& st = self->state;
  const CoordinatorConfig& c = *st.cfg;
  if (st.async_writer && st.async_writer->in_flight()) {
    DrainAsyncSave(self, [self] { FinishTraining(self); });
    return;
  }
  if (!st.final_eval_done && c.do_valid) {
    st.final_eval_done = true;
    StartEval(self, absl::StrCat("iteration ", st.iteration, " on validation set"), true);
    return;
  }
  if (c.save_dir && st.last_saved_iteration != st.iteration && st.iteration > 0 &&
      !st.skip_final_save) {
    StartSave(self, true);
    return;
  }
  Finish(self, true, "");
}

// After an iteration's step, in Megatron's order (training.py train): evaluate if due,
// then save if due, then exit (--exit-interval / --exit-duration-in-mins), finish
// (--train-iters) or run the next iteration. Each finished evaluation or save calls
// back here to continue.
void AfterStep(CoordinatorPointer self) {
  auto& st = self->state;
  if (!st.metrics_error.empty()) {
    Finish(self, false, st.metrics_error);
    return;
  }
  // --async-save: a background save that ended is reported here (a failure ends the run).
  // Multi-process: once the reports just exchanged said every rank's write had ended, all
  // ranks take the results here (the same decision from the same bytes), and rank 0
  // publishes the checkpoint; else at the next save or the end (DrainAsyncSave).
  if (st.async_writer && !st.cfg->control) {
    std::optional<checkpoint::AsyncSaveResult> r = st.async_writer->TryFinish();
    if (r && !ReapAsyncSave(self, *r)) return;
  }
  if (st.cfg->control && st.agreed_async_save_ended) {
    DrainAsyncSave(self, [self] { AfterStep(self); });
    return;
  }
  const CoordinatorConfig& c = *st.cfg;
  if (st.pending_eval) {
    st.pending_eval = false;
    StartEval(self, absl::StrCat("iteration ", st.iteration), false);
    return;
  }
  if (st.pending_save) {
    st.pending_save = false;
    StartSave(self, false);
    return;
  }
  if (st.pending_non_persistent_save) {
    st.pending_non_persistent_save = false;
    StartSave(self, false, /*non_persistent=*/true);
    return;
  }
  // One process's exit request stops them all after the same iteration: with a control
  // plane the requests were agreed with the last reports.
  const int32_t flags = c.control ? st.agreed_exit_flags : LocalExitFlags(st);
  if (flags & kExitBySignal) {
    Print(st, "exiting program after receiving SIGTERM.");
    st.final_eval_done = true;
    st.skip_final_save = st.last_non_persistent_iteration == st.iteration;
    FinishTraining(self);
    return;
  }
  const bool exit_now =
      (c.exit_interval && *c.exit_interval > 0 && st.iteration % *c.exit_interval == 0) ||
      (flags & kExitByTime);
  if (exit_now && st.iteration < c.train_iters) {
    Print(st, absl::StrCat(" exiting program at iteration ", st.iteration));
    st.final_eval_done = true;  // Megatron's exit paths save and stop without evaluating
    st.skip_final_save = st.last_non_persistent_iteration == st.iteration;
    FinishTraining(self);
    return;
  }
  if (st.iteration >= c.train_iters) {
    FinishTraining(self);
    return;
  }
  StartIteration(self);
}

void LogIfDue(CoordinatorPointer self) {
  auto& st = self->state;
  const CoordinatorConfig& c = *st.cfg;
  LogInterval& iv = st.interval;
  if (c.log_interval <= 0 || st.iteration % c.log_interval != 0) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - iv.start).count();
  const double per_iter = seconds / std::max<int64_t>(1, iv.iterations);
  IterationLogRecord r;
  r.now = absl::Now();
  r.iteration = st.iteration;
  r.train_iters = c.train_iters;
  r.consumed_samples = c.consumed_train_samples;
  r.elapsed_ms_per_iteration = per_iter * 1e3;
  const double flops_per_device_per_s =
      c.flops_per_iteration / per_iter / static_cast<double>(c.num_devices);
  r.tflops_per_device = flops_per_device_per_s / 1e12;
  r.learning_rate = c.scheduler->lr();
  r.global_batch_size = c.global_batch_size;
  r.lm_loss = iv.counted_losses > 0 ? iv.loss_total / iv.counted_losses
                                    : std::numeric_limits<double>::quiet_NaN();
  r.grad_norm = st.step_grad_norm;
  r.params_norm = st.step_params_norm;
  r.num_zeros_in_grad = st.step_num_zeros;
  r.skipped_iterations = iv.skipped;
  r.nan_iterations = iv.nan;
  r.tokens_per_second = static_cast<double>(c.global_batch_size * c.seq_length) / per_iter;
  r.model_gflops_per_second = flops_per_device_per_s / 1e9;
  r.gemm_peak_gflops = c.gemm_peak_gflops;
  r.peak_activation_mb = static_cast<double>(iv.peak_activation_bytes) / (1024.0 * 1024.0);
  if (c.pipeline_size > 1 && iv.stage_wall > 0) {
    for (double busy : iv.stage_busy) {
      r.stage_bubble_fraction.push_back(std::max(0.0, 1.0 - busy / iv.stage_wall));
    }
  }
  for (double busy : iv.stage_busy) {
    r.stage_busy_ms.push_back(1e3 * busy / static_cast<double>(std::max<int64_t>(1, iv.iterations)));
  }
  // MoE: Megatron's load_balancing_loss / z_loss (mean over layers and micro-batches), then
  // one line per MoE layer with its expert load over the interval.
  std::vector<std::string> moe_lines;
  if (!c.moe_layers.empty() && iv.moe.size() >= c.moe_layers.size() * MoEStride(c)) {
    double lb = 0.0, z = 0.0;
    for (size_t l = 0; l < c.moe_layers.size(); ++l) {
      const double* row = iv.moe.data() + l * static_cast<size_t>(MoEStride(c));
      const double calls = std::max(1.0, row[0]);
      lb += row[2] / calls;
      z += row[3] / calls;
      double total = 0.0, max_tokens = 0.0;
      std::string counts;
      for (int64_t e = 0; e < c.moe_num_experts; ++e) {
        const double n = row[kMoEHeader + e];
        total += n;
        max_tokens = std::max(max_tokens, n);
        absl::StrAppend(&counts, e == 0 ? "" : " ", static_cast<int64_t>(n));
      }
      const double mean = total / static_cast<double>(std::max<int64_t>(1, c.moe_num_experts));
      moe_lines.push_back(absl::StrFormat(
          "  moe layer %d | tokens per expert: [%s] | max/mean load: %.3f | dropped tokens: %d | "
          "load_balancing_loss: %.6E | z_loss: %.6E |",
          c.moe_layers[l], counts, mean > 0 ? max_tokens / mean : 0.0,
          static_cast<int64_t>(row[1]), row[2] / calls, row[3] / calls));
    }
    const double layers = static_cast<double>(c.moe_layers.size());
    r.moe_losses = {{"load_balancing_loss", lb / layers}, {"z_loss", z / layers}};
  }
  Print(st, FormatIterationLog(r));
  for (const std::string& line : moe_lines) Print(st, line);
  ToMetrics(st, [&r](metrics::TrainingMetricsSink& sink) { return sink.OnLogInterval(r); });
  iv = LogInterval();
}

// Sends `run` to every stage actor with its pipeline rank's op list and channel quotas.
void SendToStages(CoordinatorPointer self, RunStageIteration run,
                  const std::optional<scheduler::PipelineSchedule>& schedule,
                  const std::optional<scheduler::EdgeSlots>& slots,
                  const scheduler::StageSchedule& fallback) {
  const CoordinatorConfig& c = *self->state.cfg;
  for (size_t rank = 0; rank < c.stages.size(); ++rank) {
    const size_t pipeline_rank =
        rank / static_cast<size_t>(c.data_parallel_size * c.tensor_parallel_size);
    run.schedule = schedule ? schedule->stages.at(pipeline_rank) : fallback;
    if (schedule) run.placement = schedule->placement;
    run.dynamic = c.dynamic_pipeline && schedule.has_value() && !schedule->forward_only;
    if (run.dynamic) {
      run.max_stashed = c.max_stashed_microbatches
                            ? *c.max_stashed_microbatches
                            : self->state.peak_stashed.at(pipeline_rank);
    }
    if (slots) {
      run.forward_slots = slots->forward.at(pipeline_rank);
      run.backward_slots = slots->backward.at(pipeline_rank);
    }
    if (c.stages[rank]) self->send(c.stages[rank], run);
  }
}

void StartIteration(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  ++st.iteration;
  st.phase = Phase::kTrain;
  st.iteration_start = Clock::now();
  ResetReports(st);
  st.partial_grad_norm_sq = 0.0;
  st.partial_finite = true;
  st.partial_tokens = 0.0;
  st.partial_loss_reports = 0;
  RunStageIteration run;
  run.iteration = st.iteration;
  run.eval = false;
  run.num_microbatches = c.num_microbatches;
  run.first_global_microbatch =
      (st.iteration - 1) * c.num_microbatches * static_cast<int64_t>(c.data_parallel_size);
  run.calculate_per_token_loss = c.calculate_per_token_loss;
  SendToStages(self, run, c.train_schedule, st.train_slots,
               scheduler::SingleStageSchedule(c.num_microbatches));
  self->send(c.data, ProduceMicroBatches{st.iteration, false, c.consumed_train_samples,
                                         c.num_microbatches});
}

// EvalMicrobatches: micro-batches per replica of one evaluation iteration.
int32_t EvalMicrobatches(const CoordinatorConfig& c) {
  return c.eval_num_microbatches > 0 ? c.eval_num_microbatches : c.num_microbatches;
}

void StartEvalIteration(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  ResetReports(st);
  const int32_t m = EvalMicrobatches(c);
  RunStageIteration run;
  run.iteration = st.iteration;
  run.eval = true;
  run.num_microbatches = m;
  run.first_global_microbatch = 0;  // no dropout in evaluation
  run.calculate_per_token_loss = c.calculate_per_token_loss;
  SendToStages(self, run, c.eval_schedule, st.eval_slots, scheduler::ForwardOnlySchedule(m));
  self->send(c.data, ProduceMicroBatches{st.iteration, true, c.consumed_valid_samples, m});
}

void StartEval(CoordinatorPointer self, const std::string& where, bool then_finish) {
  auto& st = self->state;
  st.phase = Phase::kEval;
  st.eval_done = 0;
  st.eval_loss_sum = 0.0;
  st.eval_tokens = 0.0;
  st.eval_where = where;
  st.eval_then_finish = then_finish;
  StartEvalIteration(self);
}

void ExchangeShardResults(CoordinatorPointer self);

// SendShardRequests: every local stage writes its shard into st.writer.
void SendShardRequests(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  ResetReports(st);
  st.save_error.clear();
  auto shared_writer = st.writer;
  auto write_shard = c.write_shard;
  for (const StageActorHandle& stage : c.stages) {
    if (!stage) continue;
    SaveCheckpointShard msg;
    msg.iteration = st.iteration;
    msg.write_shard = [shared_writer, write_shard](
                          const StageIdentity& id, StageProgram& program,
                          const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& opts) {
      if (!write_shard) return absl::FailedPreconditionError("no checkpoint writer configured");
      return write_shard(id, program, opts, *shared_writer);
    };
    self->send(stage, msg);
  }
}

// AsyncSaveLine: the log line of a background save that completed.
std::string AsyncSaveLine(const CoordinatorState& st, const checkpoint::AsyncSaveResult& r) {
  const CoordinatorConfig& c = *st.cfg;
  return absl::StrFormat(
      "  successfully saved %scheckpoint from iteration %7d to %s\n"
      "  checkpoint save at iteration %d (--async-save): training blocked %.3f s, "
      "background write %.3f s, reported after iteration %d",
      st.async_non_persistent ? "non-persistent " : "", r.iteration,
      st.async_non_persistent ? SaveDir(c, true) : c.save_log_dir.value_or(*c.save_dir),
      r.iteration, st.async_blocked_seconds, r.write_seconds, st.iteration);
}

// ReapAsyncSave: takes the result of the background save: prints its line, or ends the
// run with its error (returns false then).
bool ReapAsyncSave(CoordinatorPointer self, const checkpoint::AsyncSaveResult& r) {
  auto& st = self->state;
  if (!r.status.ok()) {
    Finish(self, false, absl::StrCat("saving checkpoint at iteration ", r.iteration,
                                     " (in the background, --async-save): ",
                                     r.status.message()));
    return false;
  }
  Print(st, AsyncSaveLine(st, r));
  if (st.async_retention_line && !st.async_retention_line->empty()) {
    Print(st, *st.async_retention_line);
  }
  st.async_retention_line.reset();
  return true;
}

// DrainAsyncSave: waits for the background save in flight (if any), then runs `next`;
// a failure ends the run instead. Multi-process: every rank reports its background write
// (an exchange, so that rank 0 publishes only once every rank's shard files are durable),
// then rank 0 commits here; every rank calls it at the same point (the end of an iteration
// whose reports said every rank's write had ended, the next save, the end).
void DrainAsyncSave(CoordinatorPointer self, std::function<void()> next) {
  auto& st = self->state;
  st.agreed_async_save_ended = false;
  std::optional<checkpoint::AsyncSaveResult> r;
  if (st.async_writer) r = st.async_writer->Wait();
  if (!r) {
    next();
    return;
  }
  if (!st.cfg->control) {
    if (ReapAsyncSave(self, *r)) next();
    return;
  }
  Exchange(self, TextBlock(r->status.ok(), std::string(r->status.message())),
           "background checkpoint writes (--async-save)",
           [self, next = std::move(next), r = *r](const ControlPlane::Blocks& blocks) {
             auto& st = self->state;
             for (size_t k = 0; k < blocks.size(); ++k) {
               if (!BlockOk(blocks[k])) {
                 Finish(self, false, absl::StrCat("saving checkpoint at iteration ", r.iteration,
                                                  " (in the background on rank ", k,
                                                  ", --async-save): ", BlockText(blocks[k])));
                 return;
               }
             }
             if (st.async_commit) {  // rank 0
               const auto start = Clock::now();
               absl::Status s = st.async_commit();
               st.async_commit = nullptr;
               checkpoint::AsyncSaveResult done = r;
               done.status = s;
               done.write_seconds +=
                   std::chrono::duration<double>(Clock::now() - start).count();
               if (!ReapAsyncSave(self, done)) return;
             }
             next();
           });
}

void StartSaveNow(CoordinatorPointer self, bool then_finish, bool non_persistent);

void StartSave(CoordinatorPointer self, bool then_finish, bool non_persistent) {
  auto& st = self->state;
  st.save_start = Clock::now();
  // At most one save in flight: the next one first waits for the previous one.
  if (st.async_writer && st.async_writer->in_flight()) {
    DrainAsyncSave(self, [self, then_finish, non_persistent] {
      StartSaveNow(self, then_finish, non_persistent);
    });
    return;
  }
  StartSaveNow(self, then_finish, non_persistent);
}

void StartSaveNow(CoordinatorPointer self, bool then_finish, bool non_persistent) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  // The final save (end of training, exit paths) is synchronous: the run waits for it.
  st.save_deferred = c.async_save && !then_finish;
  st.phase = Phase::kSave;
  st.save_then_finish = then_finish;
  st.saving_non_persistent = non_persistent;
  const bool leader = !c.control || c.control->rank() == 0;
  std::string begin_error;
  if (leader) {
    // Megatron's cleanup_old_non_persistent_checkpoint(leave_ckpt_num=1) before the save.
    if (non_persistent) {
      absl::Status cleaned = checkpoint::RemoveOlderCheckpoints(*c.non_persistent_dir, 1);
      if (!cleaned.ok()) begin_error = std::string(cleaned.message());
    }
  }
  if (leader && begin_error.empty()) {
    absl::StatusOr<checkpoint::CheckpointWriter> writer =
        checkpoint::CheckpointWriter::Begin(SaveDir(c, non_persistent), st.iteration);
    if (writer.ok()) {
      st.writer = std::make_shared<checkpoint::CheckpointWriter>(std::move(*writer));
      if (st.save_deferred) st.writer->DeferWrites();
    } else {
      begin_error = std::string(writer.status().message());
    }
  }
  if (!c.control) {
    if (!begin_error.empty()) {
      Finish(self, false, absl::StrCat("saving checkpoint at iteration ", st.iteration, ": ",
                                       begin_error));
      return;
    }
    SendShardRequests(self);
    return;
  }
  // Multi-process: rank 0 began the save; the others attach to its temp directory.
  std::vector<uint8_t> block =
      leader ? TextBlock(begin_error.empty(), begin_error.empty() ? st.writer->temp_dir()
                                                                  : begin_error)
             : TextBlock(true, "");
  Exchange(self, std::move(block), "the checkpoint directory",
           [self](const ControlPlane::Blocks& blocks) {
             auto& st = self->state;
             CoordinatorConfig& c = *st.cfg;
             if (!BlockOk(blocks.at(0))) {
               Finish(self, false, absl::StrCat("saving checkpoint at iteration ", st.iteration,
                                                " (rank 0): ", BlockText(blocks.at(0))));
               return;
             }
             if (c.control->rank() != 0) {
               absl::StatusOr<checkpoint::CheckpointWriter> attached =
                   checkpoint::CheckpointWriter::Attach(SaveDir(c, st.saving_non_persistent),
                                                        st.iteration,
                                                        BlockText(blocks.at(0)));
               if (!attached.ok()) {
                 // Still take part in the results exchange, so every rank learns it.
                 ResetReports(st);
                 st.reports.pending = 0;
                 st.save_error = std::string(attached.status().message());
                 ExchangeShardResults(self);
                 return;
               }
               st.writer = std::make_shared<checkpoint::CheckpointWriter>(std::move(*attached));
               if (st.save_deferred) st.writer->DeferWrites();
             }
             SendShardRequests(self);
           });
}

// MaybeSendOptimisticStep: --optimizer-post-validation: folds report `d` (not the
// iteration's last) into the partial reduction and sends its stage the optimistic step
// that the partial decides: skip when it holds a NaN/Inf (then so does the global
// reduction: the final decision is certain), none when its norm already exceeds
// --clip-grad (the coefficient needs the global norm: the stage waits), else a step with
// clip coefficient 1. With --calculate-per-token-loss only once the global token count is
// known (every replica's loss head reported): the gradient scale is 1 / that count.
void MaybeSendOptimisticStep(CoordinatorPointer self, const StageIterationDone& d) {
  auto& st = self->state;
  const CoordinatorConfig& c = *st.cfg;
  st.partial_grad_norm_sq += d.grad_norm_sq;
  st.partial_finite = st.partial_finite && d.grads_finite &&
                      std::isfinite(st.partial_grad_norm_sq) &&
                      (d.tensor_parallel_rank != 0 || std::isfinite(d.loss_sum));
  if (d.tensor_parallel_rank == 0 && d.num_tokens > 0) {  // a loss head's report
    st.partial_tokens += d.num_tokens;
    ++st.partial_loss_reports;
  }
  if (!c.optimizer_post_validation) return;
  ApplyOptimizerStep step;
  step.iteration = st.iteration;
  step.optimistic = true;
  step.lr = c.scheduler->lr();
  if (c.scheduler->config().decoupled_lr) step.decoupled_lr = c.scheduler->decoupled_lr();
  step.weight_decay = c.scheduler->weight_decay();
  step.min_seconds = c.synthetic_optimizer_seconds;
  if (!st.partial_finite) {
    step.skip = true;
  } else {
    if (c.calculate_per_token_loss) {
      // The gradient scale is 1 / the global token count: known once every DP replica's
      // loss head reported (token counts are integers, so the sum is exact in any order
      // and equals OnTrainReports' rank-order sum).
      if (st.partial_loss_reports < c.data_parallel_size) return;
      step.grad_scale = 1.0 / std::max(1.0, st.partial_tokens);
    }
    if (c.clip_grad > 0.0 &&
        c.clip_grad / (std::sqrt(st.partial_grad_norm_sq) * step.grad_scale + 1.0e-6) < 1.0) {
      return;
    }
  }
  const StageActorHandle& stage = c.stages.at(static_cast<size_t>(d.stage));
  if (stage) self->send(stage, step);
}

// EvalDue: a periodic evaluation follows iteration `it` (training.py: eval_interval divides
// it, and it >= --start-eval-at-iter when that is set).
bool EvalDue(const CoordinatorConfig& c, int64_t it) {
  return c.do_valid && c.eval_interval > 0 && it % c.eval_interval == 0 &&
         it >= c.start_eval_at_iter;
}

// CanStartNextIteration: post-validation may send the next iteration's op lists with the
// final step decision when nothing is due between the two iterations.
bool CanStartNextIteration(const CoordinatorState& st) {
  const CoordinatorConfig& c = *st.cfg;
  const int64_t it = st.iteration;
  if (!c.optimizer_post_validation || c.rebalance || c.params_norm_squared ||
      st.overlap_pending > 0) {
    return false;
  }
  if (it >= c.train_iters) return false;
  if (EvalDue(c, it)) return false;
  if (c.save_dir && c.save_interval > 0 && it % c.save_interval == 0) return false;
  if (c.save_dir && c.non_persistent_dir && c.non_persistent_save_interval > 0 &&
      it % c.non_persistent_save_interval == 0) {
    return false;
  }
  if (c.exit_interval && *c.exit_interval > 0 && it % *c.exit_interval == 0) return false;
  // As AfterStep: with a control plane the exit requests agreed with the reports.
  return (c.control ? st.agreed_exit_flags : LocalExitFlags(st)) == 0;
}

void RecordStep(CoordinatorPointer self);

void OnTrainReports(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  PhaseReports& r = st.reports;
  // Megatron: reported lm loss = sum of token losses / tokens over the global batch.
  st.step_loss = r.loss_sum / std::max(1.0, r.num_tokens);
  const double grad_scale = c.calculate_per_token_loss ? 1.0 / std::max(1.0, r.num_tokens) : 1.0;
  st.step_grad_norm = std::sqrt(r.grad_norm_sq) * grad_scale;
  const bool finite = std::isfinite(st.step_loss) && r.grads_finite && std::isfinite(st.step_grad_norm);
  ApplyOptimizerStep step;
  step.iteration = st.iteration;
  step.min_seconds = c.synthetic_optimizer_seconds;
  step.grad_scale = grad_scale;
  step.lr = c.scheduler->lr();
  if (c.scheduler->config().decoupled_lr) step.decoupled_lr = c.scheduler->decoupled_lr();
  step.weight_decay = c.scheduler->weight_decay();
  if (!finite) {
    step.skip = true;
    ++st.consecutive_nan;
    ++st.total_skipped;
    ++st.interval.skipped;
    ++st.interval.nan;
    Print(st, absl::StrCat(" WARNING: iteration ", st.iteration,
                           " has a non-finite loss or gradient norm (loss ", st.step_loss,
                           ", grad norm ", st.step_grad_norm, "); skipping the optimizer step"));
    if (st.consecutive_nan >= c.max_consecutive_nan_iterations) {
      Finish(self, false,
             absl::StrCat("iteration ", st.iteration, ": ", st.consecutive_nan,
                          " iteration(s) in a row with NaN/Inf loss or gradient norm "
                          "(--max-consecutive-nan-iterations ",
                          c.max_consecutive_nan_iterations, ")"));
      return;
    }
  } else {
    st.consecutive_nan = 0;
    if (c.clip_grad > 0.0) {
      const double coeff = c.clip_grad / (st.step_grad_norm + 1.0e-6);
      if (coeff < 1.0) step.clip_coeff = coeff;
    }
  }
  st.step_skip = step.skip;
  st.step_num_zeros.reset();  // Megatron: None for a skipped step
  if (c.num_zeros_in_grad && !step.skip) st.step_num_zeros = c.num_zeros_in_grad();
  st.phase = Phase::kStep;
  st.reports.pending = LocalStages(c);
  for (const StageActorHandle& stage : c.stages) {
    if (stage) self->send(stage, step);
  }
  if (CanStartNextIteration(st)) {
    // Post-validation: every stage runs its final step (a confirmation, or the redo) on its
    // strand before the next op list, which it gets right behind the step (FIFO).
    st.overlap_iteration = st.iteration;
    st.overlap_pending = st.reports.pending;
    st.reports.pending = 0;
    RecordStep(self);
    StartIteration(self);
  }
}

// RecordStep: the bookkeeping of a finished step: scheduler, counters, losses, timing,
// the log line.
void RecordStep(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  if (!st.step_skip) c.scheduler->Step(c.global_batch_size);
  c.consumed_train_samples += c.global_batch_size;
  const double seconds =
      std::chrono::duration<double>(Clock::now() - st.iteration_start).count();
  if (st.iteration > st.summary.first_iteration + 1) {
    st.timed_seconds += seconds;
    ++st.timed_iterations;
  }
  if (c.params_norm_squared) st.step_params_norm = std::sqrt(c.params_norm_squared());
  st.summary.train_losses.push_back(st.step_skip ? std::nan("") : st.step_loss);
  st.summary.moe_min_topk_margin =
      std::min(st.summary.moe_min_topk_margin, st.reports.moe_min_topk_margin);
  st.summary.grad_norms.push_back(st.step_grad_norm);
  LogInterval& iv = st.interval;
  ++iv.iterations;
  if (!st.step_skip) {
    iv.loss_total += st.step_loss;
    ++iv.counted_losses;
  }
  if (iv.stage_busy.size() != st.reports.stage_busy.size()) {
    iv.stage_busy.assign(st.reports.stage_busy.size(), 0.0);
  }
  for (size_t i = 0; i < iv.stage_busy.size(); ++i) iv.stage_busy[i] += st.reports.stage_busy[i];
  iv.stage_wall += st.reports.wall;
  if (iv.moe.size() < st.reports.moe.size()) iv.moe.resize(st.reports.moe.size(), 0.0);
  for (size_t i = 0; i < st.reports.moe.size(); ++i) iv.moe[i] += st.reports.moe[i];
  iv.peak_activation_bytes = std::max(iv.peak_activation_bytes, st.reports.peak_activation_bytes);
  st.summary.peak_activation_bytes =
      std::max(st.summary.peak_activation_bytes, st.reports.peak_activation_bytes);
  std::vector<int64_t>& rank_peak = st.summary.rank_peak_activation_bytes;
  rank_peak.resize(st.reports.rank_peak_activation_bytes.size(), 0);
  for (size_t i = 0; i < rank_peak.size(); ++i) {
    rank_peak[i] = std::max(rank_peak[i], st.reports.rank_peak_activation_bytes[i]);
  }
  if (st.iteration > st.summary.first_iteration + 1) {  // the first iteration warms up
    st.bubble_busy.resize(st.reports.stage_busy.size(), 0.0);
    for (size_t i = 0; i < st.bubble_busy.size(); ++i) st.bubble_busy[i] += st.reports.stage_busy[i];
    st.bubble_wall += st.reports.wall;
  }
  if (c.on_iteration || !c.metrics.empty()) {
    IterationLogRecord r;
    r.now = absl::Now();
    r.iteration = st.iteration;
    r.train_iters = c.train_iters;
    r.consumed_samples = c.consumed_train_samples;
    r.elapsed_ms_per_iteration = seconds * 1e3;
    r.learning_rate = c.scheduler->lr();
    r.global_batch_size = c.global_batch_size;
    r.lm_loss = st.step_loss;
    r.grad_norm = st.step_grad_norm;
    r.params_norm = st.step_params_norm;
    r.num_zeros_in_grad = st.step_num_zeros;
    r.skipped_iterations = st.step_skip ? 1 : 0;
    r.tokens_per_second = static_cast<double>(c.global_batch_size * c.seq_length) / seconds;
    if (c.on_iteration) c.on_iteration(r);
    ToMetrics(st, [&r](metrics::TrainingMetricsSink& sink) { return sink.OnIteration(r); });
  }
  LogIfDue(self);
}

void OnStepDone(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  RecordStep(self);
  st.pending_eval = EvalDue(c, st.iteration);
  st.pending_save = c.save_dir && c.save_interval > 0 && st.iteration % c.save_interval == 0;
  // Megatron's train loop: a non-persistent save when no regular one is due.
  st.pending_non_persistent_save = !st.pending_save && c.save_dir && c.non_persistent_dir &&
                                   c.non_persistent_save_interval > 0 &&
                                   st.iteration % c.non_persistent_save_interval == 0;
  if (c.rebalance && !st.step_skip) {
    absl::StatusOr<std::optional<CoordinatorConfig::RebalanceResult>> r =
        c.rebalance(st.iteration, st.reports.stage_busy);
    if (!r.ok()) {
      Finish(self, false, absl::StrCat("rebalancing after iteration ", st.iteration, ": ",
                                       r.status().message()));
      return;
    }
    if (r->has_value()) {
      st.phase = Phase::kRebalance;
      st.rebalance_log = (*r)->log;
      st.reports.pending = LocalStages(c);
      for (size_t i = 0; i < c.stages.size(); ++i) {
        if (c.stages[i]) self->send(c.stages[i], std::move((*r)->programs.at(i)));
      }
      return;
    }
  }
  AfterStep(self);
}

void OnEvalReports(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  st.eval_loss_sum += st.reports.loss_sum;
  st.eval_tokens += st.reports.num_tokens;
  c.consumed_valid_samples += c.global_batch_size / c.num_microbatches * EvalMicrobatches(c);
  ++st.eval_done;
  if (st.eval_done < c.eval_iters) {
    StartEvalIteration(self);
    return;
  }
  const double loss = st.eval_loss_sum / std::max(1.0, st.eval_tokens);
  st.summary.valid_losses.emplace_back(st.iteration, loss);
  Print(st, FormatValidationLog(st.eval_where, loss));
  const ValidationLogRecord v{absl::Now(), st.iteration, c.consumed_train_samples, st.eval_where,
                              loss};
  ToMetrics(st, [&v](metrics::TrainingMetricsSink& sink) { return sink.OnValidation(v); });
  if (st.eval_then_finish) {
    FinishTraining(self);
    return;
  }
  AfterStep(self);
}

nlohmann::json TrainingStateJson(const CoordinatorState& st) {
  const CoordinatorConfig& c = *st.cfg;
  nlohmann::json state;
  state["iteration"] = st.iteration;
  if (!c.save_optimizer_state) state["has_optimizer_state"] = false;  // --no-save-optim
  state["consumed_train_samples"] = c.consumed_train_samples;
  state["consumed_valid_samples"] = c.consumed_valid_samples;
  // Megatron's OptimizerParamScheduler.state_dict (core_v0.19.0), steps in samples; the
  // decoupled group's bounds (which Megatron keeps in the optimizer's param_groups) too.
  const layers::OptimizerParamSchedulerConfig& sc = c.scheduler->config();
  nlohmann::json sched = {{"max_lr", sc.max_lr},
                          {"lr_warmup_steps", sc.lr_warmup_steps},
                          {"num_steps", c.scheduler->num_steps()},
                          {"lr_decay_style", layers::LrDecayStyleName(sc.lr_decay_style)},
                          {"lr_decay_steps", sc.lr_decay_steps},
                          {"min_lr", sc.min_lr},
                          {"start_wd", sc.start_wd},
                          {"end_wd", sc.end_wd},
                          {"wd_incr_style", layers::WdIncrStyleName(sc.wd_incr_style)},
                          {"wd_incr_steps", sc.wd_incr_steps}};
  sched["decoupled_lr"] = sc.decoupled_lr ? nlohmann::json(*sc.decoupled_lr) : nlohmann::json();
  sched["decoupled_min_lr"] =
      sc.decoupled_min_lr ? nlohmann::json(*sc.decoupled_min_lr) : nlohmann::json();
  state["opt_param_scheduler"] = std::move(sched);
  state["optimizer_step"] = st.iteration - st.total_skipped;  // informative; stages own it
  state["skipped_iterations"] = st.total_skipped;
  // Randomness is a function of (seed, iteration, micro-batch): there is no RNG state to
  // store; the data position is consumed_train_samples.
  state["rng"] = {{"kind", "counter-based (seed, iteration, global micro-batch)"},
                  {"seed", c.rng_seed}};
  return state;
}

// RetentionDir: the --save directory whose tracker --save-retain-interval follows (with
// --ckpt-format torch the Megatron checkpoint's directory, not the staging one).
std::string RetentionDir(const CoordinatorConfig& c) {
  return c.save_retain_dir.empty() ? *c.save_dir : c.save_retain_dir;
}

// TrackedIteration: the iteration `dir`'s tracker names (nullopt when none or unreadable).
std::optional<int64_t> TrackedIteration(const std::string& dir) {
  absl::StatusOr<std::optional<int64_t>> tracked = checkpoint::ReadTrackerIteration(dir);
  return tracked.ok() ? *tracked : std::nullopt;
}

// PreviousTracked: with --save-retain-interval, for a persistent save, the iteration the
// tracker names before the commit (nullopt otherwise, or when it names none).
std::optional<int64_t> PreviousTracked(const CoordinatorConfig& c, bool non_persistent) {
  if (!c.save_retain_interval || non_persistent) return std::nullopt;
  return TrackedIteration(RetentionDir(c));
}

// StartAsyncSave: --async-save, every local shard snapshotted (and, multi-process, every
// rank's snapshot agreed): the shard files are written in the background. One process:
// the background job commits too. Multi-process: rank 0 keeps its writer to commit in
// DrainAsyncSave, once every rank's write is done (its last reference, so the temp dir
// is never removed by the background thread).
void StartAsyncSave(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  if (!st.async_writer) st.async_writer = std::make_unique<checkpoint::AsyncCheckpointWriter>();
  const int64_t bytes = st.writer->deferred_bytes();
  const bool leader = !c.control || c.control->rank() == 0;
  std::function<absl::Status()> commit;
  if (leader) {
    // With the state as of now, as the synchronous Commit would store it.
    st.async_retention_line = std::make_shared<std::string>();
    const bool retain = c.save_retain_interval.has_value() && !st.saving_non_persistent;
    commit = [writer = st.writer, args = c.checkpoint_args, state = TrainingStateJson(st),
              after = c.after_commit, iteration = st.iteration, retain,
              retain_every = c.save_retain_interval.value_or(0),
              retain_dir = retain ? RetentionDir(c) : std::string(),
              line = st.async_retention_line]() -> absl::Status {
      const std::optional<int64_t> previous = retain ? TrackedIteration(retain_dir) : std::nullopt;
      absl::Status s = writer->Commit(args, state);
      if (s.ok() && after) s = after(iteration, writer->final_dir());
      if (s.ok() && retain) {
        *line = checkpoint::ApplySaveRetainInterval(retain_dir, previous, iteration, retain_every);
      }
      return s;
    };
  }
  std::function<absl::Status(checkpoint::CheckpointWriter&)> publish;
  if (!c.control) {
    publish = [commit](checkpoint::CheckpointWriter&) { return commit(); };
  } else {
    publish = [](checkpoint::CheckpointWriter&) { return absl::OkStatus(); };
    st.async_commit = std::move(commit);  // rank 0 only
  }
  st.async_writer->Start(std::move(st.writer), std::move(publish));
  st.async_non_persistent = st.saving_non_persistent;
  st.async_blocked_seconds = std::chrono::duration<double>(Clock::now() - st.save_start).count();
  (st.saving_non_persistent ? st.last_non_persistent_iteration : st.last_saved_iteration) =
      st.iteration;
  Print(st, absl::StrFormat("  saving checkpoint at iteration %7d in the background "
                            "(--async-save): %.1f MB snapshotted to host memory, training "
                            "blocked %.3f s",
                            st.iteration, static_cast<double>(bytes) / 1.0e6,
                            st.async_blocked_seconds));
  if (st.save_then_finish) {  // not reached: final saves are synchronous
    FinishTraining(self);
    return;
  }
  AfterStep(self);
}

void OnShardsSaved(CoordinatorPointer self) {
  auto& st = self->state;
  CoordinatorConfig& c = *st.cfg;
  if (st.save_deferred) {
    StartAsyncSave(self);
    return;
  }
  if (c.control && c.control->rank() != 0) {  // rank 0 commits
    st.writer.reset();
    (st.saving_non_persistent ? st.last_non_persistent_iteration : st.last_saved_iteration) =
        st.iteration;
    if (st.save_then_finish) {
      Finish(self, true, "");
      return;
    }
    AfterStep(self);
    return;
  }
  const std::optional<int64_t> previous = PreviousTracked(c, st.saving_non_persistent);
  absl::Status s = st.writer->Commit(c.checkpoint_args, TrainingStateJson(st));
  const std::string committed_dir = st.writer->final_dir();
  st.writer.reset();
  if (s.ok() && c.after_commit) s = c.after_commit(st.iteration, committed_dir);
  if (!s.ok()) {
    Finish(self, false, absl::StrCat("saving checkpoint at iteration ", st.iteration, ": ",
                                     s.message()));
    return;
  }
  (st.saving_non_persistent ? st.last_non_persistent_iteration : st.last_saved_iteration) =
      st.iteration;
  Print(st, absl::StrFormat("  successfully saved %scheckpoint from iteration %7d to %s",
                            st.saving_non_persistent ? "non-persistent " : "", st.iteration,
                            st.saving_non_persistent ? SaveDir(c, true)
                                                     : c.save_log_dir.value_or(*c.save_dir)));
  Print(st, absl::StrFormat("  checkpoint save at iteration %d (synchronous): training "
                            "blocked %.3f s",
                            st.iteration,
                            std::chrono::duration<double>(Clock::now() - st.save_start).count()));
  if (c.save_retain_interval && !st.saving_non_persistent) {
    const std::string line = checkpoint::ApplySaveRetainInterval(
        RetentionDir(c), previous, st.iteration, *c.save_retain_interval);
    if (!line.empty()) Print(st, line);
  }
  if (st.save_then_finish) {
    Finish(self, true, "");
    return;
  }
  AfterStep(self);
}

// ExchangeShardResults: multi-process: every rank learns whether every shard was written
// before rank 0 commits.
void ExchangeShardResults(CoordinatorPointer self) {
  auto& st = self->state;
  Exchange(self, TextBlock(st.save_error.empty(), st.save_error), "checkpoint shard results",
           [self](const ControlPlane::Blocks& blocks) {
             auto& st = self->state;
             for (size_t r = 0; r < blocks.size(); ++r) {
               if (!BlockOk(blocks[r])) {
                 Finish(self, false, absl::StrCat("saving checkpoint at iteration ",
                                                  st.iteration, " (rank ", r, "): ",
                                                  BlockText(blocks[r])));
                 return;
               }
             }
             OnShardsSaved(self);
           });
}

// CompleteReports: every rank's report of the phase is in `st.reports.ranks`.
void CompleteReports(CoordinatorPointer self, bool eval) {
  auto& st = self->state;
  st.reports.Aggregate(st.cfg->data_parallel_size * st.cfg->tensor_parallel_size);
  if (eval) {
    OnEvalReports(self);
  } else {
    OnTrainReports(self);
  }
}

CoordinatorActor::behavior_type CoordinatorBehavior(CoordinatorPointer self,
                                                    std::shared_ptr<CoordinatorConfig> config) {
  self->state.cfg = std::move(config);
  return {
      [=](const RunTraining&) -> caf::typed_response_promise<TrainingSummary> {
        auto& st = self->state;
        if (st.started) {
          TrainingSummary bad;
          bad.ok = false;
          bad.error = "RunTraining sent twice";
          auto rp = self->make_response_promise<TrainingSummary>();
          rp.deliver(bad);
          return rp;
        }
        st.started = true;
        st.promise = self->make_response_promise<TrainingSummary>();
        if (!st.cfg->scheduler) {
          Finish(self, false, "coordinator: no learning-rate scheduler configured");
          return st.promise;
        }
        st.run_start = Clock::now();
        for (auto [schedule, slots] :
             {std::make_pair(&st.cfg->train_schedule, &st.train_slots),
              std::make_pair(&st.cfg->eval_schedule, &st.eval_slots)}) {
          if (!schedule->has_value()) continue;
          absl::StatusOr<scheduler::EdgeSlots> quotas =
              scheduler::EdgeQuotas(**schedule, st.cfg->pipeline_channel_slots);
          if (!quotas.ok()) {
            Finish(self, false, absl::StrCat("schedule '", (*schedule)->name,
                                             "': ", quotas.status().message()));
            return st.promise;
          }
          *slots = std::move(*quotas);
        }
        if (st.cfg->train_schedule) {
          st.peak_stashed = scheduler::PeakStashedMicrobatches(*st.cfg->train_schedule);
        }
        if (st.cfg->trace_file) {
          auto writer = ChromeTraceWriter::Open(*st.cfg->trace_file);
          if (!writer.ok()) {
            Finish(self, false, std::string(writer.status().message()));
            return st.promise;
          }
          st.trace = std::move(*writer);
          for (size_t i = 0; i < st.cfg->stages.size(); ++i) {
            const size_t dp = st.cfg->data_parallel_size, tp = st.cfg->tensor_parallel_size;
            std::string name = absl::StrCat("stage ", i / (dp * tp));
            if (dp > 1) absl::StrAppend(&name, " dp ", (i / tp) % dp);
            if (tp > 1) absl::StrAppend(&name, " tp ", i % tp);
            st.trace->NameTrack(static_cast<int32_t>(i), name);
          }
        }
        st.iteration = st.cfg->start_iteration;
        st.total_skipped = st.cfg->skipped_iterations;
        st.summary.first_iteration = st.iteration;
        if (st.iteration >= st.cfg->train_iters && st.cfg->skip_train) {
          FinishTraining(self);  // --skip-train: the final evaluations only
        } else if (st.iteration >= st.cfg->train_iters) {
          Finish(self, true, "");
        } else {
          StartIteration(self);
        }
        return st.promise;
      },
      [=](const StageIterationDone& d) {
        auto& st = self->state;
        const bool expect_eval = st.phase == Phase::kEval;
        if ((st.phase != Phase::kTrain && st.phase != Phase::kEval) || d.eval != expect_eval ||
            d.iteration != st.iteration || st.reports.pending <= 0) {
          if (st.phase == Phase::kDone) return;
          Finish(self, false,
                 absl::StrCat("coordinator: unexpected report from stage ", d.stage,
                              " for iteration ", d.iteration, d.eval ? " (eval)" : "",
                              " while at iteration ", st.iteration));
          return;
        }
        if (st.trace) {
          for (const TraceSpan& span : d.spans) st.trace->Add(span);
        }
        PhaseReports& r = st.reports;
        if (d.stage < 0 || d.stage >= static_cast<int32_t>(r.ranks.size()) ||
            r.ranks[d.stage].present) {
          Finish(self, false, absl::StrCat("coordinator: report from unknown rank ", d.stage,
                                           " or a second report"));
          return;
        }
        RankReport& rr = r.ranks[d.stage];
        rr.present = 1;
        rr.pipeline_rank = d.pipeline_rank;
        rr.tensor_parallel_rank = d.tensor_parallel_rank;
        rr.grads_finite = d.grads_finite ? 1 : 0;
        rr.loss_sum = d.loss_sum;
        rr.num_tokens = d.num_tokens;
        rr.grad_norm_sq = d.grad_norm_sq;
        rr.busy_seconds = d.busy_seconds;
        rr.wall_seconds = d.wall_seconds;
        rr.peak_activation_bytes = d.peak_activation_bytes;
        rr.moe_min_topk_margin = std::numeric_limits<double>::infinity();
        if (!d.eval) {
          for (const layers::moe::MoELayerStats& s : d.moe_stats) {
            rr.moe_min_topk_margin = std::min(rr.moe_min_topk_margin, s.min_topk_margin);
          }
        }
        if (!st.cfg->moe_layers.empty()) {  // zeros for TP ranks > 0 and evaluation
          const bool counts = d.tensor_parallel_rank == 0 && !d.eval;
          r.rank_moe[d.stage] = FlattenMoEStats(*st.cfg, counts ? d.moe_stats : NoMoEStats());
        }
        if (--r.pending > 0) {
          if (!expect_eval) MaybeSendOptimisticStep(self, d);
          return;
        }
        if (!st.cfg->control) {
          CompleteReports(self, expect_eval);
          return;
        }
        // Multi-process: all-gather the reports (and exit requests), then decide. With
        // post-validation this rank's own report is its partial reduction: it steps
        // optimistically while the all-gather runs.
        if (!expect_eval) MaybeSendOptimisticStep(self, d);
        const size_t me = static_cast<size_t>(st.cfg->control->rank());
        RankReport mine = r.ranks.at(me);
        mine.exit_flags = LocalExitFlags(st);
        mine.optimistic_confirmed = static_cast<int32_t>(st.local_confirmed);
        mine.optimistic_rolled_back = static_cast<int32_t>(st.local_rolled_back);
        mine.async_save_ended = st.async_writer && st.async_writer->ended() ? 1 : 0;
        const size_t moe_doubles = st.cfg->moe_layers.size() * MoEStride(*st.cfg);
        r.rank_moe[me].resize(moe_doubles, 0.0);
        Exchange(self, ReportBlock(mine, r.rank_moe[me]),
                 expect_eval ? "evaluation reports" : "iteration reports",
                 [self, expect_eval](const ControlPlane::Blocks& blocks) {
                   auto& st = self->state;
                   PhaseReports& r = st.reports;
                   st.agreed_exit_flags = 0;
                   st.agreed_async_save_ended = !blocks.empty();
                   const size_t moe_doubles = st.cfg->moe_layers.size() * MoEStride(*st.cfg);
                   for (size_t i = 0; i < blocks.size() && i < r.ranks.size(); ++i) {
                     if (blocks[i].size() != sizeof(RankReport) + moe_doubles * sizeof(double)) {
                       Finish(self, false, absl::StrCat("coordinator: a report block of ",
                                                        blocks[i].size(), " bytes from rank ", i));
                       return;
                     }
                     std::memcpy(&r.ranks[i], blocks[i].data(), sizeof(RankReport));
                     r.rank_moe[i].assign(moe_doubles, 0.0);
                     if (moe_doubles > 0) {
                       std::memcpy(r.rank_moe[i].data(), blocks[i].data() + sizeof(RankReport),
                                   moe_doubles * sizeof(double));
                     }
                     st.agreed_exit_flags |= r.ranks[i].exit_flags;
                     if (r.ranks[i].async_save_ended == 0) st.agreed_async_save_ended = false;
                   }
                   st.summary.optimistic_steps_confirmed = 0;
                   st.summary.optimistic_steps_rolled_back = 0;
                   for (const RankReport& rr : r.ranks) {
                     st.summary.optimistic_steps_confirmed += rr.optimistic_confirmed;
                     st.summary.optimistic_steps_rolled_back += rr.optimistic_rolled_back;
                   }
                   CompleteReports(self, expect_eval);
                 });
      },
      [=](const StageStepDone& d) {
        auto& st = self->state;
        if (d.optimistic) {
          ++(d.rolled_back ? st.local_rolled_back : st.local_confirmed);
          if (!st.cfg->control) {
            st.summary.optimistic_steps_confirmed = st.local_confirmed;
            st.summary.optimistic_steps_rolled_back = st.local_rolled_back;
          }
        }
        if (st.overlap_pending > 0 && d.iteration == st.overlap_iteration) {
          // Post-validation: a final step of the iteration before the one running.
          if (st.trace) {
            for (const TraceSpan& span : d.spans) st.trace->Add(span);
          }
          --st.overlap_pending;
          return;
        }
        if (st.phase != Phase::kStep || d.iteration != st.iteration) {
          if (st.phase == Phase::kDone) return;
          Finish(self, false, absl::StrCat("coordinator: unexpected step report from stage ",
                                           d.stage, " for iteration ", d.iteration));
          return;
        }
        if (st.trace) {
          for (const TraceSpan& span : d.spans) st.trace->Add(span);
        }
        if (--st.reports.pending > 0) return;
        OnStepDone(self);
      },
      [=](const ShardSaved& s) {
        auto& st = self->state;
        if (st.phase != Phase::kSave) return;
        if (!s.ok) {
          if (!st.cfg->control) {
            Finish(self, false, absl::StrCat("saving checkpoint at iteration ", s.iteration,
                                             " (stage ", s.stage, "): ", s.error));
            return;
          }
          if (st.save_error.empty()) st.save_error = absl::StrCat("stage ", s.stage, ": ", s.error);
        }
        if (--st.reports.pending > 0) return;
        if (st.cfg->control) {
          ExchangeShardResults(self);
          return;
        }
        OnShardsSaved(self);
      },
      [=](ControlExchanged& x) {
        auto& st = self->state;
        if (st.phase == Phase::kDone) return;
        if (x.sequence != st.control_sequence || !st.control_next) {
          Finish(self, false, absl::StrCat("coordinator: control exchange ", x.sequence,
                                           " completed while ", st.control_sequence,
                                           " was expected"));
          return;
        }
        if (!x.ok) {
          Finish(self, false, absl::StrCat("exchanging ", st.control_what,
                                           " with the other processes at iteration ",
                                           st.iteration, ": ", x.error));
          return;
        }
        auto next = std::move(st.control_next);
        st.control_next = nullptr;
        next(x.blocks);
      },
      [=](const ProgramReplaced& r) {
        auto& st = self->state;
        if (st.phase != Phase::kRebalance) return;
        if (!r.ok) {
          Finish(self, false, absl::StrCat("rank ", r.rank, " could not take its new layers: ",
                                           r.error));
          return;
        }
        if (--st.reports.pending > 0) return;
        Print(st, st.rebalance_log);
        AfterStep(self);
      },
      [=](const StageFailed& f) {
        Finish(self, false,
               absl::StrCat(f.actor, " failed at iteration ", f.iteration,
                            f.microbatch >= 0 ? absl::StrCat(", micro-batch ", f.microbatch) : "",
                            ", op ", f.op, ": ", f.message));
      },
      [=](const DataFailed& f) {
        Finish(self, false,
               absl::StrCat("data actor failed at iteration ", f.iteration, ": ", f.message));
      },
  };
}

}  // namespace

CoordinatorActor SpawnCoordinator(caf::actor_system& system,
                                  std::shared_ptr<CoordinatorConfig> config) {
  return system.spawn(CoordinatorBehavior, std::move(config));
}

}  // namespace mxmaca::actors
