#!/bin/bash
# examples/embed/embed_test.sh: runs //examples/embed:embed; fails unless it exits 0,
# prints the equivalent CLI, reports iterations 1..20 in order with finite losses, and
# ends with the summary line.
set -euo pipefail
bin="${TEST_SRCDIR:-.}/mxmaca/examples/embed/embed"
[ -x "$bin" ] || bin="examples/embed/embed"
out="$("$bin")"
echo "$out"
grep -q '^equivalent CLI: mxmaca train --num-layers 2 ' <<<"$out"
for i in $(seq 1 20); do
  line="$(grep -E "^iteration +$i/20 " <<<"$out")" || { echo "FAIL: no iteration $i"; exit 1; }
  loss="$(awk '{print $4}' <<<"$line")"
  case "$loss" in
    *nan*|*inf*) echo "FAIL: iteration $i loss $loss"; exit 1 ;;
  esac
done
[ "$(grep -cE '^iteration ' <<<"$out")" -eq 20 ] || { echo "FAIL: not 20 iterations"; exit 1; }
grep -qE '^trained 20 iterations: loss [0-9.]+ -> [0-9.]+' <<<"$out"
echo PASS
