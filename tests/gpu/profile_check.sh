#!/usr/bin/env bash
# tests/gpu/profile_check.sh BUILD OUT - GPU self-test of the CUPTI engine of
# `cucap replay --profile` (profile/cupti/cupti_*.c), to run first on a GPU machine.
# Builds nothing (BUILD as for tests/gpu/run.sh). Everything is logged at
# CUCAP_LOG_LEVEL=debug into OUT/<name>/, so a failing step can be diagnosed
# from this one run. Prints one line per check:
#   PASS|FAIL|INFO|SKIP  <name>  <details>
# and a summary; exit 0 only if no check failed.
#   1. probe: what CUPTI reports (version, counters, sol/full pass counts, PC
#      sampling stall reasons, SASS metrics, nvdisasm) -> OUT/probe.txt
#   2. CUPTI absent: exit 3 and the message
#   3. each small program, and a CNN and a transformer training step, recorded,
#      then profiled with --metrics=sol --sass:
#      timeline entries == kernel launches, metrics for every kernel, PC
#      samples (> 0), source lines for the -lineinfo program, SASS text when
#      nvdisasm exists, SASS metrics, folded stacks
#   4. rt_profile: SOL values of a memory-, a compute-, a latency-bound kernel
#      and a cuBLAS GEMM; --metrics=full (the same names through `replay
#      --profile`); --loop 5 spread; --range; --clock-control (base locks
#      the SM clock below the boosted one of a none run made after it)
#  4b. rt_tensor: an FP16 cuBLAS GEMM (wgmma on sm_90) classes compute
#      (tensor); its tensor-pipe % against ncu's when ncu is present
#   5. torch_transformer --steps 3: >= 10,000 distinct instruction-level
#      stacks (PC sampling only)
#   6. `cucap replay --profile --pc-sampling --sass-metrics --loop 3` on
#      rt_profile through the backend: sections, timings, metrics, samples
#   7. two profilers at once on rt_profile: no crash (CUPTI can tear itself
#      down there, and a later cuptiActivityDisable then crashes), the
#      loser's sections name the other profiler
# Every profile also prints the engine's timing breakdown (INFO timing).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-${CUCAP_BUILD:-$ROOT/build}}
OUT=${2:-${OUT:-$(mktemp -d)}}
CUCAP=$BUILD/tools/cucap
APPS=$BUILD/tests/apps
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export CUCAP_LOG_LEVEL=${CUCAP_LOG_LEVEL:-debug}
SUMMARY=$OUT/profile_summary.txt
: >"$SUMMARY"
pass=0; fail=0
res() { # status name detail
  printf '%-5s %-40s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
  case $1 in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; esac
}
[ -x "$CUCAP" ] || { echo "no cucap binary at $CUCAP"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
NVD=""
for c in "${CUDA_HOME:-/usr/local/cuda}/bin/nvdisasm" /usr/local/cuda/bin/nvdisasm "$(command -v nvdisasm 2>/dev/null)"; do
  [ -n "$c" ] && [ -x "$c" ] && { NVD=$c; break; }
done
echo "nvdisasm: ${NVD:-none}"

# ---- 1. probe ---------------------------------------------------------------
"$CUCAP" cupti probe --list-metrics >"$OUT/probe.txt" 2>"$OUT/probe.err"
prc=$?
grep '^probe:' "$OUT/probe.txt" | sed 's/^/  /'
echo "  (stall reasons and every base metric of the chip: $OUT/probe.txt)"
if [ $prc -eq 0 ] && grep -q '^probe: result: CUPTI attached' "$OUT/probe.txt"; then
  res PASS "probe: CUPTI attached" "$(grep '^probe: cupti:' "$OUT/probe.txt" | cut -c15-140)"
else
  res FAIL "probe: CUPTI attached" "exit $prc; $(grep -E 'FAILED' "$OUT/probe.txt" | head -2 | tr '\n' ' ')"
fi
grep -q '^probe: counters: allowed' "$OUT/probe.txt" &&
  res PASS "probe: counters allowed" "" ||
  res FAIL "probe: counters allowed" "$(grep '^probe: counters' "$OUT/probe.txt")"
for set in sol full; do
  l=$(grep "^probe: metrics $set: .* known" "$OUT/probe.txt" | head -1)
  p=$(grep "^probe: metrics $set: .*counter pass" "$OUT/probe.txt" | head -1)
  if [ -n "$l" ] && [ -n "$p" ]; then res PASS "probe: $set metrics" "${l#probe: } | ${p#probe: metrics $set: }"
  else res FAIL "probe: $set metrics" "${l:-no line} ${p:-}"; fi
done
n=$(grep -c '^stall: ' "$OUT/probe.txt")
[ "$n" -gt 0 ] && res PASS "probe: PC sampling stall reasons" "$n" ||
  res FAIL "probe: PC sampling stall reasons" "$(grep '^probe: pc sampling' "$OUT/probe.txt")"
grep -q '^probe: sass metric: smsp__sass_inst_executed ok' "$OUT/probe.txt" &&
  res PASS "probe: SASS metrics" "$(grep '^probe: sass metric' "$OUT/probe.txt" | tr '\n' ' ' | cut -c1-150)" ||
  res FAIL "probe: SASS metrics" "$(grep '^probe: sass' "$OUT/probe.txt" | tr '\n' ' ' | cut -c1-150)"

# ---- 2. CUPTI absent ------------------------------------------------------------
if [ -x "$APPS/rt_profile" ]; then
  mkdir -p "$OUT/rt_profile"
  "$CUCAP" record -o "$OUT/rt_profile/cap.fb" -- "$APPS/rt_profile" >"$OUT/rt_profile/rec.out" 2>"$OUT/rt_profile/rec.err"
  CUCAP_LOG_LEVEL=warn "$CUCAP" cupti profile "$OUT/rt_profile/cap.fb" --cupti /nonexistent/libcupti.so.13 \
    >"$OUT/nocupti.out" 2>"$OUT/nocupti.err"
  rc=$?
  [ $rc -eq 3 ] && grep -q 'cannot load CUPTI' "$OUT/nocupti.err" &&
    res PASS "no CUPTI: exit 3 + message" "$(tail -1 "$OUT/nocupti.err" | cut -c1-120)" ||
    res FAIL "no CUPTI: exit 3 + message" "exit $rc $(tail -1 "$OUT/nocupti.err")"
fi

# ---- 3. every section on small programs ----------------------------------------
# check.py: PASS/FAIL lines from one profile's JSON
cat >"$OUT/check.py" <<'PYEOF'
import json, sys
name, path, expect, lineinfo, nvd, folded = sys.argv[1:7]
expect = int(expect); lineinfo = lineinfo == "1"; nvd = nvd == "1"
d = json.load(open(path))
S = d["sections"]; K = d["kernels"]; M = d["metric_names"]
out = []
def res(ok, what, detail=""):
    out.append("%-5s %-40s %s" % ("PASS" if ok else "FAIL", (name + ": " + what)[:40], detail))
def info(what, detail):
    out.append("%-5s %-40s %s" % ("INFO", (name + ": " + what)[:40], detail))
for s, v in S.items():
    info("section " + s, "%s, %d pass(es), %.3f s: %s" % (v["state"], v["passes"], v["wall_s"], v["note"][:200]))
tl = S["timeline"]["state"] in ("collected", "partial")
if expect >= 0:
    res(tl and len(K) == expect, "timeline == launches", "%d kernel executions, %d kernel launches recorded" % (len(K), expect))
else:
    res(tl and len(K) > 0, "timeline (graph launches)", "%d kernel executions" % len(K))
res(all(k["ntimes"] >= 1 and (k["dur_median_ns"] or 0) > 0 for k in K), "timeline durations", "")
core = [i for i, m in enumerate(M) if m in ("gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active")]
have = [k for k in K if k.get("metrics") and all(k["metrics"][i] is not None for i in core)]
G = d.get("graph_launches", [])
if expect >= 0 or not G:
    res(S["metrics"]["state"] == "collected" and len(core) == 4 and len(have) == len(K),
        "metrics for every kernel", "%d of %d kernels, %d metrics (%d core)" % (len(have), len(K), len(M), len(core)))
else:
    # CUPTI's auto range failed on graph launches: those are measured as a
    # whole (one user range per graph launch); every other kernel per kernel
    grec = {g["rec_index"] for g in G if all(g["metrics"][i] is not None for i in core)}
    cov = [k for k in K if k in have or k["rec_index"] in grec]
    res(S["metrics"]["state"] == "partial" and len(core) == 4 and len(cov) == len(K),
        "metrics (graph launches as a whole)", "%d of %d kernels per kernel, %d graph launches measured "
        "as a whole covering the rest: %s" % (len(have), len(K), len(G), S["metrics"]["note"][-200:]))
T = d.get("timing")
if T:
    info("timing", "attach %.2f s, begin %.2f s; passes: %s; resolve %.2f s (nvdisasm %d runs %.2f s, "
         "%d line queries %.2f s)" % (T["attach_s"], T["begin_s"],
         ", ".join("%s %.2f+%.2f s" % (n, v["passes_s"], v["between_passes_s"]) for n, v in T["sections"].items() if v["passes_s"]),
         T["resolve_s"], T["nvdisasm_runs"], T["nvdisasm_s"], T["source_line_queries"], T["source_lines_s"]))
ti = M.index("gpu__time_duration.sum") if "gpu__time_duration.sum" in M else -1
if ti >= 0 and have:
    r = sorted((k["metrics"][ti] / k["dur_median_ns"]) for k in have if k["dur_median_ns"])
    df = sorted((k["metrics"][ti] - k["dur_median_ns"]) for k in have if k["dur_median_ns"])
    info("range/timeline duration", "median ratio %.3f (p10 %.3f, p90 %.3f), range minus timeline median %.0f ns "
         "(range: L2 flushed before it, its own start/stop inside; timeline: warm caches)" % (
         r[len(r)//2], r[len(r)//10], r[(9*len(r))//10], df[len(df)//2]))
P = d["pc_samples"]; sites = d["pc_sites"]
nsamp = sum(r[3] for r in P)
res(S["pc-sampling"]["state"] in ("collected", "partial") and nsamp > 0, "PC samples",
    "%d samples at %d instructions of %d kernels" % (nsamp, len(sites), len({r[0] for r in P})))
withline = [s for s in sites if s["file"]]
if lineinfo:
    own = [s for s in withline if s["file"].endswith("rt_profile.cu")]
    res(len(own) > 0, "source lines (-lineinfo)", "%d of %d instructions with a line, %d in rt_profile.cu; e.g. %s" %
        (len(withline), len(sites), len(own), (own[0]["file"] + ":" + str(own[0]["line"])) if own else "-"))
    inl = [s for s in sites if s["inline"]]
    info("inline chains", "%d instructions, e.g. %s" % (len(inl), inl[0]["inline"] if inl else "-"))
else:
    info("source lines", "%d of %d instructions" % (len(withline), len(sites)))
if nvd:
    sass = [s for s in sites if s["sass"]]
    res(len(sites) > 0 and len(sass) >= 0.9 * len(sites), "SASS text (nvdisasm)",
        "%d of %d instructions, e.g. %s" % (len(sass), len(sites), sass[0]["sass"] if sass else "-"))
sm = [s for s in sites if "inst_executed" in s]
res(S["sass-metrics"]["state"] == "collected" and len(sm) > 0, "SASS metrics",
    "%d sampled instructions with executed counts" % len(sm))
nf = sum(1 for _ in open(folded)) if folded != "-" else 0
res(nf > 0, "folded stacks", "%d distinct instruction-level stacks" % nf)
print("\n".join(out))
PYEOF

count_launches() { # capture -> kernel launches recorded (result 0, not host functions)
  "$CUCAP" dump "$1" --json --body Launch 2>/dev/null | "$PY" -c '
import json, sys
n = 0
for l in sys.stdin:
    r = json.loads(l)
    if r.get("body_type") == "Launch" and r.get("result", 0) == 0 and r["body"].get("kind", "Kernel") != "HostFunc":
        n += 1
print(n)'
}

profile_app() { # name graph(0/1) lineinfo(0/1) cmd...
  local name=$1 graph=$2 li=$3; shift 3
  local w=$OUT/$name; mkdir -p "$w"
  if [ ! -e "$w/cap.fb" ]; then
    if ! "$CUCAP" record -o "$w/cap.fb" -- "$@" >"$w/rec.out" 2>"$w/rec.err"; then
      res FAIL "$name: record" "$(tail -1 "$w/rec.err")"; return; fi
  fi
  local nk=-1
  [ "$graph" = 0 ] && nk=$(count_launches "$w/cap.fb")
  local t0 t1
  t0=$(date +%s.%N)
  "$CUCAP" cupti profile "$w/cap.fb" --metrics=sol --sass --json "$w/profile.json" \
    --folded "$w/folded.txt" >"$w/profile.out" 2>"$w/profile.err"
  local rc=$?
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ] || [ ! -s "$w/profile.json" ]; then
    res FAIL "$name: profile" "exit $rc: $(grep -E 'error|cucap cupti' "$w/profile.err" | tail -2 | tr '\n' ' ' | cut -c1-200)"
    return
  fi
  res PASS "$name: profile" "exit 0 in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s ($(grep '^replay:' "$w/profile.out" | cut -c1-90))"
  "$PY" "$OUT/check.py" "$name" "$w/profile.json" "$nk" "$li" "$([ -n "$NVD" ] && echo 1 || echo 0)" \
    "$w/folded.txt" >"$w/check.txt" 2>&1 || echo "FAIL  $name: check.py crashed" >>"$w/check.txt"
  while IFS= read -r line; do
    st=${line%% *}
    printf '%s\n' "$line" | tee -a "$SUMMARY"
    case $st in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; esac
  done <"$w/check.txt"
}

if [ -x "$APPS/rt_profile" ]; then profile_app rt_profile 0 1 "$APPS/rt_profile"
else res SKIP rt_profile "not built"; fi
for a in ${PROFILE_APPS:-drv_basic drv_streams drv_jit rt_multistream rt_threads rt_cublas rt_static}; do
  if [ -x "$APPS/$a" ]; then profile_app "$a" 0 0 "$APPS/$a"; else res SKIP "$a" "not built"; fi
done
for a in ${PROFILE_GRAPH_APPS:-drv_graph drv_graph_explicit rt_graph}; do
  if [ -x "$APPS/$a" ]; then profile_app "$a" 1 0 "$APPS/$a"; else res SKIP "$a" "not built"; fi
done
HAVE_TORCH=0
$PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && HAVE_TORCH=1
if [ $HAVE_TORCH = 1 ]; then
  profile_app torch_mlp 0 0 "$PY" "$ROOT/tests/apps/torch_mlp.py" --steps 5
  # the framework programs users record: every section on a training step
  # (cuDNN under AMP and channels_last; attention and AdamW)
  if $PY -c 'import torchvision' 2>/dev/null; then
    profile_app torch_cnn 0 0 "$PY" "$ROOT/tests/apps/torch_cnn.py" --steps 2
  else
    res SKIP torch_cnn "no torchvision"
  fi
  # the same 3-step recording section 5 takes its instruction-level stacks from
  profile_app torch_transformer 0 0 "$PY" "$ROOT/tests/apps/torch_transformer.py" --steps 3
else
  res SKIP torch_mlp "no torch with CUDA"
fi

# ---- 4. rt_profile: bottleneck inputs, full set, loop, range -------------------
W=$OUT/rt_profile
if [ -s "$W/profile.json" ]; then
  "$PY" - "$W/profile.json" <<'PYEOF' | tee -a "$SUMMARY"
import json, sys
d = json.load(open(sys.argv[1]))
M = d["metric_names"]
def col(n): return M.index(n) if n in M else None
sm, dr, oc = (col("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
              col("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
              col("sm__warps_active.avg.pct_of_peak_sustained_active"))
def vals(pred):
    ks = [k for k in d["kernels"] if pred(k["name"]) and k.get("metrics")]
    if not ks or sm is None or dr is None: return None
    f = lambda i: sum(k["metrics"][i] or 0 for k in ks) / len(ks)
    return f(sm), f(dr), f(oc) if oc is not None else -1
def line(ok, what, v, rule):
    st = "PASS" if ok else "FAIL"
    print("%-5s %-40s SM %.1f%% DRAM %.1f%% occupancy %.1f%% (%s)" % (st, what, v[0], v[1], v[2], rule))
v = vals(lambda n: "axpy" in n)
if v: line(v[1] >= 60 and v[1] > v[0], "rt_profile: axpy memory-bound", v, "DRAM >= 60% and > SM")
v = vals(lambda n: "fma_loop" in n)
if v: line(v[0] >= 60 and v[1] < 20, "rt_profile: fma_loop compute-bound", v, "SM >= 60%, DRAM < 20%")
v = vals(lambda n: "tiny" in n)
if v: line(v[0] < 5 and v[1] < 5, "rt_profile: tiny latency-bound", v, "SM and DRAM < 5%")
v = vals(lambda n: "gemm" in n.lower() and "axpy" not in n)
if v: line(v[0] >= 50, "rt_profile: cuBLAS SGEMM compute-bound", v, "SM >= 50%")
for s in d["kernel_summaries"][:4]:
    print("INFO  %-40s stalls %s | lines %s" % (("rt_profile: " + s["demangled"])[:40],
          ", ".join("%s %d" % (k.replace("smsp__pcsamp_warps_issue_stalled_", ""), v) for k, v in list(s["top_stalls"].items())[:3]),
          ", ".join("%s %d" % (k.split("/")[-1], v) for k, v in list(s["hot_lines"].items())[:2])))
PYEOF
  fail=$((fail + $(grep -c '^FAIL  rt_profile: \(axpy\|fma\|tiny\|cuBLAS\)' "$SUMMARY")))
  pass=$((pass + $(grep -c '^PASS  rt_profile: \(axpy\|fma\|tiny\|cuBLAS\)' "$SUMMARY")))
  # --metrics=full: which names came back, how many passes
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=full --no-pc --json "$W/full.json" >"$W/full.out" 2>"$W/full.err"
  rc=$?
  if [ $rc -eq 0 ] && "$PY" - "$W/full.json" >"$W/full.txt" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1])); M = d["metric_names"]; K = d["kernels"]; S = d["sections"]["metrics"]
null = [m for i, m in enumerate(M) if any(k.get("metrics") is None or k["metrics"][i] is None for k in K)]
print("%s, %d metrics, %d passes, %.2f s; null for some kernel: %s" % (S["state"], len(M), S["passes"], S["wall_s"], ",".join(null) or "none"))
sys.exit(0 if S["state"] == "collected" and not null else 1)
PYEOF
  then res PASS "rt_profile: --metrics=full" "$(cat "$W/full.txt")"
  else res FAIL "rt_profile: --metrics=full" "exit $rc $(cat "$W/full.txt" 2>/dev/null) $(grep -E 'error|warning: profile' "$W/full.err" | head -2 | tr '\n' ' ')"; fi
  # `replay --profile --metrics=full` collects the same set as `cupti
  # profile --metrics=full` (one definition, profiler_common.c)
  "$CUCAP" replay "$W/cap.fb" --profile --metrics=full --json >"$W/rfull.json" 2>"$W/rfull.err"
  rc=$?
  if [ $rc -eq 0 ] && "$PY" - "$W/full.json" "$W/rfull.json" >"$W/rfull.txt" <<'PYEOF'
import json, sys
want = set(json.load(open(sys.argv[1]))["metric_names"])
L = json.load(open(sys.argv[2]))["profile"]["launches"]
got = set(m for l in L for m in (l.get("metrics") or {}))
print("%d metrics from replay --profile, %d from cupti profile; only replay: %s; only cupti: %s" %
      (len(got), len(want), ",".join(sorted(got - want)) or "none", ",".join(sorted(want - got)) or "none"))
sys.exit(0 if got == want else 1)
PYEOF
  then res PASS "rt_profile: replay --profile full = cupti" "$(cat "$W/rfull.txt")"
  else res FAIL "rt_profile: replay --profile full = cupti" "exit $rc $(cat "$W/rfull.txt" 2>/dev/null) $(grep -E 'error' "$W/rfull.err" | head -2 | tr '\n' ' ')"; fi
  # --loop 5: per-launch median and spread
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=none --no-pc --loop 5 --json "$W/loop.json" >"$W/loop.out" 2>"$W/loop.err"
  if "$PY" - "$W/loop.json" >"$W/loop.txt" <<'PYEOF'
import json, sys
K = json.load(open(sys.argv[1]))["kernels"]
sp = sorted((k["dur_max_ns"] - k["dur_min_ns"]) / k["dur_median_ns"] * 100 for k in K if k["dur_median_ns"])
if not sp:
    print("no kernels"); sys.exit(1)
print("%d kernels x 5 passes; spread (max-min)/median: median %.1f%%, max %.1f%%" % (len(K), sp[len(sp)//2], sp[-1]))
sys.exit(0 if all(k["ntimes"] == 5 for k in K) else 1)
PYEOF
  then res PASS "rt_profile: --loop 5" "$(cat "$W/loop.txt")"
  else res FAIL "rt_profile: --loop 5" "$(cat "$W/loop.txt" 2>/dev/null) $(tail -1 "$W/loop.err")"; fi
  # settles a CUPTI question: are correlation ids given without DRIVER
  # activity records? (the engine enables them; INFO only)
  CUCAP_CUPTI_NO_API_RECORDS=1 "$CUCAP" cupti profile "$W/cap.fb" --metrics=none --no-pc \
    --json "$W/noapi.json" >"$W/noapi.out" 2>"$W/noapi.err"
  n=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["kernels"]))' "$W/noapi.json" 2>/dev/null)
  echo "INFO  rt_profile: without DRIVER activity     ${n:-?} kernels attributed of $(count_launches "$W/cap.fb") launches ($(grep -c 'matched no replayed op' "$W/noapi.err") warning)" | tee -a "$SUMMARY"
  # --range: launches 3..5 only (the second axpy, fma_loop, tiny)
  "$CUCAP" cupti profile "$W/cap.fb" --range 3:3 --json "$W/range.json" >"$W/range.out" 2>"$W/range.err"
  if "$PY" -c '
import json, sys
K = json.load(open(sys.argv[1]))["kernels"]
print(len(K), [k["launch_index"] for k in K])
sys.exit(0 if [k["launch_index"] for k in K] == [3, 4, 5] and all(k.get("metrics") for k in K) else 1)' \
      "$W/range.json" >"$W/range.txt" 2>&1
  then res PASS "rt_profile: --range 3:3" "$(cat "$W/range.txt")"
  else res FAIL "rt_profile: --range 3:3" "$(cat "$W/range.txt") $(tail -1 "$W/range.err")"; fi
  # --clock-control: the profile above ran at base (the default); one at
  # none right after it must run boosted again, which also proves the lock
  # was released (it outlives the process that made it)
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=sol --no-pc --clock-control=none \
    --json "$W/clknone.json" >"$W/clknone.out" 2>"$W/clknone.err"
  if "$PY" - "$W/profile.json" "$W/clknone.json" >"$W/clk.txt" 2>&1 <<'PYEOF'
import json, statistics, sys
def clk(p):
    d = json.load(open(p)); M = d["metric_names"]
    i = M.index("sm__cycles_elapsed.avg.per_second")
    v = [k["metrics"][i] for k in d["kernels"] if k.get("metrics") and k["metrics"][i]]
    return d["env"].get("clocks", "?"), statistics.median(v) / 1e6, min(v) / 1e6, max(v) / 1e6
(eb, b, blo, bhi), (en, n, nlo, nhi) = clk(sys.argv[1]), clk(sys.argv[2])
print("SM clock: base %.0f MHz (%.0f-%.0f; clocks %s), none %.0f MHz (%.0f-%.0f; clocks %s)" %
      (b, blo, bhi, eb, n, nlo, nhi, en))
sys.exit(0 if eb.startswith("locked") and b < 0.9 * n and en.startswith("not controlled") else 1)
PYEOF
  then res PASS "rt_profile: --clock-control" "$(cat "$W/clk.txt")"
  else res FAIL "rt_profile: --clock-control" "$(cat "$W/clk.txt") $(grep -E 'clock' "$W/profile.err" "$W/clknone.err" | head -2 | tr '\n' ' ')"; fi
fi

# ---- 4b. rt_tensor: a tensor-core GEMM (wgmma on sm_90) ------------------------
# The HMMA pipe counter misses Hopper's wgmma: tensor-pipe use must come from
# sm__pipe_tensor_cycles_active, and the GEMM must class compute (tensor).
# With ncu present, the same counter read by ncu on the original program is
# the reference (within 5% relative or 2 points, the accuracy rule).
TM=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
if [ -x "$APPS/rt_tensor" ]; then
  W=$OUT/rt_tensor; mkdir -p "$W"
  "$CUCAP" record -o "$W/cap.fb" -- "$APPS/rt_tensor" >"$W/rec.out" 2>"$W/rec.err"
  "$CUCAP" replay "$W/cap.fb" --profile --json >"$W/rp.json" 2>"$W/rp.err"
  rc=$?
  NCSV=""
  if command -v "${NCU:-ncu}" >/dev/null 2>&1; then
    "${NCU:-ncu}" --metrics "$TM" --csv --page raw \
      --print-units base --print-kernel-base mangled --clock-control none --cache-control all \
      "$APPS/rt_tensor" >"$W/ncu.csv" 2>"$W/ncu.err" && NCSV=$W/ncu.csv
  fi
  if [ $rc -eq 0 ] && "$PY" - "$W/rp.json" "$TM" "$NCSV" >"$W/check.txt" 2>&1 <<'PYEOF'
import csv, json, sys
d = json.load(open(sys.argv[1]))["profile"]; tm = sys.argv[2]
# the GEMM is the longest kernel (cuBLAS names it sm90_xmma_gemm_*, *gemm*
# or nvjet_* depending on its version)
if not d["kernels"]:
    print("no kernels"); sys.exit(1)
k = max(d["kernels"], key=lambda k: k["total_ns"])
c = k["class"]
ok = c["class"] == "compute" and c["unit"] == "tensor"
msg = "%s: tensor %s%%, SM %s%%, class %s (%s)" % (k["short_name"][:40], k["tensor_pct"], k["sm_pct"], c["class"], c["unit"])
if sys.argv[3]:
    rows = list(csv.reader(open(sys.argv[3], errors="replace")))
    hi = next((i for i, r in enumerate(rows) if "Kernel Name" in r and tm in r), None)
    vals = [] if hi is None else [float(r[rows[hi].index(tm)]) for r in rows[hi + 1:]
            if len(r) == len(rows[hi]) and r[0].strip().isdigit() and r[rows[hi].index("Kernel Name")] == k["kernel"]]
    if vals:
        ref = sorted(vals)[len(vals) // 2]
        t = k["tensor_pct"]
        agree = t is not None and (abs(t - ref) <= 2 or abs(t - ref) <= 0.05 * abs(ref))
        msg += "; ncu %.1f%% (%s)" % (ref, "agrees" if agree else "DISAGREES")
        ok = ok and agree
    else:
        msg += "; ncu gave no value for it"
print(msg)
sys.exit(0 if ok else 1)
PYEOF
  then res PASS "rt_tensor: GEMM compute (tensor)" "$(head -1 "$W/check.txt")"
  else res FAIL "rt_tensor: GEMM compute (tensor)" "exit $rc $(head -1 "$W/check.txt" 2>/dev/null) $(tail -1 "$W/rp.err")"; fi
else res SKIP rt_tensor "not built"; fi

# ---- 5. transformer: distinct instruction-level stacks --------------------------
if [ $HAVE_TORCH = 1 ] && [ -f "$ROOT/tests/apps/torch_transformer.py" ]; then
  W=$OUT/torch_transformer; mkdir -p "$W"
  # section 3 recorded it already (same program, same steps)
  if [ -s "$W/cap.fb" ] || "$CUCAP" record -o "$W/cap.fb" -- "$PY" "$ROOT/tests/apps/torch_transformer.py" --steps 3 \
       >"$W/rec.out" 2>"$W/rec.err"; then
    for period in "${CUCAP_PC_PERIOD:-10}"; do
      t0=$(date +%s.%N)
      "$CUCAP" cupti profile "$W/cap.fb" --metrics=none --pc-period "$period" --json "$W/pc$period.json" \
        --folded "$W/folded$period.txt" >"$W/pc$period.out" 2>"$W/pc$period.err"
      rc=$?; t1=$(date +%s.%N)
      nst=$( [ -f "$W/folded$period.txt" ] && wc -l <"$W/folded$period.txt" || echo 0)
      note=$("$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["sections"]["pc-sampling"]; print(s["state"], s["note"][:160])' "$W/pc$period.json" 2>/dev/null)
      if [ $rc -eq 0 ] && [ "$nst" -ge 10000 ]; then
        res PASS "transformer: >= 10000 distinct stacks" "$nst at period 2^$period in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s; $note"
      else
        res FAIL "transformer: >= 10000 distinct stacks" "$nst at period 2^$period (exit $rc) $note $(grep -E 'error' "$W/pc$period.err" | tail -1 | cut -c1-150)"
      fi
    done
  else
    res FAIL "transformer: record" "$(tail -1 "$W/rec.err")"
  fi
else
  res SKIP "transformer" "no torch with CUDA or no tests/apps/torch_transformer.py"
fi

# ---- 6. through `replay --profile` (the CUPTI backend, profile/cupti/profile_cupti.c) --
if "$CUCAP" replay --help 2>&1 | grep -q -- '--profile' && [ -e "$OUT/rt_profile/cap.fb" ]; then
  W=$OUT/rt_profile
  "$CUCAP" replay "$W/cap.fb" --profile --pc-sampling --sass-metrics --loop 3 --json \
    --folded "$W/rp_folded.txt" >"$W/rp.json" 2>"$W/rp.err"
  rc=$?
  if [ $rc -eq 0 ] && "$PY" - "$W/rp.json" >"$W/rp.txt" 2>&1 <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))["profile"]
S = d["sections"]; L = [l for l in d["launches"] if l["kernel"]]
print("; ".join("%s %s (%s)" % (k, v["state"], v["source"]) for k, v in S.items()))
print("%d launches, %d with 3 timings, %d with metrics, %d PC sample rows, %d SASS rows, classes %s" % (
    len(L), sum(len(l["timings"]) == 3 for l in L), sum(len(l["metrics"]) > 0 for l in L),
    len(d["pc_samples"]), len(d["sass_metrics"]), sorted({(k.get("class") or {}).get("class", "?") if isinstance(k.get("class"), dict) else str(k.get("class")) for k in d["kernels"]})))
ok = (S["timeline"]["state"] == "ok" and S["timeline"]["source"] == "cupti-activity"
      and S["metrics"]["state"] in ("ok", "partial") and S["pc_sampling"]["state"] in ("ok", "partial")
      and all(len(l["timings"]) == 3 and l["metrics"] for l in L) and d["pc_samples"])
sys.exit(0 if ok else 1)
PYEOF
  then res PASS "replay --profile (CUPTI backend)" "$(tr '\n' ' ' <"$W/rp.txt" | cut -c1-250)"
  else res FAIL "replay --profile (CUPTI backend)" "exit $rc $(tr '\n' ' ' <"$W/rp.txt" 2>/dev/null | cut -c1-200) $(tail -1 "$W/rp.err")"; fi
  "$CUCAP" replay "$W/cap.fb" --profile >"$W/rp_text.txt" 2>&1
  sed -n '/^top kernels/,/^$/p' "$W/rp_text.txt" | head -12 | sed 's/^/  /'
fi

# ---- 7. two profilers at once (CUPTI's self-teardown): no crash, the message --
# names the other profiler. Two `cucap cupti profile` of rt_profile at the
# same time: the GPU's counters serve one; whichever loses must exit 0 (or
# 3 naming the cause), never die on a signal, and say HARDWARE_BUSY /
# "another process is profiling this GPU" where a section lost.
if [ -e "$OUT/rt_profile/cap.fb" ]; then
  W=$OUT/rt_profile
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=full --sass --json "$W/dup1.json" >"$W/dup1.out" 2>"$W/dup1.err" &
  p1=$!
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=full --sass --json "$W/dup2.json" >"$W/dup2.out" 2>"$W/dup2.err" &
  p2=$!
  wait $p1; r1=$?; wait $p2; r2=$?
  msg=$(cat "$W/dup1.json" "$W/dup2.json" 2>/dev/null | "$PY" -c '
import json, sys
dec = json.JSONDecoder(); s = sys.stdin.read(); i = 0; out = []
while i < len(s):
    while i < len(s) and s[i].isspace(): i += 1
    if i >= len(s): break
    d, i = dec.raw_decode(s, i)
    for n, v in d["sections"].items():
        if v["state"] in ("failed", "unavailable", "partial"):
            out.append("%s: %s" % (n, v["note"][:160]))
print(" | ".join(out) if out else "both collected everything")' 2>&1)
  if [ $r1 -lt 128 ] && [ $r2 -lt 128 ] && { [ $r1 -eq 0 ] || [ $r1 -eq 3 ]; } && { [ $r2 -eq 0 ] || [ $r2 -eq 3 ]; } &&
     { ! grep -q "HARDWARE_BUSY\|stopped working" <<<"$msg" || grep -q "another process is profiling this GPU" <<<"$msg"; }; then
    res PASS "two profilers at once" "exit $r1/$r2; $(cut -c1-300 <<<"$msg")"
  else
    res FAIL "two profilers at once" "exit $r1/$r2 (>= 128: killed by a signal); $(cut -c1-300 <<<"$msg") $(grep -h 'internal error' "$W/dup1.err" "$W/dup2.err" | head -1)"
  fi
fi

echo
echo "== profile_check: $pass passed, $fail failed (details in $OUT)"
[ $fail -eq 0 ]
