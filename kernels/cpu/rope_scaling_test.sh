#!/bin/bash
# kernels/cpu/rope_scaling_test.sh: RoPE frequencies with --use-rope-scaling and
# --rotary-seq-len-interpolation-factor against Megatron's formulas in PyTorch
# (rope_scaling_reference.py says what is compared and why the tolerances).
set -euo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -d "$root/kernels/cpu" ] || root="."
work="${TEST_TMPDIR:-$(mktemp -d)}"
/usr/bin/python3 "$root/kernels/cpu/rope_scaling_reference.py" "$root/kernels/cpu/rope_dump" "$work"
