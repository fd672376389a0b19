#!/usr/bin/env bash
# Ranks on separate hosts, each host a network namespace this script creates and removes on every
# exit; addresses 10.213.N.x exist only inside them. Debian's default resolver layout: each host
# maps its own name to 127.0.1.1 and the other's to its link address.
#   tests/hosts/hosts.sh CASE SPLITSEG_CLI [VENV_PYTHON]
# CASE: interface | intruder | secret | sealing | slurm | torchrun | local-listen
# Exit 77 (CTest: skipped) where namespaces cannot be made (not root, no `ip netns`).
set -uo pipefail
# One block, read whole before it runs: editing this file during a run cannot break the run.
{
CASE="${1:?case}"; CLI="${2:?splitseg-cli}"; PY="${3:-}"
HERE="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
note() { echo "-- $*"; }

# shellcheck source=tests/hosts/netns.sh
. "$HERE/netns.sh"

local_listen() {
  # A run that never leaves this machine listens on loopback only: every listening socket of the
  # launch's processes, store, gate and transport alike.
  "$CLI" launch --local-ranks 2 train --synthetic 16 --patch 16 --base 4 --depth 3 --batch 2 --steps 400 \
    --seed 3 --progress jsonl --placement enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu \
    --save "$W/ck.pt" >"$W/out.jsonl" 2>"$W/err" &
  local launcher=$!
  for _ in $(seq 200); do grep -q '"step"' "$W/out.jsonl" 2>/dev/null && break; sleep 0.2; done
  grep -q '"step"' "$W/out.jsonl" || { cat "$W/err"; fail "the local run did not start"; }
  local pids; pids="$(pgrep -P "$launcher" | tr '\n' '|')$launcher"
  ss -Hltnp >"$W/ss"
  kill "$launcher" 2>/dev/null; wait "$launcher" 2>/dev/null
  grep -E "pid=($pids)," "$W/ss" >"$W/mine" || true
  note "listening sockets of the launch's processes:"; cat "$W/mine"
  [ -s "$W/mine" ] || fail "found no listening socket of the run (ss lists: $(wc -l <"$W/ss"))"
  local wide; wide="$(awk '{print $4}' "$W/mine" | grep -v '^127\.0\.0\.1:' || true)"
  [ -z "$wide" ] || fail "a local run listens beyond loopback: $wide"
  [ "$(wc -l <"$W/mine")" -ge 4 ] || fail "expected store, gate and two transports listening, saw $(wc -l <"$W/mine")"
  echo "PASS local-listen: $(wc -l <"$W/mine") listening sockets, all on 127.0.0.1"
  exit 0
}
[ "$CASE" = local-listen ] && local_listen

why="$(make_link)" || skip "$why"
host_ns hostA "$NA" "$A" hostB "$B" sshost2 "$B" sshost1 "$A"
host_ns hostB "$NB" "$B" hostA "$A" sshost1 "$A"
host_ns intruder "$NI" "$I" hostA "$A"
ip netns exec "$NA" bash -c "exec 3<>/dev/tcp/$B/9" 2>/dev/null; ip netns exec "$NA" ip neigh show | grep -q "^$B .*lladdr" || fail "the namespaces' link does not carry traffic"

SECRET="hosts test secret 0123456789abcdef"
PORT=29511
STEPS=4; [ "$CASE" = intruder ] && STEPS=40  # long enough for the intruder to find every port
RUN=(--synthetic 16 --patch 16 --base 4 --depth 3 --batch 2 --steps $STEPS --seed 3 --progress jsonl
     --placement enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu)
# two_ranks LABEL ENV_A ENV_B: rank 0 (train) on A, rank 1 (worker) on B; rc in $W/LABEL.rc0/.rc1
two_ranks() {
  local label=$1 ea=$2 eb=$3 start; start=$(date +%s%N)
  # shellcheck disable=SC2086
  on "$NA" hostA RANK=0 WORLD_SIZE=2 MASTER_PORT=$PORT SPLITSEG_RUN_SECRET="$SECRET" $ea -- \
    ${TRACE0:-} "$CLI" train "${RUN[@]}" --rank-timeout 20 --save "$W/$label.pt" >"$W/$label.out0" 2>"$W/$label.err0" &
  local p0=$!
  # shellcheck disable=SC2086
  # shellcheck disable=SC2086
  on "$NB" hostB RANK=1 WORLD_SIZE=2 MASTER_PORT=$PORT SPLITSEG_RUN_SECRET="$SECRET" $eb -- \
    "$CLI" worker --rank-timeout 20 >"$W/$label.out1" 2>"$W/$label.err1" &
  local p1=$!
  wait $p0; echo $? >"$W/$label.rc0"
  echo $(( ($(date +%s%N) - start) / 1000000 )) >"$W/$label.ms0"  # rank 0's time
  wait $p1; echo $? >"$W/$label.rc1"
}
trained() {  # LABEL: both ranks exit 0 and rank 0 printed every step
  local label=$1
  [ "$(cat "$W/$label.rc0")" = 0 ] && [ "$(cat "$W/$label.rc1")" = 0 ] &&
    [ "$(grep -c '"step"' "$W/$label.out0")" -ge $STEPS ] ||
    { grep -v "^ " "$W/$label.err0" | head -n 12; grep -v "^ " "$W/$label.err1" | tail -n 5; fail "$label: the two hosts did not train"; }
}
losses() { grep -o '"loss":[^,]*' "$W/$1.out0"; }

case "$CASE" in
interface)
  two_ranks noiface "MASTER_ADDR=hostA" "MASTER_ADDR=hostA"
  ms="$(cat "$W/noiface.ms0")"
  [ "$(cat "$W/noiface.rc0")" != 0 ] || fail "rank 0 advertised loopback and was not refused"
  line="$(grep -m1 'would offer' "$W/noiface.err0")"
  [ "$(grep -c . "$W/noiface.err0")" = 1 ] || fail "rank 0 said more than one line: $(cat "$W/noiface.err0")"
  note "rank 0 without an interface: $line"
  echo "$line" | grep -q "rank 0: MASTER_ADDR=hostA resolves to 127.0.1.1 here, so this rank would offer 127.0.0.1 (lo) to ranks on other hosts" ||
    fail "not the one-line refusal: $(cat "$W/noiface.err0")"
  echo "$line" | grep -q "GLOO_SOCKET_IFNAME or --rank-interface" || fail "the refusal does not name the fix"
  [ "$ms" -le 10000 ] || fail "rank 0's refusal took $ms ms (rank timeout 20 s)"
  two_ranks iface "MASTER_ADDR=hostA GLOO_SOCKET_IFNAME=link0" "MASTER_ADDR=hostA GLOO_SOCKET_IFNAME=link0"
  trained iface
  link="$(grep -o 'links measured at the join: rank 1 [0-9.]* Gbit/s (sealed)' "$W/iface.err0")" ||
    fail "rank 0 did not say the link it measured: $(head -3 "$W/iface.err0")"
  note "$link"
  two_ranks route "MASTER_ADDR=$A" "MASTER_ADDR=$A"
  trained route
  [ "$(losses iface)" = "$(losses route)" ] || fail "named interface and route trained differently"
  echo "PASS interface: rank 0 refused in $ms ms without an interface; trained with GLOO_SOCKET_IFNAME and by route"
  ;;
intruder)
  two_ranks clean "MASTER_ADDR=$A" "MASTER_ADDR=$A"
  trained clean
  # The intruder knocks at every port host A listens on while the run is under way.
  : >"$W/ports"
  ( while [ ! -e "$W/stop" ]; do
      ip netns exec "$NA" ss -Hltn 2>/dev/null | awk '{print $4}' | grep "^$A:" | sed 's/.*://' | sort -u >"$W/ports.new"
      mv "$W/ports.new" "$W/ports"; sleep 0.02
    done ) &
  lister=$!
  ip netns exec "$NI" python3 "$HERE/intruder.py" "$A" "$W/ports" "$W/stop" >"$W/intruder.log" 2>&1 &
  knock=$!
  two_ranks attacked "MASTER_ADDR=$A" "MASTER_ADDR=$A"
  touch "$W/stop"; wait $knock $lister 2>/dev/null
  trained attacked
  grep -q "heard" "$W/intruder.log" || fail "the intruder reached no port: $(tail -3 "$W/intruder.log")"
  refused="$(grep -c "rank 0: refused a connection from $I:" "$W/attacked.err0")"
  note "rank 0: $(grep -m1 "refused a connection from $I:" "$W/attacked.err0")"
  [ "$refused" -ge 1 ] || fail "rank 0 did not name the intruder: $(tail -5 "$W/attacked.err0")"
  most="$(grep -o 'bytes=[0-9]*' "$W/intruder.log" | cut -d= -f2 | sort -n | tail -1)"
  [ "${most:-0}" -le 40 ] || fail "a port told the intruder $most bytes: $(grep "bytes=$most" "$W/intruder.log" | head -2)"
  [ "$(losses clean)" = "$(losses attacked)" ] || fail "the run under attack trained differently"
  ports="$(grep -o 'port=[0-9]*' "$W/intruder.log" | sort -u | wc -l)"
  [ "$ports" -ge 2 ] || fail "the intruder found only $ports port(s) of rank 0 (store gate and transport expected)"
  echo "PASS intruder: $refused refusals, $(grep -c heard "$W/intruder.log") knocks on $ports ports, at most ${most:-0} bytes heard (the gate's greeting), equal losses"
  ;;
secret)
  on "$NA" hostA RANK=0 WORLD_SIZE=2 MASTER_ADDR=$A MASTER_PORT=$PORT SPLITSEG_RUN_SECRET="$SECRET" -- \
    "$CLI" train "${RUN[@]}" --rank-timeout 5 >"$W/out0" 2>"$W/err0" &
  p0=$!
  on "$NB" hostB RANK=1 WORLD_SIZE=2 MASTER_ADDR=$A MASTER_PORT=$PORT SPLITSEG_RUN_SECRET="a different secret 0123456789" -- \
    "$CLI" worker --rank-timeout 5 >"$W/out1" 2>"$W/err1" &
  p1=$!
  wait $p0; rc0=$?; wait $p1; rc1=$?
  [ $rc0 != 0 ] && [ $rc1 != 0 ] || fail "a worker with the wrong secret was not refused ($rc0, $rc1)"
  note "rank 0: $(grep -m1 'refused a connection' "$W/err0")"
  note "rank 1: $(grep -m1 'secrets differ' "$W/err1")"
  grep -q "rank 0: refused a connection from $B:[0-9]*: it did not prove the run's secret" "$W/err0" || fail "rank 0: $(cat "$W/err0")"
  grep -q "rank 1: rank 0 at $A:$PORT: it refused this rank: the run secrets differ" "$W/err1" || fail "rank 1: $(cat "$W/err1")"
  echo "PASS secret"
  ;;
sealing)
  # What rank 0 writes, traced: the labels it sends the head's rank hold long runs of zero bytes
  # in clear (background); sealed, no write does.
  command -v strace >/dev/null || skip "no strace"
  zeros() { grep -c '\(\\x00\)\{64\}' "$1"; }
  TRACE0="strace -f -qq -e trace=sendmsg,sendto,writev,write -xx -s 65536 -o $W/clear.trace" \
    two_ranks clear "MASTER_ADDR=$A SPLITSEG_RANK_SEALING=off" "MASTER_ADDR=$A"
  trained clear
  TRACE0="strace -f -qq -e trace=sendmsg,sendto,writev,write -xx -s 65536 -o $W/sealed.trace" \
    two_ranks sealed "MASTER_ADDR=$A" "MASTER_ADDR=$A"
  trained sealed
  c=$(zeros "$W/clear.trace"); s=$(zeros "$W/sealed.trace")
  [ -n "${KEEP_TRACE:-}" ] && cp "$W"/*.trace "$KEEP_TRACE"/
  note "writes of rank 0 holding 64 zero bytes in a row: $c in clear, $s sealed"
  [ "$c" -ge 1 ] || fail "the clear run shows no plaintext: the check cannot tell"
  [ "$s" = 0 ] || fail "sealed, rank 0 still wrote $s plaintext-looking messages"
  [ "$(losses clear)" = "$(losses sealed)" ] || fail "sealed and clear trained differently"
  b0=$(grep -o '"bytes_sent":[0-9]*' "$W/clear.out0" | tail -1); b1=$(grep -o '"bytes_sent":[0-9]*' "$W/sealed.out0" | tail -1)
  echo "PASS sealing: equal losses sealed and clear; rank 0 $b0 clear, $b1 sealed (last step)"
  ;;
slurm)
  S=(SLURM_NTASKS=2 SLURM_TASKS_PER_NODE="1(x2)" SLURM_JOB_NODELIST="sshost[1-2]" SLURM_JOB_ID=4242 SLURM_LOCALID=0)
  on "$NA" sshost1 "${S[@]}" SLURM_PROCID=0 SLURM_NODEID=0 SPLITSEG_RUN_SECRET="$SECRET" -- \
    "$CLI" train "${RUN[@]}" --rank-timeout 20 >"$W/s.out0" 2>"$W/s.err0" &
  p0=$!
  on "$NB" sshost2 "${S[@]}" SLURM_PROCID=1 SLURM_NODEID=1 SPLITSEG_RUN_SECRET="$SECRET" -- \
    "$CLI" train "${RUN[@]}" --rank-timeout 20 >"$W/s.out1" 2>"$W/s.err1" &
  p1=$!
  wait $p0; echo $? >"$W/s.rc0"; wait $p1; echo $? >"$W/s.rc1"
  trained s
  echo "PASS slurm: srun's environment alone (master sshost1 from sshost[1-2], port 15000+4242)"
  ;;
torchrun)
  [ -n "$PY" ] && [ -x "$(dirname "$PY")/torchrun" ] || skip "no torchrun in the project venv"
  TR="$(dirname "$PY")/torchrun"
  for node in 0 1; do
    # Node 0 hosts the rendezvous store (torchrun guesses from the hostname, which here is 127.0.1.1).
    ns=$NA; name=hostA; addr=$A; host=true
    [ $node = 1 ] && { ns=$NB; name=hostB; addr=$B; host=false; }
    on "$ns" $name SPLITSEG_RUN_SECRET="$SECRET" -- "$TR" --nnodes 2 --node-rank $node --nproc-per-node 1 \
      --rdzv-backend c10d --rdzv-endpoint "$A:29400" --rdzv-id hosts-test --rdzv-conf is_host=$host \
      --local-addr "$addr" --no-python \
      "$CLI" train "${RUN[@]}" --rank-timeout 30 >"$W/t.out$node" 2>"$W/t.err$node" &
    eval "p$node=\$!"
  done
  wait $p0; echo $? >"$W/t.rc0"; wait $p1; echo $? >"$W/t.rc1"
  trained t
  echo "PASS torchrun: --nnodes 2 with c10d rendezvous"
  ;;
*) fail "unknown case $CASE" ;;
esac
exit 0
}
