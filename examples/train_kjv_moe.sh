#!/usr/bin/env bash
# examples/train_kjv_moe.sh: the KJV job (examples/train_kjv.sh) with a Mixture-of-Experts
# GPT: 8 experts, top-2 routing, a MoE MLP on every other layer, Megatron's aux loss
# (1e-2) and z-loss (1e-3), dropless. The log shows load_balancing_loss and z_loss after
# lm loss, and one line per MoE layer with the tokens each expert got, the max/mean load
# and the dropped tokens (docs/MOE.md).
#   bash examples/train_kjv_moe.sh                                   # one device
#   NPROC=8 OUT=out/kjv_moe_8proc bash examples/train_kjv_moe.sh \
#     --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
#     --sequence-parallel --micro-batch-size 4                       # TP2 x PP2 x DP2, 8 processes
#   NPROC=8 OUT=out/kjv_moe_ep2 bash examples/train_kjv_moe.sh \
#     --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
#     --sequence-parallel --micro-batch-size 4 \
#     --expert-model-parallel-size 2 --expert-tensor-parallel-size 1 \
#     --moe-token-dispatcher-type alltoall                           # EP2 x TP2 x PP2, 8 processes
# (without NPROC the same layouts run as ranks of one process: add --world-size 8).
# Expert parallelism needs --expert-tensor-parallel-size 1 and EP a multiple of TP dividing
# TP x DP (e.g. --expert-model-parallel-size 4 with TP 2 and DP 2; docs/MOE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-out/kjv_moe}
exec bash examples/train_kjv.sh \
  --num-experts 8 --moe-router-topk 2 --moe-layer-freq 2 --moe-ffn-hidden-size 512 \
  --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 "$@"
