// api/train/megatron_format.cc: see megatron_format.h.
#include "api/train/megatron_format.h"

#include <stdlib.h>

#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include "actors/checkpoint/megatron/mxmaca_bridge.h"
#include "api/args/flag_table.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace mg = actors::checkpoint::megatron;
namespace fs = std::filesystem;
namespace {

// ParseRepr: a Python repr MegatronArgRepr produces (None, True/False, int, float, 'str',
// [..]) as a value; a string otherwise.
mg::PyRef ParseRepr(absl::string_view s, size_t* pos) {
  auto peek = [&]() { return *pos < s.size() ? s[*pos] : '\0'; };
  while (peek() == ' ') ++*pos;
  const char c = peek();
  if (c == '[' || c == '(') {
    const char close = c == '[' ? ']' : ')';
    ++*pos;
    std::vector<mg::PyRef> items;
    while (*pos < s.size() && peek() != close) {
      items.push_back(ParseRepr(s, pos));
      while (peek() == ' ' || peek() == ',') ++*pos;
    }
    ++*pos;
    return c == '[' ? mg::PyList(items) : mg::PyTuple(items);
  }
  if (c == '\'' || c == '"') {
    std::string out;
    ++*pos;
    while (*pos < s.size() && s[*pos] != c) {
      if (s[*pos] == '\\' && *pos + 1 < s.size()) {
        ++*pos;
        const char e = s[*pos];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += s[*pos];
      }
      ++*pos;
    }
    ++*pos;
    return mg::PyStr(out);
  }
  size_t end = *pos;
  while (end < s.size() && s[end] != ',' && s[end] != ']' && s[end] != ')') ++end;
  const std::string tok(absl::StripAsciiWhitespace(s.substr(*pos, end - *pos)));
  *pos = end;
  if (tok == "None") return mg::PyNone();
  if (tok == "True") return mg::PyBool(true);
  if (tok == "False") return mg::PyBool(false);
  int64_t i;
  if (absl::SimpleAtoi(tok, &i)) return mg::PyInt(i);
  double d;
  if (tok == "inf") return mg::PyFloat(HUGE_VAL);
  if (tok == "-inf") return mg::PyFloat(-HUGE_VAL);
  if (absl::SimpleAtod(tok, &d)) return mg::PyFloat(d);
  return mg::PyStr(tok);
}

bool HasFlag(const std::vector<std::string>& argv, const std::string& flag) {
  for (const std::string& a : argv) {
    if (a == flag || absl::StartsWith(a, flag + "=")) return true;
  }
  return false;
}

std::string FlagValue(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) return argv[i + 1];
    if (absl::StartsWith(argv[i], flag + "=")) return argv[i].substr(flag.size() + 1);
  }
  return "";
}

int64_t IntAttr(const mg::PyValue& ns, const char* name, int64_t dflt) {
  const mg::PyValue* v = ns.Get(name);
  return v != nullptr && v->kind == mg::PyKind::kInt ? v->i : dflt;
}
bool BoolAttr(const mg::PyValue& ns, const char* name, bool dflt) {
  const mg::PyValue* v = ns.Get(name);
  return v != nullptr && v->kind == mg::PyKind::kBool ? v->b : dflt;
}

}  // namespace

absl::Status CheckCkptFormat(const MegatronArgs& args, const std::vector<std::string>& argv) {
  if (args.ckpt_format == "torch" || !HasFlag(argv, "--ckpt-format")) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "--ckpt-format ", args.ckpt_format,
      ": MXMACA writes Megatron's legacy format (--ckpt-format torch) or, without the flag, "
      "its own (docs/CHECKPOINTS.md); ", args.ckpt_format, " is not written yet"));
}

mg::PyRef MegatronArgsNamespace(const MegatronArgs& args, const layers::GptConfig& model,
                                const std::vector<std::string>& argv) {
  mg::PyRef ns = mg::PyObject("argparse.Namespace");
  // Where MXMACA keeps "not given" in its own way (None for a CUDA-graph default, [] for an
  // unset list, False for a store_true whose Megatron default is None), the file holds
  // Megatron's default, as Megatron's namespace would.
  static const MegatronArgs* const unset = new MegatronArgs;
  std::map<std::string, const FlagSpec*> flag_of;
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.cls == FlagClass::kImplemented) flag_of.emplace(MegatronArgsField(flag.Dest()), &flag);
  }
  for (const std::string& dest : MegatronArgsBoundDests()) {
    std::optional<std::string> repr = MegatronArgRepr(args, dest);
    if (!repr) continue;
    auto flag = flag_of.find(dest);
    if (flag != flag_of.end() && flag->second->type != FlagType::kCustom &&
        flag->second->origin == FlagOrigin::kMegatron && *repr == MegatronArgRepr(*unset, dest)) {
      repr = flag->second->megatron_default;
    }
    size_t pos = 0;
    ns->Set(dest, ParseRepr(*repr, &pos));
  }
  // moe_freq_type: an int, or the per-layer list a "[...]" expression stands for.
  {
    int64_t every = 0;
    if (absl::SimpleAtoi(args.moe_layer_freq, &every)) {
      ns->Set("moe_layer_freq", mg::PyInt(every));
    } else if (model.moe != nullptr) {
      std::vector<mg::PyRef> pattern;
      for (int64_t l = 0; l < model.num_layers; ++l) {
        pattern.push_back(mg::PyInt(model.is_moe_layer(l) ? 1 : 0));
      }
      ns->Set("moe_layer_freq", mg::PyList(pattern));
    }
  }
  ns->Set("padded_vocab_size", mg::PyInt(model.padded_vocab_size));
  ns->Set("num_query_groups", mg::PyInt(model.query_groups()));
  ns->Set("ffn_hidden_size", mg::PyInt(model.ffn_hidden_size));
  ns->Set("params_dtype", mg::PyGlobal(args.bf16 ? "torch.bfloat16" : "torch.float32"));
  const std::string impl = FlagValue(argv, "--transformer-impl");
  ns->Set("transformer_impl", mg::PyStr(impl.empty() ? "transformer_engine" : impl));
  ns->Set("moe_grouped_gemm", mg::PyBool(HasFlag(argv, "--moe-grouped-gemm")));
  ns->Set("ckpt_format", mg::PyStr("torch"));
  // Fields Megatron's load_checkpoint / check_checkpoint_args read without a default.
  ns->Set("data_parallel_size", mg::PyInt(args.data_parallel_size));
  ns->Set("world_size", mg::PyInt(args.data_parallel_size * args.tensor_model_parallel_size *
                                  args.pipeline_model_parallel_size * args.context_parallel_size));
  ns->Set("data_parallel_random_init", mg::PyBool(false));
  ns->Set("fp16", mg::PyBool(false));
  return ns;
}

absl::StatusOr<std::string> StageMegatronLoad(const std::string& load_dir,
                                              const layers::GptConfig& model,
                                              const nlohmann::json& checkpoint_args,
                                              const std::function<void(const std::string&)>& print) {
  MXMACA_ASSIGN_OR_RETURN(mg::MegatronState st, mg::ReadMegatronCheckpoint(load_dir));
  const mg::PyValue& ns = *st.args;
  struct Field {
    const char* attr;
    const char* flag;
    int64_t value;
  };
  const Field fields[] = {
      {"num_layers", "--num-layers", model.num_layers},
      {"hidden_size", "--hidden-size", model.hidden_size},
      {"ffn_hidden_size", "--ffn-hidden-size", model.ffn_hidden_size},
      {"num_attention_heads", "--num-attention-heads", model.num_attention_heads},
  };
  for (const Field& f : fields) {
    const int64_t have = IntAttr(ns, f.attr, -1);
    if (have != f.value) {
      return absl::InvalidArgumentError(absl::StrCat(f.flag, " is ", f.value, " but the Megatron checkpoint in ",
                                                     load_dir, " has ", f.attr, " = ", have));
    }
  }
  const int64_t groups = BoolAttr(ns, "group_query_attention", false) ? IntAttr(ns, "num_query_groups", -1)
                                                                      : IntAttr(ns, "num_attention_heads", -1);
  if (groups != model.query_groups()) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", model.query_groups(),
                                                   " query groups but the Megatron checkpoint in ", load_dir, " has ", groups));
  }
  if (BoolAttr(ns, "swiglu", false) != model.swiglu ||
      BoolAttr(ns, "untie_embeddings_and_output_weights", false) != model.untie_embeddings_and_output_weights) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--swiglu / --untie-embeddings-and-output-weights differ from the Megatron checkpoint in ", load_dir));
  }
  for (const std::string& n : st.notes) print(absl::StrCat(" > Megatron checkpoint: ", n));
  if (st.has_optimizer_state) {
    print(absl::StrCat(" > Megatron checkpoint: Adam's state (step ", st.optimizer_step, ") from ",
                       st.optimizer_source));
  }
  nlohmann::json state;
  state["iteration"] = st.iteration;
  state["consumed_train_samples"] = IntAttr(ns, "consumed_train_samples", 0);
  state["consumed_valid_samples"] = IntAttr(ns, "consumed_valid_samples", 0);
  state["skipped_iterations"] = 0;
  nlohmann::json sched = nlohmann::json::object();
  if (st.opt_param_scheduler) {
    for (const auto& [k, v] : st.opt_param_scheduler->entries) {
      if (!k->is_str()) continue;
      if (v->kind == mg::PyKind::kInt) sched[k->s] = v->i;
      if (v->kind == mg::PyKind::kFloat) sched[k->s] = v->f;
      if (v->kind == mg::PyKind::kStr) sched[k->s] = v->s;
    }
  }
  if (!sched.contains("num_steps")) sched["num_steps"] = state["consumed_train_samples"];
  state["opt_param_scheduler"] = sched;
  state["optimizer_step"] = st.optimizer_step;
  state["has_optimizer_state"] = st.has_optimizer_state;
  state["source"] = absl::StrCat("Megatron legacy checkpoint ", load_dir);
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/mxmaca-megatron-load-XXXXXX");
  if (::mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a temporary directory ", templ));
  }
  absl::Status s = mg::WriteAsMxmacaCheckpoint(st.tensors, templ, st.iteration, checkpoint_args, state);
  if (!s.ok()) {
    std::error_code ec;
    fs::remove_all(templ, ec);
    return s;
  }
  return templ;
}

std::function<absl::Status(int64_t, const std::string&)> MegatronSaveHook(
    const std::string& save_dir, const MegatronArgs& args, const layers::GptConfig& model,
    const layers::PipelinePlacement& placement, const std::vector<std::string>& argv) {
  mg::PyRef ns = MegatronArgsNamespace(args, model, argv);
  mg::MegatronLayout layout;
  layout.tp = static_cast<int>(args.tensor_model_parallel_size);
  layout.pp = static_cast<int>(placement.pipeline_model_parallel_size);
  layout.ep = static_cast<int>(args.expert_model_parallel_size);
  layout.chunks.assign(static_cast<size_t>(placement.virtual_pipeline_model_parallel_size), {});
  for (int64_t v = 0; v < placement.virtual_pipeline_model_parallel_size; ++v) {
    for (int64_t p = 0; p < placement.pipeline_model_parallel_size; ++p) {
      const layers::StageLayout& l = placement.layouts[p][v];
      layout.chunks[v].push_back({l.first_layer, l.num_layers()});
    }
  }
  mg::ModelNaming naming;
  naming.spec = FlagValue(argv, "--transformer-impl") == "local" ? mg::LayerSpec::kLocal
                                                                 : mg::LayerSpec::kTransformerEngine;
  naming.swiglu = model.swiglu;
  naming.num_experts = args.num_experts.value_or(0);
  naming.grouped_gemm = HasFlag(argv, "--moe-grouped-gemm");
  naming.expert_parallel_size = layout.ep;
  const bool bf16 = args.bf16;
  const std::string lr_decay_style = args.lr_decay_style;
  const double start_wd = args.start_weight_decay.value_or(args.weight_decay);
  const double end_wd = args.end_weight_decay.value_or(args.weight_decay);
  const std::string wd_incr_style = args.weight_decay_incr_style;
  const int64_t wd_incr_steps =  // Megatron: train samples (train_iters x global batch)
      args.train_samples.value_or(args.train_iters.value_or(0) * args.global_batch_size.value_or(0));
  const bool tied = model.tied_embeddings();
  const int64_t vocab_size = model.vocab_size, padded_vocab_size = model.padded_vocab_size;
  return [=](int64_t iteration, const std::string& iter_dir) -> absl::Status {
    const std::string staging = fs::path(iter_dir).parent_path().string();
    MXMACA_ASSIGN_OR_RETURN(actors::checkpoint::CheckpointReader reader,
                            actors::checkpoint::CheckpointReader::Open(staging, iteration));
    mg::MegatronState st;
    st.iteration = iteration;
    MXMACA_ASSIGN_OR_RETURN(st.tensors, mg::ReadLogicalTensors(reader));
    // MXMACA stores the vocabulary tensors' true-vocabulary rows [V, h] (docs/CHECKPOINTS.md
    // "Vocabulary-padded tensors"); Megatron stores the padded table [V_pad, h], split over
    // TP: the padding rows are written as zeros (they are never a label, and MXMACA's
    // default softmax leaves them out; a run here re-initialises them on load).
    for (auto& [name, t] : st.tensors) {
      const bool vocab_tensor = absl::EndsWith(name, "embedding.word_embeddings.weight") ||
                                absl::EndsWith(name, "output_layer.weight");
      if (vocab_tensor && t.shape.size() == 2 && t.shape[0] == vocab_size &&
          padded_vocab_size > vocab_size) {
        t.data.resize(static_cast<size_t>(padded_vocab_size * t.shape[1]), 0.0f);
        t.shape[0] = padded_vocab_size;
      }
    }
    st.layout = layout;
    st.naming = naming;
    st.bf16 = bf16;
    st.tied_embeddings = tied;
    const nlohmann::json& state = reader.state();
    st.args = mg::PyObject("argparse.Namespace");
    st.args->entries = ns->entries;
    st.args->Set("iteration", mg::PyInt(iteration));
    st.args->Set("consumed_train_samples", mg::PyInt(state.value("consumed_train_samples", int64_t{0})));
    st.args->Set("consumed_valid_samples", mg::PyInt(state.value("consumed_valid_samples", int64_t{0})));
    st.optimizer_step = state.value("optimizer_step", int64_t{0});
    st.has_optimizer_state = false;
    for (const auto& [name, t] : st.tensors) st.has_optimizer_state |= absl::StartsWith(name, "optimizer/");
    mg::PyRef sched = mg::PyDict();
    if (state.contains("opt_param_scheduler") && state["opt_param_scheduler"].is_object()) {
      for (const auto& [k, v] : state["opt_param_scheduler"].items()) {
        if (v.is_number_integer()) sched->Set(k, mg::PyInt(v.get<int64_t>()));
        else if (v.is_number()) sched->Set(k, mg::PyFloat(v.get<double>()));
        else if (v.is_string()) sched->Set(k, mg::PyStr(v.get<std::string>()));
      }
    }
    // Megatron's OptimizerParamScheduler.state_dict keys; those MXMACA's state lacks come
    // from the run's flags (load_state_dict requires lr_decay_style).
    auto fill = [&](const char* key, mg::PyRef v) {
      if (sched->Get(key) == nullptr) sched->Set(key, std::move(v));
    };
    fill("lr_decay_style", mg::PyStr(lr_decay_style));
    fill("start_wd", mg::PyFloat(start_wd));
    fill("end_wd", mg::PyFloat(end_wd));
    fill("wd_incr_style", mg::PyStr(wd_incr_style));
    fill("wd_incr_steps", mg::PyInt(wd_incr_steps));
    st.opt_param_scheduler = sched;
    MXMACA_RETURN_IF_ERROR(mg::WriteMegatronCheckpoint(save_dir, st));
    std::error_code ec;
    fs::remove_all(staging, ec);
    return absl::OkStatus();
  };
}

namespace {

// PyToJson: a namespace value as JSON (objects, tensors and other kinds: null).
nlohmann::json PyToJson(const mg::PyValue& v) {
  switch (v.kind) {
    case mg::PyKind::kBool:
      return v.b;
    case mg::PyKind::kInt:
      return v.i;
    case mg::PyKind::kFloat:
      return v.f;
    case mg::PyKind::kStr:
      return v.s;
    case mg::PyKind::kList:
    case mg::PyKind::kTuple: {
      nlohmann::json out = nlohmann::json::array();
      for (const mg::PyRef& item : v.items) out.push_back(PyToJson(*item));
      return out;
    }
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<nlohmann::json> MegatronCheckpointArgsJson(const std::string& load_dir) {
  MXMACA_ASSIGN_OR_RETURN(mg::PyRef ns, mg::ReadMegatronCheckpointArgs(load_dir));
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [k, v] : ns->entries) {
    if (k->kind != mg::PyKind::kStr) continue;
    args[k->s] = PyToJson(*v);
  }
  if (args.contains("moe_layer_freq")) {  // moe_freq_type: an int or a per-layer list
    const nlohmann::json& f = args["moe_layer_freq"];
    if (f.is_number_integer()) {
      args["moe_layer_freq"] = std::to_string(f.get<int64_t>());
    } else if (f.is_array()) {
      std::string text = "[";
      for (size_t i = 0; i < f.size(); ++i) {
        absl::StrAppend(&text, i ? ", " : "", f[i].is_number_integer() ? f[i].get<int64_t>() : 0);
      }
      args["moe_layer_freq"] = text + "]";
    }
  }
  return nlohmann::json{{"megatron_args", args}};
}

}  // namespace mxmaca::api
