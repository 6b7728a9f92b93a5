#!/usr/bin/env bash
# test_profile_compose.sh - the profile pipeline composes, and its text says
# what is true (issue 42), on the mock libcuda with the stand-in libcupti:
#  1. what `replay --profile --profile-out` writes, `export --profile`
#     (Perfetto and Chrome JSON) and `diff --profile-a/-b` read, with the
#     kernels timed from it; the CSV timings table stays accepted;
#  2. a damaged profile file (truncated, a flipped payload byte, the magic
#     alone, another major version) and a file that is neither format:
#     exit 3 with one error line, never a crash;
#  3. the replay --profile report does not advise running replay --profile,
#     and says "gap" for the time between launch calls;
#  4. diff of two different programs: the first divergence shows what
#     differs (the two sides are not the same text); byte counts carry units;
#  5. dump: a failed call's result by its CUresult name (a program built
#     here whose calls fail, when cc and cuda.h are present); no line over
#     160 characters unless it is one word.
# Skips (77) without the mock, the stand-in libcupti or the apps.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
MOCK_CUPTI="${MOCK_CUPTI:-$(dirname "$MOCK_LIBDIR")/mock_cupti/libcupti.so.13}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ] || [ ! -e "$MOCK_CUPTI" ]; then
  echo "SKIP: mock libcuda, stand-in libcupti ($MOCK_CUPTI) or cucap missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_basic" ] || [ ! -x "$APPS_DIR/drv_streams" ]; then
  echo "SKIP: driver-API test apps not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-compose.XXXXXX")"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUCAP_CUPTI="$MOCK_CUPTI"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

for app in drv_basic drv_streams; do
  "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > /dev/null 2>&1 || { echo "FAIL: record $app"; exit 1; }
done

# ---- 1. --profile-out -> export --profile, diff --profile-a/-b -------------
for n in a b; do
  "$CUCAP" replay --profile --profile-out "$T/$n.prof" "$T/drv_streams.fb" > "$T/rp$n.out" 2> "$T/rp$n.err"
  echo $? > "$T/rp$n.rc"
done
if [ "$(cat "$T/rpa.rc")" = 0 ] && [ "$(head -c 6 "$T/a.prof" | tail -c 5)" = "CUPRF" ]; then
  ok "replay --profile --profile-out writes a profile file"
else
  bad "replay --profile-out: rc=$(cat "$T/rpa.rc")"; tail -5 "$T/rpa.err"; exit 1
fi
for fmt in perfetto chrome-json; do
  "$CUCAP" export "$T/drv_streams.fb" --format=$fmt -o "$T/t.$fmt" --profile "$T/a.prof" \
    > "$T/ex.$fmt.out" 2> "$T/ex.$fmt.err"; rc=$?
  timed=$(sed -n 's/.*GPU times from [^:]*: \([0-9]*\) timed.*/\1/p' "$T/ex.$fmt.out")
  if [ $rc = 0 ] && [ -s "$T/t.$fmt" ] && [ "${timed:-0}" -gt 0 ]; then
    ok "export --format=$fmt --profile PROFILE: $timed kernels timed ($(sed -n 's/.*GPU times from \([^:]*\):.*/\1/p' "$T/ex.$fmt.out"))"
  else
    bad "export --format=$fmt --profile PROFILE: rc=$rc"; cat "$T/ex.$fmt.out" "$T/ex.$fmt.err"
  fi
done
if "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"] if isinstance(d,dict) else d; assert any(e.get("ph")=="X" for e in ev)' "$T/t.chrome-json" 2> "$T/cj.err"; then
  ok "the Chrome trace from a profile file is JSON with complete events"
else bad "Chrome trace from a profile file"; cat "$T/cj.err"; fi
"$CUCAP" diff "$T/drv_streams.fb" "$T/drv_streams.fb" --profile-a "$T/a.prof" --profile-b "$T/b.prof" \
  > "$T/df.out" 2> "$T/df.err"; rc=$?
if { [ $rc = 0 ] || [ $rc = 1 ]; } && grep -q "GPU time per kernel" "$T/df.out" && [ ! -s "$T/df.err" ]; then
  ok "diff --profile-a/-b PROFILE PROFILE: per-kernel GPU times (exit $rc)"
else bad "diff --profile-a/-b profiles: rc=$rc"; cat "$T/df.out" "$T/df.err" | head -20; fi
printf 'launch_index,start_ns,end_ns\n0,1000,2000\n1,3000,4500\n' > "$T/t.csv"
"$CUCAP" export "$T/drv_streams.fb" --format=perfetto -o "$T/csv.pftrace" --profile "$T/t.csv" \
  > "$T/csv.out" 2> "$T/csv.err"; rc=$?
if [ $rc = 0 ]; then ok "a CSV timings table is still accepted"
else bad "CSV timings: rc=$rc"; cat "$T/csv.err"; fi

# ---- 2. damaged profile files: exit 3, one line, no crash -------------------
size=$(stat -c %s "$T/a.prof")
head -c $((size / 2)) "$T/a.prof" > "$T/trunc.prof"
head -c 8 "$T/a.prof" > "$T/magic.prof"
cp "$T/a.prof" "$T/flip.prof"
printf '\xff' | dd of="$T/flip.prof" bs=1 seek=$((size - 5)) conv=notrunc 2> /dev/null
cp "$T/a.prof" "$T/major.prof"
printf '\x63\x00' | dd of="$T/major.prof" bs=1 seek=8 conv=notrunc 2> /dev/null
printf '\x89CUPRF\r\n' > "$T/short.prof"; printf 'garbage' >> "$T/short.prof"
printf 'this is not a profile\n' > "$T/text.prof"
for f in trunc magic flip major short text; do
  "$CUCAP" export "$T/drv_streams.fb" --format=perfetto -o "$T/x.pftrace" --profile "$T/$f.prof" \
    > /dev/null 2> "$T/e.$f.err"; rc1=$?
  "$CUCAP" diff "$T/drv_streams.fb" "$T/drv_streams.fb" --profile-a "$T/$f.prof" --profile-b "$T/b.prof" \
    > /dev/null 2> "$T/d.$f.err"; rc2=$?
  if [ $rc1 = 3 ] && [ $rc2 = 3 ] && [ "$(wc -l < "$T/e.$f.err")" = 1 ] && grep -q "$f.prof" "$T/e.$f.err" \
     && [ ! -e "$T/x.pftrace" ]; then
    ok "$f profile file: exit 3 ($(cat "$T/e.$f.err"))"
  else
    bad "$f profile file: export rc=$rc1, diff rc=$rc2"; cat "$T/e.$f.err" "$T/d.$f.err"
  fi
done

# ---- 3. the report's text -----------------------------------------------
if grep -q 'cucap replay --profile`' "$T/rpa.out"; then
  bad "replay --profile advises running replay --profile"; grep -n 'replay --profile`' "$T/rpa.out"
else ok "replay --profile does not advise running replay --profile"; fi
if grep -q "one every" "$T/rpa.out"; then bad "launch overhead: 'one every' for the gap"; grep "one every" "$T/rpa.out"
elif grep -q "launch_overhead" "$T/rpa.out" && ! grep -q "median gap" "$T/rpa.out"; then bad "launch overhead: no 'median gap'"
else ok "launch overhead names the gap between calls a gap"; fi

# ---- 4. diff of two programs: the first divergence shows what differs ------
"$CUCAP" diff "$T/drv_basic.fb" "$T/drv_streams.fb" > "$T/d2.out" 2> "$T/d2.err"; rc=$?
line=$(grep "first divergence" "$T/d2.out")
sa=$(sed -n 's/.*: A \(.*\); B .*/\1/p' <<<"$line"); sb=$(sed -n 's/.*; B \(.*\)$/\1/p' <<<"$line")
if [ $rc = 1 ] && [ -n "$line" ] && { [ -z "$sa" ] || [ "$sa" != "$sb" ]; }; then
  ok "diff of two programs: $line"
else bad "diff of two programs: rc=$rc, sides equal: '$line'"; fi
if grep -Eq "[0-9]+ bytes" "$T/d2.out"; then bad "diff: raw byte counts"; grep -E "[0-9]+ bytes" "$T/d2.out" | head -3
elif grep -Eq "[0-9]+ B \([0-9.]+ [KMG]iB\)" "$T/d2.out"; then
  ok "diff prints byte counts with units: $(grep -m1 -E " B \(" "$T/d2.out")"
else bad "diff: no byte count with units"; cat "$T/d2.out"; fi

# ---- 5. dump: CUresult names, folded lines ----------------------------------
# examples/sample.fb has long runs of cuGetProcAddress lookups: folded lines
SAMPLE="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}/examples/sample.fb"
"$CUCAP" dump "$T/drv_streams.fb" > "$T/dump.txt" 2> /dev/null
[ -f "$SAMPLE" ] && "$CUCAP" dump --no-symbols "$SAMPLE" >> "$T/dump.txt" 2> /dev/null
long=$(awk 'length($0) > 160 && index($0, " ") > 0' "$T/dump.txt" | head -1)
if [ -z "$long" ]; then ok "dump: no line over 160 characters ($(grep -c '^      [^ ]' "$T/dump.txt") continuation lines)"
else bad "dump: a line of ${#long} characters"; fi
num=$(awk '/^#[0-9]+ / && $4 !~ /^(0|CUDA_[A-Z0-9_]+\(-?[0-9]+\)|-?[0-9]+)$/' "$T/dump.txt" | head -1)
if [ -z "$num" ]; then ok "dump: results are 0 or NAME(code)"
else bad "dump: result field: $num"; fi
# a program whose calls fail (the mock refuses a 0-byte allocation and the
# free of an address it never gave), when a C compiler and cuda.h are here
CUDA_INC="${CUDA_HOME:-/usr/local/cuda}/include"
if command -v cc > /dev/null 2>&1 && [ -f "$CUDA_INC/cuda.h" ]; then
  cat > "$T/err.c" <<'CEOF'
#include <cuda.h>
int main(void) {
  CUdevice d; CUcontext c; CUdeviceptr p = 0;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuCtxCreate(&c, NULL, 0, d)) return 1;
  (void)cuMemAlloc(&p, 0);
  (void)cuMemFree((CUdeviceptr)0x10);
  cuCtxDestroy(c);
  return 0;
}
CEOF
  if cc -O1 ${CUCAP_TEST_CFLAGS:-} -I"$CUDA_INC" -o "$T/err" "$T/err.c" -L"$MOCK_LIBDIR" -lcuda 2> "$T/cc.err" &&
     "$CUCAP" record -o "$T/err.fb" -- "$T/err" > /dev/null 2>&1; then
    "$CUCAP" dump "$T/err.fb" > "$T/err.txt" 2>&1
    if grep -Eq "^#[0-9]+ [0-9]+ cuMemAlloc_v2 CUDA_ERROR_INVALID_VALUE\(1\) " "$T/err.txt"; then
      ok "dump: $(grep -m1 "CUDA_ERROR_INVALID_VALUE" "$T/err.txt")"
    else bad "dump: failed call's result not named"; grep cuMem "$T/err.txt"; fi
  else echo "note: could not build or record the failing-call program"; cat "$T/cc.err"; fi
fi
echo "test_profile_compose: $pass passed, $fail failed"
[ $fail -eq 0 ]
