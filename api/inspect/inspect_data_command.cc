// api/inspect/inspect_data_command.cc: see inspect_data_command.h.
#include "api/inspect/inspect_data_command.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "api/args/megatron_args.h"
#include "api/args/subcommand_flags.h"
#include "api/data_config/gpt_data_config.h"
#include "base/status_macros.h"
#include "data/gpt_dataset_builder.h"
#include "data/tokenizer_factory.h"

namespace mxmaca::api {
namespace {

constexpr char kUsage[] =
    "usage: mxmaca inspect-data [training data flags] [--show N] [--dump-samples FILE]\n"
    "  Builds the train/valid/test datasets exactly as `mxmaca train` would with the same\n"
    "  flags (--data-path or --train/valid/test-data-path or --mock-data, --split,\n"
    "  --seed, --seq-length, --train-iters or --train-samples, --global-batch-size,\n"
    "  --eval-iters, --eval-interval, --data-cache-path and the tokenizer flags:\n"
    "  --tokenizer-type, --vocab-file, --merge-file, --tokenizer-model, --tiktoken-*)\n"
    "  and prints each split's documents, samples and epochs.\n"
    "  --show N             print the first N train samples, ids and decoded text\n"
    "  --dump-samples FILE  write all train samples in order (seq_length + 1 int64 each)\n";

struct InspectFlags {
  int64_t show = 0;
  std::optional<std::string> dump_path;
  std::vector<std::string> rest;  // for ParseMegatronArgs
};

// SplitOwnFlags: takes --show / --dump-samples (`--f v` or `--f=v`) out of `args`.
absl::StatusOr<InspectFlags> SplitOwnFlags(const std::vector<std::string>& args) {
  InspectFlags flags;
  for (FlagCursor c(args); c.Next();) {
    const std::string& name = c.flag();
    if (name != "--show" && name != "--dump-samples") {
      flags.rest.push_back(c.arg());
      continue;
    }
    MXMACA_ASSIGN_OR_RETURN(const std::string got, c.Value());
    const std::optional<std::string> value = got;
    if (name == "--show") {
      if (!absl::SimpleAtoi(*value, &flags.show) || flags.show < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--show expects a non-negative integer, got \"", *value, "\""));
      }
    } else {
      flags.dump_path = *value;
    }
  }
  return flags;
}

void PrintSplit(std::ostream& out, const char* name, const data::SampleDataset* ds) {
  if (ds == nullptr) {
    out << " > " << name << ": none\n";
    return;
  }
  out << " > " << name << ": " << ds->size() << " samples of " << ds->sample_length()
      << " tokens\n";
  for (absl::string_view line : absl::StrSplit(ds->Describe(), '\n', absl::SkipEmpty())) {
    out << "    " << line << "\n";
  }
}

absl::Status DumpSamples(const data::SampleDataset& train, const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::PermissionDeniedError("cannot create " + tmp);
  std::vector<int32_t> sample(train.sample_length());
  std::vector<unsigned char> bytes(sample.size() * 8);
  for (int64_t i = 0; i < train.size(); ++i) {
    absl::Status st = train.GetSample(i, absl::MakeSpan(sample));
    if (!st.ok()) {
      std::fclose(f);
      std::remove(tmp.c_str());
      return st;
    }
    for (size_t k = 0; k < sample.size(); ++k) {
      const uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(sample[k]));
      for (int b = 0; b < 8; ++b) bytes[8 * k + b] = static_cast<unsigned char>(v >> (8 * b));
    }
    if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
      std::fclose(f);
      std::remove(tmp.c_str());
      return absl::DataLossError("cannot write " + tmp);
    }
  }
  if (std::fclose(f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::DataLossError("cannot write " + path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunInspectData(const std::vector<std::string>& args) {
  return RunInspectData(args, std::cout);
}

absl::Status RunInspectData(const std::vector<std::string>& args, std::ostream& out) {
  MXMACA_ASSIGN_OR_RETURN(InspectFlags flags, SplitOwnFlags(args));
  MXMACA_ASSIGN_OR_RETURN(MegatronArgs margs, ParseMegatronArgs(flags.rest));
  if (margs.help) {
    out << kUsage;
    return absl::OkStatus();
  }
  for (const std::string& notice : margs.notices) out << notice << "\n";
  MXMACA_ASSIGN_OR_RETURN(data::GptDataConfig config, GptDataConfigFromArgs(margs));

  std::unique_ptr<data::Tokenizer> tokenizer;
  if (flags.show > 0) {
    data::TokenizerSpec spec;
    spec.tokenizer_type = margs.tokenizer_type.value_or("GPT2BPETokenizer");
    if (spec.tokenizer_type == "NullTokenizer") {
      return absl::InvalidArgumentError("--show needs a tokenizer with text (not NullTokenizer)");
    }
    spec.vocab_file = margs.vocab_file;
    spec.merge_file = margs.merge_file;
    spec.tokenizer_model = margs.tokenizer_model;
    spec.vocab_size = margs.vocab_size;
    spec.vocab_extra_ids = margs.vocab_extra_ids;
    spec.tiktoken_pattern = margs.tiktoken_pattern;
    spec.tiktoken_num_special_tokens = margs.tiktoken_num_special_tokens;
    spec.tiktoken_special_tokens = margs.tiktoken_special_tokens;
    spec.legacy_tokenizer = margs.legacy_tokenizer;
    MXMACA_ASSIGN_OR_RETURN(tokenizer, data::BuildTokenizer(spec));
  }

  out << "> datasets target sizes (minimum size):\n"
      << "    train:      " << *config.num_samples[0] << "\n"
      << "    validation: " << *config.num_samples[1] << "\n"
      << "    test:       " << *config.num_samples[2] << "\n";
  MXMACA_ASSIGN_OR_RETURN(data::GptDatasetSplits splits, data::BuildGptDatasets(config));
  PrintSplit(out, "train", splits.train.get());
  PrintSplit(out, "validation", splits.valid.get());
  PrintSplit(out, "test", splits.test.get());

  if (flags.show > 0) {
    if (splits.train == nullptr) return absl::FailedPreconditionError("no train split to show");
    std::vector<int32_t> sample(splits.train->sample_length());
    for (int64_t i = 0; i < std::min<int64_t>(flags.show, splits.train->size()); ++i) {
      MXMACA_RETURN_IF_ERROR(splits.train->GetSample(i, absl::MakeSpan(sample)));
      out << "--- train sample " << i << " (" << sample.size() << " tokens) ---\nids:";
      for (int32_t t : sample) out << " " << t;
      MXMACA_ASSIGN_OR_RETURN(std::string text, tokenizer->Decode(sample));
      out << "\ntext: " << text << "\n";
    }
  }
  if (flags.dump_path.has_value()) {
    if (splits.train == nullptr) {
      return absl::FailedPreconditionError("no train split to dump");
    }
    MXMACA_RETURN_IF_ERROR(DumpSamples(*splits.train, *flags.dump_path));
    out << "wrote " << splits.train->size() << " train samples x " << splits.train->sample_length()
        << " int64 tokens to " << *flags.dump_path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::api
