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
# After each case the veth's byte counters (`ip -s link show`, node 0's end) must have
# grown, each way, by more than one rank's payload: any all-reduce has to carry each
# node's partial sums ([count] fp32 in all) to the other node. In case 1 the rendezvous
# and UCX wire-up alone come near that (~4 KB); case 2's 4 MiB they cannot reach, so there
# the counters prove that the data itself crossed the veth.
#
# Skips (exit 0, a line starting "SKIP:") where namespaces cannot be made: no `ip`, or
# `ip netns add` refused (not root / no CAP_SYS_ADMIN).
set -uo pipefail

root="${TEST_SRCDIR:-.}/mxmaca"
[ -d "$root/tests/multiprocess" ] || root="."
launch_program="$root/tests/multiprocess/launch_program"
ucx_rank_main="$root/api/launch/ucx_rank_main"
allreduce_rank_main="$root/tests/multiprocess/allreduce_rank_main"
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

# check_veth_grew NAME PAYLOAD_BYTES RX_BEFORE TX_BEFORE: compares node 0's veth counters
# now with those before the case.
check_veth_grew() {
  local name="$1" payload="$2" rx0="$3" tx0="$4" rx1 tx1
  read -r rx1 tx1 < <(netns_bytes 0)
  echo "$name: ${NETNS_DEV[0]} bytes (ip -s link show): rx $rx0 -> $rx1 (+$((rx1 - rx0)))," \
    "tx $tx0 -> $tx1 (+$((tx1 - tx0))); one rank's payload $payload"
  [ $((rx1 - rx0)) -gt "$payload" ] ||
    fail "$name: node 0 received only $((rx1 - rx0)) bytes over the veth (payload $payload)"
  [ $((tx1 - tx0)) -gt "$payload" ] ||
    fail "$name: node 0 sent only $((tx1 - tx0)) bytes over the veth (payload $payload)"
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

if [ "$failures" != 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
