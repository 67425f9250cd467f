// api/convert/hf_convert_test.cc: `mxmaca convert` checked end to end on tiny models.
//
// Each case builds an MXMACA checkpoint of a tiny model (every parameter, biases and norm
// weights included, set to seeded random values, so a misplaced row changes the result),
// exports it to Hugging Face, and checks:
//   1. round trip: importing the export gives back every tensor bit for bit (fp32, one
//      file and sharded), and args that reconstruct the same model;
//   2. an independent reference: hf_reference.py (torch, float64, the transformers
//      definitions, reading the export by Hugging Face names) gives per-token losses on
//      fresh random tokens within kTolerance of MXMACA's own EvalForward on the original
//      checkpoint — and a deliberately swapped q/k split (--swap-qk) does not.
// Plus the refusals (what the target cannot express) and bad input (missing tensor,
// wrong shape, truncated file, config fields MXMACA cannot run), each naming the value.
#include <stdio.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/stage_checkpoint.h"
#include "api/args/megatron_args.h"
#include "api/convert/hf_config.h"
#include "api/convert/hf_export.h"
#include "api/convert/hf_import.h"
#include "api/convert/hf_safetensors.h"
#include "api/train/checkpoint_args.h"
#include "api/train/train_setup.h"
#include "kernels/rope_frequencies.h"
#include "layers/gpt_stage.h"
#include "layers/moe/moe_layer.h"

namespace mxmaca::api::convert {
namespace {

using actors::checkpoint::CheckpointReader;
// MakeTempDir: a new empty directory under $TEST_TMPDIR (Bazel) or /tmp.
std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/hf_XXXXXX";
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  return templ;
}

int64_t NumElementsOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// kTolerance: max |MXMACA fp32 loss - float64 reference loss| per token, in nats. MXMACA
// computes in fp32 (unit roundoff 6e-8); with these sizes (h <= 48, f <= 96, 2 layers,
// V = 100, losses ~ 4.6 nats) the accumulated error of the GEMMs, softmaxes and norms is
// of order 1e-6 (measured: printed by each case); 1e-4 leaves two orders of margin and
// is still ~1000x below what a wrong split gives (the --swap-qk check).
constexpr double kTolerance = 1e-4;

const std::string kDir = "api/convert/";

std::string Run(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

struct Model {
  std::vector<std::string> argv;
  MegatronArgs args;
  layers::GptConfig config;
};

Model MakeModel(std::vector<std::string> argv) {
  argv.insert(argv.end(), {"--seq-length", "16", "--max-position-embeddings", "32",
                           "--tokenizer-type", "NullTokenizer", "--vocab-size", "99",
                           "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-4"});
  absl::StatusOr<MegatronArgs> a = ParseMegatronArgs(argv);
  INFO(a.status().message());
  REQUIRE(a.ok());
  const absl::Status valid = ValidateAndDeriveArgs(&*a, 1);
  INFO(valid.message());
  REQUIRE(valid.ok());
  absl::StatusOr<layers::GptConfig> c = GptConfigFromArgs(*a, 100);
  INFO(c.status().message());
  REQUIRE(c.ok());
  c->hidden_dropout = 0.0f;
  c->attention_dropout = 0.0f;
  return {argv, *a, *c};
}

// MakeCheckpoint: a checkpoint of `m` at iteration 3 in `dir` with random parameters;
// returns the stage holding them.
std::unique_ptr<layers::GptStage> MakeCheckpoint(const Model& m, const std::string& dir,
                                                 uint32_t seed) {
  layers::StageLayout layout;
  layout.first_layer = 0;
  layout.last_layer = m.config.num_layers;
  absl::StatusOr<std::unique_ptr<layers::GptStage>> stage =
      layers::GptStage::Create(m.config, layout);
  INFO(stage.status().message());
  REQUIRE(stage.ok());
  layers::ParameterStore& store = (*stage)->parameters();
  std::mt19937 gen(seed);
  for (int i = 0; i < store.size(); ++i) {
    const std::string& name = store.info(i).spec.name;
    const bool norm_weight = absl::StrContains(name, "layernorm.weight");
    const bool bias = absl::EndsWith(name, ".bias");
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const float scale = norm_weight ? 0.3f : bias ? 0.1f : 0.25f;
    float* p = store.param(i);
    for (int64_t e = 0; e < store.info(i).numel; ++e)
      p[e] = (norm_weight ? 1.0f : 0.0f) + scale * dist(gen);
  }
  absl::StatusOr<actors::checkpoint::CheckpointWriter> w =
      actors::checkpoint::CheckpointWriter::Begin(dir, 3);
  REQUIRE(w.ok());
  REQUIRE(actors::WriteStageShard(*w, "stage0", store, nullptr).ok());
  nlohmann::json state = {{"iteration", 3}};
  REQUIRE(w->Commit(CheckpointArgsJson(m.argv, m.args, m.config), state).ok());
  return std::move(*stage);
}

// ExpectSameTensors: every "model/" tensor of `a` is in `b` with the same shape and bytes.
void ExpectSameTensors(const std::string& a_dir, const std::string& b_dir) {
  absl::StatusOr<CheckpointReader> a = CheckpointReader::Open(a_dir);
  absl::StatusOr<CheckpointReader> b = CheckpointReader::Open(b_dir);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<std::string> names_a, names_b;
  for (const std::string& n : a->TensorNames()) {
    if (absl::StartsWith(n, "model/")) names_a.push_back(n);
  }
  for (const std::string& n : b->TensorNames()) names_b.push_back(n);
  CHECK(names_a == names_b);
  for (const std::string& n : names_a) {
    INFO(n);
    const std::vector<int64_t> shape = *a->FullShape(n);
    REQUIRE(b->HasTensor(n));
    REQUIRE(*b->FullShape(n) == shape);
    std::vector<float> va(NumElementsOf(shape)), vb(va.size());
    const std::vector<int64_t> zero(shape.size(), 0);
    REQUIRE(a->ReadSlice(n, zero, shape, va.data()).ok());
    REQUIRE(b->ReadSlice(n, zero, shape, vb.data()).ok());
    CHECK(BitEqual(va, vb));
  }
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

// MaxLossDifference: max over tokens of |MXMACA's EvalForward loss - the reference's| on
// fresh random tokens and labels (b = 2, s = 16), with the reference run on `hf_dir`.
double MaxLossDifference(layers::GptStage& stage, const Model& m, const std::string& hf_dir,
                         uint32_t seed, const std::string& reference_flags = "") {
  const int64_t b = 2, s = 16;
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(m.config.vocab_size) - 1);
  std::vector<int32_t> tokens(b * s), labels(b * s);
  for (int32_t& t : tokens) t = tok(gen);
  for (int32_t& t : labels) t = tok(gen);
  layers::MicroBatchInput in;
  in.micro_batch_size = b;
  in.seq_length = s;
  in.tokens = tokens;
  in.labels = labels;
  layers::StageOutput out;
  absl::Status st = stage.EvalForward(in, &out);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(out.token_losses.size() == static_cast<size_t>(b * s));
  nlohmann::json io;
  io["tokens"] = nlohmann::json::array();
  io["labels"] = nlohmann::json::array();
  for (int64_t r = 0; r < b; ++r) {
    io["tokens"].push_back(
        std::vector<int32_t>(tokens.begin() + r * s, tokens.begin() + (r + 1) * s));
    io["labels"].push_back(
        std::vector<int32_t>(labels.begin() + r * s, labels.begin() + (r + 1) * s));
  }
  const std::string tmp = MakeTempDir();
  std::ofstream(tmp + "/in.json") << io.dump();
  int code = 0;
  const std::string log = Run("/usr/bin/python3 " + kDir + "hf_reference.py " + hf_dir + " " + tmp +
                                  "/in.json " + tmp + "/out.json " + reference_flags,
                              &code);
  INFO(log);
  REQUIRE(code == 0);
  const nlohmann::json out_json = ReadJson(tmp + "/out.json");
  const nlohmann::json& ref = out_json["token_losses"];
  if (out_json.contains("inv_freq")) {
    // RoPE's angles from config.json (transformers' formulas, float64) against MXMACA's fp32
    // ones: a pow and a few scalings, each within an fp32 ulp (and the fp32 position scale,
    // one more) — 1e-6 relative.
    const int64_t dim = m.config.rotary_dim();
    std::vector<float> mine(static_cast<size_t>(dim / 2));
    kernels::RopeInvFreq(m.config.rope_frequencies(), dim, mine.data());
    // Linear interpolation scales MXMACA's positions, transformers' frequencies: the angle
    // p * inv_freq is the same product.
    const double position_scale = kernels::RopePositionScale(m.config.rope_frequencies());
    REQUIRE(out_json["inv_freq"].size() == mine.size());
    for (size_t j = 0; j < mine.size(); ++j) {
      INFO("inv_freq " << j);
      const double want = out_json["inv_freq"][j].get<double>();
      CHECK(std::fabs(mine[j] * position_scale - want) <= 1e-6 * want);
    }
  }
  double max_diff = 0.0;
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t t = 0; t < s; ++t) {
      const double d = std::fabs(ref[r][t].get<double>() - out.token_losses[r * s + t]);
      max_diff = std::max(max_diff, d);
    }
  }
  return max_diff;
}

// CheckModel: the whole check of one model: export, reference, import round trip. Each of
// `wrong_readings` (hf_reference.py flags reading the export deliberately wrong) must move
// the reference's losses by more than 100 x kTolerance.
void CheckModel(const Model& m, const std::string& expected_type, uint32_t seed,
                const std::vector<std::string>& wrong_readings = {"--swap-qk"}) {
  const std::string root = MakeTempDir();
  const std::string ckpt = root + "/ckpt", hf = root + "/hf", back = root + "/back";
  std::unique_ptr<layers::GptStage> stage = MakeCheckpoint(m, ckpt, seed);

  HfExportOptions ex;
  ex.load = ckpt;
  ex.save = hf;
  absl::StatusOr<std::vector<std::string>> lines = ExportToHuggingFace(ex);
  INFO(lines.status().message());
  REQUIRE(lines.ok());
  const nlohmann::json cfg = ReadJson(hf + "/config.json");
  CHECK(cfg["model_type"] == expected_type);
  CHECK(cfg["vocab_size"] == 100);  // the true vocabulary, not the padded 128
  CHECK(cfg["torch_dtype"] == "float32");

  // 2. The independent reference, and a wrong split that it must catch.
  const double diff = MaxLossDifference(*stage, m, hf, seed + 1);
  std::printf("%s: max |MXMACA - reference| token loss = %.3g nats\n", expected_type.c_str(), diff);
  CHECK(diff < kTolerance);
  for (const std::string& wrong : wrong_readings) {
    const double swapped = MaxLossDifference(*stage, m, hf, seed + 1, wrong);
    std::printf("%s: reference with %s: %.3g nats\n", expected_type.c_str(), wrong.c_str(),
                swapped);
    INFO(wrong);
    CHECK(swapped > 100 * kTolerance);
  }

  // 1. Round trip, bit for bit, and the reconstructed model.
  HfImportOptions im;
  im.load = hf;
  im.save = back;
  im.seq_length = m.config.seq_length;
  absl::StatusOr<std::vector<std::string>> imported = ImportFromHuggingFace(im);
  INFO(imported.status().message());
  REQUIRE(imported.ok());
  ExpectSameTensors(ckpt, back);
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(back);
  REQUIRE(r.ok());
  CHECK(r->iteration() == 0);
  CHECK(CheckModelMatchesCheckpoint(m.config, r->args(), back).ok());
  absl::StatusOr<layers::GptConfig> c = ModelConfigFromCheckpointArgs(r->args());
  REQUIRE(c.ok());
  CHECK(c->gelu_tanh_approximation == m.config.gelu_tanh_approximation);
  CHECK(c->norm_epsilon == m.config.norm_epsilon);
  CHECK(c->rotary_base == m.config.rotary_base);
  CHECK(c->seq_length == m.config.seq_length);

  // Sharded export (tiny shards) round-trips too; bf16 export gives the rounded values.
  const std::string sharded = root + "/hf_sharded", back2 = root + "/back2";
  ex.save = sharded;
  ex.max_shard_bytes = 8192;
  REQUIRE(ExportToHuggingFace(ex).ok());
  CHECK(std::filesystem::exists(sharded + "/model.safetensors.index.json"));
  std::set<std::string> files;
  const nlohmann::json index = ReadJson(sharded + "/model.safetensors.index.json");
  for (const auto& [name, file] : index["weight_map"].items()) {
    files.insert(file.get<std::string>());
  }
  CHECK(files.size() >= 2);
  for (const std::string& file : files) CHECK(std::filesystem::exists(sharded + "/" + file));
  im.load = sharded;
  im.save = back2;
  REQUIRE(ImportFromHuggingFace(im).ok());
  ExpectSameTensors(ckpt, back2);

  ex.save = root + "/hf_bf16";
  ex.max_shard_bytes = 0;
  ex.dtype = HfDtype::kBf16;
  REQUIRE(ExportToHuggingFace(ex).ok());
  CHECK(ReadJson(ex.save + "/config.json")["torch_dtype"] == "bfloat16");
  absl::StatusOr<HfTensors> f32 = ReadHfSafetensors(hf), bf16 = ReadHfSafetensors(ex.save);
  REQUIRE(f32.ok());
  REQUIRE(bf16.ok());
  for (const auto& [name, t] : *f32) {
    INFO(name);
    const HfTensor& u = bf16->at(name);
    REQUIRE(u.values.size() == t.values.size());
    for (size_t i = 0; i < t.values.size(); ++i) {
      // bf16 keeps 8 significant bits: within half an ulp (2^-9 relative).
      REQUIRE(std::fabs(u.values[i] - t.values[i]) <= std::fabs(t.values[i]) * (1.0 / 256) + 1e-30);
    }
  }
}

TEST_CASE("gpt2: export, reference forward, import round trip") {
  CheckModel(MakeModel({"--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4"}),
             "gpt2", 11);
}

TEST_CASE("gpt2 with the erf GELU (activation_function gelu)") {
  Model m = MakeModel({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4",
                       "--ffn-hidden-size", "48", "--no-bias-gelu-fusion"});
  REQUIRE(!m.config.gelu_tanh_approximation);
  CheckModel(m, "gpt2", 12);
}

// LlamaFlags: the Llama family's RMSNorm, SwiGLU and rotate-half RoPE, then `extra`.
std::vector<std::string> LlamaFlags(std::vector<std::string> extra) {
  std::vector<std::string> f = {"--normalization", "RMSNorm", "--swiglu",
                                "--position-embedding-type", "rope"};
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

TEST_CASE("llama: GQA, untied, no biases") {
  CheckModel(MakeModel({"--num-layers",
                        "2",
                        "--hidden-size",
                        "48",
                        "--num-attention-heads",
                        "6",
                        "--group-query-attention",
                        "--num-query-groups",
                        "2",
                        "--ffn-hidden-size",
                        "80",
                        "--normalization",
                        "RMSNorm",
                        "--swiglu",
                        "--position-embedding-type",
                        "rope",
                        "--disable-bias-linear",
                        "--untie-embeddings-and-output-weights",
                        "--rotary-base",
                        "500000",
                        "--norm-epsilon",
                        "1e-6"}),
             "llama", 21);
}

TEST_CASE("llama: tied, biases on every linear, head_dim != hidden / heads") {
  CheckModel(MakeModel({"--num-layers", "2", "--hidden-size", "48", "--num-attention-heads", "4",
                        "--kv-channels", "16", "--ffn-hidden-size", "96", "--normalization",
                        "RMSNorm", "--swiglu", "--position-embedding-type", "rope"}),
             "llama", 31);
}

// Qwen2 (Qwen2ForCausalLM): Llama's layout with biases on q, k and v only (Megatron's
// --disable-bias-linear --add-qkv-bias), GQA, tied.
TEST_CASE("qwen2: q/k/v biases only, GQA, tied") {
  CheckModel(
      MakeModel(LlamaFlags({"--num-layers", "2", "--hidden-size", "48", "--num-attention-heads",
                            "6", "--group-query-attention", "--num-query-groups", "2",
                            "--ffn-hidden-size", "64", "--disable-bias-linear", "--add-qkv-bias",
                            "--rotary-base", "1000000", "--norm-epsilon", "1e-6"})),
      "qwen2", 41);
}

// Qwen3 (Qwen3ForCausalLM): RMSNorm q_norm / k_norm over each head before RoPE (Megatron's
// --qk-layernorm), no biases, head_dim != hidden / heads, untied. The reference reading the
// norms the wrong way round must be caught too.
TEST_CASE("qwen3: q/k norms, GQA, head_dim != hidden / heads, untied") {
  CheckModel(MakeModel(LlamaFlags({"--num-layers", "2", "--hidden-size", "48",
                                   "--num-attention-heads", "4", "--group-query-attention",
                                   "--num-query-groups", "2", "--kv-channels", "16",
                                   "--ffn-hidden-size", "64", "--disable-bias-linear",
                                   "--qk-layernorm", "--untie-embeddings-and-output-weights"})),
             "qwen3", 51, {"--swap-qk", "--swap-qk-norm"});
}

// Llama 3.1's rope_scaling (rope_type llama3): written from --use-rope-scaling /
// --rope-scaling-factor with Megatron's fixed bands, read back into them; the reference's
// inverse frequencies (transformers' _compute_llama3_parameters) equal MXMACA's. A small
// --rotary-base puts some of the 8 frequency pairs in each band (low: divided by the
// factor; medium: smoothed; high: kept).
TEST_CASE("llama: Llama-3 RoPE scaling (rope_scaling llama3), factor 32") {
  Model m = MakeModel(
      LlamaFlags({"--num-layers", "1", "--hidden-size", "64", "--num-attention-heads", "4",
                  "--ffn-hidden-size", "96", "--disable-bias-linear", "--use-rope-scaling",
                  "--rope-scaling-factor", "32", "--rotary-base", "500000"}));
  CheckModel(m, "llama", 61);
  const std::string root = MakeTempDir();
  MakeCheckpoint(m, root + "/ckpt", 61);
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = root + "/hf";
  REQUIRE(ExportToHuggingFace(ex).ok());
  const nlohmann::json rs = ReadJson(root + "/hf/config.json")["rope_scaling"];
  CHECK(rs["rope_type"] == "llama3");
  CHECK(rs["factor"] == 32.0);
  CHECK(rs["original_max_position_embeddings"] == 8192);
  // Every band is populated: wavelengths 2 pi 500000^(2j/16) from 6.3 to ~1.3e6.
  std::vector<float> plain(8), scaled(8);
  kernels::RopeFrequencies f = m.config.rope_frequencies();
  kernels::RopeInvFreq(f, 16, scaled.data());
  f.llama3_scaling = false;
  kernels::RopeInvFreq(f, 16, plain.data());
  int kept = 0, divided = 0, smoothed = 0;
  for (int j = 0; j < 8; ++j) {
    kept += scaled[j] == plain[j];
    divided += scaled[j] == plain[j] / 32.0f;
    smoothed += scaled[j] != plain[j] && scaled[j] != plain[j] / 32.0f;
  }
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(smoothed > 0);
}

// Linear position interpolation (rope_type linear = --rotary-seq-len-interpolation-factor).
TEST_CASE("qwen2: linear RoPE scaling (rope_scaling linear), factor 4") {
  CheckModel(
      MakeModel(LlamaFlags({"--num-layers", "1", "--hidden-size", "48", "--num-attention-heads",
                            "6", "--ffn-hidden-size", "64", "--disable-bias-linear",
                            "--add-qkv-bias", "--rotary-seq-len-interpolation-factor", "4"})),
      "qwen2", 71);
}

// Mixtral: every layer MoE (Megatron's default router: top-k on the logits, softmax over
// the k = Mixtral's softmax, top-k, renormalise), SwiGLU experts, no biases.
std::vector<std::string> MixtralFlags(std::vector<std::string> extra) {
  std::vector<std::string> f =
      LlamaFlags({"--disable-bias-linear", "--norm-epsilon", "1e-5", "--rotary-base", "1000000"});
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

// MixtralGqaFlags: 2 layers, GQA, untied, 4 experts top-2 of FFN 40, and `ffn` as the dense
// --ffn-hidden-size (unused: every layer is MoE).
std::vector<std::string> MixtralGqaFlags(const std::string& ffn) {
  return MixtralFlags({"--num-layers",
                       "2",
                       "--hidden-size",
                       "48",
                       "--num-attention-heads",
                       "6",
                       "--group-query-attention",
                       "--num-query-groups",
                       "2",
                       "--ffn-hidden-size",
                       ffn,
                       "--untie-embeddings-and-output-weights",
                       "--num-experts",
                       "4",
                       "--moe-router-topk",
                       "2",
                       "--moe-ffn-hidden-size",
                       "40",
                       "--moe-aux-loss-coeff",
                       "0.02"});
}

TEST_CASE("mixtral: 4 experts, top-2, GQA, untied") {
  Model m = MakeModel(MixtralGqaFlags("40"));
  REQUIRE(m.config.moe != nullptr);
  CheckModel(m, "mixtral", 41, {"--swap-qk", "--swap-experts", "--swap-w1-w3"});
  // The layout and config.json of such an export, here with a dense --ffn-hidden-size (unused:
  // every layer is MoE) that config.json cannot state: the export says so.
  m = MakeModel(MixtralGqaFlags("64"));
  const std::string root = MakeTempDir();
  MakeCheckpoint(m, root + "/ckpt", 42);
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = root + "/hf";
  absl::StatusOr<std::vector<std::string>> exported = ExportToHuggingFace(ex);
  REQUIRE(exported.ok());
  CHECK(absl::StrContains(absl::StrJoin(*exported, "\n"),
                          "not exported: --ffn-hidden-size 64 (unused: every layer is MoE; "
                          "intermediate_size is --moe-ffn-hidden-size 40"));
  const nlohmann::json cfg = ReadJson(ex.save + "/config.json");
  CHECK(cfg["architectures"][0] == "MixtralForCausalLM");
  CHECK(cfg["num_local_experts"] == 4);
  CHECK(cfg["num_experts_per_tok"] == 2);
  CHECK(cfg["intermediate_size"] == 40);  // the experts' FFN, not --ffn-hidden-size
  CHECK(cfg["num_key_value_heads"] == 2);
  CHECK(cfg["router_aux_loss_coef"].get<double>() == 0.02);
  CHECK(cfg["output_router_logits"] == false);
  CHECK(cfg["sliding_window"].is_null());
  CHECK(cfg["tie_word_embeddings"] == false);
  CHECK(!cfg.contains("attention_bias"));
  absl::StatusOr<HfTensors> t = ReadHfSafetensors(ex.save);
  REQUIRE(t.ok());
  CHECK(t->at("model.layers.1.block_sparse_moe.gate.weight").shape == std::vector<int64_t>{4, 48});
  CHECK(t->at("model.layers.1.block_sparse_moe.experts.3.w1.weight").shape ==
        std::vector<int64_t>{40, 48});
  CHECK(t->at("model.layers.1.block_sparse_moe.experts.3.w3.weight").shape ==
        std::vector<int64_t>{40, 48});
  CHECK(t->at("model.layers.1.block_sparse_moe.experts.3.w2.weight").shape ==
        std::vector<int64_t>{48, 40});
  // embed; per layer 2 norms, q, k, v, o, the gate, 3 per expert; the final norm; lm_head.
  CHECK(t->size() == 1 + 2 * (6 + 1 + 3 * 4) + 1 + 1);
  // w1 / w3 are the gate / up halves of the expert's fc1 (rows [0, f) and [f, 2f)).
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(ex.load);
  REQUIRE(r.ok());
  std::vector<float> fc1(80 * 48);
  REQUIRE(r->ReadSlice("model/decoder.layers.1.mlp.experts.linear_fc1.weight3", {0, 0}, {80, 48},
                       fc1.data())
              .ok());
  CHECK(BitEqual(t->at("model.layers.1.block_sparse_moe.experts.3.w1.weight").values,
                 std::vector<float>(fc1.begin(), fc1.begin() + 40 * 48)));
  CHECK(BitEqual(t->at("model.layers.1.block_sparse_moe.experts.3.w3.weight").values,
                 std::vector<float>(fc1.begin() + 40 * 48, fc1.end())));
  // The imported args reproduce the router: dropless, softmax, top-k, every layer MoE.
  HfImportOptions im;
  im.load = ex.save;
  im.save = root + "/back";
  absl::StatusOr<std::vector<std::string>> lines = ImportFromHuggingFace(im);
  REQUIRE(lines.ok());
  absl::StatusOr<CheckpointReader> back = CheckpointReader::Open(im.save);
  REQUIRE(back.ok());
  absl::StatusOr<layers::GptConfig> c = ModelConfigFromCheckpointArgs(back->args());
  REQUIRE(c.ok());
  REQUIRE(c->moe != nullptr);
  CHECK(c->moe->router.num_experts == 4);
  CHECK(c->moe->router.topk == 2);
  CHECK(c->moe->expert.ffn_hidden_size == 40);
  CHECK(c->moe->router.score_function == layers::moe::ScoreFunction::kSoftmax);
  CHECK(!c->moe->router.pre_softmax);
  CHECK(!c->moe->router.capacity_factor.has_value());
  CHECK(c->moe->router.load_balancing_type == layers::moe::LoadBalancingType::kAuxLoss);
  CHECK(c->moe->router.aux_loss_coeff == 0.02);
  CHECK(c->moe->shared_expert_ffn_hidden_size == 0);
  CHECK(c->moe_layers == std::vector<bool>{true, true});
}

// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's q/k norms and a MoE block on every layer, the
// experts under mlp.experts.x.{gate,up,down}_proj. norm_topk_prob true is Megatron's default
// router (renormalised top-k), false is --moe-router-pre-softmax; the reference follows
// modeling_qwen3_moe.py for both, and must catch swapped experts, gate/up and q/k norms.
std::vector<std::string> Qwen3MoeFlags(std::vector<std::string> extra) {
  std::vector<std::string> f = MixtralGqaFlags("64");
  f.insert(f.end(), {"--qk-layernorm", "--kv-channels", "16"});
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

TEST_CASE("qwen3_moe: q/k norms, 4 experts, top-2, renormalised (norm_topk_prob true)") {
  Model m = MakeModel(Qwen3MoeFlags({}));
  CheckModel(m, "qwen3_moe", 81, {"--swap-qk", "--swap-qk-norm", "--swap-experts", "--swap-w1-w3"});
  const std::string root = MakeTempDir();
  MakeCheckpoint(m, root + "/ckpt", 82);
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = root + "/hf";
  REQUIRE(ExportToHuggingFace(ex).ok());
  const nlohmann::json cfg = ReadJson(root + "/hf/config.json");
  CHECK(cfg["architectures"][0] == "Qwen3MoeForCausalLM");
  CHECK(cfg["num_experts"] == 4);
  CHECK(cfg["num_experts_per_tok"] == 2);
  CHECK(cfg["moe_intermediate_size"] == 40);
  CHECK(cfg["intermediate_size"] == 64);  // the dense MLP's (mlp_only_layers), unused here
  CHECK(cfg["norm_topk_prob"] == true);
  CHECK(cfg["decoder_sparse_step"] == 1);
  CHECK(cfg["mlp_only_layers"] == nlohmann::json::array());
  CHECK(cfg["head_dim"] == 16);
  absl::StatusOr<HfTensors> t = ReadHfSafetensors(root + "/hf");
  REQUIRE(t.ok());
  CHECK(t->at("model.layers.1.mlp.gate.weight").shape == std::vector<int64_t>{4, 48});
  CHECK(t->at("model.layers.1.mlp.experts.3.gate_proj.weight").shape ==
        std::vector<int64_t>{40, 48});
  CHECK(t->at("model.layers.1.mlp.experts.3.down_proj.weight").shape ==
        std::vector<int64_t>{48, 40});
  CHECK(t->count("model.layers.1.self_attn.q_norm.weight") == 1);
  CHECK(t->count("model.layers.1.block_sparse_moe.gate.weight") == 0);
}

TEST_CASE("qwen3_moe: --moe-router-pre-softmax is norm_topk_prob false, both ways") {
  Model m = MakeModel(Qwen3MoeFlags({"--moe-router-pre-softmax"}));
  CheckModel(m, "qwen3_moe", 91, {"--swap-experts"});
  const std::string root = MakeTempDir();
  MakeCheckpoint(m, root + "/ckpt", 92);
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = root + "/hf";
  REQUIRE(ExportToHuggingFace(ex).ok());
  CHECK(ReadJson(root + "/hf/config.json")["norm_topk_prob"] == false);
  // Mixtral has neither q/k norms nor un-renormalised routing: refused, naming the first.
  absl::StatusOr<HfModelType> mixtral = ChooseHfModelType(m.config, "mixtral");
  REQUIRE(!mixtral.ok());
  CHECK(absl::StrContains(mixtral.status().message(), "--qk-layernorm is set"));
}

TEST_CASE("mixtral: 3 experts, top-1, tied, head_dim != hidden / heads") {
  CheckModel(
      MakeModel(MixtralFlags({"--num-layers", "2", "--hidden-size", "32", "--num-attention-heads",
                              "4", "--kv-channels", "12", "--num-experts", "3", "--moe-router-topk",
                              "1", "--ffn-hidden-size", "24", "--moe-ffn-hidden-size", "24",
                              "--moe-router-load-balancing-type", "none"})),
      "mixtral", 51, {"--swap-qk", "--swap-experts", "--swap-w1-w3"});
}

// --- refusals ---------------------------------------------------------------------------

layers::GptConfig LlamaConfig() {
  return MakeModel({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4",
                    "--normalization", "RMSNorm", "--swiglu", "--position-embedding-type", "rope",
                    "--disable-bias-linear"})
      .config;
}

void ExpectRefused(const layers::GptConfig& c, const std::string& type, const std::string& words) {
  absl::StatusOr<HfModelType> t = ChooseHfModelType(c, type);
  INFO(type << ": " << t.status().message());
  REQUIRE(!t.ok());
  CHECK(absl::StrContains(t.status().message(), words));
}

TEST_CASE("export refuses what the target cannot express, naming the value") {
  REQUIRE(ChooseHfModelType(LlamaConfig(), "auto").ok());
  CHECK(ChooseHfModelType(LlamaConfig(), "auto")->model_type == "llama");
  CHECK(ChooseHfModelType(LlamaConfig(), "mistral")->model_type == "mistral");
  layers::GptConfig c = LlamaConfig();
  c.qk_layernorm = true;
  ExpectRefused(c, "llama", "--qk-layernorm");
  c = LlamaConfig();
  c.apply_layernorm_1p = true;
  ExpectRefused(c, "llama", "--apply-layernorm-1p");
  c = LlamaConfig();
  c.rotary_interleaved = true;
  ExpectRefused(c, "llama", "--rotary-interleaved");
  c = LlamaConfig();
  c.moe = std::make_shared<layers::moe::MoELayerConfig>();
  ExpectRefused(c, "llama", "Mixture-of-Experts");
  ExpectRefused(c, "mistral", "Mixture-of-Experts model (--num-experts 0)");
  ExpectRefused(LlamaConfig(), "mixtral", "--num-experts is not set");
  c = LlamaConfig();
  c.add_qkv_bias = true;
  ExpectRefused(c, "llama", "--add-qkv-bias");
  ExpectRefused(LlamaConfig(), "gpt2",
                "--normalization is RMSNorm but Hugging Face gpt2 expects LayerNorm");
  c = MakeModel({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4",
                 "--untie-embeddings-and-output-weights"})
          .config;
  ExpectRefused(c, "auto", "--untie-embeddings-and-output-weights");
  ExpectRefused(c, "llama", "--normalization is LayerNorm");
  ExpectRefused(LlamaConfig(), "falcon", "--model-type is falcon");
  // Qwen: auto picks qwen3 for q/k norms, qwen2 for q/k/v-only biases; each refuses the other's.
  c = LlamaConfig();
  c.qk_layernorm = true;
  CHECK(ChooseHfModelType(c, "auto")->model_type == "qwen3");
  ExpectRefused(c, "qwen2", "--qk-layernorm is set");
  c.add_qkv_bias = true;
  ExpectRefused(c, "qwen3", "--add-qkv-bias is set");
  c = LlamaConfig();
  c.add_qkv_bias = true;
  CHECK(ChooseHfModelType(c, "auto")->model_type == "qwen2");
  ExpectRefused(LlamaConfig(), "qwen2", "--add-qkv-bias is not set");
  ExpectRefused(LlamaConfig(), "qwen3", "--qk-layernorm is not set");
  c = MakeModel(LlamaFlags({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads",
                            "4", "--qk-layernorm"}))
          .config;  // biases on every linear
  ExpectRefused(c, "qwen3", "--add-bias-linear is set");
  c.qk_layernorm = false;
  ExpectRefused(c, "qwen2", "--add-bias-linear is set");
}

layers::GptConfig MixtralConfig(std::vector<std::string> extra = {}) {
  std::vector<std::string> f = {"--num-layers",          "2", "--hidden-size",     "32",
                                "--num-attention-heads", "4", "--ffn-hidden-size", "64",
                                "--num-experts",         "4"};
  f.insert(f.end(), extra.begin(), extra.end());
  return MakeModel(MixtralFlags(f)).config;
}

TEST_CASE("mixtral export refuses the MoE settings Mixtral cannot express, naming the value") {
  REQUIRE(ChooseHfModelType(MixtralConfig(), "auto").ok());
  CHECK(ChooseHfModelType(MixtralConfig(), "auto")->model_type == "mixtral");
  CHECK(ChooseHfModelType(MixtralConfig(), "mixtral")->architecture == HfArchitecture::kMixtral);
  CHECK(HfExportNotes(MixtralConfig(), *ChooseHfModelType(MixtralConfig(), "auto")).empty());
  ExpectRefused(MixtralConfig(), "llama", "Mixture-of-Experts model (--num-experts 4)");
  ExpectRefused(MixtralConfig({"--moe-layer-freq", "2"}), "auto",
                "--moe-layer-freq makes layers [1] dense but Hugging Face mixtral expects a MoE "
                "block on every layer");
  ExpectRefused(MixtralConfig({"--moe-shared-expert-intermediate-size", "64"}), "auto",
                "--moe-shared-expert-intermediate-size is 64");
  ExpectRefused(MixtralConfig({"--moe-router-score-function", "sigmoid"}), "auto",
                "--moe-router-score-function is sigmoid");
  ExpectRefused(MixtralConfig({"--moe-router-pre-softmax"}), "auto",
                "--moe-router-pre-softmax is set");
  ExpectRefused(MixtralConfig({"--moe-router-num-groups", "2", "--moe-router-group-topk", "1"}),
                "auto", "--moe-router-num-groups is 2");
  ExpectRefused(MixtralConfig({"--moe-router-topk-scaling-factor", "2.5"}), "auto",
                "--moe-router-topk-scaling-factor is 2.5");
  ExpectRefused(
      MixtralConfig({"--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias"}),
      "auto", "--moe-router-score-function is sigmoid");
  layers::GptConfig c = MixtralConfig();
  auto moe = std::make_shared<layers::moe::MoELayerConfig>(*c.moe);
  moe->router.enable_expert_bias = true;
  c.moe = moe;
  ExpectRefused(c, "auto", "--moe-router-enable-expert-bias is set");
  ExpectRefused(MixtralConfig({"--moe-expert-capacity-factor", "1.5"}), "auto",
                "--moe-expert-capacity-factor is 1.5 (tokens over capacity are dropped)");
  ExpectRefused(MixtralConfig({"--moe-router-load-balancing-type", "sinkhorn"}), "auto",
                "--moe-router-load-balancing-type is sinkhorn");
  c = MakeModel({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4",
                 "--normalization", "RMSNorm", "--swiglu", "--position-embedding-type", "rope",
                 "--num-experts", "4"})
          .config;
  ExpectRefused(c, "auto", "--add-bias-linear is set");
  // Training-only settings are exported with a note saying so.
  const layers::GptConfig z = MixtralConfig({"--moe-z-loss-coeff", "0.001"});
  const std::vector<std::string> notes = HfExportNotes(z, *ChooseHfModelType(z, "auto"));
  REQUIRE(notes.size() == 1);
  CHECK(absl::StrContains(notes[0], "--moe-z-loss-coeff 0.001"));
}

// --- bad input ----------------------------------------------------------------------------

struct Exported {
  std::string root, hf;
};

Exported ExportLlama() {
  Exported e;
  e.root = MakeTempDir();
  e.hf = e.root + "/hf";
  Model m = MakeModel({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4",
                       "--normalization", "RMSNorm", "--swiglu", "--position-embedding-type",
                       "rope", "--disable-bias-linear"});
  MakeCheckpoint(m, e.root + "/ckpt", 5);
  HfExportOptions ex;
  ex.load = e.root + "/ckpt";
  ex.save = e.hf;
  REQUIRE(ExportToHuggingFace(ex).ok());
  return e;
}

std::string ImportError(const std::string& hf, const std::string& save) {
  HfImportOptions im;
  im.load = hf;
  im.save = save;
  absl::StatusOr<std::vector<std::string>> r = ImportFromHuggingFace(im);
  REQUIRE(!r.ok());
  return std::string(r.status().message());
}

void RewriteTensors(const std::string& hf, const std::function<void(HfTensors&)>& edit) {
  absl::StatusOr<HfTensors> t = ReadHfSafetensors(hf);
  REQUIRE(t.ok());
  edit(*t);
  std::vector<std::string> names;
  for (const auto& [name, v] : *t) names.push_back(name);
  REQUIRE(WriteHfSafetensors(hf, *t, names, HfDtype::kF32, 0).ok());
}

void EditConfig(const std::string& hf, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json c = ReadJson(hf + "/config.json");
  edit(c);
  std::ofstream(hf + "/config.json") << c.dump();
}

TEST_CASE("import: a missing tensor, a wrong shape, a truncated file, an unknown key") {
  Exported e = ExportLlama();
  RewriteTensors(e.hf, [](HfTensors& t) { t.erase("model.layers.0.self_attn.k_proj.weight"); });
  std::string msg = ImportError(e.hf, e.root + "/x");
  INFO(msg);
  CHECK(absl::StrContains(msg, "has no tensor model.layers.0.self_attn.k_proj.weight"));
  CHECK(absl::StrContains(msg, e.hf));

  e = ExportLlama();
  RewriteTensors(e.hf, [](HfTensors& t) {
    HfTensor& up = t.at("model.layers.0.mlp.up_proj.weight");
    up.shape = {up.shape[1], up.shape[0]};
  });
  msg = ImportError(e.hf, e.root + "/x");
  UNSCOPED_INFO(msg);
  CHECK(absl::StrContains(
      msg, "model.layers.0.mlp.up_proj.weight has shape [32, 64], expected [64, 32]"));

  e = ExportLlama();
  RewriteTensors(e.hf, [](HfTensors& t) {
    t["model.layers.0.self_attn.q_norm.weight"] = {{8}, std::vector<float>(8)};
  });
  msg = ImportError(e.hf, e.root + "/x");
  CHECK(absl::StrContains(msg, "model.layers.0.self_attn.q_norm.weight"));

  e = ExportLlama();
  const std::string file = e.hf + "/model.safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 100);
  msg = ImportError(e.hf, e.root + "/x");
  CHECK(absl::StrContains(msg, file));
  CHECK(absl::StrContains(msg, "truncated"));

  std::filesystem::remove(file);
  msg = ImportError(e.hf, e.root + "/x");
  CHECK(absl::StrContains(msg, "model.safetensors"));
}

TEST_CASE("import refuses config.json fields MXMACA cannot run, naming field and value") {
  Exported e = ExportLlama();
  EditConfig(e.hf, [](nlohmann::json& c) { c["sliding_window"] = 4096; });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"), "config.json sliding_window is 4096"));
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["sliding_window"] = nullptr;
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"), "config.json rope_scaling is"));
  // Llama 3's bands are fixed in Megatron (low 1, high 4, original 8192).
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 4096}};
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"),
                          "config.json rope_scaling.original_max_position_embeddings is 4096"));
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.5}};
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"),
                          "config.json rope_scaling.factor is 2.5"));
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["rope_scaling"] = nullptr;
    c["hidden_act"] = "gelu";
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"), "config.json hidden_act is \"gelu\""));
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["hidden_act"] = "silu";
    c["model_type"] = "mixtral";
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"), "mixtral"));
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["model_type"] = "llama";
    c["num_key_value_heads"] = 3;
  });
  CHECK(
      absl::StrContains(ImportError(e.hf, e.root + "/x"), "config.json num_key_value_heads is 3"));
  // Qwen2 / Qwen3: a sliding window only counts with use_sliding_window; Qwen3's
  // attention_bias has no Megatron flag.
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["num_key_value_heads"] = 4;
    c["model_type"] = "qwen2";
    c["sliding_window"] = 4096;
    c["use_sliding_window"] = true;
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"),
                          "config.json use_sliding_window is true"));
  EditConfig(e.hf, [](nlohmann::json& c) {
    c["model_type"] = "qwen3";
    c["use_sliding_window"] = false;
    c["attention_bias"] = true;
  });
  CHECK(absl::StrContains(ImportError(e.hf, e.root + "/x"), "config.json attention_bias is true"));
}

TEST_CASE("mixtral import: config fields and tensors, each error naming the value") {
  const std::string root = MakeTempDir();
  const std::string hf = root + "/hf";
  MakeCheckpoint(MakeModel(MixtralFlags({"--num-layers", "1", "--hidden-size", "32",
                                         "--num-attention-heads", "4", "--num-experts", "4"})),
                 root + "/ckpt", 61);
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = hf;
  REQUIRE(ExportToHuggingFace(ex).ok());
  EditConfig(hf, [](nlohmann::json& c) { c.erase("num_local_experts"); });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"),
                          "config.json has no num_local_experts (mixtral)"));
  EditConfig(hf, [](nlohmann::json& c) {
    c["num_local_experts"] = 4;
    c["num_experts_per_tok"] = 5;
  });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"),
                          "config.json num_experts_per_tok is 5; expected at most "
                          "num_local_experts (4)"));
  EditConfig(hf, [](nlohmann::json& c) {
    c["num_experts_per_tok"] = 2;
    c["router_jitter_noise"] = 0.01;
  });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"), "config.json router_jitter_noise is 0.01"));
  EditConfig(hf, [](nlohmann::json& c) {
    c["router_jitter_noise"] = 0.0;
    c["sliding_window"] = 4096;
  });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"), "config.json sliding_window is 4096"));
  EditConfig(hf, [](nlohmann::json& c) {
    c["sliding_window"] = nullptr;
    c["num_local_experts"] = 3;  // the file holds 4 experts
  });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"),
                          "tensor model.layers.0.block_sparse_moe.gate.weight has shape [4, 32], "
                          "expected [3, 32]"));
  EditConfig(hf, [](nlohmann::json& c) { c["num_local_experts"] = 4; });
  RewriteTensors(
      hf, [](HfTensors& t) { t.erase("model.layers.0.block_sparse_moe.experts.2.w3.weight"); });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"),
                          "has no tensor model.layers.0.block_sparse_moe.experts.2.w3.weight"));
}

TEST_CASE("qwen3_moe import: config fields and tensors, each error naming the value") {
  const std::string root = MakeTempDir();
  const std::string hf = root + "/hf";
  MakeCheckpoint(MakeModel(Qwen3MoeFlags({"--num-layers", "1"})), root + "/ckpt", 63);
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = hf;
  REQUIRE(ExportToHuggingFace(ex).ok());
  EditConfig(hf, [](nlohmann::json& c) { c.erase("moe_intermediate_size"); });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"),
                          "config.json has no moe_intermediate_size (qwen3_moe)"));
  EditConfig(hf, [](nlohmann::json& c) {
    c["moe_intermediate_size"] = 40;
    c["decoder_sparse_step"] = 2;
  });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"), "config.json decoder_sparse_step is 2"));
  EditConfig(hf, [](nlohmann::json& c) {
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = {0};
  });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"), "config.json mlp_only_layers is [0]"));
  // Absent norm_topk_prob is Qwen3MoeConfig's default false: --moe-router-pre-softmax.
  EditConfig(hf, [](nlohmann::json& c) {
    c["mlp_only_layers"] = nlohmann::json::array();
    c.erase("norm_topk_prob");
  });
  HfImportOptions im;
  im.load = hf;
  im.save = root + "/pre";
  REQUIRE(ImportFromHuggingFace(im).ok());
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(root + "/pre");
  REQUIRE(r.ok());
  absl::StatusOr<layers::GptConfig> c = ModelConfigFromCheckpointArgs(r->args());
  REQUIRE(c.ok());
  REQUIRE(c->moe != nullptr);
  CHECK(c->moe->router.pre_softmax);
  CHECK(c->qk_layernorm);
  RewriteTensors(hf, [](HfTensors& t) { t.erase("model.layers.0.mlp.experts.1.up_proj.weight"); });
  CHECK(absl::StrContains(ImportError(hf, root + "/x"),
                          "has no tensor model.layers.0.mlp.experts.1.up_proj.weight"));
}

TEST_CASE("export: a corrupt checkpoint is refused naming the file") {
  const std::string root = MakeTempDir();
  Model m = MakeModel({"--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "4"});
  MakeCheckpoint(m, root + "/ckpt", 7);
  const std::string shard = root + "/ckpt/iter_0000003/shard_stage0.safetensors";
  REQUIRE(std::filesystem::exists(shard));
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(shard) - 8));
    f.write("garbage!", 8);
  }
  HfExportOptions ex;
  ex.load = root + "/ckpt";
  ex.save = root + "/hf";
  absl::StatusOr<std::vector<std::string>> r = ExportToHuggingFace(ex);
  REQUIRE(!r.ok());
  INFO(r.status().message());
  CHECK(absl::StrContains(r.status().message(), "shard_stage0.safetensors"));
}

}  // namespace
}  // namespace mxmaca::api::convert
