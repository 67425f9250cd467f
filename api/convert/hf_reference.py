"""api/convert/hf_reference.py: an independent forward of a Hugging Face gpt2 / llama /
mistral / qwen2 / qwen3 / mixtral model directory, written from transformers' definitions
(modeling_gpt2.py GPT2Attention / GPT2MLP / Conv1D; modeling_llama.py LlamaRMSNorm,
LlamaRotaryEmbedding + rotate_half, repeat_kv, LlamaMLP; modeling_qwen2.py (q/k/v biases);
modeling_qwen3.py Qwen3Attention's q_norm / k_norm per head before RoPE;
modeling_mixtral.py MixtralSparseMoeBlock, MixtralBlockSparseTop2MLP;
modeling_qwen3_moe.py Qwen3MoeSparseMoeBlock with norm_topk_prob, Qwen3MoeMLP), reading
model.safetensors by Hugging Face names with a parser of
its own (u64 LE header length, JSON header, raw little-endian data). Computes in float64 so
the comparison measures MXMACA's fp32 error alone.

usage: hf_reference.py HF_DIR INPUT_JSON OUTPUT_JSON [--swap-qk] [--swap-experts] [--swap-w1-w3]
                       [--swap-qk-norm]
  INPUT_JSON: {"tokens": [[...]], "labels": [[...]]} ([b, s] ints)
  OUTPUT_JSON: {"token_losses": [[...]], "inv_freq": [...]} (per-token cross-entropy, nats;
    RoPE's inverse frequencies as transformers computes them from config.json, not gpt2)
  Deliberately wrong readings, for the negative tests:
  --swap-qk: q and k exchanged in layer 0;
  --swap-experts (mixtral, qwen3_moe): experts 0 and 1 of layer 0 exchanged (all three of
    their projections);
  --swap-w1-w3 (mixtral, qwen3_moe): the gate and up projections exchanged in every expert
    of layer 0;
  --swap-qk-norm (qwen3): q_norm and k_norm exchanged in layer 0.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[base + b:base + end]
        if e["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif e["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32).astype(np.float64)
        else:
            raise ValueError(f"{path}: {name}: dtype {e['dtype']}")
        out[name] = torch.from_numpy(arr.reshape(e["shape"]).copy())
    return out


def causal_attention(q, k, v):
    # q, k, v: [b, heads, s, hn]; softmax(q k^T / sqrt(hn) + causal mask) v
    s = q.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def gpt2_forward(cfg, w, tokens, swap_qk):
    p = "transformer." if "transformer.wte.weight" in w else ""
    h, nh = cfg["n_embd"], cfg["n_head"]
    hn = h // nh
    eps = cfg["layer_norm_epsilon"]
    b, s = tokens.shape
    x = w[p + "wte.weight"][tokens] + w[p + "wpe.weight"][torch.arange(s)][None]
    act = cfg.get("activation_function", "gelu_new")

    def gelu(t):
        if act in ("gelu_new", "gelu_pytorch_tanh"):
            return 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t ** 3)))
        return torch.nn.functional.gelu(t)

    def ln(t, name):
        return torch.nn.functional.layer_norm(t, (h,), w[name + ".weight"], w[name + ".bias"], eps)

    for i in range(cfg["n_layer"]):
        q_ = f"{p}h.{i}."
        a = ln(x, q_ + "ln_1")
        qkv = a @ w[q_ + "attn.c_attn.weight"] + w[q_ + "attn.c_attn.bias"]  # Conv1D: x W + b
        q, k, v = qkv.split(h, dim=-1)
        if swap_qk and i == 0:
            q, k = k, q
        heads = lambda t: t.view(b, s, nh, hn).transpose(1, 2)
        o = causal_attention(heads(q), heads(k), heads(v)).transpose(1, 2).reshape(b, s, h)
        x = x + o @ w[q_ + "attn.c_proj.weight"] + w[q_ + "attn.c_proj.bias"]
        m = ln(x, q_ + "ln_2")
        m = gelu(m @ w[q_ + "mlp.c_fc.weight"] + w[q_ + "mlp.c_fc.bias"])
        x = x + m @ w[q_ + "mlp.c_proj.weight"] + w[q_ + "mlp.c_proj.bias"]
    x = ln(x, p + "ln_f")
    return x @ w[p + "wte.weight"].T


def sparse_moe(m, gate, experts, k, renormalise, swap_experts, swap_gate_up):
    """The sparse MoE block both Mixtral and Qwen3-MoE compute, on m [b, s, h]: router logits
    = m gate^T; weights = softmax over all experts, top-k, divided by their sum when
    `renormalise`; each token's output = sum over its k experts of
    weight * down(silu(gate_proj x) * up_proj x). `experts` is [(gate_proj, up_proj, down)]
    per expert. Dropless; torch.topk's order among exact ties is not relied on (the test's
    random weights have none)."""
    b, s, h = m.shape
    x = m.reshape(b * s, h)
    weights, selected = torch.topk(torch.softmax(x @ gate.T, dim=-1), k, dim=-1)
    if renormalise:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    order = list(range(len(experts)))
    if swap_experts:
        order[0], order[1] = 1, 0
    out = torch.zeros_like(x)
    for e in range(len(experts)):
        g, u, d = experts[order[e]]
        if swap_gate_up:
            g, u = u, g
        rows, slot = torch.where(selected == e)
        if rows.numel() == 0:
            continue
        xe = x[rows]
        ye = (torch.nn.functional.silu(xe @ g.T) * (xe @ u.T)) @ d.T
        out.index_add_(0, rows, ye * weights[rows, slot][:, None])
    return out.reshape(b, s, h)


def mixtral_moe(cfg, w, p, m, swap_experts, swap_w1_w3):
    """MixtralSparseMoeBlock: gate block_sparse_moe.gate, experts w1 (gate proj), w3 (up
    proj), w2 (down); always renormalised over the top-k."""
    q = [f"{p}block_sparse_moe.experts.{e}." for e in range(cfg["num_local_experts"])]
    experts = [(w[x + "w1.weight"], w[x + "w3.weight"], w[x + "w2.weight"]) for x in q]
    return sparse_moe(m, w[p + "block_sparse_moe.gate.weight"], experts,
                      cfg["num_experts_per_tok"], True, swap_experts, swap_w1_w3)


def qwen3_moe_moe(cfg, w, p, m, swap_experts, swap_gate_up):
    """Qwen3MoeSparseMoeBlock: gate mlp.gate, experts mlp.experts.x.{gate,up,down}_proj
    (Qwen3MoeMLP); renormalised only when norm_topk_prob (Qwen3MoeConfig's default: false)."""
    q = [f"{p}mlp.experts.{e}." for e in range(cfg["num_experts"])]
    experts = [(w[x + "gate_proj.weight"], w[x + "up_proj.weight"], w[x + "down_proj.weight"])
               for x in q]
    return sparse_moe(m, w[p + "mlp.gate.weight"], experts, cfg["num_experts_per_tok"],
                      cfg.get("norm_topk_prob", False), swap_experts, swap_gate_up)


def rope_inv_freq(cfg, hn):
    """transformers' modeling_rope_utils: _compute_default_rope_parameters, and with
    rope_scaling _compute_linear_scaling_rope_parameters (inv_freq / factor) or
    _compute_llama3_parameters (wavelength bands of original_max_position_embeddings)."""
    theta = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (theta ** (torch.arange(0, hn, 2, dtype=torch.float64) / hn))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv_freq
    kind = rs.get("rope_type", rs.get("type"))
    factor = rs["factor"]
    if kind == "linear":
        return inv_freq / factor
    assert kind == "llama3", rs
    low, high = rs["low_freq_factor"], rs["high_freq_factor"]
    old_len = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, inv_freq_llama)


def llama_forward(cfg, w, tokens, swap_qk, swap_experts=False, swap_w1_w3=False, swap_qk_norm=False):
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    ng = cfg.get("num_key_value_heads") or nh
    hn = cfg.get("head_dim") or h // nh
    eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    b, s = tokens.shape

    def linear(t, name):
        y = t @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def rms(t, name):  # LlamaRMSNorm
        return w[name + ".weight"] * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps))

    inv_freq = rope_inv_freq(cfg, hn)
    freqs = torch.arange(s, dtype=torch.float64)[:, None] * inv_freq[None]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    x = w["model.embed_tokens.weight"][tokens]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = rms(x, p + "input_layernorm")
        q = linear(a, p + "self_attn.q_proj").view(b, s, nh, hn).transpose(1, 2)
        k = linear(a, p + "self_attn.k_proj").view(b, s, ng, hn).transpose(1, 2)
        v = linear(a, p + "self_attn.v_proj").view(b, s, ng, hn).transpose(1, 2)
        if p + "self_attn.q_norm.weight" in w:  # modeling_qwen3.py: Qwen3RMSNorm per head, before RoPE
            qn, kn = ("k_norm", "q_norm") if swap_qk_norm and i == 0 else ("q_norm", "k_norm")
            q = rms(q, p + "self_attn." + qn)
            k = rms(k, p + "self_attn." + kn)
        if swap_qk and i == 0:  # exchange the first query head with the first k head
            q0 = q[:, :1].clone()
            q = torch.cat((k[:, :1], q[:, 1:]), dim=1)
            k = torch.cat((q0, k[:, 1:]), dim=1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // ng, dim=1)  # repeat_kv
        v = v.repeat_interleave(nh // ng, dim=1)
        o = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, nh * hn)
        x = x + linear(o, p + "self_attn.o_proj")
        m = rms(x, p + "post_attention_layernorm")
        if cfg["model_type"] == "mixtral":
            m = mixtral_moe(cfg, w, p, m, swap_experts and i == 0, swap_w1_w3 and i == 0)
        elif cfg["model_type"] == "qwen3_moe":
            m = qwen3_moe_moe(cfg, w, p, m, swap_experts and i == 0, swap_w1_w3 and i == 0)
        else:
            gate, up = linear(m, p + "mlp.gate_proj"), linear(m, p + "mlp.up_proj")
            m = linear(torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")
        x = x + m
    x = rms(x, "model.norm")
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return x @ head.T


def main():
    hf_dir, inp, outp = sys.argv[1:4]
    swap_qk = "--swap-qk" in sys.argv[4:]
    swap_experts = "--swap-experts" in sys.argv[4:]
    swap_w1_w3 = "--swap-w1-w3" in sys.argv[4:]
    swap_qk_norm = "--swap-qk-norm" in sys.argv[4:]
    with open(hf_dir + "/config.json") as f:
        cfg = json.load(f)
    w = read_safetensors(hf_dir + "/model.safetensors")
    with open(inp) as f:
        io = json.load(f)
    tokens = torch.tensor(io["tokens"], dtype=torch.long)
    labels = torch.tensor(io["labels"], dtype=torch.long)
    if cfg["model_type"] == "gpt2":
        logits = gpt2_forward(cfg, w, tokens, swap_qk)
    else:
        logits = llama_forward(cfg, w, tokens, swap_qk, swap_experts, swap_w1_w3, swap_qk_norm)
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    out = {"token_losses": losses.tolist()}
    if cfg["model_type"] != "gpt2":
        h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        out["inv_freq"] = rope_inv_freq(cfg, cfg.get("head_dim") or h // nh).tolist()
    with open(outp, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
