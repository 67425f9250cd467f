// api/preprocess/preprocess_flags.cc: argparse-style parsing of preprocess_data.py flags.
#include "api/preprocess/preprocess_flags.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"

namespace mxmaca::api {
namespace {

enum class Kind {
  kString,     // one value
  kInt,        // one integer value
  kFlag,       // store_true, no value
  kStrings,    // nargs='+'
  kIgnored,    // accepted, one value, no effect here (as in Megatron for GPT-2)
  kIgnoredFlag,
  kRejected,   // configures something MXMACA does not provide: error
  kRejectedFlag,
};

struct FlagSpec {
  const char* name;
  Kind kind;
  const char* note;  // for kRejected*: why
};

constexpr char kOtherTokenizer[] =
    "configures a tokenizer MXMACA does not provide (MXMACA provides GPT2BPETokenizer, "
    "HuggingFaceTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
    "Llama2Tokenizer, TikTokenizer)";

// preprocess_data.py get_args() and the tokenizer group it adds (core_v0.15.0).
constexpr FlagSpec kFlags[] = {
    {"--input", Kind::kString, ""},
    {"--json-keys", Kind::kStrings, ""},
    {"--split-sentences", Kind::kRejectedFlag,
     "needs NLTK's punkt sentence splitter, which MXMACA does not provide; split "
     "sentences beforehand and pass each document's \"text\" as an array of sentences"},
    {"--keep-newlines", Kind::kIgnoredFlag, ""},
    {"--append-eod", Kind::kFlag, ""},
    {"--lang", Kind::kIgnored, ""},
    {"--output-prefix", Kind::kString, ""},
    {"--workers", Kind::kInt, ""},
    {"--partitions", Kind::kInt, ""},
    {"--log-interval", Kind::kInt, ""},
    {"--keep-sequential-samples", Kind::kFlag, ""},
    {"--tokenizer-type", Kind::kString, ""},
    {"--vocab-file", Kind::kString, ""},
    {"--merge-file", Kind::kString, ""},
    {"--vocab-size", Kind::kInt, ""},
    {"--vocab-extra-ids", Kind::kInt, ""},
    {"--tokenizer-model", Kind::kString, ""},
    {"--tokenizer-metadata", Kind::kRejected, kOtherTokenizer},
    {"--tiktoken-pattern", Kind::kString, ""},
    {"--tiktoken-num-special-tokens", Kind::kInt, ""},
    {"--tiktoken-special-tokens", Kind::kStrings, ""},
    {"--tokenizer-prompt-format", Kind::kRejected, kOtherTokenizer},
    {"--special-tokens", Kind::kRejected, kOtherTokenizer},
    {"--image-tag-type", Kind::kRejected, kOtherTokenizer},
    {"--legacy-tokenizer", Kind::kFlag, ""},
    {"--find-optimal-num-workers", Kind::kRejectedFlag,
     "is not supported (run tests/bench/preprocess_bench instead)"},
    {"--help", Kind::kFlag, ""},
};

// Tokenizer types preprocess_data.py accepts; only the first is implemented.
constexpr const char* kTokenizerTypes[] = {
    "GPT2BPETokenizer",         "BertWordPieceLowerCase",  "BertWordPieceCase",
    "SentencePieceTokenizer",   "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
    "Llama2Tokenizer",          "TikTokenizer",            "MultimodalTokenizer",
    "NullTokenizer",            "NullMultimodalTokenizer", "SFTTokenizer",
};

int64_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diagonal = row[0];
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The known flag closest to `name` ("--output_prefix" -> "--output-prefix"), if close.
std::optional<std::string> Suggest(const std::string& name) {
  std::string normalized = name;
  std::replace(normalized.begin(), normalized.end(), '_', '-');
  int64_t best = 1 << 30;
  std::string best_name;
  for (const FlagSpec& spec : kFlags) {
    const int64_t d = EditDistance(normalized, spec.name);
    if (d < best) {
      best = d;
      best_name = spec.name;
    }
  }
  if (best <= std::max<int64_t>(2, static_cast<int64_t>(name.size()) / 4)) return best_name;
  return std::nullopt;
}

absl::StatusOr<const FlagSpec*> Lookup(const std::string& name) {
  for (const FlagSpec& spec : kFlags) {
    if (name == spec.name) return &spec;
  }
  std::vector<const FlagSpec*> matches;  // argparse's allow_abbrev: unique prefixes
  for (const FlagSpec& spec : kFlags) {
    if (name.size() > 2 && absl::StartsWith(spec.name, name)) matches.push_back(&spec);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.size() > 1) {
    std::vector<std::string> names;
    for (const FlagSpec* m : matches) names.push_back(m->name);
    return absl::InvalidArgumentError(absl::StrCat("preprocess: ambiguous option ", name,
                                                   " could match ",
                                                   absl::StrJoin(names, ", ")));
  }
  std::string message = absl::StrCat("preprocess: unrecognized argument ", name);
  if (auto suggestion = Suggest(name)) {
    absl::StrAppend(&message, " (did you mean ", *suggestion, "?)");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

std::string PreprocessUsage() {
  return "usage: mxmaca preprocess --input INPUT.jsonl --output-prefix PREFIX\n"
         "         --tokenizer-type GPT2BPETokenizer --vocab-file encoder.json\n"
         "         --merge-file vocab.bpe --workers N [--json-keys KEY [KEY ...]]\n"
         "       (or --tokenizer-type HuggingFaceTokenizer|SentencePieceTokenizer|\n"
         "         GPTSentencePieceTokenizer|Llama2Tokenizer --tokenizer-model M, or\n"
         "         --tokenizer-type TikTokenizer --tokenizer-model vocab.json\n"
         "         --tiktoken-pattern v1|v2 [--vocab-size N] [--tiktoken-num-special-tokens K]\n"
         "         [--tiktoken-special-tokens T [T ...]])\n"
         "         [--append-eod] [--log-interval DOCS]\n"
         "         [--partitions N [--keep-sequential-samples]]\n"
         "Writes PREFIX_{KEY}_document.bin/.idx (Megatron's indexed dataset), one\n"
         "document per input line, with the flags of Megatron's tools/preprocess_data.py.\n"
         "With --partitions N > 1, INPUT is a glob pattern: its lines go round-robin (or in\n"
         "N sequential blocks) to partition files INPUT-NAME_{i}.EXT, which are encoded and\n"
         "merged in order 0..N-1 (as Megatron; partition files already present are reused).\n";
}

absl::StatusOr<PreprocessOptions> ParsePreprocessArgs(const std::vector<std::string>& args) {
  PreprocessOptions options;
  std::map<std::string, std::string> values;  // last occurrence wins
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h") arg = "--help";
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "preprocess: unrecognized argument \"", arg, "\" (all arguments are --flags)"));
    }
    std::optional<std::string> inline_value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto spec_or = Lookup(arg);
    if (!spec_or.ok()) return spec_or.status();
    const FlagSpec& spec = **spec_or;
    const std::string name = spec.name;
    const bool takes_value = spec.kind == Kind::kString || spec.kind == Kind::kInt ||
                             spec.kind == Kind::kStrings || spec.kind == Kind::kIgnored ||
                             spec.kind == Kind::kRejected;
    if (spec.kind == Kind::kRejected || spec.kind == Kind::kRejectedFlag) {
      return absl::InvalidArgumentError(absl::StrCat("preprocess: ", name, " ", spec.note));
    }
    if (!takes_value) {
      if (inline_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("preprocess: ", name, " takes no value, got \"", *inline_value, "\""));
      }
      if (name == "--append-eod") options.append_eod = true;
      if (name == "--legacy-tokenizer") options.legacy_tokenizer = true;
      if (name == "--keep-sequential-samples") options.keep_sequential_samples = true;
      if (name == "--help") options.help = true;
      continue;
    }
    if (spec.kind == Kind::kStrings) {
      std::vector<std::string> list;
      if (inline_value) list.push_back(*inline_value);
      while (!inline_value && i + 1 < args.size() && !absl::StartsWith(args[i + 1], "-")) {
        list.push_back(args[++i]);
      }
      if (list.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("preprocess: ", name, " expects at least one argument"));
      }
      if (name == "--json-keys") options.json_keys = list;
      if (name == "--tiktoken-special-tokens") options.tiktoken_special_tokens = list;
      continue;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("preprocess: ", name, " expects one argument"));
    }
    if (spec.kind == Kind::kIgnored) continue;
    if (spec.kind == Kind::kInt) {
      int64_t parsed;
      if (!absl::SimpleAtoi(value, &parsed)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "preprocess: ", name, ": invalid int value \"", value, "\""));
      }
    }
    values[name] = value;
  }
  if (options.help) return options;

  std::vector<std::string> missing;
  for (const char* required : {"--input", "--output-prefix", "--tokenizer-type", "--workers"}) {
    if (values.count(required) == 0) missing.push_back(required);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: the following arguments are required: ", absl::StrJoin(missing, ", ")));
  }
  options.input = values["--input"];
  options.output_prefix = values["--output-prefix"];
  options.tokenizer_type = values["--tokenizer-type"];
  options.vocab_file = values["--vocab-file"];
  options.merge_file = values["--merge-file"];
  options.tokenizer_model = values["--tokenizer-model"];
  options.tiktoken_pattern = values["--tiktoken-pattern"];
  auto int_value = [&values](const char* name, int64_t fallback) {
    auto it = values.find(name);
    int64_t v = fallback;
    if (it != values.end()) (void)absl::SimpleAtoi(it->second, &v);
    return v;
  };
  options.workers = int_value("--workers", 0);
  options.partitions = int_value("--partitions", 1);
  options.log_interval = int_value("--log-interval", 1000);
  if (values.count("--vocab-size")) options.vocab_size = int_value("--vocab-size", 0);
  options.vocab_extra_ids = int_value("--vocab-extra-ids", 0);
  options.tiktoken_num_special_tokens = int_value("--tiktoken-num-special-tokens", 1000);

  const auto* known = std::find(std::begin(kTokenizerTypes), std::end(kTokenizerTypes),
                                options.tokenizer_type);
  if (known == std::end(kTokenizerTypes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --tokenizer-type: invalid choice \"", options.tokenizer_type,
        "\" (choose from ", absl::StrJoin(kTokenizerTypes, ", "), ")"));
  }
  const std::string& type = options.tokenizer_type;
  if (type == "GPT2BPETokenizer") {
    if (options.vocab_file.empty() || options.merge_file.empty()) {
      return absl::InvalidArgumentError(
          "preprocess: GPT2BPETokenizer needs --vocab-file (encoder.json) and --merge-file "
          "(vocab.bpe)");
    }
  } else if (type == "HuggingFaceTokenizer" || type == "SentencePieceTokenizer" ||
             type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer" ||
             type == "TikTokenizer") {
    if (options.tokenizer_model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "preprocess: ", type, " needs --tokenizer-model (",
          type == "HuggingFaceTokenizer" ? "a folder with tokenizer.json, or the tokenizer.json"
          : type == "TikTokenizer"       ? "the tiktoken vocab .json"
                                         : "a SentencePiece .model",
          ")"));
    }
    if (type == "TikTokenizer" && options.tiktoken_pattern != "v1" &&
        options.tiktoken_pattern != "v2") {
      return absl::InvalidArgumentError(
          "preprocess: TikTokenizer needs --tiktoken-pattern v1 or v2");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --tokenizer-type ", type,
        " is not supported; MXMACA provides GPT2BPETokenizer, HuggingFaceTokenizer, "
        "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, TikTokenizer"));
  }
  if (options.workers < 1 || options.workers > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --workers must be in [1, 1024] (threads), got ", options.workers));
  }
  if (options.partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --partitions must be >= 1 (the number of partition files), got ",
        options.partitions));
  }
  if (options.workers % options.partitions != 0) {
    // Megatron drops such a --workers value and then asserts.
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --workers ", options.workers, " is not divisible by --partitions ",
        options.partitions, " (Megatron requires workers = partitions x workers per partition)"));
  }
  if (options.log_interval < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --log-interval must be >= 1, got ", options.log_interval));
  }
  std::vector<std::string> seen;
  for (const std::string& key : options.json_keys) {
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("preprocess: --json-keys lists \"", key, "\" twice"));
    }
    seen.push_back(key);
  }
  return options;
}

}  // namespace mxmaca::api
