#!/usr/bin/env bash
# tests/run.sh - the one test command (README, .ci/run). Installs what is
# missing (Debian, as root), builds from scratch, and runs:
#   1. generated files are up to date (tools/check_generated.sh) and the
#      layering rules hold (tools/check_layers.sh)
#   2. release build + all CTest tests (unit, flatc oracle, mock record/replay,
#      corrupt inputs)
#   3. ASan/UBSan build + all CTest tests
#   4. libFuzzer smoke run of every fuzz target (clang): regression inputs,
#      then CUCAP_FUZZ_SECONDS (default 15) of fuzzing each
#      (tests/fuzz/run_long.sh; long runs use it directly)
#   5. ThreadSanitizer build + the tests with threads (writer, recorder,
#      reader, replayer; multi-thread apps; kill, signal, disk-full tests)
# GPU tests are not run here: see tests/gpu/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${CUCAP_TEST_BUILD:-$ROOT/build-test}
FUZZ_SECONDS=${CUCAP_FUZZ_SECONDS:-15}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

bash tools/install_deps.sh

echo "== 1. generated files are up to date, layering rules hold"
bash tools/check_generated.sh
bash tools/check_layers.sh

echo "== 2. release build + tests"
rm -rf "$BUILD"
cmake -S . -B "$BUILD/rel" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD/rel" -j2
(cd "$BUILD/rel" && ctest --output-on-failure -j2) | tee "$BUILD/ctest-rel.log"

echo "== 3. ASan/UBSan build + tests"
cmake -S . -B "$BUILD/asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCUCAP_SANITIZE=ON >/dev/null
cmake --build "$BUILD/asan" -j2
(cd "$BUILD/asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2) | tee "$BUILD/ctest-asan.log"

echo "== 4. libFuzzer smoke (${FUZZ_SECONDS}s per target, regression inputs first)"
CC=clang CXX=clang++ cmake -S . -B "$BUILD/fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCUCAP_FUZZ=ON >/dev/null
cmake --build "$BUILD/fuzz" -j2 --target fuzz_all
# Seeds from real (mock) recordings, so the capture readers start past the
# magic: a synthetic capture (reader, share), a profile file (profile) and a
# drv_train recording with NVTX ranges and launch snapshots (share).
FW="$BUILD/fuzz/work"
for t in fuzz_reader fuzz_share fuzz_profile; do mkdir -p "$FW/$t/corpus"; done
if [ -x "$BUILD/rel/tests/testgen/cucap-testgen" ]; then
  for t in fuzz_reader fuzz_share; do
    "$BUILD/rel/tests/testgen/cucap-testgen" "$FW/$t/corpus/seed.fb" --records 40 >/dev/null 2>&1 || true
  done
fi
[ -x "$BUILD/rel/tests/test_profile" ] &&
  { CUCAP_PROFILE_SEED="$FW/fuzz_profile/corpus/seed.prof" "$BUILD/rel/tests/test_profile" >/dev/null 2>&1 || true; }
[ -x "$BUILD/rel/tests/apps/drv_train" ] &&
  { LD_LIBRARY_PATH="$BUILD/rel/tests/mock" "$BUILD/rel/tools/cucap" record -o "$FW/fuzz_share/corpus/train.fb" \
      --snapshot=launch:1 -- "$BUILD/rel/tests/apps/drv_train" 2 >/dev/null 2>&1 || true; }
# a multi-architecture image (trim/extract reduce it), and two runs of it
# whose host and device addresses differ, as one diff pair (fuzz_share.c)
if [ -x "$BUILD/rel/tests/apps/drv_share" ]; then
  C="$FW/fuzz_share/corpus"
  LD_LIBRARY_PATH="$BUILD/rel/tests/mock" "$BUILD/rel/tools/cucap" record -o "$C/share.fb" \
    --snapshot=launch:0 -- "$BUILD/rel/tests/apps/drv_share" 2 >/dev/null 2>&1 || true
  LD_LIBRARY_PATH="$BUILD/rel/tests/mock" DRV_SHARE_SHIFT=1 CUCAP_MOCK_ADDR_BASE=0x7c0000000000 \
    "$BUILD/rel/tools/cucap" record -o "$C/share2.fb" -- "$BUILD/rel/tests/apps/drv_share" 2 \
    >/dev/null 2>&1 || true
  { cat "$C/share.fb"; printf '\n--cucap-diff-b--\n'; cat "$C/share2.fb"; } \
    >"$C/pair.fb" 2>/dev/null && rm -f "$C/share2.fb"
fi
CUCAP_FUZZ_MERGE=none CUCAP_FUZZ_WORK="$FW" \
  bash tests/fuzz/run_long.sh "$FUZZ_SECONDS" 1 "$BUILD/fuzz/tests/fuzz" | tee "$BUILD/fuzz.log"
nfuzz=$(grep -c ' crashes 0$' "$BUILD/fuzz.log" || true)
[ "$nfuzz" -gt 0 ] || { echo "no fuzz targets ran" >&2; exit 1; }

echo "== 5. ThreadSanitizer build + the tests with threads"
# Not under TSan: test_record_fork (fork of a multi-threaded process loses
# the re-raised signal under TSan; covered by stages 2 and 3) and the
# replay tests that place mock memory at fixed low addresses
# (test_replay_mock/graph/zerocopy: TSan allows mappings only in its
# application windows).
TSAN_TESTS='^(unit\.test_(writer|recorder|reader|replay|tracker|callstack|knobs)|integration\.test_record_(basic|semantics|threads|kill|diskfull)|mock\.(selftest|apps_run))$'
cmake -S . -B "$BUILD/tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUCAP_TSAN=ON >/dev/null
cmake --build "$BUILD/tsan" -j2
(cd "$BUILD/tsan" && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ROOT/tests/tsan.supp" \
   ctest --output-on-failure -j2 -R "$TSAN_TESTS") | tee "$BUILD/ctest-tsan.log"
if grep -q "WARNING: ThreadSanitizer" "$BUILD/ctest-tsan.log"; then
  echo "ThreadSanitizer reported a problem" >&2; exit 1
fi

total=0
for l in "$BUILD/ctest-rel.log" "$BUILD/ctest-asan.log" "$BUILD/ctest-tsan.log"; do
  n=$(sed -n 's/.*tests failed out of \([0-9][0-9]*\).*/\1/p' "$l" | tail -1)
  total=$((total + ${n:-0}))
done
total=$((total + nfuzz))
echo "== all CPU tests passed (GPU tests: tests/gpu/run.sh on a GPU machine)"
echo "$total passed, 0 failed"
