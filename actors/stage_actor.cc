// actors/stage_actor.cc: see stage_actor.h.
#include "actors/stage_actor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"
#include "actors/activation_pool.h"
#include "actors/step_backup.h"
#include "base/status_macros.h"
#include "kernels/cpu/elementwise.h"

namespace mxmaca::actors {
namespace {

using Clock = std::chrono::steady_clock;
using scheduler::OpKind;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs `fn` and turns an exception into an error status (tasks must not throw).
template <typename Fn>
absl::Status RunGuarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    // Out of host memory in an op (an activation, a pool buffer): the run ends with this
    // error through the coordinator, not with an abort.
    return absl::ResourceExhaustedError(
        "out of memory (std::bad_alloc) in a stage op; the memory needed grows with "
        "--hidden-size, --seq-length and --micro-batch-size and shrinks with more "
        "tensor/pipeline-parallel ranks or --recompute-granularity");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exception: ", e.what()));
  } catch (...) {
    return absl::InternalError("unknown exception");
  }
}

// (iteration, eval, micro-batch) -> that micro-batch's data.
using BatchKey = std::tuple<int64_t, bool, int32_t>;
// (iteration, eval, direction, receiving chunk, micro-batch) -> a neighbour's tensor.
using InboxKey = std::tuple<int64_t, bool, Direction, int32_t, int32_t>;

// Per-chunk gradient synchronisation of the running iteration.
struct ChunkSync {
  bool started = false;
  bool embedding_pending = false;
  bool buckets_ready = false;  // its bucket reductions may be posted (see PostBuckets)
  int32_t posted = -1;  // collectives posted for the buckets; -1 = not yet known
  int32_t done = 0;
  bool finished = false;
};

struct StageState {
  StageActorConfig cfg;
  bool active = false;     // an iteration's schedule is in progress
  bool finishing = false;  // all ops done, waiting for gradient sync / the grad norm
  bool norm_posted = false;  // the grad-norm task of this iteration is on the strand
  RunStageIteration run;
  // Op bookkeeping. Ops are posted to the strand in list order, except that the dynamic
  // policy may post a later W (or the next F) early; they finish in post order (the strand
  // is FIFO).
  size_t next_post = 0;             // the first op (list order) not yet posted
  std::vector<char> posted;         // per op index
  std::deque<size_t> running;       // posted, not finished, in post order
  size_t finished_ops = 0;
  size_t forwards_posted = 0, weights_posted = 0;  // stashes held = F - W (dynamic cap)
  std::set<std::pair<int32_t, int32_t>> b_posted;  // (micro-batch, chunk) whose B is posted
  std::vector<int32_t> w_left;      // per chunk: W ops not yet finished
  int32_t max_stashed = 0;          // dynamic policy: stash cap (micro-batch x chunk)
  // Dynamic policy grace period (StealDue): measured op seconds per kind (all iterations),
  // the blocked op whose wait is being timed, since when the strand idles on it, whether
  // its grace has passed, and whether a StealTimer is pending.
  double op_seconds_sum[3] = {0.0, 0.0, 0.0};
  int64_t op_count[3] = {0, 0, 0};
  int64_t blocked_iteration = -1;
  size_t blocked_op = 0;
  Clock::time_point blocked_since;
  bool grace_passed = false;
  bool steal_timer_armed = false;
  std::vector<ChunkSync> sync;
  // The order the chunks' bucket reductions are posted in on the data-parallel group: by
  // the position of each chunk's last W in the op list (chunks without W last). Every DP
  // replica runs the same list, so all post in the same order — whatever order their
  // chunks' gradients become final in (a tied-embedding all-reduce, the dynamic policy).
  std::vector<int32_t> bucket_order;
  size_t next_bucket = 0;
  std::map<BatchKey, std::shared_ptr<const data::GptMicroBatch>> batches;
  std::map<InboxKey, Activation> inbox;
  double loss_sum = 0.0;
  double num_tokens = 0.0;
  double busy_seconds = 0.0;
  Clock::time_point start;
  std::vector<TraceSpan> spans;  // with cfg.trace
  // Optimizer step / parameter all-gather.
  int64_t gather_iteration = -1;
  int32_t gather_posted = -1;
  int32_t gather_done = 0;
  bool gather_pending = false;      // parameters not yet all-gathered: no op may start
  bool step_reply_pending = false;  // StageStepDone waits for the all-gather
  StepFinished step_finished;
  // --optimizer-post-validation: the optimistic step taken for `optimistic_iteration` (-1:
  // none), the copies it keeps (written and read on the strand only; the actor just hands
  // the pointer to the validating task) and its trace span (sent with the final report).
  int64_t optimistic_iteration = -1;
  ApplyOptimizerStep optimistic_step;
  std::shared_ptr<StepBackup> backup;
  std::optional<TraceSpan> optimistic_span;
  std::vector<SaveCheckpointShard> deferred_saves;
  bool failed = false;
  // Pooled payloads of the two outgoing channels (0 = activations, 1 = gradients) and how
  // many are in flight (taken when the sending op starts, back when the consumer is done).
  std::shared_ptr<ActivationPool> pool;
  int32_t in_flight[2] = {0, 0};

  std::string Name() const { return StageActorName(cfg); }
  int32_t num_chunks() const { return cfg.program->num_chunks(); }
  int32_t virtual_stage(int32_t chunk) const {
    return scheduler::VirtualStage(chunk, cfg.pipeline_rank, cfg.pipeline_size, run.placement);
  }
  bool first_virtual(int32_t chunk) const { return virtual_stage(chunk) == 0; }
  bool last_virtual(int32_t chunk) const {
    return virtual_stage(chunk) == cfg.pipeline_size * num_chunks() - 1;
  }
  bool needs_batch(int32_t chunk) const {
    return cfg.reset_attention_mask || first_virtual(chunk) || last_virtual(chunk);
  }
  // neighbour: the (stage, chunk) holding virtual stage `virtual_stage`.
  scheduler::StageChunk neighbour(int32_t virtual_stage) const {
    return scheduler::StageChunkOf(virtual_stage, cfg.pipeline_size, run.placement);
  }
  // sends_on: the channel op `kind` of `chunk` sends on, or -1 (none, or a local hand-over
  // between chunks of this stage: a one-stage pipeline, or the turn of ZB-V's V).
  int32_t sends_on(OpKind kind, int32_t chunk) const {
    if (kind == OpKind::kForward && !last_virtual(chunk)) {
      return neighbour(virtual_stage(chunk) + 1).stage == cfg.pipeline_rank ? -1 : 0;
    }
    if (kind == OpKind::kBackwardInput && !first_virtual(chunk)) {
      return neighbour(virtual_stage(chunk) - 1).stage == cfg.pipeline_rank ? -1 : 1;
    }
    return -1;
  }
  bool slot_free(int32_t channel) const {
    const int32_t quota = channel == 0 ? run.forward_slots : run.backward_slots;
    return channel < 0 || quota <= 0 || in_flight[channel] < quota;
  }
  int32_t rank_of(int32_t pipeline_rank) const {
    return (pipeline_rank * cfg.data_parallel_size + cfg.data_parallel_rank) *
               cfg.tensor_parallel_size +
           cfg.tensor_parallel_rank;
  }
};

using StagePointer = StageActorHandle::stateful_pointer<StageState>;

// GradGroupSize / GradGroupRank: the group gradients are reduced over (dp, or dp x CP with
// context parallelism; stage_actor.h) and this rank's index in it.
int32_t GradGroupSize(const StageActorConfig& c) {
  return c.data_parallel_size * c.context_parallel_size;
}
int32_t GradGroupRank(const StageActorConfig& c) {
  return c.data_parallel_rank * c.context_parallel_size + c.context_parallel_rank;
}

void Fail(StagePointer self, int64_t iteration, int32_t microbatch, const std::string& op,
          const std::string& message) {
  auto& st = self->state;
  if (st.failed) return;  // the first failure ends the job; do not pile on
  st.failed = true;
  st.active = false;
  self->send(st.cfg.coordinator, StageFailed{st.Name(), iteration, microbatch, op, message});
}

MicroBatchKey KeyFor(const StageState& st, const scheduler::PipelineOp& op) {
  MicroBatchKey key;
  key.iteration = st.run.iteration;
  key.microbatch = op.microbatch;
  key.chunk = op.chunk;
  key.global_microbatch = st.run.first_global_microbatch +
                          static_cast<int64_t>(op.microbatch) * st.cfg.data_parallel_size +
                          st.cfg.data_parallel_rank;
  key.eval = st.run.eval;
  // Megatron's MoEAuxLossAutoScaler: the aux losses' gradient takes the main loss's scale.
  key.moe_aux_loss_grad_scale =
      st.run.calculate_per_token_loss ? 1.0 : 1.0 / std::max(1, st.run.num_microbatches);
  return key;
}

StageIterationDone MakeReport(const StageState& st) {
  StageIterationDone done;
  done.stage = st.cfg.rank;
  done.pipeline_rank = st.cfg.pipeline_rank;
  done.data_parallel_rank = st.cfg.data_parallel_rank;
  done.tensor_parallel_rank = st.cfg.tensor_parallel_rank;
  done.iteration = st.run.iteration;
  done.eval = st.run.eval;
  done.loss_sum = st.loss_sum;
  done.num_tokens = st.num_tokens;
  done.busy_seconds = st.busy_seconds;
  done.wall_seconds = SecondsSince(st.start);
  done.peak_activation_bytes = st.cfg.program->peak_activation_bytes();
  return done;
}

void AttachSpans(StageState& st, StageIterationDone* done) {
  done->spans = std::move(st.spans);
  st.spans.clear();
}

void AddSpan(StageState& st, std::string name, const char* category, int64_t start_us,
             int64_t duration_us, int32_t microbatch) {
  if (!st.cfg.trace) return;
  TraceSpan span;
  span.name = std::move(name);
  span.category = category;
  span.track = st.cfg.rank;
  span.start_us = start_us;
  span.duration_us = duration_us;
  span.iteration = st.run.iteration;
  span.microbatch = microbatch;
  st.spans.push_back(std::move(span));
}

// A DoneCallback that turns a collective's completion into a message to the actor.
transport::DoneCallback ToMessage(StageActorHandle me, int64_t iteration, CollectiveKind kind,
                                  int32_t chunk, int32_t bucket) {
  return [me, iteration, kind, chunk, bucket](const transport::CollectiveInfo& info,
                                              absl::Status s) {
    CollectiveDone d{iteration, kind, chunk, bucket, s.ok(), ""};
    if (!s.ok()) d.error = absl::StrCat(info.ToString(), ": ", s.message());
    caf::anon_send(me, std::move(d));
  };
}

// ---- gradient synchronisation ----

void MaybeReport(StagePointer self);

// Posts chunk c's bucket reductions from the strand (after every op posted before).
void PostBucketsNow(StagePointer self, int32_t chunk) {
  auto& st = self->state;
  ChunkSync& cs = st.sync[chunk];
  const StageActorConfig& c = st.cfg;
  if (GradGroupSize(c) == 1 || !c.data_parallel_group) {
    cs.posted = 0;
    cs.finished = true;
    MaybeReport(self);
    return;
  }
  auto program = c.program;
  auto* comm = c.comm;
  const transport::ProcessGroup group = *c.data_parallel_group;
  const layers::DataParallelBuckets buckets = c.buckets[chunk];
  const bool reduce_scatter = c.distributed_optimizer;
  const float scale =
      c.calculate_per_token_loss ? 1.0f : 1.0f / static_cast<float>(c.data_parallel_size);
  const kernels::ExecContext exec = c.exec;
  const int64_t iteration = st.run.iteration;
  StageActorHandle me = self;
  // The tied embedding's gradient is on the host already when its sum across stages ran
  // (StartChunkSync); the bucket reduction must not fetch the unsummed one again.
  const int tied = program->tied_embedding_parameter(chunk);
  const bool tied_on_host = tied >= 0 && c.embedding_group && c.embedding_group->size() > 1;
  c.strand->Post([=] {
    absl::Span<float> grads = program->parameters(chunk).grads_arena();
    const int32_t n = static_cast<int32_t>(buckets.buckets.size());
    if (program->state_on_backend()) {
      // Training state on the device with a gradient group: the reduction runs on a host
      // copy of the gradients (MaybeReport uploads the sums before the grad norm).
      absl::Status copied;
      for (int p = 0; p < program->parameters(chunk).size() && copied.ok(); ++p) {
        if (p == tied && tied_on_host) continue;
        copied = RunGuarded([&] { return program->DownloadGradientFromBackend(chunk, p); });
      }
      if (!copied.ok()) {
        for (int32_t b = n - 1; b >= 0; --b) {
          ToMessage(me, iteration, CollectiveKind::kGradBucket, chunk, b)(
              transport::CollectiveInfo{}, copied);
        }
        caf::anon_send(me, GradsPosted{iteration, chunk, n});
        return;
      }
    }
    // Megatron's DDP: gradient_scaling_factor = 1 / dp before the sum (an average).
    if (scale != 1.0f) kernels::cpu::Scale(exec, grads.data(), grads.size(), scale);
    // Last bucket first: the order backward produces gradients in (Megatron's buckets are
    // built in reverse parameter order for the same reason).
    for (int32_t b = n - 1; b >= 0; --b) {
      const layers::GradBucket& bk = buckets.buckets[b];
      float* base = grads.data() + bk.begin;
      const int64_t len = bk.end - bk.begin;
      auto done = ToMessage(me, iteration, CollectiveKind::kGradBucket, chunk, b);
      if (reduce_scatter) {
        const int64_t shard = len / group.size();
        comm->ReduceScatterSum(group, base, base + group.rank_in_group * shard, shard,
                               std::move(done));
      } else {
        comm->AllReduceSum(group, base, base, len, std::move(done));
      }
    }
    caf::anon_send(me, GradsPosted{iteration, chunk, n});
  });
}

// PostBuckets: chunk c's gradients are ready for reduction; posts the reductions of every
// ready chunk whose turn in st.bucket_order has come. (Posting as each chunk became ready
// let DP replicas post the same group's collectives in different orders — a mismatch —
// when one chunk waited on the embedding all-reduce while another's last W finished.)
void PostBuckets(StagePointer self, int32_t chunk) {
  auto& st = self->state;
  st.sync[chunk].buckets_ready = true;
  while (st.next_bucket < st.bucket_order.size()) {
    const int32_t c = st.bucket_order[st.next_bucket];
    if (!st.sync[c].buckets_ready) return;
    ++st.next_bucket;
    PostBucketsNow(self, c);
  }
}

// LocalTiedPartner: the other chunk of this stage that holds the other end of the tied
// word embeddings (ZB-V's V puts the first and the last virtual stage on rank 0), or -1.
int32_t LocalTiedPartner(const StageState& st, int32_t chunk) {
  if (st.cfg.program->tied_embedding_parameter(chunk) < 0) return -1;
  for (int32_t c = 0; c < st.num_chunks(); ++c) {
    if (c != chunk && st.cfg.program->tied_embedding_parameter(c) >= 0) return c;
  }
  return -1;
}

// Starts chunk c's synchronisation: tied-embedding sum first (if any), then buckets.
void StartChunkSync(StagePointer self, int32_t chunk) {
  auto& st = self->state;
  ChunkSync& cs = st.sync[chunk];
  if (cs.started) return;
  cs.started = true;
  const int param = st.cfg.program->tied_embedding_parameter(chunk);
  const int32_t partner = LocalTiedPartner(st, chunk);
  if (partner >= 0) {
    // Both ends on this stage: once both chunks' gradients are final, sum them here in the
    // embedding group's order (first virtual stage's + last's) and give both the sum.
    cs.embedding_pending = true;
    if (!st.sync[partner].started) return;  // the partner's last W has not run yet
    const int32_t first = st.first_virtual(chunk) ? chunk : partner;
    const int32_t last = first == chunk ? partner : chunk;
    auto program = st.cfg.program;
    const kernels::ExecContext exec = st.cfg.exec;
    st.cfg.strand->Post([program, exec, first, last] {
      layers::ParameterStore& a = program->parameters(first);
      layers::ParameterStore& b = program->parameters(last);
      const int pa = program->tied_embedding_parameter(first);
      const int pb = program->tied_embedding_parameter(last);
      const int64_t n = a.info(pa).numel;
      kernels::cpu::Add(exec, a.grad(pa), b.grad(pb), a.grad(pa), n);
      std::copy(a.grad(pa), a.grad(pa) + n, b.grad(pb));
    });
    st.sync[chunk].embedding_pending = false;
    st.sync[partner].embedding_pending = false;
    PostBuckets(self, chunk);  // strand FIFO: after the sum
    PostBuckets(self, partner);
    return;
  }
  if (param >= 0 && st.cfg.embedding_group && st.cfg.embedding_group->size() > 1) {
    cs.embedding_pending = true;
    auto program = st.cfg.program;
    auto* comm = st.cfg.comm;
    const transport::ProcessGroup group = *st.cfg.embedding_group;
    auto done = ToMessage(self, st.run.iteration, CollectiveKind::kEmbeddingGrad, chunk, -1);
    st.cfg.strand->Post([program, comm, group, chunk, param, done] {
      layers::ParameterStore& store = program->parameters(chunk);
      // Training state on the device: the sum runs on a host copy of this one gradient,
      // uploaded back before the grad norm (MaybeReport).
      absl::Status copied =
          RunGuarded([&] { return program->DownloadGradientFromBackend(chunk, param); });
      if (!copied.ok()) {
        done(transport::CollectiveInfo{}, copied);
        return;
      }
      float* g = store.grad(param);
      comm->AllReduceSum(group, g, g, store.info(param).numel, done);
    });
    return;
  }
  PostBuckets(self, chunk);
}

// After all ops and every chunk's sync: the grad norm of this rank's shard, then report.
void MaybeReport(StagePointer self) {
  auto& st = self->state;
  if (!st.finishing || st.norm_posted || st.failed) return;
  for (const ChunkSync& cs : st.sync) {
    if (!cs.finished) return;
  }
  st.norm_posted = true;  // once; `finishing` stays set until the report is sent
  auto program = st.cfg.program;
  auto exec = st.cfg.exec;
  auto buckets = st.cfg.buckets;
  const int32_t dp_rank = GradGroupRank(st.cfg);
  StageActorHandle me = self;
  const int64_t iteration = st.run.iteration;
  // PostBucketsNow reduced host copies of every gradient (training state on the device).
  const bool reduced_on_host = GradGroupSize(st.cfg) > 1 && st.cfg.data_parallel_group;
  st.cfg.strand->Post([program, exec, buckets, dp_rank, me, iteration, reduced_on_host] {
    const absl::Status finished_iteration =
        RunGuarded([&] { return program->FinishTrainingIteration(); });
    double sq = 0.0;
    absl::Status norm_status;
    for (int c = 0; c < program->num_chunks(); ++c) {  // host sums back to the device
      if (!program->state_on_backend()) break;
      const int tied = program->tied_embedding_parameter(c);
      for (int p = 0; p < program->parameters(c).size() && norm_status.ok(); ++p) {
        if (reduced_on_host || p == tied) {
          norm_status = RunGuarded([&] { return program->UploadGradientToBackend(c, p); });
        }
      }
    }
    for (int c = 0; c < program->num_chunks(); ++c) {
      const layers::ParameterStore& store = program->parameters(c);
      const std::function<bool(const layers::ParameterInfo&)> counts =
          [&](const layers::ParameterInfo& info) {
            const int id = store.Index(info.spec.name).value_or(-1);
            return program->counts_toward_grad_norm(c, id);
          };
      if (program->state_on_backend()) {
        // The same ranges in the same order, summed where the gradients are.
        absl::StatusOr<double> part = program->GradSumSquaresOnBackend(
            c, layers::ShardGradNormRanges(store, buckets[c], dp_rank, counts));
        if (part.ok()) {
          sq += *part;
        } else if (norm_status.ok()) {
          norm_status = part.status();
        }
      } else {
        sq += layers::ShardGradNormSquared(exec, store, buckets[c], dp_rank, counts);
      }
      sq += program->ExpertGradNormSquared(c);  // outside the buckets (EP across DP)
    }
    GradNormFinished finished{iteration, sq, std::isfinite(sq)};
    finished.moe_stats = program->TakeMoEStats();
    if (!finished_iteration.ok()) {
      finished.error = std::string(finished_iteration.message());
    } else if (!norm_status.ok()) {
      finished.error = absl::StrCat("grad norm on the device: ", norm_status.message());
    }
    caf::anon_send(me, std::move(finished));
  });
}

void OnChunkCollectiveDone(StagePointer self, int32_t chunk) {
  auto& st = self->state;
  ChunkSync& cs = st.sync[chunk];
  if (cs.posted >= 0 && cs.done == cs.posted && !cs.finished) {
    cs.finished = true;
    MaybeReport(self);
  }
}

// ---- the op loop ----

void FinishIteration(StagePointer self) {
  auto& st = self->state;
  if (st.run.eval) {
    st.active = false;
    StageIterationDone done = MakeReport(st);
    AttachSpans(st, &done);
    self->send(st.cfg.coordinator, std::move(done));
    return;
  }
  st.finishing = true;
  // Without --overlap-grad-reduce the reductions start now, last chunk first.
  for (int32_t c = st.num_chunks() - 1; c >= 0; --c) StartChunkSync(self, c);
  MaybeReport(self);
}

// Destination: where an op's output goes: the neighbouring virtual stage's rank and chunk.
struct Destination {
  int32_t rank = 0;
  int32_t chunk = 0;
};

Destination DestinationOf(const StageState& st, const scheduler::PipelineOp& op,
                          Direction dir) {
  const int32_t k = st.virtual_stage(op.chunk) + (dir == Direction::kForward ? 1 : -1);
  const scheduler::StageChunk to = st.neighbour(k);
  return {st.rank_of(to.stage), to.chunk};
}

// kMaxPostedOps: ops posted to the strand ahead of their completion — the running one and
// the next, queued behind it, so the strand goes from one op to the next without waiting
// for the round trip through this actor (the strand is FIFO, so the order is the list's).
constexpr size_t kMaxPostedOps = 2;

// TryPost: posts op `op_index` if its inputs are here (and its channel has a free slot);
// returns whether it did.
bool TryPost(StagePointer self, size_t op_index) {
  auto& st = self->state;
  const scheduler::PipelineOp op = st.run.schedule[op_index];
  const MicroBatchKey key = KeyFor(st, op);
  const int64_t iteration = st.run.iteration;
  const bool eval = st.run.eval;
  auto program = st.cfg.program;
  StageActorHandle me = self;

  // An op that sends waits for a free slot of its channel (back-pressure); when it is
  // posted it takes the slot and a pooled buffer for its output.
  const int32_t channel = st.sends_on(op.kind, op.chunk);
  if (!st.slot_free(channel)) return false;  // a SlotReleased message retries
  auto post = [&](auto body) {
    st.posted[op_index] = 1;
    st.running.push_back(op_index);
    if (op.kind == OpKind::kForward) ++st.forwards_posted;
    if (op.kind == OpKind::kBackwardWeight) ++st.weights_posted;
    if (op.kind == OpKind::kBackwardInput) st.b_posted.emplace(op.microbatch, op.chunk);
    while (st.next_post < st.posted.size() && st.posted[st.next_post]) ++st.next_post;
    std::vector<float> buffer;
    if (channel >= 0) {
      ++st.in_flight[channel];
      buffer = st.pool->Take();
    }
    const OpKind kind = op.kind;
    // An op that sends on a channel sends its output straight from the strand to the
    // neighbour (one hop fewer than through this actor); the pool's slot and buffer were
    // taken above.
    StageActorHandle to;
    ActivationMessage out;
    std::shared_ptr<ActivationPool> pool;
    int32_t to_rank = -1;
    std::shared_ptr<RemoteStageLinks> remote;  // set when the neighbour is in another process
    if (channel >= 0) {
      const Direction dir = kind == OpKind::kForward ? Direction::kForward : Direction::kBackward;
      const Destination d = DestinationOf(st, op, dir);
      to = st.cfg.peers->by_rank.at(static_cast<size_t>(d.rank));
      to_rank = d.rank;
      if (!to) remote = st.cfg.peers->remote;
      out = ActivationMessage{iteration, eval, op.microbatch, d.chunk, dir, st.cfg.rank, {}};
      pool = st.pool;
    }
    const double slowdown =
        iteration >= st.cfg.slowdown_from_iteration ? st.cfg.slowdown_factor : 1.0;
    st.cfg.strand->Post([me, op_index, iteration, body, kind, channel, to, out, pool, slowdown,
                         to_rank, remote, buffer = std::move(buffer)]() mutable {
      OpFinished msg;
      msg.iteration = iteration;
      if (kind == OpKind::kForward) msg.forward.output = std::move(buffer);
      if (kind == OpKind::kBackwardInput) msg.d_input = std::move(buffer);
      msg.op_index = op_index;
      msg.start_us = TraceClockMicros();
      const auto t0 = Clock::now();
      absl::Status s = RunGuarded([&] { return body(&msg); });
      if (slowdown > 1.0) {  // injected: the op takes `slowdown` times as long
        const double extra = SecondsSince(t0) * (slowdown - 1.0);
        std::this_thread::sleep_for(std::chrono::duration<double>(extra));
      }
      msg.seconds = SecondsSince(t0);
      msg.ok = s.ok();
      if (!s.ok()) msg.error = std::string(s.message());
      if (s.ok() && channel >= 0) {
        if (kind == OpKind::kForward) {
          out.tensor.shape = msg.forward.output_shape;
          out.tensor.data = pool->Publish(std::move(msg.forward.output), channel);
        } else {
          out.tensor.shape = {static_cast<int64_t>(msg.d_input.size())};
          out.tensor.data = pool->Publish(std::move(msg.d_input), channel);
        }
        if (remote) {
          remote->Send(to_rank, channel, std::move(out));
        } else {
          caf::anon_send(to, std::move(out));
        }
      }
      caf::anon_send(me, std::move(msg));
    });
  };

  switch (op.kind) {
    case OpKind::kForward: {
      std::shared_ptr<const data::GptMicroBatch> batch;
      if (st.needs_batch(op.chunk)) {
        auto it = st.batches.find(BatchKey{iteration, eval, op.microbatch});
        if (it == st.batches.end()) return false;  // wait for the data
        batch = it->second;
      }
      Activation input;
      if (!st.first_virtual(op.chunk)) {
        auto it = st.inbox.find(
            InboxKey{iteration, eval, Direction::kForward, op.chunk, op.microbatch});
        if (it == st.inbox.end()) return false;  // wait for the previous stage
        input = std::move(it->second);
        st.inbox.erase(it);
      }
      post([program, key, batch, input](OpFinished* msg) {
        static const data::GptMicroBatch kEmpty;
        return program->Forward(key, batch ? *batch : kEmpty,
                                input.data ? &input : nullptr, &msg->forward);
      });
      return true;
    }
    case OpKind::kBackwardInput: {
      float scale = 1.0f;
      Activation d_output;
      if (st.last_virtual(op.chunk)) {
        if (!st.run.calculate_per_token_loss) {
          // Megatron (schedules.py forward_step): each micro-batch's loss is divided by
          // its token count and by the number of micro-batches (per DP replica). The
          // count is the sum of the loss mask (the F of this micro-batch may still be
          // running: B can be queued behind it), exact in fp64 for a 0/1 mask.
          auto it = st.batches.find(BatchKey{iteration, eval, op.microbatch});
          if (it == st.batches.end()) return false;
          const data::GptMicroBatch& mb = *it->second;
          double tokens = mb.loss_mask.empty() ? static_cast<double>(mb.b * mb.s) : 0.0;
          for (float m : mb.loss_mask) tokens += m;
          tokens = std::max(1.0, tokens);
          scale = static_cast<float>(1.0 / (tokens * st.run.num_microbatches));
        }
      } else {
        auto it = st.inbox.find(
            InboxKey{iteration, eval, Direction::kBackward, op.chunk, op.microbatch});
        if (it == st.inbox.end()) return false;  // wait for the next stage's gradient
        d_output = std::move(it->second);
        st.inbox.erase(it);
      }
      post([program, key, scale, d_output](OpFinished* msg) {
        return program->BackwardInput(key, d_output.data ? &d_output : nullptr, scale,
                                      &msg->d_input);
      });
      return true;
    }
    case OpKind::kBackwardWeight:
      post([program, key](OpFinished*) { return program->BackwardWeight(key); });
      return true;
  }
  return false;
}

// DynamicCandidate: with the dynamic policy, when the next op in list order cannot start
// (its input has not arrived), a later op that can run without changing any channel's
// order or the numerics: a W whose B is already posted (W accumulates in micro-batch order
// whatever order it runs in, layers/gpt_stage.h), else the next F in list order (the
// forward channel keeps its order) while fewer than max_stashed stashes are held.
// Returns the op index or the schedule size when there is none.
size_t DynamicCandidate(const StageState& st) {
  const auto& ops = st.run.schedule;
  for (size_t j = st.next_post + 1; j < ops.size(); ++j) {
    if (!st.posted[j] && ops[j].kind == OpKind::kBackwardWeight &&
        st.b_posted.count({ops[j].microbatch, ops[j].chunk}) != 0) {
      return j;
    }
  }
  const int64_t stashed = static_cast<int64_t>(st.forwards_posted) -
                          static_cast<int64_t>(st.weights_posted);
  if (stashed >= st.max_stashed) return ops.size();
  // The first unposted F in list order, unless that is the blocked op itself.
  for (size_t j = st.next_post; j < ops.size(); ++j) {
    if (!st.posted[j] && ops[j].kind == OpKind::kForward) return j == st.next_post ? ops.size() : j;
  }
  return ops.size();
}

// kStealGraceFraction: the dynamic policy runs a deferred op only once the strand is idle
// and has idled on the blocked op for this fraction of the deferred op's measured mean
// duration. Without it a wait of one message hop (~50 us) was filled with a whole W and
// the B whose input arrived a hop later waited for that W: on equal stages the zero-bubble
// lists, which place their W in the real gaps, lost their advantage (docs/BENCHMARKS.md,
// 10:20 UTC). A rent-or-buy rule (wait as long as the op would take, then run it): a
// short wait costs at most one op; a long one (a slow neighbour) is still filled. Measured
// at 0 (idle strand only), 0.5 and 1.0: 1.0 was best on equal stages and no different
// with a 1.5x slower stage.
constexpr double kStealGraceFraction = 1.0;

// ExpectedSeconds: the measured mean duration of `kind` on this stage (any op's mean before
// one of that kind ran; 0 before any op ran).
double ExpectedSeconds(const StageState& st, OpKind kind) {
  const int k = static_cast<int>(kind);
  if (st.op_count[k] > 0) return st.op_seconds_sum[k] / static_cast<double>(st.op_count[k]);
  double sum = 0.0;
  int64_t n = 0;
  for (int i = 0; i < 3; ++i) {
    sum += st.op_seconds_sum[i];
    n += st.op_count[i];
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

// StealDue: whether the dynamic policy may run deferred op `j` now: only when the strand is
// idle (a running op may finish after the blocked input arrives) and the idle wait on the
// blocked op has lasted the grace period; otherwise arms a StealTimer for its end.
bool StealDue(StagePointer self, size_t j) {
  auto& st = self->state;
  if (!st.running.empty()) return false;
  const Clock::time_point now = Clock::now();
  if (st.blocked_iteration != st.run.iteration || st.blocked_op != st.next_post) {
    st.blocked_iteration = st.run.iteration;
    st.blocked_op = st.next_post;
    st.blocked_since = now;
    st.grace_passed = false;
  }
  if (st.grace_passed) return true;
  const double grace = kStealGraceFraction * ExpectedSeconds(st, st.run.schedule[j].kind);
  const double waited = std::chrono::duration<double>(now - st.blocked_since).count();
  if (waited >= grace) {
    st.grace_passed = true;
    return true;
  }
  if (!st.steal_timer_armed) {
    st.steal_timer_armed = true;
    self->delayed_send(self,
                       std::chrono::duration_cast<caf::timespan>(
                           std::chrono::duration<double>(grace - waited)),
                       StealTimer{st.run.iteration});
  }
  return false;
}

void TryAdvance(StagePointer self) {
  auto& st = self->state;
  if (!st.active || st.finishing || st.gather_pending || st.failed) return;
  if (st.finished_ops == st.run.schedule.size()) {
    FinishIteration(self);
    return;
  }
  while (st.running.size() < kMaxPostedOps && st.next_post < st.run.schedule.size()) {
    if (TryPost(self, st.next_post)) continue;
    if (!st.run.dynamic) break;
    const size_t j = DynamicCandidate(st);
    if (j == st.run.schedule.size() || !StealDue(self, j) || !TryPost(self, j)) break;
  }
}

// HandOverLocally: a one-stage pipeline with several chunks passes an F output or B
// input-gradient between its own chunks (no channel, no message). Outputs that cross to
// another stage were sent from the strand (TryPost).
void HandOverLocally(StagePointer self, const scheduler::PipelineOp& op, Direction dir,
                     std::vector<int64_t> shape, std::vector<float> values) {
  auto& st = self->state;
  const Destination d = DestinationOf(st, op, dir);
  Activation tensor;
  tensor.shape = std::move(shape);
  tensor.data = std::make_shared<const std::vector<float>>(std::move(values));
  st.inbox[InboxKey{st.run.iteration, st.run.eval, dir, d.chunk, op.microbatch}] =
      std::move(tensor);
}

void OnOpFinished(StagePointer self, OpFinished& f) {
  auto& st = self->state;
  if (st.failed) return;
  if (!st.active || f.iteration != st.run.iteration || st.running.empty() ||
      f.op_index != st.running.front()) {
    Fail(self, f.iteration, -1, "op",
         absl::StrCat("unexpected completion of op ", f.op_index, " of iteration ",
                      f.iteration, " (running op ",
                      st.running.empty() ? -1 : static_cast<int64_t>(st.running.front()),
                      " of iteration ", st.run.iteration, ")"));
    return;
  }
  st.running.pop_front();
  const scheduler::PipelineOp op = st.run.schedule[f.op_index];
  st.busy_seconds += f.seconds;
  if (!st.run.eval) {
    st.op_seconds_sum[static_cast<int>(op.kind)] += f.seconds;
    ++st.op_count[static_cast<int>(op.kind)];
  }
  if (!f.ok) {
    Fail(self, f.iteration, op.microbatch, scheduler::ToString(op), f.error);
    return;
  }
  AddSpan(st, (st.run.eval ? "eval " : "") + scheduler::ToString(op),
          st.run.eval ? "eval" : "compute", f.start_us, static_cast<int64_t>(f.seconds * 1e6),
          op.microbatch);
  const BatchKey bkey{st.run.iteration, st.run.eval, op.microbatch};
  switch (op.kind) {
    case OpKind::kForward:
      st.loss_sum += f.forward.loss_sum;
      st.num_tokens += f.forward.num_tokens;
      if (!st.last_virtual(op.chunk) && st.sends_on(op.kind, op.chunk) < 0) {
        HandOverLocally(self, op, Direction::kForward, f.forward.output_shape,
                        std::move(f.forward.output));
      }
      break;
    case OpKind::kBackwardInput:
      if (!st.first_virtual(op.chunk) && st.sends_on(op.kind, op.chunk) < 0) {
        const std::vector<int64_t> shape{static_cast<int64_t>(f.d_input.size())};
        HandOverLocally(self, op, Direction::kBackward, shape, std::move(f.d_input));
      }
      break;
    case OpKind::kBackwardWeight:
      if (--st.w_left[op.chunk] == 0 && st.cfg.overlap_grad_reduce) {
        StartChunkSync(self, op.chunk);  // this chunk's gradients are final
      }
      break;
  }
  ++st.finished_ops;
  // The data of a micro-batch is dropped after its last use on this stage.
  if (st.finished_ops == st.run.schedule.size()) {
    for (auto it = st.batches.begin(); it != st.batches.end();) {
      it = std::get<0>(it->first) == st.run.iteration && std::get<1>(it->first) == st.run.eval
               ? st.batches.erase(it)
               : std::next(it);
    }
  }
  TryAdvance(self);
}

// ---- optimizer step ----

void ReplyStep(StagePointer self) {
  auto& st = self->state;
  const StepFinished& f = st.step_finished;
  StageStepDone done{st.cfg.rank, f.iteration, {}};
  done.optimistic = f.validated;
  done.rolled_back = f.rolled_back;
  if (st.cfg.trace) {
    if (st.optimistic_span) done.spans.push_back(*st.optimistic_span);
    done.spans.push_back(TraceSpan{f.validated ? (f.rolled_back ? "optimizer (rollback + redo)"
                                                                : "optimizer (confirmed)")
                                               : "optimizer",
                                   "optimizer", st.cfg.rank, f.start_us, f.duration_us,
                                   f.iteration, -1});
  }
  st.optimistic_span.reset();
  self->send(st.cfg.coordinator, std::move(done));
}

void RunSave(StagePointer self, SaveCheckpointShard save) {
  auto& st = self->state;
  auto program = st.cfg.program;
  auto optimizers = st.cfg.optimizers;
  // With CP the checkpoint sees TP rank t and the 'dp-cp' index as the data-parallel rank
  // (parameters from index 0; the distributed optimizer's shards from every index).
  const int32_t tp = st.cfg.tensor_parallel_size / std::max(1, st.cfg.context_parallel_size);
  StageIdentity id{st.cfg.rank, st.cfg.pipeline_rank, GradGroupRank(st.cfg),
                   st.cfg.distributed_optimizer, st.cfg.tensor_parallel_rank % std::max(1, tp)};
  CoordinatorActor coordinator = st.cfg.coordinator;
  st.cfg.strand->Post([program, optimizers, id, coordinator, save] {
    absl::Status s = RunGuarded([&]() -> absl::Status {
      // Training state on the device: its parameters and moments to the host stores first.
      for (int c = 0; c < program->num_chunks(); ++c) {
        MXMACA_RETURN_IF_ERROR(program->DownloadTrainingState(c, *optimizers[c]));
      }
      return save.write_shard(id, *program, optimizers);
    });
    ShardSaved msg{id.rank, save.iteration, s.ok(), std::string(s.message())};
    caf::anon_send(coordinator, std::move(msg));
  });
}

void OnGatherDone(StagePointer self) {
  auto& st = self->state;
  if (st.gather_posted < 0 || st.gather_done < st.gather_posted) return;
  st.gather_pending = false;
  st.gather_posted = -1;
  if (st.step_reply_pending) {
    st.step_reply_pending = false;
    ReplyStep(self);
  }
  for (SaveCheckpointShard& save : st.deferred_saves) RunSave(self, std::move(save));
  st.deferred_saves.clear();
  TryAdvance(self);
}

// RunStep: scales the gradients by grad_scale and clip_coeff and steps every chunk's AdamW
// (or only drops the gradients, for a skip); an applied step then lasts at least
// step.min_seconds (the synthetic backend's declared optimizer time).
absl::Status RunStep(StageProgram& program,
                     const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers,
                     const kernels::ExecContext& exec, const ApplyOptimizerStep& step) {
  const Clock::time_point t0 = Clock::now();
  for (int c = 0; c < program.num_chunks(); ++c) {
    if (program.state_on_backend()) {  // the same arithmetic where the state lives
      const double factors[] = {step.grad_scale, step.clip_coeff};
      MXMACA_RETURN_IF_ERROR(program.StepOnBackend(c, *optimizers[c], step.skip, factors, step.lr,
                                                   step.decoupled_lr.value_or(step.lr),
                                                   step.weight_decay));
      continue;
    }
    layers::ParameterStore& params = program.parameters(c);
    if (!step.skip) {
      absl::Span<float> g = params.grads_arena();
      for (const double factor : {step.grad_scale, step.clip_coeff}) {
        if (factor != 1.0) {
          kernels::cpu::Scale(exec, g.data(), g.size(), static_cast<float>(factor));
        }
      }
      optimizers[c]->Step(exec, step.lr, step.decoupled_lr.value_or(step.lr),
                          step.weight_decay);
    }
    params.ZeroGrads();
  }
  if (!step.skip && step.min_seconds > 0.0) {
    std::this_thread::sleep_until(
        t0 + std::chrono::duration_cast<Clock::duration>(
                 std::chrono::duration<double>(step.min_seconds)));
  }
  return absl::OkStatus();
}

// SameDecision: whether an optimistic step did exactly what the final one asks.
bool SameDecision(const ApplyOptimizerStep& a, const ApplyOptimizerStep& b) {
  if (a.skip != b.skip) return false;
  return a.skip || (a.grad_scale == b.grad_scale && a.clip_coeff == b.clip_coeff &&
                    a.lr == b.lr && a.decoupled_lr == b.decoupled_lr &&
                    a.weight_decay == b.weight_decay);
}

// ApplyStep: runs `step` on the strand. Post-validation (messages.h ApplyOptimizerStep):
// an optimistic step first saves the copies; the final step of the same iteration then
// confirms it (drops the copies) or restores them and runs the final step.
void ApplyStep(StagePointer self, const ApplyOptimizerStep& step) {
  auto& st = self->state;
  auto program = st.cfg.program;
  auto optimizers = st.cfg.optimizers;
  auto exec = st.cfg.exec;
  StageActorHandle me = self;
  const bool gather = st.cfg.distributed_optimizer && GradGroupSize(st.cfg) > 1 &&
                      st.cfg.data_parallel_group && !step.skip;
  std::shared_ptr<StepBackup> backup;
  bool validate = false, confirm = false;
  if (step.optimistic) {
    // No speculation where the step all-gathers parameters: the other DP ranks of this
    // stage may not step optimistically, and the collective must match on all of them.
    if (st.cfg.distributed_optimizer && GradGroupSize(st.cfg) > 1 &&
        st.cfg.data_parallel_group) {
      return;
    }
    if (st.optimistic_iteration >= 0) {
      Fail(self, step.iteration, -1, "optimizer",
           absl::StrCat("an optimistic step for iteration ", step.iteration,
                        " while the one of iteration ", st.optimistic_iteration,
                        " is not validated"));
      return;
    }
    st.optimistic_iteration = step.iteration;
    st.optimistic_step = step;
    st.backup = std::make_shared<StepBackup>();
    backup = st.backup;
  } else if (st.optimistic_iteration >= 0) {
    if (st.optimistic_iteration != step.iteration) {
      Fail(self, step.iteration, -1, "optimizer",
           absl::StrCat("the step of iteration ", step.iteration,
                        " arrived while the optimistic step of iteration ",
                        st.optimistic_iteration, " is not validated"));
      return;
    }
    validate = true;
    confirm = SameDecision(st.optimistic_step, step);
    backup = std::move(st.backup);
    st.backup.reset();
    st.optimistic_iteration = -1;
  }
  auto* comm = st.cfg.comm;
  std::optional<transport::ProcessGroup> group = st.cfg.data_parallel_group;
  auto buckets = st.cfg.buckets;
  if (gather) {
    st.gather_pending = true;
    st.gather_iteration = step.iteration;
    st.gather_posted = -1;
    st.gather_done = 0;
  }
  st.cfg.strand->Post([=] {
    StepFinished msg;
    msg.iteration = step.iteration;
    msg.optimistic = step.optimistic;
    msg.validated = validate;
    msg.rolled_back = validate && !confirm;
    msg.start_us = TraceClockMicros();
    absl::Status s = RunGuarded([&]() -> absl::Status {
      if (step.optimistic) {
        if (absl::Status saved = backup->Save(*program, optimizers); !saved.ok()) return saved;
      } else if (validate) {
        if (confirm) return absl::OkStatus();  // the copies go with the last reference
        if (absl::Status restored = backup->Restore(*program, optimizers); !restored.ok()) {
          return restored;
        }
      }
      return RunStep(*program, optimizers, exec, step);
    });
    msg.duration_us = TraceClockMicros() - msg.start_us;
    msg.ok = s.ok();
    if (!s.ok()) msg.error = std::string(s.message());
    int32_t posted = 0;
    if (gather && s.ok()) {
      // Distributed optimizer: every rank updated its shard; gather the parameters.
      for (int c = 0; c < program->num_chunks(); ++c) {
        float* params = program->parameters(c).params_arena().data();
        const layers::DataParallelBuckets& bs = buckets[c];
        for (int32_t b = 0; b < static_cast<int32_t>(bs.buckets.size()); ++b) {
          const layers::GradBucket& bk = bs.buckets[b];
          const int64_t shard = (bk.end - bk.begin) / group->size();
          float* base = params + bk.begin;
          comm->AllGather(*group, base + group->rank_in_group * shard, base, shard,
                          transport::DataType::kFloat32,
                          ToMessage(me, step.iteration, CollectiveKind::kParamGather, c, b));
          ++posted;
        }
      }
    }
    msg.gather_collectives = posted;
    caf::anon_send(me, std::move(msg));
  });
}

StageActorHandle::behavior_type StageBehavior(StagePointer self, StageActorConfig config) {
  self->state.cfg = std::move(config);
  StageActorHandle me = self;
  self->state.pool = ActivationPool::Create(
      [me](int32_t channel) { caf::anon_send(me, SlotReleased{channel}); });
  return {
      [=](RunStageIteration& run) {
        auto& st = self->state;
        if (st.failed) return;
        if (st.active) {
          Fail(self, run.iteration, -1, "run",
               absl::StrCat("iteration ", run.iteration, " started while iteration ",
                            st.run.iteration, " is still running"));
          return;
        }
        st.run = std::move(run);
        st.active = true;
        st.finishing = false;
        st.norm_posted = false;
        st.next_post = 0;
        st.posted.assign(st.run.schedule.size(), 0);
        st.running.clear();
        st.finished_ops = 0;
        st.forwards_posted = st.weights_posted = 0;
        st.b_posted.clear();
        st.max_stashed = st.run.max_stashed;
        st.loss_sum = 0.0;
        st.num_tokens = 0.0;
        st.busy_seconds = 0.0;
        st.sync.assign(static_cast<size_t>(st.num_chunks()), ChunkSync{});
        {
          // (index of the chunk's last W, chunk); chunks without W sort last.
          std::vector<std::pair<size_t, int32_t>> last_w;
          for (int32_t c = 0; c < st.num_chunks(); ++c) {
            last_w.emplace_back(st.run.schedule.size(), c);
          }
          for (size_t i = 0; i < st.run.schedule.size(); ++i) {
            const scheduler::PipelineOp& op = st.run.schedule[i];
            if (op.kind == OpKind::kBackwardWeight && op.chunk >= 0 &&
                op.chunk < st.num_chunks()) {
              last_w[static_cast<size_t>(op.chunk)].first = i;
            }
          }
          std::sort(last_w.begin(), last_w.end());
          st.bucket_order.clear();
          for (const auto& [index, c] : last_w) st.bucket_order.push_back(c);
          st.next_bucket = 0;
        }
        st.w_left.assign(static_cast<size_t>(st.num_chunks()), 0);
        for (size_t i = 0; i < st.run.schedule.size(); ++i) {
          const scheduler::PipelineOp& op = st.run.schedule[i];
          if (op.chunk < 0 || op.chunk >= st.num_chunks()) {
            Fail(self, st.run.iteration, op.microbatch, scheduler::ToString(op),
                 absl::StrCat("the schedule names model chunk ", op.chunk,
                              " but this stage has ", st.num_chunks()));
            return;
          }
          if (op.kind == OpKind::kBackwardWeight) ++st.w_left[op.chunk];
        }
        st.start = Clock::now();
        st.cfg.program->ResetPeakActivationBytes();
        TryAdvance(self);
      },
      [=](MicroBatchData& d) {
        auto& st = self->state;
        if (!d.batch) {
          Fail(self, d.iteration, d.microbatch, "data", "micro-batch message without data");
          return;
        }
        st.batches[BatchKey{d.iteration, d.eval, d.microbatch}] = std::move(d.batch);
        TryAdvance(self);
      },
      [=](ActivationMessage& m) {
        auto& st = self->state;
        if (!m.tensor.data) {
          Fail(self, m.iteration, m.microbatch, "recv",
               absl::StrCat("empty tensor from rank ", m.from_rank));
          return;
        }
        const InboxKey key{m.iteration, m.eval, m.direction, m.chunk, m.microbatch};
        if (st.inbox.count(key) != 0) {
          Fail(self, m.iteration, m.microbatch, "recv",
               absl::StrCat("a second ",
                            m.direction == Direction::kForward ? "activation" : "gradient",
                            " for chunk ", m.chunk, " from rank ", m.from_rank));
          return;
        }
        st.inbox.emplace(key, std::move(m.tensor));
        TryAdvance(self);
      },
      [=](OpFinished& f) { OnOpFinished(self, f); },
      [=](const StealTimer& t) {
        auto& st = self->state;
        st.steal_timer_armed = false;
        if (st.active && t.iteration == st.run.iteration) TryAdvance(self);
      },
      [=](const SlotReleased& r) {
        auto& st = self->state;
        if (r.channel == 0 || r.channel == 1) --st.in_flight[r.channel];
        TryAdvance(self);
      },
      [=](GradsPosted& g) {
        auto& st = self->state;
        if (st.failed || g.iteration != st.run.iteration) return;
        st.sync[g.chunk].posted = g.num_collectives;
        OnChunkCollectiveDone(self, g.chunk);
      },
      [=](CollectiveDone& d) {
        auto& st = self->state;
        if (st.failed) return;
        if (!d.ok) {
          Fail(self, d.iteration, -1,
               d.kind == CollectiveKind::kParamGather ? "param all-gather"
               : d.kind == CollectiveKind::kEmbeddingGrad ? "embedding grad all-reduce"
                                                          : "grad reduce",
               d.error);
          return;
        }
        const bool for_this_step = d.kind == CollectiveKind::kParamGather
                                       ? d.iteration == st.gather_iteration
                                       : st.active && d.iteration == st.run.iteration;
        if (!for_this_step) {
          Fail(self, d.iteration, -1, "collective",
               absl::StrCat("completion of a collective of iteration ", d.iteration,
                            " arrived while at iteration ", st.run.iteration));
          return;
        }
        switch (d.kind) {
          case CollectiveKind::kEmbeddingGrad:
            st.sync[d.chunk].embedding_pending = false;
            PostBuckets(self, d.chunk);
            break;
          case CollectiveKind::kGradBucket:
            ++st.sync[d.chunk].done;
            OnChunkCollectiveDone(self, d.chunk);
            break;
          case CollectiveKind::kParamGather:
            ++st.gather_done;
            OnGatherDone(self);
            break;
        }
      },
      [=](GradNormFinished& g) {
        auto& st = self->state;
        if (st.failed) return;
        if (!st.active || !st.norm_posted || g.iteration != st.run.iteration) {
          Fail(self, g.iteration, -1, "grad norm",
               absl::StrCat("unexpected grad-norm result for iteration ", g.iteration,
                            " (running iteration ", st.run.iteration, ")"));
          return;
        }
        if (!g.error.empty()) {
          Fail(self, g.iteration, -1, "end of iteration (expert gradients, expert bias)", g.error);
          return;
        }
        StageIterationDone done = MakeReport(st);
        done.grad_norm_sq = g.grad_norm_sq;
        done.grads_finite = g.finite;
        done.moe_stats = std::move(g.moe_stats);
        AttachSpans(st, &done);
        st.active = false;
        st.finishing = false;
        self->send(st.cfg.coordinator, std::move(done));
      },
      [=](ApplyOptimizerStep& step) {
        if (self->state.failed) return;
        ApplyStep(self, step);
      },
      [=](StepFinished& f) {
        auto& st = self->state;
        if (st.failed) return;
        if (!f.ok) {
          Fail(self, f.iteration, -1, f.optimistic ? "optimistic optimizer step" : "optimizer",
               f.error);
          return;
        }
        if (f.optimistic) {  // post-validation: the final decision follows
          if (st.cfg.trace) {
            st.optimistic_span = TraceSpan{"optimizer (optimistic)", "optimizer", st.cfg.rank,
                                           f.start_us, f.duration_us, f.iteration, -1};
          }
          return;
        }
        st.step_finished = f;
        if (st.gather_pending) {
          st.gather_posted = f.gather_collectives;
          if (!st.cfg.overlap_param_gather) {
            st.step_reply_pending = true;  // report once the parameters are gathered
            OnGatherDone(self);
            return;
          }
        }
        ReplyStep(self);  // --overlap-param-gather: the next op waits for the gather
        if (st.gather_pending) OnGatherDone(self);
      },
      [=](ReplaceProgram& r) {
        auto& st = self->state;
        ProgramReplaced reply{st.cfg.rank, true, ""};
        if (st.active || st.gather_pending || !st.running.empty() || !r.program ||
            st.optimistic_iteration >= 0 ||
            static_cast<int>(r.optimizers.size()) != r.program->num_chunks() ||
            static_cast<int>(r.buckets.size()) != r.program->num_chunks()) {
          reply.ok = false;
          reply.error = "a new program arrived mid-iteration or without one optimizer and "
                        "bucket set per chunk";
        } else {
          st.cfg.program = std::move(r.program);
          st.cfg.optimizers = std::move(r.optimizers);
          st.cfg.buckets = std::move(r.buckets);
        }
        self->send(st.cfg.coordinator, std::move(reply));
      },
      [=](SaveCheckpointShard& save) {
        auto& st = self->state;
        if (st.gather_pending) {
          st.deferred_saves.push_back(std::move(save));
          return;
        }
        RunSave(self, std::move(save));
      },
  };
}

}  // namespace

std::string StageActorName(const StageActorConfig& c) {
  std::string name = absl::StrCat("stage ", c.pipeline_rank);
  if (c.context_parallel_size > 1) {
    absl::StrAppend(&name, " (context-parallel rank ", c.context_parallel_rank, ")");
  }
  if (c.data_parallel_size > 1 || c.tensor_parallel_size > 1) {
    absl::StrAppend(&name, " (");
    if (c.tensor_parallel_size > 1) {
      absl::StrAppend(&name, "tensor-parallel rank ", c.tensor_parallel_rank,
                      c.data_parallel_size > 1 ? ", " : "");
    }
    if (c.data_parallel_size > 1) {
      absl::StrAppend(&name, "data-parallel rank ", c.data_parallel_rank);
    }
    absl::StrAppend(&name, ")");
  }
  return name;
}

StageActorHandle SpawnStageActor(caf::actor_system& system, StageActorConfig config) {
  return system.spawn(StageBehavior, std::move(config));
}

}  // namespace mxmaca::actors
