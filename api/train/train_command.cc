// api/train/train_command.cc: see train_command.h.
#include "api/train/train_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include "actors/control_plane.h"
#include "actors/coordinator.h"
#include "actors/data_actor.h"
#include "actors/gpt_stage_program.h"
#include "actors/pipeline_runtime.h"
#include "actors/stage_checkpoint.h"
#include "api/args/flags_doc.h"
#include "api/args/megatron_args.h"
#include "api/data_config/gpt_data_config.h"
#include "api/train/checkpoint_args.h"
#include "api/train/cp_setup.h"
#include "api/train/device_setup.h"
#include "api/train/exit_signal.h"
#include "api/train/gemm_peak.h"
#include "api/train/heartbeat.h"
#include "api/train/honoured_flags.h"
#include "api/train/megatron_format.h"
#include "api/train/memory_admission.h"
#include "api/train/metrics_setup.h"
#include "api/train/moe_setup.h"
#include "api/train/parallel_setup.h"
#include "api/train/params_norm.h"
#include "api/train/process_job.h"
#include "api/train/rebalance.h"
#include "api/train/resume_rules.h"
#include "api/train/save_guard.h"
#include "api/train/stage_ranks.h"
#include "api/train/synthetic_train.h"
#include "api/train/train_setup.h"
#include "base/status_macros.h"
#include "data/gpt_dataset_builder.h"
#include "data/tokenizer_factory.h"
#include "layers/context_parallel/memory_cap.h"
#include "layers/device/cuda_device_kernels.h"
#include "layers/device/emulated_device_kernels.h"
#include "layers/flops.h"
#include "layers/gpt_stage.h"
#include "layers/optimizer.h"
#include "transport/inprocess_communicator.h"

namespace mxmaca::api {
namespace {

void PrintLine(const std::string& line) {
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

// kWaitReportInterval: how often a process waiting for its peers says so (issue 22).
constexpr absl::Duration kWaitReportInterval = absl::Seconds(10);

// PrintWaitLine: a progress line of a wait for peers, on stderr (every rank: each waits for
// its own reasons), e.g. "mxmaca train: rank 1: rendezvous at ...: waiting for ranks [2] ...".
void PrintWaitLine(int rank, const std::string& line) {
  std::fprintf(stderr, "mxmaca train: rank %d: %s\n", rank, line.c_str());
  std::fflush(stderr);
}

// Creates `dir` if needed and checks that a file can be created in it.
absl::Status CheckWritableDirectory(const std::string& dir, const char* flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", dir, ": cannot create the directory",
                                                   ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  const std::string probe = dir + "/.mxmaca_write_probe";
  FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", dir, ": the directory is not writable"));
  }
  std::fclose(f);
  std::filesystem::remove(probe, ec);
  return absl::OkStatus();
}

absl::Status CheckSupportedLayout(const MegatronArgs& a) {
  // --expert-model-parallel-size: api/train/moe_setup.cc says which layouts run.
  return CheckContextParallelArgs(a);  // --context-parallel-size: cp_setup.h
}

// CheckDynamicPipeline: the dynamic policy lets each stage actor run a later op while the
// next one waits for its input, deciding alone; the TP ranks of a stage would then post
// their TP collectives (in F, B, and with SP in W) in different orders, which the
// transport reports as a mismatch. So it runs with tensor parallelism size 1 only.
absl::Status CheckDynamicPipeline(const MegatronArgs& a) {
  if (!a.dynamic_pipeline || a.tensor_model_parallel_size == 1) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "--dynamic-pipeline with --tensor-model-parallel-size ", a.tensor_model_parallel_size,
      ": the TP ranks of a stage would choose their ops independently, and their collectives "
      "must be posted in the same order; drop --dynamic-pipeline (the static schedules, "
      "zero-bubble included, run with TP)"));
}

// Whether `dir` holds a published checkpoint directory (iter_XXXXXXX) without the tracker
// file. Temp dirs of saves that never committed (iter_XXXXXXX.tmp-*, left by a process
// killed while saving) do not count: with nothing else there, there is no checkpoint and
// a restarted job starts from scratch, as after a crash before the first save.
bool HasCheckpointDebris(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter_", 0) == 0 && name.find(".tmp") == std::string::npos) return true;
  }
  return false;
}

struct ResumePoint {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  int64_t skipped_iterations = 0;
  std::optional<RestoredScheduler> scheduler;  // none: start the schedule at step 0
};

// kExitOnMissingCheckpoint: OpenCheckpointToLoad's Cancelled message when
// --exit-on-missing-checkpoint found no checkpoint (the run then ends with status 0).
constexpr char kExitOnMissingCheckpoint[] = "--exit-on-missing-checkpoint: no checkpoint";

// OpenCheckpointToLoad: the checkpoint --load (with --ckpt-step and the non-persistent
// flags) names, opened (resume_rules.h LocateCheckpoint). Megatron's behaviour: a --load
// directory without any checkpoint starts from scratch (with a notice); a half-written or
// unreadable one is an error. A Megatron legacy checkpoint (iter_*/mp_rank_*/
// model_optim_rng.pt) is first staged as an MXMACA checkpoint in a temporary directory
// (megatron_format.h StageMegatronLoad, checked against `model`); `staged` then holds the
// handle whose release removes that directory: keep it until the reader is closed.
absl::StatusOr<std::optional<actors::checkpoint::CheckpointReader>> OpenCheckpointToLoad(
    const MegatronArgs& a, const layers::GptConfig& model, const nlohmann::json& checkpoint_args,
    const std::function<void(const std::string&)>& print, std::shared_ptr<void>* staged) {
  if (!a.load) return std::optional<actors::checkpoint::CheckpointReader>();
  if (actors::checkpoint::megatron::IsMegatronLegacyCheckpoint(*a.load)) {
    MXMACA_ASSIGN_OR_RETURN(std::string open_dir,
                            StageMegatronLoad(*a.load, model, checkpoint_args, print));
    staged->reset(static_cast<void*>(nullptr), [open_dir](void*) {
      std::error_code ec;
      std::filesystem::remove_all(open_dir, ec);
    });
    MXMACA_ASSIGN_OR_RETURN(actors::checkpoint::CheckpointReader reader,
                            actors::checkpoint::CheckpointReader::Open(open_dir));
    return std::optional<actors::checkpoint::CheckpointReader>(std::move(reader));
  }
  std::vector<std::string> notices;
  absl::StatusOr<std::optional<CheckpointToLoad>> where = LocateCheckpoint(a, &notices);
  for (const std::string& n : notices) print(n);
  if (!where.ok()) return where.status();
  if (!*where) {
    const std::string latest = *a.load + "/latest_checkpointed_iteration.txt";
    if (!HasCheckpointDebris(*a.load)) {
      print(absl::StrCat(" WARNING: could not find the metadata file ", latest,
                         "; will not load any checkpoints and will start from random"));
      if (a.exit_on_missing_checkpoint) {
        // Megatron's load_checkpoint: a message and sys.exit() (status 0).
        print(">> '--exit-on-missing-checkpoint' set ... exiting. <<");
        return absl::CancelledError(kExitOnMissingCheckpoint);
      }
      return std::optional<actors::checkpoint::CheckpointReader>();
    }
    // Published iter_* directories without a tracker: the reader names the problem.
    MXMACA_ASSIGN_OR_RETURN(actors::checkpoint::CheckpointReader reader,
                            actors::checkpoint::CheckpointReader::Open(*a.load));
    return std::optional<actors::checkpoint::CheckpointReader>(std::move(reader));
  }
  print(absl::StrFormat(" loading checkpoint from %s at iteration %d", (*where)->dir,
                        (*where)->iteration));
  MXMACA_ASSIGN_OR_RETURN(
      actors::checkpoint::CheckpointReader reader,
      actors::checkpoint::CheckpointReader::Open((*where)->dir, (*where)->iteration));
  return std::optional<actors::checkpoint::CheckpointReader>(std::move(reader));
}

// CheckpointRngSeed: the seed the checkpoint's run drew its randomness from (state.rng.seed,
// or for older checkpoints the stored model's seed). Randomness is a function of (seed,
// name, iteration, micro-batch, ...), so the seed is the whole RNG state.
std::optional<int64_t> CheckpointRngSeed(const actors::checkpoint::CheckpointReader& reader) {
  const nlohmann::json& st = reader.state();
  if (st.contains("rng") && st["rng"].is_object() && st["rng"].contains("seed") &&
      st["rng"]["seed"].is_number_integer()) {
    return st["rng"]["seed"].get<int64_t>();
  }
  const nlohmann::json& args = reader.args();
  if (args.contains("model") && args["model"].contains("seed") &&
      args["model"]["seed"].is_number_integer()) {
    return args["model"]["seed"].get<int64_t>();
  }
  return std::nullopt;
}

// Loads the opened checkpoint into the model/optimizer, as Megatron's load_checkpoint:
// weights always; unless --finetune the iteration and consumed samples, and unless also
// --no-load-optim the Adam state and the scheduler (resume_rules.h).
absl::StatusOr<ResumePoint> MaybeLoad(const MegatronArgs& a, const layers::GptConfig& model,
                                      const layers::OptimizerParamSchedulerConfig& sched_flags,
                                      const actors::checkpoint::CheckpointReader* opened,
                                      std::vector<StageRank>& ranks,
                                      const std::function<void(const std::string&)>& print) {
  ResumePoint rp;
  if (opened == nullptr) return rp;
  const actors::checkpoint::CheckpointReader& reader = *opened;
  const std::string dir = *a.load;
  MXMACA_RETURN_IF_ERROR(CheckModelMatchesCheckpoint(model, reader.args(), reader.dir()));
  MXMACA_RETURN_IF_ERROR(reader.VerifyChecksums());  // silent data corruption -> error
  for (StageRank& r : ranks) {
    for (int c = 0; c < r.program->num_chunks(); ++c) {
      MXMACA_RETURN_IF_ERROR(actors::LoadStageParameters(reader, r.program->parameters(c)));
      std::vector<std::string> missing;
      MXMACA_RETURN_IF_ERROR(actors::LoadPersistentBuffers(
          reader, r.program->persistent_buffers(c), /*required=*/false, &missing));
      for (const std::string& name : missing) {
        print(absl::StrCat(" WARNING: checkpoint ", reader.dir(), " has no ", name,
                           "; it starts from zeros"));
      }
    }
  }
  const nlohmann::json& st = reader.state();
  if (!a.finetune) {
    try {
      rp.iteration = st.at("iteration").get<int64_t>();
      rp.consumed_train_samples = st.at("consumed_train_samples").get<int64_t>();
      rp.consumed_valid_samples = st.at("consumed_valid_samples").get<int64_t>();
      rp.skipped_iterations = st.at("skipped_iterations").get<int64_t>();
      if (a.no_load_optim) {
        // Megatron loads the scheduler inside the optimizer branch: with --no-load-optim
        // neither is loaded, and the schedule starts again from step 0.
        print(" > --no-load-optim: the optimizer state and the learning-rate schedule are not "
              "loaded (the schedule starts from step 0, as Megatron's)");
      } else if (!st.contains("opt_param_scheduler") && !st.value("has_optimizer_state", true)) {
        // Weights only (mxmaca convert --from hf): like Megatron's release checkpoints, no
        // optimizer or schedule to resume; training starts at step 0 with these weights.
        print(absl::StrCat(" > ", reader.dir(), " holds weights only (",
                           st.value("source", std::string("no optimizer state")),
                           "): Adam and the learning-rate schedule start from step 0, as "
                           "Megatron does for a release checkpoint"));
      } else {
        std::vector<std::string> log;
        MXMACA_ASSIGN_OR_RETURN(RestoredScheduler restored,
                                RestoreSchedulerState(st.at("opt_param_scheduler"), sched_flags,
                                                      a, reader.dir(), &log));
        for (const std::string& line : log) print(line);
        rp.scheduler = std::move(restored);
      }
      if (!a.no_load_optim && !st.value("has_optimizer_state", true)) {
        // A converted checkpoint (Megatron's, actors/checkpoint/megatron) without optimizer
        // state that maps onto this model.
        if (st.contains("opt_param_scheduler")) {
          print(" WARNING: the checkpoint has no optimizer state that maps; Adam starts from "
                "zero");
        }
      } else if (!a.no_load_optim) {
        for (StageRank& r : ranks) {
          for (int c = 0; c < r.program->num_chunks(); ++c) {
            MXMACA_RETURN_IF_ERROR(actors::LoadOptimizerState(reader, *r.optimizers[c],
                                                              r.program->parameters(c)));
            r.optimizers[c]->set_step(st.at("optimizer_step").get<int64_t>());
          }
        }
      }
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", reader.dir(), "/metadata.json state: ", e.what()));
    }
  }
  print(absl::StrFormat("  successfully loaded checkpoint from %s at iteration %d", dir,
                        a.finetune ? 0 : reader.iteration()));
  return rp;
}

// MakeShardWriter: what each stage actor writes into a checkpoint. Parameters come from
// DP replica 0 only (the replicas hold the same values); Adam state from replica 0, or
// from every replica with the distributed optimizer (each writes its pieces). Every TP
// rank writes its shards; a tensor replicated across TP ranks (norms, row-parallel
// biases) is written by TP rank 0 only, and the last stage's copy of tied word embeddings
// not at all (the first stage's is the tensor). Shards are named "stage<p>" (pipeline rank
// p, chunk 0, replica 0, TP rank 0; a single-device checkpoint is "stage0"), with
// "_chunk<c>" / "_tp<t>" / "_dp<r>" appended otherwise.
std::function<absl::Status(const actors::StageIdentity&, actors::StageProgram&,
                           const std::vector<std::shared_ptr<layers::AdamWOptimizer>>&,
                           actors::checkpoint::CheckpointWriter&)>
MakeShardWriter(bool distributed_optimizer, bool save_optimizer) {
  return [distributed_optimizer, save_optimizer](
             const actors::StageIdentity& id, actors::StageProgram& program,
             const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers,
             actors::checkpoint::CheckpointWriter& writer) -> absl::Status {
    // Expert parallelism across DP ranks: a rank's routed experts (and their Adam state)
    // are written by expert-data-parallel rank 0, the rest by DP replica 0.
    const int edp = program.num_chunks() > 0 ? program.expert_data_parallel_rank(0) : -1;
    const bool parameters = id.data_parallel_rank == 0 || edp == 0;
    // --no-save-optim: no Adam state (Megatron's save_checkpoint without 'optimizer').
    const bool optimizer_state = save_optimizer && (distributed_optimizer || parameters);
    if (!parameters && !optimizer_state) return absl::OkStatus();
    for (int c = 0; c < program.num_chunks(); ++c) {
      layers::ParameterStore& store = program.parameters(c);
      actors::StageShardOptions options;
      options.parameters = parameters;
      options.optimizer_state = optimizer_state;
      options.skip_parameter = [&program, &store, c, &id, edp](const layers::ParameterInfo& info) {
        absl::StatusOr<int> index = store.Index(info.spec.name);
        if (!index.ok()) return false;
        if (program.is_tied_copy(c, *index)) return true;
        if (edp >= 0 && program.is_expert_shard(c, *index)) return edp != 0;
        if (edp >= 0 && id.data_parallel_rank != 0) return true;  // DP replica 0 writes it
        // Replicated across TP ranks: TP rank 0 writes it.
        return id.tensor_parallel_rank != 0 && !program.counts_toward_grad_norm(c, *index);
      };
      std::string name = absl::StrCat("stage", id.pipeline_rank);
      if (c > 0) absl::StrAppend(&name, "_chunk", c);
      if (id.tensor_parallel_rank > 0) absl::StrAppend(&name, "_tp", id.tensor_parallel_rank);
      if (id.data_parallel_rank > 0) absl::StrAppend(&name, "_dp", id.data_parallel_rank);
      MXMACA_RETURN_IF_ERROR(
          actors::WriteStageShard(writer, name, store, optimizers[c].get(), options));
      // Persistent buffers ("buffers/<name>", e.g. the MoE expert bias): replicated, so
      // written by TP rank 0 of DP replica 0.
      if (id.data_parallel_rank == 0 && id.tensor_parallel_rank == 0) {
        std::vector<actors::checkpoint::TensorShardView> views;
        for (const auto& [buffer, values] : program.persistent_buffers(c)) {
          const int64_t n = static_cast<int64_t>(values->size());
          views.push_back({"buffers/" + buffer, {n}, {0}, {n}, values->data()});
        }
        if (!views.empty()) MXMACA_RETURN_IF_ERROR(writer.WriteShard(name + "_buffers", views));
      }
    }
    return absl::OkStatus();
  };
}

}  // namespace

namespace {

absl::StatusOr<actors::TrainingSummary> TrainUnguarded(
    const std::vector<std::string>& argv, std::function<void(const std::string&)> print,
    std::function<void(const actors::IterationLogRecord&)> on_iteration) {
  if (!print) print = PrintLine;
  // (all output below goes through `print`)
  MXMACA_ASSIGN_OR_RETURN(MegatronArgs args, ParseMegatronArgs(argv));
  if (args.help) {
    print(RenderTrainUsage());
    return actors::TrainingSummary{};
  }
  MXMACA_RETURN_IF_ERROR(CheckHonouredFlags(args));
  MXMACA_RETURN_IF_ERROR(CheckCkptFormat(args, argv));  // megatron_format.h
  MXMACA_RETURN_IF_ERROR(CheckDeviceArgs(args));  // --device: device_setup.h
  // --synthetic-op-ms: the same pipeline layout on synthetic stages (synthetic_train.h).
  if (args.synthetic_op_ms) return TrainSynthetic(std::move(args), print, std::move(on_iteration));
  // One process of a multi-process job (started by mxmaca launch, torchrun, srun, mpirun)?
  // Then this process holds one rank, and rank 0 writes the log (process_job.h).
  MXMACA_ASSIGN_OR_RETURN(std::optional<transport::ucx::LaunchEnv> launch,
                          DetectProcessJob(args.world_size_flag.value_or(0)));
  if (launch && launch->rank != 0) print = [](const std::string&) {};
  for (const std::string& n : args.notices) print(n);
  const int64_t model_parallel =
      args.tensor_model_parallel_size * args.pipeline_model_parallel_size * args.context_parallel_size;
  const int64_t world_size =
      launch ? launch->world_size : args.world_size_flag.value_or(model_parallel);
  const bool threads_given = args.num_threads.has_value();
  if (world_size < 1 || world_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world-size ", world_size, ": expected 1 ... 4096 in-process ranks"));
  }
  // Resume rules (resume_rules.h); --use-checkpoint-args before validation, as Megatron's
  // parse_and_validate_args does.
  MXMACA_RETURN_IF_ERROR(CheckResumeArgs(args, launch.has_value()));
  if (args.use_checkpoint_args) {
    std::vector<std::string> lines;
    absl::Status loaded = LoadArgsFromCheckpoint(&args, &lines);
    for (const std::string& line : lines) print(line);
    MXMACA_RETURN_IF_ERROR(loaded);
  }
  MXMACA_RETURN_IF_ERROR(ValidateAndDeriveArgs(&args, static_cast<int>(world_size)));
  if (launch && !threads_given) {
    // The host's cores are shared by its processes: each takes cores / LOCAL_WORLD_SIZE
    // threads (the model's layer ops and the runtime's), unless --num-threads says.
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    int per_host = 1;
    if (local != nullptr && absl::SimpleAtoi(local, &per_host) && per_host > 1) {
      args.num_threads = std::max<int64_t>(1, *args.num_threads / per_host);
    }
  }
  MXMACA_RETURN_IF_ERROR(CheckSupportedLayout(args));
  MXMACA_RETURN_IF_ERROR(CheckDynamicPipeline(args));
  std::optional<ProcessJob> process_job;
  std::unique_ptr<Heartbeat> heartbeat;  // after process_job: stopped before it is destroyed
  if (launch) {
    if (args.trace_file || args.rebalance_threshold || args.force_layer_move) {
      return absl::UnimplementedError(
          "--trace-file, --rebalance-threshold and --force-layer-move run in one process only "
          "(use --world-size N without a launcher)");
    }
    if (args.log_params_norm || args.log_num_zeros_in_grad) {
      return absl::UnimplementedError(absl::StrCat(
          args.log_params_norm ? "--log-params-norm" : "--log-num-zeros-in-grad",
          " runs in one process only (summed over the ranks of this process); use "
          "--world-size N without a launcher, or drop the flag"));
    }
    const absl::Duration timeout = absl::Minutes(args.distributed_timeout_minutes);
    // Every 10 s while ranks are missing, each process says which and how long it waits.
    const int rank = launch->rank;
    MXMACA_ASSIGN_OR_RETURN(
        ProcessJob joined, JoinProcessJob(*launch, timeout, timeout, [rank](const std::string& line) {
          PrintWaitLine(rank, line);
        }));
    process_job = std::move(joined);
    print(absl::StrCat(" > joined a job of ", launch->world_size,
                       " processes over UCX, one rank each (", launch->ToString(), ")"));
    // A hung peer (alive, silent) ends the job within ~8 s instead of the collective
    // timeout (heartbeat.h).
    const int me = launch->rank;
    heartbeat = Heartbeat::Start(
        process_job->comm.get(), launch->world_size,
        actors::ControlPlane::HeartbeatGroupId(launch->world_size), absl::Seconds(1),
        absl::Seconds(8), [me](int lost, const std::string& reason) {
          std::fprintf(stderr, "mxmaca train: error: rank %d lost rank %d: %s; exiting\n", me,
                       lost, reason.c_str());
          std::fflush(stderr);
          std::_Exit(1);
        });
  }

  // A --save directory that cannot be written fails now, not at the first save; one that
  // another live job writes is refused, naming it (save_guard.h).
  std::unique_ptr<actors::checkpoint::SaveLock> save_lock;
  if (args.save) {
    MXMACA_RETURN_IF_ERROR(CheckWritableDirectory(*args.save, "--save"));
    MXMACA_ASSIGN_OR_RETURN(
        save_lock,
        GuardSaveDirectory(*args.save, process_job ? process_job->comm.get() : nullptr,
                           static_cast<int>(world_size),
                           actors::ControlPlane::StartupGroupId(static_cast<int>(world_size)),
                           absl::Minutes(args.distributed_timeout_minutes), print, [&] {
                             if (!process_job) return;
                             for (const std::string& line : process_job->comm->WaitingReports(
                                      absl::Now(), kWaitReportInterval)) {
                               PrintWaitLine(process_job->env.rank, line);
                             }
                           },
                           kWaitReportInterval, [&] {
                             if (heartbeat) heartbeat->Quiesce();
                           }));
  }

  // Tokenizer (vocabulary size and end-of-document id), as Megatron's build_tokenizer.
  const std::string tokenizer_type = args.tokenizer_type.value_or("GPT2BPETokenizer");
  int64_t vocab_size = 0;
  int32_t eod = 0;
  if (tokenizer_type == "NullTokenizer") {
    if (!args.vocab_size) {
      return absl::InvalidArgumentError("--tokenizer-type NullTokenizer needs --vocab-size");
    }
    // Megatron's NullTokenizer: ids are the text; eod = vocab_size - 1 is counted in.
    vocab_size = *args.vocab_size + 1;
    eod = static_cast<int32_t>(*args.vocab_size);
  } else {
    // As Megatron: the padded vocabulary comes from the tokenizer.py tokenizer that
    // set_global_variables always builds (megatron/training/global_vars.py), the eod
    // from the one pretrain_gpt.py hands the datasets (megatron/core/tokenizers unless
    // --legacy-tokenizer). They differ only for SentencePieceTokenizer (tokenizer.py
    // appends <CLS> <SEP> <EOD> <MASK> ... after the pieces).
    const data::TokenizerSpec spec = TokenizerSpecFromArgs(args);
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer, data::BuildTokenizer(spec));
    eod = tokenizer->eod();
    vocab_size = tokenizer->vocab_size();
    if (!spec.legacy_tokenizer) {
      data::TokenizerSpec legacy = spec;
      legacy.legacy_tokenizer = true;
      MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> padded_from,
                              data::BuildTokenizer(legacy));
      vocab_size = std::max(vocab_size, padded_from->vocab_size());
    }
    if (eod < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tokenizer-type ", tokenizer_type, " --tokenizer-model ",
          args.tokenizer_model.value_or(""),
          ": the tokenizer has no end-of-document token (HuggingFaceTokenizer: no eos_token "
          "in tokenizer_config.json or special_tokens_map.json)"));
    }
  }

  // Model, placement, schedules (parallel_setup.h) and the ranks' state.
  MXMACA_ASSIGN_OR_RETURN(layers::GptConfig model, GptConfigFromArgs(args, vocab_size));
  // Megatron's _vocab_size_with_padding log line.
  print(absl::StrCat(" > padded vocab (size: ", model.vocab_size, ") with ",
                     model.padded_vocab_size - model.vocab_size, " dummy tokens (new size: ",
                     model.padded_vocab_size, ")"));
  // The checkpoint to resume from, opened before the ranks are built: its RNG state (the
  // seed of every random draw) replaces --seed's unless --no-load-rng or --finetune, as
  // Megatron restores its generators (the data order stays --seed's in both).
  std::shared_ptr<void> staged_megatron_load;  // removes a staged Megatron checkpoint
  absl::StatusOr<std::optional<actors::checkpoint::CheckpointReader>> to_load =
      OpenCheckpointToLoad(args, model, CheckpointArgsJson(argv, args, model), print,
                           &staged_megatron_load);
  if (absl::IsCancelled(to_load.status()) &&
      to_load.status().message() == kExitOnMissingCheckpoint) {
    return actors::TrainingSummary{};  // ok, nothing trained
  }
  MXMACA_ASSIGN_OR_RETURN(std::optional<actors::checkpoint::CheckpointReader> opened,
                          std::move(to_load));
  if (opened && !args.finetune && !args.no_load_rng) {
    const std::optional<int64_t> seed = CheckpointRngSeed(*opened);
    if (seed && static_cast<uint64_t>(*seed) != model.seed) {
      print(absl::StrCat(" > RNG state from the checkpoint: dropout seed ", *seed, " (--seed ",
                         args.seed, "; --no-load-rng keeps --seed's)"));
      model.seed = static_cast<uint64_t>(*seed);
    }
  }
  MXMACA_ASSIGN_OR_RETURN(ParallelSetup parallel, BuildParallelSetup(args, model));
  print(parallel.Describe());
  print("building GPT model ...");
  // The ranks' in-process communicator: the layers' tensor-parallel collectives and the
  // runtime's data-parallel / embedding ones.
  // Multi-process: this process's rank only, over UCX.
  transport::InProcessHub::Options hub_options;
  hub_options.timeout = absl::Minutes(args.distributed_timeout_minutes);
  std::shared_ptr<transport::InProcessHub> hub;
  if (!process_job) {
    hub = std::make_shared<transport::InProcessHub>(static_cast<int>(world_size), hub_options);
  }
  StageRankOptions rank_options;
  if (process_job) {
    rank_options.only_rank = process_job->env.rank;
    rank_options.communicator = process_job->comm.get();
    // The hierarchical MoE dispatcher's node: the processes of this host (torchrun's and
    // mxmaca launch's LOCAL_WORLD_SIZE).
    int32_t local_world = 0;
    const char* lws = std::getenv("LOCAL_WORLD_SIZE");
    if (lws != nullptr && absl::SimpleAtoi(lws, &local_world) && local_world > 0) {
      rank_options.ranks_per_node = local_world;
    }
  }
  rank_options.data_parallel_size = parallel.data_parallel_size;
  rank_options.tensor_parallel_size = parallel.tensor_parallel_size;
  rank_options.context_parallel_size = static_cast<int32_t>(args.context_parallel_size);
  rank_options.sequence_parallel = args.sequence_parallel;
  rank_options.hub = hub.get();
  rank_options.distributed_optimizer = args.use_distributed_optimizer;
  rank_options.bucket_elements = args.ddp_bucket_size.value_or(0);
  rank_options.adam = layers::AdamWOptions{static_cast<float>(args.adam_beta1),
                                           static_cast<float>(args.adam_beta2),
                                           static_cast<float>(args.adam_eps)};
  rank_options.reset_attention_mask = args.reset_attention_mask;
  MXMACA_ASSIGN_OR_RETURN(rank_options.device, ParseDevice(args.device));
  rank_options.gpu = launch ? launch->local_rank : 0;  // LOCAL_RANK, SLURM_LOCALID, ...
  rank_options.num_microbatches = parallel.num_microbatches;
  rank_options.micro_batch_size = args.micro_batch_size.value_or(1);
  rank_options.gradient_accumulation_fusion = args.gradient_accumulation_fusion;
  // Training state on the device (stage_ranks.h state_on_device), unless offloaded or a
  // feature reads or writes the host stores during training.
  rank_options.state_on_device = rank_options.device != Device::kCpu &&
                                 !args.optimizer_cpu_offload && !args.optimizer_post_validation &&
                                 !args.rebalance_threshold && !args.force_layer_move &&
                                 !args.log_params_norm && !args.log_num_zeros_in_grad;
  {
    std::string graphs_notice;
    MXMACA_ASSIGN_OR_RETURN(rank_options.cuda_graphs,
                            CudaGraphConfigFor(args, rank_options.device, &graphs_notice));
    if (!graphs_notice.empty()) print(absl::StrCat(" > ", graphs_notice));
  }
  if (args.memory_cap_per_shard) {
    MXMACA_ASSIGN_OR_RETURN(rank_options.memory_cap_bytes,
                            layers::cp::ParseMemoryCap(*args.memory_cap_per_shard));
  }
  // Memory admission (memory_admission.h): the start-up estimate of this process's ranks
  // against what it may use, before the parameters and optimizer state are allocated.
  const ProcessMemoryEstimate memory_estimate = EstimateProcessMemory(
      parallel, model, args, process_job ? process_job->env.rank : -1,
      rank_options.device == Device::kCuda);
  const MemoryLimit host_limit = HostMemoryLimit();
  MXMACA_ASSIGN_OR_RETURN(const bool admission, MemoryAdmissionEnabled(args));
  if (admission) {
    std::optional<MemoryLimit> device_limit;
    if (rank_options.device == Device::kCuda) {
      absl::StatusOr<int64_t> free_bytes =
          layers::device::CudaDeviceKernels::FreeMemoryBytes(rank_options.gpu);
      if (free_bytes.ok()) {
        device_limit = MemoryLimit{*free_bytes,
                                   absl::StrCat("cuda device ", rank_options.gpu, " free memory")};
      }  // no GPU: MakeDeviceKernels reports it below
    }
    MXMACA_RETURN_IF_ERROR(CheckMemoryAdmission(memory_estimate, host_limit, device_limit, args));
    print(absl::StrFormat(
        " > memory admission: this process's %d %s at least %.3f GiB of the %.2f GiB "
        "it may use (%s)%s",
        memory_estimate.ranks, memory_estimate.ranks == 1 ? "rank needs" : "ranks need",
        memory_estimate.host_bytes / 1073741824.0, host_limit.bytes / 1073741824.0,
        host_limit.source,
        device_limit ? absl::StrFormat("; %.3f GiB of the GPU's %.2f GiB (%s)",
                                       memory_estimate.device_bytes / 1073741824.0,
                                       device_limit->bytes / 1073741824.0, device_limit->source)
                     : ""));
  } else {
    print(" > memory admission off (--memory-admission off / MXMACA_MEMORY_ADMISSION=off)");
  }
  absl::StatusOr<std::vector<StageRank>> built;
  try {
    built = BuildStageRanks(model, parallel.placement, rank_options);
  } catch (const std::bad_alloc&) {
    return OutOfMemoryError("building the model's parameters, gradients and optimizer state",
                            args, memory_estimate, host_limit);
  }
  MXMACA_RETURN_IF_ERROR(built.status());
  std::vector<StageRank> ranks = std::move(*built);
  for (const StageRank& r : ranks) {
    if (r.data_parallel_rank != 0 || r.context_parallel_rank != 0) continue;
    print(absl::StrFormat(
        " > number of parameters on (tensor, pipeline) model parallel rank (%d, %d): %d",
        r.tensor_parallel_rank, r.pipeline_rank, r.num_parameters));
  }
  for (const std::string& line : MemoryReport(parallel, model, ranks, args)) print(line);
  if (rank_options.device != Device::kCpu) {
    // Where the training state lives (stage_ranks.h state_on_device).
    int on_device = 0;
    for (const StageRank& r : ranks) on_device += r.program->state_on_backend() ? 1 : 0;
    const int n = static_cast<int>(ranks.size());
    std::string why;
    if (args.optimizer_cpu_offload) {
      why = "--optimizer-cpu-offload";
    } else if (!rank_options.state_on_device) {
      why =
          "a flag that uses the host copies during training (--optimizer-post-validation, "
          "--rebalance-threshold, --force-layer-move, --log-params-norm or "
          "--log-num-zeros-in-grad)";
    } else if (on_device < n) {
      why =
          "their gradients are reduced on the host (the distributed optimizer, MoE, or both "
          "ends of the tied embedding on one rank)";
    }
    print(absl::StrFormat(
        " > training state (parameters, gradients, AdamW moments) on the device for %d of %d "
        "rank%s%s",
        on_device, n, n == 1 ? "" : "s",
        on_device < n ? absl::StrCat("; the others step AdamW on the host: ", why) : ""));
  }

  // Schedule and resume.
  MXMACA_ASSIGN_OR_RETURN(layers::OptimizerParamSchedulerConfig sched_config,
                          SchedulerConfigFromArgs(args));
  MXMACA_ASSIGN_OR_RETURN(layers::OptimizerParamScheduler scheduler,
                          layers::OptimizerParamScheduler::Create(sched_config));
  MXMACA_ASSIGN_OR_RETURN(
      ResumePoint resume,
      MaybeLoad(args, model, sched_config, opened ? &*opened : nullptr, ranks, print));
  if (resume.scheduler) {
    // The schedule to continue (the flags', or the checkpoint's with
    // --use-checkpoint-opt_param-scheduler) at the checkpoint's step count, in samples.
    MXMACA_ASSIGN_OR_RETURN(scheduler,
                            layers::OptimizerParamScheduler::Create(resume.scheduler->config));
    scheduler.SetNumSteps(resume.scheduler->num_steps);
  }
  opened.reset();  // unmap the checkpoint's files
  staged_megatron_load.reset();

  // Data.
  MXMACA_ASSIGN_OR_RETURN(data::GptDataConfig data_config, GptDataConfigFromArgs(args));
  data_config.eod_token = eod;
  data_config.vocab_size = vocab_size;
  if (!data_config.blend && !data_config.blend_per_split[0] && !data_config.blend_per_split[1] &&
      !data_config.blend_per_split[2]) {
    print(args.mock_data
              ? " > training on mock data (--mock-data: Megatron's MockGPTDataset)"
              : " WARNING: no --data-path or --train-data-path given: training on mock data "
                "(Megatron's MockGPTDataset), as Megatron does");
  }
  print("> building train, validation, and test datasets for GPT ...");
  MXMACA_ASSIGN_OR_RETURN(data::GptDatasetSplits splits, data::BuildGptDatasets(data_config));
  if (!splits.train) return absl::InvalidArgumentError("the train split is empty (--split)");
  print(splits.train->Describe());
  if (splits.valid) print(splits.valid->Describe());
  std::shared_ptr<const data::SampleDataset> train(std::move(splits.train));
  std::shared_ptr<const data::SampleDataset> valid(std::move(splits.valid));

  // Runtime.
  // Runtime: one compute strand per rank on a pool of min(ranks, threads) threads; each op
  // uses threads / pool threads OpenMP threads (results do not depend on the count).
  const int threads = static_cast<int>(*args.num_threads);
  const int world = static_cast<int>(ranks.size());
  const int pool_threads = std::max(1, std::min(world, threads));
  kernels::ExecContext exec;
  exec.num_threads = std::max(1, threads / pool_threads);
  exec.precision = model.precision;
  const double peak = MeasureGemmPeakGflops(exec);
  print(absl::StrFormat(" > measured GEMM peak: %.1f GFLOP/s (%s, %d thread%s)", peak,
                            args.bf16 ? "bf16" : "fp32", threads, threads == 1 ? "" : "s"));

  // --skip-train: the loaded iteration is the last one (pretrain(): "skipping training").
  const int64_t train_iters = args.skip_train ? resume.iteration : TrainIters(args);
  const int64_t gbs = *args.global_batch_size;
  const int64_t mbs = *args.micro_batch_size;
  auto cc = std::make_shared<actors::CoordinatorConfig>();
  cc->train_iters = train_iters;
  cc->skip_train = args.skip_train;
  cc->start_iteration = resume.iteration;
  cc->consumed_train_samples = resume.consumed_train_samples;
  cc->consumed_valid_samples = resume.consumed_valid_samples;
  cc->skipped_iterations = resume.skipped_iterations;
  cc->global_batch_size = gbs;
  cc->micro_batch_size = mbs;
  cc->num_microbatches = parallel.num_microbatches;
  cc->eval_num_microbatches = parallel.eval_num_microbatches;
  cc->pipeline_size = parallel.pipeline_size;
  cc->data_parallel_size = parallel.data_parallel_size;
  cc->train_schedule = parallel.train_schedule;
  cc->eval_schedule = parallel.eval_schedule;
  cc->dynamic_pipeline = args.dynamic_pipeline;
  cc->optimizer_post_validation = args.optimizer_post_validation;
  if (args.rebalance_threshold || args.force_layer_move) {
    RebalancePolicy policy;
    policy.threshold = args.rebalance_threshold.value_or(0.0);
    policy.window = static_cast<int32_t>(args.rebalance_window);
    if (policy.threshold < 0 || policy.window < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rebalance-threshold ", policy.threshold, " / --rebalance-window ", policy.window,
          ": expected a threshold >= 0 and a window >= 1"));
    }
    if (args.force_layer_move) {
      MXMACA_RETURN_IF_ERROR(
          ParseForcedMove(*args.force_layer_move, parallel.pipeline_size, &policy));
    }
    if (parallel.virtual_size != 1 || args.use_distributed_optimizer) {
      return absl::UnimplementedError(
          "--rebalance-threshold / --force-layer-move need one model chunk per pipeline stage "
          "and no --use-distributed-optimizer");
    }
    struct RebalanceState {
      Rebalancer rebalancer;
      layers::PipelinePlacement placement;
      std::vector<StageRank> ranks;
    };
    auto rb = std::make_shared<RebalanceState>(
        RebalanceState{Rebalancer(policy), parallel.placement, ranks});
    cc->rebalance = [rb, model, rank_options](int64_t iteration,
                                              const std::vector<double>& stage_busy)
        -> absl::StatusOr<std::optional<actors::CoordinatorConfig::RebalanceResult>> {
      std::string why;
      std::optional<LayerMove> move = rb->rebalancer.Decide(iteration, stage_busy,
                                                            rb->placement, &why);
      if (!move) return std::nullopt;
      MXMACA_ASSIGN_OR_RETURN(layers::PipelinePlacement placement, ApplyMove(rb->placement, *move));
      MXMACA_ASSIGN_OR_RETURN(std::vector<StageRank> fresh,
                              RebuildRanks(model, placement, rank_options, rb->ranks));
      actors::CoordinatorConfig::RebalanceResult result;
      for (const StageRank& r : fresh) {
        result.programs.push_back(actors::ReplaceProgram{r.program, r.optimizers, r.buckets});
      }
      result.log = absl::StrCat(" rebalance after iteration ", iteration, ": ", why,
                                "; one layer moves from stage ", move->from, " to stage ",
                                move->to, "; layout now --pipeline-model-parallel-layout ",
                                placement.ToLayoutString());
      rb->placement = std::move(placement);
      rb->ranks = std::move(fresh);
      return result;
    };
  }
  if (args.max_stashed_microbatches) {
    if (*args.max_stashed_microbatches < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-stashed-microbatches ", *args.max_stashed_microbatches, ": expected >= 1"));
    }
    cc->max_stashed_microbatches = static_cast<int32_t>(*args.max_stashed_microbatches);
  }
  if (args.pipeline_channel_slots) {
    if (*args.pipeline_channel_slots < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pipeline-channel-slots ", *args.pipeline_channel_slots, ": expected >= 1"));
    }
    cc->pipeline_channel_slots = static_cast<int32_t>(*args.pipeline_channel_slots);
  }
  cc->write_shard = MakeShardWriter(args.use_distributed_optimizer, !args.no_save_optim);
  cc->save_optimizer_state = !args.no_save_optim;
  cc->seq_length = model.seq_length;
  cc->calculate_per_token_loss = args.calculate_per_token_loss;
  cc->clip_grad = args.clip_grad;
  cc->max_consecutive_nan_iterations = args.max_consecutive_nan_iterations;
  cc->log_interval = args.log_interval;
  cc->eval_interval = args.eval_interval.value_or(0);  // None: no evaluation during training
  cc->start_eval_at_iter = args.start_eval_at_iter.value_or(0);
  cc->eval_iters = args.eval_iters;
  cc->do_valid = valid != nullptr && args.eval_iters > 0;
  cc->exit_interval = args.exit_interval;
  cc->exit_duration_in_mins = args.exit_duration_in_mins;
  if (args.exit_signal_handler) {
    // SIGTERM (e.g. Slurm's --signal=TERM@120, or mxmaca launch forwarding one) saves and
    // stops after the iteration in flight; in a multi-process job every rank stops there.
    MXMACA_RETURN_IF_ERROR(InstallExitSignalHandler(SIGTERM));
    cc->exit_signal_received = [] { return ExitSignalReceived(); };
  }
  // --skip-train: no training iterations, only the evaluations, and no save (pretrain()).
  cc->save_dir = args.skip_train ? std::nullopt : args.save;
  if (args.save && args.ckpt_format == "torch") {
    // Megatron's legacy format: stage MXMACA's checkpoint, convert after each commit.
    cc->save_dir = *args.save + "/" + kMegatronStagingDir;
    cc->after_commit = MegatronSaveHook(*args.save, args, model, parallel.placement, argv);
    cc->save_log_dir = *args.save + " (Megatron legacy format, --ckpt-format torch)";
  }
  cc->save_interval = args.save_interval.value_or(0);
  if (args.save) {
    cc->save_retain_interval = args.save_retain_interval;
    cc->save_retain_dir = *args.save;
  }
  cc->async_save = args.async_save;  // periodic saves write in the background
  if (args.save && args.non_persistent_save_interval) {
    cc->non_persistent_save_interval = *args.non_persistent_save_interval;
    cc->non_persistent_dir = NonPersistentDir(args, args.save);
    if (cc->non_persistent_dir) {
      MXMACA_RETURN_IF_ERROR(CheckWritableDirectory(*cc->non_persistent_dir,
                                                    "the non-persistent checkpoint directory"));
    }
  }
  cc->rng_seed = static_cast<int64_t>(model.seed);
  cc->checkpoint_args = CheckpointArgsJson(argv, args, model);
  cc->scheduler = scheduler;
  cc->flops_per_iteration = layers::NumFloatingPointOperations(DenseShape(model), gbs);
  cc->gemm_peak_gflops = peak;
  cc->num_devices = process_job ? world_size : 1;  // a process per device
  cc->print = print;
  cc->on_iteration = std::move(on_iteration);
  MXMACA_ASSIGN_OR_RETURN(cc->metrics,
                          MetricsSinksFromArgs(args, world_size, launch ? launch->rank : 0,
                                               !launch, resume.iteration, print));
  if (args.log_params_norm) {
    if (cc->rebalance) {
      return absl::UnimplementedError(
          "--log-params-norm with --rebalance-threshold / --force-layer-move: a layer move "
          "replaces the stages' programs the norm reads; drop one of them");
    }
    cc->params_norm_squared =
        ParamsNormSquaredOf(ranks, static_cast<int32_t>(args.context_parallel_size), exec);
  }
  if (args.log_num_zeros_in_grad) {
    if (cc->rebalance || args.optimizer_post_validation) {
      return absl::UnimplementedError(
          "--log-num-zeros-in-grad with --rebalance-threshold / --force-layer-move or "
          "--optimizer-post-validation: the count reads the stages' gradients between their "
          "report and their step, which those change; drop one of them");
    }
    cc->num_zeros_in_grad =
        GradZerosOf(ranks, static_cast<int32_t>(args.context_parallel_size));
  }
  cc->trace_file = args.trace_file;
  if (model.moe) {
    for (int64_t l = 0; l < model.num_layers; ++l) {
      if (model.is_moe_layer(l)) cc->moe_layers.push_back(l);
    }
    cc->moe_num_experts = model.moe->router.num_experts;
  }

  actors::DataActorConfig dc;
  dc.train = train;
  dc.valid = valid;
  dc.micro_batch_size = mbs;
  dc.seq_length = model.seq_length;
  dc.eod = eod;
  dc.eod_mask_loss = args.eod_mask_loss;
  dc.reset_position_ids = args.reset_position_ids;
  dc.reset_attention_mask = args.reset_attention_mask;

  actors::PipelineRuntimeOptions ro;
  ro.pipeline_size = parallel.pipeline_size;
  ro.data_parallel_size = parallel.data_parallel_size;
  ro.tensor_parallel_size = parallel.tensor_parallel_size;
  ro.context_parallel_size = static_cast<int32_t>(args.context_parallel_size);
  ro.hub = hub;
  ro.compute_threads = pool_threads;
  ro.ranks_block_on_peers = args.num_experts.has_value() && args.expert_model_parallel_size > 1;
  ro.exec = exec;
  ro.reset_attention_mask = args.reset_attention_mask;
  ro.distributed_optimizer = args.use_distributed_optimizer;
  ro.overlap_grad_reduce = args.overlap_grad_reduce;
  ro.overlap_param_gather = args.overlap_param_gather;
  ro.calculate_per_token_loss = args.calculate_per_token_loss;
  ro.trace = args.trace_file.has_value();
  ro.collective_timeout = absl::Minutes(args.distributed_timeout_minutes);
  if (process_job) {
    transport::ucx::UcxCommunicator* comm = process_job->comm.get();
    ro.communicator = comm;
    // The watchdog's tick also reports collectives that have waited for peers over 10 s,
    // every 10 s (UcxCommunicator::WaitingReports), so a late rank is named long before
    // the timeout.
    auto next_report = std::make_shared<absl::Time>(absl::Now() + kWaitReportInterval);
    const int rank = process_job->env.rank;
    ro.check_timeouts = [comm, next_report, rank](absl::Time now) {
      std::vector<absl::Status> failed = comm->CheckTimeouts(now);
      if (now >= *next_report) {
        *next_report = now + kWaitReportInterval;
        for (const std::string& line : comm->WaitingReports(now, kWaitReportInterval)) {
          PrintWaitLine(rank, line);
        }
      }
      return failed;
    };
  }
  if (args.inject_stage_slowdown) {
    MXMACA_RETURN_IF_ERROR(ParseStageSlowdown(*args.inject_stage_slowdown, parallel.pipeline_size,
                                              &ro.slowdown_stage, &ro.slowdown_factor,
                                              &ro.slowdown_from_iteration));
  }
  std::vector<actors::PipelineRank> job_ranks;
  for (StageRank& r : ranks) {
    actors::PipelineRank pr;
    pr.rank = r.rank;
    pr.pipeline_rank = r.pipeline_rank;
    pr.data_parallel_rank = r.data_parallel_rank;
    pr.tensor_parallel_rank = r.tensor_parallel_rank;
    pr.context_parallel_rank = r.context_parallel_rank;
    pr.program = r.program;
    pr.optimizers = r.optimizers;
    pr.buckets = r.buckets;
    job_ranks.push_back(std::move(pr));
  }

  if (args.skip_train) {
    print("skipping training (--skip-train is on) ...");
  } else if (resume.iteration >= train_iters) {
    print(absl::StrFormat("nothing to train: the checkpoint is at iteration %d and --train-iters is %d",
                          resume.iteration, train_iters));
  } else {
    print(absl::StrFormat("training ... (iterations %d to %d, global batch %d = %d micro-batches of %d x %d data-parallel replicas)",
                          resume.iteration + 1, train_iters, gbs, cc->num_microbatches, mbs,
                          parallel.data_parallel_size));
  }
  MXMACA_ASSIGN_OR_RETURN(actors::TrainingSummary summary,
                          actors::RunPipelineJob(std::move(job_ranks), ro, cc, dc));
  if (!summary.ok) {
    // No orderly close (the other processes may be stuck); this process reports its own
    // error, not the peers that exit after it.
    if (heartbeat) heartbeat->Quiesce();
    return summary;
  }
  if (process_job) {
    // Peers exit one by one once every rank is closing: only from then on is a silent peer
    // no longer reported. A rank that hangs before it reaches the close (SIGSTOP, a stuck
    // teardown) is still caught by the heartbeat within its timeout (found by the fault
    // soak: a rank stopped after the last save held the others in the close barrier).
    // Test-only (tests/integration:multiprocess_fault_test; never set it in production):
    // MXMACA_TEST_STOP_BEFORE_CLOSE_RANK=R stops rank R here, after training, as a hung
    // teardown would.
    if (const char* r = std::getenv("MXMACA_TEST_STOP_BEFORE_CLOSE_RANK");
        r != nullptr && std::atoi(r) == process_job->env.rank) {
      std::raise(SIGSTOP);
    }
    if (heartbeat) heartbeat->Closing();
    absl::Status closed = process_job->comm->Close([&] {
      if (heartbeat) heartbeat->Quiesce();
    });
    if (!closed.ok()) {
      summary.ok = false;
      summary.error = absl::StrCat("closing the UCX communicator: ", closed.message());
      return summary;
    }
  }
  if (summary.last_iteration > summary.first_iteration) print(absl::StrFormat(
      "[after training is done] iterations %d..%d, skipped %d, mean %.0f tokens/s, peak "
      "activation memory %.1f MB",
      summary.first_iteration + 1, summary.last_iteration, summary.skipped_iterations,
      summary.mean_tokens_per_second, summary.peak_activation_bytes / 1048576.0));
  for (const StageRank& r : ranks) {  // --device cuda: what the CUDA graphs did
    const auto* program = dynamic_cast<const actors::GptStageProgram*>(r.program.get());
    const actors::GptStageProgram* device =
        program != nullptr && program->on_device() ? program : nullptr;
    const std::string graphs = device ? device->cuda_graph_summary() : "";
    if (!graphs.empty()) print(absl::StrCat(" > CUDA graphs of rank ", r.rank, ": ", graphs));
    // --device device-on-cpu: the host<->device traffic the emulated device counted (set-up,
    // evaluation and checkpoints included), against the weights' size.
    const auto* emulated =
        device ? dynamic_cast<const layers::device::EmulatedDeviceKernels*>(device->kernels())
               : nullptr;
    const int64_t iterations = summary.last_iteration - summary.first_iteration;
    if (emulated != nullptr && iterations > 0) {
      const layers::device::TransferCounts c = emulated->transfers();
      const double mb = 1048576.0, params = static_cast<double>(device->parameter_bytes());
      const double per_iteration =
          static_cast<double>(c.host_to_device_bytes + c.device_to_host_bytes) / iterations;
      print(absl::StrFormat(
          " > host<->device copies of rank %d (emulated device): host->device %.1f MB (%d "
          "bytes) in %d calls, device->host %.1f MB (%d bytes) in %d calls, device->device "
          "%.1f MB; %.2f MB per iteration = %.2f x the %.2f MB of parameters (set-up, "
          "evaluation and checkpoints included)",
          r.rank, c.host_to_device_bytes / mb, c.host_to_device_bytes, c.host_to_device_calls,
          c.device_to_host_bytes / mb, c.device_to_host_bytes, c.device_to_host_calls,
          c.device_to_device_bytes / mb, per_iteration / mb,
          params > 0 ? per_iteration / params : 0.0, params / mb));
    }
  }
  return summary;
}

}  // namespace

absl::StatusOr<actors::TrainingSummary> Train(
    const std::vector<std::string>& argv, std::function<void(const std::string&)> print,
    std::function<void(const actors::IterationLogRecord&)> on_iteration) {
  // An allocation that fails anywhere on this thread (the model, the datasets, the
  // runtime's pools) ends the run with a clear error instead of std::terminate's abort;
  // the stage actors turn theirs into the same kind of error (actors/stage_actor.cc).
  try {
    return TrainUnguarded(argv, std::move(print), std::move(on_iteration));
  } catch (const std::bad_alloc&) {
    absl::StatusOr<MegatronArgs> args = ParseMegatronArgs(argv);
    return OutOfMemoryError("in mxmaca train", args.ok() ? *args : MegatronArgs{}, std::nullopt,
                            HostMemoryLimit());
  }
}

absl::Status RunTrain(const std::vector<std::string>& argv) {
  MXMACA_ASSIGN_OR_RETURN(actors::TrainingSummary summary, Train(argv));
  if (!summary.ok) return absl::AbortedError(summary.error);
  return absl::OkStatus();
}

}  // namespace mxmaca::api
