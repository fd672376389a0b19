#!/usr/bin/env bash
# Only step 1b of run.sh (ranks on CUDA against one process), on a machine where run.sh has built
# build-gpu: tests/gpu/ranks.sh OUTDIR -> OUTDIR/ranks.jsonl; exit 1 when a run differs from one process.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; cd "$ROOT"
OUTDIR="${1:?usage: tests/gpu/ranks.sh OUTDIR}"; mkdir -p "$OUTDIR"
BIN="$ROOT/${GPU_BUILD:-build-gpu}/bin"; DEV="${RANK_DEVICE:-cuda:0}"
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY="$HOME/.local/share/splitseg/venv/bin/python"
WORK="${RANK_WORK:-$(mktemp -d)}"; mkdir -p "$WORK"; RES="$OUTDIR/ranks.jsonl"; : >"$RES"
log() { echo "gpu: $*"; }
eval "$(sed -n '/^# 1b. Ranks/,/^SPLIT=/p' tests/gpu/run.sh | sed '$d')"
exit "$RANKS_RC"
