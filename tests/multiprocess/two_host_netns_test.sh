#!/bin/bash
# tests/multiprocess/two_host_netns_test.sh (tag multiprocess; issue 6): a two-host job on
# one machine. netns_two_hosts.sh makes two network namespaces joined by a veth pair; each
# runs one node of 2 processes under the torchrun-style launcher (`mxmaca launch`'s code,
# through launch_program) with UCX_TLS=tcp restricted to the veth interface, so every byte
# between the nodes crosses the veth pair.
#
# Case 1: 2 nodes x 2 processes of api/launch:ucx_rank_main: the launcher's variables ->
#   rendezvous at node 0's address -> UCX all-reduce of 1,000 floats (each rank checks the
#   exact sum).
# Case 2: the same with allreduce_rank_main and 4 MiB per rank.
# Case 3: `mxmaca train` (tiny GPT, TP2 x PP2) as 2 nodes x 2 processes under
#   `mxmaca launch` against the same job in one process: identical "lm loss:" strings.
# After each case the veth's byte counters (`ip -s link show`, node 0's end) must have
# grown, each way, by more than a lower bound of what the case has to send across: for an
# all-reduce one rank's payload (each node's partial sums, [count] fp32 in all, must reach
# the other node); for training the pipeline's activations and gradients (see case 3). In
# case 1 the rendezvous and UCX wire-up alone come near that bound (~4 KB); case 2's 4 MiB
# they cannot reach, so there the counters prove that the data itself crossed the veth.
#
# Skips (exit 0, a line starting "SKIP:") where namespaces cannot be made: no `ip`, or
# `ip netns add` refused (not root / no CAP_SYS_ADMIN).
set -uo pipefail

root="${TEST_SRCDIR:-.}/mxmaca"
[ -d "$root/tests/multiprocess" ] || root="."
root=$(cd "$root" && pwd)
launch_program="$root/tests/multiprocess/launch_program"
ucx_rank_main="$root/api/launch/ucx_rank_main"
allreduce_rank_main="$root/tests/multiprocess/allreduce_rank_main"
mxmaca="$root/api/mxmaca"
logs="${TEST_TMPDIR:-$(mktemp -d)}"
timeout_s=90

# shellcheck source=netns_two_hosts.sh
. "$root/tests/multiprocess/netns_two_hosts.sh"
netns_setup
rc=$?
[ "$rc" = 77 ] && exit 0
[ "$rc" != 0 ] && exit "$rc"
echo "hosts: ${NETNS_NAME[0]} ${NETNS_ADDR[0]} (${NETNS_DEV[0]}) <-> ${NETNS_NAME[1]}" \
  "${NETNS_ADDR[1]} (${NETNS_DEV[1]}), UCX_TLS=tcp"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run_two_nodes NAME PROGRAM ARGS...: one node of 2 processes per host; prints both logs.
run_two_nodes() {
  local name="$1" k rc
  shift
  for k in 0 1; do
    netns_spawn "$k" "$logs/$name.node$k.log" "$launch_program" --nproc-per-node 2 \
      --nnodes 2 --node-rank "$k" --master-addr "${NETNS_ADDR[0]}" --master-port 29500 \
      -- "$@"
  done
  netns_wait "$timeout_s"
  rc=$?
  for k in 0 1; do
    echo "--- $name, node $k ---"
    cat "$logs/$name.node$k.log"
  done
  return "$rc"
}

# check_veth_grew NAME MIN_BYTES RX_BEFORE TX_BEFORE: node 0's veth counters now must
# exceed those before the case by more than MIN_BYTES each way.
check_veth_grew() {
  local name="$1" min="$2" rx0="$3" tx0="$4" rx1 tx1
  read -r rx1 tx1 < <(netns_bytes 0)
  echo "$name: ${NETNS_DEV[0]} bytes (ip -s link show): rx $rx0 -> $rx1 (+$((rx1 - rx0)))," \
    "tx $tx0 -> $tx1 (+$((tx1 - tx0))); must exceed $min each way"
  [ $((rx1 - rx0)) -gt "$min" ] ||
    fail "$name: node 0 received only $((rx1 - rx0)) bytes over the veth (at least $min expected)"
  [ $((tx1 - tx0)) -gt "$min" ] ||
    fail "$name: node 0 sent only $((tx1 - tx0)) bytes over the veth (at least $min expected)"
}

# Case 1: ucx_rank_main (1,000 floats) across the two hosts.
read -r rx tx < <(netns_bytes 0)
run_two_nodes ucx_allreduce "$ucx_rank_main" || fail "ucx_allreduce: exit code $?"
check_veth_grew ucx_allreduce 4000 "$rx" "$tx"
for n in 0 1 2 3; do
  grep -q "^rank $n of 4 (torchrun): sum 10 ok" "$logs"/ucx_allreduce.node*.log ||
    fail "ucx_allreduce: rank $n did not report its sum"
done

# Case 2: 4 MiB per rank.
floats=1048576
read -r rx tx < <(netns_bytes 0)
run_two_nodes allreduce_4mib "$allreduce_rank_main" --floats "$floats" ||
  fail "allreduce_4mib: exit code $?"
check_veth_grew allreduce_4mib $((4 * floats)) "$rx" "$tx"
for n in 0 1 2 3; do
  grep -q "^rank $n of 4: all-reduce of $floats floats ok" "$logs"/allreduce_4mib.node*.log ||
    fail "allreduce_4mib: rank $n did not report its check"
done

# Case 3: `mxmaca train` of a tiny GPT, tensor 2 x pipeline 2, as 2 nodes x 2 processes
# under `mxmaca launch` (one rank per process, UCX over the veth) and as one process
# (`--world-size 4`, in-process ranks). The UCX all-reduce sums in the same (rank) order as
# the in-process one and pipeline transfers are exact, so the printed "lm loss:" of every
# iteration must be the same string (docs/ARCHITECTURE.md "Numerics": in-process vs UCX bit-identical).
train_flags=(--tokenizer-type NullTokenizer --vocab-size 4096 --mock-data
  --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
  --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 4
  --lr 1e-3 --log-interval 1 --tensor-model-parallel-size 2
  --pipeline-model-parallel-size 2 --num-threads 1)
# iteration_losses LOG...: "iteration K lm loss: V" per logged training iteration, sorted.
iteration_losses() {
  sed -nE \
    's/.*iteration +([0-9]+)\/ *[0-9]+ \|.*\| lm loss: ([^ ]+) \|.*/iteration \1 lm loss: \2/p' \
    "$@" | sort -k2,2n | uniq
}
cd "$logs"
read -r rx tx < <(netns_bytes 0)
"$mxmaca" train "${train_flags[@]}" --world-size 4 > train_1proc.log 2>&1 ||
  fail "train in one process: exit code $? (log: $(tail -3 train_1proc.log))"
for k in 0 1; do
  netns_spawn "$k" "$logs/train_2nodes.node$k.log" "$mxmaca" launch --nproc-per-node 2 \
    --nnodes 2 --node-rank "$k" --master-addr "${NETNS_ADDR[0]}" --master-port 29500 \
    -- train "${train_flags[@]}"
done
netns_wait "$timeout_s" || fail "train on 2 nodes: exit code $?"
for k in 0 1; do
  echo "--- train_2nodes, node $k ---"
  cat "$logs/train_2nodes.node$k.log"
done
# Not 4 copies of the whole job (identical losses would then prove nothing): rank 0 says it
# joined as one rank of 4 processes.
grep -q "joined a job of 4 processes over UCX, one rank each" train_2nodes.node0.log ||
  fail "train on 2 nodes: rank 0 did not report joining a 4-process UCX job"
# Pipeline stage 0 (ranks 0, 1) is on node 0 and stage 1 (ranks 2, 3) on node 1, so at
# least one copy of every micro-batch's activations [s 32, b 2, h 32] fp32 (8 KiB) crosses
# forward and its gradient back: 4 iterations x 4 micro-batches x 8 KiB each way.
check_veth_grew train_2nodes $((4 * 4 * 32 * 2 * 32 * 4)) "$rx" "$tx"
want=$(iteration_losses "$logs/train_1proc.log")
got=$(iteration_losses "$logs"/train_2nodes.node*.log)
echo "one process:"; echo "$want"
echo "2 nodes x 2 processes:"; echo "$got"
logged=$(echo "$want" | grep -c 'lm loss')
[ "$logged" = 4 ] || fail "the one-process run logged $logged of 4 iterations"
[ "$got" = "$want" ] ||
  fail "lm loss per iteration differs between 2 nodes x 2 processes and one process"

if [ "$failures" != 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
