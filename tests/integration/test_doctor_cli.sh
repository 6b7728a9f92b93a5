#!/usr/bin/env bash
# test_doctor_cli.sh - `cucap doctor`: without a driver it fails cleanly with
# exit 3 and says what to do; against the mock libcuda (--libcuda) replay is
# possible and --profile is judged (exit 0 or 1, with every failing check
# naming its fix); --json is one object; the CUCAP_* variables set are
# listed (an unknown name flagged) in both; bad options exit 2.
# Env (CTest): CUCAP, MOCK_LIBDIR, PYTHON. Exit 0 pass, 77 skip.
set -u
T="$(mktemp -u "${TMPDIR:-/tmp}/cucap-doctor.XXXXXX")"
: "${CUCAP:?}"
PY="${PYTHON:-python3}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

out=$("$CUCAP" doctor --libcuda /nonexistent/libcuda.so.1 2>&1); rc=$?
if [ $rc = 3 ] && grep -q "^\[FAIL\] driver" <<<"$out" && grep -q "fix: no NVIDIA driver" <<<"$out" \
   && grep -q "^result: replay cannot run here" <<<"$out"; then ok "no driver -> 3 with a fix"
else bad "no driver: exit $rc"; echo "$out"; fi

# the CUCAP_* variables set: a knob with its doc, a typo flagged unknown
out=$(CUCAP_LOG_LEVEL=warn CUCAP_REPLAY_SERIALZE=1 "$CUCAP" doctor --libcuda /nonexistent/libcuda.so.1 2>&1)
if grep -q "^\[env\]  CUCAP_LOG_LEVEL=warn$" <<<"$out" && grep -q "^\[env?\] CUCAP_REPLAY_SERIALZE=1$" <<<"$out" \
   && grep -q "unknown: cucap reads no such variable" <<<"$out" && tail -n 1 <<<"$out" | grep -q "^result: "; then
  ok "knobs listed in the text"
else bad "knobs in the text"; echo "$out"; fi
CUCAP_LOG_LEVEL=warn CUCAP_REPLAY_SERIALZE=1 "$CUCAP" doctor --libcuda /nonexistent/libcuda.so.1 --json > "$T.knobs.json" 2>&1
if "$PY" - "$T.knobs.json" <<'PYEOF'; then ok "knobs listed in the JSON"; else bad "knobs in the JSON"; cat "$T.knobs.json"; fi
import json, sys
d = json.load(open(sys.argv[1]))
e = {x["name"]: x for x in d["environment"]}
assert e["CUCAP_LOG_LEVEL"]["known"] and e["CUCAP_LOG_LEVEL"]["value"] == "warn" and "log level" in e["CUCAP_LOG_LEVEL"]["doc"]
assert not e["CUCAP_REPLAY_SERIALZE"]["known"] and e["CUCAP_REPLAY_SERIALZE"]["doc"] is None
PYEOF
rm -f "$T.knobs.json"

if [ -e "${MOCK_LIBDIR:-}/libcuda.so.1" ]; then
  "$CUCAP" doctor --libcuda "$MOCK_LIBDIR/libcuda.so.1" --cupti /nonexistent/libcupti.so.13 --json > "$T.json" 2>&1; rc=$?
  if [ $rc = 1 ] && "$PY" - "$T.json" <<'PYEOF'; then ok "mock: replay ok, --profile lacks cupti -> 1"; else bad "mock --json: exit $rc"; cat "$T.json"; fi
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["checks"]}
assert d["can_replay"] and not d["can_profile"] and d["exit_code"] == 1
assert c["driver"]["state"] == "ok" and c["gpu"]["state"] == "ok" and "mock" in c["gpu"]["value"]
assert c["cupti"]["state"] == "fail" and "--cupti" in c["cupti"]["fix"]
for x in d["checks"]:
    if x["state"] == "fail":
        assert x["fix"], x
PYEOF
  rm -f "$T.json"
  "$CUCAP" doctor --libcuda "$MOCK_LIBDIR/libcuda.so.1" > /dev/null 2>&1; rc=$?
  [ $rc = 0 ] || [ $rc = 1 ] && ok "mock text: exit $rc" || bad "mock text: exit $rc"
else
  echo "note: mock libcuda not built; mock checks skipped"
fi
for args in "--bogus" "extra" "--device x"; do
  "$CUCAP" doctor $args > /dev/null 2>&1; rc=$?
  [ $rc = 2 ] && ok "usage '$args' -> 2" || bad "usage '$args': exit $rc"
done
echo "test_doctor_cli: $pass passed, $fail failed"
[ $fail = 0 ]
