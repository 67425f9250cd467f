#!/usr/bin/python3
"""PyTorch (float64) references for the CPU kernel parity tests (//kernels/cpu:*_test).

Usage: /usr/bin/python3 torch_ops.py <op> <dir>

<dir> holds the inputs the C++ test wrote: raw little-endian `<name>.f32` (float32) and
`<name>.i32` (int32) files and `params.txt` ("name value" lines, shapes and scalars).
Inputs are widened to float64, the op runs forward (and backward through autograd with the
given upstream gradient) in float64, and every output is written as `<name>.f64`.
The formulas are the ones Megatron-LM and torch use; see each op's docstring.
"""
import math
import os
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


class Io:
    def __init__(self, folder):
        self.dir = folder
        self.p = {}
        with open(os.path.join(folder, "params.txt")) as f:
            for line in f:
                k, v = line.split()
                self.p[k] = float(v)

    def i(self, name):
        return int(self.p[name])

    def f(self, name):
        return self.p[name]

    def has(self, name):
        return os.path.exists(os.path.join(self.dir, name + ".f32")) or os.path.exists(
            os.path.join(self.dir, name + ".i32"))

    def tensor(self, name, shape, grad=False):
        a = np.fromfile(os.path.join(self.dir, name + ".f32"), dtype="<f4").astype(np.float64)
        t = torch.from_numpy(a).reshape(shape).clone()
        t.requires_grad_(grad)
        return t

    def ints(self, name, shape):
        a = np.fromfile(os.path.join(self.dir, name + ".i32"), dtype="<i4").astype(np.int64)
        return torch.from_numpy(a).reshape(shape).clone()

    def out(self, name, t):
        np.ascontiguousarray(t.detach().numpy().astype("<f8")).tofile(
            os.path.join(self.dir, name + ".f64"))


def op_gelu(io):
    """Exact GELU, torch.nn.functional.gelu(approximate='none')."""
    n = io.i("n")
    x = io.tensor("x", [n], grad=True)
    dy = io.tensor("dy", [n])
    y = torch.nn.functional.gelu(x)
    y.backward(dy)
    io.out("y", y)
    io.out("dx", x.grad)


def op_gelu_tanh(io):
    """Tanh GELU, torch.nn.functional.gelu(approximate='tanh') (Megatron's bias_gelu)."""
    n = io.i("n")
    x = io.tensor("x", [n], grad=True)
    dy = io.tensor("dy", [n])
    y = torch.nn.functional.gelu(x, approximate="tanh")
    y.backward(dy)
    io.out("y", y)
    io.out("dx", x.grad)


def op_swiglu(io):
    """Megatron SwiGLU: x = cat(gate, up) on the last dim; y = silu(gate) * up."""
    rows, f = io.i("rows"), io.i("f")
    x = io.tensor("x", [rows, 2 * f], grad=True)
    dy = io.tensor("dy", [rows, f])
    gate, up = torch.chunk(x, 2, dim=-1)
    y = torch.nn.functional.silu(gate) * up
    y.backward(dy)
    io.out("y", y)
    io.out("dx", x.grad)


def op_layer_norm(io):
    """torch.nn.functional.layer_norm (biased variance); mean/rstd as torch stashes them."""
    n, h, eps = io.i("n"), io.i("h"), io.f("eps")
    x = io.tensor("x", [n, h], grad=True)
    gamma = io.tensor("gamma", [h], grad=True)
    beta = io.tensor("beta", [h], grad=True) if io.has("beta") else None
    dy = io.tensor("dy", [n, h])
    y = torch.nn.functional.layer_norm(x, [h], gamma, beta, eps)
    y.backward(dy)
    xd = x.detach()
    mean = xd.mean(-1)
    rstd = 1.0 / torch.sqrt(xd.var(-1, unbiased=False) + eps)
    io.out("y", y)
    io.out("dx", x.grad)
    io.out("dgamma", gamma.grad)
    if beta is not None:
        io.out("dbeta", beta.grad)
    io.out("mean", mean)
    io.out("rstd", rstd)


def op_rms_norm(io):
    """Megatron RMSNorm (megatron/legacy/model/rms_norm.py):
    x * rsqrt(mean(x^2, -1) + eps) * weight."""
    n, h, eps = io.i("n"), io.i("h"), io.f("eps")
    x = io.tensor("x", [n, h], grad=True)
    gamma = io.tensor("gamma", [h], grad=True)
    dy = io.tensor("dy", [n, h])
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    y = x * rstd * gamma
    y.backward(dy)
    io.out("y", y)
    io.out("dx", x.grad)
    io.out("dgamma", gamma.grad)
    io.out("rstd", rstd.detach().reshape(n))


def op_attention(io):
    """Megatron core attention (DotProductAttention, unfused path): GQA by
    repeat_interleave of k/v over heads, scores = scale * q k^T, causal mask (and
    --reset-attention-mask document mask when doc_start is given), softmax, optional
    dropout given as an explicit keep mask, context = probs @ v."""
    b, s, nh, ng, d = (io.i(k) for k in ("b", "s", "nh", "ng", "d"))
    scale = io.f("scale")
    q = io.tensor("q", [b, nh, s, d], grad=True)
    k = io.tensor("k", [b, ng, s, d], grad=True)
    v = io.tensor("v", [b, ng, s, d], grad=True)
    dout = io.tensor("dout", [b, nh, s, d])
    hpg = nh // ng
    kr = k.repeat_interleave(hpg, dim=1)
    vr = v.repeat_interleave(hpg, dim=1)
    scores = torch.matmul(q, kr.transpose(-1, -2)) * scale
    i = torch.arange(s).reshape(s, 1)
    j = torch.arange(s).reshape(1, s)
    allowed = (j <= i).reshape(1, 1, s, s).expand(b, nh, s, s)
    if io.has("doc_start"):
        ds = io.ints("doc_start", [b, s])
        allowed = allowed & (j.reshape(1, 1, 1, s) >= ds.reshape(b, 1, s, 1))
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    dropped = probs
    if io.has("keep"):
        p = io.f("dropout_p")
        keep = io.tensor("keep", [b, nh, s, s])
        dropped = probs * keep / (1.0 - p)
    o = torch.matmul(dropped, vr)
    o.backward(dout)
    io.out("o", o)
    io.out("probs", probs)
    io.out("dq", q.grad)
    io.out("dk", k.grad)
    io.out("dv", v.grad)


def op_rope(io):
    """Megatron RotaryEmbedding + apply_rotary_pos_emb (non-interleaved):
    inv_freq = 1 / base^(arange(0, dim, 2) / dim); emb = cat(freqs, freqs);
    t = x[..., :dim] * cos + rotate_half(x[..., :dim]) * sin; rest passes through.
    inv_freq and the angles (torch.outer) are fp32 as in Megatron; the rest is fp64."""
    b, s, nh, d, rd = (io.i(k) for k in ("b", "s", "nh", "d", "rotary_dim"))
    base = io.f("base")
    x = io.tensor("x", [b, nh, s, d], grad=True)
    dy = io.tensor("dy", [b, nh, s, d])
    pos = io.ints("positions", [b, s]).to(torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
    freqs = (pos.reshape(b, 1, s, 1) * inv_freq.reshape(1, 1, 1, rd // 2)).to(torch.float64)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = torch.cos(emb), torch.sin(emb)
    xr, xp = x[..., :rd], x[..., rd:]
    x1, x2 = torch.chunk(xr, 2, dim=-1)
    rot = torch.cat((-x2, x1), dim=-1)
    y = torch.cat((xr * cos + rot * sin, xp), dim=-1)
    y.backward(dy)
    io.out("y", y)
    io.out("dx", x.grad)


def op_cross_entropy(io):
    """Cross-entropy over the first V of VP logit columns (padding excluded)."""
    n, vp, v = io.i("n"), io.i("vp"), io.i("v")
    logits = io.tensor("logits", [n, vp], grad=True)
    targets = io.ints("targets", [n])
    dloss = io.tensor("dloss", [n])
    real = logits[:, :v]
    lse = torch.logsumexp(real, dim=-1)
    loss = torch.nn.functional.cross_entropy(real, targets, reduction="none")
    loss.backward(dloss)
    io.out("loss", loss)
    io.out("lse", lse)
    io.out("dlogits", logits.grad)


def op_adamw(io):
    """torch.optim.AdamW (foreach=False) for `steps` steps with the given gradients."""
    n, steps = io.i("n"), io.i("steps")
    param = torch.nn.Parameter(io.tensor("param", [n]))
    grads = io.tensor("grads", [steps, n])
    opt = torch.optim.AdamW([param], lr=io.f("lr"), betas=(io.f("beta1"), io.f("beta2")),
                            eps=io.f("eps"), weight_decay=io.f("weight_decay"),
                            foreach=False)
    for t in range(steps):
        param.grad = grads[t].clone()
        opt.step()
    st = opt.state[param]
    io.out("param", param.detach())
    io.out("exp_avg", st["exp_avg"])
    io.out("exp_avg_sq", st["exp_avg_sq"])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    op, folder = sys.argv[1], sys.argv[2]
    fn = globals().get("op_" + op)
    if fn is None:
        sys.exit("torch_ops.py: unknown op %r" % op)
    fn(Io(folder))


if __name__ == "__main__":
    main()
