#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of core, CLI and their tests (no GUI) in
# build-asan/, then the core, cli and ranks tests under it. Extra arguments go to CTest.
#   tests/sanitize/run.sh [ctest args...]
# LibTorch, ITK and Qt come from prebuilt packages and are not instrumented: the sanitizers
# watch SplitSeg's own code and every allocation (malloc is intercepted process-wide).
# Leak checking is off: LibTorch and ITK keep process-lifetime singletons that LeakSanitizer
# reports at exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1"
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DSPLITSEG_BUILD_GUI=OFF -DSPLITSEG_BUILD_TESTS=ON >/dev/null
fi
cmake --build build-asan -j"${SANITIZE_JOBS:-2}"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_odr_violation=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# Sanitized code runs 2-5x slower; CTest's timeouts are scaled by the same factor.
ctest --test-dir build-asan -L 'core|cli|ranks' -j"${SANITIZE_JOBS:-2}" --output-on-failure --timeout 1800 "$@"
