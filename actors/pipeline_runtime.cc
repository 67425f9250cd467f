// actors/pipeline_runtime.cc: see pipeline_runtime.h.
#include "actors/pipeline_runtime.h"

#include <algorithm>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/scoped_actor.hpp>

#include "absl/strings/str_cat.h"
#include "actors/compute_pool.h"
#include "actors/control_plane.h"
#include "actors/remote_stage_link.h"
#include "actors/stage_actor.h"
#include "scheduler/schedule_validator.h"
#include "transport/collective_watchdog.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::actors {

absl::StatusOr<TrainingSummary> RunPipelineJob(std::vector<PipelineRank> ranks,
                                               const PipelineRuntimeOptions& options,
                                               std::shared_ptr<CoordinatorConfig> cc,
                                               DataActorConfig dc) {
  const int32_t p = options.pipeline_size, dp = options.data_parallel_size,
                tp = options.tensor_parallel_size, cp = options.context_parallel_size;
  // The within-stage width: TP x CP ranks per (stage, replica), TP fastest.
  const int32_t width = tp * cp;
  const int world = p * dp * width;
  transport::Communicator* const remote_comm = options.communicator;
  const size_t expected_ranks = remote_comm ? 1 : static_cast<size_t>(world);
  if (p < 1 || dp < 1 || tp < 1 || cp < 1 || ranks.size() != expected_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RunPipelineJob: ", ranks.size(), " ranks for pipeline ", p, " x data parallel ", dp,
        " x context parallel ", cp, " x tensor parallel ", tp,
        remote_comm ? " (multi-process: expected this process's one rank)" : ""));
  }
  for (size_t k = 0; k < ranks.size(); ++k) {
    const int i = remote_comm ? remote_comm->rank() : static_cast<int>(k);
    const PipelineRank& r = ranks[k];
    if (r.rank != i || r.pipeline_rank != i / (dp * width) ||
        r.data_parallel_rank != (i / width) % dp || r.tensor_parallel_rank != i % tp ||
        r.context_parallel_rank != (i / tp) % cp ||
        !r.program || static_cast<int>(r.optimizers.size()) != r.program->num_chunks() ||
        static_cast<int>(r.buckets.size()) != r.program->num_chunks()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RunPipelineJob: rank entry ", i, " is not rank ", i, " (pipeline ", i / (dp * width),
          ", data parallel ", (i / width) % dp, ", context parallel ", (i / tp) % cp,
          ", tensor parallel ", i % tp,
          ") with a program and one optimizer and bucket set per chunk"));
    }
  }
  // A StageActor runs exactly the op list it is given: prove the lists first.
  for (const auto* schedule : {&cc->train_schedule, &cc->eval_schedule}) {
    if (!schedule->has_value()) continue;
    const scheduler::PipelineSchedule& s = **schedule;
    const int32_t m = schedule == &cc->eval_schedule && cc->eval_num_microbatches > 0
                          ? cc->eval_num_microbatches
                          : cc->num_microbatches;
    if (s.num_stages != p || s.num_microbatches != m ||
        s.num_chunks != ranks[0].program->num_chunks()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule '", s.name, "' is for ", s.num_stages, " stages x ", s.num_chunks,
                       " chunks x ", s.num_microbatches, " micro-batches; the job has ", p, " x ",
                       ranks[0].program->num_chunks(), " x ", m));
    }
    absl::Status valid = scheduler::ValidateSchedule(s);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule '", s.name, "' rejected: ", valid.message()));
    }
  }
  absl::StatusOr<transport::RankGrid> grid = transport::RankGrid::Create(world, tp, p, cp);
  if (!grid.ok()) return grid.status();

  // The hub outlives the pool (strand tasks post collectives); the watchdog fails any
  // collective older than the timeout on every rank that posted it.
  std::shared_ptr<transport::InProcessHub> hub_holder = options.hub;
  if (remote_comm) {
    hub_holder = nullptr;  // the ranks' collectives go over `communicator`
  } else if (!hub_holder) {
    transport::InProcessHub::Options hub_options;
    hub_options.timeout = options.collective_timeout;
    hub_holder = std::make_shared<transport::InProcessHub>(world, hub_options);
  } else if (hub_holder->world_size() != world) {
    return absl::InvalidArgumentError(absl::StrCat("RunPipelineJob: the hub has ",
                                                   hub_holder->world_size(), " ranks, the job ",
                                                   world));
  }
  std::function<std::vector<absl::Status>(absl::Time)> check = options.check_timeouts;
  if (hub_holder) {
    transport::InProcessHub* hub = hub_holder.get();
    check = [hub](absl::Time now) { return hub->CheckTimeouts(now); };
  }
  if (!check) check = [](absl::Time) { return std::vector<absl::Status>{}; };
  transport::CollectiveWatchdog watchdog(
      options.watchdog_period, check,
      [](std::vector<absl::Status>) {});  // each stuck rank's actor reports its failure

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);  // CAF workers only route messages
  // "sharing": the worker blocks on its queue and wakes at once. The default work-stealing
  // policy sleeps 50 µs (+ timer slack) between polls once idle, which put ~100 µs on a
  // pipeline hop (tests/bench:actor_hop_bench, docs/BENCHMARKS.md).
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system system{cfg};
  // With TP a rank's op blocks in TP collectives: one thread per rank avoids starvation.
  // (CP ranks block in the ring the same way.)
  ComputePool pool((width > 1 || options.ranks_block_on_peers) && !remote_comm
                       ? world
                       : options.compute_threads);
  cc->pipeline_size = p;
  cc->data_parallel_size = dp;
  cc->tensor_parallel_size = width;  // the coordinator counts ranks per (stage, replica)
  CoordinatorActor coordinator = SpawnCoordinator(system, cc);

  auto peers = std::make_shared<PipelinePeers>();
  peers->by_rank.resize(static_cast<size_t>(world));
  if (remote_comm) {
    cc->control =
        std::make_shared<ControlPlane>(remote_comm, world, ControlPlane::ControlGroupId(world));
  }
  for (PipelineRank& r : ranks) {
    absl::StatusOr<transport::RankView> view = grid->ForRank(r.rank);
    if (!view.ok()) return view.status();
    StageActorConfig sc;
    sc.rank = r.rank;
    sc.pipeline_rank = r.pipeline_rank;
    sc.pipeline_size = p;
    sc.data_parallel_rank = r.data_parallel_rank;
    sc.data_parallel_size = dp;
    sc.tensor_parallel_rank = r.context_parallel_rank * tp + r.tensor_parallel_rank;
    sc.tensor_parallel_size = width;
    sc.context_parallel_rank = r.context_parallel_rank;
    sc.context_parallel_size = cp;
    sc.reset_attention_mask = options.reset_attention_mask;
    sc.exec = options.exec;
    sc.coordinator = coordinator;
    sc.peers = peers;
    sc.strand = pool.MakeStrand();
    sc.program = r.program;
    sc.optimizers = r.optimizers;
    sc.comm = remote_comm ? remote_comm : hub_holder->ForRank(r.rank);
    if (dp * cp > 1) sc.data_parallel_group = view->data_parallel_group(cp > 1);
    sc.embedding_group = view->embedding_group();
    sc.buckets = r.buckets;
    sc.distributed_optimizer = options.distributed_optimizer;
    sc.overlap_grad_reduce = options.overlap_grad_reduce;
    sc.overlap_param_gather = options.overlap_param_gather;
    sc.calculate_per_token_loss = options.calculate_per_token_loss;
    sc.trace = options.trace;
    if (r.pipeline_rank == options.slowdown_stage) {
      sc.slowdown_factor = options.slowdown_factor;
      sc.slowdown_from_iteration = options.slowdown_from_iteration;
    }
    peers->by_rank[static_cast<size_t>(r.rank)] = SpawnStageActor(system, std::move(sc));
  }

  // The ranks holding the first and the last virtual stage read the data (both on rank 0
  // in ZB-V's V).
  const scheduler::Placement placement =
      cc->train_schedule ? cc->train_schedule->placement : scheduler::Placement::kInterleaved;
  const int32_t chunks = ranks[0].program->num_chunks();
  const int32_t last_stage = scheduler::StageChunkOf(p * chunks - 1, p, placement).stage;
  if (remote_comm) {
    // This rank's activations arrive from the pipeline ranks holding the virtual stages
    // next to its own (same data- and tensor-parallel coordinates).
    const PipelineRank& me = ranks[0];
    std::vector<int> senders;
    for (int32_t k = 0; k < p * chunks; ++k) {
      if (scheduler::StageChunkOf(k, p, placement).stage != me.pipeline_rank) continue;
      for (int32_t n : {k - 1, k + 1}) {
        if (n < 0 || n >= p * chunks) continue;
        const int32_t stage = scheduler::StageChunkOf(n, p, placement).stage;
        const int rank = (stage * dp + me.data_parallel_rank) * width +
                         me.context_parallel_rank * tp + me.tensor_parallel_rank;
        if (stage != me.pipeline_rank &&
            std::find(senders.begin(), senders.end(), rank) == senders.end()) {
          senders.push_back(rank);
        }
      }
    }
    StageActorHandle local = peers->by_rank[static_cast<size_t>(me.rank)];
    const int32_t my_rank = me.rank;
    peers->remote = RemoteStageLinks::Create(
        remote_comm, world, ControlPlane::PipelineGroupId(world),
        [local](ActivationMessage m) { caf::anon_send(local, std::move(m)); },
        [coordinator, my_rank](const std::string& message) {
          caf::anon_send(coordinator, StageFailed{absl::StrCat("pipeline link of rank ", my_rank),
                                                  -1, -1, "p2p", message});
        });
    peers->remote->Start(senders);
  }
  dc.recipients.assign(static_cast<size_t>(dp), {});
  for (const PipelineRank& r : ranks) {
    const bool reads_data = r.pipeline_rank == 0 || r.pipeline_rank == last_stage ||
                            options.reset_attention_mask;
    if (reads_data) dc.recipients[r.data_parallel_rank].push_back(peers->by_rank[r.rank]);
  }
  dc.coordinator = coordinator;
  cc->stages = peers->by_rank;
  cc->data = SpawnDataActor(system, dc);

  TrainingSummary summary;
  bool got = false;
  std::string caf_error;
  {
    caf::scoped_actor self{system};
    self->request(coordinator, caf::infinite, RunTraining{})
        .receive(
            [&](const TrainingSummary& s) {
              summary = s;
              got = true;
            },
            [&](caf::error& err) { caf_error = system.render(err); });
    self->send_exit(caf::actor_cast<caf::actor>(coordinator), caf::exit_reason::user_shutdown);
    self->send_exit(caf::actor_cast<caf::actor>(cc->data), caf::exit_reason::user_shutdown);
    for (const auto& a : peers->by_rank) {
      if (a) self->send_exit(caf::actor_cast<caf::actor>(a), caf::exit_reason::user_shutdown);
    }
  }
  watchdog.Stop();
  if (peers->remote) peers->remote->Stop();
  cc->control.reset();
  cc->stages.clear();
  peers->by_rank.clear();
  cc->data = nullptr;
  if (!got) {
    return absl::InternalError(absl::StrCat("coordinator ended without a summary: ", caf_error));
  }
  return summary;
}

}  // namespace mxmaca::actors
