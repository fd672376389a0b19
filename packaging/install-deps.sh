#!/usr/bin/env bash
# Installs what SplitSeg needs to build and run. Idempotent: a second run only checks.
#   Debian packages: compiler tool chain, Qt 6, VTK 9, ITK 5, helpers, Xvfb, the demo CT.
#   LibTorch: the PyPI torch wheel (CUDA build, C++11 ABI) in a project venv, pinned.
# Options: --core-only   skip the GUI stack (Qt, VTK, ITK), e.g. on a GPU box
#          --bench       also install the Python peers used by benchmarks (MONAI, jemalloc)
#          --fuzz        also install clang + libFuzzer runtime (tests/fuzz/run.sh)
set -euo pipefail

TORCH_VERSION="${SPLITSEG_TORCH_VERSION:-2.11.0}"
MONAI_VERSION="${SPLITSEG_MONAI_VERSION:-1.6.1}"
SIMPLEITK_VERSION="${SPLITSEG_SIMPLEITK_VERSION:-2.5.7}"
MATPLOTLIB_VERSION="${SPLITSEG_MATPLOTLIB_VERSION:-3.10.8}"
SPLITSEG_HOME="${SPLITSEG_HOME:-$HOME/.local/share/splitseg}"
VENV="${SPLITSEG_VENV:-$SPLITSEG_HOME/venv}"

core_only=0; bench=0; fuzz=0
for a in "$@"; do
  case "$a" in
    --core-only) core_only=1 ;;
    --bench) bench=1 ;;
    --fuzz) fuzz=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown option $a" >&2; exit 2 ;;
  esac
done

log() { printf '[install-deps] %s\n' "$*"; }

core_pkgs=(build-essential cmake ninja-build ccache git pkg-config
           nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libgloo-dev libssl-dev iproute2 strace)
gui_pkgs=(qt6-base-dev qt6-charts-dev libqt6opengl6-dev qt6-svg-dev
          libvtk9-dev libinsighttoolkit5-dev libgdcm-dev libgdcm-tools
          xvfb xauth libgl1-mesa-dri invesalius-examples dpkg-dev file)

pkgs=("${core_pkgs[@]}")
[ "$core_only" = 1 ] || pkgs+=("${gui_pkgs[@]}")
[ "$fuzz" = 0 ] || pkgs+=(clang libclang-rt-14-dev)
# The tuned Python peers of the benchmarks preload Debian's jemalloc (tests/bench/run.sh).
[ "$bench" = 0 ] || pkgs+=(libjemalloc2)

if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    log "Debian packages present"
  fi
else
  log "not a Debian system: install ${pkgs[*]} yourself"
fi

# LibTorch from the torch wheel. A user may instead set Torch_DIR / CMAKE_PREFIX_PATH to any LibTorch.
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
have=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$have" != "$TORCH_VERSION" ]; then
  log "installing torch==$TORCH_VERSION into $VENV (large download, once)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" numpy
else
  log "torch $have present"
fi
# The report test (ReportTest) regenerates docs/benchmarks.md with its plots.
"$VENV/bin/python" -c 'import matplotlib' 2>/dev/null || {
  log "installing matplotlib==$MATPLOTLIB_VERSION (benchmark report plots)"
  "$VENV/bin/python" -m pip install -q "matplotlib==$MATPLOTLIB_VERSION"
}
if [ "$bench" = 1 ]; then
  "$VENV/bin/python" -c 'import monai' 2>/dev/null || {
    log "installing monai==$MONAI_VERSION for benchmarks"
    "$VENV/bin/python" -m pip install -q "monai==$MONAI_VERSION"
  }
  # The volume-loading peer (what MONAI's LoadImage and most scripts read NIfTI with).
  "$VENV/bin/python" -c 'import SimpleITK' 2>/dev/null || {
    log "installing SimpleITK==$SIMPLEITK_VERSION for benchmarks"
    "$VENV/bin/python" -m pip install -q "SimpleITK==$SIMPLEITK_VERSION"
  }
fi
"$VENV/bin/python" -c 'import torch; print("[install-deps] Torch cmake prefix:", torch.utils.cmake_prefix_path)'
