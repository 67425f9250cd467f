// api/generate/generate_command.cc: see generate_command.h.
#include "api/generate/generate_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/stage_checkpoint.h"
#include "api/args/subcommand_flags.h"
#include "api/train/checkpoint_args.h"
#include "base/status_macros.h"
#include "data/tokenizer_factory.h"
#include "layers/gpt_stage.h"

namespace mxmaca::api {
namespace {

struct GenerateFlags {
  std::string load;
  std::string prompt;
  int64_t max_new_tokens = 64;
  int64_t top_k = 1;
  double temperature = 1.0;
  uint64_t seed = 1234;
  std::optional<std::string> vocab_file, merge_file, tokenizer_model;
  int64_t num_threads = std::max(1u, std::thread::hardware_concurrency());
  bool help = false;
};

constexpr char kGenerateUsage[] =
    "usage: mxmaca generate --load DIR --prompt TEXT [--max-new-tokens N (64)] [--top-k K (1 = "
    "greedy)]\n"
    "                       [--temperature T (1.0)] [--seed S (1234)] [--vocab-file F "
    "--merge-file F]\n"
    "                       [--tokenizer-model M (HF / SentencePiece / tiktoken file)]\n"
    "                       [--num-threads N]\n"
    "Samples text from the latest checkpoint in DIR (the --save directory of a training run).\n";

absl::Status ParseInt(const std::string& flag, const std::string& v, int64_t* out, int64_t min) {
  if (!absl::SimpleAtoi(v, out) || *out < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", v, ": expected an integer >= ", min));
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateFlags> ParseFlags(const std::vector<std::string>& args) {
  GenerateFlags f;
  bool have_prompt = false;
  for (FlagCursor c(args); c.Next();) {
    const std::string& flag = c.flag();
    auto next = [&c] { return c.Value(); };
    if (flag == "--help" || flag == "-h") {
      f.help = true;
      return f;
    } else if (flag == "--load") {
      MXMACA_ASSIGN_OR_RETURN(f.load, next());
    } else if (flag == "--prompt") {
      MXMACA_ASSIGN_OR_RETURN(f.prompt, next());
      have_prompt = true;
    } else if (flag == "--max-new-tokens") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &f.max_new_tokens, 1));
    } else if (flag == "--top-k") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &f.top_k, 1));
    } else if (flag == "--temperature") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      if (!absl::SimpleAtod(v, &f.temperature) || !(f.temperature > 0)) {
        return absl::InvalidArgumentError(absl::StrCat("--temperature ", v, ": expected a number > 0"));
      }
    } else if (flag == "--seed") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      int64_t s = 0;
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &s, 0));
      f.seed = static_cast<uint64_t>(s);
    } else if (flag == "--vocab-file") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      f.vocab_file = v;
    } else if (flag == "--merge-file") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      f.merge_file = v;
    } else if (flag == "--tokenizer-model") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      f.tokenizer_model = v;
    } else if (flag == "--num-threads") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &f.num_threads, 1));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", flag, " (generate takes --load, --prompt, --max-new-tokens, --top-k, "
          "--temperature, --seed, --vocab-file, --merge-file, --tokenizer-model, --num-threads)"));
    }
  }
  if (f.load.empty()) return absl::InvalidArgumentError("--load DIR is required");
  if (!have_prompt || f.prompt.empty()) return absl::InvalidArgumentError("--prompt TEXT is required (non-empty)");
  return f;
}

// Picks the next token from logits over the real vocabulary [0, V).
int32_t PickToken(const float* logits, int64_t v, const GenerateFlags& f, std::mt19937_64& rng) {
  if (f.top_k == 1) return static_cast<int32_t>(std::max_element(logits, logits + v) - logits);
  std::vector<int32_t> ids(v);
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t k = std::min<int64_t>(f.top_k, v);
  // Ties go to the lower id (stable order), so a run is reproducible.
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> p(k);
  const double top = logits[ids[0]];
  for (int64_t i = 0; i < k; ++i) p[i] = std::exp((logits[ids[i]] - top) / f.temperature);
  std::discrete_distribution<int64_t> dist(p.begin(), p.end());
  return ids[dist(rng)];
}

}  // namespace

absl::Status RunGenerate(const std::vector<std::string>& args) {
  MXMACA_ASSIGN_OR_RETURN(GenerateFlags f, ParseFlags(args));
  if (f.help) {
    std::fputs(kGenerateUsage, stdout);
    return absl::OkStatus();
  }
  MXMACA_ASSIGN_OR_RETURN(actors::checkpoint::CheckpointReader reader,
                          actors::checkpoint::CheckpointReader::Open(f.load));
  MXMACA_RETURN_IF_ERROR(reader.VerifyChecksums());  // never sample from corrupted weights
  MXMACA_ASSIGN_OR_RETURN(layers::GptConfig config, ModelConfigFromCheckpointArgs(reader.args()));
  config.num_threads = static_cast<int>(f.num_threads);
  config.recompute_granularity = layers::RecomputeGranularity::kNone;
  // The tokenizer the checkpoint was trained with (args "tokenizer"); --vocab-file,
  // --merge-file and --tokenizer-model override its files.
  MXMACA_ASSIGN_OR_RETURN(data::TokenizerSpec spec, TokenizerSpecFromCheckpointArgs(reader.args()));
  if (f.vocab_file) spec.vocab_file = f.vocab_file;
  if (f.merge_file) spec.merge_file = f.merge_file;
  if (f.tokenizer_model) spec.tokenizer_model = f.tokenizer_model;
  if (spec.tokenizer_type == "NullTokenizer") {
    return absl::InvalidArgumentError(
        "the checkpoint was trained with --tokenizer-type NullTokenizer: there is no text to "
        "generate");
  }
  if (spec.tokenizer_type == "GPT2BPETokenizer" && (!spec.vocab_file || !spec.merge_file)) {
    return absl::InvalidArgumentError(
        "the checkpoint names no tokenizer files: pass --vocab-file and --merge-file");
  }
  if (spec.tokenizer_type != "GPT2BPETokenizer" && !spec.tokenizer_model) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint (", spec.tokenizer_type,
                                                   ") names no tokenizer model: pass "
                                                   "--tokenizer-model"));
  }
  const std::string files = spec.tokenizer_type == "GPT2BPETokenizer"
                                ? spec.vocab_file.value_or("")
                                : spec.tokenizer_model.value_or("");
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer, data::BuildTokenizer(spec));
  // The model's vocabulary as `mxmaca train` sized it: the larger of this tokenizer's and
  // the --legacy-tokenizer one's (they differ for SentencePieceTokenizer only).
  int64_t vocab_size = tokenizer->vocab_size();
  if (!spec.legacy_tokenizer) {
    data::TokenizerSpec legacy = spec;
    legacy.legacy_tokenizer = true;
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> sized, data::BuildTokenizer(legacy));
    vocab_size = std::max(vocab_size, sized->vocab_size());
  }
  if (vocab_size != config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer ", files, " has ", vocab_size, " tokens, the checkpoint's model ",
        config.vocab_size));
  }
  layers::StageLayout layout;
  layout.first_layer = 0;
  layout.last_layer = config.num_layers;
  if (config.moe && config.moe->expert_model_parallel_size > 1) {
    // One device holds every expert; the checkpoint names them globally whatever EP saved.
    auto moe = std::make_shared<layers::moe::MoELayerConfig>(*config.moe);
    moe->expert_model_parallel_size = 1;
    moe->expert_model_parallel_rank = 0;
    config.moe = std::move(moe);
  }
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<layers::GptStage> stage,
                          layers::GptStage::Create(config, layout));
  MXMACA_RETURN_IF_ERROR(actors::LoadStageParameters(reader, stage->parameters()));
  // Routes with the expert bias: every persistent buffer must be in the checkpoint.
  MXMACA_RETURN_IF_ERROR(
      actors::LoadPersistentBuffers(reader, stage->ExpertBiasBuffers(), /*required=*/true));

  std::vector<int32_t> tokens = tokenizer->Encode(f.prompt);
  if (static_cast<int64_t>(tokens.size()) > config.seq_length) {
    std::fprintf(stderr,
                 "notice: the prompt has %zu tokens; the model sees only the last %lld "
                 "(--seq-length of the checkpoint)\n",
                 tokens.size(), static_cast<long long>(config.seq_length));
  }
  std::mt19937_64 rng(f.seed);
  std::fprintf(stdout, "%s", f.prompt.c_str());
  std::fflush(stdout);
  std::vector<int32_t> generated;
  for (int64_t step = 0; step < f.max_new_tokens; ++step) {
    const int64_t s = std::min<int64_t>(static_cast<int64_t>(tokens.size()), config.seq_length);
    std::vector<int32_t> window(tokens.end() - s, tokens.end());
    std::vector<int32_t> positions(s);
    std::iota(positions.begin(), positions.end(), 0);
    layers::MicroBatchInput in;
    in.micro_batch_size = 1;
    in.seq_length = s;
    in.tokens = window;
    in.position_ids = positions;
    layers::StageOutput out;
    MXMACA_RETURN_IF_ERROR(stage->InferenceForward(in, &out));
    const int32_t next = PickToken(out.logits.data(), config.vocab_size, f, rng);
    if (next == tokenizer->eod()) break;
    tokens.push_back(next);
    generated.push_back(next);
    // Print whole UTF-8 characters as they complete (a token may end mid-character).
    absl::StatusOr<std::string> text = tokenizer->Decode(generated);
    if (text.ok() && !text->empty() && (static_cast<unsigned char>(text->back()) < 0x80)) {
      std::fprintf(stdout, "%s", text->c_str());
      std::fflush(stdout);
      generated.clear();
    }
  }
  if (!generated.empty()) {
    absl::StatusOr<std::string> text = tokenizer->Decode(generated);
    if (text.ok()) std::fprintf(stdout, "%s", text->c_str());
  }
  std::fprintf(stdout, "\n");
  return absl::OkStatus();
}

}  // namespace mxmaca::api
