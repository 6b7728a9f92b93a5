#!/usr/bin/env bash
# test_profile_cupti.sh - the CUPTI engine of `replay --profile` end to end on
# the mock libcuda with the stand-in libcupti (tests/mock/mock_cupti.c):
#  1. no CUPTI, and a CUPTI that cannot attach (MOCK_CUPTI_ATTACH_FAIL; and
#     the toolkit's real libcupti when it is installed, which cannot attach
#     to the mock driver): exit 3 with the documented message, nothing else;
#  1b. libnvperf is preloaded after cuptiSubscribe, only when metrics or
#     SASS metrics need it (in line for the probe);
#  2. drv_basic, drv_streams, drv_graph (stream capture + graph launches),
#     drv_graph_explicit: every section collected; one timeline kernel per
#     kernel Launch record (host functions excluded), graph kernels numbered
#     within their launch; metrics for every kernel execution; PC samples
#     with source lines; SASS text and inline chains from nvdisasm (a fake
#     one here); host frames in the folded stacks;
#  3. --loop 3: three durations per kernel; --range 1:1: one launch only,
#     and a range ends each pass after its last launch (fewer ops executed);
#     --max-ranges 1: one window per kernel, still all attributed; counter
#     passes follow CUPTI's count (MOCK_CUPTI_PASSES=3 -> 3 metrics passes,
#     plus the 3 duration passes of each window);
#  3c. gpu__time_duration.sum from a pass of its own: with ranges made longer
#     by other counters (MOCK_CUPTI_COUNTER_OVERHEAD_NS) the reported
#     durations are the median of the duration passes (3; 1 with
#     CUCAP_PROFILE_DURATION_PASSES=1); CUCAP_PROFILE_DURATION_PASSES=0
#     reports the main passes' (longer) values and makes no extra pass;
#     the duration passes hold sm__cycles_elapsed.max too (the duration
#     alone, which gives shorter ranges, with CUCAP_PROFILE_DURATION_WITH=none
#     or when the chip refuses it);
#  3b. counter passes leave out copies to the host, the timeline keeps them;
#  4. counters refused (MOCK_CUPTI_NO_COUNTERS): exit 0, timeline collected,
#     metrics "unavailable" naming NVreg_RestrictProfilingToAdminUsers;
#  5. one range too many (MOCK_CUPTI_EXTRA_RANGE): metrics "failed", the
#     note says the ranges cannot be attributed, no value is kept;
#  6. L2 flush memsets that form ranges (MOCK_CUPTI_MEMSET_RANGES) with
#     --cache=flush: the flush ranges are skipped, metrics collected; the
#     duration passes flush from a context of their own (drv_basic's
#     context is one it created), none does with CUCAP_PROFILE_FLUSH_CTX=own;
#     in a primary-context program (drv_threads) from a context of their
#     own too, from a green context of the primary one with
#     CUCAP_PROFILE_FLUSH_CTX=green, and from a context of their own when
#     the driver then refuses green contexts (MOCK_CUDA_NO_GREEN);
#  7. an unknown raw metric name: exit 3 naming it; bad options: exit 2;
#  7b. CUPTI failures seen on the H100: PC sampling fails with
#     CUPTI_ERROR_UNKNOWN and CUPTI detaches itself (MOCK_CUPTI_PCS_DETACH:
#     any later call into it aborts, as the real one crashed): no crash, no
#     CUPTI call after, sections say what happened; auto range failing on
#     graph launches (MOCK_CUPTI_GRAPH_AUTO_FAIL): plain launches keep their
#     metrics, graph launches measured as a whole; counters held by another
#     process (MOCK_CUPTI_HW_BUSY): the message names the other profiler;
#  8. `cucap replay --profile` through the backend (profile/cupti/profile_cupti.c):
#     every section filled; CUPTI that cannot attach or is absent: the
#     CUDA-event timeline and sections saying why; counters refused; a
#     launch range restricts metrics, not the timeline.
#  9. a profile leaves module unloads, page-locked frees and the primary
#     context to the process exit (the mock's leak check names only those);
#     a plain replay still releases everything.
# Skips (77) without the mock, the stand-in libcupti or the apps.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
SRC="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
MOCK_CUPTI="${MOCK_CUPTI:-$(dirname "$MOCK_LIBDIR")/mock_cupti/libcupti.so.13}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ] || [ ! -e "$MOCK_CUPTI" ]; then
  echo "SKIP: mock libcuda, stand-in libcupti ($MOCK_CUPTI) or cucap missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_basic" ]; then
  echo "SKIP: driver-API test apps not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CUCAP_CUPTI CUCAP_CUPTI_LIB MOCK_CUPTI_ATTACH_FAIL MOCK_CUPTI_NO_COUNTERS MOCK_CUPTI_PASSES \
      MOCK_CUPTI_EXTRA_RANGE MOCK_CUPTI_MEMSET_RANGES MOCK_CUPTI_NO_PCS MOCK_CUPTI_PCS_DETACH \
      MOCK_CUPTI_GRAPH_AUTO_FAIL MOCK_CUPTI_HW_BUSY MOCK_CUDA_NO_GREEN CUCAP_PROFILE_FLUSH_CTX
NVD="$SRC/tests/integration/fake_nvdisasm.sh"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

prof() { # prof NAME CAPTURE [args...]: runs the engine, keeps rc/out/err
  local name="$1" cap="$2"; shift 2
  "$CUCAP" cupti profile "$cap" --cupti "$MOCK_CUPTI" --nvdisasm "$NVD" \
    --json "$T/$name.json" --folded "$T/$name.folded" "$@" > "$T/$name.out" 2> "$T/$name.err"
  echo $? > "$T/$name.rc"
}

# holds KIND NAME PYTHON-EXPR...: every expression must hold over $T/NAME.json.
# KIND engine (`cucap cupti profile --json`): d is the JSON, sec the section
# states, K the kernels; KIND replay (`cucap replay --profile --json`): d is
# its "profile", sec/src/msg the sections' states/sources/messages, L the
# launches.
holds() {
  local kind="$1" name="$2"; shift 2
  "$PY" - "$kind" "$T/$name.json" "$@" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[2]))
if sys.argv[1] == "replay":
    d = d["profile"]
sec = {k: v["state"] for k, v in d["sections"].items()}
if sys.argv[1] == "replay":
    src = {k: v["source"] for k, v in d["sections"].items()}
    msg = {k: v["message"] for k, v in d["sections"].items()}
    L = d["launches"]
else:
    K = d["kernels"]
bad = [e for e in sys.argv[3:] if not eval(e)]
for e in bad:
    print("  does not hold: " + e)
    print("  sections: " + json.dumps(d["sections"]))
sys.exit(1 if bad else 0)
PYEOF
}
check() { holds engine "$@"; } # check NAME PYTHON-EXPR... (the engine's JSON)

for app in drv_basic drv_streams drv_graph drv_graph_explicit drv_capture drv_threads; do
  [ -x "$APPS_DIR/$app" ] || continue
  "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > /dev/null 2> "$T/$app.rec.err" ||
    bad "record $app"
done

# ---- 1. no CUPTI / CUPTI that cannot attach -------------------------------
"$CUCAP" cupti profile "$T/drv_basic.fb" --cupti /nonexistent/libcupti.so.13 \
  > "$T/none.out" 2> "$T/none.err"; rc=$?
if [ $rc -eq 3 ] && grep -q "cannot load CUPTI" "$T/none.err" && grep -q "CUCAP_CUPTI=" "$T/none.err"; then
  ok "no CUPTI: exit 3, 'cannot load CUPTI ... CUCAP_CUPTI='"
else
  bad "no CUPTI: rc=$rc"; cat "$T/none.err"
fi
MOCK_CUPTI_ATTACH_FAIL=1 "$CUCAP" cupti profile "$T/drv_basic.fb" --cupti "$MOCK_CUPTI" \
  > "$T/att.out" 2> "$T/att.err"; rc=$?
if [ $rc -eq 3 ] && grep -q "CUPTI cannot attach to the CUDA driver" "$T/att.err" \
   && grep -q "CUPTI_ERROR_NOT_INITIALIZED" "$T/att.err"; then
  ok "CUPTI cannot attach: exit 3 with the CUPTI error"
else
  bad "attach failure: rc=$rc"; cat "$T/att.err"
fi
REAL=""
for c in "${CUDA_HOME:-/usr/local/cuda}/lib64/libcupti.so.13" /usr/local/cuda/lib64/libcupti.so.13; do
  [ -e "$c" ] && { REAL="$c"; break; }
done
if [ -n "$REAL" ]; then
  "$CUCAP" cupti profile "$T/drv_basic.fb" --cupti "$REAL" > "$T/real.out" 2> "$T/real.err"; rc=$?
  if [ $rc -eq 3 ] && grep -q "CUPTI cannot attach" "$T/real.err"; then
    ok "real libcupti on the mock driver: exit 3, cannot attach"
  else
    bad "real libcupti on the mock: rc=$rc"; cat "$T/real.err"
  fi
else
  echo "note: no toolkit libcupti here; real-CUPTI attach failure not checked"
fi
"$CUCAP" cupti probe --cupti /nonexistent/libcupti.so.13 > "$T/probe.out" 2>&1; rc=$?
if [ $rc -eq 3 ] && grep -q "^probe: cupti: FAILED: cannot load CUPTI" "$T/probe.out"; then
  ok "probe without CUPTI: exit 3, one FAILED line"
else
  bad "probe without CUPTI: rc=$rc"; cat "$T/probe.out"
fi
"$CUCAP" cupti probe --cupti "$MOCK_CUPTI" > "$T/probe2.out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "^probe: counters: allowed" "$T/probe2.out" \
   && grep -q "^probe: metrics sol: .* counter pass" "$T/probe2.out" \
   && grep -q "^probe: pc sampling: enabled, 3 stall reasons" "$T/probe2.out" \
   && grep -q "^probe: result: CUPTI attached" "$T/probe2.out"; then
  ok "probe with the stand-in CUPTI: counters, pass counts, stall reasons"
else
  bad "probe: rc=$rc"; cat "$T/probe2.out"
fi

# ---- 1b. the libnvperf preload ---------------------------------------------
# after cuptiSubscribe (started before, it held the loader's lock that
# subscribe waited for: cupti_load.c), and only when metrics or SASS metrics
# need the Profiler Host API; the probe, which starts none, still gets it
CUCAP_LOG_LEVEL=debug "$CUCAP" cupti profile "$T/drv_basic.fb" --cupti "$MOCK_CUPTI" \
  --metrics=sol --no-pc --json "$T/pre.json" > "$T/pre.out" 2> "$T/pre.err"; rc=$?
sub=$(grep -n "profile: setup: subscribed" "$T/pre.err" | head -1 | cut -d: -f1)
nvp=$(grep -n "cupti: libnvperf_host.so" "$T/pre.err" | head -1 | cut -d: -f1)
if [ $rc -eq 0 ] && [ -n "$sub" ] && [ -n "$nvp" ] && [ "$nvp" -gt "$sub" ]; then
  ok "metrics: libnvperf preloaded once CUPTI has subscribed (log lines $sub < $nvp)"
else
  bad "metrics: preload after subscribe: rc=$rc subscribed at '$sub', nvperf at '$nvp'"; cat "$T/pre.err"
fi
CUCAP_LOG_LEVEL=debug "$CUCAP" cupti profile "$T/drv_basic.fb" --cupti "$MOCK_CUPTI" \
  --metrics=none --no-pc --json "$T/pre0.json" > "$T/pre0.out" 2> "$T/pre0.err"; rc=$?
if [ $rc -eq 0 ] && ! grep -q "cupti: libnvperf" "$T/pre0.err"; then
  ok "timeline only: libnvperf not loaded"
else
  bad "timeline only: rc=$rc, libnvperf loaded: $(grep 'cupti: libnvperf' "$T/pre0.err" | head -1)"
fi
if CUCAP_LOG_LEVEL=debug "$CUCAP" cupti probe --cupti "$MOCK_CUPTI" 2>&1 | grep -q "cupti: libnvperf_host.so"; then
  ok "probe: libnvperf preloaded in line"
else
  bad "probe: no libnvperf preload"
fi

# ---- 2. every section, joined to the capture ------------------------------
for app in drv_basic drv_streams drv_graph drv_graph_explicit; do
  [ -e "$T/$app.fb" ] || continue
  nk=$("$CUCAP" dump "$T/$app.fb" --json --body Launch | "$PY" -c '
import json, sys
n = 0
for l in sys.stdin:
    r = json.loads(l)
    if r.get("body_type") == "Launch" and r.get("result", 0) == 0 and \
       r["body"].get("kind", "Kernel") != "HostFunc":
        n += 1
print(n)')
  prof "$app" "$T/$app.fb" --cache=keep --sass
  rc=$(cat "$T/$app.rc")
  graph=0; case $app in drv_graph*) graph=1 ;; esac
  if [ "$rc" = 0 ] && check "$app" \
      "all(s == 'collected' for n, s in sec.items() if n != 'metrics')" \
      "sec['metrics'] == ('partial' if $graph else 'collected')" \
      "len(K) > 0" \
      "$graph or len(K) == $nk" \
      "$graph or all(k['launch_index'] is not None and k['sub'] == 0 for k in K)" \
      "not $graph or any(k['launch_index'] is None and k['sub'] > 0 for k in K)" \
      "all(k['ntimes'] == 1 and k['dur_median_ns'] > 0 for k in K)" \
      "all(k.get('metrics') and all(v is not None for v in k['metrics']) for k in K if k['launch_index'] is not None)" \
      "not $graph or (d.get('graph_launches') and all(g['metrics'] and all(v is not None for v in g['metrics']) for g in d['graph_launches']))" \
      "len(d['metric_names']) >= 5 and 'gpu__time_duration.sum' in d['metric_names']" \
      "len(d['pc_samples']) > 0 and all(r[0] < len(K) for r in d['pc_samples'])" \
      "all(s['file'] and s['line'] > 0 for s in d['pc_sites'])" \
      "all(s['sass'] for s in d['pc_sites'])" \
      "any(s['inline'] for s in d['pc_sites'])" \
      "all('inst_executed' in s for s in d['pc_sites'])" \
      "len(d['copies']) > 0" \
      "len(d['kernel_summaries']) > 0 and d['kernel_summaries'][0]['top_stalls'] and d['kernel_summaries'][0]['hot_lines']"
  then
    ok "$app: timeline ($nk launches), metrics (graph launches as a whole), PC samples with lines and SASS, SASS metrics"
  else
    bad "$app: rc=$rc"; tail -5 "$T/$app.err"
  fi
  lines=$(wc -l < "$T/$app.folded")
  if [ "$lines" -gt 0 ] && ! grep -qv '^.*;.*;0x[0-9a-f]* .* [0-9][0-9]*$' "$T/$app.folded" \
     && grep -q "main" "$T/$app.folded" && grep -q "inner.cuh:7" "$T/$app.folded"; then
    ok "$app: $lines folded stacks host;...;kernel;line;pc sass count"
  else
    bad "$app: folded stacks"; head -3 "$T/$app.folded"
  fi
done

# counter passes leave out copies to the host (nothing on the device reads
# them); the timeline pass keeps them, so copies are still in the timeline
CUCAP_LOG_LEVEL=info prof dtoh "$T/drv_basic.fb" --cache=keep --no-pc
if [ "$(cat "$T/dtoh.rc")" = 0 ] && grep -q "copies to the host left out in passes" "$T/dtoh.err" \
   && check dtoh "len(d['copies']) > 0" "sec['metrics'] == 'collected'"; then
  ok "counter passes leave out copies to the host, the timeline keeps them"
else
  bad "copies to the host in counter passes: rc=$(cat "$T/dtoh.rc")"; tail -3 "$T/dtoh.err"
fi

# nvdisasm: -fun with symbol indices (names make the real one exit 1), one
# run per sampled cubin, never the whole cubin; not run without PC samples.
# It runs beside the counter passes, on the kernels the timeline pass saw
# (cupti_disasm_early.c); CUCAP_PROFILE_EARLY_DISASM=0 runs it after the PC
# pass on the sampled functions only: the same instructions get the same text.
for v in 1 0; do
  rm -f "$T/nvd.log"
  CUCAP_LOG_LEVEL=debug CUCAP_PROFILE_EARLY_DISASM=$v FAKE_NVDISASM_LOG="$T/nvd.log" \
    prof nvd$v "$T/drv_streams.fb" --cache=keep
  nruns=$(wc -l < "$T/nvd.log" 2>/dev/null || echo 0)
  ncub=$("$PY" -c 'import json,sys; print(len({s["crc"] for s in json.load(open(sys.argv[1]))["pc_sites"]}))' "$T/nvd$v.json")
  early=0; grep -q "nvdisasm beside the passes: $nruns run" "$T/nvd$v.err" && early=1
  if [ "$(cat "$T/nvd$v.rc")" = 0 ] && [ "$nruns" -ge 1 ] && [ "$nruns" = "$ncub" ] \
     && [ "$early" = "$v" ] \
     && ! grep -qv -- '^-c -gi -fun [0-9][0-9,]* /' "$T/nvd.log" \
     && check nvd$v "all(s['sass'] for s in d['pc_sites'])" \
        "d['timing']['nvdisasm_runs'] == $nruns and d['timing']['resolve_s'] >= 0"; then
    ok "nvdisasm (early=$v): $nruns run(s) for $ncub sampled cubin(s), -fun with symbol indices"
  else
    bad "nvdisasm invocations (early=$v, $nruns runs, $ncub cubins, early listing used: $early):"
    cat "$T/nvd.log"; grep "nvdisasm" "$T/nvd$v.err" | head -5
  fi
done
if "$PY" - "$T/nvd1.json" "$T/nvd0.json" <<'PYEOF'; then
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda d: sorted((s["crc"], s["function"], s["pc"], s["sass"], s.get("inline"), s.get("line"))
                       for s in d["pc_sites"])
sys.exit(0 if key(a) == key(b) and key(a) else 1)
PYEOF
  ok "nvdisasm beside the passes gives the sampled instructions the same text as after them"
else
  bad "SASS text differs between nvdisasm beside the passes and after them"
fi
rm -f "$T/nvd.log"
FAKE_NVDISASM_LOG="$T/nvd.log" prof nvdnone "$T/drv_streams.fb" --cache=keep --no-pc
if [ "$(cat "$T/nvdnone.rc")" = 0 ] && [ ! -s "$T/nvd.log" ]; then
  ok "nvdisasm not run when no instruction was sampled (--no-pc)"
else
  bad "nvdisasm ran without PC sampling"; cat "$T/nvd.log"
fi

# ---- 3. passes, ranges, windows -------------------------------------------
prof loop "$T/drv_streams.fb" --cache=keep --no-pc --loop 3 --metrics=none
if [ "$(cat "$T/loop.rc")" = 0 ] && check loop \
    "all(k['ntimes'] == 3 for k in K)" \
    "all(k['dur_min_ns'] <= k['dur_median_ns'] <= k['dur_max_ns'] for k in K)" \
    "d['sections']['timeline']['passes'] == 3" \
    "sec['metrics'] == 'not requested' and sec['pc-sampling'] == 'not requested'"; then
  ok "--loop 3: three timeline passes, median within min..max"
else
  bad "--loop 3"
fi
prof range "$T/drv_streams.fb" --cache=keep --range 1:1
if [ "$(cat "$T/range.rc")" = 0 ] && check range \
    "len(K) == 1 and K[0]['launch_index'] == 1" \
    "all(k.get('metrics') for k in K)" \
    "all(r[0] == 0 for r in d['pc_samples'])"; then
  ok "--range 1:1: exactly launch 1 profiled"
else
  bad "--range 1:1"
fi
# a launch range ends every pass after its last launch
prof early "$T/drv_streams.fb" --cache=keep --no-pc --metrics=none --range 0:1
prof whole "$T/drv_streams.fb" --cache=keep --no-pc --metrics=none
e=$(sed -n 's/^replay: .* loop(s): \([0-9]*\) ops executed.*/\1/p' "$T/early.out")
w=$(sed -n 's/^replay: .* loop(s): \([0-9]*\) ops executed.*/\1/p' "$T/whole.out")
if [ -n "$e" ] && [ -n "$w" ] && [ "$e" -lt "$w" ]; then
  ok "--range 0:1: the pass ends after the launch ($e ops executed, $w for the whole capture)"
else
  bad "--range 0:1 did not end the pass early ($e vs $w)"
fi
MOCK_CUPTI_PASSES=3 prof windows "$T/drv_streams.fb" --cache=keep --no-pc --max-ranges 1
if [ "$(cat "$T/windows.rc")" = 0 ] && check windows \
    "sec['metrics'] == 'collected'" \
    "d['sections']['metrics']['passes'] == (3 + 3) * len(K)" \
    "d['env']['metric_passes'] == 3" \
    "all(k.get('metrics') and all(v is not None for v in k['metrics']) for k in K)"; then
  ok "--max-ranges 1 with 3 counter passes: 3 + 3 (duration) passes per window, all attributed"
else
  bad "--max-ranges 1"
fi

# ---- 3c. the duration pass --------------------------------------------------
DI="d['metric_names'].index('gpu__time_duration.sum')"
MOCK_CUPTI_COUNTER_OVERHEAD_NS=500000000 prof durpass "$T/drv_streams.fb" --cache=keep --no-pc
CUCAP_PROFILE_DURATION_PASSES=0 MOCK_CUPTI_COUNTER_OVERHEAD_NS=500000000 \
  prof durmain "$T/drv_streams.fb" --cache=keep --no-pc
CUCAP_PROFILE_DURATION_PASSES=1 MOCK_CUPTI_COUNTER_OVERHEAD_NS=500000000 \
  prof durone "$T/drv_streams.fb" --cache=keep --no-pc
if [ "$(cat "$T/durpass.rc")" = 0 ] && check durpass \
    "sec['metrics'] == 'collected' and len(K) > 0" \
    "all(0 < k['metrics'][$DI] < 5e8 for k in K)" \
    "'gpu__time_duration.sum of %d kernel(s): the median of 3 pass(es) of its own' % len(K) in d['sections']['metrics']['note']" \
    "d['sections']['metrics']['passes'] == d['env']['metric_passes'] + 3"; then
  ok "duration passes: gpu__time_duration.sum without the other counters' overhead, median of 3 more passes"
else
  bad "duration pass"; grep -i "duration\|error" "$T/durpass.err" | head -5
fi
if [ "$(cat "$T/durmain.rc")" = 0 ] && check durmain \
    "sec['metrics'] == 'collected' and len(K) > 0" \
    "all(k['metrics'][$DI] >= 5e8 for k in K)" \
    "'pass of its own' not in d['sections']['metrics']['note']" \
    "d['sections']['metrics']['passes'] == d['env']['metric_passes']"; then
  ok "CUCAP_PROFILE_DURATION_PASSES=0: the main passes' durations, no extra pass"
else
  bad "CUCAP_PROFILE_DURATION_PASSES=0"
fi
MOCK_CUPTI_DURATION_ONLY_NS=300,100,200 prof durmed "$T/drv_streams.fb" --cache=keep --no-pc
if [ "$(cat "$T/durmed.rc")" = 0 ] && check durmed \
    "sec['metrics'] == 'collected' and len(K) > 0" \
    "all(k['metrics'][$DI] == 200 for k in K)"; then
  ok "duration passes: the median of 300, 100 and 200 ns is kept (200)"
else
  bad "duration passes: median"
fi
if [ "$(cat "$T/durone.rc")" = 0 ] && check durone \
    "sec['metrics'] == 'collected' and all(0 < k['metrics'][$DI] < 5e8 for k in K)" \
    "'the median of 1 pass(es) of its own' in d['sections']['metrics']['note']" \
    "d['sections']['metrics']['passes'] == d['env']['metric_passes'] + 1"; then
  ok "CUCAP_PROFILE_DURATION_PASSES=1: one duration pass per window"
else
  bad "CUCAP_PROFILE_DURATION_PASSES=1"
fi

# the duration pass holds sm__cycles_elapsed.max beside the duration: a
# config of the duration alone gives short kernels shorter ranges (H200,
# modelled by MOCK_CUPTI_ALONE_SHORT_NS); CUCAP_PROFILE_DURATION_WITH=none
# asks for the duration alone; a chip that refuses the companion gets the
# duration alone, with a warning naming it
MOCK_CUPTI_ALONE_SHORT_NS=1000000000 prof durwith "$T/drv_streams.fb" --cache=keep --no-pc
CUCAP_PROFILE_DURATION_WITH=none MOCK_CUPTI_ALONE_SHORT_NS=1000000000 \
  prof duralone "$T/drv_streams.fb" --cache=keep --no-pc
MOCK_CUPTI_REFUSE_METRIC=sm__cycles_elapsed.max MOCK_CUPTI_ALONE_SHORT_NS=1000000000 \
  prof durrefuse "$T/drv_streams.fb" --cache=keep --no-pc
if [ "$(cat "$T/durwith.rc")" = 0 ] && check durwith \
    "sec['metrics'] == 'collected' and len(K) > 0" \
    "all(k['metrics'][$DI] > 1 for k in K)" \
    "d['sections']['metrics']['passes'] == d['env']['metric_passes'] + 3" \
    "'pass(es) of its own, beside sm__cycles_elapsed.max' in d['sections']['metrics']['note']"; then
  ok "duration passes hold sm__cycles_elapsed.max beside the duration (one pass each)"
else
  bad "duration pass companion"; grep -i "duration" "$T/durwith.err" | head -3
fi
if [ "$(cat "$T/duralone.rc")" = 0 ] && check duralone \
    "sec['metrics'] == 'collected' and len(K) > 0" \
    "all(k['metrics'][$DI] == 1 for k in K)" \
    "'beside' not in d['sections']['metrics']['note']"; then
  ok "CUCAP_PROFILE_DURATION_WITH=none: the duration alone in its passes"
else
  bad "CUCAP_PROFILE_DURATION_WITH=none"
fi
if [ "$(cat "$T/durrefuse.rc")" = 0 ] && check durrefuse \
    "sec['metrics'] == 'collected' and len(K) > 0" \
    "all(k['metrics'][$DI] == 1 for k in K)" \
    "d['sections']['metrics']['passes'] == d['env']['metric_passes'] + 3" &&
    grep -q "cannot hold sm__cycles_elapsed.max" "$T/durrefuse.err"; then
  ok "companion refused: the duration alone, and a warning naming it"
else
  bad "duration pass companion refused"; grep -i "duration" "$T/durrefuse.err" | head -3
fi

# ---- 4. counters refused ---------------------------------------------------
MOCK_CUPTI_NO_COUNTERS=1 prof priv "$T/drv_basic.fb" --cache=keep
if [ "$(cat "$T/priv.rc")" = 0 ] && check priv \
    "sec['timeline'] == 'collected' and len(K) > 0" \
    "sec['metrics'] == 'unavailable'" \
    "'NVreg_RestrictProfilingToAdminUsers' in d['sections']['metrics']['note']" \
    "d['env']['counters_allowed'] == 0" \
    "sec['pc-sampling'] == 'collected'" && grep -q "metrics.*unavailable" "$T/priv.out"; then
  ok "counters refused: timeline kept, metrics unavailable with the fix"
else
  bad "counters refused: rc=$(cat "$T/priv.rc")"; cat "$T/priv.err"
fi

# ---- 5. a range count that does not fit -------------------------------------
MOCK_CUPTI_EXTRA_RANGE=1 prof extra "$T/drv_streams.fb" --cache=keep --no-pc
if [ "$(cat "$T/extra.rc")" = 0 ] && check extra \
    "sec['metrics'] == 'failed'" \
    "'cannot be attributed' in d['sections']['metrics']['note']" \
    "all(all(v is None for v in k['metrics']) for k in K)" \
    && grep -q "cannot be attributed" "$T/extra.err"; then
  ok "one range too many: metrics failed loudly, nothing misattributed"
else
  bad "extra range"; cat "$T/extra.err"
fi

# ---- 6. flush memsets forming ranges ----------------------------------------
MOCK_CUPTI_MEMSET_RANGES=1 prof flush "$T/drv_basic.fb" --cache=flush --no-pc
if [ "$(cat "$T/flush.rc")" = 0 ] && check flush \
    "sec['metrics'] == 'collected'" \
    "'L2 flushed' in d['sections']['metrics']['note']" \
    "all(k.get('metrics') and all(v is not None for v in k['metrics']) for k in K)"; then
  ok "--cache=flush with memset ranges: flush ranges skipped"
else
  bad "flush ranges"; cat "$T/flush.err"
fi
# the duration passes flush from a context of their own (cupti_flush.c;
# drv_basic runs in a context it created, which has no green contexts);
# CUCAP_PROFILE_FLUSH_CTX=own keeps every flush in the profiled context
if check flush "'from a context of its own in the duration passes' in d['sections']['metrics']['note']"; then
  ok "--cache=flush: the duration passes flush from a side context"
else
  bad "side-context flush note"; cat "$T/flush.err"
fi
# a program in the primary context: the duration passes flush from a
# context of their own by default; from a green context of the primary one
# with CUCAP_PROFILE_FLUSH_CTX=green, and from a context of their own again
# when the driver refuses green contexts
if [ -f "$T/drv_threads.fb" ]; then
  for tag in side green nogreen; do
    case $tag in
      side) ( prof fl_side "$T/drv_threads.fb" --cache=flush --no-pc ) ;;
      green) ( export CUCAP_PROFILE_FLUSH_CTX=green
               prof fl_green "$T/drv_threads.fb" --cache=flush --no-pc ) ;;
      nogreen) ( export CUCAP_PROFILE_FLUSH_CTX=green MOCK_CUDA_NO_GREEN=1
                 prof fl_nogreen "$T/drv_threads.fb" --cache=flush --no-pc ) ;;
    esac
    want="from a green context of the primary one in the duration passes"
    [ "$tag" = green ] || want="from a context of its own in the duration passes"
    if [ "$(cat "$T/fl_$tag.rc")" = 0 ] && check "fl_$tag" \
        "sec['metrics'] == 'collected'" \
        "'$want' in d['sections']['metrics']['note']" \
        "all(k.get('metrics') and all(v is not None for v in k['metrics']) for k in K)"; then
      ok "--cache=flush, primary context ($tag): the note says '$want'"
    else
      bad "flush context ($tag)"; cat "$T/fl_$tag.err"
    fi
  done
fi
CUCAP_PROFILE_FLUSH_CTX=own MOCK_CUPTI_MEMSET_RANGES=1 prof flushown "$T/drv_basic.fb" --cache=flush --no-pc
if [ "$(cat "$T/flushown.rc")" = 0 ] && check flushown \
    "sec['metrics'] == 'collected'" \
    "'L2 flushed before each launch' in d['sections']['metrics']['note']" \
    "'context of its own' not in d['sections']['metrics']['note']" \
    "all(k.get('metrics') and all(v is not None for v in k['metrics']) for k in K)"; then
  ok "CUCAP_PROFILE_FLUSH_CTX=own: every flush in the profiled context"
else
  bad "flush ctx own"; cat "$T/flushown.err"
fi

# --sass: no module unloaded before the end of the run (drv_basic unloads
# its module at its end, and the PC-sampling and SASS passes load modules
# afresh): every section collected, and the replay says how many unloads it
# held; CUCAP_PROFILE_SASS_HOLD=0 turns the hold off (nothing held)
CUCAP_LOG_LEVEL=info prof hold "$T/drv_basic.fb" --sass
if [ "$(cat "$T/hold.rc")" = 0 ] && check hold \
    "sec['metrics'] == 'collected'" "sec['sass-metrics'] == 'collected'" \
    && grep -q "modules stay loaded until the end of the run" "$T/hold.err" \
    && grep -qE "replay: [1-9][0-9]* module\(s\) and librar\(ies\) held loaded to the end of the run" "$T/hold.err"; then
  ok "--sass holds unloads: $(grep -oE '[0-9]+ module\(s\) and librar\(ies\) held' "$T/hold.err"), sections collected"
else
  bad "hold unloads"; tail -5 "$T/hold.err"
fi
CUCAP_PROFILE_SASS_HOLD=0 CUCAP_LOG_LEVEL=info prof nohold "$T/drv_basic.fb" --sass
if [ "$(cat "$T/nohold.rc")" = 0 ] && check nohold \
    "sec['metrics'] == 'collected'" "sec['sass-metrics'] == 'collected'" \
    && ! grep -q "modules stay loaded until the end of the run" "$T/nohold.err" \
    && ! grep -q "held loaded to the end of the run" "$T/nohold.err"; then
  ok "CUCAP_PROFILE_SASS_HOLD=0: nothing held, sections collected"
else
  bad "CUCAP_PROFILE_SASS_HOLD=0"; tail -5 "$T/nohold.err"
fi

# ---- 6b. correlation ids that need API activity records --------------------
# corr_case NAME "ENV=1 ..." WHAT: ids only with API records (the mock's
# MOCK_CUPTI_CORR_NEEDS_API), drv_streams' 5 kernels attributed, PC samples
corr_case() {
  local name=$1 envs=$2 what=$3
  # shellcheck disable=SC2086
  (export $envs MOCK_CUPTI_CORR_NEEDS_API=1; prof "$name" "$T/drv_streams.fb" --cache=keep)
  if [ "$(cat "$T/$name.rc")" = 0 ] && check "$name" \
      "sec['timeline'] == 'collected' and len(K) == 5" \
      "sec['pc-sampling'] == 'collected' and len(d['pc_samples']) > 0"; then
    ok "$what"
  else
    bad "$what"; tail -3 "$T/$name.err"
  fi
}
corr_case corrapi "" "ids only with DRIVER activity: the engine enables it, kernels attributed"
corr_case corrscope "MOCK_CUPTI_SCOPE_ONLY=1" \
  "work calls only: callbacks and API records per cbid, kernels attributed"
corr_case corrall "MOCK_CUPTI_NO_SCOPE=1" \
  "no callback names (older CUPTI): whole driver domain, kernels attributed"
CUCAP_CUPTI_NO_API_RECORDS=1 MOCK_CUPTI_CORR_NEEDS_API=1 prof corrnone "$T/drv_streams.fb" --cache=keep --no-pc
if [ "$(cat "$T/corrnone.rc")" = 0 ] && check corrnone "len(K) == 0" \
   && grep -q "kernel record(s) matched no replayed op" "$T/corrnone.err"; then
  ok "without ids: no kernel is misattributed, the loss is reported"
else
  bad "no correlation ids"; tail -3 "$T/corrnone.err"
fi

# ---- 7. bad metric names, bad options ---------------------------------------
prof bogus "$T/drv_basic.fb" --metrics=sm__throughput.avg.pct_of_peak_sustained_elapsed,bogus_metric.sum
if [ "$(cat "$T/bogus.rc")" = 3 ] && grep -q "metric 'bogus_metric.sum' is not known" "$T/bogus.err"; then
  ok "unknown raw metric: exit 3 naming it"
else
  bad "unknown metric: rc=$(cat "$T/bogus.rc")"; cat "$T/bogus.err"
fi
for opt in "--metrics=a,,b" "--pc-period 3" "--cache=sometimes" "--range x"; do
  # shellcheck disable=SC2086
  "$CUCAP" cupti profile "$T/drv_basic.fb" $opt > /dev/null 2>&1; rc=$?
  [ $rc -eq 2 ] && ok "bad option $opt: exit 2" || bad "bad option $opt: rc=$rc"
done

# ---- 7b. CUPTI failing the way it did on the H100 ----------------------------
MOCK_CUPTI_PCS_DETACH=1 prof detach "$T/drv_streams.fb" --cache=keep --sass
rc=$(cat "$T/detach.rc")
if [ "$rc" = 0 ] && check detach \
    "sec['timeline'] == 'collected' and sec['metrics'] == 'collected'" \
    "sec['pc-sampling'] == 'failed' and 'CUPTI stopped working' in d['sections']['pc-sampling']['note']" \
    "'another process is profiling this GPU' in d['sections']['pc-sampling']['note']" \
    "sec['sass-metrics'] == 'failed' and 'not collected' in d['sections']['sass-metrics']['note']" \
    "all(k.get('metrics') for k in K)" \
    && ! grep -q "mock CUPTI: .* called after CUPTI detached" "$T/detach.err"; then
  ok "CUPTI detaching itself after CUPTI_ERROR_UNKNOWN: no crash, no call after, sections say why"
else
  bad "CUPTI detach: rc=$rc"; tail -5 "$T/detach.err"
fi
# drv_capture: a plain launch, then graph launches of two captured graphs.
# A failed cuptiRangeProfilerStop (what the H100 answers for an auto range
# over graph launches) is not followed by another cuptiRangeProfilerEnable:
# on the H100 that re-enable crashed inside libcupti. The graph launches'
# kernels get no metrics and the section says why; plain launches keep theirs.
MOCK_CUPTI_GRAPH_AUTO_FAIL=1 prof gfail "$T/drv_capture.fb" --cache=flush --no-pc
if [ "$(cat "$T/gfail.rc")" = 0 ] && check gfail \
    "sec['metrics'] == 'partial'" \
    "'measured as a whole' in d['sections']['metrics']['note']" \
    "all(k.get('metrics') and all(v is not None for v in k['metrics']) for k in K if k['launch_index'] is not None)" \
    "any(k['launch_index'] is not None for k in K)" \
    "d.get('graph_launches') and all(g['metrics'] and all(v is not None for v in g['metrics']) for g in d['graph_launches'])"; then
  ok "graph launches (auto range fails on them): plain launches per kernel, graph launches in user ranges as a whole"
else
  bad "graph auto range failure: rc=$(cat "$T/gfail.rc")"; tail -5 "$T/gfail.err"
fi
MOCK_CUPTI_HW_BUSY=1 prof busy "$T/drv_basic.fb" --cache=keep --no-pc
if [ "$(cat "$T/busy.rc")" = 0 ] && check busy \
    "sec['timeline'] == 'collected'" \
    "sec['metrics'] == 'unavailable' and 'CUPTI_ERROR_HARDWARE_BUSY' in d['sections']['metrics']['note']" \
    "'another process is profiling this GPU' in d['sections']['metrics']['note'] and 'ncu' in d['sections']['metrics']['note']"; then
  ok "counters held by another process: the note names it and says what to do"
else
  bad "HARDWARE_BUSY message: rc=$(cat "$T/busy.rc")"; tail -3 "$T/busy.err"
fi

# ---- 8. through `cucap replay --profile` (the backend of cucap_profiler.h) --
rprof() { # rprof NAME CAPTURE [args...]: replay --profile --json
  local name="$1" cap="$2"; shift 2
  "$CUCAP" replay "$cap" --profile --json "$@" > "$T/$name.json" 2> "$T/$name.err"
  echo $? > "$T/$name.rc"
}
# rexpect NAME OK-MESSAGE BAD-MESSAGE PYTHON-EXPR...: NAME's replay exited 0
# and every expression holds over its profile (holds replay); otherwise
# BAD-MESSAGE with the exit status and the end of its stderr.
rexpect() {
  local name="$1" okmsg="$2" badmsg="$3"; shift 3
  if [ "$(cat "$T/$name.rc")" = 0 ] && holds replay "$name" "$@"; then
    ok "$okmsg"
  else
    bad "$badmsg: rc=$(cat "$T/$name.rc")"; tail -3 "$T/$name.err"
  fi
}
if "$CUCAP" replay --help 2>&1 | grep -q -- '--profile'; then
  rprof rp "$T/drv_streams.fb" --cupti "$MOCK_CUPTI" --cache=keep --pc-sampling --sass-metrics
  rexpect rp "replay --profile: CUPTI backend fills timeline, metrics, PC samples, SASS metrics" \
    "replay --profile (CUPTI backend)" \
    "sec['timeline'] == 'ok' and src['timeline'] == 'cupti-activity'" \
    "sec['metrics'] in ('ok', 'partial') and src['metrics'] == 'cupti-range-profiler'" \
    "sec['pc_sampling'] == 'ok'" \
    "d['replay']['backend'] == 'cupti'" \
    "all(len(l['timings']) == 1 and len(l['metrics']) >= 5 for l in L if l['kernel'] != '')" \
    "len(d['pc_samples']) > 0 and len(d['sass_metrics']) > 0" \
    "len(d['activities']) > 0"
  MOCK_CUPTI_ATTACH_FAIL=1 rprof rpatt "$T/drv_streams.fb" --cupti "$MOCK_CUPTI" --cache=keep --pc-sampling
  rexpect rpatt "replay --profile, CUPTI cannot attach: event timeline, sections say why" \
    "replay --profile attach failure" \
    "sec['timeline'] == 'ok' and src['timeline'] == 'cuda-events'" \
    "sec['metrics'] == 'unavailable' and 'CUPTI cannot attach' in msg['metrics']" \
    "sec['pc_sampling'] == 'unavailable'"
  rprof rpnone "$T/drv_streams.fb" --cupti /nonexistent/libcupti.so.13 --cache=keep
  rexpect rpnone "replay --profile without CUPTI: event timeline, metrics unavailable with the reason" \
    "replay --profile without CUPTI" \
    "src['timeline'] == 'cuda-events'" \
    "sec['metrics'] == 'unavailable' and 'CUPTI' in msg['metrics']"
  MOCK_CUPTI_NO_COUNTERS=1 rprof rppriv "$T/drv_streams.fb" --cupti "$MOCK_CUPTI" --cache=keep
  rexpect rppriv "replay --profile, counters refused: CUPTI timeline kept, metrics say what to change" \
    "replay --profile counters refused" \
    "sec['timeline'] == 'ok' and src['timeline'] == 'cupti-activity'" \
    "sec['metrics'] == 'unavailable' and 'NVreg_RestrictProfilingToAdminUsers' in msg['metrics']"
  rprof rpdrop "$T/drv_streams.fb" --cupti "$MOCK_CUPTI" --cache=keep \
    --metrics=sm__throughput.avg.pct_of_peak_sustained_elapsed,bogus_metric.sum
  rexpect rpdrop "replay --profile, a metric the chip lacks: dropped, named, section partial" \
    "replay --profile dropped metric" \
    "sec['metrics'] == 'partial' and 'not on this chip: bogus_metric.sum' in msg['metrics']" \
    "all(list(l['metrics']) == ['sm__throughput.avg.pct_of_peak_sustained_elapsed'] for l in L if l['kernel'])"
  rprof rprange "$T/drv_streams.fb" --cupti "$MOCK_CUPTI" --cache=keep --range launch:1-2
  rexpect rprange "replay --profile --range launch:1-2: every launch timed, metrics for 1 and 2 only" \
    "replay --profile --range" \
    "all(len(l['timings']) == 1 for l in L if l['kernel'])" \
    "all((len(l['metrics']) > 0) == (l.get('launch_index') in (1, 2)) for l in L if l['kernel'])"
else
  echo "note: this cucap has no replay --profile; backend checks skipped"
fi

# 9. a profile leaves the driver's costly releases to the process exit
# (cucap_replay_options.exit_after): the mock's leak check finds only module
# loads, page-locked host buffers and the primary context's retain alive;
# every stream, event, device allocation and context of the replay or the
# engine is gone. A plain replay of the same capture still releases all.
if [ -f "$T/drv_threads.fb" ]; then
  CUCAP_MOCK_LEAK_CHECK=1 "$CUCAP" cupti profile "$T/drv_threads.fb" --cupti "$MOCK_CUPTI" \
    --nvdisasm "$NVD" --sass --json "$T/lk.json" > "$T/lk.out" 2> "$T/lk.err"; rc=$?
  left=$(sed -n 's/.*leak check: [0-9]* driver object(s) alive at exit: //p' "$T/lk.err")
  other=$(echo "$left" | tr ',' '\n' | grep -v -E "primary context retain|page-locked host allocation|module|librar" | tr -d ' ')
  if [ $rc -eq 66 ] && [ -n "$left" ] && [ -z "$other" ] && grep -q "primary context retain" <<<"$left"; then
    ok "exit_after: a profile leaves only modules, page-locked buffers and the primary context to the exit ($left)"
  else
    bad "exit_after: rc=$rc, alive at exit: '$left' (unexpected: '$other')"; tail -5 "$T/lk.err"
  fi
  CUCAP_MOCK_LEAK_CHECK=1 "$CUCAP" replay "$T/drv_threads.fb" > "$T/lk2.out" 2> "$T/lk2.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "leak check: clean" "$T/lk2.err"; then
    ok "exit_after: a plain replay still releases every driver object"
  else
    bad "plain replay leak check: rc=$rc"; tail -5 "$T/lk2.err"
  fi
fi

echo "test_profile_cupti: $pass passed, $fail failed"
[ $fail -eq 0 ]
