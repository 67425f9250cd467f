// Tests for ParseMegatronArgs (api/args/megatron_args.h): argparse semantics, errors
// and notices.
#include "api/args/megatron_args.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/args/flag_table.h"

namespace mxmaca::api {
namespace {

using Argv = std::vector<std::string>;

MegatronArgs ParseOk(const Argv& argv) {
  absl::StatusOr<MegatronArgs> args = ParseMegatronArgs(argv);
  INFO(args.status().ToString());
  REQUIRE(args.ok());
  return *std::move(args);
}

std::string ParseError(const Argv& argv) {
  absl::StatusOr<MegatronArgs> args = ParseMegatronArgs(argv);
  REQUIRE_FALSE(args.ok());
  CHECK(args.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(args.status().message());
}

TEST_CASE("no flags gives Megatron's defaults") {
  const MegatronArgs args = ParseOk({});
  CHECK(!args.num_layers.has_value());
  CHECK(args.position_embedding_type == "learned_absolute");
  CHECK(args.make_vocab_size_divisible_by == 128);
  CHECK(args.add_bias_linear);
  CHECK(args.check_for_nan_in_loss_and_grad);
  CHECK(args.notices.empty());
}

TEST_CASE("values in both spellings, with random inputs") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> layers(1, 200);
  std::uniform_real_distribution<double> lr(1e-6, 1e-2);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = layers(rng);
    const double rate = lr(rng);
    const std::string rate_text = absl::StrCat(rate);  // 6 significant digits
    const MegatronArgs a = ParseOk({"--num-layers", absl::StrCat(n), "--lr=" + rate_text});
    const MegatronArgs b = ParseOk({"--num-layers=" + absl::StrCat(n), "--lr", rate_text});
    CHECK(*a.num_layers == n);
    CHECK(*b.num_layers == n);
    CHECK(*a.lr == std::stod(rate_text));  // exact: same text, same strtod
    CHECK(*b.lr == *a.lr);
  }
}

TEST_CASE("a repeated flag's last value wins") {
  const MegatronArgs args =
      ParseOk({"--hidden-size", "64", "--seed", "1", "--hidden-size=128", "--seed", "99"});
  CHECK(*args.hidden_size == 128);
  CHECK(args.seed == 99);
  const MegatronArgs lists = ParseOk({"--data-path", "a", "b", "--data-path", "c"});
  CHECK(lists.data_path == Argv{"c"});
}

TEST_CASE("store_false and --no- forms") {
  const MegatronArgs args =
      ParseOk({"--disable-bias-linear", "--no-check-for-nan-in-loss-and-grad",
               "--no-create-attention-mask-in-dataloader", "--no-position-embedding", "--swiglu"});
  CHECK_FALSE(args.add_bias_linear);
  CHECK_FALSE(args.check_for_nan_in_loss_and_grad);
  CHECK_FALSE(args.create_attention_mask_in_dataloader);
  CHECK_FALSE(args.add_position_embedding);
  CHECK(args.swiglu);
  // BooleanOptionalAction: both forms are recognised (these are notices).
  const MegatronArgs rl = ParseOk({"--no-rl-partial-rollouts", "--rl-partial-rollouts"});
  CHECK(rl.notices.size() == 1);
  CHECK(ParseError({"--swiglu=1"}) == "--swiglu takes no value, got '1'");
}

TEST_CASE("nargs lists stop at the next flag; negative numbers are values") {
  const MegatronArgs args =
      ParseOk({"--data-path", "0.3", "/d/a_text_document", "0.7", "/d/b_text_document", "--split",
               "98,2,0", "--seed", "-5", "--moe-aux-loss-coeff", "0.01", "-0.5", "--lr", "-.5"});
  CHECK(args.data_path == Argv{"0.3", "/d/a_text_document", "0.7", "/d/b_text_document"});
  CHECK(*args.split == "98,2,0");
  CHECK(args.seed == -5);
  CHECK(args.moe_aux_loss_coeff == std::vector<double>{0.01, -0.5});
  CHECK(*args.lr == -0.5);
  // nargs='*' may be empty; nargs='+' may not.
  CHECK(ParseOk({"--valid-data-path", "--seed", "3"}).valid_data_path.empty());
  CHECK(ParseError({"--moe-aux-loss-coeff", "--seed", "3"}) ==
        "--moe-aux-loss-coeff expects one or more values");
  // '=' gives exactly one list element (argparse), so a following bare word is stray.
  CHECK(absl::StrContains(ParseError({"--data-path=a", "b"}), "unexpected argument 'b'"));
  // argparse reads "-1e-3" as a flag, not as a negative number.
  CHECK(ParseError({"--lr", "-1e-3"}) == "--lr expects a value");
}

TEST_CASE("malformed values name the flag and the value") {
  CHECK(ParseError({"--num-layers", "12x"}) == "--num-layers expects an int, got '12x'");
  CHECK(ParseError({"--num-layers=1.5"}) == "--num-layers expects an int, got '1.5'");
  CHECK(ParseError({"--seed", ""}) == "--seed expects an int, got ''");
  CHECK(absl::StrContains(ParseError({"--seed", "99999999999999999999"}), "out of the int64"));
  CHECK(ParseError({"--lr", "fast"}) == "--lr expects a float, got 'fast'");
  CHECK(ParseError({"--lr", "0x10"}) == "--lr expects a float, got '0x10'");
  CHECK(ParseError({"--hidden-size"}) == "--hidden-size expects a value");
  CHECK(ParseError({"--hidden-size", "--num-layers", "2"}) == "--hidden-size expects a value");
  CHECK(ParseOk({"--lr", "3e-4"}).lr == 3e-4);
  // Python's int()/float() ignore surrounding blanks and take underscores between digits.
  CHECK(ParseOk({"--seed", " 1_000 "}).seed == 1000);
  CHECK(*ParseOk({"--lr", "1_0.5"}).lr == 10.5);
  CHECK(ParseError({"--seed", "1__0"}) == "--seed expects an int, got '1__0'");
  CHECK(ParseError({"--seed", "_1"}) == "--seed expects an int, got '_1'");
}

TEST_CASE("choices are enforced with the list in the message") {
  CHECK(ParseError({"--normalization", "rmsnorm"}) ==
        "--normalization: invalid choice 'rmsnorm' (choose from LayerNorm, RMSNorm)");
  CHECK(absl::StrContains(ParseError({"--moe-router-load-balancing-type", "aux_loss", "bogus"}),
                          "invalid choice 'bogus'"));
  // Integer choices compare by value (argparse converts before checking).
  CHECK(ParseOk({"--timing-log-level", "02"}).notices.size() == 1);
  CHECK(absl::StrContains(ParseError({"--timing-log-level", "3"}), "choose from 0, 1, 2"));
  CHECK(ParseOk({"--normalization", "RMSNorm"}).normalization == "RMSNorm");
}

TEST_CASE("unknown flags suggest the nearest name") {
  CHECK(ParseError({"--num-layer", "2"}) ==
        "unknown flag --num-layer (did you mean --num-layers?)");
  CHECK(ParseError({"--hidden_size=8"}) ==
        "unknown flag --hidden_size (did you mean --hidden-size?)");
  CHECK(ParseError({"--tensor-model-paralel-size", "2"}) ==
        "unknown flag --tensor-model-paralel-size (did you mean --tensor-model-parallel-size?)");
  CHECK(ParseError({"--xyzzy-plugh-frobnicate"}) == "unknown flag --xyzzy-plugh-frobnicate");
  // allow_abbrev=False: a prefix is not a flag.
  CHECK(absl::StrContains(ParseError({"--micro-batch", "1"}), "unknown flag --micro-batch"));
  CHECK(absl::StrContains(ParseError({"stray"}), "unexpected argument 'stray' at position 0"));
  CHECK(absl::StrContains(ParseError({"--"}), "positional"));
}

TEST_CASE("-h/--help stops parsing like argparse's help action") {
  CHECK_FALSE(ParseOk({"--seed", "3"}).help);
  const MegatronArgs args = ParseOk({"--seed", "3", "--help", "--no-such-flag"});
  CHECK(args.help);
  CHECK(args.seed == 3);
  CHECK(ParseOk({"-h"}).help);
  // Errors before the help flag still count (argparse reads left to right).
  CHECK(absl::StartsWith(ParseError({"--no-such-flag", "--help"}), "unknown flag --no-such-flag"));
}

TEST_CASE("unsupported Megatron flags are a clear error") {
  CHECK(ParseError({"--fp16"}) ==
        "--fp16 is a Megatron flag MXMACA does not support yet (MXMACA trains in fp32 or "
        "with --bf16)");
  CHECK(ParseError({"--use-legacy-models"})
            .rfind("--use-legacy-models is a Megatron flag MXMACA does not support yet", 0) == 0);
  CHECK(ParseError({"--rampup-batch-size", "16", "8", "300"})
            .rfind("--rampup-batch-size is a Megatron flag", 0) == 0);
}

TEST_CASE("notice flags are accepted once each, in order") {
  const MegatronArgs args =
      ParseOk({"--use-flash-attn", "--transformer-impl", "local", "--num-layers", "2",
               "--use-flash-attn", "--distributed-backend=gloo", "--wandb-project", "p"});
  REQUIRE(args.notices.size() == 4);
  CHECK(args.notices[0] ==
        "notice: --use-flash-attn is accepted and has no effect in MXMACA (kernel and fusion "
        "choices are MXMACA's own)");
  CHECK(absl::StartsWith(args.notices[1], "notice: --transformer-impl is accepted"));
  CHECK(absl::StartsWith(args.notices[2], "notice: --distributed-backend is accepted"));
  CHECK(absl::StartsWith(args.notices[3], "notice: --wandb-project is accepted"));
  CHECK(*args.num_layers == 2);
  // Notice flags still check their values.
  CHECK(absl::StrContains(ParseError({"--transformer-impl", "fast"}), "invalid choice"));
}

// A valid value for `flag` (first choice, or a number of the right type).
std::string SampleValue(const FlagSpec& flag) {
  const std::vector<std::string> choices = flag.ChoiceList();
  if (!choices.empty()) return choices.front();
  switch (flag.type) {
    case FlagType::kInt:
      return "3";
    case FlagType::kFloat:
      return "0.25";
    default:
      return "value";
  }
}

TEST_CASE("every implemented and notice flag parses with a valid value") {
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.cls == FlagClass::kUnsupported) continue;
    INFO(flag.name);
    Argv argv = {flag.name};
    if (flag.action == FlagAction::kStore) argv.push_back(SampleValue(flag));
    const MegatronArgs args = ParseOk(argv);
    CHECK(args.notices.size() == (flag.cls == FlagClass::kNotice ? 1u : 0u));
    if (flag.cls == FlagClass::kImplemented && flag.action == FlagAction::kStore) {
      const std::string repr = *MegatronArgRepr(args, flag.Dest());
      CHECK(absl::StrContains(repr, flag.type == FlagType::kFloat ? "0.25" : SampleValue(flag)));
    }
  }
}

TEST_CASE("ChangedArgs names the fields that differ from Megatron's defaults") {
  CHECK(ChangedArgs(ParseOk({})).empty());
  // Giving a default value explicitly is not a change; notices are not fields.
  CHECK(ChangedArgs(ParseOk({"--seed", "1234", "--use-flash-attn"})).empty());
  CHECK(ChangedArgs(ParseOk({"--qk-layernorm", "--seed", "7", "--disable-bias-linear",
                             "--data-path", "x"})) ==
        std::vector<std::string>{"add_bias_linear", "data_path", "qk_layernorm", "seed"});
}

TEST_CASE("FormatMegatronArgs prints Megatron's argument block") {
  const MegatronArgs args = ParseOk({"--num-layers", "4", "--norm-epsilon", "1e-6"});
  const std::string text = FormatMegatronArgs(args);
  CHECK(absl::StartsWith(text, "------------------------ arguments ------------------------\n"));
  CHECK(absl::StrContains(text, "\n  num_layers " + std::string(48 - 10, '.') + " 4\n"));
  // Megatron-Core 0.19's dest for --norm-epsilon (MegatronArgs::norm_epsilon).
  CHECK(absl::StrContains(text, " layernorm_epsilon " + std::string(48 - 17, '.') + " 1e-06\n"));
  CHECK(absl::StrContains(text, " tensorboard_dir " + std::string(48 - 15, '.') + " None\n"));
  CHECK(absl::StrContains(text, " normalization " + std::string(48 - 13, '.') + " 'LayerNorm'\n"));
  CHECK(absl::EndsWith(text, "-------------------- end of arguments ---------------------\n"));
}

}  // namespace
}  // namespace mxmaca::api
