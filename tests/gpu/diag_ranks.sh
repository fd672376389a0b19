#!/usr/bin/env bash
# Where the ranks rows' checkpoints differ, beyond run.sh's pass/fail: tests/gpu/diag_ranks.sh OUTDIR
# -> OUTDIR/diag.jsonl (the rows, then explain_ranks.py for pairs of runs after 1 and 5 steps) and
# OUTDIR/diag.log. Builds build-gpu first (GPU_BUILD_ONLY run of run.sh) unless DIAG_DEV=cpu, which
# uses GPU_BUILD (default build). On the 2026-12-04 lease: 116 s to build, 60 s for the runs.
set -uo pipefail
OUT="${1:?usage: tests/gpu/diag_ranks.sh OUTDIR}"; mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; cd "$ROOT"
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY="$HOME/.local/share/splitseg/venv/bin/python"
exec >"$OUT/diag.log" 2>&1
T0=$(date +%s)
if [ "${DIAG_DEV:-cuda:0}" = cpu ]; then B="${GPU_BUILD:-build}"; else
  GPU_BUILD_ONLY=1 tests/gpu/run.sh "$ROOT/.diag-build" || { echo "build failed"; exit 2; }
  B=build-gpu
fi
echo "built at $(( $(date +%s) - T0 )) s"
W="$(mktemp -d)"; trap 'rm -rf "$W"' EXIT
GPU_BUILD="$B" RANK_DEVICE="${DIAG_DEV:-cuda:0}" RANK_WORK="$W/w" \
  RANK_RUNS="${DIAG_RUNS:-mixed-M4 same-M4 mixed-M2 cpu-M4 mixed-M1}" tests/gpu/ranks.sh "$W/r"
echo "ran at $(( $(date +%s) - T0 )) s"
{
  cat "$W/r/ranks.jsonl"
  # r_: after 5 steps; g_: after one step. one-KIND is one process on KIND's devices.
  for p in "5 one-mixed mixed-M4" "5 one-same same-M4" "5 one-mixed mixed-M2" "5 one-cpu cpu-M4" "5 one-mixed one-same" \
           "5 same-M4 mixed-M4" "5 one-cpu one-mixed" "1 one-mixed mixed-M4" "1 one-same same-M4" "1 one-mixed mixed-M2" \
           "1 one-mixed one-same"; do
    read -r s x y <<<"$p"
    pre=r; [ "$s" = 1 ] && pre=g
    "$PY" tests/gpu/explain_ranks.py "steps$s:$x~$y" "$W/w/${pre}_$x.pt" "$W/w/${pre}_$y.pt" 1e-4 ||
      echo "{\"label\": \"steps$s:$x~$y\", \"error\": true}"
  done
} >"$OUT/diag.jsonl"
echo "done at $(( $(date +%s) - T0 )) s"
