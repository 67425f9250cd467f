#!/usr/bin/python3
"""PyTorch baseline for the training-throughput benchmark (run with /usr/bin/python3).

The same GPT as `mxmaca train` builds for the benchmark flags (pre-norm blocks, learned
positions, LayerNorm, exact GELU, fused QKV, tied embeddings, padded vocab, causal
attention, AdamW, fp32), trained on random tokens with the same batch shape. Prints one
line: "torch tokens/s: X". Time is measured over the iterations after the first two.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, ffn)
        self.fc2 = nn.Linear(ffn, h)

    def forward(self, x, mask):
        b, s, h = x.shape
        hd = h // self.heads
        qkv = self.qkv(self.ln1(x)).view(b, s, self.heads, 3, hd)
        q, k, v = (qkv[:, :, :, i].transpose(1, 2) for i in range(3))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, h, heads, seq, vocab_padded):
        super().__init__()
        self.wte = nn.Embedding(vocab_padded, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads, 4 * h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))
        # Megatron's initialisation, as mxmaca uses it: normal(0, 0.02) weights, output
        # projections scaled by 1/sqrt(2 L), zero biases, unit norms. (PyTorch's default
        # N(0, 1) embedding makes the tied logits huge: their softmax tails go denormal and
        # every iteration gets slower.)
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens, labels, vocab):
        s = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(s))
        for blk in self.blocks:
            x = blk(x, self.mask[:s, :s])
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits[..., :vocab].reshape(-1, vocab), labels.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--vocab-padded", type=int, default=50304)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Gpt(a.layers, a.hidden, a.heads, a.seq, a.vocab_padded)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for it in range(a.iters):
        tokens = torch.randint(0, a.vocab, (a.micro_batch, a.seq))
        labels = torch.randint(0, a.vocab, (a.micro_batch, a.seq))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, labels, a.vocab)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        if a.verbose:
            print("iteration %d: %.3f s" % (it + 1, times[-1]), flush=True)
    steady = times[2:] if len(times) > 2 else times
    per_iter = sum(steady) / len(steady)
    print("torch tokens/s: %.1f" % (a.micro_batch * a.seq / per_iter))


if __name__ == "__main__":
    main()
