#!/usr/bin/env bash
# GPU checks for the accelerator machine (one H200, torch with CUDA at /opt/torch/.venv, no Qt/VTK/ITK).
# Builds core + CLI + splitseg-bench, then measures the seed U-Net (base 32):
#   1. split equivalence: the same weights and volume through cuda:0 only, cpu only and split
#      cuda:0/cpu; max abs difference of the probabilities;
#   2. growing cubes x {fp32, bf16, bf16 + recompute all}: step time, allocator peak vs the planner;
#   3. single device vs split (enc3, bottleneck, dec3 on cpu) step time;
#   4. the largest cube that trains under a cap standing in for a 16 GiB card.
# Writes gpu.json + summary.txt into $OUT (or build-gpu/out) and prints the summary. Keeps within
# GPU_BUDGET_S (default 450 s, build included) by skipping what no longer fits.
#   --dry-run   CPU only, tiny sizes, reuse an existing build (GPU_BUILD, default build-bench):
#               checks this script on a machine without a GPU (GPU_NO_BUILD=1: binaries as they are).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
START=$(date +%s)
DRY=0; [ "${1:-}" = "--dry-run" ] && DRY=1
BUDGET="${GPU_BUDGET_S:-450}"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "gpu: $*" >&2; }

if [ "$DRY" = 1 ]; then
  BUILD="${GPU_BUILD:-build-bench}"; PY="${SPLITSEG_VENV:-$HOME/.local/share/splitseg/venv}/bin/python"
  DEV=cpu; BASE=4; SIZES="32 48"; MODES="fp32 bf16 bf16+recompute"; EQ_SIZE=32; CAP=0; LARGEST="32,16,64"
  [ "${GPU_NO_BUILD:-0}" = 1 ] || cmake --build "$BUILD" --target splitseg-bench splitseg-cli >/dev/null ||
    { log "build failed"; exit 1; }
else
  export SPLITSEG_VENV="${SPLITSEG_VENV:-/opt/torch/.venv}"
  PY="$SPLITSEG_VENV/bin/python"; BUILD="${GPU_BUILD:-build-gpu}"
  DEV=cuda:0; BASE=32; SIZES="${GPU_SIZES:-64 96 128 160 192 224 256}"; MODES="fp32 bf16 bf16+recompute"
  EQ_SIZE=64; CAP="${GPU_CAP_GIB:-16}"; LARGEST="${GPU_LARGEST:-128,32,512}"
  PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  log "configuring ($BUILD) against torch at $PREFIX"
  cmake -S tests/gpu -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITSEG_WITH_ITK=OFF \
    -DSPLITSEG_BUILD_GUI=OFF -DSPLITSEG_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$BUILD.configure.log" 2>&1 || { tail -30 "$BUILD.configure.log"; exit 1; }
  ninja -C "$BUILD" -j16 splitseg-cli splitseg-bench >"$BUILD.build.log" 2>&1 || { tail -40 "$BUILD.build.log"; exit 1; }
  log "built in $(( $(date +%s) - START )) s"
fi
BENCH="$ROOT/$BUILD/bin/splitseg-bench"; CLI="$ROOT/$BUILD/bin/splitseg-cli"
OUTDIR="${OUT:-$ROOT/$BUILD/out}"; mkdir -p "$OUTDIR"
RES="$OUTDIR/results.jsonl"; : >"$RES"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT

# Appends one tagged JSON line (the command's last stdout line) or an error record.
record() {
  local tag="$1"; shift
  local out
  if out="$(timeout "$(( $(left) > 5 ? $(left) : 5 ))" "$@" 2>"$WORK/err")"; then
    echo "$out" | "$PY" "$ROOT/tests/bench/tag_json.py" tag "$tag" >>"$RES" ||
      echo "{\"tag\":\"$tag\",\"error\":\"bad output\"}" >>"$RES"
  else
    "$PY" -c "import json,sys; print(json.dumps({'tag':'$tag','error':sys.argv[1]}))" "$(tail -n 3 "$WORK/err" | tr '\n' ' ')" >>"$RES"
  fi
  tail -n 1 "$RES" | cut -c1-220 >&2
}

SPLIT="enc3=cpu,bottleneck=cpu,dec3=cpu"
if [ "$DEV" = cpu ]; then SPLITP=""; else SPLITP="$SPLIT"; fi
ONE=""  # unnamed stages go to the first runnable device: cuda:0 there, cpu in a dry run

# 1. Split equivalence (eval forward of one window = the whole 64^3 volume).
"$BENCH" export --size "$EQ_SIZE" --base "$BASE" --state "$WORK/eq.pt" >/dev/null
for p in gpu cpu split; do
  case $p in
    gpu) PL="" ;;
    cpu) PL="enc0=cpu,enc1=cpu,enc2=cpu,enc3=cpu,bottleneck=cpu,dec3=cpu,dec2=cpu,dec1=cpu,dec0=cpu,head=cpu" ;;
    split) PL="$SPLIT" ;;
  esac
  record "equiv:$p" "$BENCH" infer --size "$EQ_SIZE" --base "$BASE" --state "$WORK/eq.pt" --window "$EQ_SIZE" \
    --repeats 1 --placement "$PL" --out "$WORK/eq_$p.pt"
done
"$PY" - "$WORK" "$ROOT/tests/bench" >>"$RES" <<'EOF'
import json, sys, torch
w = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from peer_unet import load_state
p = {k: load_state(f"{w}/eq_{k}.pt")["probabilities"] for k in ("gpu", "cpu", "split")}
print(json.dumps({"tag": "equivalence", "split_vs_gpu": (p["split"] - p["gpu"]).abs().max().item(),
                  "split_vs_cpu": (p["split"] - p["cpu"]).abs().max().item(),
                  "gpu_vs_cpu": (p["gpu"] - p["cpu"]).abs().max().item()}))
EOF
tail -n 1 "$RES" >&2

# 2. Growing cubes x precision modes: measured allocator peak and time vs the planner.
for s in $SIZES; do
  for m in $MODES; do
    [ "$(left)" -gt 60 ] || { log "time budget: skipping ${s}^3 $m"; continue; }
    prec="${m%%+*}"; rc=none; [ "$m" = "bf16+recompute" ] && rc=all
    record "plan:$s:$m" "$CLI" plan --size "$s" --base "$BASE" --precision "$prec" --checkpoint "$rc" --json
    record "train:$s:$m:one" "$BENCH" train --size "$s" --base "$BASE" --precision "$prec" --recompute "$rc" \
      --warmup 1 --repeats 2 ${ONE:+--placement "$ONE"}
  done
done

# 3. Single device vs split across cuda:0 and cpu (low-resolution levels on the host).
for s in $SIZES; do
  [ "$s" -le 128 ] || continue
  [ "$(left)" -gt 60 ] || { log "time budget: skipping split ${s}^3"; continue; }
  record "train:$s:fp32:split" "$BENCH" train --size "$s" --base "$BASE" --warmup 1 --repeats 2 \
    ${SPLITP:+--placement "$SPLITP"}
done

# 4. Largest cube under the cap (one process per mode; grows until a step runs out of memory).
for m in bf16+recompute fp32; do
  [ "$(left)" -gt 45 ] || { log "time budget: skipping largest $m"; continue; }
  prec="${m%%+*}"; rc=none; [ "$m" = "bf16+recompute" ] && rc=all
  record "largest:$m" "$BENCH" train --base "$BASE" --precision "$prec" --recompute "$rc" --warmup 0 --repeats 1 \
    --cap-gib "$CAP" --largest "$LARGEST" ${ONE:+--placement "$ONE"}
  record "plan_largest:$m" "$CLI" plan --size 64 --base "$BASE" --precision "$prec" --checkpoint "$rc" \
    --devices "cuda:0=${CAP}GiB" --largest --json
done

GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
"$PY" "$ROOT/tests/gpu/summarize.py" --results "$RES" --out "$OUTDIR" --gpu "${GPU_NAME:-cpu (dry run)}" \
  --cap-gib "$CAP" --elapsed "$(( $(date +%s) - START ))"
