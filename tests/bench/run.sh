#!/usr/bin/env bash
# Every benchmark against the peers a researcher would use instead (issues 6, 17), results as JSON
# lines, then docs/benchmarks.md regenerated whole from them by report.py, with plots under
# docs/bench/. Called by ./test.sh --bench. Never fails on speed: a benchmark that cannot run
# becomes a row saying why. Every comparison runs in interleaved rounds whose order reverses every
# other round; every record carries its round.
#
# Knobs (environment): SPLITSEG_BENCH_BUILD (build dir, default build/), BENCH_SIZE (training cube,
# 64), BENCH_BASE (16), BENCH_THREADS (nproc), BENCH_ROUNDS (interleaved rounds, 7; fewer and no goal
# can be called met), BENCH_UI_ROUNDS (3), BENCH_KEEP (copy results.jsonl + summary there),
# BENCH_REPEATS (timed steps per round, 3), BENCH_VOLUME (inference volume x,y,z, 96,96,96 = 8 windows;
# 192,192,128 = 75 windows, too slow on 2 cores),
# BENCH_INFER_REPEATS (2), BENCH_QUICK=1 (tiny sizes: checks the pipeline, numbers meaningless),
# BENCH_NO_DOCS=1 (print only; leave docs/ alone).
set -uo pipefail
# The whole script is one block, so bash has read all of it before it runs: editing run.sh while a
# benchmark runs (it takes most of an hour) can no longer break the run halfway.
{
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${SPLITSEG_BENCH_BUILD:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
PY="${SPLITSEG_VENV:-$HOME/.local/share/splitseg/venv}/bin/python"
HERE="$ROOT/tests/bench"

SIZE="${BENCH_SIZE:-64}"; BASE="${BENCH_BASE:-16}"; THREADS="${BENCH_THREADS:-$(nproc)}"
ROUNDS="${BENCH_ROUNDS:-7}"; REPEATS="${BENCH_REPEATS:-3}"; WARMUP="${BENCH_WARMUP:-1}"
VOLUME="${BENCH_VOLUME:-96,96,96}"; WINDOW="${BENCH_WINDOW:-64}"; IREPEATS="${BENCH_INFER_REPEATS:-2}"
PLAN_SIZES="${BENCH_PLAN_SIZES:-32 48 64}"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  SIZE=32; BASE=4; ROUNDS="${BENCH_ROUNDS:-1}"; REPEATS=1; WARMUP=1; VOLUME=48,48,32; WINDOW=32; IREPEATS=1; PLAN_SIZES="16 32"
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

WORK="$(mktemp -d)"
# An interrupted run keeps what it measured (BENCH_KEEP.partial) for a look; the report needs a whole run.
trap '[ -n "${BENCH_KEEP:-}" ] && [ -f "$OUTD/results.jsonl" ] && [ ! -f "$BENCH_KEEP" ] && cp "$OUTD/results.jsonl" "$BENCH_KEEP.partial"; rm -rf "$WORK"' EXIT
OUTD="$WORK/results"; mkdir -p "$OUTD"
# Same thread count on both sides; OpenMP must not spin up more than torch is told to use.
# Idle OpenMP threads sleep instead of spinning, so process CPU time (reported beside wall time)
# counts work, not waiting: on a shared 2-core machine wall time swings by 2-3x between rounds.
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
log() { echo "bench: $*" >&2; }
# BENCH_ONLY=planner,ranks runs only those sections (training inference planner volume ranks ranks_infer volume_memory
# ranks_plan sharding ui); with BENCH_MERGE=old-results.jsonl the other sections' records are taken from that file, so
# the report is still regenerated whole from one results file.
want() { [ -z "${BENCH_ONLY:-}" ] || [[ ",$BENCH_ONLY," == *",$1,"* ]]; }
ROUND=0; TAGS=()  # every record carries its round (0: outside the rounds) and these extra KEY VALUE tags
# Appends the command's JSON line (last stdout line) tagged with a kind, or an error record.
record() {
  local kind="$1"; shift
  local out
  if out="$("$@" 2>"$WORK/err")"; then
    echo "$out" | "$PY" "$HERE/tag_json.py" kind "$kind" round "$ROUND" "${TAGS[@]}" >>"$OUTD/results.jsonl" ||
      echo "{\"kind\":\"$kind\",\"round\":$ROUND,\"error\":\"bad output\"}" >>"$OUTD/results.jsonl"
  else
    log "$kind failed: $(tail -n 3 "$WORK/err" | tr '\n' ' ')"
    echo "{\"error\": \"\"}" | "$PY" "$HERE/tag_json.py" kind "$kind" round "$ROUND" "${TAGS[@]}" \
      error "$(tail -n 3 "$WORK/err" | tr '\n' ' ')" >>"$OUTD/results.jsonl"
  fi
}

log "machine: $(nproc) cores, $THREADS threads; training ${SIZE}^3 base $BASE; volume $VOLUME window $WINDOW; $ROUNDS rounds"
# The vector extension too: LibTorch's CPU kernels (and the planner's CPU model) differ with and
# without AVX-512, and two machines can share a model name ("AMD EPYC").
ISA=avx2; grep -qw avx512f /proc/cpuinfo && ISA=avx512; grep -qw amx_tile /proc/cpuinfo && ISA="avx512 + amx"
grep -qw avx2 /proc/cpuinfo || ISA="no avx2"
"$PY" -c "import json,sys,datetime; print(json.dumps({'kind':'machine','cpu':sys.argv[1],'cores':int(sys.argv[2]),
  'threads':int(sys.argv[3]),'date':datetime.date.today().isoformat(),'isa':sys.argv[4]}))" \
  "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)" "$(nproc)" "$THREADS" "$ISA" >>"$OUTD/results.jsonl"
STATE="$WORK/state.pt"
"$BENCH" export --size "$SIZE" --base "$BASE" --state "$STATE" --threads "$THREADS" >/dev/null || {
  log "export failed"; exit 1; }

# Peers at their best (issue 17). Python has no host cache of its own; what it can get from outside:
# glibc malloc settings that keep freed memory instead of returning it (mmap threshold above the
# activations, no trimming), or jemalloc from Debian preloaded with page purging off. Each is a row;
# the report compares against the faster one. torch.compile gets the glibc settings too and a fresh
# inductor cache, so round 1 times a cold compile and later rounds a warm one (reported apart).
GLIBC_TUNED=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824)
JEMALLOC="$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n 1)"
JEMALLOC_TUNED=(LD_PRELOAD="$JEMALLOC" MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1)
export TORCHINDUCTOR_CACHE_DIR="$WORK/inductor"
no_jemalloc() { echo "{\"kind\":\"$1\",\"round\":$ROUND,\"error\":\"jemalloc not installed (packaging/install-deps.sh --bench)\"}" >>"$OUTD/results.jsonl"; }
have_monai() { "$PY" -c "import monai" 2>/dev/null; }
no_monai() { echo "{\"kind\":\"$1\",\"round\":$ROUND,\"error\":\"monai not installed (packaging/install-deps.sh --bench)\"}" >>"$OUTD/results.jsonl"; }

# Runs the members (functions) of one round; every other round in reverse order, so neither side
# always goes first (a slowly changing load would otherwise favour one).
in_order() {
  local members=("$@") i
  if [ $((ROUND % 2)) = 0 ]; then for ((i = ${#members[@]} - 1; i >= 0; i--)); do "${members[i]}"; done
  else for i in "${members[@]}"; do "$i"; done; fi
}

# 1. Training step.
TRAIN=(--size "$SIZE" --base "$BASE" --state "$STATE" --threads "$THREADS" --warmup "$WARMUP" --repeats "$REPEATS")
PEER=("$HERE/peer_train.py" --state "$STATE" --base "$BASE" --threads "$THREADS" --warmup "$WARMUP" --repeats "$REPEATS")
t_splitseg() { record train_splitseg "$BENCH" train "${TRAIN[@]}"; }
t_nocache() { record train_nocache env SPLITSEG_HOST_CACHE=off "$BENCH" train "${TRAIN[@]}"; }
# SplitSeg's CPU layout is auto (channels-last without AVX-512); the same step in the layout auto
# did not pick shows what the choice buys on this CPU.
t_other() { record train_splitseg_other "$BENCH" train "${TRAIN[@]}" --cpu-layout other; }
t_eager() { record train_pytorch "$PY" "${PEER[@]}"; }
t_tuned() { record train_pytorch_tuned env "${GLIBC_TUNED[@]}" "$PY" "${PEER[@]}"; }
t_tuned_je() { [ -n "$JEMALLOC" ] || { no_jemalloc train_pytorch_tuned_je; return; }
               record train_pytorch_tuned_je env "${JEMALLOC_TUNED[@]}" "$PY" "${PEER[@]}"; }
# Channels-last helps PyTorch's inference on this CPU; whether it helps training is measured, not assumed.
t_tuned_je_cl() { [ -n "$JEMALLOC" ] || { no_jemalloc train_pytorch_tuned_je_cl; return; }
                  record train_pytorch_tuned_je_cl env "${JEMALLOC_TUNED[@]}" "$PY" "${PEER[@]}" --channels-last; }
t_compile() { record train_compile env "${GLIBC_TUNED[@]}" "$PY" "${PEER[@]}" --compile; }
t_plain() { record train_plain "$BENCH" train "${TRAIN[@]}" --plain; }
t_meter() { record train_plain_meter "$BENCH" train "${TRAIN[@]}" --plain --plain-meter; }
if want training; then
for ROUND in $(seq 1 "$ROUNDS"); do
  log "training round $ROUND/$ROUNDS"
  in_order t_splitseg t_eager t_tuned t_tuned_je t_tuned_je_cl t_compile t_nocache t_other t_plain t_meter
done
fi

# 2. Sliding-window inference vs MONAI: default, tuned (sw_batch_size = SplitSeg's window batch,
# channels-last, inference mode, glibc settings) and compiled.
if want inference; then
log "inference $VOLUME window $WINDOW"
INFER_STATE="$WORK/infer_state.pt"
"$BENCH" export --size "$WINDOW" --base "$BASE" --state "$INFER_STATE" >/dev/null
WBATCH="${BENCH_WINDOW_BATCH:-1}"
INFER=(--size "$VOLUME" --base "$BASE" --state "$INFER_STATE" --threads "$THREADS" --window "$WINDOW"
       --overlap 0.5 --window-batch "$WBATCH")
MONAI=("$HERE/peer_infer.py" --state "$INFER_STATE" --splitseg "$WORK/splitseg_probs.pt" --base "$BASE"
       --window "$WINDOW" --threads "$THREADS" --repeats "$IREPEATS")
record infer_reference "$BENCH" infer "${INFER[@]}" --repeats 1 --out "$WORK/splitseg_probs.pt"
i_splitseg() { record infer_splitseg "$BENCH" infer "${INFER[@]}" --repeats "$IREPEATS"; }
i_nocache() { record infer_nocache env SPLITSEG_HOST_CACHE=off "$BENCH" infer "${INFER[@]}" --repeats "$IREPEATS"; }
i_ncdhw() { record infer_ncdhw "$BENCH" infer "${INFER[@]}" --repeats "$IREPEATS" --default-layout; }
i_monai() { have_monai || { no_monai infer_monai; return; }; record infer_monai "$PY" "${MONAI[@]}"; }
i_tuned() { have_monai || { no_monai infer_monai_tuned; return; }
            record infer_monai_tuned env "${GLIBC_TUNED[@]}" "$PY" "${MONAI[@]}" --sw-batch "$WBATCH" \
              --channels-last --inference-mode; }
i_compile() { have_monai || { no_monai infer_monai_compile; return; }
              record infer_monai_compile env "${GLIBC_TUNED[@]}" "$PY" "${MONAI[@]}" --sw-batch "$WBATCH" \
                --channels-last --inference-mode --compile; }
for ROUND in $(seq 1 "$ROUNDS"); do
  log "inference round $ROUND/$ROUNDS"
  in_order i_splitseg i_monai i_tuned i_compile i_nocache i_ncdhw
done
ROUND=0
fi

# 3. Planner accuracy: the planner's CPU prediction for the very run `splitseg-bench train --plan`
# measures (its allocation hook and its resident growth). "fit": the configurations its constants
# were set on; the rest are held out (issue 17). Memory does not depend on load: one run each, of
# ten steps, because the host cache's heap settles only after a few (48^3: 176 MiB of heap after two
# steps, 221 MiB from the tenth to the fortieth; 2026-12-04).
plan_run() {  # ID SET LABEL ARGS...
  local id="$1" set="$2" label="$3"; shift 3
  log "planner: $label"
  TAGS=(set "$set" label "$label")
  record "plan:$id" "$BENCH" train --threads "$THREADS" --warmup 1 --repeats 9 --plan "$@"
  TAGS=()
}
if want planner; then
for s in $PLAN_SIZES; do
  for rc in none all; do plan_run "$s-$rc" fit "${s}^3, recompute $rc" --size "$s" --base "$BASE" --recompute "$rc"; done
done
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  plan_run depth4 held-out "depth 4, 32^3" --size 32 --base 4 --depth 4
else
  plan_run 80 held-out "80^3" --size 80 --base "$BASE"
  plan_run 80-all held-out "80^3, recompute all" --size 80 --base "$BASE" --recompute all
  plan_run 112 held-out "112^3" --size 112 --base "$BASE"
  plan_run depth4 held-out "depth 4, 64^3" --size 64 --base "$BASE" --depth 4
  plan_run base12 held-out "base 12, 64^3" --size 64 --base 12
  plan_run batch2 held-out "batch 2, 64^3" --size 64 --base "$BASE" --batch 2
  # Instance norm at 64^3 showed the under-prediction that the CopySlices model (a view's in-place
  # ReLU) explains, so it counts as fit now; the other instance-norm rows were added after, unseen.
  plan_run instance fit "instance norm, 64^3" --size 64 --base "$BASE" --norm instance
  plan_run instance80 held-out "instance norm, 80^3" --size 80 --base "$BASE" --norm instance
  plan_run instance-b2 held-out "instance norm, batch 2, 48^3" --size 48 --base "$BASE" --norm instance --batch 2
  plan_run resunet held-out "resunet3d plugin, 64^3" --size 64 --base "$BASE" --arch resunet3d
fi
fi

# 4. Volume loading (issue 3's goals): a synthetic 512x512x300 int16 CT as .nii.gz and the demo CT,
# SplitSeg's ITK reader into a Volume vs SimpleITK into a float32 array. Needs an ITK build.
VREPEATS="${BENCH_VOLUME_REPEATS:-5}"; VSIZE="${BENCH_VOLUME_CT:-512,512,300}"
[ "${BENCH_QUICK:-0}" = 1 ] && { VREPEATS=1; VSIZE=64,64,32; }
if want volume; then
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
    v_splitseg() { record "volume_splitseg:$tag" "$BENCH" volume --read "$f" --repeats "$VREPEATS"; }
    v_sitk() { record "volume_sitk:$tag" "$PY" "$HERE/peer_volume.py" --read "$f" --repeats "$VREPEATS"; }
    # SplitSeg reads other people's files in a forked child (issue 15); what that isolation costs:
    v_noiso() { record "volume_noiso:$tag" env SPLITSEG_READ_ISOLATION=off "$BENCH" volume --read "$f" --repeats "$VREPEATS"; }
    for ROUND in $(seq 1 "$ROUNDS"); do in_order v_splitseg v_sitk v_noiso; done
  done
  ROUND=0
else
  echo '{"kind":"volume_splitseg:synthetic","error":"skipped: needs an ITK build (splitseg-bench volume) and SimpleITK in the venv (install-deps.sh --bench)"}' \
    >>"$OUTD/results.jsonl"
fi
fi

# 4a. What opening a real-size CT costs in memory (issue 50): a 512x512x2000 int16 CT (1000 MiB
# decoded), each command's peak resident growth (volume_memory.py). BENCH_MEMORY_ROUNDS (3).
if want volume_memory; then
  MSIZE="${BENCH_MEMORY_CT:-512,512,2000}"; [ "${BENCH_QUICK:-0}" = 1 ] && MSIZE=128,128,100
  MCT="$WORK/memory_ct.nii.gz"
  if "$BENCH" volume --write "$MCT" --size "$MSIZE" >/dev/null 2>&1; then
    VM=("$PY" "$HERE/volume_memory.py" --cli "$CLI" --file "$MCT")
    "$CLI" train --synthetic 32 --base 4 --steps 1 --save "$WORK/memory.pt" >/dev/null 2>&1
    for ROUND in $(seq 1 "${BENCH_MEMORY_ROUNDS:-3}"); do
      record mem_info "${VM[@]}" --what info -- "$CLI" info "$MCT"
      record mem_load "${VM[@]}" --what load -- "$BENCH" volume --read "$MCT" --repeats 1
      [ -x "$BUILD/bin/splitseg" ] && [ -n "${DISPLAY:-}" ] &&
        record mem_open env QT_QPA_PLATFORM=xcb "${VM[@]}" --what open -- "$BUILD/bin/splitseg" "$MCT" --screenshot "$WORK/open.png"
    done
    # One round: a whole-volume prediction takes minutes on 2 cores (windows of 256^3, no overlap).
    ROUND=1
    record mem_infer "${VM[@]}" --what infer -- "$CLI" infer --checkpoint "$WORK/memory.pt" --image "$MCT" \
      --out "$WORK/memory_seg.nii.gz" --window 256 --overlap 0
    ROUND=0
  else
    echo '{"kind":"mem_load","error":"skipped: splitseg-bench volume cannot write the CT (an ITK build is needed)"}' >>"$OUTD/results.jsonl"
  fi
fi

# 4b. Ranks (issue 13): 2 local ranks x 1 thread, the seed network at base $BASE, batch 4, ${SIZE}^3:
# GPipe with 4 micro-batches against 1, and against one process with 2 threads. Interleaved rounds.
RSTEPS="${BENCH_RANK_STEPS:-2}"; [ "${BENCH_QUICK:-0}" = 1 ] && RSTEPS=1
# Rank 0 runs the full-resolution stages (enc0, dec0, head), rank 1 the stages between: rank 0 then
# works at both ends of every micro-batch, its encoder filling the pipeline while rank 1 has nothing
# yet and its decoder draining it. dec0 alone does nearly half of the step's compute (ranks_stages below),
# so no cut of the stage order gives two ranks of equal cost; the contiguous split enc0..dec2 |
# dec1..head gave 1.35x the throughput at M=4 as at M=1 (docs/bench/results.jsonl at 1e4ecbb).
RPLACE="enc0=r0:cpu,enc1=r1:cpu,enc2=r1:cpu,enc3=r1:cpu,bottleneck=r1:cpu,dec3=r1:cpu,dec2=r1:cpu,dec1=r1:cpu,dec0=r0:cpu,head=r0:cpu"
RSTAGES=""; i=0; for st in enc0 enc1 enc2 enc3 bottleneck dec3 dec2 dec1 dec0 head; do RSTAGES="$RSTAGES${RSTAGES:+,}$st=r$i:cpu"; i=$((i + 1)); done
RB=("$PY" "$HERE/ranks_bench.py" --cli "$CLI" --size "$SIZE" --base "$BASE" --batch 4 --steps "$RSTEPS")
r_m1() { record ranks_m1 "${RB[@]}" --ranks 2 --micro 1 --threads 1 --placement "$RPLACE"; }
r_m4() { record ranks_m4 "${RB[@]}" --ranks 2 --micro 4 --threads 1 --placement "$RPLACE"; }
r_one() { record ranks_one "${RB[@]}" --ranks 0 --threads 2; }
# One process, one thread: the split-cost baseline of ranks_m1 (a real process boundary, one
# stage computing at a time) and, against batch 1, what micro-batches cost by themselves.
r_b4() { record ranks_b4 "${RB[@]}" --ranks 0 --threads 1; }
r_b1() { record ranks_b1 "${RB[@]}" --ranks 0 --threads 1 --batch 1; }
if want ranks; then
# Each stage's compute at M=1 (one rank per stage, 1 thread each; only one computes at a time).
record ranks_stages "${RB[@]}" --ranks 10 --micro 1 --threads 1 --placement "$RSTAGES"
for ROUND in $(seq 1 "$ROUNDS"); do
  log "ranks round $ROUND/$ROUNDS"
  in_order r_m1 r_b4 r_m4 r_one r_b1
done
ROUND=0
fi
# Sliding-window inference over 2 local ranks x 1 thread (the seed network at base $BASE, a
# ${RINF_SIZE}^3 phantom in 64^3 windows at overlap 0.5: 64 windows, 4 a pass): the pass as 4
# micro-batches, the ranks working on different windows at once, against 1; and against one process
# with 2 threads. Rank 0 runs enc0..dec1, rank 1 dec0 and the head, the contiguous cut nearest to
# half the compute (dec0 alone is nearly half; ranks_stages).
RINF_SIZE="${BENCH_RINF_SIZE:-160}"; [ "${BENCH_QUICK:-0}" = 1 ] && RINF_SIZE=64
RIPLACE="enc0=r0:cpu,enc1=r0:cpu,enc2=r0:cpu,enc3=r0:cpu,bottleneck=r0:cpu,dec3=r0:cpu,dec2=r0:cpu,dec1=r0:cpu,dec0=r1:cpu,head=r1:cpu"
RI=("$PY" "$HERE/ranks_bench.py" --cli "$CLI" --infer --size "$RINF_SIZE" --base "$BASE" --batch 4 --window 64)
ri_m1() { record rinfer_m1 "${RI[@]}" --ranks 2 --micro 1 --threads 1 --placement "$RIPLACE"; }
ri_m4() { record rinfer_m4 "${RI[@]}" --ranks 2 --micro 4 --threads 1 --placement "$RIPLACE"; }
ri_one() { record rinfer_one "${RI[@]}" --ranks 0 --threads 2; }
if want ranks_infer; then
for ROUND in $(seq 1 "$ROUNDS"); do
  log "inference over ranks round $ROUND/$ROUNDS"
  in_order ri_m1 ri_m4 ri_one
done
ROUND=0
fi
# The planner's GPipe replay of the same placement (StepTime), every stage at one CPU speed.
if want ranks || want ranks_plan; then
  RP=("$CLI" plan --patch "$SIZE" --base "$BASE" --norm none --batch 4 --devices r0:cpu=8GiB,r1:cpu=8GiB --placement "$RPLACE" --json)
  record ranks_plan_m1 "${RP[@]}" --micro-batches 1
  record ranks_plan_m4 "${RP[@]}" --micro-batches 4
fi

# 4c. Sharded stages (issue 14), one process, batch 1, ${SHARD_SIZE}^3: the full-resolution stages cut
# into 2 slabs that run at the same time (1 thread each; the two devices stand in on the CPU) against
# the unsharded network with 2 threads: what the halos and slab threads cost. Then the planner's halo
# bytes for that placement and its predicted step time of the unsharded CPU run (vs the measured one),
# with the CPU's speed measured by `plan --measure-speed`.
SHARD_SIZE="${BENCH_SHARD_SIZE:-96}"; [ "${BENCH_QUICK:-0}" = 1 ] && SHARD_SIZE=32
SPLACE="enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1,head=cuda:0+cuda:1"
SRANKS=""; for st in enc0 enc1 enc2 enc3 bottleneck dec3 dec2 dec1 dec0 head; do SRANKS="$SRANKS${SRANKS:+,}$st=r0:cpu+r1:cpu"; done
SB=("$PY" "$HERE/ranks_bench.py" --cli "$CLI" --size "$SHARD_SIZE" --base "$BASE" --batch 1 --steps "$RSTEPS" --ranks 0)
s_two() { record shard_two env SPLITSEG_STAND_INS=cuda:0=cpu,cuda:1=cpu "${SB[@]}" --threads 1 --placement "$SPLACE"; }
s_none() { record shard_none "${SB[@]}" --threads 2; }
# Every stage sharded over 2 ranks x 1 thread (the spatial trainer): the issue's row.
s_ranks() { record shard_ranks "${SB[@]}" --ranks 2 --threads 1 --placement "$SRANKS"; }  # argparse: the last --ranks wins
# The same sharded run with the unsharded run's 2 intra-op threads (what the halos cost at equal threads).
s_two_t2() { record shard_two_t2 env SPLITSEG_STAND_INS=cuda:0=cpu,cuda:1=cpu "${SB[@]}" --threads 2 --placement "$SPLACE"; }
if want sharding; then
for ROUND in $(seq 1 "$ROUNDS"); do
  log "sharding round $ROUND/$ROUNDS"
  in_order s_ranks s_none s_two s_two_t2
done
ROUND=0
record shard_plan "$CLI" plan --patch "$SHARD_SIZE" --base "$BASE" --norm none --batch 1 --devices cuda:0=16GiB,cuda:1=16GiB \
  --placement "$SPLACE" --json
# The CPU's speed measured by the planner itself (a few training steps at the size planned, 96^3: a
# calibration run of its own, apart from the timed rounds).
record shard_cpu_plan "$CLI" plan --patch "$SHARD_SIZE" --base "$BASE" --norm none --batch 1 --devices cpu=20GiB --measure-speed --json
# The planner's per-device peak for the 2-rank sharded run (against each rank's measured CPU peak).
record shard_rank_plan "$CLI" plan --patch "$SHARD_SIZE" --base "$BASE" --norm none --batch 1 \
  --devices r0:cpu=20GiB,r1:cpu=20GiB --placement "$SRANKS" --json
fi

# 5. UI responsiveness (GUI builds): the UI thread's longest and 99th-percentile stall while the whole
# workstation trains (heartbeat every 5 ms).
UISTEPS="${BENCH_UI_STEPS:-20}"; [ "${BENCH_QUICK:-0}" = 1 ] && UISTEPS=4
if want ui; then
if [ -x "$BUILD/bin/splitseg-bench-ui" ]; then
  log "UI stall while training ($UISTEPS steps)"
  UIRUN=("$BUILD/bin/splitseg-bench-ui" --steps "$UISTEPS")
  [ -z "${DISPLAY:-}" ] && command -v xvfb-run >/dev/null && UIRUN=(xvfb-run -a -s "-screen 0 1600x1000x24" "${UIRUN[@]}")
  # With the Training tab in front (charts and timeline repainting); the same run with the
  # decoders on a second (local) rank (rank 0 trains in the workstation); and with the Placement
  # tab in front, which leaves the charts hidden (what their repaints cost).
  for ROUND in $(seq 1 "${BENCH_UI_ROUNDS:-3}"); do
    record ui_stall env QT_QPA_PLATFORM=xcb "${UIRUN[@]}"
    record ui_stall_ranks env QT_QPA_PLATFORM=xcb "${UIRUN[@]}" --ranks 2
    record ui_stall_placement env QT_QPA_PLATFORM=xcb "${UIRUN[@]}" --tab placement
  done
  ROUND=0
else
  echo '{"kind":"ui_stall","error":"skipped: needs the GUI build (splitseg-bench-ui)"}' >>"$OUTD/results.jsonl"
  echo '{"kind":"ui_stall_ranks","error":"skipped: needs the GUI build (splitseg-bench-ui)"}' >>"$OUTD/results.jsonl"
  echo '{"kind":"ui_stall_placement","error":"skipped: needs the GUI build (splitseg-bench-ui)"}' >>"$OUTD/results.jsonl"
fi
fi

# Ranks over shaped links (network namespaces; root): docs/bench/links.jsonl, kept as it was otherwise.
if [ "${BENCH_QUICK:-0}" != 1 ] && [ "${BENCH_NO_DOCS:-0}" != 1 ]; then
  SPLITSEG_BENCH_BUILD="$BUILD" bash "$HERE/links.sh" "$ROOT/docs/bench/links.jsonl"
fi

if [ -n "${BENCH_MERGE:-}" ]; then
  "$PY" "$HERE/merge_results.py" "$BENCH_MERGE" "$OUTD/results.jsonl" >"$WORK/merged.jsonl" &&
    mv "$WORK/merged.jsonl" "$OUTD/results.jsonl"
fi
REPORT_ARGS=(--results "$OUTD/results.jsonl" --gpu "$ROOT/docs/bench/gpu.json" --summary "$OUTD/summary.json"
             --links "$ROOT/docs/bench/links.jsonl")
[ "${BENCH_NO_DOCS:-0}" = 1 ] || REPORT_ARGS+=(--docs "$ROOT/docs")
[ "${BENCH_QUICK:-0}" = 1 ] && REPORT_ARGS+=(--quick)
"$PY" "$HERE/report.py" "${REPORT_ARGS[@]}"
[ -n "${BENCH_KEEP:-}" ] && cp "$OUTD/results.jsonl" "$BENCH_KEEP" && cp "$OUTD/summary.json" "${BENCH_KEEP%.jsonl}.summary.json"
exit 0
}
