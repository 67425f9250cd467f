#!/bin/bash
# tests/multiprocess/netns_two_hosts.sh: two "hosts" on one machine — two network
# namespaces joined by a veth pair — for multi-node tests of UCX over TCP (issue 6).
#
#   host 0: namespace mxmaca-<pid>-<r>-0, interface mx<tag>a, 10.231.<x>.1/24
#   host 1: namespace mxmaca-<pid>-<r>-1, interface mx<tag>b, 10.231.<x>.2/24
#
# with <pid> this shell's $$, <r> a $RANDOM, <tag> both in hex and x = $$ % 200. The veth
# pair is created directly inside the namespaces (ip -n NS link add ... peer ... netns NS),
# so neither the interfaces nor the addresses ever exist in the machine's own namespace
# (and names cannot clash with another run's); each namespace also has lo up. The only
# path between the two hosts is the veth pair.
#
# Sourced (the test's way), it defines:
#   netns_setup        creates both namespaces and the link. Returns 0 when ready; when the
#                      machine refuses (no `ip`, `ip netns add` fails without CAP_SYS_ADMIN,
#                      or no veth support) it prints one line "SKIP: <why>" and returns 77.
#                      Other failures print "netns: error: ..." and return 1. It installs
#                      `trap netns_cleanup EXIT` (and INT/TERM) before creating anything.
#                      Sets NETNS_NAME[k], NETNS_DEV[k], NETNS_ADDR[k] for k = 0, 1.
#   netns_spawn K LOG CMD...
#                      starts CMD in host K's namespace, in the background, stdout+stderr
#                      to LOG, with UCX_TLS=tcp and UCX_NET_DEVICES=<host K's interface>
#                      (both may be overridden by NETNS_UCX_TLS / NETNS_UCX_NET_DEVICES).
#   netns_wait SECONDS waits for every spawned command; on timeout kills every process in
#                      both namespaces (SIGKILL) and returns 124. Otherwise returns 0 when
#                      all exited 0, else the first non-zero exit code (in spawn order).
#   netns_bytes K      prints "<rx bytes> <tx bytes>" of host K's veth end, as read from
#                      `ip -s link show`.
#   netns_cleanup      kills whatever still runs in the namespaces (SIGTERM, then SIGKILL
#                      after 2 s) and deletes them. Idempotent; runs on EXIT.
#
# Run as a script it runs one command per host and prints both logs:
#   netns_two_hosts.sh [--timeout SECONDS] -- CMD ARGS...
# where the words {node_rank}, {master_addr} and {device} in CMD ARGS are replaced by 0/1,
# host 0's address and the host's interface, e.g.
#   netns_two_hosts.sh -- launch_program --nproc-per-node 2 --nnodes 2 \
#     --node-rank {node_rank} --master-addr {master_addr} -- ucx_rank_main
# Exit code: 0, the first failing host's code, 124 on timeout, 0 with "SKIP: ..." where
# namespaces cannot be made.

NETNS_NAME=()
NETNS_DEV=()
NETNS_ADDR=()
NETNS_PIDS=()
NETNS_CREATED=()

netns_setup() {
  # Test runners may leave the sbin folders out of PATH.
  command -v ip > /dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin"
  if ! command -v ip > /dev/null 2>&1; then
    echo "SKIP: the 'ip' command (iproute2) is not installed, so no network namespaces"
    return 77
  fi
  # $$ alone is not unique where tests run in their own PID namespaces (Bazel's sandbox
  # gives every test a low pid), so a random number joins it; interface names stay within
  # Linux's 15 characters ("mx" + at most 8 hex digits + "a"/"b").
  local x=$(($$ % 200)) r=$RANDOM
  local tag
  tag=$(printf '%x' $(((($$ << 15) | r) & 0xffffffff)))
  NETNS_NAME=("mxmaca-$$-$r-0" "mxmaca-$$-$r-1")
  NETNS_DEV=("mx${tag}a" "mx${tag}b")
  NETNS_ADDR=("10.231.$x.1" "10.231.$x.2")
  NETNS_CREATED=()
  trap netns_cleanup EXIT
  trap 'netns_cleanup; exit 130' INT
  trap 'netns_cleanup; exit 143' TERM
  local err
  if ! err=$(ip netns add "${NETNS_NAME[0]}" 2>&1); then
    echo "SKIP: 'ip netns add ${NETNS_NAME[0]}' was refused (needs root / CAP_SYS_ADMIN" \
      "and a writable /run/netns): ${err//$'\n'/ }"
    return 77
  fi
  NETNS_CREATED+=("${NETNS_NAME[0]}")
  if ! err=$(ip netns add "${NETNS_NAME[1]}" 2>&1); then
    echo "netns: error: 'ip netns add ${NETNS_NAME[1]}' failed after the first one" \
      "succeeded: $err" >&2
    return 1
  fi
  NETNS_CREATED+=("${NETNS_NAME[1]}")
  if ! err=$(ip -n "${NETNS_NAME[0]}" link add "${NETNS_DEV[0]}" type veth \
    peer name "${NETNS_DEV[1]}" netns "${NETNS_NAME[1]}" 2>&1); then
    echo "SKIP: cannot create a veth pair between the namespaces (no veth support" \
      "here?): ${err//$'\n'/ }"
    return 77
  fi
  local k
  for k in 0 1; do
    if ! err=$({ ip -n "${NETNS_NAME[k]}" link set lo up &&
      ip -n "${NETNS_NAME[k]}" addr add "${NETNS_ADDR[k]}/24" dev "${NETNS_DEV[k]}" &&
      ip -n "${NETNS_NAME[k]}" link set "${NETNS_DEV[k]}" up; } 2>&1); then
      echo "netns: error: configuring ${NETNS_DEV[k]} in ${NETNS_NAME[k]}: $err" >&2
      return 1
    fi
  done
  # Ready when both ends are operationally up (the kernel's link watcher may take up to a
  # second after `link set up`; UCX skips an interface that is not yet RUNNING) and host 0
  # reaches host 1 (no ping needed: a TCP connect to a closed port of host 1 is answered
  # with "Connection refused" once the link carries packets).
  local tries out
  for tries in $(seq 50); do
    if ip -n "${NETNS_NAME[0]}" link show dev "${NETNS_DEV[0]}" | grep -q 'state UP' &&
      ip -n "${NETNS_NAME[1]}" link show dev "${NETNS_DEV[1]}" | grep -q 'state UP'; then
      out=$(ip netns exec "${NETNS_NAME[0]}" timeout 1 bash -c \
        "exec 3<>/dev/tcp/${NETNS_ADDR[1]}/9" 2>&1) && return 0
      case "$out" in *refused*) return 0 ;; esac
    fi
    sleep 0.1
  done
  echo "netns: error: ${NETNS_ADDR[0]} cannot reach ${NETNS_ADDR[1]} over the veth pair" >&2
  return 1
}

netns_spawn() {
  local k="$1" log="$2"
  shift 2
  ip netns exec "${NETNS_NAME[k]}" env \
    UCX_TLS="${NETNS_UCX_TLS:-tcp}" \
    UCX_NET_DEVICES="${NETNS_UCX_NET_DEVICES:-${NETNS_DEV[k]}}" \
    "$@" > "$log" 2>&1 &
  NETNS_PIDS+=($!)
}

# netns_kill_all SIGNAL: signals every process in both namespaces (ours only: nothing
# else can live in namespaces this shell created).
netns_kill_all() {
  local ns pids
  for ns in "${NETNS_CREATED[@]}"; do
    pids=$(ip netns pids "$ns" 2> /dev/null)
    [ -n "$pids" ] && kill "-$1" $pids 2> /dev/null
  done
  return 0
}

netns_wait() {
  local deadline=$(($(date +%s) + $1)) pid running
  while :; do
    running=0
    for pid in "${NETNS_PIDS[@]}"; do
      kill -0 "$pid" 2> /dev/null && running=1
    done
    [ "$running" = 0 ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "netns: timeout after $1 s: killing every process in ${NETNS_CREATED[*]}" >&2
      netns_kill_all KILL
      # (Braces: the shell's own "Killed" job report goes to /dev/null too.)
      { for pid in "${NETNS_PIDS[@]}"; do wait "$pid"; done; } 2> /dev/null
      NETNS_PIDS=()
      return 124
    fi
    sleep 0.2
  done
  local rc first=0
  for pid in "${NETNS_PIDS[@]}"; do
    wait "$pid"
    rc=$?
    [ "$first" = 0 ] && first=$rc
  done
  NETNS_PIDS=()
  return "$first"
}

netns_bytes() {
  ip -n "${NETNS_NAME[$1]}" -s link show dev "${NETNS_DEV[$1]}" |
    awk '/RX:/ { getline; rx = $1 } /TX:/ { getline; tx = $1 } END { print rx, tx }'
}

netns_cleanup() {
  [ "${#NETNS_CREATED[@]}" = 0 ] && return 0
  netns_kill_all TERM
  local i ns left
  for i in $(seq 20); do
    left=""
    for ns in "${NETNS_CREATED[@]}"; do
      left+=$(ip netns pids "$ns" 2> /dev/null)
    done
    [ -z "$left" ] && break
    sleep 0.1
  done
  netns_kill_all KILL
  for ns in "${NETNS_CREATED[@]}"; do
    # Deleting the veth end in one namespace removes its peer too.
    ip netns del "$ns" 2> /dev/null ||
      echo "netns: warning: could not delete namespace $ns" >&2
  done
  NETNS_CREATED=()
}

# Script mode.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  timeout_s=120
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
      --timeout) timeout_s="$2"; shift 2 ;;
      *) echo "usage: $0 [--timeout SECONDS] -- CMD ARGS..." >&2; exit 2 ;;
    esac
  done
  [ "${1:-}" = "--" ] && shift
  if [ $# = 0 ]; then
    echo "usage: $0 [--timeout SECONDS] -- CMD ARGS..." >&2
    exit 2
  fi
  netns_setup
  rc=$?
  [ "$rc" = 77 ] && exit 0
  [ "$rc" != 0 ] && exit "$rc"
  logdir=$(mktemp -d)
  for k in 0 1; do
    cmd=()
    for word in "$@"; do
      word=${word//\{node_rank\}/$k}
      word=${word//\{master_addr\}/${NETNS_ADDR[0]}}
      word=${word//\{device\}/${NETNS_DEV[k]}}
      cmd+=("$word")
    done
    netns_spawn "$k" "$logdir/host$k.log" "${cmd[@]}"
  done
  netns_wait "$timeout_s"
  rc=$?
  for k in 0 1; do
    echo "--- host $k (${NETNS_NAME[k]}, ${NETNS_ADDR[k]} on ${NETNS_DEV[k]}) ---"
    cat "$logdir/host$k.log"
  done
  rm -rf "$logdir"
  exit "$rc"
fi
