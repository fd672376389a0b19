#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ (clang, AddressSanitizer + UBSan, coverage)
# and runs each for SECONDS (default 60) from seeds made by make_fuzz_seeds plus the
# regression inputs in tests/fuzz/regressions/<target>/, with tests/fuzz/dicts/<target>.dict as
# libFuzzer's -dict when it exists. Prints executions and findings per
# target; exits non-zero when any target found something (inputs land in build-fuzz/fuzz-artifacts/).
#   tests/fuzz/run.sh [SECONDS] [target...]
#   tests/fuzz/run.sh build     only build the targets and the seed corpora (./test.sh then runs
#                               the 30-second smoke of each through CTest, label "fuzz")
# Needs clang and libclang-rt-14-dev: packaging/install-deps.sh --fuzz.
# On 2 cores the first build takes several minutes (ITK-heavy readers, sanitizers).
set -uo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"; shift || true
targets=("$@")
[ "$secs" = build ] && targets=()
[ "${#targets[@]}" -gt 0 ] || targets=(fuzz_nifti fuzz_nrrd fuzz_metaimage fuzz_dicom fuzz_inv3 fuzz_dataset_json fuzz_run_json fuzz_checkpoint fuzz_summary_json fuzz_json_depth fuzz_gzip_ratio fuzz_gate_wire)
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags -include $PWD/tests/fuzz/itk_clang_compat.h" -DCMAKE_CXX_FLAGS_RELEASE="-O1" -DCMAKE_C_FLAGS_RELEASE="-O1" \
    -DSPLITSEG_BUILD_GUI=OFF -DSPLITSEG_BUILD_TESTS=OFF -DSPLITSEG_FUZZ=ON >/dev/null || exit 1
fi
nice -n 10 cmake --build build-fuzz -j"${FUZZ_JOBS:-1}" --target make_fuzz_seeds make_checkpoint_seeds "${targets[@]}" || exit 1
corpus=build-fuzz/fuzz-corpus
./build-fuzz/bin/make_fuzz_seeds "$corpus" || exit 1
ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/bin/make_checkpoint_seeds "$corpus/fuzz_checkpoint" || exit 1
[ "$secs" = build ] && exit 0
mkdir -p build-fuzz/fuzz-artifacts
status=0
for t in "${targets[@]}"; do
  log="build-fuzz/fuzz-artifacts/$t.log"
  dict=(); [ -f "tests/fuzz/dicts/$t.dict" ] && dict=(-dict="tests/fuzz/dicts/$t.dict")
  ASAN_OPTIONS=detect_leaks=0:exitcode=86:allocator_may_return_null=1 UBSAN_OPTIONS=exitcode=86 nice -n 10 "./build-fuzz/bin/$t" -max_total_time="$secs" -timeout=20 \
    -rss_limit_mb=4096 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/fuzz-artifacts/$t-" "${dict[@]}" "$corpus/$t" "tests/fuzz/regressions/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  found=$(ls build-fuzz/fuzz-artifacts/ 2>/dev/null | grep -c "^$t-" || true)
  # allocator_may_return_null: a reader child's address-space limit (IsolatedRead.cpp) makes
  # malloc fail as it does without ASan, where the library sees NULL; ASan would call it a finding.
  # Reads run in child processes (core/io/IsolatedRead.h) that inherit libFuzzer's malloc limit
  # and handlers: a child over -malloc_limit_mb writes an oom-/slow- artifact and exits, which
  # the parent turns into a FormatError. Only a non-zero exit of the fuzzer itself is a finding.
  if [ "$rc" = 0 ]; then
    echo "$t: ${execs:-?} executions in ${secs}s, exit 0, no finding ($found artifact(s) from reader children, handled) (log $log)"
  else
    echo "$t: ${execs:-?} executions in ${secs}s, exit $rc, FINDING ($found artifact(s)) (log $log)"
  fi
  [ "$rc" = 0 ] || status=1
done
exit $status
