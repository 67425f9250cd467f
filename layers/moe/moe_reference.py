#!/usr/bin/python3
"""PyTorch reference of Megatron-Core's MoE layer at EP = 1 (for //layers/moe:moe_parity_test).

Usage: /usr/bin/python3 moe_reference.py <dir>

<dir> holds what the C++ test wrote: params.txt ("name value" lines), raw little-endian
float32 files x.f32 [T, h], dy.f32 [T, h], expert_bias.f32 [E], optionally
global_tpe.f32 [E], and one <parameter name>.f32 per parameter. The layer is written
here from Megatron-Core's formulas (megatron/core/transformer/moe/router.py, moe_utils.py,
experts.py, moe_layer.py, shared_experts.py; core_v0.15), in float64 with autograd:
  loss = sum(y * dy) + aux_loss_grad_scale * (aux_loss + z_loss)
so every gradient includes the aux / z-loss terms scaled like the main loss
(MoEAuxLossAutoScaler). Outputs (float64, <name>.f64): y, dx, probs, routing_map,
tokens_per_expert, aux_loss, z_loss, grad.<parameter name>.

Ties: every top-k orders by (value descending, index ascending) through a STABLE
descending sort, the rule issue 7 fixes for the whole project (torch.topk's tie order is
unspecified). Sinkhorn runs in float32 as Megatron's (logits cast to float32).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def read_params(folder):
    p = {}
    with open(os.path.join(folder, "params.txt")) as f:
        for line in f:
            k, v = line.split()
            p[k] = float(v)
    return p


def load(folder, name, shape, grad=False):
    a = np.fromfile(os.path.join(folder, name + ".f32"), dtype="<f4").astype(np.float64)
    t = torch.from_numpy(a).reshape(shape).clone()
    t.requires_grad_(grad)
    return t


def save(folder, name, t):
    np.ascontiguousarray(t.detach().to(torch.float64).numpy().astype("<f8")).tofile(
        os.path.join(folder, name + ".f64"))


def topk_lower(values, k):
    """Indices of the k largest values along the last dim, ties to the lower index."""
    return torch.sort(values, dim=-1, descending=True, stable=True).indices[..., :k]


def group_limited_topk(values, k, num_groups, group_topk):
    """Megatron's group_limited_topk (selection indices only)."""
    t, e = values.shape
    grouped = values.view(t, num_groups, e // num_groups)
    best = torch.sort(grouped, dim=-1, descending=True, stable=True).values
    group_scores = best[..., : k // group_topk].sum(dim=-1)
    groups = topk_lower(group_scores, group_topk)
    group_mask = torch.zeros(t, num_groups, dtype=torch.bool).scatter(1, groups, True)
    expert_mask = group_mask.unsqueeze(-1).expand(t, num_groups, e // num_groups).reshape(t, e)
    return topk_lower(values.masked_fill(~expert_mask, float("-inf")), k)


def select(values, k, p):
    if p["num_groups"] > 0:
        return group_limited_topk(values, k, int(p["num_groups"]), int(p["group_topk"]))
    return topk_lower(values, k)


def sinkhorn(cost, tol=0.0001):
    """Megatron's sinkhorn (moe_utils.py), run in float32."""
    cost = torch.exp(cost)
    d0 = torch.ones(cost.size(0), dtype=cost.dtype)
    d1 = torch.ones(cost.size(1), dtype=cost.dtype)
    eps = 0.00000001
    error = 1e9
    d1_old = d1
    while error > tol:
        d0 = (1 / d0.size(0)) * 1 / (torch.sum(d1 * cost, 1) + eps)
        d1 = (1 / d1.size(0)) * 1 / (torch.sum(d0.unsqueeze(1) * cost, 0) + eps)
        error = torch.mean(torch.abs(d1_old - d1))
        d1_old = d1
    return d1 * cost * d0.unsqueeze(1)


def mlp(x, w1, b1, w2, b2, swiglu, gelu_tanh):
    h = x @ w1.t()
    if b1 is not None:
        h = h + b1
    if swiglu:
        gate, up = torch.chunk(h, 2, dim=-1)
        a = F.silu(gate) * up
    else:
        a = F.gelu(h, approximate="tanh" if gelu_tanh else "none")
    out = a @ w2.t()
    if b2 is not None:
        out = out + b2
    return out


def main():
    folder = sys.argv[1]
    p = read_params(folder)
    t, h, e, k = int(p["tokens"]), int(p["hidden"]), int(p["experts"]), int(p["topk"])
    f, fs = int(p["ffn"]), int(p["shared_ffn"])
    swiglu, gelu_tanh, bias = bool(p["swiglu"]), bool(p["gelu_tanh"]), bool(p["bias"])
    score = "softmax" if p["score_sigmoid"] == 0 else "sigmoid"
    lb = ["aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none"][int(p["lb_type"])]
    aux_coeff, z_coeff = p["aux_coeff"], p["z_coeff"]
    scale = p["grad_scale"]
    layer = int(p["layer"])
    prefix = "decoder.layers.%d.mlp" % layer
    f1 = 2 * f if swiglu else f
    fs1 = 2 * fs if swiglu else fs

    x = load(folder, "x", [t, h], grad=True)
    dy = load(folder, "dy", [t, h])
    expert_bias = load(folder, "expert_bias", [e])
    params = {}

    def param(name, shape):
        params[name] = load(folder, name, shape, grad=True)
        return params[name]

    wg = param(prefix + ".router.weight", [e, h])
    experts = []
    for i in range(e):
        base = prefix + ".experts.linear_fc%d.%s%d"
        w1 = param(base % (1, "weight", i), [f1, h])
        b1 = param(base % (1, "bias", i), [f1]) if bias else None
        w2 = param(base % (2, "weight", i), [h, f])
        b2 = param(base % (2, "bias", i), [h]) if bias else None
        experts.append((w1, b1, w2, b2))
    shared = None
    if fs > 0:
        base = prefix + ".shared_experts.linear_fc%d.%s"
        shared = (param(base % (1, "weight"), [fs1, h]),
                  param(base % (1, "bias"), [fs1]) if bias else None,
                  param(base % (2, "weight"), [h, fs]),
                  param(base % (2, "bias"), [h]) if bias else None)

    # ---- router (router.py TopKRouter.routing) ----
    logits = x @ wg.t()
    z_loss = torch.zeros(())
    if z_coeff > 0:
        z_loss = torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * z_coeff
    if lb == "sinkhorn":
        with torch.no_grad():
            norm = sinkhorn(logits.detach().to(torch.float32))
            idx = topk_lower(norm, k)
        act = torch.sigmoid(logits) if k == 1 else torch.softmax(logits, dim=-1)
        sel_probs = act.gather(1, idx)
    else:
        if score == "softmax":
            if p["pre_softmax"]:
                scores = torch.softmax(logits, dim=-1)
                idx = select(scores.detach(), k, p)
                sel_probs = scores.gather(1, idx)
            else:
                idx = select(logits.detach(), k, p)
                sel_probs = torch.softmax(logits.gather(1, idx), dim=-1)
        else:
            scores = torch.sigmoid(logits)
            routing_values = scores.detach()
            if p["expert_bias"]:
                routing_values = routing_values + expert_bias
            idx = select(routing_values, k, p)
            sel_probs = scores.gather(1, idx)
            if k > 1:
                sel_probs = sel_probs / (sel_probs.sum(dim=-1, keepdim=True) + 1e-20)
        if p["scaling"] != 0:
            sel_probs = sel_probs * p["scaling"]
    probs = torch.zeros(t, e).scatter(1, idx, sel_probs)
    routing_map = torch.zeros(t, e, dtype=torch.bool).scatter(1, idx, True)

    # ---- capacity (apply_router_token_dropping) ----
    if p["capacity_factor"] > 0:
        capacity = math.ceil((t * k / e) * p["capacity_factor"])
        if capacity > t:
            keep = torch.ones(t, e, dtype=torch.bool)
        else:
            keep = torch.zeros(t, e, dtype=torch.bool)
            key = probs.detach() if p["drop_position"] == 0 else routing_map.to(torch.float64)
            for col in range(e):
                order = torch.sort(key[:, col], descending=True, stable=True).indices[:capacity]
                keep[order, col] = True
        routing_map = keep if p["pad"] else (routing_map & keep)
        probs = probs * routing_map

    # ---- aux losses (compute_routing_scores_for_aux_loss + switch loss) ----
    aux_loss = torch.zeros(())
    if aux_coeff > 0 and lb in ("aux_loss", "seq_aux_loss", "global_aux_loss"):
        if score == "softmax":
            aux_scores = torch.softmax(logits, dim=-1)
        else:
            sig = torch.sigmoid(logits)
            aux_scores = sig / (sig.sum(dim=-1, keepdim=True) + 1e-20)
        aux_idx = topk_lower(aux_scores.detach(), k)
        aux_map = torch.zeros(t, e).scatter(1, aux_idx, 1.0)
        if lb == "aux_loss":
            aux_loss = (aux_scores.sum(0) * aux_map.sum(0)).sum() * (e * aux_coeff / (k * t * t))
        elif lb == "seq_aux_loss":
            s = int(p["seq_length"])
            b = t // s
            psum = aux_scores.view(b, s, e).sum(1)
            tpe = aux_map.view(b, s, e).sum(1)
            aux_loss = (psum * tpe).sum() * (e * aux_coeff / (k * s * s)) / b
        else:
            tpe = aux_map.sum(0)
            total = t
            if p["has_global"]:
                tpe = load(folder, "global_tpe", [e])
                total = p["global_total"]
            aux_loss = (aux_scores.sum(0) * tpe).sum() * (e * aux_coeff / (k * total * total))

    # ---- experts, combine, shared expert (moe_layer.py) ----
    y = torch.zeros(t, h)
    for i, (w1, b1, w2, b2) in enumerate(experts):
        out = mlp(x, w1, b1, w2, b2, swiglu, gelu_tanh)
        y = y + probs[:, i:i + 1] * out
    if shared is not None:
        y = y + mlp(x, *shared, swiglu, gelu_tanh)

    loss = (y * dy).sum() + scale * (aux_loss + z_loss)
    loss.backward()

    save(folder, "y", y)
    save(folder, "dx", x.grad)
    save(folder, "probs", probs)
    save(folder, "routing_map", routing_map.to(torch.float64))
    save(folder, "tokens_per_expert", routing_map.to(torch.float64).sum(0))
    save(folder, "aux_loss", aux_loss.reshape(1))
    save(folder, "z_loss", z_loss.reshape(1))
    for name, tensor in params.items():
        save(folder, "grad." + name, tensor.grad if tensor.grad is not None
             else torch.zeros_like(tensor))


if __name__ == "__main__":
    main()
