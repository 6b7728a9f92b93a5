#!/usr/bin/env bash
# test_pc_sampler.sh - the sampling profiler that bench/gpu_bench.sh step l
# uses for issue 10's breakdown (bench/pc_sampler.c, bench/pc_report.py)
# keeps working without a GPU:
#  1. a Python loop timed by tests/apps/apps_common.py's StepTimer with
#     PCSAMP_WINDOW=1: exactly one sample file (child processes that never
#     reach their steady state write none), covering the timed steps only
#     (steps=18 for 20 steps after 2 warm-up ticks), with samples in it;
#     pc_report.py turns it into a table in ms per step. With
#     PCSAMP_THREADS=all a thread the program starts is sampled as well,
#     under the name it had when the timed steps ended.
#  2. bench_record_mock launches under `cucap record` on the mock libcuda:
#     the file is the program's (not the cucap launcher's), libcucap is in
#     it, and the report names libcucap functions.
# Skips (77) without the sampler, or in sanitizer builds (a sanitized
# preload library cannot go into an unsanitized python).
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}" "${CUCAP_BUILD_DIR:?}"
SRC="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY="${PYTHON:-python3}"
SAMP="$CUCAP_BUILD_DIR/bench/libpc_sampler.so"
if [ ! -f "$SAMP" ]; then echo "SKIP: no $SAMP"; exit 77; fi
if [ -n "${CUCAP_TEST_CFLAGS:-}" ]; then echo "SKIP: sanitizer build"; exit 77; fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

# --- 1. window around StepTimer's timed steps
cat >"$T/loop.py" <<EOF
import sys
sys.path.insert(0, "$SRC/tests/apps")
from apps_common import StepTimer
t = StepTimer(warm=2)
x = 0
for i in range(20):
    for k in range(60000):
        x += k
    t.enqueued()
    t.tick()
t.report("train")
EOF
PCSAMP_WINDOW=1 PCSAMP_HZ=2000 PCSAMP_OUT="$T/win" LD_PRELOAD="$SAMP" "$PY" "$T/loop.py" 2>"$T/loop.err"
n=$(ls "$T"/win.* 2>/dev/null | wc -l)
[ "$n" = 1 ] && ok "one sample file ($n)" || bad "expected one sample file, got $n"
f=$(ls "$T"/win.* 2>/dev/null | head -1)
if [ -n "$f" ] && head -1 "$f" | grep -q 'steps=18' && ! head -1 "$f" | grep -q 'samples=0 '; then
  ok "window covers the 18 timed steps: $(head -1 "$f")"
else
  bad "window header: $(head -1 "$f" 2>/dev/null)"
fi
grep -q '^train_cpu_ms_per_step:' "$T/loop.err" && grep -q '^train_enqueue_ms_per_step:' "$T/loop.err" \
  && ok "StepTimer reports CPU and enqueue times" || bad "StepTimer lines: $(cat "$T/loop.err")"
if [ -n "$f" ] && "$PY" "$SRC/bench/pc_report.py" --runs loop="$f" >"$T/rep1.txt" 2>&1 &&
   grep -q 'main thread [0-9.]* ms/step' "$T/rep1.txt"; then
  ok "report in ms per step: $(grep -o 'main thread [0-9.]* ms/step' "$T/rep1.txt")"
else
  bad "report: $(head -5 "$T/rep1.txt")"
fi

# --- 1b. PCSAMP_THREADS=all: a thread the program starts is sampled too,
# under the name it gave itself, noted at pcsamp_stop (it has exited by
# the time the file is written); the report groups digits as '#'
cat >"$T/thr.py" <<EOF
import ctypes, sys, threading
sys.path.insert(0, "$SRC/tests/apps")
from apps_common import StepTimer
done = threading.Event()
def work(n):
    x = 0
    for k in range(n):
        x += k
def worker():
    ctypes.CDLL(None).prctl(15, b"pc_worker_7", 0, 0, 0)  # PR_SET_NAME
    while not done.is_set():
        work(20000)
t = StepTimer(warm=2)
w = threading.Thread(target=worker)
w.start()
for i in range(12):
    work(40000)
    t.tick()
t.report("train")
done.set()
w.join()
EOF
PCSAMP_THREADS=all PCSAMP_WINDOW=1 PCSAMP_HZ=2000 PCSAMP_OUT="$T/thr" LD_PRELOAD="$SAMP" "$PY" "$T/thr.py" 2>/dev/null
f=$(ls "$T"/thr.* 2>/dev/null | head -1)
if [ -n "$f" ] && [ "$(grep -c '^T ' "$f")" -ge 2 ] &&
   "$PY" "$SRC/bench/pc_report.py" t="$f" >"$T/rep3.txt" 2>&1 && grep -q 'recorder inclusive, all threads' "$T/rep3.txt"; then
  ok "every thread sampled: $(grep -c '^T ' "$f") threads"
else
  bad "threads: $(grep '^T ' "$f" 2>/dev/null | tr '\n' ' ') $(head -3 "$T/rep3.txt" 2>/dev/null)"
fi
if [ -n "$f" ] && grep -q '^T [0-9]* pc_worker_7$' "$f" && grep -q '^  pc_worker_#  ' "$T/rep3.txt"; then
  ok "an exited thread keeps the name it had at pcsamp_stop (pc_worker_7, reported as pc_worker_#)"
else
  bad "thread names: $(grep '^T ' "$f" 2>/dev/null | tr '\n' ' ') / $(grep -A4 -- '-- threads' "$T/rep3.txt" | tr '\n' ' ')"
fi

# --- 2. a recorded program: libcucap's own functions in the table
BRM="$CUCAP_BUILD_DIR/bench/bench_record_mock"
if [ -x "$BRM" ] && [ -e "$MOCK_LIBDIR/libcuda.so.1" ]; then
  export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  PCSAMP_HZ=4000 PCSAMP_OUT="$T/rec" LD_PRELOAD="$SAMP" \
    "$CUCAP" record -o "$T/c.fb" -- "$BRM" 20000 launch >/dev/null 2>"$T/record.err"
  n=$(ls "$T"/rec.* 2>/dev/null | wc -l)
  [ "$n" = 1 ] && ok "one sample file for the recorded program, none for the launcher" \
    || bad "expected one file under record, got $n: $(head -qn1 "$T"/rec.* | tr "\n" " ")"
  f=$(ls "$T"/rec.* 2>/dev/null | head -1)
  if [ -n "$f" ] && grep -q '^M .*libcucap.so' "$f"; then ok "libcucap loaded in the sampled process"
  else bad "no libcucap module line"; fi
  if [ -n "$f" ] && "$PY" "$SRC/bench/pc_report.py" rec="$f" >"$T/rep2.txt" 2>&1 &&
     grep -q 'recorder inclusive' "$T/rep2.txt"; then
    ok "recorded report: $(grep -m1 'recorder inclusive' "$T/rep2.txt" | sed 's/^ *//')"
  else
    bad "recorded report: $(head -5 "$T/rep2.txt")"
  fi
else
  echo "note: no bench_record_mock, part 2 not run"
fi

echo "pc_sampler: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
