// api/convert/convert_command.cc: see convert_command.h.
#include "api/convert/convert_command.h"

#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/args/subcommand_flags.h"
#include "api/convert/hf_export.h"
#include "api/convert/hf_import.h"
#include "base/status_macros.h"

namespace mxmaca::api {

const char kConvertUsage[] =
    "usage: mxmaca convert --to hf --load CKPT_DIR --save HF_DIR [--model-type "
    "auto|gpt2|llama|mistral|qwen2|qwen3|mixtral|qwen3_moe]\n"
    "                      [--dtype fp32|bf16] [--max-shard-size-mb N (5120; 0 = one file)] "
    "[--ckpt-step N]\n"
    "       mxmaca convert --from hf --load HF_DIR --save CKPT_DIR [--seq-length N]\n"
    "\n"
    "--to hf: writes the checkpoint's weights (fp32 masters, true vocabulary rows) as a Hugging "
    "Face\n"
    "  model: model.safetensors (model-0000i-of-0000n.safetensors + model.safetensors.index.json\n"
    "  above --max-shard-size-mb), config.json, and the run's tokenizer files when its args name\n"
    "  them (GPT-2 BPE: vocab.json, merges.txt; HuggingFaceTokenizer: tokenizer.json ...).\n"
    "  gpt2: LayerNorm, learned positions, biases, GELU, MHA, tied embeddings (GPT2LMHeadModel).\n"
    "  llama / mistral: RMSNorm, RoPE (rotate-half), SwiGLU, GQA, tied or untied, biases on all\n"
    "  linears or none (LlamaForCausalLM / MistralForCausalLM without sliding window).\n"
    "  qwen2: llama with biases on q, k and v only (--disable-bias-linear --add-qkv-bias).\n"
    "  qwen3: llama without biases, RMSNorm q_norm / k_norm per head (--qk-layernorm).\n"
    "  mixtral: MoE (--num-experts) on every layer as llama without biases; the router must be\n"
    "  Megatron's default (softmax, top-k on the logits, softmax over the k = Mixtral's softmax,\n"
    "  top-k, renormalise), dropless, no shared expert (MixtralForCausalLM).\n"
    "  qwen3_moe: mixtral's MoE with qwen3's attention (--qk-layernorm); --moe-router-pre-softmax\n"
    "  is norm_topk_prob false (Qwen3MoeForCausalLM, mlp.experts.x.{gate,up,down}_proj).\n"
    "  auto: qwen3_moe for MoE with --qk-layernorm, mixtral for other MoE, gpt2 for LayerNorm + "
    "learned positions, qwen3 for --qk-layernorm,\n"
    "  qwen2 for q/k/v-only biases, else llama. Refused, with the value named:\n"
    "  --qk-layernorm (but for qwen3), --apply-layernorm-1p, --rotary-interleaved, RoPE\n"
    "  scaling for gpt2 / mistral / mixtral (llama, qwen2, qwen3 write --use-rope-scaling as\n"
    "  rope_scaling llama3 and --rotary-seq-len-interpolation-factor as linear, and read them\n"
    "  back), and what the chosen target cannot hold (for mixtral: dense layers, a shared\n"
    "  expert, sigmoid scores, pre-softmax, group-limited routing, top-k scaling, an expert\n"
    "  bias, a capacity factor, sinkhorn).\n"
    "--from hf: reads config.json and the safetensors (F32/BF16/F16) of a gpt2, llama, mistral,\n"
    "  qwen2, qwen3, mixtral or qwen3_moe model and writes an MXMACA checkpoint of iteration 0 "
    "(no\n"
    "  optimizer state) whose args reconstruct the model (mixtral: --num-experts,\n"
    "  --moe-router-topk, --moe-ffn-hidden-size, softmax routing, dropless, aux_loss =\n"
    "  router_aux_loss_coef); load it with `mxmaca train --load CKPT_DIR --finetune` and the\n"
    "  model flags it prints, or `mxmaca generate`. Tokenizer files go to CKPT_DIR/tokenizer/.\n"
    "  --seq-length: the sequence length recorded (default min(max_position_embeddings, 4096)).\n"
    "Errors name the file, the tensor or config field and what was expected; exit status 1.\n";

namespace {

absl::Status ParseInt(const std::string& flag, const std::string& v, int64_t* out, int64_t min) {
  if (!absl::SimpleAtoi(v, out) || *out < min) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", v, ": expected an integer >= ", min));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunConvert(const std::vector<std::string>& args) {
  std::optional<std::string> to, from;
  convert::HfExportOptions ex;
  convert::HfImportOptions im;
  std::string load, save;
  std::optional<int64_t> seq_length;
  bool export_only_flag = false;
  for (FlagCursor c(args); c.Next();) {
    const std::string& flag = c.flag();
    auto next = [&c] { return c.Value(); };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kConvertUsage, stdout);
      return absl::OkStatus();
    } else if (flag == "--to") {
      MXMACA_ASSIGN_OR_RETURN(to, next());
    } else if (flag == "--from") {
      MXMACA_ASSIGN_OR_RETURN(from, next());
    } else if (flag == "--load") {
      MXMACA_ASSIGN_OR_RETURN(load, next());
    } else if (flag == "--save") {
      MXMACA_ASSIGN_OR_RETURN(save, next());
    } else if (flag == "--model-type") {
      MXMACA_ASSIGN_OR_RETURN(ex.model_type, next());
      export_only_flag = true;
    } else if (flag == "--dtype") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      if (v == "fp32" || v == "float32") {
        ex.dtype = convert::HfDtype::kF32;
      } else if (v == "bf16" || v == "bfloat16") {
        ex.dtype = convert::HfDtype::kBf16;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--dtype ", v, ": expected fp32 or bf16"));
      }
      export_only_flag = true;
    } else if (flag == "--max-shard-size-mb") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      int64_t mb = 0;
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &mb, 0));
      ex.max_shard_bytes = mb << 20;
      export_only_flag = true;
    } else if (flag == "--ckpt-step") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      int64_t step = 0;
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &step, 0));
      ex.iteration = step;
      export_only_flag = true;
    } else if (flag == "--seq-length") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, next());
      int64_t s = 0;
      MXMACA_RETURN_IF_ERROR(ParseInt(flag, v, &s, 1));
      seq_length = s;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", flag,
          " (convert takes --to, --from, --load, --save, --model-type, "
          "--dtype, --max-shard-size-mb, --ckpt-step, --seq-length; see mxmaca convert --help)"));
    }
  }
  if (to.has_value() == from.has_value()) {
    return absl::InvalidArgumentError(
        "give exactly one of --to hf (export) and --from hf (import)");
  }
  if ((to && *to != "hf") || (from && *from != "hf")) {
    return absl::InvalidArgumentError(absl::StrCat(to ? "--to " : "--from ", to ? *to : *from,
                                                   ": expected hf (the Hugging Face format)"));
  }
  if (load.empty()) return absl::InvalidArgumentError("--load DIR is required");
  if (save.empty()) return absl::InvalidArgumentError("--save DIR is required");
  std::vector<std::string> lines;
  if (to) {
    if (seq_length) return absl::InvalidArgumentError("--seq-length is for --from hf only");
    ex.load = load;
    ex.save = save;
    MXMACA_ASSIGN_OR_RETURN(lines, convert::ExportToHuggingFace(ex));
  } else {
    if (export_only_flag) {
      return absl::InvalidArgumentError(
          "--model-type, --dtype, --max-shard-size-mb and --ckpt-step are for --to hf only");
    }
    im.load = load;
    im.save = save;
    im.seq_length = seq_length.value_or(0);
    MXMACA_ASSIGN_OR_RETURN(lines, convert::ImportFromHuggingFace(im));
  }
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return absl::OkStatus();
}

}  // namespace mxmaca::api
