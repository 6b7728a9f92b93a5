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
  local missing
  missing=$(grep -i 'audit' "$w/info.txt" | grep -o 'missing[= :]*[0-9]*' | grep -o '[0-9]*$' | head -1)
  if [ -z "$missing" ]; then res FAIL "$name audit" "no audit line in info";
  elif [ "$missing" = 0 ]; then res PASS "$name audit 0 missing" "$(grep -i audit "$w/info.txt" | head -1)";
  else res FAIL "$name audit" "$missing calls missing"; fi
  "$CUCAP" replay "$w/cap.fb" --verify >"$w/replay.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then res PASS "$name replay --verify" "$(grep -i 'match' "$w/replay.txt" | head -1)"
  else res FAIL "$name replay --verify" "exit $rc ($(tail -1 "$w/replay.txt"))"; fi
}

for a in drv_basic drv_streams drv_threads drv_jit drv_library drv_pitch drv_graph \
         rt_static rt_shared rt_multistream rt_threads rt_cublas rt_graph; do
  if [ -x "$APPS/$a" ]; then run_app "$a" "$APPS/$a"; else res SKIP "$a" "not built"; fi
done
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  run_app torch_mlp $PY "$ROOT/tests/apps/torch_mlp.py" --steps 20
else
  res SKIP torch_mlp "no torch with CUDA"
fi

# --- 2. benchmarks (ratios measured in this run)
if [ -x "$ROOT/bench/gpu_bench.sh" ]; then
  bash "$ROOT/bench/gpu_bench.sh" "$BUILD" "$OUT/bench" 2>&1 | tee "$OUT/bench.txt"
  grep '^BENCH' "$OUT/bench.txt" >>"$SUMMARY" || true
fi

echo
echo "== summary: $pass passed, $fail failed, $skip skipped (details in $OUT)"
[ $fail -eq 0 ]
