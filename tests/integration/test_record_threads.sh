#!/usr/bin/env bash
# test_record_threads.sh - the recorder and the replayer with threads, run
# repeatedly: the multi-thread mock apps (drv_threads: 8 threads, each with
# its own stream; drv_streams) are recorded ROUNDS times (default 4) and each
# capture is replayed with --verify (the reader's read-ahead threads decode
# blobs meanwhile). Every run must match the native output, every capture
# must be complete and replay with all bytes matched, and no driver object
# may be left (mock leak check). In the ThreadSanitizer build (tests/run.sh
# stage 5) any data race makes the program, cucap or the replay exit with
# TSan's status, which fails this test. Then drv_threads again in the mock's
# asynchronous mode, ASYNC_ROUNDS times (CUCAP_TEST_ASYNC_ROUNDS, default
# 24): each thread's DtoH results are pending until a synchronisation, and
# one thread's sync point may read another thread's buffer, which that
# thread frees as soon as its own sync returns (the race behind CI's stop-18
# failure: a heap-use-after-free under ASan, about one run in 17 before the
# fix). Skips (77) without the mock, cucap or the apps.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
ROUNDS="${CUCAP_TEST_ROUNDS:-4}"
ASYNC_ROUNDS="${CUCAP_TEST_ASYNC_ROUNDS:-24}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_threads" ]; then
  echo "SKIP: driver-API test apps not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

for run in drv_threads:0 drv_streams:0 drv_threads:1; do
  app=${run%:*} mode=${run#*:} n=$ROUNDS
  [ "$mode" = 1 ] && n=$ASYNC_ROUNDS
  export CUCAP_MOCK_ASYNC=$mode
  [ -x "$APPS_DIR/$app" ] || continue
  "$APPS_DIR/$app" > "$T/native.out" 2> "$T/native.err" || { bad "$app: native run failed"; cat "$T/native.err"; continue; }
  good=0
  for r in $(seq 1 "$n"); do
    f="$T/$app.$r.fb"
    "$CUCAP" record --force -o "$f" -- "$APPS_DIR/$app" > "$T/rec.out" 2> "$T/rec.err"; rc=$?
    if [ $rc -ne 0 ] || ! cmp -s "$T/native.out" "$T/rec.out"; then
      bad "$app (async=$mode) round $r: recorded run exit $rc or output differs"; tail -30 "$T/rec.err"; continue
    fi
    if ! "$CUCAP" info --json "$f" 2> "$T/info.err" | grep -q '"complete":true'; then
      bad "$app (async=$mode) round $r: capture incomplete"; cat "$T/info.err"; continue
    fi
    CUCAP_MOCK_LEAK_CHECK=1 "$CUCAP" replay --verify "$f" > "$T/rep.out" 2> "$T/rep.err"; rc=$?
    if [ $rc -ne 0 ] || ! grep -q "all bytes matched" "$T/rep.out" || ! grep -q "leak check: clean" "$T/rep.err"; then
      bad "$app (async=$mode) round $r: replay --verify exit $rc"; tail -30 "$T/rep.out" "$T/rep.err"; continue
    fi
    good=$((good+1))
  done
  [ $good -eq "$n" ] && ok "$app (async=$mode): $n recordings identical to the native run, complete, replayed with every byte verified, no leak"
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
