#!/usr/bin/env bash
# Pipelined training over two ranks on links that are not loopback: two hosts as network
# namespaces (tests/hosts/netns.sh) joined by a link shaped with tbf to 1 and 10 Gbit/s, against
# both ranks on one host over loopback; each with tensors sealed and in clear. Interleaved rounds,
# order reversed every other round. Per run: the median step after the first, rank 0's bytes per
# step, and the planner's predicted step for that link (plan --rank-link-gbps). This kernel has no
# netem, so no delay is added: the 1 ms of the issue is not emulated.
#   tests/bench/links.sh [OUT.jsonl]   (root; default docs/bench/links.jsonl; LINK_ROUNDS=3)
set -uo pipefail
{
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CLI="${SPLITSEG_BENCH_BUILD:-$ROOT/build}/bin/splitseg-cli"
OUT="${1:-$ROOT/docs/bench/links.jsonl}"
ROUNDS="${LINK_ROUNDS:-3}"; STEPS="${LINK_STEPS:-6}"
HERE="$ROOT/tests/hosts"
# shellcheck source=tests/hosts/netns.sh
. "$HERE/netns.sh"
why="$(make_link)" || { echo "links: $why; nothing measured"; exit 0; }
host_ns hostA "$NA" "$A" hostB "$B"
host_ns hostB "$NB" "$B" hostA "$A"
SECRET="links benchmark secret 0123456789"
# The DESIGN's tbf experiment: base 8, 48^3, batch 4, 4 micro-batches, full-resolution stages on rank 0.
NET=(--synthetic 48 --patch 48 --base 8 --depth 5 --batch 4 --micro-batches 4 --seed 5)
PLACE="enc0=r0:cpu,enc1=r1:cpu,enc2=r1:cpu,enc3=r1:cpu,bottleneck=r1:cpu,dec3=r1:cpu,dec2=r1:cpu,dec1=r1:cpu,dec0=r0:cpu,head=r0:cpu"
shape() {  # RATE (e.g. 1gbit) or none, on both hosts' link0
  for ns in "$NA" "$NB"; do
    ip netns exec "$ns" tc qdisc del dev link0 root 2>/dev/null
    [ "$1" = none ] || ip netns exec "$ns" tc qdisc add dev link0 root tbf rate "$1" burst 1mb latency 50ms
  done
}
run_once() {  # LINK SEALING ROUND -> one JSON line
  local link=$1 sealing=$2 round=$3 o0="$W/o0" e0="$W/e0"
  if [ "$link" = loopback ]; then
    on "$NA" hostA SPLITSEG_RANK_SEALING="$sealing" -- "$CLI" launch --local-ranks 2 train "${NET[@]}" \
      --steps "$STEPS" --placement "$PLACE" --progress jsonl >"$o0" 2>"$e0"
  else
    on "$NA" hostA RANK=0 WORLD_SIZE=2 MASTER_ADDR=$A MASTER_PORT=29533 SPLITSEG_RUN_SECRET="$SECRET" \
      SPLITSEG_RANK_SEALING="$sealing" -- "$CLI" train "${NET[@]}" --steps "$STEPS" --placement "$PLACE" \
      --progress jsonl --rank-timeout 60 >"$o0" 2>"$e0" &
    local p0=$!
    on "$NB" hostB RANK=1 WORLD_SIZE=2 MASTER_ADDR=$A MASTER_PORT=29533 SPLITSEG_RUN_SECRET="$SECRET" -- \
      "$CLI" worker --rank-timeout 60 >/dev/null 2>"$W/e1"
    wait $p0
  fi
  python3 - "$o0" "$link" "$sealing" "$round" "$e0" <<'EOF'
import json, re, statistics, sys
path, link, sealing, rnd, err = sys.argv[1:6]
m = re.search(r"links measured at the join: rank 1 ([0-9.]+) Gbit/s", open(err).read())
steps = [json.loads(l) for l in open(path) if l.startswith("{") and '"step"' in l and '"ranks"' in l]
if len(steps) < 2:
    print(json.dumps({"bench": "link", "link": link, "sealed": sealing == "on", "round": int(rnd), "error": "no steps"}))
    sys.exit()
later = steps[1:]
r0 = [r for r in later[-1]["ranks"] if r["rank"] == 0][0]
print(json.dumps({"bench": "link", "link": link, "sealed": sealing == "on", "round": int(rnd),
                  "step_s": [s["seconds"] for s in later], "median_step_s": statistics.median(s["seconds"] for s in later),
                  "bytes_per_step": r0["bytes_sent"] + r0["bytes_received"], "rank0_wait_s": r0["wait_s"],
                  "join_link_gbps": float(m.group(1)) if m else None}))
EOF
}
PLAN=(plan --size 48 --base 8 --depth 5 --batch 4 --micro-batches 4 --placement "$PLACE"
      --devices r0:cpu=8GiB,r1:cpu=8GiB --json)
# This host's CPU speed, measured once (each rank computes with one of the two cores, as launch
# gives it: OMP_NUM_THREADS=1), then a plan per link with that speed.
SPEED="$(OMP_NUM_THREADS=1 "$CLI" "${PLAN[@]}" --measure-speed 2>/dev/null |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["plan"]["measured_speeds"]["cpu"]["flops_per_second"])')"
predicted() {  # GBPS or 0 -> the planner's step
  local extra=(); [ "$1" = 0 ] || extra=(--rank-link-gbps "$1")
  "$CLI" "${PLAN[@]}" --cpu-speed "$SPEED" "${extra[@]}" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["plan"]["predicted_step_seconds"])'
}
mkdir -p "$(dirname "$OUT")"; : >"$OUT"
CONFIGS=("loopback off" "loopback on" "10gbit off" "10gbit on" "1gbit off" "1gbit on")
for r in $(seq "$ROUNDS"); do
  order=("${CONFIGS[@]}")
  [ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${CONFIGS[@]}" | tac | tr '\n' '|' | tr ' ' '_' | tr '|' ' '))
  for c in "${order[@]}"; do
    c="${c//_/ }"; link="${c% *}"; sealing="${c#* }"
    case "$link" in loopback) shape none ;; *) shape "$link" ;; esac
    run_once "$link" "$sealing" "$r" | tee -a "$OUT"
  done
done
shape none
for g in 0 10 1; do
  link=loopback; [ "$g" = 10 ] && link=10gbit; [ "$g" = 1 ] && link=1gbit
  p="$(predicted "$g")"
  echo "{\"bench\": \"link-plan\", \"link\": \"$link\", \"cpu_flops_per_second\": ${SPEED:-null}, \"predicted_step_s\": ${p:-null}}" | tee -a "$OUT"
done
echo "links: wrote $OUT"
exit 0
}
