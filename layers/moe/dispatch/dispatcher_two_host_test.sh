#!/bin/bash
# layers/moe/dispatch/dispatcher_two_host_test.sh (tag multiprocess; issue 7): the MoE
# dispatchers as a two-node job of 2 processes per node on one machine. Two network
# namespaces ("hosts") joined by a veth pair; each runs 2 processes of
# moe_dispatch_rank_main with torchrun's variables (RANK = node * 2 + local rank, as
# `mxmaca launch --nnodes 2 --node-rank K` sets them) and UCX_TLS=tcp on the veth, so every
# byte between the nodes crosses the veth. (tests/multiprocess/netns_two_hosts.sh does the
# same for the launcher's own tests; it is package-private there, hence this short copy.)
#
# Every rank checks all three dispatchers bit for bit against the direct gather, then counts
# the hierarchical dispatcher's cross-node messages: exactly one per node pair and
# direction per step (each leader: 2 per dispatch, 1 per combine; other ranks none). The
# veth's byte counters must have grown by more than the row bytes node 0's leader reports
# sending across (the rows themselves crossed the link).
#
# Skips (exit 0, a line starting "SKIP:") where namespaces cannot be made (no `ip`, or
# `ip netns add` refused: not root / no CAP_SYS_ADMIN).
set -uo pipefail
PATH="$PATH:/usr/sbin:/sbin"

root="${TEST_SRCDIR:-.}/mxmaca"
[ -d "$root/layers/moe/dispatch" ] || root="."
root=$(cd "$root" && pwd)
rank_main="$root/layers/moe/dispatch/moe_dispatch_rank_main"
logs="${TEST_TMPDIR:-$(mktemp -d)}"

command -v ip > /dev/null 2>&1 || { echo "SKIP: no ip command"; exit 0; }
tag=$(printf '%x%x' $$ $((RANDOM % 256)))
ns=("mxmoe-$tag-0" "mxmoe-$tag-1")
dev=("mo${tag}a" "mo${tag}b")
addr=("10.232.$(($$ % 200)).1" "10.232.$(($$ % 200)).2")
cleanup() {
  local n p
  for n in "${ns[@]}"; do
    for p in $(ip netns pids "$n" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
    ip netns del "$n" 2> /dev/null
  done
}
if ! ip netns add "${ns[0]}" 2> "$logs/netns.err"; then
  echo "SKIP: ip netns add refused: $(cat "$logs/netns.err")"
  exit 0
fi
trap cleanup EXIT INT TERM
ip netns add "${ns[1]}" &&
  ip -n "${ns[0]}" link add "${dev[0]}" type veth peer name "${dev[1]}" netns "${ns[1]}" &&
  ip -n "${ns[0]}" addr add "${addr[0]}/24" dev "${dev[0]}" &&
  ip -n "${ns[1]}" addr add "${addr[1]}/24" dev "${dev[1]}" &&
  ip -n "${ns[0]}" link set "${dev[0]}" up && ip -n "${ns[1]}" link set "${dev[1]}" up &&
  ip -n "${ns[0]}" link set lo up && ip -n "${ns[1]}" link set lo up ||
  { echo "netns: error: could not build the two hosts"; exit 1; }
# Ready when both ends are RUNNING (UCX skips an interface that is not yet; the kernel may
# take up to a second after `link set up`) and host 0 reaches host 1 (a connect to a closed
# port is refused once the link carries packets).
ready=0
for _ in $(seq 50); do
  if ip -n "${ns[0]}" link show dev "${dev[0]}" | grep -q 'state UP' &&
    ip -n "${ns[1]}" link show dev "${dev[1]}" | grep -q 'state UP'; then
    out=$(ip netns exec "${ns[0]}" timeout 1 bash -c "exec 3<>/dev/tcp/${addr[1]}/9" 2>&1) &&
      { ready=1; break; }
    case "$out" in *refused*) ready=1; break ;; esac
  fi
  sleep 0.1
done
[ "$ready" = 1 ] || { echo "netns: error: ${addr[0]} cannot reach ${addr[1]}"; exit 1; }
echo "hosts: ${ns[0]} ${addr[0]} <-> ${ns[1]} ${addr[1]}, UCX_TLS=tcp"

# veth_bytes: "<rx> <tx>" of node 0's end.
veth_bytes() {
  ip -n "${ns[0]}" -s link show "${dev[0]}" |
    awk '/RX:/ {getline; rx = $1} /TX:/ {getline; tx = $1} END {print rx, tx}'
}

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

read -r rx0 tx0 < <(veth_bytes)
pids=()
for node in 0 1; do
  for local in 0 1; do
    rank=$((node * 2 + local))
    ip netns exec "${ns[$node]}" env UCX_TLS=tcp UCX_NET_DEVICES="${dev[$node]}" \
      UCX_WARN_UNUSED_ENV_VARS=n RANK="$rank" WORLD_SIZE=4 LOCAL_RANK="$local" \
      LOCAL_WORLD_SIZE=2 MASTER_ADDR="${addr[0]}" MASTER_PORT=29500 \
      timeout 120 "$rank_main" --ranks-per-node 2 > "$logs/rank$rank.log" 2>&1 &
    pids+=($!)
  done
done
for i in 0 1 2 3; do
  wait "${pids[$i]}" || fail "rank $i: exit code $?"
  echo "--- rank $i ---"
  cat "$logs/rank$i.log"
done

for n in 0 2; do
  grep -q "^rank $n of 4: dispatchers ok; hierarchical across nodes: dispatch 2 messages, combine 1 messages, " \
    "$logs/rank$n.log" || fail "leader rank $n did not report 2 + 1 cross-node messages"
done
for n in 1 3; do
  grep -q "^rank $n of 4: dispatchers ok; hierarchical across nodes: dispatch 0 messages, combine 0 messages, " \
    "$logs/rank$n.log" || fail "rank $n did not report 0 cross-node messages"
done

row_bytes=$(sed -nE 's/^rank 0 of 4: .* ([0-9]+) row bytes$/\1/p' "$logs/rank0.log")
read -r rx1 tx1 < <(veth_bytes)
echo "veth of node 0: rx +$((rx1 - rx0)), tx +$((tx1 - tx0)); rank 0 sent ${row_bytes:-?} row bytes across"
if [ -n "$row_bytes" ]; then
  [ $((tx1 - tx0)) -gt "$row_bytes" ] || fail "node 0 sent only $((tx1 - tx0)) bytes over the veth"
  [ $((rx1 - rx0)) -gt 0 ] || fail "node 0 received nothing over the veth"
else
  fail "rank 0 did not report its row bytes"
fi

if [ "$failures" != 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
