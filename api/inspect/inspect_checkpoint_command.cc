// api/inspect/inspect_checkpoint_command.cc: see inspect_checkpoint_command.h.
#include "api/inspect/inspect_checkpoint_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/crc32c.h"
#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include "actors/checkpoint/megatron/torch_file.h"
#include "api/args/subcommand_flags.h"
#include "api/inspect/checkpoint_dir_report.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace mg = actors::checkpoint::megatron;
namespace fs = std::filesystem;
namespace {

std::string Shape(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

std::string Scalar(const mg::PyValue& v) {
  switch (v.kind) {
    case mg::PyKind::kInt: return std::to_string(v.i);
    case mg::PyKind::kFloat: return absl::StrFormat("%g", v.f);
    case mg::PyKind::kBool: return v.b ? "True" : "False";
    case mg::PyKind::kStr: return absl::StrCat("'", v.s, "'");
    case mg::PyKind::kNone: return "None";
    case mg::PyKind::kGlobal: return v.s;
    default: return mg::Describe(v);
  }
}

// The bytes of tensor `t` in C order (contiguous copy when strided).
std::string TensorBytes(const mg::TorchFile& f, const mg::TorchTensor& t) {
  const absl::string_view s = f.StorageBytes(*t.storage);
  const int es = mg::ElementSize(t.storage->dtype);
  const int64_t n = t.numel();
  if (t.IsContiguous()) return std::string(s.substr(static_cast<size_t>(t.storage_offset) * es, static_cast<size_t>(n) * es));
  std::string out;
  std::vector<int64_t> idx(t.size.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = t.storage_offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride[d];
    const absl::string_view one = s.substr(static_cast<size_t>(off) * es, es);
    out.append(one.data(), one.size());
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.size[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

absl::Status InspectMegatron(const std::string& dir, std::optional<int64_t> iteration, bool verify,
                             std::ostream& out) {
  // The merged reading validates the whole checkpoint and gives the layout.
  MXMACA_ASSIGN_OR_RETURN(mg::MegatronState st, mg::ReadMegatronCheckpoint(dir, iteration));
  const mg::MegatronLayout& L = st.layout;
  out << "format: megatron-legacy (--ckpt-format torch; torch.save zip archives)\n";
  out << "iteration: " << (st.release ? std::string("release") : std::to_string(st.iteration)) << "\n";
  out << "layout: tensor " << L.tp << " x pipeline " << L.pp << " x expert " << L.ep << ", "
      << L.chunks.size() << " model chunk(s) per pipeline rank\n";
  for (size_t v = 0; v < L.chunks.size(); ++v) {
    for (int p = 0; p < L.pp; ++p) {
      const auto [first, count] = L.chunks[v][p];
      out << "  chunk " << v << " of pipeline rank " << p << ": layers [" << first << ", " << first + count << ")\n";
    }
  }
  out << "args:";
  for (const char* a : {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                        "swiglu", "num_experts", "params_dtype", "transformer_impl", "consumed_train_samples",
                        "consumed_valid_samples"}) {
    if (const mg::PyValue* v = st.args->Get(a)) out << " " << a << "=" << Scalar(*v);
  }
  out << "\n";
  out << "optimizer state: "
      << (st.has_optimizer_state ? absl::StrCat("yes (Adam step ", st.optimizer_step, ", from ",
                                                st.optimizer_source, ")")
                                 : "no")
      << "\n";
  for (const std::string& n : st.notes) out << "note: " << n << "\n";
  const std::string iter_dir = absl::StrCat(dir, "/", st.release ? std::string("release") : absl::StrFormat("iter_%07d", st.iteration));
  for (int p = 0; p < L.pp; ++p) {
    for (int e = 0; e < L.ep; ++e) {
      for (int t = 0; t < L.tp; ++t) {
        const std::string path = absl::StrCat(iter_dir, "/", mg::MegatronRankDirName(t, p, e, L), "/model_optim_rng.pt");
        MXMACA_ASSIGN_OR_RETURN(mg::TorchFile f, mg::TorchFile::Open(path));
        if (verify) MXMACA_RETURN_IF_ERROR(f.VerifyCrcs());
        std::error_code ec;
        out << "file " << path << " (" << fs::file_size(path, ec) << " bytes): entries";
        for (const auto& [k, v] : f.root().entries) out << " " << (k->is_str() ? k->s : mg::Describe(*k));
        out << "\n";
        for (const auto& [k, v] : f.root().entries) {
          if (!k->is_str() || (k->s != "model" && k->s.rfind("model", 0) != 0) || v->kind != mg::PyKind::kDict) continue;
          for (const auto& [key, val] : v->entries) {
            if (val->kind != mg::PyKind::kTensor) {
              out << "  " << k->s << "/" << (key->is_str() ? key->s : "?") << "  " << mg::Describe(*val) << "\n";
              continue;
            }
            const std::string bytes = TensorBytes(f, *val->tensor);
            out << "  " << k->s << "/" << key->s << "  " << mg::DtypeName(val->tensor->storage->dtype) << " "
                << Shape(val->tensor->size) << " crc32 " << absl::StrFormat("%08x", mg::Crc32(bytes.data(), bytes.size()))
                << "\n";
          }
        }
      }
    }
  }
  if (verify) out << "verify: every archive entry's CRC-32 matches\n";
  return absl::OkStatus();
}

absl::Status InspectMxmaca(const std::string& dir, std::optional<int64_t> iteration, bool verify, std::ostream& out) {
  MXMACA_ASSIGN_OR_RETURN(actors::checkpoint::CheckpointReader r, actors::checkpoint::CheckpointReader::Open(dir, iteration));
  if (verify) MXMACA_RETURN_IF_ERROR(r.VerifyChecksums());
  out << "format: mxmaca-checkpoint (safetensors shards + metadata.json)\n";
  out << "iteration: " << r.iteration() << "\n";
  out << "directory: " << r.dir() << "\n";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(r.dir(), ec)) {
    out << "file " << e.path().filename().string() << " (" << fs::file_size(e.path(), ec) << " bytes)\n";
  }
  if (r.state().is_object()) {
    for (const char* k : {"consumed_train_samples", "consumed_valid_samples", "optimizer_step"}) {
      if (r.state().contains(k)) out << "state." << k << ": " << r.state()[k].dump() << "\n";
    }
  }
  for (const std::string& name : r.TensorNames()) {
    MXMACA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, r.FullShape(name));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    MXMACA_RETURN_IF_ERROR(r.ReadSlice(name, std::vector<int64_t>(shape.size(), 0), shape, v.data()));
    out << "  " << name << "  F32 " << Shape(shape) << " crc32c "
        << absl::StrFormat("%08x", actors::checkpoint::Crc32c(v.data(), v.size() * 4)) << "\n";
  }
  if (verify) out << "verify: every stored box's CRC-32C matches\n";
  return absl::OkStatus();
}

}  // namespace

constexpr char kUsage[] =
    "usage: mxmaca inspect-checkpoint DIR (or --load DIR / --save DIR) [--iteration N] "
    "[--verify]";

absl::Status RunInspectCheckpoint(const std::vector<std::string>& args, std::ostream& out) {
  std::string dir;
  std::optional<int64_t> iteration;
  bool verify = false;
  auto set_dir = [&](const std::string& d) -> absl::Status {
    if (!dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("give one directory, not '", dir, "' and '", d, "' (", kUsage, ")"));
    }
    if (d.empty()) return absl::InvalidArgumentError(absl::StrCat("an empty directory (", kUsage, ")"));
    dir = d;
    return absl::OkStatus();
  };
  for (FlagCursor c(args); c.Next();) {
    const std::string& flag = c.flag();
    auto take_value = [&c]() -> absl::StatusOr<std::string> {
      absl::StatusOr<std::string> v = c.Value();
      if (!v.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(v.status().message(), " (", kUsage, ")"));
      }
      return v;
    };
    if (flag == "--verify" && !c.has_inline_value()) {
      verify = true;
    } else if (flag == "--help" || flag == "-h") {
      out << kUsage << "\n";
      return absl::OkStatus();
    } else if (flag == "--iteration") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, take_value());
      int64_t it;
      if (!absl::SimpleAtoi(v, &it) || it < 0) {
        return absl::InvalidArgumentError(absl::StrCat("--iteration ", v, ": expected an integer >= 0"));
      }
      iteration = it;
    } else if (flag == "--load" || flag == "--save") {
      MXMACA_ASSIGN_OR_RETURN(std::string v, take_value());
      MXMACA_RETURN_IF_ERROR(set_dir(v));
    } else if (!flag.empty() && flag[0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag, " (", kUsage, ")"));
    } else {
      MXMACA_RETURN_IF_ERROR(set_dir(c.arg()));
    }
  }
  if (dir.empty()) return absl::InvalidArgumentError(absl::StrCat("which directory? ", kUsage));
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat(dir, " does not exist"));
  bool megatron = !iteration && mg::IsMegatronLegacyCheckpoint(dir);
  if (iteration) {  // a Megatron iteration dir holds mp_rank_* directories
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(absl::StrFormat("%s/iter_%07d", dir, *iteration), ec)) {
      megatron = megatron || e.path().filename().string().rfind("mp_rank_", 0) == 0;
    }
  }
  if (megatron) return InspectMegatron(dir, iteration, verify, out);
  // MXMACA's format (or nothing committed yet): the directory, then the checkpoint.
  MXMACA_ASSIGN_OR_RETURN(CheckpointDirReport report, InspectCheckpointDir(dir));
  out << RenderCheckpointDirReport(report);
  const bool any_complete = std::any_of(report.iterations.begin(), report.iterations.end(),
                                        [](const CheckpointDirReport::Iteration& i) { return i.complete; });
  if (!iteration && !any_complete) {
    out << "format: no committed checkpoint in " << dir << "\n";
    return absl::OkStatus();
  }
  return InspectMxmaca(dir, iteration, verify, out);
}

absl::Status RunInspectCheckpoint(const std::vector<std::string>& args) {
  return RunInspectCheckpoint(args, std::cout);
}

}  // namespace mxmaca::api
