#!/usr/bin/env bash
# tests/bench/async_save_bench.sh: the step-time cost of a checkpoint save with and
# without --async-save, on a small GPT (4 layers, hidden 384, vocab 8192: 13.4 M
# parameters, 161 MB of fp32 parameters + Adam moments per checkpoint), one process, in
# one run (no save / synchronous / async, the same iterations):
#   - step ms: Megatron's "elapsed time per iteration" (the wall time since the previous
#     log line, --log-interval 1) of iterations with no save in their interval (the
#     baseline), and of the iteration right after a save, whose interval holds the save:
#     the save's blocked time + that step (+ with --async-save, the background write
#     competing with it for the cores and the disk). Their difference is the step-time
#     cost of a save;
#   - per save: the training thread's blocked time, as the save lines print it ("training
#     blocked X s"), and the background write's time.
#   bazel run //tests/bench:async_save_bench [-- ITERS SAVE_INTERVAL]
set -euo pipefail
ITERS=${1:-12}
EVERY=${2:-3}
MXMACA=$(realpath "${MXMACA_BIN:-api/mxmaca}")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/async_save_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

run() {  # run LABEL EXTRA-FLAGS...
  local label=$1; shift
  rm -rf "$WORK/ckpt"
  "$MXMACA" train --num-layers 4 --hidden-size 384 --num-attention-heads 6 \
    --seq-length 128 --max-position-embeddings 128 --micro-batch-size 4 --global-batch-size 8 \
    --train-iters "$ITERS" --lr 1e-4 --mock-data --tokenizer-type NullTokenizer \
    --vocab-size 8192 --data-cache-path "$WORK/cache" --eval-iters 0 --log-interval 1 \
    --num-threads 2 "$@" > "$WORK/$label.log" 2>&1 || { tail -20 "$WORK/$label.log"; exit 1; }
  /usr/bin/python3 - "$label" "$WORK/$label.log" "$EVERY" "$ITERS" <<'PY'
import re, statistics, sys
label, path, every, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(path).read()
step = {int(m.group(1)): float(m.group(2)) for m in re.finditer(
    r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([0-9.]+)", text)}
sync = [float(x) * 1e3 for x in re.findall(r"\(synchronous\): training blocked ([0-9.]+) s", text)]
asyn = [float(x) * 1e3 for x in re.findall(r"\(--async-save\): training blocked ([0-9.]+) s", text)]
bg = [float(x) * 1e3 for x in re.findall(r"background write ([0-9.]+) s", text)]
saves = sync + asyn
# iterations 2.. (1 warms up); "after a save": the iteration following a periodic save
plain = [v for i, v in step.items() if i >= 2 and i % every != 1 and i % every != 0]
after = [v for i, v in step.items() if i > 1 and i % every == 1]
med = lambda xs: f"{statistics.median(xs):8.1f}" if xs else "       -"
print(f"| {label:5} | {med(plain)} | {med(after)} | {med(saves)} | {med(bg)} | {len(saves)} |")
PY
}

echo "iterations $ITERS, save every $EVERY; medians in ms; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| save  | step ms, no save in the interval | step ms, interval with a save | training blocked per save, ms | background write per save, ms | saves |"
echo "|---|---|---|---|---|---|"
run none
run sync --save "$WORK/ckpt" --save-interval "$EVERY"
run async --save "$WORK/ckpt" --save-interval "$EVERY" --async-save
