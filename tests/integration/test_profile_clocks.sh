#!/usr/bin/env bash
# test_profile_clocks.sh - --clock-control (profile/cupti/cupti_clock.c) on the mock
# libcuda with the stand-in libcupti and libnvperf_target
# (tests/mock/mock_nvperf.c, which logs every clock change and, at exit,
# which kernels ran locked):
#  1. base, the default: one lock of nvperf device 1 (the one at the mock
#     GPU's PCI address, not the CUDA ordinal), restored at the end; every
#     timeline kernel unlocked, every kernel of the measurement passes
#     locked; the JSON's env and the metrics note say so;
#  2. --clock-control=none: no clock change, nothing locked, the note says
#     the clocks were not controlled; a timeline-only profile locks nothing;
#  3. locking refused (MOCK_NVPERF_REFUSE): exit 0, a warning naming the
#     missing permission, every section still collected, env says why;
#  4. SIGTERM while locked (MOCK_NVPERF_SIGNAL=15, raised right after the
#     lock): the process dies of the signal and the clocks are restored
#     first; SIGINT too;
#  5. `cucap replay --profile`: locks by default, not with none, refuses a
#     bad value (exit 2);
#  6. `cucap cupti probe --reset-clocks` puts the default back on device 1.
# Skips (77) without the mock, the stand-ins or the apps.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
MOCK_CUPTI="${MOCK_CUPTI:-$(dirname "$MOCK_LIBDIR")/mock_cupti/libcupti.so.13}"
MOCK_NVPERF="$(dirname "$MOCK_CUPTI")/libnvperf_target.so"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ] || [ ! -e "$MOCK_CUPTI" ] ||
   [ ! -e "$MOCK_NVPERF" ]; then
  echo "SKIP: mock libcuda, stand-in libcupti/libnvperf_target or cucap missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_basic" ]; then
  echo "SKIP: driver-API test apps not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CUCAP_CUPTI CUCAP_CUPTI_LIB MOCK_NVPERF_REFUSE MOCK_NVPERF_SIGNAL
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

"$CUCAP" record -o "$T/b.fb" -- "$APPS_DIR/drv_basic" > /dev/null 2> "$T/rec.err" ||
  { echo "FAIL: record drv_basic"; cat "$T/rec.err"; exit 1; }

prof() { # prof NAME [args...]: the engine on drv_basic, its clock log in NAME.log
  local name="$1"; shift
  MOCK_NVPERF_LOG="$T/$name.log" "$CUCAP" cupti profile "$T/b.fb" --cupti "$MOCK_CUPTI" \
    --nvdisasm "" --json "$T/$name.json" "$@" > "$T/$name.out" 2> "$T/$name.err"
  echo $? > "$T/$name.rc"
  touch "$T/$name.log"
}
# js NAME EXPR...: every Python expression holds over the JSON (d)
js() {
  local name="$1"; shift
  "$PY" - "$T/$name.json" "$@" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
if "profile" in d and "env" not in d:
    d = d["profile"]
bad = [e for e in sys.argv[2:] if not eval(e)]
for e in bad:
    print("  does not hold: " + e)
sys.exit(1 if bad else 0)
PYEOF
}
changes() { grep -E '^(lock|default) ' "$T/$1.log" | tr '\n' ' ' | sed 's/ $//'; }
counts() { grep '^kernels ' "$T/$1.log"; }

# ---- 1. base, the default -----------------------------------------------------
prof base --metrics=sol --sass
c=$(counts base)
if [ "$(cat "$T/base.rc")" = 0 ] && [ "$(changes base)" = "lock 1 default 1" ] &&
   [[ "$c" =~ timeline\ locked=0\ unlocked=[1-9] ]] && [[ "$c" =~ measured\ locked=[1-9][0-9]*\ unlocked=0$ ]] &&
   js base 'd["env"]["clocks"].startswith("locked to base")' \
     'd["sections"]["metrics"]["note"].endswith("GPU clocks locked to base")' \
     'all(s["state"] in ("collected", "not requested") for s in d["sections"].values())'; then
  ok "base (default): device 1 locked after the timeline and restored; $c"
else
  bad "base: rc=$(cat "$T/base.rc") changes='$(changes base)' $c"; cat "$T/base.err"
fi

# ---- 2. none; a timeline-only profile ----------------------------------------
prof none --metrics=sol --clock-control=none
c=$(counts none)
if [ "$(cat "$T/none.rc")" = 0 ] && [ -z "$(changes none)" ] && [[ "$c" =~ measured\ locked=0\ unlocked=[1-9] ]] &&
   js none 'd["env"]["clocks"] == "not controlled (--clock-control=none)"' \
     '"not controlled (--clock-control=none)" in d["sections"]["metrics"]["note"]'; then
  ok "--clock-control=none: no clock change; $c"
else
  bad "none: rc=$(cat "$T/none.rc") changes='$(changes none)' $c"; cat "$T/none.err"
fi
prof tl --metrics=none --no-pc
if [ "$(cat "$T/tl.rc")" = 0 ] && [ -z "$(changes tl)" ] &&
   js tl '"no measurement pass" in d["env"]["clocks"]'; then
  ok "timeline only: nothing locked"
else
  bad "timeline only: changes='$(changes tl)'"; cat "$T/tl.err"
fi

# ---- 3. refused ----------------------------------------------------------------
MOCK_NVPERF_REFUSE=1 prof refused --metrics=sol
if [ "$(cat "$T/refused.rc")" = 0 ] && [ -z "$(changes refused)" ] &&
   grep -q "clock-control=base.*no profiling permission" "$T/refused.err" &&
   js refused 'd["env"]["clocks"].startswith("not locked: NVPW_Device_SetClockSetting failed")' \
     '"GPU clocks NOT locked" in d["sections"]["metrics"]["note"]' \
     'd["sections"]["metrics"]["state"] == "collected"'; then
  ok "locking refused: exit 0, warned, metrics still collected"
else
  bad "refused: rc=$(cat "$T/refused.rc")"; cat "$T/refused.err"
fi

# ---- 4. a signal while locked --------------------------------------------------
for sig in 15 2; do
  MOCK_NVPERF_SIGNAL=$sig prof sig$sig --metrics=sol
  rc=$(cat "$T/sig$sig.rc")
  if [ "$rc" = $((128 + sig)) ] && [ "$(changes sig$sig)" = "lock 1 default 1" ]; then
    ok "signal $sig while locked: died of it (rc $rc), clocks restored first"
  else
    bad "signal $sig: rc=$rc changes='$(changes sig$sig)'"; tail -3 "$T/sig$sig.err"
  fi
done

# ---- 5. replay --profile ---------------------------------------------------------
rprof() { # rprof NAME [args...]
  local name="$1"; shift
  MOCK_NVPERF_LOG="$T/$name.log" "$CUCAP" replay "$T/b.fb" --profile --cupti "$MOCK_CUPTI" \
    --json "$@" > "$T/$name.json" 2> "$T/$name.err"
  echo $? > "$T/$name.rc"
  touch "$T/$name.log"
}
rprof rbase
rprof rnone --clock-control=none
if [ "$(cat "$T/rbase.rc")" = 0 ] && [ "$(changes rbase)" = "lock 1 default 1" ] &&
   js rbase '"GPU clocks locked to base" in d["sections"]["metrics"]["message"]' &&
   [ "$(cat "$T/rnone.rc")" = 0 ] && [ -z "$(changes rnone)" ] &&
   js rnone '"not controlled" in d["sections"]["metrics"]["message"]'; then
  ok "replay --profile: locked by default, not with --clock-control=none"
else
  bad "replay --profile: rc=$(cat "$T/rbase.rc")/$(cat "$T/rnone.rc") changes='$(changes rbase)'/'$(changes rnone)'"
  tail -3 "$T/rbase.err"
fi
"$CUCAP" replay "$T/b.fb" --profile --clock-control=fast > /dev/null 2> "$T/bad.err"; rc=$?
if [ $rc -eq 2 ] && grep -q "clock-control=fast: expected base or none" "$T/bad.err"; then
  ok "--clock-control=fast: exit 2"
else
  bad "--clock-control=fast: rc=$rc"; cat "$T/bad.err"
fi

# ---- 6. probe --reset-clocks ----------------------------------------------------------
MOCK_NVPERF_LOG="$T/reset.log" "$CUCAP" cupti probe --reset-clocks --cupti "$MOCK_CUPTI" \
  > "$T/reset.out" 2> "$T/reset.err"; rc=$?
touch "$T/reset.log"
if [ $rc -eq 0 ] && [ "$(changes reset)" = "default 1" ] &&
   grep -q "^probe: clocks: restored to the default on nvperf device 1 (PCI 0000:18:00)" "$T/reset.out"; then
  ok "probe --reset-clocks: device 1 back to its default"
else
  bad "probe --reset-clocks: rc=$rc changes='$(changes reset)'"; cat "$T/reset.out" "$T/reset.err"
fi

echo "test_profile_clocks: $pass passed, $fail failed"
[ $fail -eq 0 ]
