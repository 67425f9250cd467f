// kernels/cuda_graph_flags.cc: Megatron-Core 0.15's CUDA-graph flags -> CudaGraphMode.
#include "kernels/cuda_graph_flags.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::kernels {
namespace {

constexpr int64_t kMaxWarmupSteps = 1000;

absl::Status Conflict(const std::string& a, const std::string& b, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("conflicting CUDA-graph flags: ", a, " and ", b, ": ", why));
}

}  // namespace

absl::StatusOr<CudaGraphConfig> ParseCudaGraphFlags(const CudaGraphFlagValues& v) {
  CudaGraphConfig config;
  std::vector<std::string> notes;
  // The implementation Megatron would use ("none", "local", "transformer_engine").
  std::string impl = "none";
  std::string impl_flag;  // the flag that chose it, for messages
  if (v.cuda_graph_impl.has_value()) {
    impl = *v.cuda_graph_impl;
    impl_flag = "--cuda-graph-impl " + impl;
    if (impl == "full_iteration") {
      return absl::UnimplementedError(
          "--cuda-graph-impl full_iteration (Megatron-Core 0.19's whole-iteration capture) is "
          "not supported: MXMACA captures each stage segment (use --cuda-graph-impl local)");
    }
    if (impl != "none" && impl != "local" && impl != "transformer_engine") {
      return absl::InvalidArgumentError(
          absl::StrCat("--cuda-graph-impl: invalid choice '", impl,
                       "' (choose from 'none', 'local', 'transformer_engine')"));
    }
  }
  if (v.enable_cuda_graph && v.external_cuda_graph) {
    return Conflict("--enable-cuda-graph", "--external-cuda-graph",
                    "they cannot be enabled at the same time (Megatron)");
  }
  for (const auto& [set, flag] : {std::pair<bool, const char*>{v.enable_cuda_graph,
                                                               "--enable-cuda-graph"},
                                  {v.external_cuda_graph, "--external-cuda-graph"}}) {
    if (!set) continue;
    if (v.cuda_graph_impl.has_value()) {
      return Conflict(flag, impl_flag,
                      "do not use the deprecated flag with --cuda-graph-impl (Megatron)");
    }
    const bool enable = std::string_view(flag) == "--enable-cuda-graph";
    impl = enable ? "local" : "transformer_engine";
    impl_flag = flag;
    notes.push_back(absl::StrCat(flag, " is deprecated in Megatron-Core (use --cuda-graph-impl ",
                                 impl, "): mapped to MXMACA's own capture (local)"));
  }
  if (v.no_cuda_graph && impl != "none") {
    return Conflict("--no-cuda-graph", impl_flag,
                    "one disables CUDA graphs, the other enables them");
  }

  config.mode = impl == "none" ? CudaGraphMode::kNone : CudaGraphMode::kLocal;
  if (impl == "local" && v.cuda_graph_impl.has_value()) {
    notes.push_back("--cuda-graph-impl local: MXMACA's own capture");
  } else if (impl == "transformer_engine" && v.cuda_graph_impl.has_value()) {
    notes.push_back(
        "--cuda-graph-impl transformer_engine: MXMACA has no Transformer Engine; mapped to "
        "MXMACA's own capture (local), which graphs the same static-shape work");
  } else if (v.no_cuda_graph) {
    notes.push_back("--no-cuda-graph: every segment runs eagerly");
  } else if (impl == "none") {
    notes.push_back(v.cuda_graph_impl.has_value()
                        ? "--cuda-graph-impl none: every segment runs eagerly"
                        : "CUDA graphs off (Megatron's default --cuda-graph-impl none)");
  }

  if (v.cuda_graph_scope.has_value()) {
    const std::string& scope = *v.cuda_graph_scope;
    if (scope != "full" && scope != "attn" && scope != "full_iteration") {
      return absl::InvalidArgumentError(
          absl::StrCat("--cuda-graph-scope: invalid choice '", scope,
                       "' (choose from 'full', 'attn', 'full_iteration')"));
    }
    config.scope = scope;
    if (config.mode == CudaGraphMode::kNone) {
      notes.push_back(absl::StrCat("--cuda-graph-scope ", scope,
                                   " ignored: CUDA graphs are off"));
    } else if (scope == "full_iteration" && impl != "local") {
      return Conflict("--cuda-graph-scope full_iteration", impl_flag,
                      "full_iteration scope is only supported with --cuda-graph-impl=local "
                      "(Megatron)");
    } else if (scope == "attn" && impl != "transformer_engine") {
      return Conflict("--cuda-graph-scope attn", impl_flag,
                      "attn scope is only supported with "
                      "--cuda-graph-impl=transformer_engine (Megatron)");
    } else if (scope == "full") {
      notes.push_back("--cuda-graph-scope full: one graph per stage segment (each F, B, W "
                      "or step of a chunk at one micro-batch shape), which covers whole layers");
    } else if (scope == "attn") {
      notes.push_back("--cuda-graph-scope attn: MXMACA captures whole stage segments, "
                      "attention included; there is no attention-only capture");
    } else {
      notes.push_back("--cuda-graph-scope full_iteration: MXMACA captures each stage "
                      "segment, not the whole iteration (sends between stage actors and "
                      "dynamic-shape work stay outside graphs)");
    }
  }

  if (v.cuda_graph_warmup_steps.has_value()) {
    const int64_t n = *v.cuda_graph_warmup_steps;
    if (n < 0 || n > kMaxWarmupSteps) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cuda-graph-warmup-steps ", n, ": expected 0..", kMaxWarmupSteps,
                       " eager runs per segment before capture"));
    }
    config.warmup_steps = static_cast<int>(n);
    if (config.mode == CudaGraphMode::kNone) {
      notes.push_back(absl::StrCat("--cuda-graph-warmup-steps ", n,
                                   " ignored: CUDA graphs are off"));
    } else {
      notes.push_back(absl::StrCat("--cuda-graph-warmup-steps ", n, ": ", n,
                                   " eager run(s) of each segment before its capture"));
    }
  } else if (config.mode == CudaGraphMode::kLocal) {
    notes.push_back(absl::StrCat(kDefaultCudaGraphWarmupSteps,
                                 " eager warm-up run of each segment before its capture "
                                 "(MXMACA's default; Megatron's --cuda-graph-warmup-steps "
                                 "default is 3)"));
  }
  config.note = absl::StrJoin(notes, "; ");
  return config;
}

absl::StatusOr<CudaGraphConfig> ParseCudaGraphArgv(const std::vector<std::string>& args) {
  CudaGraphFlagValues v;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const bool inline_value = eq != std::string::npos;
    bool* const sw = name == "--enable-cuda-graph"     ? &v.enable_cuda_graph
                     : name == "--external-cuda-graph" ? &v.external_cuda_graph
                     : name == "--no-cuda-graph"       ? &v.no_cuda_graph
                                                       : nullptr;
    if (sw != nullptr) {
      if (inline_value) {
        return absl::InvalidArgumentError(absl::StrCat(
            "argument ", i, " '", arg, "': ", name, " is a switch and takes no value"));
      }
      *sw = true;
      continue;
    }
    if (name != "--cuda-graph-impl" && name != "--cuda-graph-scope" &&
        name != "--cuda-graph-warmup-steps") {
      continue;
    }
    std::string value;
    if (inline_value) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", i, " '", arg, "': expected one value"));
    }
    if (name == "--cuda-graph-impl") {
      v.cuda_graph_impl = value;
    } else if (name == "--cuda-graph-scope") {
      v.cuda_graph_scope = value;
    } else {
      errno = 0;
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno == ERANGE) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--cuda-graph-warmup-steps: invalid int value '", value, "'"));
      }
      v.cuda_graph_warmup_steps = n;
    }
  }
  return ParseCudaGraphFlags(v);
}

}  // namespace mxmaca::kernels
