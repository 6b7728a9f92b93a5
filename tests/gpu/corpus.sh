#!/usr/bin/env bash
# tests/gpu/corpus.sh BUILD_DIR CORPUS_TGZ RUN_SH OUT_DIR [PARALLEL]
# The real-program check on a GPU machine: unpacks NVIDIA's cuda-samples
# corpus (../shared/corpus/cuda-samples-sm90.tgz, carried into the repo's
# ignored .corpus/ folder), runs the corpus's own run.sh unchanged (native,
# `cucap record`, same output, `cucap replay --verify`) and prints its
# summary line. Then, for every program whose recorded output differed, it
# runs the program natively twice more, a second apart, and says whether the
# program's own output differs between native runs (digits and minus signs stripped and
# lines sorted, as run.sh compares): that is the program's nondeterminism,
# shown with the diff, not cucap's. Programs whose replay verify found
# different get the same treatment for their results (two more recordings,
# compared with `cucap diff`).
set -uo pipefail
BUILD=$(readlink -f "$1"); TGZ=$(readlink -f "$2"); RUN=$(readlink -f "$3")
OUT=$(mkdir -p "$4" && readlink -f "$4"); P=${5:-6}
SRC=$(mktemp -d); tar xzf "$TGZ" -C "$SRC"
# The driver's JIT cache (~/.nv/ComputeCache) is state that run.sh's own
# native run changes: the native run of ptxjit compiles its PTX and fills
# the cache, the recorded run that follows hits it, and the linker's info
# log it prints (CU_JIT_INFO_LOG_BUFFER) is then empty - an output difference
# made by the order of the runs, with or without cucap (two native runs in a
# row differ the same way). So the corpus runs with the cache off, for the
# native and the recorded runs alike; CUCAP_CORPUS_JIT_CACHE=1 keeps it.
[ "${CUCAP_CORPUS_JIT_CACHE:-0}" = 1 ] || export CUDA_CACHE_DISABLE=1
CS=$SRC/cuda-samples
bash "$RUN" "$BUILD/tools/cucap" "$CS" "$OUT/runs" "$P" | tail -1 | tee "$OUT/corpus_summary.txt"
cp "$OUT/runs/summary.txt" "$OUT/corpus_lines.txt" 2>/dev/null
norm() { tr -d '0-9-' <"$1" | sort; }
grep '^FAIL .* same=no ' "$OUT/corpus_lines.txt" 2>/dev/null | awk '{print $2}' | while read -r n; do
  d=$CS/$n; w=$OUT/nondet/$n; mkdir -p "$w"
  # a second apart: programs that seed from time(NULL) get another seed
  (cd "$d" && sleep 1.1 && timeout 120 "./$n" >"$w/native2.out" 2>&1; sleep 1.1;
   timeout 120 "./$n" >"$w/native3.out" 2>&1)
  if ! diff <(norm "$OUT/runs/$n/native.out") <(norm "$w/native2.out") >"$w/diff12.txt" ||
     ! diff <(norm "$w/native2.out") <(norm "$w/native3.out") >"$w/diff23.txt"; then
    echo "NONDETERMINISTIC-NATIVELY $n: two native runs differ ($(head -4 "$w/diff12.txt" "$w/diff23.txt" 2>/dev/null | grep '^[<>]' | head -2 | tr '\n' ' ' | cut -c1-160))"
  else
    echo "DETERMINISTIC-NATIVELY $n: three native runs agree; the recorded output differs (see $OUT/runs/$n)"
  fi
done | tee "$OUT/nondet.txt"
# Replays that verify found different (replay exit 1, the recorded output
# the same): record the program twice more and compare what it copied back
# with `cucap diff`. When the copy verify names (by its seq) also differs
# between two recordings, the program's results vary run to run: that is
# the program's nondeterminism (the proof is in $OUT/nondet/<name>/), not
# the replay's.
grep '^FAIL .* same=yes replay=1 ' "$OUT/corpus_lines.txt" 2>/dev/null | awk '{print $2}' | while read -r n; do
  d=$CS/$n; w=$OUT/nondet/$n; mkdir -p "$w"
  seq=$(grep -o 'seq [0-9]*) differs' "$OUT/runs/$n/replay.out" | head -1 | awk '{print $2}' | tr -d ')')
  (cd "$d" && timeout 240 "$BUILD/tools/cucap" record -o "$w/rec2.fb" -- "./$n" >/dev/null 2>&1
   sleep 1.1; timeout 240 "$BUILD/tools/cucap" record -o "$w/rec3.fb" -- "./$n" >/dev/null 2>&1)
  "$BUILD/tools/cucap" diff "$OUT/runs/$n/cap.fb" "$w/rec2.fb" >"$w/diff12.txt" 2>&1
  "$BUILD/tools/cucap" diff "$w/rec2.fb" "$w/rec3.fb" >"$w/diff23.txt" 2>&1
  if [ -n "$seq" ] && grep -q "(seq $seq / " "$w/diff12.txt" "$w/diff23.txt"; then
    echo "NONDETERMINISTIC-NATIVELY $n: the copy verify flags (seq $seq) also differs between two recordings of the program ($(grep -h "(seq $seq / " "$w/diff12.txt" "$w/diff23.txt" | head -1 | cut -c1-140))"
  else
    echo "DETERMINISTIC-NATIVELY $n: three recordings agree on the copy verify flags (seq ${seq:-?}); the replay differs (see $OUT/runs/$n/replay.out)"
  fi
done | tee -a "$OUT/nondet.txt"
rm -rf "$SRC"
