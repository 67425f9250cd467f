"""megatron_layout.py: an independent (torch-based) model of how Megatron-Core lays out a
GPT's legacy checkpoint, for the tests: MXMACA's logical tensors (global layer numbers)
to per-rank state dicts (TP shards by torch.chunk, SwiGLU [gate_t; up_t] per TP rank,
layer indices local to each pipeline stage, TE or local spec names, routed experts per EP
rank as TEGroupedMLP or SequentialMLP keys) and back."""
import collections
import math
import re

import torch


class Config:
    def __init__(self, tp=1, pp=1, ep=1, spec="te", swiglu=False, experts=0, grouped=True,
                 tied=True, bf16=False, layers=4, hidden=8, heads=2, ffn=16, vocab=32,
                 distopt=False, dp=1, bucket=0, busbw=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    @staticmethod
    def parse(argv):
        c = Config()
        for a in argv:
            k, v = a.split("=")
            setattr(c, k, v if k == "spec" else int(v))
        return c

    def moe(self, layer):
        return self.experts > 0 and layer % 2 == 1


def logical_shapes(c):
    """[(name, shape)] of the logical parameters, MXMACA's names, in Megatron's order."""
    h, f1 = c.hidden, (2 * c.ffn if c.swiglu else c.ffn)
    out = [("embedding.word_embeddings.weight", [c.vocab, h])]
    for l in range(c.layers):
        p = f"decoder.layers.{l}."
        out += [(p + "input_layernorm.weight", [h]), (p + "input_layernorm.bias", [h]),
                (p + "self_attention.linear_proj.weight", [h, h]), (p + "self_attention.linear_proj.bias", [h]),
                (p + "self_attention.linear_qkv.weight", [3 * h, h]), (p + "self_attention.linear_qkv.bias", [3 * h]),
                (p + "pre_mlp_layernorm.weight", [h]), (p + "pre_mlp_layernorm.bias", [h])]
        if c.moe(l):
            out += [(p + "mlp.router.weight", [c.experts, h])]
            out += [(p + f"mlp.experts.linear_fc1.weight{i}", [f1, h]) for i in range(c.experts)]
            out += [(p + f"mlp.experts.linear_fc2.weight{i}", [h, c.ffn]) for i in range(c.experts)]
        else:
            out += [(p + "mlp.linear_fc1.weight", [f1, h]), (p + "mlp.linear_fc1.bias", [f1]),
                    (p + "mlp.linear_fc2.weight", [h, c.ffn]), (p + "mlp.linear_fc2.bias", [h])]
    out += [("decoder.final_layernorm.weight", [h]), ("decoder.final_layernorm.bias", [h])]
    if not c.tied:
        out += [("output_layer.weight", [c.vocab, h])]
    return out


def buffers(c):
    return [(f"decoder.layers.{l}.mlp.router.expert_bias", [c.experts]) for l in range(c.layers) if c.moe(l)]


def split_kind(name, c):
    if name in ("embedding.word_embeddings.weight", "output_layer.weight"):
        return "rows"
    if ".mlp.experts." in name:
        return "none"
    if name.endswith(("linear_qkv.weight", "linear_qkv.bias")):
        return "rows"
    if name.endswith(("linear_fc1.weight", "linear_fc1.bias")):
        return "gateup" if c.swiglu else "rows"
    if name.endswith(("linear_proj.weight", "linear_fc2.weight")):
        return "cols"
    return "none"


def shard(t, kind, r, tp):
    if kind == "rows":
        return torch.chunk(t, tp, dim=0)[r]
    if kind == "cols":
        return torch.chunk(t, tp, dim=1)[r]
    if kind == "gateup":
        g, u = torch.chunk(t, 2, dim=0)
        return torch.cat([torch.chunk(g, tp, dim=0)[r], torch.chunk(u, tp, dim=0)[r]])
    return t


def merge(pieces, kind):
    if kind == "rows":
        return torch.cat(pieces, dim=0)
    if kind == "cols":
        return torch.cat(pieces, dim=1)
    if kind == "gateup":
        halves = [torch.chunk(p, 2, dim=0) for p in pieces]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves])
    return pieces[0]


TE = {"input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
      "input_layernorm.bias": "self_attention.linear_qkv.layer_norm_bias",
      "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
      "pre_mlp_layernorm.bias": "mlp.linear_fc1.layer_norm_bias"}


def key_of(name, c, stage, e):
    """The rank file key of logical `name` on pipeline rank `stage`, EP rank `e`; None
    when another EP rank holds it."""
    m = re.match(r"decoder\.layers\.(\d+)\.(.*)", name)
    if not m:
        return name
    per = c.layers // c.pp
    l, rest = int(m.group(1)), m.group(2)
    local = l - stage * per
    em = re.match(r"mlp\.experts\.(linear_fc[12])\.(weight|bias)(\d+)", rest)
    if em:
        el = c.experts // c.ep
        i = int(em.group(3))
        if i // el != e:
            return None
        j = i % el
        rest = (f"mlp.experts.{em.group(1)}.{em.group(2)}{j}" if c.grouped
                else f"mlp.experts.local_experts.{j}.{em.group(1)}.{em.group(2)}")
    elif c.spec == "te" and rest in TE and not (c.moe(l) and rest.startswith("pre_mlp")):
        rest = TE[rest]
    return f"decoder.layers.{local}.{rest}"


def extra_states(c, stage):
    if c.spec != "te":
        return []
    per = c.layers // c.pp
    out = []
    for l in range(stage * per, (stage + 1) * per):
        p = f"decoder.layers.{l - stage * per}."
        out += [p + "self_attention.core_attention._extra_state", p + "self_attention.linear_proj._extra_state",
                p + "self_attention.linear_qkv._extra_state"]
        if c.moe(l):
            if c.grouped:
                out += [p + "mlp.experts.linear_fc1._extra_state", p + "mlp.experts.linear_fc2._extra_state"]
            else:
                for j in range(c.experts // c.ep):
                    out += [p + f"mlp.experts.local_experts.{j}.linear_fc1._extra_state",
                            p + f"mlp.experts.local_experts.{j}.linear_fc2._extra_state"]
        else:
            out += [p + "mlp.linear_fc1._extra_state", p + "mlp.linear_fc2._extra_state"]
    return out


def stage_of(name, c):
    m = re.match(r"decoder\.layers\.(\d+)\.", name)
    if m:
        return int(m.group(1)) // (c.layers // c.pp)
    if name.startswith("embedding."):
        return 0
    return c.pp - 1


def rank_dir(t, p, e, c):
    s = f"mp_rank_{t:02d}"
    if c.pp > 1:
        s += f"_{p:03d}"
    if c.ep > 1:
        s += f"_{e:03d}"
    return s


_LAYER_ORDER = [
    "input_layernorm.weight", "input_layernorm.bias", "self_attention.core_attention._extra_state",
    "self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
    "self_attention.linear_proj._extra_state", "self_attention.linear_qkv.layer_norm_weight",
    "self_attention.linear_qkv.layer_norm_bias", "self_attention.linear_qkv.weight",
    "self_attention.linear_qkv.bias", "self_attention.linear_qkv._extra_state",
    "pre_mlp_layernorm.weight", "pre_mlp_layernorm.bias", "mlp.linear_fc1.layer_norm_weight",
    "mlp.linear_fc1.layer_norm_bias", "mlp.linear_fc1.weight", "mlp.linear_fc1.bias",
    "mlp.linear_fc1._extra_state", "mlp.linear_fc2.weight", "mlp.linear_fc2.bias",
    "mlp.linear_fc2._extra_state", "mlp.router.weight", "mlp.router.expert_bias"]
_TOP_FIRST = ["embedding.word_embeddings.weight", "embedding.position_embeddings.weight"]
_TOP_LAST = ["decoder.final_layernorm.weight", "decoder.final_layernorm.bias", "output_layer.weight"]


def _order(entry):
    """Module registration order (Megatron's state-dict order) of a rank file key."""
    k = entry[0]
    if k in _TOP_FIRST:
        return (0, _TOP_FIRST.index(k), 0, 0)
    if k in _TOP_LAST:
        return (2, _TOP_LAST.index(k), 0, 0)
    local, rest = int(k.split(".")[2]), k.split(".", 3)[3]
    if rest in _LAYER_ORDER:
        return (1, local, _LAYER_ORDER.index(rest), 0)
    m = re.match(r"mlp\.experts\.(?:local_experts\.(\d+)\.)?linear_fc([12])\.(weight|bias|_extra_state)(\d*)", rest)
    ex, fc, kd, idx = int(m.group(1) or 0), int(m.group(2)), m.group(3), int(m.group(4) or 0)
    return (1, local, 100, ex * 1000000 + (fc - 1) * 100000
            + ["weight", "bias", "_extra_state"].index(kd) * 10000 + idx)


def rank_entries(c, p, e):
    """[(key, logical name or None for _extra_state, 'model/' | 'buffers/' | None)] of the
    rank file of pipeline rank p, EP rank e, in state-dict order."""
    names = [n for n, _ in logical_shapes(c)]
    bufs = [n for n, _ in buffers(c)]
    entries = []
    for n in names + bufs:
        if stage_of(n, c) != p:
            continue
        k = key_of(n, c, p, e)
        if k is not None:
            entries.append((k, n, "buffers/" if n in bufs else "model/"))
    if c.tied and c.pp > 1 and p == c.pp - 1:
        entries.append(("output_layer.weight", "embedding.word_embeddings.weight", "model/"))
    entries += [(x, None, None) for x in extra_states(c, p)]
    entries.sort(key=_order)
    return entries


def distopt_shared_and_bucket(c, p, entries):
    """For pipeline rank p's state-dict `entries` [(key, name, kind)]: param.shared_embedding
    of each "model/" entry in order (with PP > 1 and tied embeddings: the first stage's word
    embedding and the last stage's output_layer copy) and the test configs' bucket size
    (c.bucket elements on the first stage, else one bucket: None)."""
    shared = [c.tied and c.pp > 1 and ((p == 0 and n == "embedding.word_embeddings.weight" and k != "output_layer.weight")
                                       or (p == c.pp - 1 and k == "output_layer.weight"))
              for (k, n, kind) in entries if kind == "model/"]
    return shared, (c.bucket if c.bucket and p == 0 else None)


def distopt_world_tensors(values, shared, bucket_size, dp, busbw):
    """Megatron-Core's distributed optimizer at core_v0.19.0: lays the flat `values` of one
    gradient buffer's parameters (named_parameters order; shared[i] = param.shared_embedding)
    out as DistributedOptimizer._compute_per_buffer_param_layout does (reverse order, starts
    padded to 64, buckets closed at bucket_size and around shared embeddings, ends padded to
    lcm(dp, 128[, 2**16])), fills a zero buffer of that size, then concatenates each bucket's
    unpadded part as get_parameter_state_dp_zero does. Returns (world tensor, numel_unpadded)."""
    divisor = math.lcm(dp, 128, 2**16) if busbw else math.lcm(dp, 128)
    pad = lambda v, d: int(math.ceil(v / d) * d)  # noqa: E731
    index_map, bucket_indices, unpadded = {}, [], []
    state = {"param_start": 0, "bucket_start": 0, "bucket_params": 0, "bucket_id": 0}

    def finalize(param_end):
        unpadded.append(param_end - state["bucket_start"])
        end = pad(param_end, divisor)
        bucket_indices.append((state["bucket_start"], end))
        state["bucket_start"] = end
        state["bucket_id"] += 1
        state["bucket_params"] = 0
        state["param_start"] = end

    param_end = 0
    for i in reversed(range(len(values))):
        state["param_start"] = pad(state["param_start"], 64)
        if shared[i] and state["bucket_params"] > 0:
            finalize(state["param_start"])
        param_end = state["param_start"] + values[i].numel()
        index_map[i] = (state["param_start"], param_end, state["bucket_id"])
        state["bucket_params"] += 1
        if (bucket_size is not None and param_end - state["bucket_start"] >= bucket_size) or shared[i]:
            finalize(param_end)
        else:
            state["param_start"] = param_end
    if state["bucket_params"] > 0:
        finalize(param_end)
    buf = torch.zeros(bucket_indices[-1][1], dtype=torch.float32)
    for i, v in enumerate(values):
        s, e, _ = index_map[i]
        buf[s:e] = v.reshape(-1).float()
    world = torch.cat([buf[s:s + n] for (s, _), n in zip(bucket_indices, unpadded)])
    return world, sum(unpadded)
