// layers/pipeline_placement.cc
#include "layers/pipeline_placement.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace mxmaca::layers {

namespace {

// Expanded layouts larger than this are refused (a typo such as t*99999999 would
// otherwise allocate gigabytes before the t count is checked).
constexpr int64_t kMaxExpandedLayout = int64_t{1} << 24;
constexpr int64_t kMaxRepeat = int64_t{1} << 24;

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

std::string Describe(char c) {
  if (c == '\0') return "end of string";
  return absl::StrCat("'", std::string(1, c), "'");
}

// LayoutParser: recursive descent over the layout with ',' removed; pos_ indexes the
// stripped string, orig_[i] is its position in the original.
class LayoutParser {
 public:
  explicit LayoutParser(const std::string& layout) : layout_(layout) {
    for (size_t i = 0; i < layout.size(); ++i) {
      if (layout[i] == ',') continue;
      s_.push_back(layout[i]);
      orig_.push_back(static_cast<int64_t>(i));
    }
  }

  absl::StatusOr<std::string> Parse() {
    std::string out;
    MXMACA_RETURN_IF_ERROR(Sequence(/*open_paren=*/-1, &out));
    return out;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  int64_t Position() const {
    return pos_ < s_.size() ? orig_[pos_] : static_cast<int64_t>(layout_.size());
  }
  absl::Status Error(const std::string& expected) const {
    return Invalid(absl::StrCat("--pipeline-model-parallel-layout '", layout_, "': position ",
                                Position(), ": got ", Describe(Peek()), ", expected ", expected));
  }
  absl::Status Append(const std::string& unit, int64_t count, std::string* out) const {
    if (static_cast<int64_t>(out->size()) + static_cast<int64_t>(unit.size()) * count >
        kMaxExpandedLayout) {
      return Invalid(absl::StrCat("--pipeline-model-parallel-layout '", layout_,
                                  "': expands to more than ", kMaxExpandedLayout, " symbols"));
    }
    for (int64_t i = 0; i < count; ++i) out->append(unit);
    return absl::OkStatus();
  }
  // Count: "*<digits>" after a symbol or group; returns 1 if no '*' follows (symbols
  // only; groups require the count).
  absl::StatusOr<int64_t> Count(bool required) {
    if (Peek() != '*') {
      if (required) {
        return Error("'*<count>' after ')' (a group is written (...)*n)");
      }
      return 1;
    }
    ++pos_;
    if (Peek() < '0' || Peek() > '9') return Error("a decimal repeat count after '*'");
    int64_t n = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      n = n * 10 + (Peek() - '0');
      if (n > kMaxRepeat) return Error(absl::StrCat("a repeat count <= ", kMaxRepeat));
      ++pos_;
    }
    return n;
  }
  // Sequence: symbols and groups until ')' (inside a group) or the end.
  absl::Status Sequence(int64_t open_paren, std::string* out) {
    while (pos_ < s_.size()) {
      const char c = Peek();
      if (c == ')') {
        if (open_paren >= 0) return absl::OkStatus();
        return Error("one of E, L, t, m, |, ( (this ')' closes nothing)");
      }
      if (c == '(') {
        if (open_paren >= 0) {
          return Error(absl::StrCat("')' to close the group opened at position ", open_paren,
                                    " (groups do not nest in Megatron's layout syntax)"));
        }
        const int64_t at = Position();
        ++pos_;
        std::string inner;
        MXMACA_RETURN_IF_ERROR(Sequence(at, &inner));
        if (Peek() != ')') {
          return Error(absl::StrCat("')' to close the group opened at position ", at));
        }
        if (inner.empty()) return Error("a non-empty group before ')'");
        ++pos_;
        MXMACA_ASSIGN_OR_RETURN(int64_t n, Count(/*required=*/true));
        MXMACA_RETURN_IF_ERROR(Append(inner, n, out));
        continue;
      }
      if (c == 'E' || c == 'L' || c == 't' || c == 'm' || c == '|') {
        ++pos_;
        MXMACA_ASSIGN_OR_RETURN(int64_t n, Count(/*required=*/false));
        MXMACA_RETURN_IF_ERROR(Append(std::string(1, c), n, out));
        continue;
      }
      return Error(
          "one of E (embedding), L (loss), t (transformer layer), m (MTP), | (stage "
          "separator), ( ... )*n, x*n or ','");
    }
    if (open_paren >= 0) {
      return Error(absl::StrCat("')' to close the group opened at position ", open_paren));
    }
    return absl::OkStatus();
  }

  const std::string& layout_;
  std::string s_;
  std::vector<int64_t> orig_;
  size_t pos_ = 0;
};

// Builds layouts[r][c] from per-virtual-stage transformer layer counts (index g).
PipelinePlacement FromCounts(int64_t p, int64_t v, const std::vector<int64_t>& counts) {
  PipelinePlacement out;
  out.pipeline_model_parallel_size = p;
  out.virtual_pipeline_model_parallel_size = v;
  out.layouts.assign(p, std::vector<StageLayout>(v));
  int64_t next = 0;
  for (int64_t g = 0; g < p * v; ++g) {
    StageLayout& s = out.layouts[g % p][g / p];
    s.first_layer = next;
    next += counts[g];
    s.last_layer = next;
    s.has_embedding = g == 0;
    s.has_loss_head = g == p * v - 1;
  }
  return out;
}

absl::StatusOr<PipelinePlacement> FromLayout(const PipelinePlacementConfig& c) {
  const std::string& text = *c.pipeline_model_parallel_layout;
  const int64_t p = c.pipeline_model_parallel_size;
  MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> stages, ParsePipelineLayout(text));
  const int64_t n = static_cast<int64_t>(stages.size());
  const std::string where = absl::StrCat("--pipeline-model-parallel-layout '", text, "'");
  if (n % p != 0) {
    return Invalid(absl::StrCat(where, ": ", n, " virtual stages, expected a multiple of ",
                                "--pipeline-model-parallel-size ", p));
  }
  const int64_t v = n / p;
  if (v > 1 && p == 1) {
    return Invalid(absl::StrCat(where, ": ", n,
                                " virtual stages with --pipeline-model-parallel-size 1; "
                                "interleaving needs --pipeline-model-parallel-size > 1"));
  }
  int64_t num_e = 0, num_l = 0, num_t = 0;
  std::vector<int64_t> counts(n, 0);
  for (int64_t g = 0; g < n; ++g) {
    for (char ch : stages[g]) {
      if (ch == 'm') {
        return Invalid(absl::StrCat(where, ": virtual stage ", g,
                                    " holds 'm' (an MTP layer); multi-token prediction is not "
                                    "supported"));
      }
      num_e += ch == 'E';
      num_l += ch == 'L';
      num_t += ch == 't';
      counts[g] += ch == 't';
    }
  }
  if (num_e != 1 || num_l != 1) {
    return Invalid(absl::StrCat(where, ": ", num_e, " E and ", num_l,
                                " L, expected exactly one E (embedding) and one L (loss)"));
  }
  if (stages.front().empty() || stages.front().front() != 'E') {
    return Invalid(absl::StrCat(where,
                                ": E must be the first symbol of virtual stage 0 "
                                "(pipeline rank 0, chunk 0); stage 0 is '",
                                stages.front(), "'"));
  }
  if (stages.back().empty() || stages.back().back() != 'L') {
    return Invalid(absl::StrCat(where, ": L must be the last symbol of the last virtual stage ",
                                n - 1, " (pipeline rank ", p - 1, ", chunk ", v - 1, "); it is '",
                                stages.back(), "'"));
  }
  if (num_t != c.num_layers) {
    return Invalid(absl::StrCat(where, ": ", num_t, " transformer layers (t), expected ",
                                "--num-layers ", c.num_layers));
  }
  return FromCounts(p, v, counts);
}

absl::StatusOr<PipelinePlacement> FromFlags(const PipelinePlacementConfig& c) {
  const int64_t L = c.num_layers, p = c.pipeline_model_parallel_size;
  const bool uneven = c.decoder_first_pipeline_num_layers.has_value() ||
                      c.decoder_last_pipeline_num_layers.has_value();
  const bool emb = c.account_for_embedding_in_pipeline_split;
  const bool loss = c.account_for_loss_in_pipeline_split;
  const int64_t extras = (emb ? 1 : 0) + (loss ? 1 : 0);
  if (uneven && (emb || loss)) {
    return Invalid(absl::StrCat(
        c.decoder_first_pipeline_num_layers ? "--decoder-first-pipeline-num-layers"
                                            : "--decoder-last-pipeline-num-layers",
        " cannot be combined with ",
        emb ? "--account-for-embedding-in-pipeline-split" : "--account-for-loss-in-pipeline-split",
        " (Megatron: uneven first/last stages exclude accounting for the embedding/loss)"));
  }

  // Virtual pipeline size (arguments.py).
  int64_t v = 1;
  if (c.num_layers_per_virtual_pipeline_stage) {
    const int64_t per_vstage = *c.num_layers_per_virtual_pipeline_stage;
    if (uneven) {
      return Invalid(
          absl::StrCat("--num-layers-per-virtual-pipeline-stage cannot be combined with ",
                       c.decoder_first_pipeline_num_layers ? "--decoder-first-pipeline-num-layers"
                                                           : "--decoder-last-pipeline-num-layers",
                       "; use --num-virtual-stages-per-pipeline-rank with uneven pipeline stages"));
    }
    if (per_vstage < 1) {
      return Invalid(absl::StrCat("--num-layers-per-virtual-pipeline-stage: got ", per_vstage,
                                  ", expected >= 1"));
    }
    if ((L + extras) % p != 0) {
      return Invalid(absl::StrCat("--num-layers ", L, extras ? absl::StrCat(" + ", extras) : "",
                                  " (embedding/loss accounted) is not divisible by "
                                  "--pipeline-model-parallel-size ",
                                  p));
    }
    if ((L + extras) / p % per_vstage != 0) {
      return Invalid(absl::StrCat(
          "layers per pipeline rank ", (L + extras) / p, " (--num-layers ", L,
          extras ? absl::StrCat(" + ", extras) : "", " / --pipeline-model-parallel-size ", p,
          ") is not divisible by --num-layers-per-virtual-pipeline-stage ", per_vstage));
    }
    v = (L + extras) / p / per_vstage;
  } else if (c.num_virtual_stages_per_pipeline_rank) {
    v = *c.num_virtual_stages_per_pipeline_rank;
    if (v < 1) {
      return Invalid(
          absl::StrCat("--num-virtual-stages-per-pipeline-rank: got ", v, ", expected >= 1"));
    }
  }
  if (v > 1 && p == 1) {
    return Invalid(absl::StrCat(
        "virtual pipeline size ", v,
        (c.num_layers_per_virtual_pipeline_stage ? " (from --num-layers-per-virtual-pipeline-stage)"
                                                 : " (--num-virtual-stages-per-pipeline-rank)"),
        " with --pipeline-model-parallel-size 1: interleaving needs "
        "--pipeline-model-parallel-size > 1"));
  }

  if (v > L + extras) {
    // Every split below needs at least one layer per chunk of some rank; refusing here
    // also keeps a mistyped v from sizing the tables.
    return Invalid(absl::StrCat("virtual pipeline size ", v, " is more than --num-layers ", L,
                                extras ? absl::StrCat(" + ", extras) : "",
                                ": a --pipeline-model-parallel-size ", p, " x ", v,
                                " split has empty model chunks"));
  }
  std::vector<int64_t> counts(p * v, 0);  // transformer layers per virtual stage g
  if (uneven) {
    if (p == 1) {
      return Invalid(absl::StrCat(c.decoder_first_pipeline_num_layers
                                      ? "--decoder-first-pipeline-num-layers"
                                      : "--decoder-last-pipeline-num-layers",
                                  " needs --pipeline-model-parallel-size > 1"));
    }
    std::vector<int64_t> per_rank(p, -1);
    int64_t remaining = L, middle = p;
    struct Edge {
      const std::optional<int64_t>& value;
      const char* flag;
      int64_t rank;
    };
    for (const Edge& e :
         {Edge{c.decoder_first_pipeline_num_layers, "--decoder-first-pipeline-num-layers", 0},
          Edge{c.decoder_last_pipeline_num_layers, "--decoder-last-pipeline-num-layers", p - 1}}) {
      if (!e.value) continue;
      if (*e.value <= 0) {
        return Invalid(absl::StrCat(e.flag, ": got ", *e.value, ", expected > 0"));
      }
      if (*e.value % v != 0) {
        return Invalid(absl::StrCat(e.flag, " ", *e.value,
                                    " is not divisible by the virtual pipeline size ", v,
                                    " (--num-virtual-stages-per-pipeline-rank)"));
      }
      per_rank[e.rank] = *e.value;
      remaining -= *e.value;
      --middle;
    }
    if (remaining < 0) {
      return Invalid(absl::StrCat(
          "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers take ",
          L - remaining, " layers, more than --num-layers ", L));
    }
    if (middle == 0 && remaining != 0) {
      return Invalid(absl::StrCat(
          "--decoder-first-pipeline-num-layers ", c.decoder_first_pipeline_num_layers.value_or(0),
          " + --decoder-last-pipeline-num-layers ", c.decoder_last_pipeline_num_layers.value_or(0),
          " != --num-layers ", L, " with --pipeline-model-parallel-size ", p,
          " (no middle ranks take the remaining ", remaining, ")"));
    }
    if (middle > 0) {
      if (remaining % middle != 0) {
        return Invalid(absl::StrCat("the ", remaining, " layers left by uneven first/last stages (",
                                    "--num-layers ", L, ") are not divisible by the ", middle,
                                    " middle pipeline ranks (--pipeline-model-parallel-size ", p,
                                    ")"));
      }
      if (remaining / middle % v != 0) {
        return Invalid(absl::StrCat("layers per middle pipeline rank ", remaining / middle,
                                    " are not divisible by the virtual pipeline size ", v,
                                    " (--num-virtual-stages-per-pipeline-rank)"));
      }
      for (int64_t& n : per_rank) {
        if (n < 0) n = remaining / middle;
      }
    }
    for (int64_t g = 0; g < p * v; ++g) counts[g] = per_rank[g % p] / v;
  } else {
    const int64_t total = L + extras;
    const std::string what = extras
                                 ? absl::StrCat("--num-layers ", L, " + ", extras,
                                                " (embedding/loss accounted in the pipeline split)")
                                 : absl::StrCat("--num-layers ", L);
    if (total % p != 0) {
      return Invalid(absl::StrCat(what, " is not divisible by --pipeline-model-parallel-size ", p));
    }
    if (total % (p * v) != 0) {
      return Invalid(absl::StrCat(what, " is not divisible by --pipeline-model-parallel-size ", p,
                                  " x virtual pipeline size ", v, " = ", p * v, " virtual stages"));
    }
    std::fill(counts.begin(), counts.end(), total / (p * v));
    // total is a positive multiple of p v, so each count is >= 1 before these (and the
    // single stage of p v == 1 keeps total - extras = L >= 1).
    if (emb) --counts.front();
    if (loss) --counts.back();
  }
  return FromCounts(p, v, counts);
}

std::string StageString(const StageLayout& s) {
  std::string out;
  if (s.has_embedding) out += 'E';
  const int64_t n = s.num_layers();
  if (n > 3) {
    absl::StrAppend(&out, "t*", n);
  } else {
    out.append(static_cast<size_t>(n), 't');
  }
  if (s.has_loss_head) out += 'L';
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParsePipelineLayout(const std::string& layout) {
  LayoutParser parser(layout);
  MXMACA_ASSIGN_OR_RETURN(std::string flat, parser.Parse());
  std::vector<std::string> stages(1);
  for (char ch : flat) {
    if (ch == '|') {
      stages.emplace_back();
    } else {
      stages.back().push_back(ch);
    }
  }
  return stages;
}

absl::StatusOr<PipelinePlacement> BuildPipelinePlacement(const PipelinePlacementConfig& c) {
  if (c.num_layers < 1) {
    return Invalid(absl::StrCat("--num-layers: got ", c.num_layers, ", expected >= 1"));
  }
  if (c.pipeline_model_parallel_size < 1) {
    return Invalid(absl::StrCat("--pipeline-model-parallel-size: got ",
                                c.pipeline_model_parallel_size, ", expected >= 1"));
  }
  std::vector<std::string> vp_flags;
  if (c.num_layers_per_virtual_pipeline_stage) {
    vp_flags.push_back("--num-layers-per-virtual-pipeline-stage");
  }
  if (c.num_virtual_stages_per_pipeline_rank) {
    vp_flags.push_back("--num-virtual-stages-per-pipeline-rank");
  }
  if (c.pipeline_model_parallel_layout) vp_flags.push_back("--pipeline-model-parallel-layout");
  if (vp_flags.size() > 1) {
    return Invalid(
        absl::StrCat("at most one of --num-layers-per-virtual-pipeline-stage, "
                     "--num-virtual-stages-per-pipeline-rank and "
                     "--pipeline-model-parallel-layout may be set; got ",
                     absl::StrJoin(vp_flags, " and ")));
  }
  if (c.pipeline_model_parallel_layout) {
    std::vector<std::string> conflicts;
    if (c.decoder_first_pipeline_num_layers) {
      conflicts.push_back("--decoder-first-pipeline-num-layers");
    }
    if (c.decoder_last_pipeline_num_layers) {
      conflicts.push_back("--decoder-last-pipeline-num-layers");
    }
    if (c.account_for_embedding_in_pipeline_split) {
      conflicts.push_back("--account-for-embedding-in-pipeline-split");
    }
    if (c.account_for_loss_in_pipeline_split) {
      conflicts.push_back("--account-for-loss-in-pipeline-split");
    }
    if (!conflicts.empty()) {
      return Invalid(absl::StrCat("--pipeline-model-parallel-layout cannot be combined with ",
                                  absl::StrJoin(conflicts, ", "),
                                  " (the layout places every layer itself)"));
    }
    return FromLayout(c);
  }
  return FromFlags(c);
}

std::string PipelinePlacement::ToLayoutString() const {
  std::vector<std::string> parts;
  for (int64_t g = 0; g < num_virtual_stages(); ++g) parts.push_back(StageString(virtual_stage(g)));
  return absl::StrJoin(parts, "|");
}

std::string PipelinePlacement::Describe() const {
  std::string out =
      absl::StrCat("pipeline placement: ", pipeline_model_parallel_size, " pipeline rank(s) x ",
                   virtual_pipeline_model_parallel_size, " model chunk(s)",
                   v_shape ? " in a V (ZB-V)" : "", "; --pipeline-model-parallel-layout ",
                   ToLayoutString(), v_shape ? " (virtual stages in order g)" : "", "\n");
  for (int64_t r = 0; r < pipeline_model_parallel_size; ++r) {
    for (int64_t c = 0; c < virtual_pipeline_model_parallel_size; ++c) {
      const StageLayout& s = layouts[r][c];
      absl::StrAppend(&out, "  rank ", r, " chunk ", c, " (virtual stage ",
                      VirtualStageOf(r, c), "): ");
      if (s.num_layers() == 0) {
        absl::StrAppend(&out, "no transformer layers");
      } else {
        absl::StrAppend(&out, "layers [", s.first_layer, ", ", s.last_layer, ") (", s.num_layers(),
                        s.num_layers() == 1 ? " layer)" : " layers)");
      }
      if (s.has_embedding) absl::StrAppend(&out, " + embedding (E)");
      if (s.has_loss_head) absl::StrAppend(&out, " + loss head (L)");
      out += '\n';
    }
  }
  return out;
}

absl::StatusOr<PipelinePlacement> ToVShape(const PipelinePlacement& interleaved) {
  if (interleaved.virtual_pipeline_model_parallel_size != 2 || interleaved.v_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a V-shaped placement (zb-v) needs 2 model chunks per pipeline rank, got ",
        interleaved.virtual_pipeline_model_parallel_size,
        " (--num-virtual-stages-per-pipeline-rank 2)"));
  }
  PipelinePlacement v = interleaved;
  v.v_shape = true;
  const int64_t p = interleaved.pipeline_model_parallel_size;
  for (int64_t g = 0; g < interleaved.num_virtual_stages(); ++g) {
    const int64_t c = g / p, o = g % p;
    v.layouts[c % 2 == 1 ? p - 1 - o : o][c] = interleaved.virtual_stage(g);
  }
  return v;
}

}  // namespace mxmaca::layers
