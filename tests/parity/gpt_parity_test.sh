#!/bin/bash
# tests/parity/gpt_parity_test.sh PRESET: trains PRESET with gpt_parity_driver (C++,
# fp32) and checks it against the PyTorch reference (gpt_reference.py, torch float64 and
# float32); see gpt_reference.py for the criterion.
set -euo pipefail
preset="$1"
root="${TEST_SRCDIR:-.}/mxmaca"
[ -d "$root/tests/parity" ] || root="."
out="${TEST_TMPDIR:-$(mktemp -d)}/$preset"
mkdir -p "$out"
"$root/tests/parity/gpt_parity_driver" --preset "$preset" --out "$out"
OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 "$root/tests/parity/gpt_reference.py" --dir "$out"
