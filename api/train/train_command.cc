// api/train/train_command.cc: see train_command.h.
#include "api/train/train_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/compute_pool.h"
#include "actors/coordinator.h"
#include "actors/data_actor.h"
#include "actors/gpt_stage_program.h"
#include "actors/stage_actor.h"
#include "actors/stage_checkpoint.h"
#include "api/args/flags_doc.h"
#include "api/args/megatron_args.h"
#include "api/data_config/gpt_data_config.h"
#include "api/train/checkpoint_args.h"
#include "api/train/gemm_peak.h"
#include "api/train/train_setup.h"
#include "base/status_macros.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/gpt_dataset_builder.h"
#include "layers/flops.h"
#include "layers/gpt_stage.h"
#include "layers/optimizer.h"

namespace mxmaca::api {
namespace {

void PrintLine(const std::string& line) {
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

// The MegatronArgs fields `mxmaca train` honours today. A flag the parser accepts into any
// other field (it is implemented somewhere in MXMACA's flag table, e.g. for a later
// parallel layout) is an error when set, never silently ignored. The *_parallel_size
// fields are listed because CheckSupportedLayout checks their values; the overlap and
// distributed-optimizer flags and --sequence-parallel change nothing on one device
// (Megatron also turns sequence parallelism off at TP 1).
constexpr const char* kHonouredDests[] = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
    "group_query_attention", "num_query_groups", "max_position_embeddings",
    "position_embedding_type", "rotary_base", "rotary_percent", "normalization",
    "norm_epsilon", "swiglu", "bias_gelu_fusion", "untie_embeddings_and_output_weights", "add_bias_linear",
    "make_vocab_size_divisible_by", "attention_softmax_in_fp32", "hidden_dropout",
    "attention_dropout", "weight_decay", "start_weight_decay", "end_weight_decay",
    "weight_decay_incr_style", "clip_grad", "adam_beta1", "adam_beta2", "adam_eps",
    "micro_batch_size", "global_batch_size", "train_iters", "train_samples", "exit_interval",
    "exit_duration_in_mins", "optimizer", "recompute_granularity", "recompute_method",
    "recompute_num_layers", "calculate_per_token_loss", "check_for_nan_in_loss_and_grad",
    "seed", "init_method_std", "lr", "lr_decay_style", "lr_decay_iters", "lr_decay_samples",
    "lr_warmup_fraction", "lr_warmup_iters", "lr_warmup_samples", "lr_warmup_init", "min_lr",
    "override_opt_param_scheduler", "use_checkpoint_opt_param_scheduler", "save",
    "save_interval", "load", "no_load_optim", "no_load_rng", "finetune", "bf16",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "sequence_parallel", "use_distributed_optimizer",
    "overlap_grad_reduce", "overlap_param_gather", "eval_iters", "eval_interval", "data_path",
    "split", "train_data_path", "valid_data_path", "test_data_path", "mock_data",
    "data_cache_path", "seq_length", "vocab_file", "merge_file", "tokenizer_type",
    "vocab_size", "reset_position_ids", "reset_attention_mask", "eod_mask_loss",
    "create_attention_mask_in_dataloader", "num_workers", "dataloader_type", "log_interval",
    "max_consecutive_nan_iterations", "num_threads", "trace_file", "help"};

absl::Status CheckHonouredFlags(const MegatronArgs& a) {
  std::vector<std::string> rejected;
  for (const std::string& dest : ChangedArgs(a)) {
    bool ok = false;
    for (const char* h : kHonouredDests) ok = ok || dest == h;
    if (!ok) {
      std::string flag = "--" + dest;
      std::replace(flag.begin(), flag.end(), '_', '-');
      rejected.push_back(flag);
    }
  }
  if (rejected.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "mxmaca train does not honour ", absl::StrJoin(rejected, ", "),
      " yet (the flag is parsed, but this build's single-device training path would ignore "
      "it); remove it or see docs/FLAGS.md"));
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
  struct {
    const char* flag;
    int64_t value;
  } sizes[] = {{"--tensor-model-parallel-size", a.tensor_model_parallel_size},
               {"--pipeline-model-parallel-size", a.pipeline_model_parallel_size},
               {"--context-parallel-size", a.context_parallel_size},
               {"--expert-model-parallel-size", a.expert_model_parallel_size}};
  for (const auto& s : sizes) {
    if (s.value != 1) {
      return absl::UnimplementedError(absl::StrCat(
          s.flag, " ", s.value, ": this build of mxmaca train runs one device (size 1) only"));
    }
  }
  return absl::OkStatus();
}

// Whether `dir` holds anything that looks like a (possibly interrupted) checkpoint.
bool HasCheckpointDebris(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter_", 0) == 0) return true;
  }
  return false;
}

struct ResumePoint {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  int64_t skipped_iterations = 0;
  int64_t scheduler_num_steps = -1;  // -1: do not restore
};

// Loads --load into the model/optimizer. Megatron's behaviour: a --load directory without
// any checkpoint starts from scratch (with a notice); a half-written or unreadable one is an
// error.
absl::StatusOr<ResumePoint> MaybeLoad(const MegatronArgs& a, const layers::GptConfig& model,
                                      layers::GptStage& stage, layers::AdamWOptimizer& optimizer,
                                      const std::function<void(const std::string&)>& print) {
  ResumePoint rp;
  if (!a.load) return rp;
  const std::string dir = *a.load;
  const std::string latest = dir + "/latest_checkpointed_iteration.txt";
  std::error_code ec;
  if (!std::filesystem::exists(latest, ec) && !HasCheckpointDebris(dir)) {
    print(absl::StrCat(" WARNING: could not find the metadata file ", latest,
                           "; will not load any checkpoints and will start from random"));
    return rp;
  }
  MXMACA_ASSIGN_OR_RETURN(actors::checkpoint::CheckpointReader reader,
                          actors::checkpoint::CheckpointReader::Open(dir));
  MXMACA_RETURN_IF_ERROR(CheckModelMatchesCheckpoint(model, reader.args(), reader.dir()));
  MXMACA_RETURN_IF_ERROR(reader.VerifyChecksums());  // silent data corruption -> error
  MXMACA_RETURN_IF_ERROR(actors::LoadStageParameters(reader, stage.parameters()));
  const nlohmann::json& st = reader.state();
  if (!a.finetune) {
    try {
      rp.iteration = st.at("iteration").get<int64_t>();
      rp.consumed_train_samples = st.at("consumed_train_samples").get<int64_t>();
      rp.consumed_valid_samples = st.at("consumed_valid_samples").get<int64_t>();
      rp.skipped_iterations = st.at("skipped_iterations").get<int64_t>();
      if (!a.override_opt_param_scheduler) {
        rp.scheduler_num_steps = st.at("opt_param_scheduler").at("num_steps").get<int64_t>();
      }
      if (!a.no_load_optim) {
        MXMACA_RETURN_IF_ERROR(
            actors::LoadOptimizerState(reader, optimizer, stage.parameters()));
        optimizer.set_step(st.at("optimizer_step").get<int64_t>());
      }
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", reader.dir(), "/metadata.json state: ", e.what()));
    }
  }
  print(absl::StrFormat("  successfully loaded checkpoint from %s at iteration %d", dir,
                            reader.iteration()));
  return rp;
}

}  // namespace

absl::StatusOr<actors::TrainingSummary> Train(
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
  for (const std::string& n : args.notices) print(n);
  MXMACA_RETURN_IF_ERROR(ValidateAndDeriveArgs(&args, /*world_size=*/1));
  MXMACA_RETURN_IF_ERROR(CheckSupportedLayout(args));

  // Tokenizer (vocabulary size and end-of-document id).
  const std::string tokenizer_type = args.tokenizer_type.value_or("GPT2BPETokenizer");
  std::unique_ptr<data::Gpt2BpeTokenizer> tokenizer;
  int64_t vocab_size = 0;
  int32_t eod = 0;
  if (tokenizer_type == "GPT2BPETokenizer") {
    if (!args.vocab_file || !args.merge_file) {
      return absl::InvalidArgumentError(
          "--tokenizer-type GPT2BPETokenizer needs --vocab-file (encoder.json) and --merge-file "
          "(vocab.bpe)");
    }
    MXMACA_ASSIGN_OR_RETURN(tokenizer,
                            data::Gpt2BpeTokenizer::Load(*args.vocab_file, *args.merge_file));
    vocab_size = tokenizer->vocab_size();
    eod = tokenizer->eod();
  } else if (tokenizer_type == "NullTokenizer") {
    if (!args.vocab_size) {
      return absl::InvalidArgumentError("--tokenizer-type NullTokenizer needs --vocab-size");
    }
    // Megatron's NullTokenizer: ids are the text; eod = vocab_size - 1 is counted in.
    vocab_size = *args.vocab_size + 1;
    eod = static_cast<int32_t>(*args.vocab_size);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-type ", tokenizer_type,
        ": MXMACA supports GPT2BPETokenizer and NullTokenizer"));
  }

  // Model.
  MXMACA_ASSIGN_OR_RETURN(layers::GptConfig model, GptConfigFromArgs(args, vocab_size));
  layers::StageLayout layout;
  layout.first_layer = 0;
  layout.last_layer = model.num_layers;
  layout.has_embedding = true;
  layout.has_loss_head = true;
  print("building GPT model ...");
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<layers::GptStage> stage,
                          layers::GptStage::Create(model, layout));
  stage->InitializeParameters();
  const int64_t num_params = stage->parameters().num_elements();
  print(absl::StrFormat(
      " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): %d", num_params));
  print(absl::StrFormat(
      " > memory (MB) on stage 0: parameters %.1f, gradients %.1f, optimizer state %.1f",
      num_params * 4.0 / 1048576, num_params * 4.0 / 1048576, num_params * 8.0 / 1048576));

  layers::AdamWOptions adam{static_cast<float>(args.adam_beta1), static_cast<float>(args.adam_beta2),
                            static_cast<float>(args.adam_eps)};
  auto optimizer = std::make_shared<layers::AdamWOptimizer>(
      adam, stage->parameters().OptimizerTensors());

  // A --save directory that cannot be written fails now, not at the first save.
  if (args.save) MXMACA_RETURN_IF_ERROR(CheckWritableDirectory(*args.save, "--save"));

  // Schedule and resume.
  MXMACA_ASSIGN_OR_RETURN(layers::OptimizerParamSchedulerConfig sched_config,
                          SchedulerConfigFromArgs(args));
  MXMACA_ASSIGN_OR_RETURN(layers::OptimizerParamScheduler scheduler,
                          layers::OptimizerParamScheduler::Create(sched_config));
  MXMACA_ASSIGN_OR_RETURN(ResumePoint resume, MaybeLoad(args, model, *stage, *optimizer, print));
  if (resume.scheduler_num_steps >= 0) scheduler.SetNumSteps(resume.scheduler_num_steps);

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
  const int threads = static_cast<int>(*args.num_threads);
  kernels::ExecContext exec;
  exec.num_threads = threads;
  exec.precision = model.precision;
  const double peak = MeasureGemmPeakGflops(exec);
  print(absl::StrFormat(" > measured GEMM peak: %.1f GFLOP/s (%s, %d thread%s)", peak,
                            args.bf16 ? "bf16" : "fp32", threads, threads == 1 ? "" : "s"));

  const int64_t train_iters = TrainIters(args);
  const int64_t gbs = *args.global_batch_size;
  const int64_t mbs = *args.micro_batch_size;
  auto cc = std::make_shared<actors::CoordinatorConfig>();
  cc->train_iters = train_iters;
  cc->start_iteration = resume.iteration;
  cc->consumed_train_samples = resume.consumed_train_samples;
  cc->consumed_valid_samples = resume.consumed_valid_samples;
  cc->skipped_iterations = resume.skipped_iterations;
  cc->global_batch_size = gbs;
  cc->micro_batch_size = mbs;
  cc->num_microbatches = static_cast<int32_t>(gbs / (mbs * args.data_parallel_size));
  cc->seq_length = model.seq_length;
  cc->calculate_per_token_loss = args.calculate_per_token_loss;
  cc->clip_grad = args.clip_grad;
  cc->max_consecutive_nan_iterations = args.max_consecutive_nan_iterations;
  cc->log_interval = args.log_interval;
  cc->eval_interval = args.eval_interval;
  cc->eval_iters = args.eval_iters;
  cc->do_valid = valid != nullptr && args.eval_iters > 0;
  cc->exit_interval = args.exit_interval;
  cc->exit_duration_in_mins = args.exit_duration_in_mins;
  cc->save_dir = args.save;
  cc->save_interval = args.save_interval.value_or(0);
  cc->checkpoint_args = CheckpointArgsJson(argv, args, model);
  cc->scheduler = scheduler;
  cc->flops_per_iteration = layers::NumFloatingPointOperations(DenseShape(model), gbs);
  cc->gemm_peak_gflops = peak;
  cc->num_devices = 1;
  cc->print = print;
  cc->on_iteration = std::move(on_iteration);
  cc->trace_file = args.trace_file;

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);  // CAF workers only route messages
  caf::actor_system system{cfg};
  actors::ComputePool pool(1);  // one stage: its kernels use `threads` OpenMP threads
  actors::CoordinatorActor coordinator = actors::SpawnCoordinator(system, cc);

  actors::StageActorConfig sc;
  sc.stage = 0;
  sc.exec = exec;
  sc.coordinator = coordinator;
  sc.strand = pool.MakeStrand();
  sc.program = std::make_shared<actors::GptStageProgram>(std::move(stage),
                                                         args.reset_attention_mask);
  sc.optimizer = optimizer;
  sc.trace = args.trace_file.has_value();
  actors::StageActorHandle stage_actor = actors::SpawnStageActor(system, sc);

  actors::DataActorConfig dc;
  dc.train = train;
  dc.valid = valid;
  dc.micro_batch_size = mbs;
  dc.seq_length = model.seq_length;
  dc.eod = eod;
  dc.eod_mask_loss = args.eod_mask_loss;
  dc.reset_position_ids = args.reset_position_ids;
  dc.reset_attention_mask = args.reset_attention_mask;
  dc.first_stage = stage_actor;
  dc.last_stage = stage_actor;
  dc.coordinator = coordinator;
  cc->stages = {stage_actor};
  cc->data = actors::SpawnDataActor(system, dc);

  if (resume.iteration >= train_iters) {
    print(absl::StrFormat("nothing to train: the checkpoint is at iteration %d and --train-iters is %d",
                          resume.iteration, train_iters));
  } else {
    print(absl::StrFormat("training ... (iterations %d to %d, global batch %d = %d micro-batches of %d)",
                          resume.iteration + 1, train_iters, gbs, cc->num_microbatches, mbs));
  }
  actors::TrainingSummary summary;
  bool got = false;
  std::string caf_error;
  {
    caf::scoped_actor self{system};
    self->request(coordinator, caf::infinite, actors::RunTraining{})
        .receive(
            [&](const actors::TrainingSummary& s) {
              summary = s;
              got = true;
            },
            [&](caf::error& err) { caf_error = system.render(err); });
    for (const auto& a : {caf::actor_cast<caf::actor>(coordinator),
                          caf::actor_cast<caf::actor>(stage_actor),
                          caf::actor_cast<caf::actor>(cc->data)}) {
      self->send_exit(a, caf::exit_reason::user_shutdown);
    }
  }
  cc->stages.clear();
  cc->data = nullptr;
  if (!got) return absl::InternalError(absl::StrCat("coordinator ended without a summary: ", caf_error));
  if (!summary.ok) return summary;
  if (summary.last_iteration > summary.first_iteration) print(absl::StrFormat(
      "[after training is done] iterations %d..%d, skipped %d, mean %.0f tokens/s, peak "
      "activation memory %.1f MB",
      summary.first_iteration + 1, summary.last_iteration, summary.skipped_iterations,
      summary.mean_tokens_per_second, summary.peak_activation_bytes / 1048576.0));
  return summary;
}

absl::Status RunTrain(const std::vector<std::string>& argv) {
  MXMACA_ASSIGN_OR_RETURN(actors::TrainingSummary summary, Train(argv));
  if (!summary.ok) return absl::AbortedError(summary.error);
  return absl::OkStatus();
}

}  // namespace mxmaca::api
