#!/usr/bin/env bash
# Sets up what is missing, builds, and opens the workstation on the demo CT.
# Without the GUI build (or with --cli) it runs a short demo training in the terminal.
set -euo pipefail
cd "$(dirname "$0")"
./packaging/install-deps.sh
# ccache across checkouts (CI builds a fresh clone): relative paths, PCH-friendly.
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
cmake --preset default >/dev/null
# Only the programs this script runs (and the layering check), not the test suite: the first
# launch on a fresh machine waits for as little as it can. ./test.sh builds everything.
targets=(splitseg-cli splitseg_resunet3d splitseg_layering)
grep -q '^SPLITSEG_BUILD_GUI:BOOL=ON' build/CMakeCache.txt 2>/dev/null && targets+=(splitseg)
cmake --build --preset default --target "${targets[@]}"
if [ "${1:-}" != "--cli" ] && [ -x build/bin/splitseg ]; then
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    exec build/bin/splitseg "${@}"
  fi
  echo "run.sh: no display (DISPLAY unset); run it under a desktop or xvfb-run, or use ./run.sh --cli." >&2
  echo "run.sh: running the terminal demo instead." >&2
fi
[ "${1:-}" = "--cli" ] && shift
echo "SplitSeg demo: training a small U-Net split over two device entries on a synthetic phantom"
exec build/bin/splitseg-cli train --synthetic 32 --base 8 --norm instance --lr 1e-2 --steps 40 \
  --validate-every 20 --placement "enc0=cpu,bottleneck=cpu" --progress bar
