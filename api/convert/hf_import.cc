// api/convert/hf_import.cc: see hf_import.h.
#include "api/convert/hf_import.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "api/args/megatron_args.h"
#include "api/convert/hf_config.h"
#include "api/convert/hf_safetensors.h"
#include "api/convert/hf_tensor_map.h"
#include "api/train/checkpoint_args.h"
#include "api/train/train_setup.h"
#include "base/status_macros.h"

namespace mxmaca::api::convert {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<nlohmann::json> ReadConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(
        absl::StrCat(path, " does not exist (is ", dir, " a Hugging Face model?)"));
  std::ostringstream s;
  s << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(s.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat(path, ": not valid JSON"));
  return j;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ImportFromHuggingFace(const HfImportOptions& o) {
  MXMACA_ASSIGN_OR_RETURN(nlohmann::json hf_config, ReadConfig(o.load));
  HfModelType type;
  MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> argv,
                          MegatronArgvFromHfConfig(hf_config, o.seq_length, &type));
  // The model exactly as `mxmaca train` would build it from these flags.
  // (--train-iters and --lr only to pass validation; the recorded argv holds the model flags.)
  std::vector<std::string> validated = argv;
  validated.insert(validated.end(), {"--train-iters", "1", "--lr", "1e-4"});
  MXMACA_ASSIGN_OR_RETURN(MegatronArgs args, ParseMegatronArgs(validated));
  MXMACA_RETURN_IF_ERROR(ValidateAndDeriveArgs(&args, 1));
  MXMACA_ASSIGN_OR_RETURN(layers::GptConfig config,
                          GptConfigFromArgs(args, hf_config["vocab_size"].get<int64_t>()));
  MXMACA_ASSIGN_OR_RETURN(HfTensors hf, ReadHfSafetensors(o.load));
  MXMACA_ASSIGN_OR_RETURN(std::vector<MegatronTensor> tensors,
                          FromHfTensors(config, type.architecture, std::move(hf), o.load));

  using actors::checkpoint::CheckpointWriter;
  using actors::checkpoint::TensorShardView;
  MXMACA_ASSIGN_OR_RETURN(CheckpointWriter writer, CheckpointWriter::Begin(o.save, 0));
  std::vector<TensorShardView> views;
  int64_t elements = 0;
  for (const MegatronTensor& t : tensors) {
    views.push_back({"model/" + t.name, t.shape, std::vector<int64_t>(t.shape.size(), 0), t.shape,
                     t.values.data()});
    elements += static_cast<int64_t>(t.values.size());
  }
  MXMACA_RETURN_IF_ERROR(writer.WriteShard("stage0", views));
  nlohmann::json state = {
      {"iteration", 0},
      {"consumed_train_samples", 0},
      {"consumed_valid_samples", 0},
      {"skipped_iterations", 0},
      {"optimizer_step", 0},
      {"has_optimizer_state", false},
      {"source", absl::StrCat("Hugging Face ", type.model_type, " model ", o.load)}};
  MXMACA_RETURN_IF_ERROR(writer.Commit(CheckpointArgsJson(argv, args, config), state));

  std::vector<std::string> lines;
  lines.push_back(absl::StrCat("imported Hugging Face ", type.model_type, " model ", o.load,
                               " into ", o.save, " (iteration 0): ", tensors.size(), " tensors, ",
                               elements, " parameters"));
  lines.push_back(absl::StrCat("model flags: ", absl::StrJoin(argv, " ")));
  std::error_code ec;
  std::vector<std::string> copied;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "tokenizer.model", "vocab.json", "merges.txt"}) {
    const fs::path from = fs::path(o.load) / name;
    if (!fs::is_regular_file(from, ec)) continue;
    fs::create_directories(fs::path(o.save) / "tokenizer", ec);
    fs::copy_file(from, fs::path(o.save) / "tokenizer" / name, fs::copy_options::overwrite_existing,
                  ec);
    if (ec) return absl::InternalError(absl::StrCat("copying ", from.string(), ": ", ec.message()));
    copied.push_back(name);
  }
  lines.push_back(
      copied.empty()
          ? std::string("tokenizer: none in the Hugging Face directory; the args record "
                        "NullTokenizer with the model's vocabulary")
          : absl::StrCat("tokenizer: ", absl::StrJoin(copied, ", "), " copied to ", o.save,
                         "/tokenizer/ (the args record NullTokenizer; pass the tokenizer flags "
                         "to train / generate)"));
  lines.push_back(absl::StrCat("load it with: mxmaca train --load ", o.save,
                               " --finetune <the model flags above> <data and training flags>"));
  return lines;
}

}  // namespace mxmaca::api::convert
