#!/usr/bin/env bash
# test_replay_mock.sh - `cucap replay` end to end on the mock libcuda.
#  1. each driver-API app (drv_basic, drv_streams, drv_threads, drv_jit,
#     drv_library, drv_pitch, drv_graph) is recorded with `cucap record`, then
#     `cucap replay X --verify` must exit 0 and report all bytes matched, at
#     the recorded (fixed) addresses; and again with --relocate while the
#     mock hands out addresses from another base (CUCAP_MOCK_ADDR_BASE), so
#     the pointers really move and kernel parameters are patched.
#     Recorded at a 2 MiB- but not 32 MiB-aligned base and replayed with
#     CUCAP_MOCK_STRICT_VA=1 (the mock then ignores unaligned hints, like the
#     real driver), placement must still be fixed (32 MiB super-ranges).
#  2. one payload byte flipped in a DtoH blob (tests/test_replay --flip-dtoh)
#     -> --verify exits 1 and names the first differing offset.
#  3. a truncated capture -> exit 3 with a clear message; --allow-partial
#     does not crash.
# Skips (77) when the mock, the apps or `cucap record` are not there yet.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
BUILD="${CUCAP_BUILD_DIR:-}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_basic" ]; then
  echo "SKIP: driver-API test apps not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
if "$CUCAP" record --help 2>&1 | grep -q "not yet implemented"; then
  echo "SKIP: cucap record is not yet implemented"; exit 77
fi
if "$CUCAP" replay --help 2>&1 | grep -q "not yet implemented"; then
  echo "SKIP: cucap replay is not yet implemented"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0; bodyless=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

# ---- 1. record + replay --verify, fixed and relocated ----------------------
recorded=()
for app in drv_basic drv_streams drv_threads drv_jit drv_library drv_pitch drv_graph; do
  if [ ! -x "$APPS_DIR/$app" ]; then echo "note: $app not built"; continue; fi
  if ! "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > "$T/$app.rec.out" 2> "$T/$app.rec.err"; then
    bad "$app: record failed"; tail -5 "$T/$app.rec.err"; continue
  fi
  recorded+=("$app")
  "$CUCAP" replay "$T/$app.fb" --verify > "$T/$app.rep.out" 2> "$T/$app.rep.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q " 0 ops executed" "$T/$app.rep.out"; then
    echo "note: $app: the capture holds no replayable bodies (recorder incomplete?): $(head -1 "$T/$app.rep.out")"
    bodyless=$((bodyless+1)); continue
  fi
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/$app.rep.out" \
     && grep -q "^memory: fixed addresses" "$T/$app.rep.out"; then
    ok "$app: replay --verify at recorded addresses ($(grep '^verify:' "$T/$app.rep.out" | cut -c9-80))"
  else
    bad "$app: replay --verify rc=$rc"; cat "$T/$app.rep.out"; tail -5 "$T/$app.rep.err"
  fi
  if grep -q "skipped:" "$T/$app.rep.out"; then
    echo "note: $app: $(grep 'skipped:' "$T/$app.rep.out" | tr '\n' ' ')"
  fi
  CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/$app.fb" --verify --relocate \
    > "$T/$app.rel.out" 2> "$T/$app.rel.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/$app.rel.out"; then
    ok "$app: replay --verify --relocate ($(grep '^memory:' "$T/$app.rel.out" | cut -c9-120))"
  else
    bad "$app: replay --relocate rc=$rc"; cat "$T/$app.rel.out"; tail -5 "$T/$app.rel.err"
  fi
done
[ ${#recorded[@]} -gt 0 ] || { echo "SKIP: no app could be recorded"; exit 77; }

# Kernels no lookup record defines (drv_library's second library: enumerated
# CUkernels launched cast, through cuKernelGetFunction, through the library's
# module and in a graph node, as cudart and XLA do): --strict refuses any
# skipped op. With cuKernelGetLibrary unsupported (drivers before 12.5, and
# captures recorded before format 1.5), the replay finds them by name.
if [ -x "$APPS_DIR/drv_library" ]; then
  for nolib in 0 1; do
    CUCAP_MOCK_NO_KERNEL_LIBRARY=$nolib "$CUCAP" record -o "$T/lib$nolib.fb" -- "$APPS_DIR/drv_library" \
      > /dev/null 2> "$T/lib$nolib.rec.err" || { bad "drv_library (nolib=$nolib): record failed"; continue; }
    "$CUCAP" replay "$T/lib$nolib.fb" --verify --strict > "$T/lib$nolib.out" 2>&1; rc=$?
    byname=$(grep -c "found by name" "$T/lib$nolib.out")
    if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/lib$nolib.out" && [ "$byname" = "$nolib" ]; then
      ok "drv_library enumerated kernels, cuKernelGetLibrary $([ $nolib = 1 ] && echo unsupported: found by name || echo supported): replay --strict --verify"
    else
      bad "drv_library enumerated kernels (nolib=$nolib) rc=$rc by-name=$byname"; cat "$T/lib$nolib.out"
    fi
  done
  if "$CUCAP" dump "$T/lib0.fb" | grep -q "LibraryModule handle=0x[0-9a-f]* library=0x"; then
    ok "cuLibraryGetModule recorded as a LibraryModule record"
  else bad "no LibraryModule record in drv_library's capture"; fi
  # drv_library asks for scale's function a second time: the mock's driver
  # hands back the kernel's own handle, which was recorded once (a
  # KernelFunction body); the second call is only counted
  "$CUCAP" dump "$T/lib0.fb" > "$T/lib0.dump" 2>&1
  nkf=$(grep -c " cuKernelGetFunction 0 Function " "$T/lib0.dump")
  if [ "$nkf" = 2 ] && grep -Eq "QueryCounts .* cuKernelGetFunction=1( |$)" "$T/lib0.dump"; then
    ok "cuKernelGetFunction asked again for a known function: counted, not recorded again"
  else bad "cuKernelGetFunction records: $nkf (want 2, one per library) and a count of 1"; grep "KernelGetFunction" "$T/lib0.dump"; fi
fi

# A successful cuStreamQuery/cuEventQuery orders what the program does
# next (drv_query launches on another stream after it, with no event): the
# mock's asynchronous mode runs queued work only when waited for, so a
# replay that ignored the queries would read the buffer before it is filled.
if [ -x "$APPS_DIR/drv_query" ]; then
  if CUCAP_MOCK_ASYNC=1 "$CUCAP" record -o "$T/query.fb" -- "$APPS_DIR/drv_query" > "$T/query.rec" 2>&1 &&
     CUCAP_MOCK_ASYNC=1 "$CUCAP" replay "$T/query.fb" --verify > "$T/query.out" 2>&1 &&
     grep -q "all bytes matched" "$T/query.out"; then
    ok "drv_query: the replay waits where a stream/event query succeeded (asynchronous mock)"
  else
    bad "drv_query: replay after successful queries"; tail -3 "$T/query.out"
  fi
fi

# 32 MiB super-ranges: recorded at addresses that are 2 MiB- but not 32 MiB-
# aligned, replayed with a mock that (like the real driver) ignores such
# hints (CUCAP_MOCK_STRICT_VA=1): fixed placement must still succeed.
for app in drv_streams drv_graph; do
  [ -x "$APPS_DIR/$app" ] && [ $bodyless -eq 0 ] || continue
  if ! CUCAP_MOCK_ADDR_BASE=0x7e0000600000 "$CUCAP" record -o "$T/$app.va.fb" -- "$APPS_DIR/$app" \
       > /dev/null 2> "$T/$app.va.rec.err"; then
    bad "$app: record at an unaligned base failed"; tail -5 "$T/$app.va.rec.err"; continue
  fi
  CUCAP_MOCK_STRICT_VA=1 "$CUCAP" replay "$T/$app.va.fb" --verify > "$T/$app.va.out" 2> "$T/$app.va.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/$app.va.out" \
     && grep -q "^memory: fixed addresses" "$T/$app.va.out" && ! grep -q "cannot reserve" "$T/$app.va.err"; then
    ok "$app: CUCAP_MOCK_STRICT_VA=1, 32 MiB super-ranges ($(grep '^memory:' "$T/$app.va.out" | cut -c9-100))"
  else
    bad "$app: strict-VA replay rc=$rc"; cat "$T/$app.va.out"; tail -5 "$T/$app.va.err"
  fi
done

# --json, --loop, --sync on the first capture
first="$T/${recorded[0]}.fb"
if "$CUCAP" replay "$first" --verify --loop 3 --sync --json > "$T/loop.json" 2> "$T/loop.err" \
   && grep -q '"loops":3' "$T/loop.json" && grep -q '"mismatches":0' "$T/loop.json"; then
  ok "replay --loop 3 --sync --json"
else
  bad "replay --loop 3 --json"; cat "$T/loop.json" "$T/loop.err"
fi

# --verify=launch on a capture recorded with --hash-launches --snapshot=exit
if [ -x "$APPS_DIR/drv_streams" ] && [ $bodyless -eq 0 ] && "$CUCAP" record --hash-launches --snapshot=exit \
     -o "$T/hash.fb" -- "$APPS_DIR/drv_streams" > /dev/null 2> "$T/hash.rec.err"; then
  "$CUCAP" replay "$T/hash.fb" --verify=launch > "$T/hash.out" 2> "$T/hash.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/hash.out" \
     && ! grep -q " 0 launch hashes checked" "$T/hash.out"; then
    ok "replay --verify=launch ($(grep -o '[0-9]* launch hashes checked' "$T/hash.out"))"
  else
    bad "replay --verify=launch rc=$rc"; cat "$T/hash.out" "$T/hash.err"
  fi
fi

# ---- 2. flipped DtoH payload byte -------------------------------------------
HELPER="$BUILD/tests/test_replay"
if [ -x "$HELPER" ] && "$HELPER" --flip-dtoh "$first" "$T/flip.fb" 5 > "$T/flip.out" 2>&1; then
  "$CUCAP" replay "$T/flip.fb" --verify > "$T/flip.rep" 2> "$T/flip.err"; rc=$?
  if [ $rc -eq 1 ] && grep -q "first differing offset 5" "$T/flip.err"; then
    ok "flipped payload byte: exit 1, $(grep -o 'DtoH copy (record [0-9]*, seq [0-9]*)' "$T/flip.err" | head -1), offset 5"
  else
    bad "flipped payload: rc=$rc"; cat "$T/flip.out" "$T/flip.rep" "$T/flip.err"
  fi
  "$CUCAP" replay "$T/flip.fb" > /dev/null 2>&1 && ok "flipped capture replays without --verify" \
    || bad "flipped capture without --verify failed"
else
  echo "note: flip helper ($HELPER) unavailable: $(cat "$T/flip.out" 2>/dev/null)"
fi

# ---- 3. truncated capture ---------------------------------------------------
size=$(stat -c %s "$first")
head -c $((size / 2)) "$first" > "$T/trunc.fb"
"$CUCAP" replay "$T/trunc.fb" --verify > "$T/trunc.out" 2> "$T/trunc.err"; rc=$?
if [ $rc -eq 3 ] && grep -q "cucap replay: .*trunc.fb: " "$T/trunc.err"; then
  ok "truncated capture: exit 3: $(head -1 "$T/trunc.err" | cut -c1-150)"
else
  bad "truncated capture: rc=$rc"; cat "$T/trunc.out" "$T/trunc.err"
fi
"$CUCAP" replay "$T/trunc.fb" --allow-partial > "$T/part.out" 2> "$T/part.err"; rc=$?
if [ $rc -lt 128 ]; then ok "--allow-partial on a truncated capture: rc=$rc, no crash"
else bad "--allow-partial crashed (rc=$rc)"; cat "$T/part.err"; fi
printf 'not a capture at all\n' > "$T/junk.fb"
"$CUCAP" replay "$T/junk.fb" > /dev/null 2> "$T/junk.err"; rc=$?
[ $rc -eq 3 ] && ok "junk file: exit 3 ($(head -1 "$T/junk.err"))" || { bad "junk file rc=$rc"; cat "$T/junk.err"; }

echo "$pass passed, $fail failed"
if [ $fail -eq 0 ] && [ $bodyless -eq ${#recorded[@]} ]; then
  echo "SKIP: no recorded capture had replayable bodies (cucap record is incomplete)"; exit 77
fi
[ $fail -eq 0 ]
