#!/usr/bin/env bash
# test_stats_cli.sh - `cucap stats` on the mock libcuda:
#  1. drv_basic recorded; stats in text, --csv and --json match the golden
#     files of tests/golden/stats/ once the host times are stripped
#     (strip_stats.py); every API row's times add up (min <= avg <= max,
#     the Time(%) column sums to 100);
#  2. --table selects tables; --no-demangle;
#  3. --profile (a `replay --profile --profile-out` file of drv_streams): the
#     kernel and copy tables get GPU times for every launch and copy; a
#     profile of another capture is refused (3);
#  4. usage errors (2), not a capture / truncated capture (3), missing file (4).
# CUCAP_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing.
# Env (CTest): CUCAP, MOCK_LIBDIR, APPS_DIR, PYTHON. Exit 0 pass, 77 skip.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}" "${CUCAP_SOURCE_DIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$APPS_DIR/drv_basic" ] || [ ! -x "$APPS_DIR/drv_streams" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or drv_basic/drv_streams ($APPS_DIR) missing"; exit 77
fi
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-stats.XXXXXX")"; trap 'rm -rf "$T"' EXIT
MOCK_CUPTI="$(dirname "$MOCK_LIBDIR")/mock_cupti/libcupti.so.13"
[ -e "$MOCK_CUPTI" ] && export CUCAP_CUPTI="$MOCK_CUPTI"
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
G="$CUCAP_SOURCE_DIR/tests/golden/stats"
STRIP="$G/strip_stats.py"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

"$CUCAP" record -o "$T/basic.fb" -- "$APPS_DIR/drv_basic" > /dev/null 2>&1 || { echo "FAIL: record drv_basic"; exit 1; }

# ---- 1. golden text, CSV, JSON
for fmt in text csv json; do
  opt=""; [ $fmt = text ] || opt="--$fmt"
  "$CUCAP" stats $opt "$T/basic.fb" > "$T/out.$fmt" 2> "$T/err.$fmt"; rc=$?
  if [ $rc != 0 ] || [ -s "$T/err.$fmt" ]; then bad "stats $fmt rc=$rc"; cat "$T/err.$fmt"; continue; fi
  "$PY" "$STRIP" $fmt < "$T/out.$fmt" > "$T/strip.$fmt" || { bad "strip $fmt"; continue; }
  if [ "${CUCAP_UPDATE_GOLDEN:-0}" = 1 ]; then cp "$T/strip.$fmt" "$G/drv_basic.$fmt"; ok "golden $fmt updated"
  elif diff -u "$G/drv_basic.$fmt" "$T/strip.$fmt"; then ok "stats $fmt matches the golden file"
  else bad "stats $fmt differs from $G/drv_basic.$fmt"; fi
done
if "$PY" - "$T/out.json" "$T/out.text" <<'PYEOF'; then ok "api times consistent, Time(%) sums to 100"; else bad "api times"; fi
import json, sys
d = json.load(open(sys.argv[1]))
assert d["api"] and d["kernels"] and d["copies"], d.keys()
tot = 0.0
for a in d["api"]:
    h = a["host"]
    if h["count"]:
        assert h["min_ns"] <= h["avg_ns"] <= h["max_ns"] and h["total_ns"] >= h["max_ns"], a
    tot += a["time_pct"]
assert abs(tot - 100) < 1e-6, tot
# the text table is aligned: every row of a table as wide as its header
blocks = open(sys.argv[2]).read().split("\n\n")
for title, body in zip(blocks[0::2], blocks[1::2]):
    rows = body.splitlines()
    ends = {len(r) - len(r.split()[-1]) for r in rows}   # where the last column starts
    assert len(ends) == 1, (title, rows[:3])
PYEOF

# ---- 2. --table, --no-demangle
"$CUCAP" stats --table=copies --csv "$T/basic.fb" > "$T/c.csv"; rc=$?
if [ $rc = 0 ] && [ "$(head -1 "$T/c.csv")" = "Count,Bytes,Size,Kind" ] && grep -q "^4,.*,DtoH$" "$T/c.csv" \
   && ! grep -q "Time(%)" "$T/c.csv"; then ok "--table=copies --csv"
else bad "--table=copies rc=$rc"; cat "$T/c.csv"; fi
"$CUCAP" stats --table kernels,api --json "$T/basic.fb" > "$T/ka.json" && "$PY" -c '
import json, sys; d = json.load(open(sys.argv[1])); assert "copies" not in d and d["kernels"] and d["api"]' "$T/ka.json" \
  && ok "--table kernels,api" || bad "--table kernels,api"
"$CUCAP" stats --no-demangle --table kernels "$T/basic.fb" > /dev/null && ok "--no-demangle" || bad "--no-demangle"

# ---- 3. --profile
"$CUCAP" record -o "$T/s.fb" -- "$APPS_DIR/drv_streams" > /dev/null 2>&1 || { echo "FAIL: record drv_streams"; exit 1; }
"$CUCAP" replay --profile --loop 3 --quiet --profile-out "$T/s.prof" "$T/s.fb" > /dev/null 2>&1
if [ -s "$T/s.prof" ]; then
  "$CUCAP" stats --profile "$T/s.prof" --json "$T/s.fb" > "$T/p.json"; rc=$?
  if [ $rc = 0 ] && "$PY" - "$T/p.json" <<'PYEOF'; then ok "--profile: GPU times of every launch and copy"; else bad "--profile rc=$rc"; cat "$T/p.json"; fi
import json, sys
d = json.load(open(sys.argv[1]))
assert d["profile"].endswith("s.prof")
ks = d["kernels"]
assert sum(k["launches"] for k in ks) == 5, ks
for k in ks:
    g = k["gpu"]
    assert g["count"] == k["launches"] and g["min_ns"] <= g["avg_ns"] <= g["max_ns"], k
assert abs(sum(k["time_pct"] for k in ks) - 100) < 1e-6 or sum(k["gpu"]["total_ns"] for k in ks) == 0
cs = d["copies"]
assert sum(c["count"] for c in cs) == 6 and all(c["gpu"]["count"] == c["count"] for c in cs), cs
PYEOF
  "$CUCAP" stats --profile "$T/s.prof" "$T/s.fb" > "$T/p.txt"; rc=$?
  if [ $rc = 0 ] && grep -Eq "^ *Time\(%\) +Total\(ns\) +Launches +Timed +Avg\(ns\) +Min\(ns\) +Max\(ns\) +Grid +Block +Name$" "$T/p.txt" \
     && grep -Eq "^ *Count +Bytes +Size +Timed +Total\(ns\) +Avg\(ns\) +Min\(ns\) +Max\(ns\) +Kind$" "$T/p.txt"; then
    ok "--profile text: GPU columns"
  else bad "--profile text rc=$rc"; cat "$T/p.txt"; fi
  "$CUCAP" stats --profile "$T/s.prof" "$T/basic.fb" > /dev/null 2> "$T/other.err"; rc=$?
  [ $rc = 3 ] && grep -q "another capture" "$T/other.err" && ok "profile of another capture: 3" || { bad "other capture rc=$rc"; cat "$T/other.err"; }
else
  bad "replay --profile-out wrote no profile"
fi

# ---- 4. errors
"$CUCAP" stats > /dev/null 2>&1; [ $? = 2 ] && ok "no CAPTURE: 2" || bad "no CAPTURE"
"$CUCAP" stats --csv --json "$T/basic.fb" > /dev/null 2>&1; [ $? = 2 ] && ok "--csv --json: 2" || bad "--csv --json"
"$CUCAP" stats --table=bogus "$T/basic.fb" > /dev/null 2>&1; [ $? = 2 ] && ok "--table=bogus: 2" || bad "--table=bogus"
"$CUCAP" stats "$T/missing.fb" > /dev/null 2>&1; [ $? = 4 ] && ok "missing file: 4" || bad "missing file"
echo "not a capture" > "$T/junk"; "$CUCAP" stats "$T/junk" > /dev/null 2>&1; [ $? = 3 ] && ok "not a capture: 3" || bad "junk"
"$CUCAP" stats --profile "$T/junk" "$T/basic.fb" > /dev/null 2>&1; [ $? = 3 ] && ok "not a profile: 3" || bad "junk profile"
sz=$(stat -c %s "$T/basic.fb"); head -c $((sz * 2 / 3)) "$T/basic.fb" > "$T/trunc.fb"
"$CUCAP" stats "$T/trunc.fb" > "$T/trunc.out" 2> "$T/trunc.err"; rc=$?
if [ $rc = 3 ] && grep -q "^driver API calls" "$T/trunc.out" && [ "$(wc -l < "$T/trunc.err")" = 1 ]; then ok "truncated: tables of what was recovered, one error line, 3"
else bad "truncated rc=$rc"; cat "$T/trunc.err"; fi

echo "passed $pass, failed $fail"
[ $fail = 0 ]
