#!/usr/bin/env bash
# tests/bench/train_throughput_bench.sh: training throughput of MXMACA vs PyTorch on the
# same GPT (6 layers, hidden 256, 8 heads, seq 256, micro-batch 8, GPT-2 vocab padded to
# 50304, 2 threads), in one run, as ratios:
#   - tokens/s of `mxmaca train` (fp32 and --bf16) vs PyTorch (OPENBLAS_CORETYPE=SkylakeX,
#     its best setting here);
#   - achieved model GFLOP/s (Megatron's num_floating_point_operations) vs the GEMM peak
#     mxmaca measures at start-up on the same machine.
#   bazel run //tests/bench:train_throughput_bench [-- ITERS]
set -euo pipefail
ITERS=${1:-12}
MXMACA=$(realpath "${MXMACA_BIN:-api/mxmaca}")
TORCH_BENCH=$(realpath tests/bench/torch_gpt_bench.py)
THREADS=2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

run_mxmaca() {  # run_mxmaca LABEL EXTRA-FLAGS...
  local label=$1; shift
  "$MXMACA" train --num-layers 6 --hidden-size 256 --num-attention-heads 8 \
    --seq-length 256 --max-position-embeddings 256 --micro-batch-size 8 --global-batch-size 8 \
    --train-iters "$ITERS" --lr 1e-4 --hidden-dropout 0 --attention-dropout 0 \
    --mock-data --tokenizer-type NullTokenizer --vocab-size 50256 \
    --data-cache-path "$WORK/cache" --eval-iters 0 --log-interval "$ITERS" \
    --num-threads "$THREADS" "$@" > "$WORK/$label.log" 2>&1 || { cat "$WORK/$label.log"; exit 1; }
  local tps peak gflops
  tps=$(grep -o 'mean [0-9.]* tokens/s' "$WORK/$label.log" | awk '{print $2}')
  peak=$(grep -o 'measured GEMM peak: [0-9.]*' "$WORK/$label.log" | awk '{print $4}')
  gflops=$(grep -o 'model GFLOP/s: [0-9.]*' "$WORK/$label.log" | tail -1 | awk '{print $3}')
  echo "$label $tps $peak $gflops"
}

echo "config: 6 layers, hidden 256, 8 heads, seq 256, micro-batch 8, vocab 50257 (padded 50304), $THREADS threads, $ITERS iterations"
read -r _ fp32_tps fp32_peak fp32_gflops < <(run_mxmaca fp32)
read -r _ bf16_tps bf16_peak bf16_gflops < <(run_mxmaca bf16 --bf16)
torch_tps=$(OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=$THREADS /usr/bin/python3 "$TORCH_BENCH" \
  --iters "$ITERS" --threads $THREADS | awk '{print $3}')

# Model FLOPs per token of this config (Megatron's formula / tokens), for the table.
flops_per_token=$(/usr/bin/python3 -c "
B,s,L,h,V=8,256,6,256,50304
print(72*B*s*L*h*h*(1+s/(12*h)) / (B*s) + 6*h*V)")
/usr/bin/python3 - "$fp32_tps" "$fp32_peak" "$bf16_tps" "$bf16_peak" "$torch_tps" "$flops_per_token" <<'PY'
import sys
fp32, fp32_peak, bf16, bf16_peak, torch, fpt = map(float, sys.argv[1:])
def row(name, tps, peak):
    g = tps * fpt / 1e9
    mfu = "%5.1f%%" % (100 * g / peak) if peak > 0 else "   n/a"
    print("%-22s %10.1f %9.2fx %12.1f %12.1f %8s" % (name, tps, tps / torch, g, peak, mfu))
print("%-22s %10s %10s %12s %12s %8s" % ("run", "tokens/s", "vs torch", "model GFLOP/s", "GEMM peak", "MFU"))
row("pytorch (SkylakeX)", torch, 0)
row("mxmaca fp32", fp32, fp32_peak)
row("mxmaca --bf16", bf16, bf16_peak)
PY
