#!/usr/bin/env bash
# tests/fuzz/run_long.sh [SECONDS] [JOBS] [BINDIR] - runs every libFuzzer
# target for SECONDS (default 600) each, one after the other, with JOBS
# processes per target (default 1; JOBS > 1 uses libFuzzer's -fork mode,
# which keeps going after a crash and saves it), and prints per target:
# executions, exec/s, coverage (cov = edges, ft = features), corpus size and
# crashes found.
#
# BINDIR: a directory of prebuilt targets (fuzz_* executables, plus the mock
# libcuda.so.1 that fuzz_replay loads; e.g. build-fuzz/tests/fuzz copied to
# another machine together with this tree). Without it, the targets are built
# here in build-fuzz (clang).
#
# Per target <t> (every fuzz_* in BINDIR; adding a target needs nothing here):
#   tests/fuzz/corpus/<t>/   kept, minimized corpus (seeds the run)
#   tests/fuzz/regress/<t>/  inputs that once crashed: each is run first and
#                            must pass (they are not fuzzed from)
#   tests/fuzz/dict/<t>.dict dictionary, if present
#   tests/fuzz/<t>.options   extra libFuzzer flags, if present (one line)
#
# Environment:
#   CUCAP_FUZZ_TARGETS="fuzz_a fuzz_b"  run only these
#   CUCAP_FUZZ_WORK=DIR   working corpora, logs and crash artifacts (default
#                         build-fuzz/work); kept between runs, so repeated
#                         runs accumulate
#   CUCAP_FUZZ_MERGE=add|minimize|none  after the run, merge what raised
#                         coverage into tests/fuzz/corpus/<t> (add, default),
#                         rewrite it as a minimized set of the old and new
#                         inputs (minimize), or leave the tree alone (none; CI)
#
# Exit status: 0 if no target crashed, 1 otherwise (crash-*/leak-*/oom-*/
# timeout-* files are in $CUCAP_FUZZ_WORK/<t>/artifacts).
#
# Reaching 10M executions per target on a 16-core machine, e.g.:
#   tests/fuzz/run_long.sh 1800 16 /path/to/fuzz-binaries
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SECONDS_PER=${1:-600}
JOBS=${2:-1}
BINDIR=${3:-}
MERGE=${CUCAP_FUZZ_MERGE:-add}

if [ -z "$BINDIR" ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCUCAP_FUZZ=ON >/dev/null || exit 1
  cmake --build build-fuzz -j2 --target fuzz_all >/dev/null || exit 1
  BINDIR=$ROOT/build-fuzz/tests/fuzz
fi
BINDIR=$(cd "$BINDIR" && pwd)
WORK=${CUCAP_FUZZ_WORK:-$ROOT/build-fuzz/work}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

targets=${CUCAP_FUZZ_TARGETS:-}
if [ -z "$targets" ]; then
  for f in "$BINDIR"/fuzz_*; do
    [ -x "$f" ] && [ -f "$f" ] && targets="$targets $(basename "$f")"
  done
fi
[ -n "$targets" ] || { echo "run_long.sh: no fuzz_* targets in $BINDIR" >&2; exit 1; }

# The mock driver of fuzz_replay, and quiet, fast sanitizers.
export LD_LIBRARY_PATH=$BINDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:malloc_fill_byte=0:max_malloc_fill_size=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
summary=""
for t in $targets; do
  bin=$BINDIR/$t
  [ -x "$bin" ] || { echo "run_long.sh: $bin missing" >&2; status=1; continue; }
  tw=$WORK/$t
  mkdir -p "$tw/corpus" "$tw/artifacts"
  kept=$ROOT/tests/fuzz/corpus/$t
  mkdir -p "$kept"
  cp -n "$kept"/* "$tw/corpus/" 2>/dev/null
  opts=()
  [ -f "$ROOT/tests/fuzz/dict/$t.dict" ] && opts+=("-dict=$ROOT/tests/fuzz/dict/$t.dict")
  if [ -f "$ROOT/tests/fuzz/$t.options" ]; then
    read -r -a extra < "$ROOT/tests/fuzz/$t.options"
    opts+=("${extra[@]}")
  fi
  before=$(ls "$tw/artifacts" | wc -l)

  # 1. regression inputs: each must run clean
  reg=$ROOT/tests/fuzz/regress/$t
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    if ! "$bin" "${opts[@]}" -runs=1 "$reg"/* > "$tw/regress.log" 2>&1; then
      echo "!! $t: a regression input fails (see $tw/regress.log)"
      tail -30 "$tw/regress.log"
      status=1
    fi
  fi

  # 2. fuzz
  log=$tw/run.log
  start=$(date +%s)
  if [ "$JOBS" -gt 1 ]; then
    (cd "$tw" && "$bin" "${opts[@]}" -fork="$JOBS" -ignore_crashes=1 \
       -max_total_time="$SECONDS_PER" -artifact_prefix="$tw/artifacts/" \
       -print_final_stats=1 "$tw/corpus" > "$log" 2>&1)
    line=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
    execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$line")
  else
    (cd "$tw" && "$bin" "${opts[@]}" -max_total_time="$SECONDS_PER" \
       -artifact_prefix="$tw/artifacts/" -print_final_stats=1 "$tw/corpus" \
       > "$log" 2>&1)
    line=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  fi
  wall=$(( $(date +%s) - start ))
  [ "$wall" -gt 0 ] || wall=1
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$line")
  ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$line")
  corp=$(ls "$tw/corpus" | wc -l)
  after=$(ls "$tw/artifacts" | wc -l)
  crashes=$((after - before))
  if grep -qE '^==[0-9]+==ERROR|^SUMMARY: (Address|Undefined|libFuzzer)|deadly signal' "$log" &&
     [ "$crashes" -eq 0 ]; then
    crashes=1 # the single-process mode stops at the first crash
  fi
  execs=${execs:-0}
  row=$(printf '%-14s execs %10s  exec/s %7s  cov %5s  ft %6s  corpus %5s  crashes %s' \
        "$t" "$execs" "$((execs / wall))" "${cov:-?}" "${ft:-?}" "$corp" "$crashes")
  echo "$row"
  summary="$summary$row"$'\n'
  if [ "$crashes" -gt 0 ]; then
    status=1
    echo "!! $t: crash artifacts in $tw/artifacts; log $log"
    grep -E -A12 '^==[0-9]+==ERROR|runtime error|deadly signal' "$log" | head -40
  fi

  # 3. keep what raised coverage
  case "$MERGE" in
    add)
      "$bin" "${opts[@]}" -merge=1 "$kept" "$tw/corpus" > "$tw/merge.log" 2>&1 ||
        echo "!! $t: merge failed (see $tw/merge.log)"
      ;;
    minimize)
      rm -rf "$tw/min" && mkdir -p "$tw/min"
      if "$bin" "${opts[@]}" -merge=1 "$tw/min" "$kept" "$tw/corpus" > "$tw/merge.log" 2>&1; then
        rm -f "$kept"/* && cp "$tw/min"/* "$kept"/
      else
        echo "!! $t: minimizing failed (see $tw/merge.log)"
      fi
      ;;
  esac
done
echo "== fuzz summary (${SECONDS_PER}s x $JOBS job(s) per target)"
printf '%s' "$summary"
exit $status
