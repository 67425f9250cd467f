// actors/checkpoint/megatron/megatron_checkpoint.cc: see megatron_checkpoint.h.
#include "actors/checkpoint/megatron/megatron_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "actors/checkpoint/file_util.h"
#include "actors/checkpoint/megatron/distrib_optim_layout.h"
#include "actors/checkpoint/megatron/torch_file.h"
#include "base/status_macros.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace fs = std::filesystem;
namespace {

constexpr char kTracker[] = "latest_checkpointed_iteration.txt";
constexpr char kFileName[] = "model_optim_rng.pt";

std::string IterName(int64_t it, bool release) {
  return release ? "release" : absl::StrFormat("iter_%07d", it);
}

// Args helpers (attributes of the Namespace).
int64_t IntArg(const PyValue* args, const char* name, int64_t dflt) {
  const PyValue* v = args ? args->Get(name) : nullptr;
  if (v == nullptr) return dflt;
  if (v->kind == PyKind::kInt) return v->i;
  if (v->kind == PyKind::kBool) return v->b;
  return dflt;
}
bool BoolArg(const PyValue* args, const char* name, bool dflt) {
  const PyValue* v = args ? args->Get(name) : nullptr;
  return v != nullptr && v->kind == PyKind::kBool ? v->b : dflt;
}
double FloatArg(const PyValue* args, const char* name, double dflt) {
  const PyValue* v = args ? args->Get(name) : nullptr;
  if (v == nullptr) return dflt;
  if (v->kind == PyKind::kFloat) return v->f;
  if (v->kind == PyKind::kInt) return static_cast<double>(v->i);
  return dflt;
}

// NoDecay: Megatron's default no-weight-decay rule (get_standard_config_overrides):
// biases and 1-D tensors.
bool NoDecay(const std::string& logical, const std::vector<int64_t>& shape) {
  return absl::EndsWith(logical, ".bias") || shape.size() == 1;
}

bool IsBuffer(const std::string& logical) { return absl::EndsWith(logical, ".mlp.router.expert_bias"); }

int64_t LayerOf(const std::string& logical) {
  if (!absl::StartsWith(logical, "decoder.layers.")) return -1;
  int64_t n = -1;
  const std::string tail = logical.substr(15);
  (void)absl::SimpleAtoi(tail.substr(0, tail.find('.')), &n);
  return n;
}

// ---- assembling whole tensors from shards ----

// Elements: the product of `shape`.
int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class Assembler {
 public:
  // Place: `values` (shape `shard`) is TP rank t's shard of `name`.
  absl::Status Place(const std::string& name, TpSplit split, int t, int tp,
                     const std::vector<int64_t>& shard, const std::vector<float>& values,
                     const std::string& where) {
    std::vector<int64_t> full = shard;
    if (split != TpSplit::kReplicated && tp > 1) {
      if (full.empty() || (split == TpSplit::kColumns && full.size() < 2)) {
        return absl::DataLossError(absl::StrCat(where, ": ", name, " has rank ", full.size(),
                                                ", too low for its tensor-parallel split"));
      }
      full[split == TpSplit::kColumns ? 1 : 0] *= tp;
    }
    Entry& e = entries_[name];
    if (e.pieces.empty()) {
      e.tensor.shape = full;
      e.tensor.data.assign(static_cast<size_t>(Elements(full)), 0.0f);
      e.expected = split == TpSplit::kReplicated ? 1 : tp;
    } else if (e.tensor.shape != full) {
      return absl::DataLossError(absl::StrCat(
          where, ": ", name, " shard ", ShapeText(shard), " does not fit the other shards' full shape ",
          ShapeText(e.tensor.shape)));
    }
    if (!e.pieces.insert(split == TpSplit::kReplicated ? 0 : t).second) return absl::OkStatus();
    PlaceShard(split, full, values.data(), split == TpSplit::kReplicated ? 0 : t,
               split == TpSplit::kReplicated ? 1 : tp, e.tensor.data.data());
    return absl::OkStatus();
  }
  bool Has(const std::string& name) const { return entries_.count(name) > 0; }
  absl::Status Finish(LogicalTensors* out) {
    for (auto& [name, e] : entries_) {
      if (static_cast<int>(e.pieces.size()) != e.expected) {
        return absl::DataLossError(absl::StrCat(name, ": found ", e.pieces.size(), " of ", e.expected,
                                                " tensor-parallel shards"));
      }
      (*out)[name] = std::move(e.tensor);
    }
    return absl::OkStatus();
  }
  static std::string ShapeText(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

 private:
  struct Entry {
    LogicalTensor tensor;
    std::set<int> pieces;
    int expected = 1;
  };
  std::map<std::string, Entry> entries_;
};

struct RankFile {
  int t = 0, p = 0, e = 0;
  std::string path;
  std::optional<TorchFile> file;
};

// ParamEntry: one parameter of a rank's model chunks, in state-dict order.
struct ParamEntry {
  std::string logical;   // "" when it is a tied copy whose state is not kept
  std::string key;
  TpSplit split = TpSplit::kReplicated;
  bool expert = false;
  bool no_decay = false;
  std::vector<int64_t> shape;
  int chunk = 0;                  // model chunk (virtual pipeline stage) on its rank
  bool shared_embedding = false;  // Megatron's param.shared_embedding (distrib_optim_layout.h)
};

// DistOptArgs: what the distributed optimizer's buffer layout takes from a run's args
// (distrib_optim_layout.h), for reading and writing distrib_optim.pt alike.
struct DistOptArgs {
  int64_t dp = 1;  // data-parallel x context-parallel size
  std::optional<int64_t> ddp_bucket_size;
  bool busbw = false;  // --ddp-pad-buckets-for-high-nccl-busbw
  bool overlap_grad_reduce = false;
  bool overlap_param_gather_with_optimizer_step = false;

  // Layout: the coalesced layout of model chunk `chunk` of pipeline rank `pipeline_rank`
  // whose parameters (named_parameters order) are `params`; `bucket_size` (if given) gets
  // the bucket size used.
  CoalescedLayout Layout(const std::vector<DistOptParam>& params, int chunk, int pipeline_rank,
                         std::optional<int64_t>* bucket_size = nullptr) const {
    const std::optional<int64_t> size =
        DistOptBucketSize(overlap_grad_reduce, ddp_bucket_size, dp, chunk, pipeline_rank,
                          overlap_param_gather_with_optimizer_step);
    if (bucket_size != nullptr) *bucket_size = size;
    return CoalescedBufferLayout(params, size, dp, busbw);
  }
};

DistOptArgs DistOptArgsOf(const PyValue* args) {
  DistOptArgs d;
  d.dp = IntArg(args, "data_parallel_size", 1) * IntArg(args, "context_parallel_size", 1);
  const PyValue* bucket = args != nullptr ? args->Get("ddp_bucket_size") : nullptr;
  if (bucket != nullptr && bucket->kind == PyKind::kInt) d.ddp_bucket_size = bucket->i;
  d.busbw = BoolArg(args, "ddp_pad_buckets_for_high_nccl_busbw", false);
  d.overlap_grad_reduce = BoolArg(args, "overlap_grad_reduce", false);
  d.overlap_param_gather_with_optimizer_step =
      BoolArg(args, "overlap_param_gather_with_optimizer_step", false);
  return d;
}

// ReadDistribOptim: the distributed optimizer's state of rank file `rf` from `path`
// (distrib_optim.pt, distrib_optim_layout.h) placed into the assemblers: exp_avg,
// exp_avg_sq and the fp32 main params ("param": the masters of a bf16 run) of every
// parameter in `params` (named_parameters order per chunk; the tied copy skipped). Dense
// models only (the caller checks). Errors name the file: DataLoss for a file that is not
// the coalesced format or whose buffers disagree with the model's layout.
absl::Status ReadDistribOptim(const std::string& path, const RankFile& rf, const PyValue* args,
                              const std::vector<ParamEntry>& params, int vp, int tp,
                              Assembler* exp_avg, Assembler* exp_avg_sq, Assembler* masters) {
  MXMACA_ASSIGN_OR_RETURN(TorchFile file, TorchFile::Open(path));
  const PyValue& root = file.root();
  if (root.kind != PyKind::kDict)
    return absl::DataLossError(absl::StrCat(path, ": the top level is not a dict"));
  const PyValue* coalesced = root.Get("buckets_coalesced");
  if (coalesced == nullptr || coalesced->kind != PyKind::kBool || !coalesced->b) {
    return absl::DataLossError(absl::StrCat(
        path, ": no 'buckets_coalesced': True (the format Megatron-Core writes since 0.8); ",
        "an older per-bucket distrib_optim.pt is not read"));
  }
  // The dense buffers of the chunks, in chunk order (state[gbuf_idx]).
  const DistOptArgs dist = DistOptArgsOf(args);
  for (int v = 0; v < vp; ++v) {
    std::vector<const ParamEntry*> chunk;
    std::vector<DistOptParam> layout_params;
    for (const ParamEntry& pe : params) {
      if (pe.chunk != v) continue;
      chunk.push_back(&pe);
      layout_params.push_back({Elements(pe.shape), pe.shared_embedding});
    }
    std::optional<int64_t> bucket_size;
    const CoalescedLayout layout = dist.Layout(layout_params, v, rf.p, &bucket_size);
    const std::string where = absl::StrCat(path, ": buffer ", v);
    const PyValue* buffer = nullptr;
    for (const auto& [k, val] : root.entries) {
      if (k->kind == PyKind::kInt && k->i == v) buffer = val.get();
    }
    if (buffer == nullptr || buffer->kind != PyKind::kDict || buffer->entries.size() != 1) {
      return absl::DataLossError(
          absl::StrCat(where, " (model chunk ", v, ") is missing or not a dict of one dtype"));
    }
    const PyValue& world = *buffer->entries[0].second;
    if (world.kind != PyKind::kDict)
      return absl::DataLossError(absl::StrCat(where, ": the dtype entry is not a dict"));
    const PyValue* numel = world.Get("numel_unpadded");
    if (numel == nullptr || numel->kind != PyKind::kInt || numel->i != layout.numel_unpadded) {
      return absl::DataLossError(absl::StrCat(
          where, ": numel_unpadded is ",
          numel != nullptr && numel->kind == PyKind::kInt ? absl::StrCat(numel->i) : "absent",
          " but the model's parameters laid out as Megatron-Core's distributed optimizer does (",
          layout_params.size(), " parameters, DP x CP ", dist.dp, ", bucket size ",
          bucket_size ? absl::StrCat(*bucket_size) : "None", ") take ", layout.numel_unpadded));
    }
    std::vector<float> state[3];
    const char* keys[3] = {"param", "exp_avg", "exp_avg_sq"};
    for (int s = 0; s < 3; ++s) {
      const PyValue* t = world.Get(keys[s]);
      if (t == nullptr || t->kind != PyKind::kTensor ||
          Elements(t->tensor->size) != layout.numel_unpadded) {
        return absl::DataLossError(absl::StrCat(where, ": '", keys[s], "' is not a tensor of ",
                                                layout.numel_unpadded, " elements"));
      }
      MXMACA_ASSIGN_OR_RETURN(state[s], file.ReadFloat(*t->tensor, keys[s]));
    }
    for (size_t j = 0; j < chunk.size(); ++j) {
      const ParamEntry& pe = *chunk[j];
      if (pe.logical.empty()) continue;  // tied copy
      if (pe.split == TpSplit::kReplicated && rf.t != 0) continue;
      const int64_t off = layout.offset[j], n = layout_params[j].numel;
      const std::string at = absl::StrCat(path, ": state of '", pe.key, "'");
      auto slice = [&](int s) {
        return std::vector<float>(state[s].begin() + off, state[s].begin() + off + n);
      };
      MXMACA_RETURN_IF_ERROR(
          masters->Place("model/" + pe.logical, pe.split, rf.t, tp, pe.shape, slice(0), at));
      MXMACA_RETURN_IF_ERROR(exp_avg->Place("optimizer/exp_avg/" + pe.logical, pe.split, rf.t, tp,
                                            pe.shape, slice(1), at));
      MXMACA_RETURN_IF_ERROR(exp_avg_sq->Place("optimizer/exp_avg_sq/" + pe.logical, pe.split, rf.t,
                                               tp, pe.shape, slice(2), at));
    }
  }
  return absl::OkStatus();
}

// DistOptStep: Adam's step from a distributed optimizer's state_dict ({'optimizer':
// {'param_groups': [{'step': n, ...}]}}), or -1.
int64_t DistOptStep(const PyValue* o) {
  const PyValue* inner = o != nullptr ? o->Get("optimizer") : nullptr;
  const PyValue* groups = inner != nullptr ? inner->Get("param_groups") : nullptr;
  if (groups == nullptr || groups->kind != PyKind::kList) return -1;
  for (const PyRef& g : groups->items) {
    const PyValue* step = g->Get("step");
    if (step != nullptr && step->kind == PyKind::kInt) return step->i;
    if (step != nullptr && step->kind == PyKind::kFloat) return static_cast<int64_t>(step->f);
  }
  return -1;
}

}  // namespace

std::string MegatronRankDirName(int tp_rank, int pp_rank, int ep_rank, const MegatronLayout& layout) {
  std::string s = absl::StrFormat("mp_rank_%02d", tp_rank);
  if (layout.pp > 1) absl::StrAppend(&s, absl::StrFormat("_%03d", pp_rank));
  if (layout.ep > 1) absl::StrAppend(&s, absl::StrFormat("_%03d", ep_rank));
  return s;
}

absl::StatusOr<MegatronLayout> UniformLayout(int tp, int pp, int ep, int64_t num_layers, int vp) {
  if (tp < 1 || pp < 1 || ep < 1 || vp < 1 || num_layers % (static_cast<int64_t>(pp) * vp) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(num_layers, " layers do not split evenly over ", pp,
                                                   " pipeline ranks x ", vp, " virtual stages"));
  }
  MegatronLayout l;
  l.tp = tp;
  l.pp = pp;
  l.ep = ep;
  const int64_t per = num_layers / (static_cast<int64_t>(pp) * vp);
  l.chunks.assign(static_cast<size_t>(vp), {});
  for (int v = 0; v < vp; ++v) {
    for (int p = 0; p < pp; ++p) l.chunks[v].push_back({v * (num_layers / vp) + p * per, per});
  }
  return l;
}

bool IsMegatronLegacyCheckpoint(const std::string& load_dir) {
  std::error_code ec;
  auto text = ReadSmallFile(absl::StrCat(load_dir, "/", kTracker), 64);
  if (!text.ok()) return false;
  const std::string t(absl::StripAsciiWhitespace(*text));
  int64_t it = 0;
  std::string iter;
  if (t == "release") {
    iter = "release";
  } else if (absl::SimpleAtoi(t, &it)) {
    iter = IterName(it, false);
  } else {
    return false;
  }
  const fs::path dir = fs::path(load_dir) / iter;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (absl::StartsWith(e.path().filename().string(), "mp_rank_") &&
        fs::exists(e.path() / kFileName, ec)) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<PyRef> ReadMegatronCheckpointArgs(const std::string& load_dir) {
  const std::string tracker = absl::StrCat(load_dir, "/", kTracker);
  MXMACA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(tracker, 64));
  const std::string t(absl::StripAsciiWhitespace(text));
  int64_t it = 0;
  const bool release = t == "release";
  if (!release && (!absl::SimpleAtoi(t, &it) || it < 0)) {
    return absl::DataLossError(
        absl::StrCat(tracker, " holds '", t, "', not an iteration or 'release'"));
  }
  const std::string iter_dir = absl::StrCat(load_dir, "/", IterName(it, release));
  std::error_code ec;
  std::vector<std::string> rank_dirs;
  for (const auto& e : fs::directory_iterator(iter_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (absl::StartsWith(n, "mp_rank_")) rank_dirs.push_back(n);
  }
  std::sort(rank_dirs.begin(), rank_dirs.end());
  if (rank_dirs.empty())
    return absl::NotFoundError(absl::StrCat(iter_dir, " has no mp_rank_* directories"));
  const std::string path = absl::StrCat(iter_dir, "/", rank_dirs[0], "/", kFileName);
  MXMACA_ASSIGN_OR_RETURN(TorchFile file, TorchFile::Open(path));
  const PyValue* args = file.root().kind == PyKind::kDict ? file.root().Get("args") : nullptr;
  if (args == nullptr || args->kind != PyKind::kObject) {
    return absl::DataLossError(absl::StrCat(path, ": no 'args' namespace"));
  }
  for (const auto& [k, v] : file.root().entries) {
    if (k->kind == PyKind::kStr && k->s == "args") return v;
  }
  return absl::DataLossError(absl::StrCat(path, ": no 'args' namespace"));
}

absl::StatusOr<MegatronState> ReadMegatronCheckpoint(const std::string& load_dir,
                                                     std::optional<int64_t> iteration) {
  MegatronState st;
  if (iteration) {
    st.iteration = *iteration;
  } else {
    const std::string tracker = absl::StrCat(load_dir, "/", kTracker);
    MXMACA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(tracker, 64));
    const std::string t(absl::StripAsciiWhitespace(text));
    if (t == "release") {
      st.release = true;
    } else if (!absl::SimpleAtoi(t, &st.iteration) || st.iteration < 0) {
      return absl::DataLossError(absl::StrCat(tracker, " holds '", t, "', not an iteration or 'release'"));
    }
  }
  const std::string iter_dir = absl::StrCat(load_dir, "/", IterName(st.iteration, st.release));
  std::error_code ec;
  if (!fs::is_directory(iter_dir, ec)) return absl::NotFoundError(absl::StrCat("checkpoint ", iter_dir, " does not exist"));

  // The first rank's file gives the args (layout and model).
  std::vector<std::string> rank_dirs;
  for (const auto& e : fs::directory_iterator(iter_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (absl::StartsWith(n, "mp_rank_")) rank_dirs.push_back(n);
  }
  std::sort(rank_dirs.begin(), rank_dirs.end());
  if (rank_dirs.empty()) return absl::NotFoundError(absl::StrCat(iter_dir, " has no mp_rank_* directories"));
  const std::string first_path = absl::StrCat(iter_dir, "/", rank_dirs[0], "/", kFileName);
  MXMACA_ASSIGN_OR_RETURN(TorchFile first_file, TorchFile::Open(first_path));
  std::optional<TorchFile> first(std::move(first_file));
  if (first->root().kind != PyKind::kDict) {
    return absl::DataLossError(absl::StrCat(first_path, ": the top level is a ", Describe(first->root()), ", not a dict"));
  }
  const PyValue* args = first->root().Get("args");
  if (args == nullptr || args->kind != PyKind::kObject) {
    return absl::DataLossError(absl::StrCat(first_path, ": no 'args' Namespace"));
  }
  for (const auto& [k, v] : first->root().entries) {
    if (k->is_str() && k->s == "args") st.args = v;  // the shared value, not a copy
  }
  MegatronLayout& L = st.layout;
  L.tp = static_cast<int>(IntArg(args, "tensor_model_parallel_size", 1));
  L.pp = static_cast<int>(IntArg(args, "pipeline_model_parallel_size", 1));
  L.ep = static_cast<int>(IntArg(args, "expert_model_parallel_size", 1));
  const int64_t etp = IntArg(args, "expert_tensor_parallel_size", 1);
  st.naming.swiglu = BoolArg(args, "swiglu", false);
  st.naming.num_experts = IntArg(args, "num_experts", 0);
  st.naming.expert_parallel_size = L.ep;
  st.naming.grouped_gemm = BoolArg(args, "moe_grouped_gemm", false);
  st.tied_embeddings = !BoolArg(args, "untie_embeddings_and_output_weights", false);
  if (const PyValue* impl = args->Get("transformer_impl"); impl != nullptr && impl->is_str() && impl->s == "local") {
    st.naming.spec = LayerSpec::kLocal;
  }
  const PyValue* dtype = args->Get("params_dtype");
  st.bf16 = dtype != nullptr && dtype->kind == PyKind::kGlobal && dtype->s == "torch.bfloat16";
  if (L.tp < 1 || L.pp < 1 || L.ep < 1) {
    return absl::DataLossError(absl::StrCat(first_path, ": args give TP ", L.tp, ", PP ", L.pp, ", EP ", L.ep));
  }
  if (st.naming.num_experts > 0 && etp != 1 && L.tp > 1) {
    return absl::UnimplementedError(absl::StrCat(
        first_path, ": expert_tensor_parallel_size ", etp, "; MXMACA reads experts with ETP 1 only"));
  }
  if (st.naming.num_experts > 0 && st.naming.num_experts % L.ep != 0) {
    return absl::DataLossError(absl::StrCat(first_path, ": ", st.naming.num_experts, " experts over EP ", L.ep));
  }
  // Every rank file the layout needs.
  std::vector<RankFile> files;
  std::vector<std::string> missing;
  for (int p = 0; p < L.pp; ++p) {
    for (int e = 0; e < L.ep; ++e) {
      for (int t = 0; t < L.tp; ++t) {
        const std::string name = MegatronRankDirName(t, p, e, L);
        const std::string path = absl::StrCat(iter_dir, "/", name, "/", kFileName);
        if (!fs::exists(path, ec)) {
          missing.push_back(name);
          continue;
        }
        RankFile rf;
        rf.t = t;
        rf.p = p;
        rf.e = e;
        rf.path = path;
        if (path == first_path) {
          rf.file = std::move(first);
        } else {
          MXMACA_ASSIGN_OR_RETURN(TorchFile opened, TorchFile::Open(path));
          rf.file.emplace(std::move(opened));
        }
        if (rf.file->root().kind != PyKind::kDict) {
          return absl::DataLossError(absl::StrCat(path, ": the top level is not a dict"));
        }
        files.push_back(std::move(rf));
      }
    }
  }
  if (!missing.empty()) {
    return absl::NotFoundError(absl::StrCat(
        iter_dir, ": the args say TP ", L.tp, " x PP ", L.pp, " x EP ", L.ep, ", but ",
        absl::StrJoin(missing, ", "), "/", kFileName, " ", missing.size() == 1 ? "is" : "are", " missing"));
  }

  // Model chunks: 'model' or 'model0', 'model1', ...
  auto chunk_dicts = [](const PyValue& root) {
    std::vector<const PyValue*> out;
    if (const PyValue* m = root.Get("model")) {
      out.push_back(m);
      return out;
    }
    for (int v = 0;; ++v) {
      const PyValue* m = root.Get(absl::StrCat("model", v));
      if (m == nullptr) break;
      out.push_back(m);
    }
    return out;
  };
  // Layer counts per (chunk, stage) from the TP-0, EP-0 files; offsets in (chunk, stage) order.
  int vp = -1;
  std::vector<std::vector<int64_t>> counts;
  for (const RankFile& rf : files) {
    if (rf.t != 0 || rf.e != 0) continue;
    std::vector<const PyValue*> chunks = chunk_dicts(rf.file->root());
    if (chunks.empty()) return absl::DataLossError(absl::StrCat(rf.path, ": no 'model' entry"));
    if (vp < 0) {
      vp = static_cast<int>(chunks.size());
      counts.assign(static_cast<size_t>(vp), std::vector<int64_t>(static_cast<size_t>(L.pp), 0));
    } else if (static_cast<int>(chunks.size()) != vp) {
      return absl::DataLossError(absl::StrCat(rf.path, ": ", chunks.size(), " model chunks, others have ", vp));
    }
    for (int v = 0; v < vp; ++v) {
      if (chunks[v]->kind != PyKind::kDict) return absl::DataLossError(absl::StrCat(rf.path, ": model chunk ", v, " is not a dict"));
      int64_t count = 0;
      for (const auto& [k, val] : chunks[v]->entries) {
        const int64_t n = k->is_str() ? LayerOf(k->s) : -1;
        count = std::max(count, n + 1);
      }
      counts[v][rf.p] = count;
    }
  }
  L.chunks.assign(static_cast<size_t>(vp), {});
  int64_t next = 0;
  for (int v = 0; v < vp; ++v) {
    for (int p = 0; p < L.pp; ++p) {
      L.chunks[v].push_back({next, counts[v][p]});
      next += counts[v][p];
    }
  }

  Assembler model, exp_avg, exp_avg_sq, masters;
  for (const RankFile& rf : files) {
    const PyValue& root = rf.file->root();
    std::vector<const PyValue*> chunks = chunk_dicts(root);
    if (static_cast<int>(chunks.size()) != vp) {
      return absl::DataLossError(absl::StrCat(rf.path, ": ", chunks.size(), " model chunks, others have ", vp));
    }
    std::vector<ParamEntry> params;
    for (int v = 0; v < vp; ++v) {
      const int64_t first_layer = L.chunks[v][rf.p].first;
      const bool last_chunk = v == vp - 1 && rf.p == L.pp - 1;
      for (const auto& [k, val] : chunks[v]->entries) {
        if (!k->is_str()) return absl::DataLossError(absl::StrCat(rf.path, ": a model key that is not a str"));
        const std::string where = absl::StrCat(rf.path, ": model key '", k->s, "'");
        auto logical_or = LogicalNameFor(k->s, st.naming, first_layer, rf.e);
        if (!logical_or.ok()) return absl::InvalidArgumentError(absl::StrCat(rf.path, ": ", logical_or.status().message()));
        if (!logical_or->has_value()) continue;  // _extra_state
        if (val->kind != PyKind::kTensor) {
          return absl::DataLossError(absl::StrCat(where, " holds a ", Describe(*val), ", not a tensor"));
        }
        const std::string logical = **logical_or;
        const bool expert = IsRoutedExpert(logical);
        ParamEntry pe;
        pe.key = k->s;
        pe.split = SplitOf(logical, st.naming);
        pe.expert = expert;
        pe.shape = val->tensor->size;
        pe.no_decay = NoDecay(logical, pe.shape);
        pe.chunk = v;
        const bool tied_copy = logical == "output_layer.weight" && st.tied_embeddings;
        // setup_embeddings_and_output_layer: with PP > 1 and tied embeddings, the first
        // stage's word embedding (unless it is also the last) and the last stage's copy.
        pe.shared_embedding =
            st.tied_embeddings && L.pp > 1 &&
            ((tied_copy && !(v == 0 && rf.p == 0)) ||
             (logical == "embedding.word_embeddings.weight" && v == 0 && rf.p == 0 && !last_chunk));
        if (tied_copy && !(last_chunk && !(v == 0 && rf.p == 0))) {
          return absl::DataLossError(absl::StrCat(where, ": an output layer with tied embeddings outside the last stage"));
        }
        pe.logical = tied_copy ? "" : logical;
        if (!IsBuffer(logical)) params.push_back(pe);
        if (tied_copy) continue;
        // Replicated tensors from TP rank 0; non-expert tensors from EP rank 0.
        if (!expert && rf.e != 0) continue;
        if (pe.split == TpSplit::kReplicated && rf.t != 0) continue;
        MXMACA_ASSIGN_OR_RETURN(std::vector<float> values, rf.file->ReadFloat(*val->tensor, k->s));
        const std::string prefix = IsBuffer(logical) ? "buffers/" : "model/";
        MXMACA_RETURN_IF_ERROR(model.Place(prefix + logical, pe.split, rf.t, L.tp, pe.shape, values, where));
      }
    }
    // Optimizer state by parameter order.
    const PyValue* opt = root.Get("optimizer");
    if (opt == nullptr) {
      if (rf.t == 0 && rf.p == 0 && rf.e == 0) st.notes.push_back("the checkpoint has no optimizer state");
      continue;
    }
    std::vector<const PyValue*> opts;
    if (opt->kind == PyKind::kList) {
      for (const PyRef& o : opt->items) opts.push_back(o.get());
    } else {
      opts.push_back(opt);
    }
    const bool has_experts = std::any_of(params.begin(), params.end(), [](const ParamEntry& p) { return p.expert; });
    if (opts.size() != (has_experts ? 2u : 1u)) {
      return absl::InvalidArgumentError(absl::StrCat(
          rf.path, ": 'optimizer' holds ", opts.size(), " optimizer states; a model ",
          has_experts ? "with" : "without", " experts has ", has_experts ? 2 : 1));
    }
    for (size_t k = 0; k < opts.size(); ++k) {
      const PyValue* o = opts[k];
      if (o->kind != PyKind::kDict) return absl::DataLossError(absl::StrCat(rf.path, ": optimizer ", k, " is not a dict"));
      const PyValue* inner = o->Get("state") ? o : o->Get("optimizer");
      if (inner == nullptr || inner->kind != PyKind::kDict || inner->Get("state") == nullptr) {
        // The distributed optimizer: per-parameter state in distrib_optim.pt beside it.
        const std::string dist = (fs::path(rf.path).parent_path() / "distrib_optim.pt").string();
        const bool first = rf.t == 0 && rf.p == 0 && rf.e == 0;
        if (!fs::exists(dist, ec)) {
          if (first)
            st.notes.push_back(
                "the optimizer entry has no per-parameter state and there is no distrib_optim.pt; "
                "it is not loaded");
          continue;
        }
        if (has_experts || IntArg(args, "num_distributed_optimizer_instances", 1) != 1 ||
            (args->Get("ddp_num_buckets") != nullptr &&
             args->Get("ddp_num_buckets")->kind == PyKind::kInt)) {
          if (first) {
            st.notes.push_back(absl::StrCat(
                "distrib_optim.pt is not read (",
                has_experts ? "experts"
                            : "--num-distributed-optimizer-instances or --ddp-num-buckets",
                ": a layout this reader does not reproduce); the optimizer state is not loaded"));
          }
          continue;
        }
        MXMACA_RETURN_IF_ERROR(
            ReadDistribOptim(dist, rf, args, params, vp, L.tp, &exp_avg, &exp_avg_sq, &masters));
        const int64_t step = DistOptStep(o);
        st.optimizer_step =
            std::max(st.optimizer_step, step >= 0 ? step : IntArg(&root, "iteration", 0));
        st.has_optimizer_state = true;
        st.optimizer_source = "distrib_optim.pt";
        continue;
      }
      std::vector<const ParamEntry*> decay, nodecay;
      for (const ParamEntry& p : params) {
        if (p.expert != (k == 1)) continue;
        (p.no_decay ? nodecay : decay).push_back(&p);
      }
      const PyValue* groups = inner->Get("param_groups");
      const PyValue* state = inner->Get("state");
      if (groups == nullptr || groups->kind != PyKind::kList || state->kind != PyKind::kDict) {
        return absl::DataLossError(absl::StrCat(rf.path, ": optimizer ", k, " has no param_groups list"));
      }
      const PyValue* fp32 = o->Get("fp32_from_fp16_params");
      size_t used_decay = 0, used_nodecay = 0;
      for (size_t g = 0; g < groups->items.size(); ++g) {
        const PyValue& group = *groups->items[g];
        const PyValue* ids = group.Get("params");
        if (group.kind != PyKind::kDict || ids == nullptr || ids->kind != PyKind::kList) {
          return absl::DataLossError(absl::StrCat(rf.path, ": optimizer ", k, " param group ", g, " has no params list"));
        }
        const bool nd = group.Get("wd_mult") != nullptr ? FloatArg(&group, "wd_mult", 1.0) == 0.0
                                                        : FloatArg(&group, "weight_decay", 0.0) == 0.0;
        std::vector<const ParamEntry*>& pool = nd ? nodecay : decay;
        size_t& used = nd ? used_nodecay : used_decay;
        const PyValue* group_masters =
            fp32 != nullptr && fp32->kind == PyKind::kList && g < fp32->items.size() ? fp32->items[g].get() : nullptr;
        for (size_t i = 0; i < ids->items.size(); ++i) {
          if (used >= pool.size()) {
            return absl::InvalidArgumentError(absl::StrCat(
                rf.path, ": optimizer ", k, " param group ", g, " (", nd ? "no weight decay" : "weight decay",
                ") lists more parameters than the model has of that kind (", pool.size(), ")"));
          }
          const ParamEntry& pe = *pool[used++];
          if (pe.logical.empty()) continue;  // tied copy
          const bool take = (pe.expert || rf.e == 0) && (pe.split != TpSplit::kReplicated || rf.t == 0);
          if (!take) continue;
          const std::string where = absl::StrCat(rf.path, ": optimizer state of '", pe.key, "'");
          if (group_masters != nullptr && i < group_masters->items.size() &&
              group_masters->items[i]->kind == PyKind::kTensor) {
            const TorchTensor& m = *group_masters->items[i]->tensor;
            if (m.size != pe.shape) return absl::DataLossError(absl::StrCat(where, ": fp32 master shape differs from the model's"));
            MXMACA_ASSIGN_OR_RETURN(std::vector<float> values, rf.file->ReadFloat(m, pe.key));
            MXMACA_RETURN_IF_ERROR(masters.Place("model/" + pe.logical, pe.split, rf.t, L.tp, pe.shape, values, where));
          }
          const PyValue* id = ids->items[i].get();
          const PyValue* s = nullptr;
          for (const auto& [sk, sv] : state->entries) {
            if (sk->kind == PyKind::kInt && id->kind == PyKind::kInt && sk->i == id->i) s = sv.get();
          }
          if (s == nullptr) continue;  // no state yet (never stepped)
          const PyValue* m1 = s->Get("exp_avg");
          const PyValue* m2 = s->Get("exp_avg_sq");
          if (m1 == nullptr || m2 == nullptr || m1->kind != PyKind::kTensor || m2->kind != PyKind::kTensor) {
            return absl::DataLossError(absl::StrCat(where, " lacks exp_avg / exp_avg_sq tensors"));
          }
          if (m1->tensor->size != pe.shape || m2->tensor->size != pe.shape) {
            return absl::DataLossError(absl::StrCat(where, ": shape ", Assembler::ShapeText(m1->tensor->size),
                                                    " differs from the parameter's ", Assembler::ShapeText(pe.shape)));
          }
          MXMACA_ASSIGN_OR_RETURN(std::vector<float> a, rf.file->ReadFloat(*m1->tensor, pe.key));
          MXMACA_ASSIGN_OR_RETURN(std::vector<float> b, rf.file->ReadFloat(*m2->tensor, pe.key));
          MXMACA_RETURN_IF_ERROR(exp_avg.Place("optimizer/exp_avg/" + pe.logical, pe.split, rf.t, L.tp, pe.shape, a, where));
          MXMACA_RETURN_IF_ERROR(exp_avg_sq.Place("optimizer/exp_avg_sq/" + pe.logical, pe.split, rf.t, L.tp, pe.shape, b, where));
          if (const PyValue* step = s->Get("step")) {
            int64_t n = 0;
            if (step->kind == PyKind::kInt) n = step->i;
            if (step->kind == PyKind::kFloat) n = static_cast<int64_t>(step->f);
            if (step->kind == PyKind::kTensor) {
              MXMACA_ASSIGN_OR_RETURN(std::vector<float> sv, rf.file->ReadFloat(*step->tensor, pe.key + " step"));
              if (!sv.empty()) n = static_cast<int64_t>(sv[0]);
            }
            st.optimizer_step = std::max(st.optimizer_step, n);
          }
          st.has_optimizer_state = true;
          st.optimizer_source = kFileName;
        }
      }
      if (used_decay != decay.size() || used_nodecay != nodecay.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            rf.path, ": optimizer ", k, " covers ", used_decay, " + ", used_nodecay,
            " parameters, the model state has ", decay.size(), " + ", nodecay.size(),
            " (weight decay + none)"));
      }
    }
  }
  MXMACA_RETURN_IF_ERROR(model.Finish(&st.tensors));
  LogicalTensors m;
  MXMACA_RETURN_IF_ERROR(masters.Finish(&m));
  for (auto& [name, t] : m) {
    auto it = st.tensors.find(name);
    if (it != st.tensors.end() && it->second.shape == t.shape) it->second = std::move(t);
  }
  MXMACA_RETURN_IF_ERROR(exp_avg.Finish(&st.tensors));
  MXMACA_RETURN_IF_ERROR(exp_avg_sq.Finish(&st.tensors));
  if (st.has_optimizer_state) {
    for (const auto& [name, t] : st.tensors) {
      if (absl::StartsWith(name, "model/") && !st.tensors.count("optimizer/exp_avg/" + name.substr(6))) {
        st.has_optimizer_state = false;
        st.optimizer_source.clear();
        st.notes.push_back(absl::StrCat("optimizer state of ", name.substr(6), " is missing; the optimizer state is not loaded"));
        break;
      }
    }
  }
  const PyValue& root0 = files[0].file->root();
  if (const PyValue* it = root0.Get("iteration"); it != nullptr && it->kind == PyKind::kInt) st.iteration = it->i;
  for (const auto& [k, v] : root0.entries) {
    if (k->is_str() && k->s == "opt_param_scheduler" && v->kind == PyKind::kDict) st.opt_param_scheduler = v;
  }
  st.num_floating_point_operations_so_far = FloatArg(&root0, "num_floating_point_operations_so_far", 0.0);
  if (root0.Get("rng_state") != nullptr) {
    st.notes.push_back("rng_state is not used (MXMACA's randomness is a function of seed, iteration and micro-batch)");
  }
  return st;
}

// ---- writing ----

namespace {

// KeyRank: the position of a layer-relative key among a layer's entries, in the order
// Megatron-Core registers the modules (TransformerLayer: input_layernorm, self_attention
// (core_attention, linear_proj, linear_qkv), pre_mlp_layernorm, mlp (router, experts,
// shared_experts)); parameters before a module's _extra_state.
std::tuple<int, int64_t, int, std::string> KeyRank(const std::string& rest) {
  static const char* kOrder[] = {
      "input_layernorm.weight", "input_layernorm.bias",
      "self_attention.core_attention._extra_state",
      "self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
      "self_attention.linear_proj._extra_state",
      "self_attention.linear_qkv.layer_norm_weight", "self_attention.linear_qkv.layer_norm_bias",
      "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
      "self_attention.linear_qkv._extra_state",
      "pre_mlp_layernorm.weight", "pre_mlp_layernorm.bias",
      "mlp.linear_fc1.layer_norm_weight", "mlp.linear_fc1.layer_norm_bias",
      "mlp.linear_fc1.weight", "mlp.linear_fc1.bias", "mlp.linear_fc1._extra_state",
      "mlp.linear_fc2.weight", "mlp.linear_fc2.bias", "mlp.linear_fc2._extra_state",
      "mlp.router.weight", "mlp.router.expert_bias",
  };
  for (int i = 0; i < static_cast<int>(sizeof(kOrder) / sizeof(kOrder[0])); ++i) {
    if (rest == kOrder[i]) return {i, 0, 0, ""};
  }
  // Experts: per local expert (SequentialMLP) or per grouped linear; fc1 before fc2,
  // weights before biases, then index; _extra_state last within its linear.
  if (absl::StartsWith(rest, "mlp.experts.")) {
    std::string r = rest.substr(12);
    int64_t expert = 0;
    if (absl::StartsWith(r, "local_experts.")) {
      r = r.substr(14);
      (void)absl::SimpleAtoi(r.substr(0, r.find('.')), &expert);
      r = r.substr(r.find('.') + 1);
    }
    const int fc = absl::StartsWith(r, "linear_fc2") ? 1 : 0;
    const std::string p = r.size() > 11 ? r.substr(11) : "";
    int kind = 0;
    int64_t index = 0;
    if (absl::StartsWith(p, "weight")) {
      (void)absl::SimpleAtoi(p.substr(6), &index);
    } else if (absl::StartsWith(p, "bias")) {
      kind = 1;
      (void)absl::SimpleAtoi(p.substr(4), &index);
    } else {
      kind = 2;
    }
    return {100, expert * 1000000 + fc * 100000 + kind * 10000 + index, 0, ""};
  }
  if (absl::StartsWith(rest, "mlp.shared_experts.")) return {200, 0, 0, rest};
  return {300, 0, 0, rest};
}

PyRef FloatTensor(TorchFileWriter& w, const std::vector<int64_t>& shape, std::vector<float> values,
                  bool bf16) {
  if (bf16) {
    std::string bytes(values.size() * 2, '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = BFloat16FromFloat(values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
    return w.AddOwnedTensor(ScalarType::kBFloat16, shape, std::move(bytes));
  }
  std::string bytes(values.size() * 4, '\0');
  if (!values.empty()) std::memcpy(&bytes[0], values.data(), bytes.size());
  return w.AddOwnedTensor(ScalarType::kFloat, shape, std::move(bytes));
}

struct Emitted {
  std::string key;
  std::string logical;  // "" for _extra_state
  std::string source;   // the logical tensor the values come from ("model/..." or "buffers/...")
};

// WrittenParam: a parameter of a rank file being written, in state-dict order.
struct WrittenParam {
  std::string logical;  // the tensor whose optimizer state it has
  TpSplit split;
  bool expert;
  bool no_decay;
  std::vector<int64_t> shape;
  std::vector<float> master;  // this rank's fp32 shard (the master of a bf16 run)
  int chunk = 0;
  bool shared_embedding = false;  // Megatron's param.shared_embedding (as the reader)
};

// WriteDistribOptim: distrib_optim.pt of pipeline rank `p`, tensor rank `t` (dense models):
// per model chunk, the fp32 main params, exp_avg and exp_avg_sq of its parameters laid out
// as Megatron-Core's distributed optimizer does (distrib_optim_layout.h, the layout
// ReadDistribOptim reads), under the buffer's (param dtype, grad dtype) key, as
// get_parameter_state_dp_zero gathers them on data-parallel rank 0. Errors:
// InvalidArgument for a parameter without optimizer state; the file system's.
absl::Status WriteDistribOptim(const std::string& path, const MegatronState& st, int p, int vp,
                               int t, const std::vector<WrittenParam>& params) {
  const DistOptArgs dist = DistOptArgsOf(st.args.get());
  TorchFileWriter w;
  PyRef root = PyDict();
  root->Set("buckets_coalesced", PyBool(true));
  for (int v = 0; v < vp; ++v) {
    std::vector<const WrittenParam*> chunk;
    std::vector<DistOptParam> layout_params;
    for (const WrittenParam& x : params) {
      if (x.chunk != v) continue;
      chunk.push_back(&x);
      layout_params.push_back({Elements(x.shape), x.shared_embedding});
    }
    const CoalescedLayout layout = dist.Layout(layout_params, v, p);
    std::vector<float> world[3];
    for (std::vector<float>& x : world) x.assign(layout.numel_unpadded, 0.0f);
    for (size_t j = 0; j < chunk.size(); ++j) {
      const WrittenParam& x = *chunk[j];
      const int64_t off = layout.offset[j];
      std::copy(x.master.begin(), x.master.end(), world[0].begin() + off);
      const char* kinds[2] = {"optimizer/exp_avg/", "optimizer/exp_avg_sq/"};
      for (int s = 0; s < 2; ++s) {
        auto it = st.tensors.find(kinds[s] + x.logical);
        if (it == st.tensors.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": no optimizer state ", kinds[s], x.logical));
        }
        const std::vector<float> shard =
            ExtractShard(x.split, it->second.shape, it->second.data.data(), t, st.layout.tp);
        std::copy(shard.begin(), shard.end(), world[s + 1].begin() + off);
      }
    }
    PyRef buffer = PyDict();
    const char* keys[3] = {"param", "exp_avg", "exp_avg_sq"};
    for (int s = 0; s < 3; ++s) {
      buffer->Set(keys[s], FloatTensor(w, {layout.numel_unpadded}, std::move(world[s]), false));
    }
    buffer->Set("numel_unpadded", PyInt(layout.numel_unpadded));
    PyRef by_dtype = PyDict();
    by_dtype->entries.emplace_back(PyTuple({PyGlobal(st.bf16 ? "torch.bfloat16" : "torch.float32"),
                                            PyGlobal("torch.float32")}),
                                   buffer);
    root->entries.emplace_back(PyInt(v), by_dtype);
  }
  return w.Write(path, *root);
}

absl::Status WriteRankFile(const MegatronState& state, int t, int p, int e, const std::string& path) {
  const MegatronState& st = state;
  ModelNaming naming = state.naming;
  naming.expert_parallel_size = state.layout.ep;
  const MegatronLayout& L = st.layout;
  const int vp = static_cast<int>(L.chunks.size());
  TorchFileWriter w;
  PyRef root = PyDict();
  PyRef args = PyObject("argparse.Namespace");
  if (st.args) args->entries = st.args->entries;
  args->Set("tensor_model_parallel_size", PyInt(L.tp));
  args->Set("pipeline_model_parallel_size", PyInt(L.pp));
  args->Set("expert_model_parallel_size", PyInt(L.ep));
  root->Set("args", args);
  root->Set("checkpoint_version", PyFloat(3.0));
  root->Set("iteration", PyInt(st.iteration));

  std::vector<WrittenParam> params;
  for (int v = 0; v < vp; ++v) {
    const auto [first, count] = L.chunks[v][p];
    const bool has_embedding = v == 0 && p == 0;
    const bool has_head = v == vp - 1 && p == L.pp - 1;
    std::vector<Emitted> keys;
    auto add_top = [&](const std::string& logical) {
      if (st.tensors.count("model/" + logical)) keys.push_back({logical, logical, "model/" + logical});
    };
    if (has_embedding) {
      add_top("embedding.word_embeddings.weight");
      add_top("embedding.position_embeddings.weight");
    }
    for (int64_t l = first; l < first + count; ++l) {
      const std::string prefix = absl::StrCat("decoder.layers.", l, ".");
      const bool dense = st.tensors.count(absl::StrCat("model/", prefix, "mlp.linear_fc1.weight")) > 0;
      bool shared = false;
      std::vector<std::pair<std::string, Emitted>> layer;  // (rest, entry)
      for (const char* kind : {"model/", "buffers/"}) {
        const std::string from = kind + prefix;
        for (auto it = st.tensors.lower_bound(from); it != st.tensors.end() && absl::StartsWith(it->first, from); ++it) {
          const std::string logical = it->first.substr(std::strlen(kind));
          shared = shared || logical.find(".mlp.shared_experts.") != std::string::npos;
          MXMACA_ASSIGN_OR_RETURN(std::string key, MegatronKeyFor(logical, naming, first, e, dense));
          if (key.empty()) continue;  // another EP rank's expert
          const std::string local_prefix = absl::StrCat("decoder.layers.", l - first, ".");
          layer.push_back({key.substr(local_prefix.size()), {key, logical, it->first}});
        }
      }
      for (const std::string& x : ExtraStateKeys(l - first, naming, dense, shared)) {
        const std::string local_prefix = absl::StrCat("decoder.layers.", l - first, ".");
        layer.push_back({x.substr(local_prefix.size()), {x, "", ""}});
      }
      std::stable_sort(layer.begin(), layer.end(), [](const auto& a, const auto& b) {
        return KeyRank(a.first) < KeyRank(b.first);
      });
      for (auto& [rest, em] : layer) keys.push_back(std::move(em));
    }
    if (has_head) {
      add_top("decoder.final_layernorm.weight");
      add_top("decoder.final_layernorm.bias");
      if (!st.tied_embeddings) {
        add_top("output_layer.weight");
      } else if (!has_embedding && st.tensors.count("model/embedding.word_embeddings.weight")) {
        // The last stage's copy of the tied embeddings (Megatron's shared_embedding).
        keys.push_back({"output_layer.weight", "embedding.word_embeddings.weight",
                        "model/embedding.word_embeddings.weight"});
      }
    }
    PyRef chunk = PyOrderedDict();
    for (const Emitted& em : keys) {
      if (em.source.empty()) {
        chunk->Set(em.key, PyNone());  // a TE _extra_state without FP8 metadata
        continue;
      }
      const LogicalTensor& full = st.tensors.at(em.source);
      const TpSplit split = SplitOf(em.logical, st.naming);
      MXMACA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ShardShape(em.logical, split, full.shape, L.tp));
      std::vector<float> shard = ExtractShard(split, full.shape, full.data.data(), t, L.tp);
      const bool buffer = absl::StartsWith(em.source, "buffers/");
      if (!buffer) {
        // setup_embeddings_and_output_layer: with PP > 1 and tied embeddings, the first
        // stage's word embedding and the last stage's copy.
        const bool tied_copy = em.key == "output_layer.weight" && st.tied_embeddings;
        const bool shared = st.tied_embeddings && L.pp > 1 &&
                            (tied_copy || (em.key == "embedding.word_embeddings.weight" &&
                                           has_embedding && !has_head));
        params.push_back({em.logical, split, IsRoutedExpert(em.logical), NoDecay(em.logical, shape),
                          shape, shard, v, shared});
      }
      chunk->Set(em.key, FloatTensor(w, shape, std::move(shard), st.bf16 && !buffer));
    }
    root->Set(vp == 1 ? "model" : absl::StrCat("model", v), chunk);
  }

  // Optimizer: dense then expert parameters (ChainedOptimizer), groups [decay, no decay].
  const bool has_experts =
      std::any_of(params.begin(), params.end(), [](const WrittenParam& x) { return x.expert; });
  const bool with_state = st.has_optimizer_state;
  const PyValue* run_args = st.args.get();
  const PyValue* num_buckets = run_args != nullptr ? run_args->Get("ddp_num_buckets") : nullptr;
  const bool distributed = BoolArg(run_args, "use_distributed_optimizer", false) && !has_experts &&
                           IntArg(run_args, "num_distributed_optimizer_instances", 1) == 1 &&
                           (num_buckets == nullptr || num_buckets->kind == PyKind::kNone);
  std::vector<PyRef> opts;
  for (int k = 0; k < (has_experts ? 2 : 1); ++k) {
    PyRef state = PyDict();
    PyRef groups = PyList({});
    PyRef masters = PyList({});
    int64_t id = 0;
    for (bool nd : {false, true}) {
      PyRef ids = PyList({});
      PyRef group_masters = PyList({});
      for (const WrittenParam& x : params) {
        if (x.expert != (k == 1) || x.no_decay != nd) continue;
        ids->items.push_back(PyInt(id));
        if (st.bf16) group_masters->items.push_back(FloatTensor(w, x.shape, x.master, false));
        auto m1 = st.tensors.find("optimizer/exp_avg/" + x.logical);
        auto m2 = st.tensors.find("optimizer/exp_avg_sq/" + x.logical);
        if (with_state && m1 != st.tensors.end() && m2 != st.tensors.end()) {
          PyRef s = PyDict();
          float step = static_cast<float>(st.optimizer_step);
          std::string step_bytes(4, '\0');
          std::memcpy(&step_bytes[0], &step, 4);
          s->Set("step", w.AddOwnedTensor(ScalarType::kFloat, {}, std::move(step_bytes)));
          s->Set("exp_avg", FloatTensor(w, x.shape, ExtractShard(x.split, m1->second.shape, m1->second.data.data(), t, L.tp), false));
          s->Set("exp_avg_sq", FloatTensor(w, x.shape, ExtractShard(x.split, m2->second.shape, m2->second.data.data(), t, L.tp), false));
          state->entries.emplace_back(PyInt(id), s);
        }
        ++id;
      }
      const PyValue* a = st.args.get();
      PyRef g = PyDict();
      g->Set("lr", PyFloat(FloatArg(a, "lr", 0.0)));
      g->Set("betas", PyTuple({PyFloat(FloatArg(a, "adam_beta1", 0.9)), PyFloat(FloatArg(a, "adam_beta2", 0.999))}));
      g->Set("eps", PyFloat(FloatArg(a, "adam_eps", 1e-8)));
      g->Set("weight_decay", PyFloat(nd ? 0.0 : FloatArg(a, "weight_decay", 0.01)));
      g->Set("amsgrad", PyBool(false));
      g->Set("maximize", PyBool(false));
      g->Set("foreach", PyNone());
      g->Set("capturable", PyBool(false));
      g->Set("differentiable", PyBool(false));
      g->Set("fused", PyNone());
      g->Set("wd_mult", PyFloat(nd ? 0.0 : 1.0));
      g->Set("lr_mult", PyFloat(1.0));
      g->Set("is_expert_parallel", PyBool(k == 1));
      g->Set("is_decoupled_lr", PyBool(false));
      g->Set("default_config", PyBool(true));
      g->Set("max_lr", PyFloat(FloatArg(a, "lr", 0.0)));
      g->Set("min_lr", PyFloat(FloatArg(a, "min_lr", 0.0)));
      g->Set("params", ids);
      groups->items.push_back(g);
      masters->items.push_back(group_masters);
    }
    PyRef inner = PyDict();
    inner->Set("state", state);
    inner->Set("param_groups", groups);
    if (st.bf16) {
      PyRef outer = PyDict();
      outer->Set("optimizer", inner);
      outer->Set("fp32_from_fp16_params", masters);
      opts.push_back(outer);
    } else {
      opts.push_back(inner);
    }
  }
  if (distributed) {
    // DistributedOptimizer.state_dict(): the param groups without their parameter ids and
    // with Adam's step; the per-parameter state goes to distrib_optim.pt beside this file.
    PyRef groups = PyList({});
    const PyValue* inner = st.bf16 ? opts[0]->Get("optimizer") : opts[0].get();
    for (const PyRef& g : inner->Get("param_groups")->items) {
      PyRef copy = PyDict();
      for (const auto& [k, val] : g->entries) {
        if (!(k->kind == PyKind::kStr && k->s == "params")) copy->entries.emplace_back(k, val);
      }
      copy->Set("step", PyInt(st.optimizer_step));
      groups->items.push_back(copy);
    }
    PyRef wrapped = PyDict();
    PyRef param_groups = PyDict();
    param_groups->Set("param_groups", groups);
    wrapped->Set("optimizer", param_groups);
    opts = {wrapped};
    if (with_state) {
      MXMACA_RETURN_IF_ERROR(WriteDistribOptim(
          (fs::path(path).parent_path() / "distrib_optim.pt").string(), st, p, vp, t, params));
    }
  }
  root->Set("optimizer", opts.size() == 1 ? opts[0] : PyList(opts));
  if (st.opt_param_scheduler) root->Set("opt_param_scheduler", st.opt_param_scheduler);
  root->Set("num_floating_point_operations_so_far", PyFloat(st.num_floating_point_operations_so_far));
  return w.Write(path, *root);
}

}  // namespace

absl::Status WriteMegatronCheckpoint(const std::string& save_dir, const MegatronState& st) {
  const MegatronLayout& L = st.layout;
  if (L.chunks.empty() || L.tp < 1 || L.pp < 1 || L.ep < 1) {
    return absl::InvalidArgumentError("WriteMegatronCheckpoint: an empty layout");
  }
  for (const auto& c : L.chunks) {
    if (static_cast<int>(c.size()) != L.pp) {
      return absl::InvalidArgumentError("WriteMegatronCheckpoint: layout chunks do not cover every pipeline rank");
    }
  }
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", save_dir, ": ", ec.message()));
  const std::string name = IterName(st.iteration, st.release);
  const std::string final_dir = absl::StrCat(save_dir, "/", name);
  const std::string temp = absl::StrCat(final_dir, ".tmp-torch-", ::getpid());
  fs::remove_all(temp, ec);
  fs::create_directories(temp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", temp, ": ", ec.message()));
  absl::Status status;
  for (int p = 0; p < L.pp && status.ok(); ++p) {
    for (int e = 0; e < L.ep && status.ok(); ++e) {
      for (int t = 0; t < L.tp && status.ok(); ++t) {
        const std::string rank_dir = absl::StrCat(temp, "/", MegatronRankDirName(t, p, e, L));
        fs::create_directories(rank_dir, ec);
        status = WriteRankFile(st, t, p, e, absl::StrCat(rank_dir, "/", kFileName));
        if (status.ok()) status = FsyncDir(rank_dir);
      }
    }
  }
  if (status.ok()) status = FsyncDir(temp);
  if (status.ok()) {
    if (fs::exists(final_dir, ec)) {
      status = ExchangeDirs(temp, final_dir);
      if (status.ok()) fs::remove_all(temp, ec);
    } else {
      status = RenameNoReplace(temp, final_dir);
    }
  }
  if (!status.ok()) {
    fs::remove_all(temp, ec);
    return status;
  }
  MXMACA_RETURN_IF_ERROR(FsyncDir(save_dir));
  const std::string tracker = absl::StrCat(save_dir, "/", kTracker);
  const std::string tracker_temp = absl::StrCat(tracker, ".tmp-", ::getpid());
  fs::remove(tracker_temp, ec);
  MXMACA_RETURN_IF_ERROR(WriteFileDurably(tracker_temp, st.release ? "release" : std::to_string(st.iteration)));
  MXMACA_RETURN_IF_ERROR(RenameReplace(tracker_temp, tracker));
  return FsyncDir(save_dir);
}

}  // namespace mxmaca::actors::checkpoint::megatron
