#!/bin/bash
# tests/integration/memory_admission_test.sh: impossible sizes end `mxmaca train` with a
# clear error and a non-zero exit, never an abort (issue 22, finding 2). Before memory
# admission, --hidden-size 1000000 aborted with std::bad_alloc (exit 134) and
# --seq-length 10000000 / --micro-batch-size 100000 printed an estimate far above the
# machine's memory and trained until the kernel killed the process.
#  - each size is refused before anything is allocated: exit 1, the message names the
#    flag, the estimate and the limit (api/train/memory_admission.h);
#  - with --memory-admission off the allocation that fails becomes the same kind of
#    error (exit 1, "out of memory ... (std::bad_alloc)"), not an abort;
#  - a small run passes admission (the start-up line says how much of what limit it needs)
#    and trains.
set -uo pipefail
root="${TEST_SRCDIR:-.}/mxmaca"
[ -x "$root/api/mxmaca" ] || root="."
mxmaca="$(cd "$root" && pwd)/api/mxmaca"
work="${TEST_TMPDIR:-$(mktemp -d)}/memory_admission"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

base=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data --num-layers 2
      --num-attention-heads 8 --train-iters 2 --lr 1e-3 --eval-iters 0 --num-threads 1
      --log-interval 1)
fail=0

# expect_refusal NAME NEEDLE... -- ARGS: exit 1 (not 134, not 137) and every needle in stderr.
expect_refusal() {
  local name="$1"; shift
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  timeout 120 "$mxmaca" train "${base[@]}" "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL $name: exit $rc (expected 1)"; tail -5 "$name.err"; fail=1; return
  fi
  for n in "${needles[@]}"; do
    if ! grep -qF -- "$n" "$name.err"; then
      echo "FAIL $name: stderr lacks '$n'"; cat "$name.err"; fail=1; return
    fi
  done
  echo "ok $name: $(head -c 200 "$name.err")..."
}

expect_refusal hidden "--hidden-size 1000000" "start-up memory estimate" "it may use (" \
  "--memory-admission off" -- \
  --hidden-size 1000000 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1
expect_refusal seq "--seq-length 10000000" "start-up memory estimate" "it may use (" -- \
  --hidden-size 64 --seq-length 10000000 --max-position-embeddings 10000000 --micro-batch-size 1
expect_refusal mbs "--micro-batch-size 100000" "start-up memory estimate" "it may use (" -- \
  --hidden-size 64 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 100000
MXMACA_MEMORY_ADMISSION=on expect_refusal env_on "start-up memory estimate" -- \
  --hidden-size 1000000 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1
# Admission off: the failing allocation is a clear error too.
expect_refusal off "out of memory" "(std::bad_alloc)" "--hidden-size 1000000" -- \
  --hidden-size 1000000 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 \
  --memory-admission off
MXMACA_MEMORY_ADMISSION=off expect_refusal env_off "out of memory" "(std::bad_alloc)" -- \
  --hidden-size 1000000 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1

# A small run is admitted and trains.
if timeout 300 "$mxmaca" train "${base[@]}" --hidden-size 64 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 >small.out 2>small.err; then
  grep -q "iteration        2/" small.out && grep -q "> memory admission: this process's 1 rank needs at least" small.out &&
    echo "ok small run is admitted and trains" ||
    { echo "FAIL small run: no iteration 2"; tail -20 small.out; fail=1; }
else
  echo "FAIL small run: exit $?"; tail -20 small.err; fail=1
fi
exit $fail
