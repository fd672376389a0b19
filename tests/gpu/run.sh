#!/usr/bin/env bash
# GPU checks in one command on the bare accelerator machine (one H200, torch with CUDA in
# /opt/torch/.venv, cmake, ninja, nvcc, a compiler; no Debian dev packages, no network). Carry the
# kit made here by tests/gpu/prepare.sh (the device tool's carry: [".gpu-kit"]).
#   tests/gpu/run.sh OUTDIR               build core + CLI + bench + splitseg-gpu-checks against the
#                                         machine's torch, run the checks, then measure what time allows
#   tests/gpu/run.sh OUTDIR --rehearse    the same on a machine without a GPU, with Debian's copies of
#                                         the kit's headers hidden (private mount namespace) and the
#                                         compiler's dependency files searched for them; CPU, tiny sizes
# Writes OUTDIR/run.log, checks.jsonl, devices.json, results.jsonl, peer.jsonl, gpu.json, summary.txt. Exit status:
# 0 all checks passed, 1 a check failed, 2 build or set-up failed. GPU_BUDGET_S (default 450 s, build
# included) bounds the measurements after the checks.
#   Measured: 1. the checks (tests/support/GpuChecks: exact split equivalence with TF32 off, dropout
#   masks per device, training cuda vs cpu + memory figures, exact resume, measured allowance,
#   out of memory under a capped allocator recovered from);
#   1b. two ranks (c10d) on the GPU and on cpu | GPU against one process on the same devices;
#   2. split equivalence of sliding-window inference; 3. growing cubes x {fp32, bf16, bf16 + recompute
#   all}: step time and allocator peak vs the planner; 4. single device vs split; 5. the largest cube
#   under a cap standing in for a 16 GiB card; 3b. the step against PyTorch eager (tests/gpu/peer.sh);
#   6. what eager holds at its peak (tests/gpu/peak_snapshot.py) and 384^3, as time allows;
#   7. inference's planned against measured peak. Run in the order 1, 1b, 2, 3, 5b, 6, 3b, 4, 5, 7;
#   every row after 1 stops when the budget runs low.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
START=$(date +%s)
OUTDIR="${1:?usage: tests/gpu/run.sh OUTDIR [--rehearse]}"
MODE=gpu; [ "${2:-}" = "--rehearse" ] && MODE=rehearse
mkdir -p "$OUTDIR"; OUTDIR="$(cd "$OUTDIR" && pwd)"
exec > >(tee "$OUTDIR/run.log") 2>&1
BUDGET="${GPU_BUDGET_S:-450}"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "gpu: $*"; }
die() { log "$*"; exit 2; }

KIT="$ROOT/.gpu-kit"
[ -f "$KIT/VERSIONS" ] || die "no $KIT: run tests/gpu/prepare.sh on the build machine and carry .gpu-kit"
log "kit: $(tr '\n' ';' <"$KIT/VERSIONS")"
PY=""
for c in "${SPLITSEG_VENV:+$SPLITSEG_VENV/bin/python}" /opt/torch/.venv/bin/python \
         "$HOME/.local/share/splitseg/venv/bin/python" python3; do
  [ -n "$c" ] && "$c" -c 'import torch' 2>/dev/null && { PY="$c"; break; }
done
[ -n "$PY" ] || die "no python with torch"
PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
log "torch $("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())') at $PREFIX"

CMAKE_ARGS=(-S tests/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$KIT;$PREFIX")
HIDE=()
if [ "$MODE" = rehearse ]; then
  BUILD="${GPU_BUILD:-build-gpu-rehearsal}"; JOBS="${GPU_JOBS:-1}"; NICE=(nice -n 10)
  # Nothing from /usr may satisfy find_package; ccache named explicitly (it lives in /usr/bin).
  CMAKE_ARGS+=(-DCMAKE_IGNORE_PREFIX_PATH=/usr)
  command -v ccache >/dev/null && CMAKE_ARGS+=("-DCCACHE_PROGRAM=$(command -v ccache)")
  HIDE=(/usr/include/nlohmann /usr/include/CLI /usr/include/spdlog /usr/include/fmt /usr/include/gloo
        /usr/include/openssl /usr/include/x86_64-linux-gnu/openssl
        /usr/lib/x86_64-linux-gnu/cmake/nlohmann_json /usr/lib/x86_64-linux-gnu/cmake/spdlog
        /usr/lib/x86_64-linux-gnu/cmake/fmt /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json
        /usr/lib/x86_64-linux-gnu/libspdlog.so /usr/lib/x86_64-linux-gnu/libfmt.so)
else
  BUILD="${GPU_BUILD:-build-gpu}"; JOBS="${GPU_JOBS:-$(nproc)}"; NICE=()
  CMAKE_ARGS+=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi
CMAKE_ARGS+=(-B "$BUILD")

# Runs a command with HIDE's paths covered by empty ones (a private mount namespace: other
# processes still see them). Without the privilege for that, the dependency check below remains.
hidden() {
  if [ ${#HIDE[@]} -eq 0 ]; then "$@"; return; fi
  local empty; empty="$(mktemp -d)"
  unshare -m bash -c '
    empty="$1"; shift; n="$1"; shift; hid=()
    for ((i = 0; i < n; i++)); do
      p="$1"; shift
      [ -e "$p" ] || continue
      if [ -d "$p" ]; then mount --bind "$empty" "$p"; else mount --bind /dev/null "$p"; fi && hid+=("$p")
    done
    echo "gpu: hidden from this build: ${hid[*]}"
    [ -e /usr/include/nlohmann/json.hpp ] && { echo "gpu: hiding failed"; exit 3; }
    exec "$@"' _ "$empty" "${#HIDE[@]}" "${HIDE[@]}" "$@"
  local rc=$?
  rmdir "$empty"
  return $rc
}

log "configuring $BUILD ($MODE)"
# Logs stay in the build folder (at most 8 files come back from the machine; run.log has their tails).
mkdir -p "$BUILD"
hidden cmake "${CMAKE_ARGS[@]}" >"$BUILD/configure.log" 2>&1 || { tail -30 "$BUILD/configure.log"; die "configure failed"; }
grep -E "nlohmann_json from|LibTorch" "$BUILD/configure.log"
hidden "${NICE[@]}" cmake --build "$BUILD" -j "$JOBS" --target splitseg-cli splitseg-bench splitseg-gpu-checks \
  >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; die "build failed"; }
log "built in $(( $(date +%s) - START )) s"
BIN="$ROOT/$BUILD/bin"

# Which headers the compiler actually read (ninja's dependency log): none of Debian's copies.
DEPS="$BUILD/header-origins.txt"
ninja -C "$BUILD" -t deps >"$BUILD/deps.txt" 2>/dev/null
{
  for d in nlohmann CLI spdlog fmt gloo openssl; do
    echo "$d: kit $(grep -c "\.gpu-kit/include/$d/" "$BUILD/deps.txt"), /usr/include $(grep -c "^ */usr/include/$d/" "$BUILD/deps.txt")"
  done
  echo "linked: $(ldd "$BIN/splitseg-cli" | grep -cE 'libspdlog|libfmt') spdlog/fmt libraries"
} | tee "$DEPS"
if grep -qE "/usr/include [1-9]|linked: [1-9]" "$DEPS"; then die "the build used Debian's copies (see $DEPS)"; fi
[ -n "${GPU_BUILD_ONLY:-}" ] && { log "built only (GPU_BUILD_ONLY)"; exit 0; }

WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
"$BIN/splitseg-cli" devices --json >"$OUTDIR/devices.json"  # its warnings go to run.log

# 1. The checks: tests that fail, not reports.
log "checks"
"$BIN/splitseg-gpu-checks" --out "$OUTDIR/checks.jsonl" --work "$WORK"
CHECKS_RC=$?

# 2-5. Measurements, within the time left.
if [ "$MODE" = rehearse ]; then
  DEV=cpu; BASE=4; SIZES="32"; MODES="fp32 bf16+recompute"; EQ_SIZE=32; CAP=0
else
  DEV=cuda:0; BASE=32; SIZES="${GPU_SIZES:-64 128 192 256}"; MODES="fp32 bf16 bf16+recompute"
  EQ_SIZE=64; CAP="${GPU_CAP_GIB:-16}"; LARGEST="${GPU_LARGEST:-128,32,512}"
fi
RES="$OUTDIR/results.jsonl"; : >"$RES"
source "$ROOT/tests/gpu/record.sh"
record() {  # TAG COMMAND...: the command's last JSON line, tagged, or an error record (within the budget)
  RECORD_FILE="$RES" RECORD_TIMEOUT="$(( $(left) > 5 ? $(left) : 5 ))" record_as tag "$@"
}
# 1b. Ranks (issue 13): two processes joined through c10d (Gloo, tensors through host memory),
# both on the GPU, split cpu | GPU, and both on cpu (this host's CPU kernels alone), against one
# process on the same devices; M micro-batches. Checked (tests/gpu/ranks_row.py): step 1's
# gradients (Adam's first moment after one step) within RANK_GRAD_BOUND of one process, relative
# to each parameter's gradient (L2 norms), and the losses of 5 steps within RANK_LOSS_BOUND. The
# weights after 5 steps are reported, not checked: Adam moves an element whose gradient is near its eps (1e-8) by up
# to lr per step whichever way rounding tips it, so another order of sums (micro-batches, another
# kernel for another batch size) can move a handful of weights by ~lr though every gradient agrees
# to rounding. The 2026-12-04 lease showed it: one process cpu | cuda:0 differed that much from one
# process on the GPU alone, and the cpu | cuda:0 ranks with 4 micro-batches agreed with the latter
# (docs/bench/gpu/ranks-diagnosis.jsonl, tests/gpu/diag_ranks.sh). RANK_BOUND (weights) stays the
# CPU `dist` tests' kind of check, where kernels are the same on both sides.
RANKDEV="$DEV"
RANK_BOUND="${RANK_BOUND:-1e-4}"
RANK_GRAD_BOUND="${RANK_GRAD_BOUND:-1e-3}"  # rounding: up to 2.4e-5 on a 2-core EPYC (M=2, 2026-12-04); a wrong tensor is O(1)
RANK_LOSS_BOUND="${RANK_LOSS_BOUND:-1e-4}"  # 2026-12-04 lease: 1.0e-5 at most over 5 steps (losses ~1.7)
export SPLITSEG_DETERMINISTIC=1  # TF32 off, deterministic cuDNN: differences are the ranks', not TF32's
# The same threads for a CPU stage in the reference as in its rank (launch gives each local rank
# cores / ranks): the issue's "same thread count per stage".
RANK_THREADS=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
RANK_STEPS="${RANK_STEPS:-5}"
# Ranks rows stop when this much of the budget is left (the rehearsal runs them all).
RANK_MIN_LEFT="${RANK_MIN_LEFT:-$([ "${MODE:-}" = rehearse ] && echo 0 || echo 240)}"
RFLAGS=(--synthetic 32 --patch 32 --base 8 --depth 3 --arch-options '{"dropout":[0,0,0],"norm":"none"}' --batch 4
        --seed 3 --lr 0.01 --progress jsonl)
rp() { echo "enc0=$1,enc1=$1,bottleneck=$2,dec1=$2,dec0=$2,head=$2"; }
# Devices of the two halves for a run's kind: same (both on the GPU), mixed (cpu | GPU), cpu;
# spatial: every stage sharded over both ranks, each rank's slab on the GPU (ranks::SpatialTrainer).
halves() {
  case $1 in
    same|spatial) echo "$RANKDEV $RANKDEV" ;;
    mixed) echo "cpu $RANKDEV" ;;
    *) echo "cpu cpu" ;;
  esac
}
# The ranks run's placement for a kind and its two devices.
rank_placement() {
  if [ "$1" = spatial ]; then
    local st out=""
    for st in enc0 enc1 bottleneck dec1 dec0 head; do out="$out${out:+,}$st=r0:$2+r1:$3"; done
    echo "$out"
  else
    rp "r0:$2" "r1:$3"
  fi
}
# rank_pair STEPS PREFIX: the reference (once per kind) and the ranks run of STEPS steps.
rank_pair() {
  local steps=$1 pre=$2
  [ -f "$WORK/${pre}_$ref.pt" ] || OMP_NUM_THREADS=$threads "$BIN/splitseg-cli" train "${RFLAGS[@]}" --steps "$steps" \
    --placement "$(rp "$a" "$b")" --save "$WORK/${pre}_$ref.pt" >"$WORK/${pre}_$ref.jsonl" 2>"$WORK/${pre}_$ref.err" ||
    tail -n 3 "$WORK/${pre}_$ref.err"
  OMP_NUM_THREADS=$threads timeout 120 "$BIN/splitseg-cli" launch --local-ranks 2 --rank-timeout 60 train \
    "${RFLAGS[@]}" --steps "$steps" --placement "$(rank_placement "$kind" "$a" "$b")" --micro-batches "$M" \
    --save "$WORK/${pre}_$name.pt" >"$WORK/${pre}_$name.jsonl" 2>"$WORK/${pre}_$name.err" || tail -n 3 "$WORK/${pre}_$name.err"
}
# A run is KIND-M<micro-batches>[-t1]; -t1: one thread per rank (and in its reference) instead of
# RANK_THREADS, which says whether a mismatch depends on the CPU stages' thread count.
RANK_RUNS="${RANK_RUNS:-same-M1 same-M4 mixed-M1 mixed-M2 mixed-M4 mixed-M4-t1 cpu-M4 spatial-M1 spatial-M2}"
# Each row only while more than RANK_MIN_LEFT seconds of the budget are left: these rows passed
# on the 2026-12-04 lease (issue 13), so they must not crowd out what issue 12 still lacks (the
# size runs, 384^3, the snapshot and the peer step after them).
for name in $RANK_RUNS; do
  if declare -F left >/dev/null && [ "$(left)" -le "$RANK_MIN_LEFT" ]; then
    log "time budget: skipping ranks $name"
    continue
  fi
  kind="${name%%-*}"; rest="${name#*-M}"; M="${rest%%-*}"
  threads=$RANK_THREADS; suffix=""
  case $name in *-t1) threads=1; suffix="-t1" ;; esac
  read -r a b <<<"$(halves "$kind")"
  ref="one-$kind$suffix"  # one process with the same devices and threads
  [ "$kind" = spatial ] && ref="one-same$suffix"  # all on the GPU as well
  rank_pair 1 g
  rank_pair "$RANK_STEPS" r
  "$PY" "$ROOT/tests/gpu/ranks_row.py" --work "$WORK" --name "$name" --ref "$ref" --placement "$(rank_placement "$kind" "$a" "$b")" \
    --micro-batches "$M" --threads "$threads" --steps "$RANK_STEPS" --weight-bound "$RANK_BOUND" \
    --grad-bound "$RANK_GRAD_BOUND" --loss-bound "$RANK_LOSS_BOUND" >>"$RES"
  tail -n 1 "$RES" | cut -c1-240
done
# Inference over the two ranks on the GPU (the "same" placement), 4 windows a pass as 4
# micro-batches in flight, against one process on the same device with 4 windows a pass: the
# probabilities within RANK_INFER_BOUND (0 difference on the CPU in DistTrainingTest with one
# micro-batch, 8.9e-8 with three; a wrong window or micro-batch order is O(0.1)).
RANK_INFER_BOUND="${RANK_INFER_BOUND:-1e-4}"
ckpt="$(ls "$WORK"/g_one-*.pt 2>/dev/null | head -n 1)"
rank_infer_time() { ! { declare -F left >/dev/null && [ "$(left)" -le "$RANK_MIN_LEFT" ]; } || { log "time budget: skipping ranks_infer"; false; }; }
if [ "${RANK_INFER:-1}" = 1 ] && [ -n "$ckpt" ] && rank_infer_time; then
  IFLAGS=(--checkpoint "$ckpt" --synthetic 48 --window 32 --overlap 0.5 --batch 4 --progress none)
  "$BIN/splitseg-cli" infer "${IFLAGS[@]}" --placement "$(rp "$RANKDEV" "$RANKDEV")" \
    --probabilities "$WORK/i_one.pt" >"$WORK/i_one.json" 2>"$WORK/i_one.err" || tail -n 3 "$WORK/i_one.err"
  timeout 120 "$BIN/splitseg-cli" launch --local-ranks 2 --rank-timeout 60 infer "${IFLAGS[@]}" \
    --placement "$(rank_placement same "$RANKDEV" "$RANKDEV")" --micro-batches 4 \
    --probabilities "$WORK/i_ranks.pt" >"$WORK/i_ranks.json" 2>"$WORK/i_ranks.err" || tail -n 3 "$WORK/i_ranks.err"
  "$PY" - "$WORK" "$RANK_INFER_BOUND" "$(rank_placement same "$RANKDEV" "$RANKDEV")" >>"$RES" <<'PYEOF'
import json, sys
from pathlib import Path
work, bound, placement = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
row = {"tag": "ranks_infer:same-M4", "placement": placement, "micro_batches": 4, "windows_per_pass": 4,
       "bound": bound}
try:
    import torch
    def load(p):  # torch::save of one tensor: a TorchScript archive holding it as a parameter
        return list(torch.jit.load(str(p), map_location="cpu").parameters())[0].detach()
    a, b = load(work / "i_one.pt"), load(work / "i_ranks.pt")
    seconds = [json.loads((work / f).read_text().splitlines()[-1])["seconds"] for f in ("i_one.json", "i_ranks.json")]
    diff = float((a - b).abs().max())
    row.update(max_abs_diff=diff, spread=float(a.max() - a.min()), seconds=seconds[1], single_seconds=seconds[0],
               status="pass" if diff <= bound and a.shape == b.shape else "fail")
except Exception as e:
    row.update(status="fail", error=f"{type(e).__name__}: {e}"[:300])
print(json.dumps(row))
PYEOF
  tail -n 1 "$RES" | cut -c1-240
fi
RANKS_RC=0
grep -E '"tag": "ranks(_infer)?:' "$RES" | grep -q '"status": "fail"' && { RANKS_RC=1; log "ranks: a run differs from one process (see results.jsonl)"; }

unset SPLITSEG_DETERMINISTIC
SPLIT="enc3=cpu,bottleneck=cpu,dec3=cpu"
ALLCPU="enc0=cpu,enc1=cpu,enc2=cpu,enc3=cpu,bottleneck=cpu,dec3=cpu,dec2=cpu,dec1=cpu,dec0=cpu,head=cpu"
"$BIN/splitseg-bench" export --size "$EQ_SIZE" --base "$BASE" --state "$WORK/eq.pt" >/dev/null
for p in one cpu split; do
  case $p in one) PL="" ;; cpu) PL="$ALLCPU" ;; split) PL="$SPLIT" ;; esac
  record "equiv:$p" "$BIN/splitseg-bench" infer --size "$EQ_SIZE" --base "$BASE" --state "$WORK/eq.pt" \
    --window "$EQ_SIZE" --repeats 1 --placement "$PL" --out "$WORK/eq_$p.pt"
done
"$PY" - "$WORK" "$ROOT/tests/bench" >>"$RES" <<'PYEOF'
import json, sys
sys.path.insert(0, sys.argv[2])
from peer_unet import load_state
try:
    p = {k: load_state(f"{sys.argv[1]}/eq_{k}.pt")["probabilities"] for k in ("one", "cpu", "split")}
    print(json.dumps({"tag": "equivalence", "split_vs_one": (p["split"] - p["one"]).abs().max().item(),
                      "split_vs_cpu": (p["split"] - p["cpu"]).abs().max().item(),
                      "one_vs_cpu": (p["one"] - p["cpu"]).abs().max().item()}))
except Exception as e:
    print(json.dumps({"tag": "equivalence", "error": str(e)}))
PYEOF
tail -n 1 "$RES"
# size_runs MIN_LEFT SIZES...: each size x mode on one device, the planner's prediction beside it,
# while more than MIN_LEFT seconds of the budget are left. RUN_NORM (default none: the network the
# H200's figures were first taken on) is the network's norm; other norms tag their modes
# MODE@NORM (fp32@instance), and RUN_MODES replaces MODES.
size_runs() {
  local least=$1 s m prec rc tag norm="${RUN_NORM:-none}"; shift
  for s in "$@"; do
    for m in ${RUN_MODES:-$MODES}; do
      tag="$m"; [ "$norm" = none ] || tag="$m@$norm"
      [ "$(left)" -gt "$least" ] || { log "time budget: skipping ${s}^3 $tag"; continue; }
      prec="${m%%+*}"; rc=none; [ "$m" = "bf16+recompute" ] && rc=all
      record "plan:$s:$tag" "$BIN/splitseg-cli" plan --size "$s" --base "$BASE" --norm "$norm" --precision "$prec" --checkpoint "$rc" --json
      record "train:$s:$tag:one" "$BIN/splitseg-bench" train --size "$s" --base "$BASE" --norm "$norm" --precision "$prec" \
        --recompute "$rc" --warmup 1 --repeats 2
    done
  done
}
# shellcheck disable=SC2086  # word lists
size_runs 60 $SIZES
# 5b. The default network since 2026-12-04 (instance norm after each convolution): the planner's
# instance-norm model (the norm's saved input beside its output, the CopySlices copies of an
# in-place ReLU on its view) is checked on the CPU only so far (PlannerMeasuredTest, RankMemoryTest).
# Run here since the 2026-12-06 lease, where it came after the largest cubes and was skipped for time.
# shellcheck disable=SC2086
RUN_NORM=instance RUN_MODES="fp32 bf16+recompute" size_runs 90 ${GPU_NORM_SIZES:-$([ "$DEV" = cpu ] && echo 32 || echo 128)}
# 6. (Before 3b-5b: what issue 12 still lacks comes first.) The planner under-predicted the allocator's CUDA peak by up to 25 % at 128^3-256^3 on the
# 2026-12-04 lease (within 5 % on the CPU). What eager PyTorch holds at its peak for the same
# network, by the operator that allocated it (tests/gpu/peak_snapshot.py), then the sizes the issue
# asks beyond 256^3, as time allows.
if [ "$DEV" != cpu ]; then
  SNAP="${GPU_SNAPSHOT_SIZE:-192}"
  if [ "$(left)" -gt 60 ] && "$BIN/splitseg-bench" export --size "$SNAP" --base "$BASE" --state "$WORK/snap.pt" >/dev/null; then
    record "peak_snapshot:$SNAP" "$PY" "$ROOT/tests/gpu/peak_snapshot.py" --state "$WORK/snap.pt" --base "$BASE"
    rm -f "$WORK/snap.pt"
  fi
  # shellcheck disable=SC2086
  size_runs 45 ${GPU_LATE_SIZES:-384}
fi

# 3b. The step against PyTorch eager on the same device, and SplitSeg's plain C++ loop (no Trainer).
if [ "$(left)" -gt 60 ]; then
  if [ "$DEV" = cpu ]; then PEER_SIZES=32; else PEER_SIZES="${GPU_PEER_SIZES:-64 128}"; fi
  PY="$PY" GPU_BUILD="$BUILD" PEER_DEVICE="$DEV" PEER_BASE="$BASE" "$ROOT/tests/gpu/peer.sh" "$OUTDIR" "$PEER_SIZES"
else
  log "time budget: skipping the peer step"
fi
if [ "$DEV" != cpu ]; then
  for s in $SIZES; do
    [ "$s" -le 128 ] && [ "$(left)" -gt 60 ] || continue
    record "train:$s:fp32:split" "$BIN/splitseg-bench" train --size "$s" --base "$BASE" --warmup 1 --repeats 2 --placement "$SPLIT"
  done
fi
if [ "$CAP" != 0 ]; then
  # The cap limits the caching allocator, which holds tensors and cuDNN workspaces but not the
  # context: the planner is asked with the measured workspace as the only allowance.
  WS="$("$PY" -c 'import json,sys; d=[x for x in json.load(open(sys.argv[1])) if x["name"]=="cuda:0"]; a=(d[0].get("allowance") or {}) if d else {}; print(max(a.get("workspace",-1),0))' "$OUTDIR/devices.json")"
  for m in bf16+recompute fp32; do
    [ "$(left)" -gt 45 ] || { log "time budget: skipping largest $m"; continue; }
    prec="${m%%+*}"; rc=none; [ "$m" = "bf16+recompute" ] && rc=all
    record "largest:$m" "$BIN/splitseg-bench" train --base "$BASE" --precision "$prec" --recompute "$rc" \
      --warmup 0 --repeats 1 --cap-gib "$CAP" --largest "$LARGEST"
    record "plan_largest:$m" "$BIN/splitseg-cli" plan --size 64 --base "$BASE" --norm none --precision "$prec" --checkpoint "$rc" \
      --devices "cuda:0=${CAP}GiB" --allowance "${WS}B" --largest --json
  done
  # The cap bounds what the caching allocator reserves: at the largest cubes of the 2026-12-06
  # lease the reserved peak was 1.28-1.42x the allocated one the planner counts. Expandable
  # segments (PyTorch's remedy for fragmentation) might close that gap: the same search with them.
  if [ "$(left)" -gt 60 ]; then
    record "largest:bf16+recompute:expandable" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
      "$BIN/splitseg-bench" train --base "$BASE" --precision bf16 --recompute all --warmup 0 --repeats 1 \
      --cap-gib "$CAP" --largest "$LARGEST"
  else
    log "time budget: skipping largest bf16+recompute:expandable"
  fi
fi


# 7. Inference memory: `infer`'s own JSON holds the planner's tensor peak per device (plan
# --inference: the network's forward pass and the Inferer's buffers) beside the measured one
# (CUDA: the allocator's peak; CPU: every LibTorch allocation). On the CPU InferencePlanTest holds
# it within 5 %; on CUDA the forward term (PlannerOptions::cudaConvForwardScratch) was fitted to
# these rows of the 2026-12-06 lease, and core.LeasePeaksTest holds the committed rows to it. The
# rows report the gap rather than gate the exit status. SIZE:WINDOW:PER_PASS (window 0: the whole
# volume in one pass).
# 320^3 in 160^3 windows, two a pass: a row the forward term was not fitted to.
if [ "$DEV" = cpu ]; then INFER_RUNS="32:0:1 48:32:2"; else INFER_RUNS="${GPU_INFER_RUNS:-256:0:1 384:128:4 320:160:2}"; fi
for r in $INFER_RUNS; do
  IFS=: read -r s w b <<<"$r"
  [ "$(left)" -gt 30 ] || { log "time budget: skipping infer_plan:$r"; continue; }
  record "infer_plan:$r" "$BIN/splitseg-cli" infer --synthetic "$s" --base "$BASE" --norm none --window "$w" --batch "$b" \
    --progress none
done

GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
[ -n "$GPU_NAME" ] || GPU_NAME="$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>/dev/null)"
"$PY" "$ROOT/tests/gpu/summarize.py" --results "$RES" --checks "$OUTDIR/checks.jsonl" --devices "$OUTDIR/devices.json" \
  --peer "$OUTDIR/peer.jsonl" --out "$OUTDIR" --gpu "${GPU_NAME:-none}" --mode "$MODE" --cap-gib "$CAP" --elapsed "$(( $(date +%s) - START ))"
log "checks exit status $CHECKS_RC, ranks $RANKS_RC; $(( $(date +%s) - START )) s in all"
[ "$CHECKS_RC" = 0 ] && [ "$RANKS_RC" = 0 ] && exit 0 || exit 1
