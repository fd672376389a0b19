#!/usr/bin/env bash
# Every benchmark against the peers a researcher would use instead (issue 6), one table at the
# end, docs/benchmarks.md + PNG plots under docs/bench/. Called by ./test.sh --bench.
# Never fails on speed: a benchmark that cannot run becomes a row saying why.
#
# Knobs (environment): SPLITSEG_BENCH_BUILD (build dir, default build/), BENCH_SIZE (training cube,
# 64), BENCH_BASE (16), BENCH_THREADS (nproc), BENCH_ROUNDS (interleaved SplitSeg/PyTorch rounds, 2),
# BENCH_REPEATS (timed steps per round, 3), BENCH_VOLUME (inference volume x,y,z, 96,96,96 = 8 windows;
# 192,192,128 = 75 windows, too slow on 2 cores),
# BENCH_INFER_REPEATS (2), BENCH_QUICK=1 (tiny sizes: checks the pipeline, numbers meaningless),
# BENCH_NO_DOCS=1 (print only; leave docs/ alone).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${SPLITSEG_BENCH_BUILD:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
PY="${SPLITSEG_VENV:-$HOME/.local/share/splitseg/venv}/bin/python"
HERE="$ROOT/tests/bench"

SIZE="${BENCH_SIZE:-64}"; BASE="${BENCH_BASE:-16}"; THREADS="${BENCH_THREADS:-$(nproc)}"
ROUNDS="${BENCH_ROUNDS:-2}"; REPEATS="${BENCH_REPEATS:-3}"; WARMUP="${BENCH_WARMUP:-1}"
VOLUME="${BENCH_VOLUME:-96,96,96}"; WINDOW="${BENCH_WINDOW:-64}"; IREPEATS="${BENCH_INFER_REPEATS:-2}"
PLAN_SIZES="${BENCH_PLAN_SIZES:-32 48 64}"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  SIZE=32; BASE=4; ROUNDS=1; REPEATS=1; WARMUP=1; VOLUME=48,48,32; WINDOW=32; IREPEATS=1; PLAN_SIZES="16 32"
fi

# Build only what the benchmarks run (a no-op when test.sh already built everything);
# SPLITSEG_BENCH_NO_BUILD=1 uses the binaries in $BUILD/bin as they are.
if [ "${SPLITSEG_BENCH_NO_BUILD:-0}" != 1 ] &&
   ! cmake --build "$BUILD" --target splitseg-bench splitseg-cli >/dev/null 2>&1; then
  echo "bench: cannot build splitseg-bench/splitseg-cli in $BUILD (configure it first)" >&2
  exit 1
fi
# The UI benchmark exists only in GUI builds.
[ "${SPLITSEG_BENCH_NO_BUILD:-0}" = 1 ] || cmake --build "$BUILD" --target splitseg-bench-ui >/dev/null 2>&1 || true
BENCH="$BUILD/bin/splitseg-bench"; CLI="$BUILD/bin/splitseg-cli"

WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
OUTD="$WORK/results"; mkdir -p "$OUTD"
# Same thread count on both sides; OpenMP must not spin up more than torch is told to use.
# Idle OpenMP threads sleep instead of spinning, so process CPU time (reported beside wall time)
# counts work, not waiting: on a shared 2-core machine wall time swings by 2-3x between rounds.
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
log() { echo "bench: $*" >&2; }
# Appends the command's JSON line (last stdout line) tagged with a kind, or an error record.
record() {
  local kind="$1"; shift
  local out
  if out="$("$@" 2>"$WORK/err")"; then
    echo "$out" | "$PY" "$HERE/tag_json.py" kind "$kind" >>"$OUTD/results.jsonl" ||
      echo "{\"kind\":\"$kind\",\"error\":\"bad output\"}" >>"$OUTD/results.jsonl"
  else
    log "$kind failed: $(tail -n 3 "$WORK/err" | tr '\n' ' ')"
    "$PY" -c "import json,sys; print(json.dumps({'kind':'$kind','error':sys.argv[1]}))" \
      "$(tail -n 3 "$WORK/err" | tr '\n' ' ')" >>"$OUTD/results.jsonl"
  fi
}

log "machine: $(nproc) cores, $THREADS threads; training ${SIZE}^3 base $BASE; volume $VOLUME window $WINDOW"
STATE="$WORK/state.pt"
"$BENCH" export --size "$SIZE" --base "$BASE" --state "$STATE" --threads "$THREADS" >/dev/null || {
  log "export failed"; exit 1; }

# 1. Training step, interleaved rounds so background load hits both sides alike.
TRAIN=(--size "$SIZE" --base "$BASE" --state "$STATE" --threads "$THREADS" --warmup "$WARMUP" --repeats "$REPEATS")
for r in $(seq 1 "$ROUNDS"); do
  log "training round $r/$ROUNDS"
  record train_splitseg "$BENCH" train "${TRAIN[@]}"
  record train_pytorch "$PY" "$HERE/peer_train.py" --state "$STATE" --base "$BASE" --threads "$THREADS" \
    --warmup "$WARMUP" --repeats "$REPEATS"
  # Split cost: the same net with an emulated device boundary after enc1 (no second device here).
  record train_split "$BENCH" train "${TRAIN[@]}" --emulate-split 2
  # Diagnostic: the same SplitSeg step with the host caching allocator off (what it buys).
  record train_nocache env SPLITSEG_HOST_CACHE=off "$BENCH" train "${TRAIN[@]}"
done
# Diagnostic: the same step as a hand-written C++ loop (no executor, meter or Trainer).
record train_plain "$BENCH" train "${TRAIN[@]}" --plain
# ... and the same loop under the Trainer's CPU memory meter (is the meter the Trainer's overhead?).
record train_plain_meter "$BENCH" train "${TRAIN[@]}" --plain --plain-meter

# 2. Sliding-window inference vs MONAI.
log "inference $VOLUME window $WINDOW"
INFER_STATE="$WORK/infer_state.pt"
"$BENCH" export --size "$WINDOW" --base "$BASE" --state "$INFER_STATE" >/dev/null
INFER=(--size "$VOLUME" --base "$BASE" --state "$INFER_STATE" --threads "$THREADS" --window "$WINDOW"
       --overlap 0.5 --repeats "$IREPEATS")
for r in $(seq 1 "$ROUNDS"); do
  log "inference round $r/$ROUNDS"
  record infer_splitseg "$BENCH" infer "${INFER[@]}" --out "$WORK/splitseg_probs.pt"
  if "$PY" -c "import monai" 2>/dev/null; then
    record infer_monai "$PY" "$HERE/peer_infer.py" --state "$INFER_STATE" --splitseg "$WORK/splitseg_probs.pt" \
      --base "$BASE" --window "$WINDOW" --threads "$THREADS" --repeats "$IREPEATS"
  else
    echo '{"kind":"infer_monai","error":"monai not installed (packaging/install-deps.sh --bench)"}' >>"$OUTD/results.jsonl"
  fi
  record infer_nocache env SPLITSEG_HOST_CACHE=off "$BENCH" infer "${INFER[@]}"
  # Diagnostic: weights left NCDHW (what the channels-last CPU weights buy).
  record infer_ncdhw "$BENCH" infer "${INFER[@]}" --default-layout
done

# 3. Planner accuracy: predicted (plan --json) vs measured (Trainer's memory meter) CPU peak.
for s in $PLAN_SIZES; do
  for rc in none all; do
    log "planner ${s}^3 recompute=$rc"
    record "plan_predicted:$s:$rc" "$CLI" plan --size "$s" --base "$BASE" --checkpoint "$rc" --json
    record "plan_measured:$s:$rc" "$BENCH" train --size "$s" --base "$BASE" --threads "$THREADS" --warmup 1 \
      --repeats 1 --recompute "$rc"
  done
done

# 4. Volume loading (issue 3's goals): a synthetic 512x512x300 int16 CT as .nii.gz and the demo CT,
# SplitSeg's ITK reader into a Volume vs SimpleITK into a float32 array. Needs an ITK build.
VREPEATS="${BENCH_VOLUME_REPEATS:-5}"; VSIZE="${BENCH_VOLUME_CT:-512,512,300}"
[ "${BENCH_QUICK:-0}" = 1 ] && { VREPEATS=1; VSIZE=64,64,32; }
if "$BENCH" volume --help >/dev/null 2>&1 && "$PY" -c "import SimpleITK" 2>/dev/null; then
  CT="$WORK/synthetic_ct.nii.gz"
  log "volume loading: writing a ${VSIZE} int16 CT"
  "$BENCH" volume --write "$CT" --size "$VSIZE" >/dev/null
  DEMO="${SPLITSEG_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/splitseg/demo}/cranium/image.nii.gz"
  if [ ! -f "$DEMO" ] && "$CLI" import-invesalius --help >/dev/null 2>&1; then
    "$CLI" import-invesalius --out "$WORK/demo" >/dev/null 2>&1 && DEMO="$WORK/demo/image.nii.gz"
  fi
  for f in "$CT" "$DEMO"; do
    [ -f "$f" ] || continue
    tag=synthetic; [ "$f" = "$CT" ] || tag=demo
    for r in $(seq 1 "$ROUNDS"); do
      record "volume_splitseg:$tag" "$BENCH" volume --read "$f" --repeats "$VREPEATS"
      record "volume_sitk:$tag" "$PY" "$HERE/peer_volume.py" --read "$f" --repeats "$VREPEATS"
    done
  done
else
  echo '{"kind":"volume_splitseg:synthetic","error":"skipped: needs an ITK build (splitseg-bench volume) and SimpleITK in the venv (install-deps.sh --bench)"}' \
    >>"$OUTD/results.jsonl"
fi

# 4b. Ranks (issue 13): 2 local ranks x 1 thread, the seed network at base $BASE, batch 4, ${SIZE}^3:
# GPipe with 4 micro-batches against 1, and against one process with 2 threads. Interleaved rounds.
RSTEPS="${BENCH_RANK_STEPS:-3}"; [ "${BENCH_QUICK:-0}" = 1 ] && RSTEPS=2
# A contiguous split balanced by FLOPs (the decoders at full resolution cost about twice their encoders).
RPLACE="enc0=r0:cpu,enc1=r0:cpu,enc2=r0:cpu,enc3=r0:cpu,bottleneck=r0:cpu,dec3=r0:cpu,dec2=r0:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu"
RB=("$PY" "$HERE/ranks_bench.py" --cli "$CLI" --size "$SIZE" --base "$BASE" --batch 4 --steps "$RSTEPS")
for r in $(seq 1 "$ROUNDS"); do
  log "ranks round $r/$ROUNDS"
  record ranks_m1 "${RB[@]}" --ranks 2 --micro 1 --threads 1 --placement "$RPLACE"
  record ranks_m4 "${RB[@]}" --ranks 2 --micro 4 --threads 1 --placement "$RPLACE"
  record ranks_one "${RB[@]}" --ranks 0 --threads 2
  # What micro-batches cost by themselves: one process, one thread, batch 1 against batch 4.
  record ranks_b1 "${RB[@]}" --ranks 0 --threads 1 --batch 1
  record ranks_b4 "${RB[@]}" --ranks 0 --threads 1
done

# 4c. Sharded stages (issue 14), one process, batch 1, ${SHARD_SIZE}^3: the full-resolution stages cut
# into 2 slabs that run at the same time (1 thread each; the two devices stand in on the CPU) against
# the unsharded network with 2 threads: what the halos and slab threads cost. Then the planner's halo
# bytes for that placement and its predicted step time of the unsharded CPU run (vs the measured one).
SHARD_SIZE="${BENCH_SHARD_SIZE:-96}"; [ "${BENCH_QUICK:-0}" = 1 ] && SHARD_SIZE=32
SPLACE="enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1,head=cuda:0+cuda:1"
SRANKS=""; for st in enc0 enc1 enc2 enc3 bottleneck dec3 dec2 dec1 dec0 head; do SRANKS="$SRANKS${SRANKS:+,}$st=r0:cpu+r1:cpu"; done
SB=("$PY" "$HERE/ranks_bench.py" --cli "$CLI" --size "$SHARD_SIZE" --base "$BASE" --batch 1 --steps "$RSTEPS" --ranks 0)
for r in $(seq 1 "$ROUNDS"); do
  log "sharding round $r/$ROUNDS"
  record shard_two env SPLITSEG_STAND_INS=cuda:0=cpu,cuda:1=cpu "${SB[@]}" --threads 1 --placement "$SPLACE"
  record shard_none "${SB[@]}" --threads 2
  # Every stage sharded over 2 ranks x 1 thread (the spatial trainer): the issue's row.
  record shard_ranks "${SB[@]}" --ranks 2 --threads 1 --placement "$SRANKS"  # argparse: the last --ranks wins
  # The same sharded run with the unsharded run's 2 intra-op threads (what the halos cost at equal threads).
  record shard_two_t2 env SPLITSEG_STAND_INS=cuda:0=cpu,cuda:1=cpu "${SB[@]}" --threads 2 --placement "$SPLACE"
done
record shard_plan "$CLI" plan --patch "$SHARD_SIZE" --base "$BASE" --batch 1 --devices cuda:0=16GiB,cuda:1=16GiB \
  --placement "$SPLACE" --json
record shard_cpu_plan "$CLI" plan --patch "$SHARD_SIZE" --base "$BASE" --batch 1 --devices cpu=20GiB --json

# 5. UI responsiveness (GUI builds): the UI thread's longest and 99th-percentile stall while the whole
# workstation trains (heartbeat every 5 ms).
UISTEPS="${BENCH_UI_STEPS:-20}"; [ "${BENCH_QUICK:-0}" = 1 ] && UISTEPS=4
if [ -x "$BUILD/bin/splitseg-bench-ui" ]; then
  log "UI stall while training ($UISTEPS steps)"
  UIRUN=("$BUILD/bin/splitseg-bench-ui" --steps "$UISTEPS")
  [ -z "${DISPLAY:-}" ] && command -v xvfb-run >/dev/null && UIRUN=(xvfb-run -a -s "-screen 0 1600x1000x24" "${UIRUN[@]}")
  record ui_stall env QT_QPA_PLATFORM=xcb "${UIRUN[@]}"
else
  echo '{"kind":"ui_stall","error":"skipped: needs the GUI build (splitseg-bench-ui)"}' >>"$OUTD/results.jsonl"
fi

REPORT_ARGS=(--results "$OUTD/results.jsonl" --gpu "$ROOT/docs/bench/gpu.json")
[ "${BENCH_NO_DOCS:-0}" = 1 ] || REPORT_ARGS+=(--docs "$ROOT/docs")
[ "${BENCH_QUICK:-0}" = 1 ] && REPORT_ARGS+=(--quick)
"$PY" "$HERE/report.py" "${REPORT_ARGS[@]}"
[ -n "${BENCH_KEEP:-}" ] && cp "$OUTD/results.jsonl" "$BENCH_KEEP"
exit 0
