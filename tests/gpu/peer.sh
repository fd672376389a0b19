#!/usr/bin/env bash
# SplitSeg's training step against PyTorch eager on the same GPU, same weights and input
# (splitseg-bench export -> train; tests/bench/peer_train.py --device cuda), and SplitSeg's
# hand-written C++ loop (splitseg-bench train --plain: the same network and Adam, no Trainer) on the
# same device, which separates the Trainer's own cost from LibTorch's. Builds splitseg-bench if
# run.sh has not. tests/gpu/peer.sh OUTDIR [SIZES] -> OUTDIR/peer.jsonl
#   PEER_DEVICE (default cuda:0; cpu for a rehearsal), PEER_BASE (default 32), GPU_BUILD (build-gpu),
#   PEER_REPEATS (timed steps per side, default 20)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; cd "$ROOT"
OUTDIR="${1:?usage: tests/gpu/peer.sh OUTDIR [SIZES]}"; mkdir -p "$OUTDIR"; SIZES="${2:-64 128}"
PY="${PY:-/opt/torch/.venv/bin/python}"; [ -x "$PY" ] || PY="$HOME/.local/share/splitseg/venv/bin/python"
[ -x "$PY" ] || PY=python3
DEVICE="${PEER_DEVICE:-cuda:0}"; BASE="${PEER_BASE:-32}"; B="${GPU_BUILD:-build-gpu}"
# Timed steps per side: 5 on the 2026-12-04 lease left medians at the mercy of one slow step.
REPEATS="${PEER_REPEATS:-20}"
[ -x "$B/bin/splitseg-bench" ] || {
  PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  cmake -S tests/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$ROOT/.gpu-kit;$PREFIX" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -B "$B" >"$OUTDIR/peer-build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" --target splitseg-bench >>"$OUTDIR/peer-build.log" 2>&1 || {
    tail -20 "$OUTDIR/peer-build.log"; exit 2; }
}
W="$(mktemp -d)"; trap 'rm -rf "$W"' EXIT
R="$OUTDIR/peer.jsonl"; : >"$R"
source "$ROOT/tests/gpu/record.sh"
side() { RECORD_FILE="$R" record_as kind "$@"; }  # KIND COMMAND...: one line per side, or its error
for s in $SIZES; do
  "$B/bin/splitseg-bench" export --size "$s" --base "$BASE" --state "$W/st$s.pt" >/dev/null || continue
  # The Trainer places every stage on the first runnable device (cuda:0 where there is one).
  side "splitseg:$s" "$B/bin/splitseg-bench" train --size "$s" --base "$BASE" --state "$W/st$s.pt" \
    --warmup 2 --repeats "$REPEATS"
  # Diagnostics: each batch drawn when its step starts (no overlap with the GPU), and where a
  # step's time goes (the timeline synchronises at every span: a breakdown, not a timing).
  side "splitseg-noprefetch:$s" "$B/bin/splitseg-bench" train --size "$s" --base "$BASE" --state "$W/st$s.pt" \
    --no-prefetch --warmup 2 --repeats "$REPEATS"
  # Diagnostic: OpenMP's idle threads asleep rather than spinning (GNU OpenMP spins by default). On
  # the 2026-12-04 lease a Trainer step used 8-16x its wall time in CPU; if threads still spin in
  # the step, this row is faster than the first and uses less CPU.
  side "splitseg-passive:$s" env OMP_WAIT_POLICY=passive "$B/bin/splitseg-bench" train --size "$s" --base "$BASE" \
    --state "$W/st$s.pt" --warmup 2 --repeats "$REPEATS"
  side "splitseg-parts:$s" "$B/bin/splitseg-bench" train --size "$s" --base "$BASE" --state "$W/st$s.pt" \
    --timeline --warmup 2 --repeats "$REPEATS"
  side "splitseg-loop:$s" "$B/bin/splitseg-bench" train --size "$s" --base "$BASE" --state "$W/st$s.pt" \
    --plain --device "$DEVICE" --warmup 2 --repeats "$REPEATS"
  side "pytorch:$s" "$PY" tests/bench/peer_train.py --state "$W/st$s.pt" --base "$BASE" --device "$DEVICE" \
    --warmup 2 --repeats "$REPEATS"
done
