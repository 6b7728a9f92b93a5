#!/usr/bin/env bash
# tests/gpu/profile_smoke.sh - cucap doctor, analyze and replay --profile on
# the GPU machine (what CI cannot run: the real driver, CUDA events on a real
# GPU, real framework captures). Builds nothing.
#   tests/gpu/profile_smoke.sh [BUILD_DIR] [OUT_DIR]
# Checks, one line each, then a summary:
#  1. doctor: driver and gpu ok; exit 0 (CUPTI backend built) or 1 (stub);
#     the counters line agrees with /proc/driver/nvidia/params;
#  2. for drv_streams, rt_multistream and torch_mlp (recorded here with
#     CUCAP_OPTIONS=no_dtoh_payload so host timing is the program's):
#     analyze --json is valid and (torch_mlp) finds a steady state;
#     replay --profile --loop 5 --json exits 0, every launch has 5 timings,
#     no section is unavailable without a message; --folded is non-empty;
#     the profile file is written.
# Exit 0 only if every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-${CUCAP_BUILD:-$ROOT/build}}
OUT=${2:-${OUT:-$(mktemp -d)}}/profile
CUCAP=$BUILD/tools/cucap
APPS=$BUILD/tests/apps
PY=${PYTHON:-python3}
mkdir -p "$OUT"
pass=0; fail=0; skip=0
res() { # status name detail
  printf '%-5s %-38s %s\n' "$1" "$2" "$3" | tee -a "$OUT/summary.txt"
  case $1 in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; SKIP) skip=$((skip+1));; esac
}
[ -x "$CUCAP" ] || { echo "no cucap binary at $CUCAP"; exit 2; }

# ---- 1. doctor
"$CUCAP" doctor > "$OUT/doctor.txt" 2>&1; rc=$?
"$CUCAP" doctor --json > "$OUT/doctor.json" 2>&1
if { [ $rc = 0 ] || [ $rc = 1 ]; } && "$PY" - "$OUT/doctor.json" <<'PYEOF'; then
import json, sys, os
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["checks"]}
assert c["driver"]["state"] == "ok" and c["gpu"]["state"] == "ok", c
p = "/proc/driver/nvidia/params"
if os.path.exists(p):
    admin = "RmProfilingAdminOnly: 1" in open(p).read()
    assert (c["counters"]["state"] == "fail") == (admin and os.geteuid() != 0), c["counters"]
PYEOF
  res PASS "doctor" "exit $rc; $(grep '^result' "$OUT/doctor.txt")"
else res FAIL "doctor" "exit $rc, see $OUT/doctor.txt"; fi

# ---- 2. captures
profile_one() { # name cmd...
  local name=$1; shift
  local w=$OUT/$name; mkdir -p "$w"
  CUCAP_OPTIONS=no_dtoh_payload "$CUCAP" record -o "$w/cap.fb" -- "$@" > "$w/rec.out" 2> "$w/rec.err" ||
    { res FAIL "$name record" "exit $?"; return; }
  "$CUCAP" analyze "$w/cap.fb" > "$w/analyze.txt" 2>&1
  if "$CUCAP" analyze --json "$w/cap.fb" > "$w/analyze.json" 2> "$w/analyze.err" &&
     "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["window"]["steady_state"], " ".join("%s:%s" % (f["id"], f["severity"]) for f in d["findings"][:4]))' \
       "$w/analyze.json" > "$w/analyze.sum"; then
    res PASS "$name analyze" "$(cat "$w/analyze.sum")"
  else res FAIL "$name analyze" "see $w/analyze.err"; fi
  "$CUCAP" replay "$w/cap.fb" --profile --loop 5 --json --folded "$w/folded.txt" \
    --profile-out "$w/profile.cuprof" > "$w/profile.json" 2> "$w/profile.err"; local rc=$?
  if [ $rc = 0 ] && [ -s "$w/folded.txt" ] && [ -s "$w/profile.cuprof" ] && "$PY" - "$w/profile.json" > "$w/profile.sum" <<'PYEOF'; then
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
bad = [l for l in p["launches"] if len(l["timings"]) != 5 and l.get("launch_index") is not None]
assert not bad, "%d launches without 5 timings, e.g. %s" % (len(bad), bad[0]["kernel"])
for s, v in p["sections"].items():
    assert v["state"] == "ok" or v["message"], (s, v)
k = p["kernels"][0]
print("timeline %s (%s); %d kernels; top %s %.1f%% median %d ns spread %.1f%%" % (
    p["sections"]["timeline"]["state"], p["sections"]["timeline"]["source"], len(p["kernels"]),
    k["short_name"][:40], k["share_pct"], k["median_ns"], k["spread_pct"]))
PYEOF
    res PASS "$name replay --profile" "$(cat "$w/profile.sum")"
  else res FAIL "$name replay --profile" "exit $rc; $(tail -2 "$w/profile.err" | tr '\n' ' ')"; fi
  "$CUCAP" replay "$w/cap.fb" --profile --loop 5 > "$w/profile.txt" 2>&1
}
for a in drv_streams rt_multistream; do
  if [ -x "$APPS/$a" ]; then profile_one "$a" "$APPS/$a"; else res SKIP "$a" "not built"; fi
done
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  profile_one torch_mlp $PY "$ROOT/tests/apps/torch_mlp.py" --steps 20
  grep -q "^True" "$OUT/torch_mlp/analyze.sum" 2>/dev/null && res PASS "torch_mlp steady state" "found" ||
    res FAIL "torch_mlp steady state" "not found: $(head -1 "$OUT/torch_mlp/analyze.sum" 2>/dev/null)"
else
  res SKIP torch_mlp "no torch with CUDA"
fi
echo "== profile smoke: $pass passed, $fail failed, $skip skipped (details in $OUT)"
[ $fail = 0 ]
