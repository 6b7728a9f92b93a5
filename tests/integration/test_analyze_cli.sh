#!/usr/bin/env bash
# test_analyze_cli.sh - `cucap analyze` end to end.
#  1. the synthetic workloads of tests/testgen/workload.h (cucap-workgen:
#     train, oneshot, graph; exact host timing) give exactly the golden JSON
#     in tests/golden/analyze/<scenario>.json;
#     small real H100 captures (tests/captures) give their golden JSON
#     (callsite frames dropped);
#  2. the driver-API apps recorded on the mock give the golden counts
#     (tests/golden/analyze/<app>.json, time-dependent values stripped by
#     tests/golden/strip_analyze.py);
#  3. text output, --fail-on, --window/--warmup/--sites, bad options (2),
#     empty/missing/truncated captures (3/4/3 with the analysis of what was read).
# UPDATE_GOLDEN=1 rewrites the golden files. Exit 0 pass, 77 skip.
set -u
: "${CUCAP:?}" "${CUCAP_SOURCE_DIR:?}" "${CUCAP_BUILD_DIR:?}"
PY="${PYTHON:-python3}"
GEN="$CUCAP_BUILD_DIR/tests/testgen/cucap-workgen"
GOLD="$CUCAP_SOURCE_DIR/tests/golden/analyze"
STRIP="$CUCAP_SOURCE_DIR/tests/golden/strip_analyze.py"
[ -x "$GEN" ] || { echo "SKIP: cucap-workgen not built"; exit 77; }
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-analyze.XXXXXX")"; trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
golden() { # NAME FILE: compare FILE with the golden NAME.json (or write it)
  if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then cp "$2" "$GOLD/$1.json"; echo "updated $1.json"; return 0; fi
  if diff -u "$GOLD/$1.json" "$2" > "$T/$1.diff"; then ok "$1: golden"; else bad "$1: differs from golden"; head -40 "$T/$1.diff"; fi
}

# ---- 1. synthetic workloads: exact
for s in train oneshot graph; do
  "$GEN" "$T/$s.fb" "$s" || { bad "workgen $s"; continue; }
  "$CUCAP" analyze --json "$T/$s.fb" > "$T/$s.json" 2> "$T/$s.err"; rc=$?
  [ $rc = 0 ] || { bad "analyze $s: exit $rc"; cat "$T/$s.err"; continue; }
  "$PY" "$STRIP" --exact "$T/$s.json" > "$T/$s.norm.json" || { bad "$s: not JSON"; continue; }
  golden "$s" "$T/$s.norm.json"
done

# ---- 1b. small real H100 captures (tests/captures): fixed files
for f in "$CUCAP_SOURCE_DIR"/tests/captures/*.fb; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .fb)
  "$CUCAP" analyze --json "$f" > "$T/$name.json" 2> "$T/$name.err" || { bad "analyze $name"; cat "$T/$name.err"; continue; }
  "$PY" "$STRIP" --fixed "$T/$name.json" > "$T/$name.norm.json" && golden "$name" "$T/$name.norm.json"
done

# ---- 2. mock apps: counts
MOCK_LIBDIR="${MOCK_LIBDIR:-}"; APPS_DIR="${APPS_DIR:-}"
if [ -e "$MOCK_LIBDIR/libcuda.so.1" ] && [ -x "$APPS_DIR/drv_basic" ]; then
  for app in drv_basic drv_streams drv_graph drv_pitch; do
    [ -x "$APPS_DIR/$app" ] || continue
    LD_LIBRARY_PATH="$MOCK_LIBDIR" "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > /dev/null 2>&1 ||
      { bad "record $app"; continue; }
    "$CUCAP" analyze --json "$T/$app.fb" > "$T/$app.json" 2> "$T/$app.err" || { bad "analyze $app"; cat "$T/$app.err"; continue; }
    "$PY" "$STRIP" "$T/$app.json" > "$T/$app.norm.json" && golden "$app" "$T/$app.norm.json"
  done
else
  echo "note: mock apps not built; app goldens not checked"
fi

# ---- 3. CLI behaviour
out=$("$CUCAP" analyze "$T/train.fb"); rc=$?
if [ $rc = 0 ] && grep -q "^window: steady state" <<<"$out" && grep -q "\[high\] sync_calls" <<<"$out" \
   && grep -q "at (40 calls, 1.200 ms): trainer+0x" <<<"$out"; then ok "text report"; else bad "text report rc=$rc"; echo "$out" | head -20; fi
"$CUCAP" analyze --fail-on high "$T/train.fb" > /dev/null; rc=$?
[ $rc = 1 ] && ok "--fail-on high -> 1 (sync_calls is high)" || bad "--fail-on high: exit $rc"
"$CUCAP" analyze --fail-on high "$T/graph.fb" --warmup 99 > /dev/null; rc2=$?
# graph: with the window cut to its last launch no finding reaches high
[ $rc2 = 0 ] && ok "--fail-on high -> 0 when nothing is high" || bad "--fail-on high (graph, --warmup 99): exit $rc2"
"$CUCAP" analyze --min-severity medium "$T/train.fb" | grep -q "\[info\]" && bad "--min-severity shows info" || ok "--min-severity"
"$CUCAP" analyze --json --window all "$T/train.fb" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d["window"]["launches"]==330 and not d["window"]["steady_state"]' \
  && ok "--window all" || bad "--window all"
"$CUCAP" analyze --json --warmup 50 --sites 1 --no-symbols "$T/train.fb" | "$PY" -c '
import json,sys; d=json.load(sys.stdin)
assert d["window"]["launches"]==165, d["window"]
assert all(len(f["callsites"])<=1 for f in d["findings"])
assert all(fr.startswith("0x") for f in d["findings"] for s in f["callsites"] for fr in s.get("frames",[]))' \
  && ok "--warmup/--sites/--no-symbols" || bad "--warmup/--sites/--no-symbols"
for args in "--window x" "--warmup 100" "--link-gbps -1" "--fail-on huge" "--sites 0" "--bogus" ""; do
  "$CUCAP" analyze $args $( [ -n "$args" ] && echo "$T/train.fb" ) > /dev/null 2>&1; rc=$?
  [ $rc = 2 ] && ok "usage '$args' -> 2" || bad "usage '$args': exit $rc"
done
: > "$T/empty.fb"
"$CUCAP" analyze "$T/empty.fb" > /dev/null 2>&1; rc=$?
[ $rc = 3 ] && ok "empty file -> 3" || bad "empty file: exit $rc"
"$CUCAP" analyze "$T/missing.fb" > /dev/null 2>&1; rc=$?
[ $rc = 4 ] && ok "missing file -> 4" || bad "missing file: exit $rc"
size=$(stat -c %s "$T/train.fb")
head -c $((size * 2 / 3)) "$T/train.fb" > "$T/cut.fb"
"$CUCAP" analyze --json "$T/cut.fb" > "$T/cut.json" 2> "$T/cut.err"; rc=$?
if [ $rc = 3 ] && "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["capture"]["complete"] is False or d["capture"]["launches"]>=0' "$T/cut.json" \
   && grep -q "cucap analyze: " "$T/cut.err"; then ok "truncated -> analysed what was read, exit 3"
else bad "truncated: exit $rc"; cat "$T/cut.err"; fi

echo "test_analyze_cli: $pass passed, $fail failed"
[ $fail = 0 ]
