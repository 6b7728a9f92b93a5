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
# The class cnn_step is one CNN training step's driver calls (N/100 steps):
# its line is per step, and its recorder_Ir the recorder's instructions in a
# step of the torchvision CNN loop that bench/gpu_bench.sh times.
#
# Then (unless COLD=0) the class launch_cold, COLD_N (200) launches each after
# a 16 MiB read, under callgrind's cache simulation (D1 32 KiB, LL 8 MiB):
#   launch_cold  D1 and LL read+write misses per launch, native and recorded,
#   and the recorder's share - the data cache lines one launch's recording
#   touches when the program's own work has evicted them (a real training
#   step does that between launches); plus the instruction count.
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
want_cold=0
case " $classes " in *" launch_cold "*) want_cold=1 ;; esac
# launch_cold runs in its own pass below (N launches after 16 MiB reads each
# would take hours under valgrind)
classes=$(printf '%s\n' $classes | grep -vx launch_cold | tr '\n' ' ' || true)
if [ $want_cold = 1 ] && [ -z "${classes// /}" ]; then SKIP_MAIN=1; else SKIP_MAIN=0; fi
if [ $SKIP_MAIN = 0 ]; then
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
  per=1 nn=$N
  [ "$c" = query3 ] && per=3
  [ "$c" = cnn_step ] && nn=$(( (N + 99) / 100 )) # N/100 steps of ~7,400 calls
  awk -v c="$c" -v a="$ir" -v b="${rir:-0}" -v n="$nn" -v p="$per" -v x="$nns" -v y="$rns" \
    'BEGIN { printf "%-12s %12.0f %12.0f %12.0f %10s %10s\n", c, a/n/p, b/n/p, (b-a)/n/p, x, y }'
done <"$T/nat.ir"
fi

[ "${COLD:-1}" = 0 ] && exit 0
[ -z "$*" ] || [ $want_cold = 1 ] || exit 0
CN=${COLD_N:-200}
SIM="--cache-sim=yes --D1=32768,8,64 --LL=8388608,16,64 --I1=32768,8,64"
(cd "$T" && valgrind --tool=callgrind $SIM --collect-atstart=no --callgrind-out-file="$T/cc.nat.%p" \
   "$BENCH" "$CN" launch_cold >/dev/null 2>"$T/cnat.err")
(cd "$T" && LD_PRELOAD="$LIB" CUCAP_OUTPUT="$T/cc.fb" valgrind --tool=callgrind $SIM --collect-atstart=no \
   --callgrind-out-file="$T/cc.rec.%p" "$BENCH" "$CN" launch_cold >/dev/null 2>"$T/crec.err")
ev() { # tag -> "Ir I1mr ... " summary of the launch_cold dump with its event names
  for f in "$T"/cc."$1".*; do
    case $f in *.err) continue ;; esac
    grep -q '^desc: Trigger: Client Request: launch_cold' "$f" || continue
    printf '%s\n%s\n' "$(sed -n 's/^events: //p' "$f")" "$(sed -n 's/^summary: //p' "$f")"
  done
}
ev nat >"$T/cnat.ev"
ev rec >"$T/crec.ev"
awk -v n="$CN" 'NR == FNR { if (FNR == 1) for (i = 1; i <= NF; i++) name[i] = $i; else nat = $0; next }
  FNR == 2 { split(nat, a); split($0, b)
    for (i = 1; i <= NF; i++) v[name[i]] = i
    d1 = v["D1mr"]; d1w = v["D1mw"]; ll = v["DLmr"]; llw = v["DLmw"]; i1 = v["I1mr"]; ir = v["Ir"]
    printf "%-12s %10s %10s %10s %10s %10s %10s %10s\n", "class", "Ir/launch", "I1miss", "D1miss", "LLmiss", "rec_I1", "rec_D1", "rec_LL"
    printf "%-12s %10.0f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", "launch_cold",
      (b[ir] - a[ir]) / n, (b[i1] - a[i1]) / n, (b[d1] + b[d1w] - a[d1] - a[d1w]) / n,
      (b[ll] + b[llw] - a[ll] - a[llw]) / n, b[i1] / n, (b[d1] + b[d1w]) / n, (b[ll] + b[llw]) / n }' \
  "$T/cnat.ev" "$T/crec.ev"
