#!/usr/bin/env bash
# test_step_turns.sh - tests/apps/apps_common.py's StepTimer taking turns
# (BENCH_TURNS), which bench/gpu_bench.sh uses to time a native and a
# recorded copy of a training script step by step side by side (steps f
# and g):
#  1. two copies joined by two FIFOs, one "first" and one "second", each
#     noting every step's start and end: after the first step (turns start
#     at the first tick) no step of one overlaps a step of the other, both
#     time the same number of steps, and the per-step list
#     (train_turn_steps_ms) matches the median line's count.
#  2. the steps' times leave out the wait for the turn: a copy with 10 ms
#     steps beside one with 40 ms steps reports about 10 ms, not 50.
#  3. a copy whose peer never comes gives up after BENCH_TURNS_TIMEOUT,
#     says so on stderr, finishes alone and exits 0.
# Needs only python3.
set -u
SRC="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || { echo "SKIP: no $PY"; exit 77; }
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

cat >"$T/copy.py" <<EOF
import sys, time
sys.path.insert(0, "$SRC/tests/apps")
from apps_common import StepTimer
sleep, steps, log = float(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3], "w")
t = StepTimer(warm=2)
for i in range(steps):
    a = time.monotonic()
    time.sleep(sleep)
    t.enqueued()
    log.write("%d %.6f %.6f\n" % (i, a, time.monotonic()))
    t.tick()
log.close()
t.report("train")
EOF
mkfifo "$T/a" "$T/b"

# --- 1 and 2
BENCH_TURNS="$T/a:$T/b:first" "$PY" "$T/copy.py" 0.010 12 "$T/a.steps" 2>"$T/a.err" &
pa=$!
BENCH_TURNS="$T/b:$T/a:second" "$PY" "$T/copy.py" 0.040 12 "$T/b.steps" 2>"$T/b.err" &
pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
[ $ra -eq 0 ] && [ $rb -eq 0 ] && ok "both copies exit 0" || bad "exit codes $ra $rb: $(cat "$T/a.err" "$T/b.err")"
if "$PY" - "$T/a.steps" "$T/b.steps" <<'EOF'
import sys
iv = []
for f in sys.argv[1:]:
    # step 0 of both runs at once: turns start at the first tick
    iv += [(float(l.split()[1]), float(l.split()[2]), f) for l in open(f) if l.split()[0] != "0"]
iv.sort()
bad = [(x, y) for x, y in zip(iv, iv[1:]) if y[0] < x[1] and x[2] != y[2]]
sys.exit(1 if bad or len(iv) != 22 else 0)
EOF
then ok "no step of one copy overlaps a step of the other (steps 1-11 of each)"
else bad "steps overlap or are missing: $(cat "$T/a.steps" "$T/b.steps" | tr '\n' ' ')"; fi
for c in a b; do
  n=$(grep -o 'median of [0-9]* steps' "$T/$c.err" | grep -o '[0-9]*')
  k=$(grep '^train_turn_steps_ms:' "$T/$c.err" | tr ',' '\n' | wc -l)
  [ "$n" = 10 ] && [ "$k" = 10 ] && ok "copy $c times 10 steps, all listed" \
    || bad "copy $c: median of '$n' steps, $k listed: $(cat "$T/$c.err")"
done
ms=$(grep -o '^train_ms_per_step: [0-9.]*' "$T/a.err" | awk '{print $2}')
if awk -v m="${ms:-0}" 'BEGIN { exit !(m >= 9 && m < 30) }'; then
  ok "the wait for the turn is not timed: ${ms} ms per 10 ms step"
else
  bad "the 10 ms copy reports ${ms:-nothing} ms per step"
fi

# --- 3. no peer
mkfifo "$T/c" "$T/d"
BENCH_TURNS_TIMEOUT=1 BENCH_TURNS="$T/c:$T/d:first" timeout 60 "$PY" "$T/copy.py" 0.001 5 "$T/c.steps" 2>"$T/c.err"
rc=$?
if [ $rc -eq 0 ] && grep -q 'no turn back in 1 s: running alone' "$T/c.err" &&
   [ "$(wc -l <"$T/c.steps")" = 5 ]; then
  ok "a copy without a peer goes on alone after the timeout"
else
  bad "no peer: rc $rc, $(cat "$T/c.err")"
fi

echo "step_turns: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
