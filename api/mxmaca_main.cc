// api/mxmaca_main.cc: the `mxmaca` command-line entry point. A thin dispatcher: each
// subcommand is a function of the public API taking its arguments; an error is printed
// as "mxmaca <subcommand>: error: <message>" with exit code 1 (2 for usage errors).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/calibrate/calibrate_command.h"
#include "api/convert/convert_command.h"
#include "api/generate/generate_command.h"
#include "api/inspect/inspect_checkpoint_command.h"
#include "api/inspect/inspect_data_command.h"
#include "api/launch/launch_command.h"
#include "api/launch/launcher_watch.h"
#include "api/merge_datasets/merge_datasets_command.h"
#include "api/plan/plan_command.h"
#include "api/plot/metrics_plot.h"
#include "api/preprocess/preprocess_command.h"
#include "api/simulate/simulate_command.h"
#include "base/status_macros.h"
#include "mxmaca/runtime.h"

namespace {

constexpr char kUsage[] =
    "usage: mxmaca <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train          train a GPT with Megatron-LM's pretrain_gpt.py flags\n"
    "  preprocess     JSONL -> Megatron .bin/.idx (tools/preprocess_data.py flags)\n"
    "  merge-datasets concatenate the .bin/.idx datasets of a directory (tools/merge_datasets.py:\n"
    "                 --input DIR --output-prefix PREFIX)\n"
    "  inspect-data   show the documents, samples and epochs training will read\n"
    "  inspect-checkpoint  show a checkpoint directory: format, iteration, layout, tensors, the\n"
    "                      --save lock and leftovers of killed saves (DIR [--verify])\n"
    "  generate       sample text from a checkpoint (--load DIR --prompt TEXT)\n"
    "  convert        checkpoints to and from Hugging Face (--to hf | --from hf, --load, --save)\n"
    "  launch         start N local processes (torchrun variables) running a subcommand\n"
    "  simulate       cost-model a training step on a cluster (train flags + --cluster "
    "--world-size)\n"
    "  plan           search parallel layouts with the simulator (model flags + batch, cluster, "
    "GPUs)\n"
    "  calibrate      measure op costs on this CPU for simulate --cost-table (model flags + "
    "--output)\n"
    "  plot           draw a --metrics-jsonl file as an SVG (--metrics FILE --output OUT.svg)\n"
    "\n"
    "docs/FLAGS.md lists every Megatron flag and what MXMACA does with it.\n";

// RunTrainJob: `mxmaca train` through the public API (mxmaca/runtime.h), as an embedding
// program would run it; errors as api::RunTrain's.
absl::Status RunTrainJob(const std::vector<std::string>& args) {
  MXMACA_ASSIGN_OR_RETURN(mxmaca::Job job, mxmaca::Job::FromMegatronArgs(args));
  return job.Run().status();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  // A process started by `mxmaca launch` ends as soon as its launcher is gone
  // (api/launch/launcher_watch.h), whatever the subcommand.
  if (absl::StatusOr<bool> watch = mxmaca::api::StartLauncherWatch(); !watch.ok()) {
    std::fprintf(stderr, "mxmaca %s: error: %s\n", command.c_str(),
                 std::string(watch.status().message()).c_str());
    return 2;
  }
  // launch returns the first failing child's exit code itself.
  if (command == "launch") return mxmaca::api::RunLaunch(args);
  absl::Status status;
  if (command == "train") {
    status = RunTrainJob(args);
  } else if (command == "preprocess") {
    status = mxmaca::api::RunPreprocess(args);
  } else if (command == "inspect-data") {
    status = mxmaca::api::RunInspectData(args);
  } else if (command == "inspect-checkpoint") {
    status = mxmaca::api::RunInspectCheckpoint(args);
  } else if (command == "generate") {
    status = mxmaca::api::RunGenerate(args);
  } else if (command == "convert") {
    status = mxmaca::api::RunConvert(args);
  } else if (command == "simulate") {
    status = mxmaca::api::RunSimulate(args);
  } else if (command == "plan") {
    status = mxmaca::api::RunPlan(args);
  } else if (command == "calibrate") {
    status = mxmaca::api::RunCalibrate(args);
  } else if (command == "merge-datasets") {
    status = mxmaca::api::RunMergeDatasets(args);
  } else if (command == "plot") {
    status = mxmaca::api::RunPlot(args);
  } else {
    std::fprintf(stderr, "mxmaca: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "mxmaca %s: error: %s\n", command.c_str(),
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
