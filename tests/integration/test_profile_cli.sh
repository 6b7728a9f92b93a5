#!/usr/bin/env bash
# test_profile_cli.sh - `cucap replay --profile` end to end on the mock
# libcuda (no CUPTI backend in this build, or no GPU for it):
#  1. drv_streams recorded, replayed with --profile --loop 3: exit 0; the
#     report has every section, each with a state and, when not collected,
#     the reason (never a silent empty section); the CUDA-event timeline
#     times every launch in every pass; the program findings are there;
#  2. --json: one object {"replay", "profile"}; 3 timings per launch;
#  3. --folded: "frames;kernel COUNT" lines; --profile-out: a profile file;
#  4. --metrics=none/list, --range, --cache; usage errors (2); a truncated
#     capture (3).
# Env (CTest): CUCAP, MOCK_LIBDIR, APPS_DIR, PYTHON. Exit 0 pass, 77 skip.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}" "${CUCAP_SOURCE_DIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$APPS_DIR/drv_streams" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or drv_streams ($APPS_DIR) missing"; exit 77
fi
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-profile.XXXXXX")"; trap 'rm -rf "$T"' EXIT
# The CUPTI backend would find the toolkit's libcupti, which cannot attach to
# the mock driver (and trips LeakSanitizer's thread tracer at exit in ASan
# builds): use the stand-in libcupti of the tests when it is built.
MOCK_CUPTI="$(dirname "$MOCK_LIBDIR")/mock_cupti/libcupti.so.13"
[ -e "$MOCK_CUPTI" ] && export CUCAP_CUPTI="$MOCK_CUPTI"
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

"$CUCAP" record -o "$T/s.fb" -- "$APPS_DIR/drv_streams" > /dev/null 2>&1 || { echo "FAIL: record"; exit 1; }

# ---- 1. text report
"$CUCAP" replay --profile --loop 3 "$T/s.fb" > "$T/r.out" 2> "$T/r.err"; rc=$?
if [ $rc = 0 ] && grep -q "^sections:" "$T/r.out" && grep -Eq "^  timeline +(ok|partial) " "$T/r.out" \
   && grep -Eq "^  metrics +(ok|partial|unavailable) " "$T/r.out" && grep -q "^top kernels" "$T/r.out" \
   && grep -q "^program findings" "$T/r.out" && grep -q "alloc_churn" "$T/r.out"; then
  ok "--profile report: sections, kernels, findings"
else bad "--profile report rc=$rc"; cat "$T/r.out" "$T/r.err" | head -40; fi
# a section that was not collected says why and what to do
if grep -Eq "^  metrics +unavailable +- +.+(not built|restricted|not found|cannot attach)" "$T/r.out" \
   || grep -Eq "^  metrics +ok " "$T/r.out"; then ok "metrics section states why"
else bad "metrics section"; grep metrics "$T/r.out"; fi
grep -Eq "^ +1 .* (scale|saxpy)$" "$T/r.out" && ok "kernel table rows" || { bad "kernel table"; grep -A4 "top kernels" "$T/r.out"; }

# ---- 2. JSON
"$CUCAP" replay --profile --loop 3 --json "$T/s.fb" > "$T/r.json" 2> /dev/null; rc=$?
if [ $rc = 0 ] && "$PY" - "$T/r.json" <<'PYEOF'; then ok "--json: 3 timings per launch, sections, findings"; else bad "--json rc=$rc"; fi
import json, sys
d = json.load(open(sys.argv[1]))
assert d["replay"]["loops"] >= 3, d["replay"]  # + the backend's counter passes
p = d["profile"]
assert len(p["launches"]) == 5, len(p["launches"])
for l in p["launches"]:
    assert len(l["timings"]) == 3, l
    assert l["median_ns"] >= 0 and l["kernel"] in ("scale", "saxpy"), l
for s in ("timeline", "metrics", "pc_sampling", "analysis"):
    st = p["sections"][s]
    assert st["state"] in ("ok", "partial", "unavailable", "not_requested"), st
    if st["state"] in ("partial", "unavailable"):
        assert st["message"], (s, st)
assert p["sections"]["analysis"]["state"] == "ok"
assert {f["id"] for f in p["findings"]} >= {"alloc_churn", "sync_calls"}
assert any(f["id"] == "launch_bound" for f in p["findings"])  # GPU durations known now
assert p["kernels"][0]["launches"] >= 2 and abs(sum(k["share_pct"] for k in p["kernels"]) - 100) < 1e-6
assert len(p["activities"]) == 3 * 6  # 6 copies per pass
PYEOF

# ---- 3. folded stacks and the profile file
"$CUCAP" replay --profile --quiet --folded "$T/s.folded" --profile-out "$T/s.prof" "$T/s.fb" > "$T/q.out" 2>&1; rc=$?
if [ $rc = 0 ] && [ -s "$T/s.folded" ] && ! grep -Evq '^.+;(scale|saxpy) [0-9]+$' "$T/s.folded" \
   && grep -q "main+0x" "$T/s.folded"; then ok "--folded: $(wc -l < "$T/s.folded") lines"
else bad "--folded rc=$rc"; cat "$T/s.folded" "$T/q.out"; fi
if [ -s "$T/s.prof" ] && [ "$(head -c 6 "$T/s.prof" | tail -c 5)" = "CUPRF" ]; then ok "--profile-out writes a profile file"
else bad "--profile-out"; fi

# the payload is a ProfileFile FlatBuffer that flatc itself reads (schema/cucap.fbs)
FLATC="${FLATC:-$(command -v flatc)}"
if [ -n "$FLATC" ] && [ -x "$FLATC" ] && command -v zstd > /dev/null && [ -s "$T/s.prof" ]; then
  tail -c +33 "$T/s.prof" | zstd -d -c > "$T/s.raw" 2>/dev/null
  (cd "$T" && "$FLATC" --json --strict-json --raw-binary --size-prefixed --root-type cucap.fb.ProfileFile \
     "$CUCAP_SOURCE_DIR/schema/cucap.fbs" -- s.raw) > /dev/null 2>&1
  if [ -s "$T/s.json" ] && "$PY" -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["format_major"]==1 and len(d["launches"])==5 and d["capture_launches"]==5, d.keys()' "$T/s.json"; then
    ok "flatc reads the profile file (ProfileFile)"
  else bad "flatc cannot read the profile file"; fi
else
  echo "note: flatc or zstd missing; profile file not checked with flatc"
fi

# ---- 4. options
"$CUCAP" replay --profile --metrics=none --json "$T/s.fb" 2>/dev/null | "$PY" -c '
import json,sys; p=json.load(sys.stdin)["profile"]
assert p["sections"]["metrics"]["state"]=="not_requested", p["sections"]' && ok "--metrics=none" || bad "--metrics=none"
"$CUCAP" replay --profile --metrics=sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum \
  --range kernel:^sca --cache=keep --json "$T/s.fb" 2>/dev/null | "$PY" -c '
import json,sys; r=json.load(sys.stdin)["profile"]["replay"]
assert r["cache"]=="keep" and r["range"]=="kernel:^sca" and "dram__bytes_read.sum" in r["metric_set"], r' \
  && ok "--metrics list, --range, --cache" || bad "--metrics list/--range/--cache"
for args in "--metrics=sol" "--range launch:1-2" "--folded x" "--profile --range launch:5-1" \
            "--profile --range nope" "--profile --cache=warm" "--profile --top 0" "--profile --metrics="; do
  "$CUCAP" replay $args "$T/s.fb" > /dev/null 2>&1; rc=$?
  [ $rc = 2 ] && ok "usage '$args' -> 2" || bad "usage '$args': exit $rc"
done
head -c 100 "$T/s.fb" > "$T/cut.fb"
"$CUCAP" replay --profile "$T/cut.fb" > /dev/null 2> "$T/cut.err"; rc=$?
[ $rc = 3 ] && ok "truncated capture -> 3" || { bad "truncated: exit $rc"; cat "$T/cut.err"; }

echo "test_profile_cli: $pass passed, $fail failed"
[ $fail = 0 ]
