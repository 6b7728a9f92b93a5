#!/usr/bin/env bash
# tests/run.sh - the one test command (README, .ci/run). Installs what is
# missing (Debian, as root), builds from scratch, and runs:
#   1. generated files are up to date (tools/check_generated.sh)
#   2. release build + all CTest tests (unit, flatc oracle, mock record/replay,
#      corrupt inputs)
#   3. ASan/UBSan build + all CTest tests
#   4. libFuzzer smoke run of every fuzz target (clang)
# GPU tests are not run here: see tests/gpu/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${CUCAP_TEST_BUILD:-$ROOT/build-test}
FUZZ_SECONDS=${CUCAP_FUZZ_SECONDS:-20}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

bash tools/install_deps.sh

echo "== 1. generated files are up to date"
bash tools/check_generated.sh

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

echo "== 4. libFuzzer smoke (${FUZZ_SECONDS}s per target)"
CC=clang CXX=clang++ cmake -S . -B "$BUILD/fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCUCAP_FUZZ=ON >/dev/null
# Only the fuzz targets: each compiles its parser with -fsanitize=fuzzer,address,undefined.
cmake --build "$BUILD/fuzz" -j2 --target fuzz_verify fuzz_reader fuzz_fatbin fuzz_profile fuzz_nvdisasm \
  fuzz_range fuzz_profile_table fuzz_share
nfuzz=0
for f in "$BUILD"/fuzz/tests/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus="$BUILD/fuzz/corpus-$name"
  mkdir -p "$corpus"
  [ -d "tests/fuzz/corpus/$name" ] && cp tests/fuzz/corpus/$name/* "$corpus"/ 2>/dev/null || true
  # Seed the capture reader with a real (synthetic) capture so it starts past the magic.
  if { [ "$name" = fuzz_reader ] || [ "$name" = fuzz_share ]; } &&
     [ -x "$BUILD/rel/tests/testgen/cucap-testgen" ]; then
    "$BUILD/rel/tests/testgen/cucap-testgen" "$corpus/seed.fb" --records 40 >/dev/null 2>&1 || true
  fi
  # Seed the profile reader with a real profile file.
  if [ "$name" = fuzz_profile ] && [ -x "$BUILD/rel/tests/test_profile" ]; then
    CUCAP_PROFILE_SEED="$corpus/seed.prof" "$BUILD/rel/tests/test_profile" >/dev/null 2>&1 || true
  fi
  # trim/extract/export/diff get further from a real recording with NVTX
  # ranges and launch snapshots (drv_train on the mock)
  if [ "$name" = fuzz_share ] && [ -x "$BUILD/rel/tests/apps/drv_train" ]; then
    LD_LIBRARY_PATH="$BUILD/rel/tests/mock" "$BUILD/rel/tools/cucap" record -o "$corpus/train.fb" \
      --snapshot=launch:1 -- "$BUILD/rel/tests/apps/drv_train" 2 >/dev/null 2>&1 || true
  fi
  # a multi-architecture image (trim/extract reduce it), and two runs of it
  # whose host and device addresses differ, as one diff pair (fuzz_share.c)
  if [ "$name" = fuzz_share ] && [ -x "$BUILD/rel/tests/apps/drv_share" ]; then
    LD_LIBRARY_PATH="$BUILD/rel/tests/mock" "$BUILD/rel/tools/cucap" record -o "$corpus/share.fb" \
      --snapshot=launch:0 -- "$BUILD/rel/tests/apps/drv_share" 2 >/dev/null 2>&1 || true
    LD_LIBRARY_PATH="$BUILD/rel/tests/mock" DRV_SHARE_SHIFT=1 CUCAP_MOCK_ADDR_BASE=0x7c0000000000 \
      "$BUILD/rel/tools/cucap" record -o "$corpus/share2.fb" -- "$BUILD/rel/tests/apps/drv_share" 2 \
      >/dev/null 2>&1 || true
    { cat "$corpus/share.fb"; printf '\n--cucap-diff-b--\n'; cat "$corpus/share2.fb"; } \
      >"$corpus/pair.fb" 2>/dev/null && rm -f "$corpus/share2.fb"
  fi
  echo "-- $name"
  "$f" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=1 "$corpus" 2>&1 | tail -3
  nfuzz=$((nfuzz + 1))
done
[ "$nfuzz" -gt 0 ] || { echo "no fuzz targets were built" >&2; exit 1; }
total=0
for l in "$BUILD/ctest-rel.log" "$BUILD/ctest-asan.log"; do
  n=$(sed -n 's/.*tests failed out of \([0-9][0-9]*\).*/\1/p' "$l" | tail -1)
  total=$((total + ${n:-0}))
done
total=$((total + nfuzz))
echo "== all CPU tests passed (GPU tests: tests/gpu/run.sh on a GPU machine)"
echo "$total passed, 0 failed"
