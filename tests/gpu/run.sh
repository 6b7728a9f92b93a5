#!/usr/bin/env bash
# tests/gpu/run.sh - every GPU test and benchmark of cucap, on a GPU machine.
# Builds nothing: give it a build folder made elsewhere (cmake + ninja, with
# nvcc available so tests/apps were built).
#   tests/gpu/run.sh [BUILD_DIR] [OUT_DIR]
# Prints one line per check and a summary; exit 0 only if every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-${CUCAP_BUILD:-$ROOT/build}}
OUT=${2:-${OUT:-$(mktemp -d)}}
CUCAP=$BUILD/tools/cucap
APPS=$BUILD/tests/apps
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export CUCAP_LOG_LEVEL=${CUCAP_LOG_LEVEL:-warn}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
pass=0; fail=0; skip=0
res() { # status name detail
  printf '%-5s %-38s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
  case $1 in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; *) skip=$((skip+1));; esac
}

[ -x "$CUCAP" ] || { echo "no cucap binary at $CUCAP"; exit 2; }
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU here"; exit 77; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'

# --- 1. every test app: identical output under record, 0 calls missing in the
#        CUPTI audit, replay --verify bit-exact (a fresh process: addresses differ)
run_app() { # name cmd...
  local name=$1; shift
  local w=$OUT/$name; mkdir -p "$w"
  if ! "$@" >"$w/native.out" 2>"$w/native.err"; then
    res FAIL "$name native" "exit $? ($(tail -1 "$w/native.err"))"; return; fi
  "$CUCAP" record --audit -o "$w/cap.fb" -- "$@" >"$w/rec.out" 2>"$w/rec.err"
  local rc=$?
  if [ $rc -ne 0 ]; then res FAIL "$name record" "exit $rc ($(tail -1 "$w/rec.err"))"; return; fi
  # outputs that print timings are compared on their checksum lines only
  if diff <(grep -iv 'time\|elapsed\|us/launch\|ms' "$w/native.out") \
          <(grep -iv 'time\|elapsed\|us/launch\|ms' "$w/rec.out") >/dev/null; then
    res PASS "$name output identical" "$(head -c 80 "$w/native.out" | head -1)"
  else
    res FAIL "$name output identical" "see $w/*.out"
  fi
  "$CUCAP" info "$w/cap.fb" >"$w/info.txt" 2>&1
  # The CUPTI audit (record --audit) counts every driver call the driver saw;
  # a call it saw more often than cucap recorded is a missed call.
  local audit
  audit=$("$CUCAP" dump --json --body Audit "$w/cap.fb" 2>/dev/null | "$PY" -c '
import json, sys
seen = rec = 0; missing = []
for line in sys.stdin:
    r = json.loads(line)
    for e in r.get("body", {}).get("entries", []):
        s, c = e.get("driver_seen", 0), e.get("recorded", 0)
        seen += s; rec += c
        if s > c: missing.append("%s:%d" % (e.get("name"), s - c))
print(len(missing), seen, rec, ",".join(missing[:8]))')
  read -r nmiss nseen nrec mlist <<<"$audit"
  if [ -z "$nmiss" ] || [ "$nseen" = 0 ]; then res FAIL "$name audit" "no audit data";
  elif [ "$nmiss" = 0 ]; then res PASS "$name audit 0 missing" "CUPTI saw $nseen calls, cucap recorded $nrec";
  else res FAIL "$name audit" "$nmiss functions with missed calls: $mlist"; fi
  "$CUCAP" replay "$w/cap.fb" --verify >"$w/replay.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then res PASS "$name replay --verify" "$(grep -E '^(verify|memory):' "$w/replay.txt" | tr '\n' ' ' | cut -c1-150)"
  else res FAIL "$name replay --verify" "exit $rc ($(tail -1 "$w/replay.txt"))"; fi
}

for a in drv_basic drv_streams drv_threads drv_jit drv_library drv_pitch drv_graph drv_graph_explicit drv_zerocopy \
         drv_graph_cond drv_graph_mem drv_reloc \
         rt_static rt_shared rt_multistream rt_threads rt_cublas rt_graph; do
  if [ -x "$APPS/$a" ]; then run_app "$a" "$APPS/$a"; else res SKIP "$a" "not built"; fi
done
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  run_app torch_mlp $PY "$ROOT/tests/apps/torch_mlp.py" --steps 20
else
  res SKIP torch_mlp "no torch with CUDA"
fi

# --- 1b. the other record/replay modes, on the GPU
extra() { # label app record-options -- replay-options
  local label=$1 app=$2; shift 2
  local ropts=() popts=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do ropts+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  popts=("$@")
  local w=$OUT/extra-$label; mkdir -p "$w"
  if [ ! -e "${app%% *}" ] && [ "${app%% *}" != "$PY" ]; then res SKIP "$label" "not built"; return; fi
  # shellcheck disable=SC2086
  if ! "$CUCAP" record "${ropts[@]}" -o "$w/cap.fb" -- $app >"$w/rec.out" 2>"$w/rec.err"; then
    res FAIL "$label record" "$(tail -1 "$w/rec.err")"; return; fi
  if "$CUCAP" replay "$w/cap.fb" "${popts[@]}" >"$w/replay.txt" 2>&1; then
    if [ -n "${EXTRA_REQUIRE:-}" ] && ! grep -Eq "$EXTRA_REQUIRE" "$w/replay.txt"; then
      res FAIL "$label" "replay output lacks /$EXTRA_REQUIRE/: $(grep -E '^verify:' "$w/replay.txt" | cut -c1-120)"
      return
    fi
    res PASS "$label" "$(grep -E '^(verify|memory|time):' "$w/replay.txt" | tr '\n' ' ' | cut -c1-170)"
  else
    res FAIL "$label" "exit $? ($(tail -1 "$w/replay.txt"))"
  fi
}
extra snapshot-exit "$APPS/rt_multistream" --snapshot=exit -- --verify
EXTRA_REQUIRE='[1-9][0-9]* launch hashes checked' \
  extra hash-launches "$APPS/drv_streams" --hash-launches -- --verify=launch
extra relocate "$APPS/drv_threads" -- --relocate --verify
# relocation made complete: the pointers inside an upload are rewritten
EXTRA_REQUIRE=' [1-9][0-9]* pointer\(s\) in uploaded data patched' \
  extra relocate-pointers "$APPS/drv_reloc" -- --relocate --verify
# graph features replayed again and again: conditional handles made anew
# each pass (mapped in kernel parameters), graph allocations, exec updates
extra loop3-graph-cond "$APPS/drv_graph_cond" -- --loop 3 --verify
extra relocate-graph-mem "$APPS/drv_graph_mem" -- --relocate --verify
# placement measurement (status MEAS, not a check): replay the captures made
# above with the device ranges held in the host address space never (0),
# while libcuda loads (dlopen) and across cuInit (init, known to make driver
# 580 ignore the hints). Look for "fixed addresses" and for warnings.
for cap in "$OUT/drv_zerocopy/cap.fb" "$OUT/torch_mlp/cap.fb"; do
  [ -f "$cap" ] || continue
  for mode in 0 dlopen init; do
    CUCAP_REPLAY_HOST_GUARD=$mode "$CUCAP" replay "$cap" --verify >"$cap.guard-$mode.txt" 2>&1
    rc=$?
    res MEAS "guard=$mode $(basename "$(dirname "$cap")")" \
      "exit $rc; $(grep -E '^memory:' "$cap.guard-$mode.txt" | cut -c1-110); $(grep -c 'warning' "$cap.guard-$mode.txt") warning(s)"
  done
done
extra loop3 "$APPS/rt_multistream" -- --loop 3 --verify
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  # PyTorch's caching allocator keeps its memory to the end: the exit
  # snapshot must hold regions, and all of them must match.
  EXTRA_REQUIRE='verify: [0-9]+ copies, [1-9][0-9]* snapshot regions' \
    extra torch-snapshot-exit "$PY $ROOT/tests/apps/torch_mlp.py --steps 20" --snapshot=exit -- --verify
fi

# --- 2. the README's main command on this machine (record -> replay -> verify)
if [ -f "$ROOT/examples/demo.sh" ]; then
  if CUCAP_BUILD=$BUILD CUCAP_DEMO_DIR=$OUT/demo bash "$ROOT/examples/demo.sh" >"$OUT/demo.txt" 2>&1; then
    res PASS "examples/demo.sh" "$(grep -E '^verify:' "$OUT/demo.txt" | cut -c1-100)"
  else
    res FAIL "examples/demo.sh" "$(tail -1 "$OUT/demo.txt")"
  fi
fi

# --- 3. benchmarks (ratios measured in this run)
if [ "${CUCAP_GPU_BENCH:-1}" = 1 ] && [ -f "$ROOT/bench/gpu_bench.sh" ]; then
  bash "$ROOT/bench/gpu_bench.sh" "$BUILD" "$OUT/bench" 2>&1 | tee "$OUT/bench.txt"
  grep '^BENCH' "$OUT/bench.txt" >>"$SUMMARY" || true
fi

echo
echo "== summary: $pass passed, $fail failed, $skip skipped (details in $OUT)"
[ $fail -eq 0 ]
