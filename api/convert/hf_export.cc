// api/convert/hf_export.cc: see hf_export.h.
#include "api/convert/hf_export.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "api/convert/hf_config.h"
#include "api/convert/hf_tensor_map.h"
#include "api/train/checkpoint_args.h"
#include "base/status_macros.h"

namespace mxmaca::api::convert {
namespace {

namespace fs = std::filesystem;

std::string ShapeStr(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

absl::Status CopyFile(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("copying ", from.string(), " to ", to.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// CopyTokenizerFiles: the run's tokenizer files into `save` (see hf_export.h).
absl::StatusOr<std::string> CopyTokenizerFiles(const nlohmann::json& args, const fs::path& save) {
  absl::StatusOr<data::TokenizerSpec> spec = TokenizerSpecFromCheckpointArgs(args);
  if (!spec.ok())
    return std::string("no tokenizer files written (the checkpoint's args name no tokenizer)");
  std::error_code ec;
  if (spec->tokenizer_type == "GPT2BPETokenizer" && spec->vocab_file && spec->merge_file &&
      fs::is_regular_file(*spec->vocab_file, ec) && fs::is_regular_file(*spec->merge_file, ec)) {
    MXMACA_RETURN_IF_ERROR(CopyFile(*spec->vocab_file, save / "vocab.json"));
    MXMACA_RETURN_IF_ERROR(CopyFile(*spec->merge_file, save / "merges.txt"));
    return absl::StrCat("tokenizer: ", *spec->vocab_file, " -> vocab.json, ", *spec->merge_file,
                        " -> merges.txt (GPT-2 BPE)");
  }
  if (spec->tokenizer_type == "HuggingFaceTokenizer" && spec->tokenizer_model) {
    const fs::path model = *spec->tokenizer_model;
    if (fs::is_regular_file(model, ec)) {
      MXMACA_RETURN_IF_ERROR(CopyFile(model, save / "tokenizer.json"));
      return absl::StrCat("tokenizer: ", model.string(), " -> tokenizer.json");
    }
    if (fs::is_directory(model, ec)) {
      std::vector<std::string> copied;
      for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                               "tokenizer.model"}) {
        if (fs::is_regular_file(model / name, ec)) {
          MXMACA_RETURN_IF_ERROR(CopyFile(model / name, save / name));
          copied.push_back(name);
        }
      }
      if (!copied.empty()) {
        return absl::StrCat("tokenizer: ", absl::StrJoin(copied, ", "), " copied from ",
                            model.string());
      }
    }
  }
  if (spec->tokenizer_type == "NullTokenizer") {
    return std::string(
        "no tokenizer files written (the run used NullTokenizer: the token ids are the text)");
  }
  return absl::StrCat("no tokenizer files written (the run used ", spec->tokenizer_type,
                      spec->tokenizer_model ? " " + *spec->tokenizer_model : std::string(),
                      spec->vocab_file ? " " + *spec->vocab_file : std::string(),
                      ", not found or not a format copied: add the tokenizer files by hand)");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExportToHuggingFace(const HfExportOptions& o) {
  using actors::checkpoint::CheckpointReader;
  MXMACA_ASSIGN_OR_RETURN(CheckpointReader reader, CheckpointReader::Open(o.load, o.iteration));
  MXMACA_RETURN_IF_ERROR(reader.VerifyChecksums());
  MXMACA_ASSIGN_OR_RETURN(layers::GptConfig config, ModelConfigFromCheckpointArgs(reader.args()));
  MXMACA_ASSIGN_OR_RETURN(HfModelType type, ChooseHfModelType(config, o.model_type));
  const int64_t v = config.vocab_size, h = config.hidden_size;
  TensorFetch fetch = [&](const std::string& name,
                          const std::vector<int64_t>& shape) -> absl::StatusOr<std::vector<float>> {
    const std::string stored = "model/" + name;
    absl::StatusOr<std::vector<int64_t>> full = reader.FullShape(stored);
    if (!full.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", reader.dir(), " has no ",
                                                     stored, ", which its args' model needs (",
                                                     ShapeStr(shape), ")"));
    }
    const bool vocab = name == "embedding.word_embeddings.weight" || name == "output_layer.weight";
    // Vocabulary tensors: [V, h] logical rows, or [V_pad, h] (padding rows kept); take [0, V).
    const bool fits =
        vocab ? full->size() == 2 && (*full)[0] >= v && (*full)[1] == h : *full == shape;
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint ", reader.dir(), ": ", stored,
                                                     " is ", ShapeStr(*full),
                                                     " but its args' model has ", ShapeStr(shape)));
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    const std::vector<int64_t> offsets(shape.size(), 0);
    MXMACA_RETURN_IF_ERROR(reader.ReadSlice(stored, offsets, shape, values.data()));
    return values;
  };
  std::vector<std::string> names;
  MXMACA_ASSIGN_OR_RETURN(HfTensors tensors, ToHfTensors(config, type.architecture, fetch, &names));
  std::error_code ec;
  fs::create_directories(o.save, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", o.save, ": ", ec.message()));
  MXMACA_RETURN_IF_ERROR(WriteHfSafetensors(o.save, tensors, names, o.dtype, o.max_shard_bytes));
  const std::string config_path = o.save + "/config.json";
  {
    std::ofstream f(config_path, std::ios::trunc);
    f << HfConfigJson(config, type, o.dtype).dump(2) << "\n";
    f.close();
    if (!f) return absl::InternalError(absl::StrCat(config_path, ": write failed"));
  }
  int64_t elements = 0;
  for (const auto& [name, t] : tensors) elements += static_cast<int64_t>(t.values.size());
  std::vector<std::string> lines;
  lines.push_back(absl::StrCat("exported ", reader.dir(), " (iteration ", reader.iteration(),
                               ") as Hugging Face ", type.model_type, " to ", o.save, ": ",
                               names.size(), " tensors, ", elements, " parameters, ",
                               o.dtype == HfDtype::kBf16 ? "bf16" : "fp32"));
  MXMACA_ASSIGN_OR_RETURN(std::string tokenizer, CopyTokenizerFiles(reader.args(), o.save));
  lines.push_back(tokenizer);
  lines.push_back(
      "not exported: the optimizer state and the training state (iteration, data position)");
  for (const std::string& note : HfExportNotes(config, type)) lines.push_back(note);
  return lines;
}

}  // namespace mxmaca::api::convert
