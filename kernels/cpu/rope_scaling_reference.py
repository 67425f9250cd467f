"""kernels/cpu/rope_scaling_reference.py: MXMACA's RoPE frequencies (kernels/cpu/rope.h
RopeFrequencies) against a direct PyTorch reimplementation of Megatron-Core's
RotaryEmbedding (megatron/core/models/common/embeddings/rotary_pos_embedding.py:
__init__'s inv_freq, _apply_scaling for --use-rope-scaling with factor
--rope-scaling-factor and Llama 3's fixed low_freq_factor 1, high_freq_factor 4,
original_max_position_embeddings 8192; get_freqs_non_repeated's seq *= 1 / factor for
--rotary-seq-len-interpolation-factor) and rope_utils' _apply_rotary_pos_emb_bshd
(non-interleaved: t * cos + rotate_half(t) * sin), all in fp32 as Megatron runs them.

Fresh random cases each run (bases 10000 / 500000, rotary dims 16..128, rotary_percent
< 1 sometimes, scaling factors 8 / 4 / 32 / random, interpolation factors 0 / 2 / 4,
positions up to 131072). Criteria:
  * inv_freq: equal bit for bit (the same fp32 operations in the same order); every case
    set must exercise all three of _apply_scaling's bands (low, medium, high frequency).
  * RopeForward / RopeBackward: the angle is the same fp32 product in both; Megatron takes
    cos/sin in fp32 (torch), MXMACA in fp64 of the fp32 angle rounded to fp32: both within
    ~1 ulp of the true value, so each rotated element, x1 cos -+ x2 sin, differs by at most
    a few fp32 ulps of max|x|: we allow 1e-6 * max|x| (measured: at most 5e-7
    absolute with max|x| ~ 3.5, i.e. ~1.5e-7 of max|x|).
  * Sensitivity: the reference without scaling (or without interpolation) must differ
    from the scaled one by far more than that tolerance, so the check cannot pass with
    the option ignored.
Usage: rope_scaling_reference.py ROPE_DUMP_BINARY WORK_DIR
"""
import math
import os
import random
import subprocess
import sys

import torch


def megatron_inv_freq(rotary_dim, base, rope_scaling, factor):
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
    if rope_scaling:
        inv_freq = apply_scaling(inv_freq, factor)
    return inv_freq


def apply_scaling(freqs, factor=8, low_freq_factor=1, high_freq_factor=4,
                  original_max_position_embeddings=8192):
    old_context_len = original_max_position_embeddings
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / freqs
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, freqs / factor, freqs)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def bands(inv_freq):
    wavelen = 2 * math.pi / inv_freq
    return (int((wavelen > 8192).sum()), int(((wavelen >= 2048) & (wavelen <= 8192)).sum()),
            int((wavelen < 2048).sum()))


def rotate_half(x):
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def megatron_rope(x, positions, inv_freq, interp, sign):
    """x [b, heads, s, d]; positions [b, s]; rotates the first 2 * len(inv_freq) dims."""
    seq = positions.to(torch.float32)
    if interp:
        seq *= 1 / interp
    freqs = seq[..., None] * inv_freq  # torch.outer per row: the same fp32 products
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, :, :]  # [b, 1, s, rot]
    rot = emb.shape[-1]
    t, t_pass = x[..., :rot], x[..., rot:]
    cos, sin = torch.cos(emb), sign * torch.sin(emb)
    t = (t * cos) + (rotate_half(t) * sin)
    return torch.cat((t, t_pass), dim=-1)


def run_case(binary, work, i, rng):
    base = rng.choice([10000, 500000])
    d = rng.choice([16, 32, 64, 128])
    rotary_dim = d if rng.random() < 0.7 else d // 2
    scaling = rng.random() < 0.8
    factor = rng.choice([8.0, 4.0, 32.0, round(rng.uniform(2.0, 16.0), 3)])
    interp = rng.choice([0, 0, 2, 4])
    b, s, heads = rng.choice([1, 2]), rng.choice([3, 8]), rng.choice([1, 3])
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    positions = torch.randint(0, 131072, (b, s), generator=gen, dtype=torch.int32)
    x = torch.randn(b, heads, s, d, generator=gen, dtype=torch.float32)
    path = os.path.join(work, "case%d.txt" % i)
    with open(path, "w") as f:
        f.write("%d %d %d %d %r %d %d %d %d\n" % (base, rotary_dim, d, int(scaling), factor,
                                                  interp, b, s, heads))
        f.write(" ".join(str(int(p)) for p in positions.flatten()) + "\n")
        f.write(" ".join("%.9g" % float(v) for v in x.flatten()) + "\n")
    out = subprocess.run([binary, path], check=True, capture_output=True, text=True).stdout
    lines = out.strip().split("\n")
    got_inv = torch.tensor([float(v) for v in lines[0].split()], dtype=torch.float32)
    got_fwd = torch.tensor([float(v) for v in lines[1].split()], dtype=torch.float32).view_as(x)
    got_bwd = torch.tensor([float(v) for v in lines[2].split()], dtype=torch.float32).view_as(x)

    label = "case %d: base %d rotary_dim %d/%d scaling %s factor %r interp %d" % (
        i, base, rotary_dim, d, scaling, factor, interp)
    want_inv = megatron_inv_freq(rotary_dim, base, scaling, factor)
    ok = True
    if not torch.equal(got_inv, want_inv):
        diff = (got_inv - want_inv).abs().max().item()
        print("FAIL %s: inv_freq differs (max |diff| %g)\n  got  %s\n  want %s" %
              (label, diff, got_inv.tolist(), want_inv.tolist()))
        ok = False
    tol = 1e-6 * x.abs().max().item()
    worst = 0.0
    for sign, got in ((1.0, got_fwd), (-1.0, got_bwd)):
        want = megatron_rope(x, positions, want_inv, interp, sign)
        err = (got - want).abs().max().item()
        worst = max(worst, err)
        if err > tol:
            print("FAIL %s: rotation (sign %+d) max |diff| %g > %g" % (label, sign, err, tol))
            ok = False
        # Sensitivity: ignoring the option must be visible.
        if scaling:
            plain = megatron_rope(x, positions, megatron_inv_freq(rotary_dim, base, False, 1),
                                  interp, sign)
            if (plain - want).abs().max().item() <= 100 * tol:
                print("FAIL %s: scaling changes the rotation too little to test" % label)
                ok = False
        if interp:
            plain = megatron_rope(x, positions, want_inv, 0, sign)
            if (plain - want).abs().max().item() <= 100 * tol:
                print("FAIL %s: interpolation changes the rotation too little to test" % label)
                ok = False
    print("%s %s: rotation max |diff| %.3g (tol %.3g)" % ("ok  " if ok else "FAIL", label,
                                                          worst, tol))
    return ok, (bands(want_inv) if scaling else (0, 0, 0))


def main():
    binary, work = sys.argv[1], sys.argv[2]
    seed = random.SystemRandom().randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    all_ok = True
    band_hits = [0, 0, 0]
    for i in range(24):
        ok, hits = run_case(binary, work, i, rng)
        all_ok = all_ok and ok
        band_hits = [a + b for a, b in zip(band_hits, hits)]
    # A fixed Llama 3.1 case too (head dim 128, base 500000, factor 8): all three bands.
    fixed = megatron_inv_freq(128, 500000, True, 8.0)
    print("frequencies per band (low, medium, high) over the scaled cases:", band_hits,
          "; Llama 3.1 head:", bands(fixed))
    if min(band_hits) == 0:
        print("FAIL: a band of _apply_scaling was never exercised")
        all_ok = False
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
