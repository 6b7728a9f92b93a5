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
  # INFO and MEAS lines report figures: neither passed nor skipped
  case $1 in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; SKIP) skip=$((skip+1));; esac
}

[ -x "$CUCAP" ] || { echo "no cucap binary at $CUCAP"; exit 2; }
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU here"; exit 77; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'

# Parts (CUCAP_GPU_PARTS, comma-separated; default all): apps (sections 1-2),
# share (2b), bench (3), profile (4-5). Parts may run as separate processes
# at the same time (correctness only: timings need the GPU to themselves).
part() { case ",${CUCAP_GPU_PARTS:-apps,share,bench,profile}," in *",$1,"*) return 0;; esac; return 1; }

if part apps; then
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
  # the verify line in full: it names nondeterministic bytes and their kernels
  if [ $rc -eq 0 ]; then res PASS "$name replay --verify" "$(grep -E '^verify:' "$w/replay.txt" | cut -c9-330) | $(grep -E '^memory:' "$w/replay.txt" | cut -c9-60)"
  else res FAIL "$name replay --verify" "exit $rc ($(tail -1 "$w/replay.txt"))"; fi
}

for a in drv_basic drv_streams drv_reuse drv_threads drv_jit drv_library drv_pitch drv_graph drv_graph_explicit drv_zerocopy \
         drv_capture drv_managed drv_nondet rt_storm drv_attrs drv_texture \
         drv_graph_cond drv_graph_mem drv_reloc drv_globals drv_graph_host drv_sched drv_managed_host drv_share drv_query \
         rt_static rt_shared rt_multistream rt_threads rt_cublas rt_tensor rt_graph; do
  if [ -x "$APPS/$a" ]; then run_app "$a" "$APPS/$a"; else res SKIP "$a" "not built"; fi
done
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  run_app torch_mlp $PY "$ROOT/tests/apps/torch_mlp.py" --steps 20
  # memory-efficient attention backward accumulates with atomics: replay
  # --verify must pass with those bytes reported as nondeterministic
  run_app torch_transformer $PY "$ROOT/tests/apps/torch_transformer.py" --steps 5
else
  res SKIP torch_mlp "no torch with CUDA"
fi
# Framework programs (what users record): each skips if its package is absent.
fw_app() { # name module args...
  local name=$1 mod=$2; shift 2
  if $PY -c "import $mod" 2>/dev/null; then run_app "$name" $PY "$ROOT/tests/apps/$name.py" "$@"
  else res SKIP "$name" "python module $mod not available"; fi
}
fw_app torch_cnn torchvision --steps 3
fw_app torch_compiled triton --steps 3
fw_app torch_cudagraph torch --steps 5
fw_app cupy_fft cupy
fw_app jax_jit jax --steps 3

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
# module variables a kernel updates: every pass starts from their load-time
# contents (the module is kept loaded across passes: replay/replay_modkeep.c)
EXTRA_REQUIRE="all bytes matched \\(3 passes\\)" extra loop3-globals "$APPS/drv_globals" -- --loop 3 --verify
extra relocate-graph-mem "$APPS/drv_graph_mem" -- --relocate --verify
# copy nodes with host memory (UNIFIED types, pageable stack/heap, a clone,
# simpleCudaGraphs' pattern): results after a host node are host-written
EXTRA_REQUIRE='[1-9][0-9]* bytes written by the program.s host code' \
  extra graph-host "$APPS/drv_graph_host" -- --verify
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
# clock values: told apart as nondeterministic and named; a flipped recorded
# byte of the deterministic half must still fail
EXTRA_REQUIRE='bytes nondeterministic \(differ between replays; in [0-9]+ copies, written by kernels stamp\); 0 unverifiable; all deterministic bytes matched' \
  extra nondeterministic "$APPS/drv_nondet" -- --verify
if [ -f "$OUT/extra-nondeterministic/cap.fb" ] && [ -x "$BUILD/tests/test_replay" ]; then
  w=$OUT/extra-nondeterministic
  "$BUILD/tests/test_replay" --flip-dtoh "$w/cap.fb" "$w/flip.fb" 5 >/dev/null 2>&1
  "$CUCAP" replay "$w/flip.fb" --verify >"$w/flip.txt" 2>&1; rc=$?
  if [ $rc -eq 1 ] && grep -q "first differing offset 5 .*same in all" "$w/flip.txt"; then
    res PASS "nondeterministic flipped byte fails" "$(grep -o 'same in all [0-9]* passes' "$w/flip.txt" | head -1)"
  else
    res FAIL "nondeterministic flipped byte fails" "exit $rc ($(tail -1 "$w/flip.txt"))"
  fi
fi
# attributes/limits and arrays/textures relocated (linear and pitch-2D texture
# pointers, access policy window), and made again in a second loop
extra relocate-attrs "$APPS/drv_attrs" -- --relocate --verify
extra relocate-texture "$APPS/drv_texture" -- --relocate --verify
extra loop2-texture "$APPS/drv_texture" -- --loop 2 --verify
# texture/surface handles: the same numbers in the replay (nothing rewritten)
# or other numbers, rewritten and counted; either way verified
if [ -f "$OUT/drv_texture/cap.fb" ]; then
  "$CUCAP" replay "$OUT/drv_texture/cap.fb" --verify --json >"$OUT/drv_texture/handles.json" 2>&1
  res "$([ $? -eq 0 ] && echo PASS || echo FAIL)" "drv_texture handles" \
    "$(grep -o '"patched_params":[0-9]*,"patched_handles":[0-9]*' "$OUT/drv_texture/handles.json")"
fi
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  # PyTorch's caching allocator keeps its memory to the end: the exit
  # snapshot must hold regions, and all of them must match.
  EXTRA_REQUIRE='verify: [0-9]+ copies, [1-9][0-9]* snapshot regions' \
    extra torch-snapshot-exit "$PY $ROOT/tests/apps/torch_mlp.py --steps 20" --snapshot=exit -- --verify
fi

# --- 1c. recording changes nothing the program sees (issue 7 class 1), byte
#         for byte: every return code of a global-mode capture with a host
#         node, a DtoH copy and graph memory nodes while another thread
#         captures RELAXED (drv_capture); every JIT log byte and out-param
#         (drv_jitlog); managed memory read back after syncs (drv_managed,
#         issue 7 class 8: its replay must verify snapshot regions).
#         CUDA_CACHE_DISABLE=1 on both sides: a JIT cache hit produces no
#         ptxas info log at all, which would differ for reasons not ours.
fidelity() { # name require-regex cmd...
  local name=$1 req=$2; shift 2
  local w=$OUT/fid-$name; mkdir -p "$w"
  if [ ! -x "${1}" ] && [ "$1" != env ]; then res SKIP "$name fidelity" "not built"; return; fi
  "$@" >"$w/native.out" 2>"$w/native.err"; local rc0=$?
  "$CUCAP" record -o "$w/cap.fb" -- "$@" >"$w/rec.out" 2>"$w/rec.err"; local rc1=$?
  if [ $rc0 -eq $rc1 ] && cmp -s "$w/native.out" "$w/rec.out"; then
    res PASS "$name byte-identical under record" "exit $rc0, $(wc -c <"$w/native.out") bytes"
  else
    res FAIL "$name byte-identical under record" "exit $rc0 vs $rc1; diff $w/native.out $w/rec.out"
    return
  fi
  "$CUCAP" replay "$w/cap.fb" --verify >"$w/replay.txt" 2>&1; local rc=$?
  if [ $rc -eq 0 ] && grep -Eq "$req" "$w/replay.txt"; then
    res PASS "$name replay --verify" "$(grep -E '^verify:' "$w/replay.txt" | cut -c1-150)"
  else
    res FAIL "$name replay --verify" "exit $rc, want /$req/: $(grep -E '^verify:' "$w/replay.txt" | cut -c1-120) ($(tail -1 "$w/replay.txt"))"
  fi
}
fidelity drv_capture '^verify: ([5-9]|[1-9][0-9]+) copies' env CUDA_CACHE_DISABLE=1 "$APPS/drv_capture"
fidelity drv_jitlog '^verify:' env CUDA_CACHE_DISABLE=1 "$APPS/drv_jitlog"
fidelity drv_managed '^verify: [0-9]+ copies, [1-9][0-9]* snapshot regions' "$APPS/drv_managed"
# Experiment (INFO, not judged): ptxjit's info log came back empty under
# record. With the JIT cache on, does a second *native* run already lose it?
if [ -x "$APPS/drv_jitlog" ]; then
  w=$OUT/fid-jitcache; mkdir -p "$w"
  "$APPS/drv_jitlog" >"$w/native1.out" 2>&1; "$APPS/drv_jitlog" >"$w/native2.out" 2>&1
  "$CUCAP" record -o "$w/cap.fb" -- "$APPS/drv_jitlog" >"$w/rec.out" 2>&1
  res INFO "drv_jitlog JIT cache experiment" "native twice: $(cmp -s "$w/native1.out" "$w/native2.out" && echo same || echo DIFFER), native2 vs recorded: $(cmp -s "$w/native2.out" "$w/rec.out" && echo same || echo DIFFER) (see $w)"
fi

# --- 2. the README's main command on this machine (record -> replay -> verify)
if [ -f "$ROOT/examples/demo.sh" ]; then
  if CUCAP_BUILD=$BUILD CUCAP_DEMO_DIR=$OUT/demo bash "$ROOT/examples/demo.sh" >"$OUT/demo.txt" 2>&1; then
    res PASS "examples/demo.sh" "$(grep -E '^verify:' "$OUT/demo.txt" | cut -c1-100)"
  else
    res FAIL "examples/demo.sh" "$(tail -1 "$OUT/demo.txt")"
  fi
fi

fi # apps

if part share; then
# --- 2b. sharing captures: trim, extract (+ C program), export, diff
if [ -f "$ROOT/tests/gpu/share_check.sh" ]; then
  bash "$ROOT/tests/gpu/share_check.sh" "$BUILD" "$OUT/share" >"$OUT/share.txt" 2>&1
  while read -r st name; do
    case $st in
      PASS|FAIL|SKIP) res "$st" "share" "$(echo "$name" | cut -c1-160)";;
    esac
  done < <(grep -E '^(PASS|FAIL|SKIP) ' "$OUT/share.txt")
fi

fi # share

if part bench; then
# --- 3. benchmarks (ratios measured in this run)
if [ "${CUCAP_GPU_BENCH:-1}" = 1 ] && [ -f "$ROOT/bench/gpu_bench.sh" ]; then
  bash "$ROOT/bench/gpu_bench.sh" "$BUILD" "$OUT/bench" 2>&1 | tee "$OUT/bench.txt"
  grep '^BENCH' "$OUT/bench.txt" >>"$SUMMARY" || true
fi

echo
fi # bench

if part profile; then
# --- 4. doctor, analyze, replay --profile (tests/gpu/profile_smoke.sh)
if bash "$ROOT/tests/gpu/profile_smoke.sh" "$BUILD" "$OUT" > "$OUT/profile_smoke.txt" 2>&1; then
  res PASS "profile smoke" "$(tail -1 "$OUT/profile_smoke.txt")"
else
  res FAIL "profile smoke" "$(tail -1 "$OUT/profile_smoke.txt"); see $OUT/profile_smoke.txt"
fi
# --- 5. the CUPTI engine: every section on small programs, the transformer's
#        instruction-level stacks (tests/gpu/profile_check.sh; its own lines
#        are in $OUT/profile/profile_summary.txt); cucap vs Nsight Compute
#        (bench/profile_vs_ncu.sh) with CUCAP_GPU_BENCH=1
if CUCAP_LOG_LEVEL=${CUCAP_PROFILE_LOG_LEVEL:-debug} bash "$ROOT/tests/gpu/profile_check.sh" "$BUILD" "$OUT/profile" \
     > "$OUT/profile_check.txt" 2>&1; then
  res PASS "profile check (CUPTI)" "$(tail -1 "$OUT/profile_check.txt")"
else
  res FAIL "profile check (CUPTI)" "$(tail -1 "$OUT/profile_check.txt"); see $OUT/profile_check.txt"
fi
if [ "${CUCAP_GPU_BENCH:-1}" = 1 ] && command -v "${NCU:-ncu}" >/dev/null 2>&1; then
  bash "$ROOT/bench/profile_vs_ncu.sh" "$BUILD" "$OUT/profile_bench" 2>&1 | tee "$OUT/profile_bench.txt"
  grep '^BENCH' "$OUT/profile_bench.txt" >>"$SUMMARY" || true
fi
fi # profile

echo "== summary: $pass passed, $fail failed, $skip skipped (details in $OUT)"
[ $fail -eq 0 ]
