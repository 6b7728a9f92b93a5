#!/usr/bin/env bash
# record_cost_mock.sh - the recorder's cost per call and per class of entry
# point, on the mock libcuda (no GPU): instructions per call from callgrind
# (repeatable), and ns per call from the wall clock (noisy on a shared VM).
#
#   bench/record_cost_mock.sh BUILD_DIR [N] [CLASS...]
#
# Runs bench/bench_record_mock natively and with libcucap preloaded
# (CUCAP_OUTPUT set, as `cucap record` does), each under
# valgrind --tool=callgrind --collect-atstart=no (one dump per class), then
# twice without valgrind for the times. Prints one line per class:
#   class  native_Ir/call  recorded_Ir/call  recorder_Ir/call  native_ns  recorded_ns
# CUCAP_OPTIONS in the environment is passed on (e.g. stack=off).
set -eu
B=${1:?usage: record_cost_mock.sh BUILD_DIR [N] [CLASS...]}
shift
N=${1:-20000}
[ $# -gt 0 ] && shift
B=$(cd "$B" && pwd)
BENCH=$B/bench/bench_record_mock
LIB=$B/interpose/libcucap.so
MOCK=$B/tests/mock
[ -x "$BENCH" ] || { echo "no $BENCH" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 2; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cucap-cost.XXXXXX")
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH=$MOCK

# callgrind writes one file per dump: cg.TAG.PID.K, "desc: Trigger: Client Request: CLASS"
irs() { # tag -> "class Ir" lines
  for f in "$T"/cg."$1".*; do
    case $f in *.err) continue ;; esac
    c=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
    ir=$(sed -n 's/^summary: //p' "$f")
    [ -n "$c" ] && [ -n "$ir" ] && echo "$c $ir"
  done
}
classes="$*"
(cd "$T" && env "$BENCH" "$N" $classes >"$T/native.txt")
(cd "$T" && env LD_PRELOAD="$LIB" CUCAP_OUTPUT="$T/r.fb" "$BENCH" "$N" $classes >"$T/rec.txt")
(cd "$T" && valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$T/cg.nat.%p" \
   "$BENCH" "$N" $classes >/dev/null 2>"$T/nat.err")
(cd "$T" && LD_PRELOAD="$LIB" CUCAP_OUTPUT="$T/cg.fb" valgrind --tool=callgrind \
   --collect-atstart=no --callgrind-out-file="$T/cg.rec.%p" "$BENCH" "$N" $classes \
   >/dev/null 2>"$T/rec.err")
irs nat | sort >"$T/nat.ir"
irs rec | sort >"$T/rec.ir"
printf '%-12s %12s %12s %12s %10s %10s\n' class native_Ir rec_Ir recorder_Ir native_ns rec_ns
while read -r c ir; do
  rir=$(awk -v c="$c" '$1 == c {print $2}' "$T/rec.ir")
  nns=$(sed -n "s/^$c: \([0-9.]*\) ns.*/\1/p" "$T/native.txt")
  rns=$(sed -n "s/^$c: \([0-9.]*\) ns.*/\1/p" "$T/rec.txt")
  per=1
  [ "$c" = query3 ] && per=3
  awk -v c="$c" -v a="$ir" -v b="${rir:-0}" -v n="$N" -v p="$per" -v x="$nns" -v y="$rns" \
    'BEGIN { printf "%-12s %12.0f %12.0f %12.0f %10s %10s\n", c, a/n/p, b/n/p, (b-a)/n/p, x, y }'
done <"$T/nat.ir"
