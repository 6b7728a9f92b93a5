#!/usr/bin/env bash
# test_replay_errors.sh - every way `cucap replay` can fail ends with its
# documented exit code (cucap_replay.h: 1 mismatch, 3 bad input or
# environment, 4 a driver call failed or an I/O error), a message, and a
# clean driver: the
# mock's leak check (CUCAP_MOCK_LEAK_CHECK=1) must find no context,
# allocation, reservation, mapping, stream, event, module, library, graph or
# graph exec left at exit.
#  1. Driver errors: for each driver-API app capture (recorded here) and for
#     each entry point the replayer uses (read from replay/replay_internal.h,
#     plus those replay_graph.c and replay_host.c fetch), the mock fails the
#     1st, then the 2nd call of it (CUCAP_MOCK_FAIL) with CUDA_ERROR_ECC_
#     UNCORRECTABLE (214). The replay must exit 0 (the failure is tolerated:
#     a fallback exists), 3 or 4, never crash; with 4 the message must name
#     the record and seq (or the setup step), the call and "CUDA_ERROR_ECC_
#     UNCORRECTABLE (214)". The leak check must be clean, except when the
#     failed call is itself a release (the mock then really keeps the object).
#  2. Input and environment errors: missing file, not a capture, truncated
#     capture without --allow-partial, a driver that cannot be loaded,
#     --strict refusal, a verification mismatch: each exit code as
#     documented, a message, a clean driver.
#  3. 80 --loop passes over a capture that creates a context.
# Skips (77) without the mock, cucap or the apps.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
BUILD="${CUCAP_BUILD_DIR:-}"
SRC="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_basic" ]; then
  echo "SKIP: driver-API test apps not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUCAP_MOCK_LEAK_CHECK=1
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

APPS="drv_basic drv_streams drv_threads drv_jit drv_graph drv_graph_explicit drv_library drv_pitch drv_zerocopy"
caps=()
for app in $APPS; do
  [ -x "$APPS_DIR/$app" ] || continue
  # The leak check is the replayer's: the recorder keeps its staging events
  # (deferred reads) until the process exits, on purpose - destroying them at
  # exit could touch a context the runtime's own exit handler already
  # destroyed.
  if env -u CUCAP_MOCK_LEAK_CHECK "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" \
       > /dev/null 2> "$T/rec.err"; then
    caps+=("$app")
  else
    bad "$app: record failed"; tail -3 "$T/rec.err"
  fi
done
[ ${#caps[@]} -gt 0 ] || { echo "SKIP: nothing recorded"; exit 77; }

fns=$(grep -o 'X([A-Za-z0-9]*, "cu[A-Za-z0-9_]*"' "$SRC/replay/replay_internal.h" | sed 's/.*"\(cu[^"]*\)"/\1/')
fns="$fns cuGraphCreate cuGraphAddKernelNode cuGraphAddMemcpyNode cuGraphAddMemsetNode cuGraphAddEmptyNode"
fns="$fns cuMemHostRegister cuMemHostUnregister cuMemHostGetDevicePointer"

# ---- 1. a driver call fails --------------------------------------------------
fired=0; e0=0; e3=0; e4=0; cases=0
for app in "${caps[@]}"; do
  for fn in $fns; do
    for nth in 1 2; do
      CUCAP_MOCK_FAIL="$fn:$nth:CUDA_ERROR_ECC_UNCORRECTABLE" "$CUCAP" replay --verify "$T/$app.fb" \
        > "$T/o" 2> "$T/e"; rc=$?
      grep -q "injecting CUDA_ERROR_ECC_UNCORRECTABLE into call $nth of $fn" "$T/e" || continue
      fired=$((fired+1)); cases=$((cases+1))
      what="$app, $fn call $nth"
      release=0
      case $fn in
        *Destroy|*Free|*FreeHost|*Release|*Unload|*Unmap|*Unregister) release=1 ;;
      esac
      if [ $rc -eq 66 ] && [ $release -eq 1 ]; then
        # the mock refused to release: the object it kept is its own leak
        grep -q "leak check: [0-9]" "$T/e" && { e0=$((e0+1)); continue; }
      fi
      case $rc in
        0) e0=$((e0+1)) ;;
        3) e3=$((e3+1)) ;;
        4) e4=$((e4+1))
           msg=$(grep "^cucap replay:" "$T/e" | head -1)
           if ! grep -q "CUDA_ERROR_ECC_UNCORRECTABLE (214)" <<<"$msg"; then
             bad "$what: exit 4 without the CUresult in the message: $msg"; continue
           fi
           if ! grep -qE "record [0-9]+ \(seq [0-9]+\): .*failed|^cucap replay: [^:]*: cu[A-Za-z0-9]+ failed" <<<"$msg"; then
             bad "$what: exit 4 without the record or the call: $msg"; continue
           fi ;;
        *) bad "$what: exit $rc"; tail -5 "$T/e"; continue ;;
      esac
      if ! grep -q "leak check: clean" "$T/e" && [ $release -eq 0 ]; then
        bad "$what: exit $rc, driver objects left: $(grep 'leak check' "$T/e")"; continue
      fi
    done
  done
done
if [ $fired -gt 100 ]; then
  ok "driver errors: $cases injected failures over ${#caps[@]} captures: $e4 stopped with exit 4 naming record, call and CUresult; $e3 exit 3; $e0 tolerated (exit 0); no crash, no leak"
else
  bad "driver errors: only $fired injections fired"
fi
# the message of a failed launch, shown once
CUCAP_MOCK_FAIL="cuLaunchKernel:1:CUDA_ERROR_ECC_UNCORRECTABLE" "$CUCAP" replay "${T}/drv_basic.fb" > /dev/null 2> "$T/e"
echo "   e.g.: $(grep '^cucap replay:' "$T/e")"

# ---- 2. input and environment errors ----------------------------------------
expect() { # NAME WANT_RC [replay args...]
  local name="$1" want="$2"; shift 2
  "$CUCAP" replay "$@" > "$T/o" 2> "$T/e"; local rc=$?
  if [ $rc -ne "$want" ]; then bad "$name: exit $rc, want $want"; tail -3 "$T/e"; return; fi
  if ! grep -q "^cucap replay:" "$T/e"; then bad "$name: no message"; return; fi
  if grep -q "leak check: [0-9]" "$T/e"; then bad "$name: $(grep 'leak check' "$T/e")"; return; fi
  ok "$name: exit $rc: $(grep '^cucap replay:' "$T/e" | head -1 | cut -c1-150)"
}
expect "missing file (I/O)" 4 "$T/nope.fb"
printf 'not a capture' > "$T/junk.fb"
expect "not a capture" 3 "$T/junk.fb"
head -c 3000 "$T/drv_basic.fb" > "$T/trunc.fb"
expect "truncated, no --allow-partial" 3 "$T/trunc.fb"
expect "no driver" 3 --libcuda "$T/nolib.so" "$T/drv_basic.fb"
# drv_graph calls cuLaunchHostFunc, which cannot be replayed
[ -f "$T/drv_graph.fb" ] && expect "--strict refusal" 3 --strict "$T/drv_graph.fb"
if [ -n "$BUILD" ] && [ -x "$BUILD/tests/test_replay" ]; then
  if "$BUILD/tests/test_replay" --flip-dtoh "$T/drv_basic.fb" "$T/flip.fb" 100 > /dev/null 2>&1; then
    expect "verification mismatch" 1 --verify "$T/flip.fb"
  fi
fi

# ---- 3. many passes in one process ----------------------------------------
# Each replayed cuCtxCreate once left a context on the thread's stack (the
# mock's holds 64): 80 loops of a capture that creates one must still work.
if [ -f "$T/drv_streams.fb" ]; then
  "$CUCAP" replay --loop 80 --verify "$T/drv_streams.fb" > "$T/o" 2> "$T/e"; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/o" && grep -q "leak check: clean" "$T/e"; then
    ok "--loop 80: every pass verified, driver clean"
  else
    bad "--loop 80: exit $rc"; tail -3 "$T/e"
  fi
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
