#!/usr/bin/env bash
# SplitSeg's training step against PyTorch eager on the same GPU, same weights and input
# (splitseg-bench export -> train; tests/bench/peer_train.py --device cuda). Builds only
# splitseg-bench. tests/gpu/peer.sh OUTDIR [SIZES] -> OUTDIR/peer.jsonl
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; cd "$ROOT"
OUTDIR="${1:?usage: tests/gpu/peer.sh OUTDIR [SIZES]}"; mkdir -p "$OUTDIR"; SIZES="${2:-64 128}"
PY=/opt/torch/.venv/bin/python; [ -x "$PY" ] || PY=python3
PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
B=build-gpu
[ -x "$B/bin/splitseg-bench" ] || {
  cmake -S tests/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$ROOT/.gpu-kit;$PREFIX" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -B "$B" >"$OUTDIR/peer-build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" --target splitseg-bench >>"$OUTDIR/peer-build.log" 2>&1 || {
    tail -20 "$OUTDIR/peer-build.log"; exit 2; }
}
W="$(mktemp -d)"; R="$OUTDIR/peer.jsonl"; : >"$R"
for s in $SIZES; do
  "$B/bin/splitseg-bench" export --size "$s" --base 32 --state "$W/st$s.pt" >/dev/null || continue
  "$B/bin/splitseg-bench" train --size "$s" --base 32 --state "$W/st$s.pt" --warmup 2 --repeats 5 2>/dev/null |
    tail -n 1 | "$PY" tests/bench/tag_json.py kind "splitseg:$s" >>"$R"
  "$PY" tests/bench/peer_train.py --state "$W/st$s.pt" --base 32 --device cuda --warmup 2 --repeats 5 2>/dev/null |
    tail -n 1 | "$PY" tests/bench/tag_json.py kind "pytorch:$s" >>"$R"
  tail -n 2 "$R" | cut -c1-220
done
