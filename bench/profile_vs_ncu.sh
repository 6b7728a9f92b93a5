#!/usr/bin/env bash
# bench/profile_vs_ncu.sh BUILD OUT - cucap's CUPTI profile against Nsight
# Compute on the same GPU, in one run. Prints one line per figure:
#   BENCH <name> <value> <unit> target=<...> PASS|FAIL
# (a) accuracy: per-kernel duration and SOL metrics (SM %, DRAM %, achieved
#     occupancy) from `cucap cupti profile` on a capture vs `ncu` run on the
#     ORIGINAL program (--csv --page raw --print-units base), kernels matched
#     by mangled name and occurrence (launch order); a value agrees when
#     within +-5 % relative or +-2 percentage points (percentages), +-5 %
#     (durations). Target: >= 90 % of the kernels agree, per metric.
#     ncu runs NCU_RUNS (5) times: the reference is each kernel's median
#     over them, and how often the runs agree with each other by the same
#     rule is printed (INFO): ncu's durations of microsecond kernels are
#     quantized to 32 ns and move by a few ticks from run to run, so two ncu
#     runs disagree on part of them, a floor no profiler can beat against a
#     single ncu run. With 4 or more runs, the runs are also split in two
#     halves, each reduced to its median, and the halves compared (every
#     split; INFO): how often two averaged ncu references agree with each
#     other, the floor against the median. cucap profiles the capture
#     twice; the second run is compared with the first by the same rule
#     (INFO): cucap's own run-to-run floor. The figures so far are in
#     docs/bench-log.md (runs J1, M1).
#     Like with like: both sides flush the caches before each kernel (ncu
#     --cache-control all, cucap --cache=flush) and run with the same clock
#     control, CLOCKS (base, the default of both tools: the GPU's clocks
#     locked to base while measuring; none: left alone, boosting). At base
#     ncu agrees with itself far more often on microsecond durations
#     (docs/bench-log.md, "Clock control"). The duration compared is the same counter on both
#     sides: gpu__time_duration.sum of a range around one kernel after an L2
#     flush. cucap's per-launch timeline duration (CUPTI activity records,
#     warm caches, no range around the kernel) is compared too, as INFO: on
#     kernels of a few microseconds it is shorter (the range's own
#     start/stop is not in it) and on memory-bound kernels shorter still
#     (their data is in L2 from the kernel before); see docs/design.md
#     ("Durations reported").
# (b) speed: wall time of `ncu --set full` on the original program vs
#     `cucap cupti profile --metrics=full --sass` with PC sampling on the
#     capture (recording, done once, not counted), for each K in K_SPEED:
#     every launch among the first K kernels (ncu --launch-count K, cucap
#     --range 0:K), or with K=all every launch of the capture against every
#     launch of the program, the issue's own terms. ncu's full set includes
#     the Source Counters and Warp State sections (warp-stall PC sampling,
#     executed instructions per SASS instruction), hence cucap's
#     PC-sampling and SASS-metrics passes; the counters-only time (--no-pc,
#     no --sass: less work than ncu's) is still printed, INFO. Target:
#     >= 20x. cucap's own timing breakdown is
#     printed (INFO). With two sizes or more, each tool's time is fitted as
#     fixed + per-kernel cost, and the size from which cucap is 20x faster
#     is printed (INFO): cucap's fixed cost (process, cuInit, CUPTI set-up,
#     the range profiler's first Starts, the timeline pass) is about ncu's
#     cost for one kernel, so a figure on a few kernels says little about a
#     capture of a training step. NCU_TIMEOUT (seconds, 0 = none) cuts ncu
#     off; the line then gives a lower bound (">=").
# (c) timeline overhead: `cucap cupti profile --metrics=none --no-pc --loop 5`
#     vs `cucap replay --loop 5` on the same capture (replay wall time, as
#     both report it), medians of TL_RUNS (9) alternating runs of each:
#     module loads are most of either's time on torch_mlp and vary from run
#     to run by more than the timeline's own cost, so few pairs give a
#     ratio that moves a lot; 9 pairs are the default (docs/bench-log.md,
#     runs I4, I5, J1, J3). Target: <= 1.25x.
# Programs: tests/apps/torch_mlp.py --steps 5 (when torch has CUDA),
# tests/apps/rt_profile, and on request torch_transformer.py --steps 3 and
# torch_cnn.py --steps 2 (ResNet-18 with cuDNN; needs torchvision).
# Several minutes with the defaults (mostly ncu's). Knobs: K_ACC (kernels
# compared, default 60), K_SPEED (default 30; a list, "all" for every launch),
# MLP_STEPS (torch_mlp's --steps, default 5), NCU_TIMEOUT, TL_RUNS (default 9), NCU_RUNS
# (default 5), CLOCKS (base or none, both tools' --clock-control in the
# accuracy part; the speed part runs both at their default, base), NCU
# (default ncu), PROGRAMS (space-separated subset of: torch_mlp transformer
# cnn rt_profile; default "torch_mlp rt_profile"), PARTS (any of: accuracy speed
# timeline; default all three), NCU_REPLAY (kernel, the default: ncu saves and
# restores memory around each kernel and replays it alone; application: ncu
# runs the whole program once per pass, as cucap replays the whole capture
# once per pass - the like-with-like reference for the accuracy part).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-${CUCAP_BUILD:-$ROOT/build}}
OUT=${2:-${OUT:-$(mktemp -d)}}
CUCAP=$BUILD/tools/cucap
APPS=$BUILD/tests/apps
PY=${PYTHON:-python3}
NCU=${NCU:-ncu}
K_ACC=${K_ACC:-60}
K_SPEED=${K_SPEED:-30}
MLP_STEPS=${MLP_STEPS:-5}
TL_RUNS=${TL_RUNS:-9}
NCU_RUNS=${NCU_RUNS:-5}
NCU_REPLAY=${NCU_REPLAY:-kernel}
CLOCKS=${CLOCKS:-base}
PARTS=${PARTS:-accuracy speed timeline}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
export CUCAP_LOG_LEVEL=${CUCAP_LOG_LEVEL:-info}
SOL=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
[ -x "$CUCAP" ] || { echo "no cucap at $CUCAP"; exit 2; }
command -v "$NCU" >/dev/null 2>&1 || { echo "BENCH profile_vs_ncu 0 - target=ncu-present FAIL (no $NCU)"; exit 1; }
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", (b>0)?a/b:0}'; }  # a/b, 0 when b is 0
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }

declare -A CMD
HAVE_TORCH=0
$PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && HAVE_TORCH=1
if [ $HAVE_TORCH = 1 ]; then
  CMD[torch_mlp]="$PY $ROOT/tests/apps/torch_mlp.py --steps $MLP_STEPS"
  [ -f "$ROOT/tests/apps/torch_transformer.py" ] &&
    CMD[transformer]="$PY $ROOT/tests/apps/torch_transformer.py --steps 3"
  $PY -c 'import torchvision' 2>/dev/null &&
    CMD[cnn]="$PY $ROOT/tests/apps/torch_cnn.py --steps 2"
fi
[ -x "$APPS/rt_profile" ] && CMD[rt_profile]="$APPS/rt_profile"
PROGRAMS=${PROGRAMS:-torch_mlp rt_profile}

# compare.py: matches ncu raw CSV rows to cucap kernels, prints BENCH lines
cat >"$OUT/compare.py" <<'PYEOF'
import csv, json, statistics, sys
prog, cucap_json, ncu_csvs = sys.argv[1], sys.argv[2], sys.argv[3:]
# "a.json,b.json": a is graded; b, a second cucap run, is compared with a
cucap_json, _, cucap_json2 = cucap_json.partition(",")
def num(s):
    try:
        return float(s.replace(",", ""))
    except Exception:
        return None
# ncu prints its own lines (==PROF==, the program's output) around the CSV:
# the header row names "ID" and "Kernel Name"; with --page raw a units row
# follows (its ID cell is empty); data rows have a numeric ID
def read_ncu(path):
    rows = list(csv.reader(open(path, errors="replace")))
    hdr, units, data, start = None, [], [], 0
    for i, r in enumerate(rows):
        if "Kernel Name" in r and "ID" in r:
            hdr = r
            start = i + 1
            if start < len(rows) and len(rows[start]) == len(hdr) and \
                    not rows[start][hdr.index("ID")].strip():
                units = rows[start]
                start += 1
            break
    if hdr is None:
        return None, [], []
    for r in rows[start:]:
        if len(r) != len(hdr) or not r[hdr.index("ID")].strip().isdigit():
            continue
        data.append(dict(zip(hdr, r)))
    data.sort(key=lambda r: int(r["ID"]))  # launch order
    return hdr, units, data
runs = []
for path in ncu_csvs:
    h, u, rows_ = read_ncu(path)
    if h is None:
        print("INFO  %s: no ncu table in %s (left out)" % (prog, path))
    else:
        runs.append((h, u, rows_))
if not runs:
    print("BENCH accuracy_%s_parse 0 - target=ncu-csv FAIL (no header in %s)" % (prog, " ".join(ncu_csvs)))
    sys.exit(1)
hdr, units, data = runs[0]
d = json.load(open(cucap_json))
M = d["metric_names"]
K = d["kernels"]
M2, K2 = [], None
if cucap_json2:
    try:
        d2 = json.load(open(cucap_json2))
        M2 = d2["metric_names"]
        seen2 = {}
        K2 = {}
        for k in d2["kernels"]:
            seen2[k["name"]] = seen2.get(k["name"], 0) + 1
            K2[(k["name"], seen2[k["name"]])] = k
    except Exception as ex:
        print("INFO  %s: second cucap run unreadable (%s): not compared" % (prog, ex))
def occ_key(seq, name_of):
    seen = {}
    out = []
    for x in seq:
        n = name_of(x)
        seen[n] = seen.get(n, 0) + 1
        out.append((n, seen[n]))
    return out
nk = occ_key(data, lambda r: r["Kernel Name"])
ck = occ_key(K, lambda k: k["name"])
cidx = {key: i for i, key in enumerate(ck)}
pairs = [(data[i], K[cidx[key]]) for i, key in enumerate(nk) if key in cidx]
pair_keys = [key for key in nk if key in cidx]
unmatched = len(data) - len(pairs)
print("INFO  %s: ncu %d kernels, cucap %d, matched %d (by mangled name and occurrence), unmatched %d"
      % (prog, len(data), len(K), len(pairs), unmatched))
def unit_scale(col):
    u = units[hdr.index(col)].strip() if units and col in hdr else ""
    return {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6,
            "ms": 1e6, "second": 1e9, "s": 1e9}.get(u, 1.0)
def pct_scale(col):
    # ncu prints these in "%" (0-100), and CUPTI evaluates them in percent
    # too: no scaling; any other unit is reported, not guessed at
    u = units[hdr.index(col)].strip() if units and col in hdr else "%"
    if u not in ("%", ""):
        print("INFO  %s: ncu unit of %s is %r, not %%: compared as is" % (prog, col, u))
    return 1.0
# every ncu run keyed like the first: (mangled name, occurrence)
run_idx = [{key: r for key, r in zip(occ_key(rd, lambda r: r["Kernel Name"]), rd)}
           for _, _, rd in runs]
def ref(key, metric):
    vals = [num(ri[key][metric]) for ri in run_idx if key in ri and metric in ri[key]]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
def agrees(a, b, kind):
    """The bench's rule: within 5 % of a, or 2 points for percentages."""
    d = abs(a - b)
    return d <= 0.05 * abs(a) or (kind == "pct" and d <= 2.0)
checks = [("duration", "gpu__time_duration.sum", "dur"),
          ("sm_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "pct"),
          ("dram_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "pct"),
          ("occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "pct")]
rc = 0
worst = {}
for label, metric, kind in checks:
    if metric not in hdr or metric not in M:
        print("BENCH accuracy_%s_%s 0 %% target=>=90 FAIL (metric missing: ncu %s, cucap %s)"
              % (prog, label, metric in hdr, metric in M))
        rc = 1
        continue
    j = M.index(metric)
    scale = unit_scale(metric) if kind == "dur" else pct_scale(metric)
    agree = tot = inside = 0
    bad = []
    for (r, k), key in zip(pairs, pair_keys):
        a = ref(key, metric)
        b = k["metrics"][j] if k.get("metrics") else None
        if a is None or b is None:
            continue
        a *= scale
        tot += 1
        ok = agrees(a, b, kind)
        agree += ok
        if not ok:
            bad.append((abs(a - b) / max(abs(a), 1e-9), r["Kernel Name"][:60], a, b))
            # inside the span of ncu's own runs of that kernel (INFO only)
            vs = [num(ri[key][metric]) for ri in run_idx if key in ri and metric in ri[key]]
            vs = [v * scale for v in vs if v is not None]
            inside += bool(vs) and min(vs) <= b <= max(vs)
    pct = 100.0 * agree / tot if tot else 0.0
    st = "PASS" if tot and pct >= 90.0 else "FAIL"
    rc |= st == "FAIL"
    print("BENCH accuracy_%s_%s %.1f %% target=>=90 %s (%d of %d kernels within 5%%%s; "
          "reference: median of %d ncu run(s))"
          % (prog, label, pct, st, agree, tot, " or 2 points" if kind == "pct" else "",
             len(runs)))
    # ncu against itself, by the same rule: the noise floor of the comparison
    floor = []
    for x in range(len(run_idx)):
        for y in range(x + 1, len(run_idx)):
            n = ok = 0
            for key, rx in run_idx[x].items():
                ry = run_idx[y].get(key)
                a2 = num(rx.get(metric, "")) if ry else None
                b2 = num(ry.get(metric, "")) if ry else None
                if a2 is None or b2 is None:
                    continue
                n += 1
                ok += agrees(a2, b2, kind)
            if n:
                floor.append("%.1f" % (100.0 * ok / n))
    if floor:
        print("INFO    ncu run against ncu run, %s: %s %% of kernels agree" % (label, ", ".join(floor)))
    # two halves of ncu's runs, each reduced to its median, against each
    # other (every split): how often two averaged ncu references agree,
    # the floor of a comparison against the median of all of them
    nr = len(run_idx)
    if nr >= 4:
        import itertools
        halves = []
        for part in itertools.combinations(range(nr), nr // 2):
            rest = [x for x in range(nr) if x not in part]
            n = ok = 0
            for key in run_idx[0]:
                va = [num(run_idx[x][key].get(metric, "")) for x in part if key in run_idx[x]]
                vb = [num(run_idx[x][key].get(metric, "")) for x in rest if key in run_idx[x]]
                va = [v for v in va if v is not None]
                vb = [v for v in vb if v is not None]
                if not va or not vb:
                    continue
                n += 1
                ok += agrees(statistics.median(vb), statistics.median(va), kind)
            if n:
                halves.append(100.0 * ok / n)
        if halves:
            halves.sort()
            print("INFO    ncu halves against each other (median of %d runs vs median of the other %d, "
                  "%d splits), %s: %.1f-%.1f %%, median %.1f %%"
                  % (nr // 2, nr - nr // 2, len(halves), label, halves[0], halves[-1],
                     statistics.median(halves)))
    if bad and len(run_idx) > 1:
        print("INFO    of the %d %s value(s) outside the rule, %d lie within the span of "
              "ncu's %d runs of the same kernel" % (len(bad), label, inside, len(run_idx)))
    if K2 is not None and metric in M2:
        j2 = M2.index(metric)
        n = ok = n2 = ok2 = 0
        for key, k in zip(ck, K):
            k2 = K2.get(key)
            a2 = k["metrics"][j] if k.get("metrics") else None
            b2 = k2["metrics"][j2] if k2 and k2.get("metrics") else None
            if a2 is None or b2 is None or a2 != a2 or b2 != b2:
                continue
            n += 1
            ok += agrees(a2, b2, kind)
            r2 = ref(key, metric) if key in pair_keys else None
            if r2 is not None:
                n2 += 1
                ok2 += agrees(r2 * scale, b2, kind)
        if n:
            print("INFO    cucap run against cucap run, %s: %.1f %% of kernels agree "
                  "(the second run against ncu: %.1f %%)"
                  % (label, 100.0 * ok / n, 100.0 * ok2 / n2 if n2 else 0.0))
    for rel, n, a, b in sorted(bad, reverse=True)[:3]:
        print("INFO    worst %s: ncu %.3f cucap %.3f (%s)" % (label, a, b, n))
# the timeline's own duration (CUPTI activity, median over passes, warm
# caches, no range around the kernel) vs ncu's range duration: INFO only
tot = agree = 0
diffs = []
for (r, k), key in zip(pairs, pair_keys):
    a = ref(key, "gpu__time_duration.sum")
    b = k.get("dur_median_ns")
    if a is None or not b:
        continue
    a *= unit_scale("gpu__time_duration.sum")
    tot += 1
    agree += agrees(a, b, "dur")
    diffs.append(a - b)
diffs.sort()
print("INFO  %s: timeline (activity) median vs ncu gpu__time_duration: %d of %d within 5%%; "
      "ncu minus timeline: median %.0f ns (p10 %.0f, p90 %.0f)" % (
          prog, agree, tot, diffs[len(diffs)//2] if diffs else 0,
          diffs[len(diffs)//10] if diffs else 0, diffs[(9*len(diffs))//10] if diffs else 0))
sys.exit(rc)
PYEOF

# speed_one PROG DIR K CMD: one speed figure. K kernels from the start
# (ncu --launch-count K, cucap --range 0:K) or, for K=all, every launch of
# the capture against every launch of the program (the issue's own terms).
# ncu runs under NCU_TIMEOUT (0: none); a run cut off there gives a lower
# bound on the ratio, said so on the line. Appends "kernels ncu_s cucap_s"
# to pts when both sides profiled the same kernels.
speed_one() {
  local P=$1 W=$2 K=$3 cmd=$4 lab sfx nargs=() cargs=() to=()
  if [ "$K" = all ]; then
    sfx=_all lab="every launch of the capture"
  else
    sfx=_k$K lab="first $K kernels"
    nargs=(--launch-count "$K"); cargs=(--range "0:$K")
  fi
  # the default figure keeps its name from before K_SPEED took a list
  [ "$K" = 30 ] && sfx=
  [ "${NCU_TIMEOUT:-0}" -gt 0 ] 2>/dev/null && to=(timeout "$NCU_TIMEOUT")
  local t0 t1 t2 t3 nrc crc tn tc tk r st nk np bound=""
  t0=$(now)
  # shellcheck disable=SC2086
  "${to[@]}" "$NCU" --set full "${nargs[@]}" --target-processes all -f -o "$W/ncu_full$sfx" \
    $cmd >"$W/ncu_full$sfx.out" 2>"$W/ncu_full$sfx.err"
  nrc=$?
  t1=$(now)
  # like with like: ncu's full set has the Source Counters and Warp State
  # sections (warp-stall PC sampling, per-instruction executed counts),
  # so cucap runs its PC sampling (on by default) and SASS metrics passes
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=full --sass "${cargs[@]}" --cache=flush \
    --json "$W/cucap_full$sfx.json" >"$W/cucap_full$sfx.out" 2>"$W/cucap_full$sfx.err"
  crc=$?
  t2=$(now)
  "$CUCAP" cupti profile "$W/cap.fb" --metrics=full "${cargs[@]}" --cache=flush --no-pc \
    --json "$W/cucap_counters$sfx.json" >"$W/cucap_counters$sfx.out" 2>"$W/cucap_counters$sfx.err"
  t3=$(now)
  tn=$(sub "$t0" "$t1"); tc=$(sub "$t1" "$t2"); tk=$(sub "$t2" "$t3")
  # kernels each side profiled: ncu's "==PROF== Profiling" lines, cucap's JSON
  np=$(grep -c '==PROF== Profiling' "$W/ncu_full$sfx.out" "$W/ncu_full$sfx.err" 2>/dev/null | awk -F: '{s+=$NF} END {print s+0}')
  # the JSON read once: its kernel count, then passes/state per section
  read -r nk passes < <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); S=d["sections"]; print(len(d["kernels"]), " ".join("%s %s %s" % (k, S[k]["passes"], S[k]["state"]) for k in ("metrics", "pc-sampling", "sass-metrics")))' "$W/cucap_full$sfx.json" 2>/dev/null)
  nk=${nk:-0}
  r=$(ratio "$tn" "$tc")
  st=$(awk -v r="$r" 'BEGIN{print (r>=20)?"PASS":"FAIL"}')
  if [ ${#to[@]} -gt 0 ] && [ $nrc -eq 124 ]; then
    bound=">="  # ncu still running at NCU_TIMEOUT: its time is at least that
  elif [ $nrc -ne 0 ]; then st=FAIL; fi
  [ $crc -ne 0 ] && st=FAIL
  [ "$np" = "$nk" ] || echo "INFO  $P: ncu profiled $np kernel(s), cucap $nk ($lab): not used for the cost model"
  echo "BENCH speed_${P}_full_vs_ncu$sfx $bound$r x target=>=20 $st (ncu --set full ${tn} s exit $nrc, $np kernel(s) profiled; cucap --metrics=full --sass with PC sampling ${tc} s exit $crc, $nk kernel(s); passes/state: $passes; $lab)"
  echo "INFO  $P: counters only (--metrics=full --no-pc, less than ncu's full set measures), $lab: ${tk} s, $(ratio "$tn" "$tk")x"
  # where cucap's time went (its JSON's timing object)
  "$PY" - "$W/cucap_full$sfx.json" <<'PYEOF' 2>/dev/null | sed "s/^/INFO  $P: cucap --metrics=full timing ($lab): /"
import json, sys
t = json.load(open(sys.argv[1]))["timing"]
S = t["sections"]
ss, sp = t.get("range_profiler_start_stop_s", 0), t.get("range_profiler_stop_s", 0)
print("attach %.2f s, begin %.2f s, timeline passes %.2f s (+%.2f between), metrics passes %.2f s "
      "(+%.2f between; range profiler setup %.2f, start %.2f, stop %.2f, windows %.2f, decode %.2f)" % (
      t["attach_s"], t["begin_s"], S["timeline"]["passes_s"], S["timeline"]["between_passes_s"],
      S["metrics"]["passes_s"], S["metrics"]["between_passes_s"], t["range_profiler_setup_s"],
      ss - sp, sp, t["metrics_windows_s"], t["decode_evaluate_s"]))
print("PC sampling passes %.2f s (+%.2f between), SASS metrics passes %.2f s (+%.2f between), "
      "instructions resolved %.2f s (nvdisasm %.2f s waited for, %d run(s))" % (
      S["pc-sampling"]["passes_s"], S["pc-sampling"]["between_passes_s"],
      S["sass-metrics"]["passes_s"], S["sass-metrics"]["between_passes_s"],
      t.get("resolve_s", 0), t.get("nvdisasm_s", 0), t.get("nvdisasm_runs", 0)))
PYEOF
  [ $nrc -eq 0 ] && [ $crc -eq 0 ] && [ "$np" -gt 0 ] 2>/dev/null && [ "$np" = "$nk" ] &&
    pts+=("$nk $tn $tc")
}

# speed_model PROG: with two or more figures (pts) of different sizes, each
# tool's time as fixed + per-kernel cost (least squares), and the number of
# kernels from which cucap is 20x faster: what a figure at one K means for
# a capture of another size.
speed_model() {
  [ ${#pts[@]} -ge 2 ] || return 0
  printf '%s\n' "${pts[@]}" | awk -v P="$1" '
    { n++; k[n]=$1; a[n]=$2; c[n]=$3 }
    function fit(y,   i, sk, sy, skk, sky, d) {
      sk = sy = skk = sky = 0
      for (i = 1; i <= n; i++) { sk += k[i]; sy += y[i]; skk += k[i]*k[i]; sky += k[i]*y[i] }
      d = n*skk - sk*sk; if (d == 0) return 0
      B = (n*sky - sk*sy) / d; A = (sy - B*sk) / n; return 1 }
    END {
      if (!fit(a)) exit; an = A; bn = B
      if (!fit(c)) exit; ac = A; bc = B
      x = "20x at no size"
      if (bn > 20*bc) {
        m = (20*ac - an) / (bn - 20*bc); if (m < 1) m = 1
        x = sprintf("20x from %.0f kernel(s) on", m)
      }
      printf "INFO  %s: cost model over %d sizes: ncu --set full %.2f s + %.3f s per kernel, " \
             "cucap --metrics=full --sass %.2f s + %.4f s per kernel; %s, " \
             "%.0fx for a large capture\n", P, n, an, bn, ac, bc, x, (bc > 0) ? bn/bc : 0 }'
}

for P in $PROGRAMS; do
  cmd=${CMD[$P]:-}
  if [ -z "$cmd" ]; then echo "SKIP  $P (not available here)"; continue; fi
  W=$OUT/$P; mkdir -p "$W"
  # shellcheck disable=SC2086
  if ! "$CUCAP" record -o "$W/cap.fb" -- $cmd >"$W/rec.out" 2>"$W/rec.err"; then
    echo "BENCH record_$P 0 - target=ok FAIL ($(tail -1 "$W/rec.err"))"; continue
  fi
  # ---- (a) accuracy
  if want accuracy; then
  t0=$(now)
  csvs=()
  for ((i = 1; i <= NCU_RUNS; i++)); do
    # shellcheck disable=SC2086
    "$NCU" --metrics "$SOL" --csv --page raw --print-units base --print-kernel-base mangled \
      --clock-control "$CLOCKS" --cache-control all --replay-mode "$NCU_REPLAY" \
      --launch-count "$K_ACC" --target-processes all \
      $cmd >"$W/ncu_sol.$i.csv" 2>"$W/ncu_sol.$i.err"
    nrc=$?
    [ $nrc -ne 0 ] && echo "INFO  $P: ncu run $i exited $nrc: $(grep -m2 -E 'ERR|rror' "$W/ncu_sol.$i.err" "$W/ncu_sol.$i.csv" | tr '\n' ' ' | cut -c1-300)"
    csvs+=("$W/ncu_sol.$i.csv")
  done
  t1=$(now)
  "$CUCAP" cupti profile "$W/cap.fb" --metrics="$SOL" --range "0:$K_ACC" --cache=flush --no-pc \
    --clock-control="$CLOCKS" --loop 3 --json "$W/cucap_sol.json" >"$W/cucap_sol.out" 2>"$W/cucap_sol.err"
  t2=$(now)
  "$CUCAP" cupti profile "$W/cap.fb" --metrics="$SOL" --range "0:$K_ACC" --cache=flush --no-pc \
    --clock-control="$CLOCKS" --loop 3 --json "$W/cucap_sol2.json" >"$W/cucap_sol2.out" 2>"$W/cucap_sol2.err"
  echo "INFO  $P: ncu (4 metrics, $K_ACC kernels, --replay-mode $NCU_REPLAY, --clock-control $CLOCKS on both sides) x$NCU_RUNS $(sub "$t0" "$t1") s, cucap $(sub "$t1" "$t2") s"
  # figures against application replay are named PROG_applicationreplay
  lab=$P
  [ "$NCU_REPLAY" = kernel ] || lab=${P}_${NCU_REPLAY}replay
  "$PY" "$OUT/compare.py" "$lab" "$W/cucap_sol.json,$W/cucap_sol2.json" "${csvs[@]}" 2>&1 | tee "$W/accuracy.txt"
  fi
  # ---- (b) speed: --set full vs --metrics=full, for each K in K_SPEED
  if want speed; then
    pts=()
    for K in $K_SPEED; do speed_one "$P" "$W" "$K" "$cmd"; done
    speed_model "$P"
  fi
  # ---- (c) timeline overhead: TL_RUNS alternating runs of each, medians
  # (one run of each varied from 0.97x to 1.32x on rt_profile across runs
  # R and T: both include the first pass's module loads and uploads)
  want timeline || continue
  pa=() pb=()
  for ((i = 1; i <= TL_RUNS; i++)); do
    "$CUCAP" replay "$W/cap.fb" --loop 5 >"$W/plain.out" 2>"$W/plain.err"
    "$CUCAP" cupti profile "$W/cap.fb" --metrics=none --no-pc --loop 5 --json "$W/tl.json" \
      >"$W/tl.out" 2>"$W/tl.err"
    a=$(sed -n 's/^time: replay \([0-9.]*\) s.*/\1/p' "$W/plain.out")
    b=$(sed -n 's/^time: replay \([0-9.]*\) s.*/\1/p' "$W/tl.out")
    [ -n "$a" ] && [ -n "$b" ] || { pa=(); break; }
    pa+=("$a") pb+=("$b")
  done
  if [ ${#pa[@]} -gt 0 ]; then
    a=$(median "${pa[@]}")
    b=$(median "${pb[@]}")
    r=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", (a>0)?b/a:0}')
    st=$(awk -v r="$r" 'BEGIN{print (r>0 && r<=1.25)?"PASS":"FAIL"}')
    echo "BENCH timeline_overhead_$P $r x target=<=1.25 $st (medians of $TL_RUNS alternating runs: replay --loop 5 $a s [${pa[*]}], timeline x5 $b s [${pb[*]}])"
  else
    echo "BENCH timeline_overhead_$P 0 x target=<=1.25 FAIL (no timing: $(tail -1 "$W/plain.err") / $(tail -1 "$W/tl.err"))"
  fi
done 2>&1 | tee "$OUT/bench.txt"
np=$(grep -c '^BENCH .* PASS' "$OUT/bench.txt"); nf=$(grep -c '^BENCH .* FAIL' "$OUT/bench.txt")
echo "== profile_vs_ncu: $np passed, $nf failed (details in $OUT)"
[ "$nf" -eq 0 ]
