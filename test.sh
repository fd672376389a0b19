#!/usr/bin/env bash
# Sets up what is missing, builds, and runs every test through CTest (GUI tests under Xvfb).
#   ./test.sh            all tests
#   ./test.sh -L core    CTest arguments pass through
#   ./test.sh --bench    also run the benchmarks and write docs/benchmarks.md
#   ./test.sh --sanitize AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
#                        (core + CLI, no GUI) running the core, cli and dist tests only
#   ./test.sh --tsan     ThreadSanitizer build in build-tsan/ running the GUI worker tests
#                        (training, inference, volume loading, stop/cancel) under Xvfb
#   ./test.sh --no-fuzz  without the 30-second libFuzzer smoke of every target (build-fuzz/,
#                        clang; it runs by default when no CTest arguments are given)
set -euo pipefail
cd "$(dirname "$0")"
bench=0; sanitize=0; tsan=0; fuzz=1; args=()
for a in "$@"; do
  case "$a" in
    --bench) bench=1 ;;
    --sanitize) sanitize=1 ;;
    --tsan) tsan=1 ;;
    --no-fuzz) fuzz=0 ;;
    *) args+=("$a") ;;
  esac
done
if [ "$sanitize" = 1 ]; then
  ./packaging/install-deps.sh
  exec tests/sanitize/run.sh "${args[@]}"
fi
if [ "$tsan" = 1 ]; then
  ./packaging/install-deps.sh
  exec tests/sanitize/tsan.sh "${args[@]}"
fi
deps_args=(); [ "$bench" = 1 ] && deps_args+=(--bench)
./packaging/install-deps.sh "${deps_args[@]}"
# ccache across checkouts (CI builds a fresh clone): relative paths, PCH-friendly.
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
cmake --preset default >/dev/null
cmake --build --preset default
export QT_QPA_PLATFORM=xcb
run() {
  if [ -z "${DISPLAY:-}" ] && command -v xvfb-run >/dev/null; then
    xvfb-run -a -s "-screen 0 1600x1000x24" "$@"
  else
    "$@"
  fi
}
run ctest --test-dir build --output-on-failure -j2 "${args[@]}"
if [ "$fuzz" = 1 ] && [ "${#args[@]}" = 0 ]; then
  ./packaging/install-deps.sh --fuzz
  FUZZ_JOBS=2 tests/fuzz/run.sh build
  ctest --test-dir build-fuzz -L fuzz -j2 --output-on-failure
fi
if [ "$bench" = 1 ]; then
  run tests/bench/run.sh
fi
