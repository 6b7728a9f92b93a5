#!/usr/bin/env bash
# tests/gpu/batch.sh BUILD_DIR [LIMIT_S] - the correctness suites of a GPU
# machine in one go, side by side: the apps and share parts of
# tests/gpu/run.sh and the cuda-samples corpus (tests/gpu/corpus.sh, with
# the corpus carried in .corpus/: cuda-samples-sm90.tgz and its run.sh).
# Timings are not meaningful here (the three share the GPU); the bench and
# profile parts of run.sh want the machine to themselves.
# Writes $OUT/logs.tgz (every summary and log under 2 MiB) and prints the
# FAIL and summary lines of each suite.
B=${1:?usage: tests/gpu/batch.sh BUILD_DIR [LIMIT_S]}; T=${2:-540}
export CUCAP_GPU_BENCH=0
W=${BATCH_DIR:-/tmp/gpu-batch}; rm -rf "$W"; mkdir -p "$W"
(CUCAP_GPU_PARTS=apps timeout "$T" bash tests/gpu/run.sh "$B" "$W/apps" >"$W/apps.log" 2>&1; echo "rc=$?" >>"$W/apps.log") &
(CUCAP_GPU_PARTS=share timeout "$T" bash tests/gpu/run.sh "$B" "$W/share" >"$W/share.log" 2>&1; echo "rc=$?" >>"$W/share.log") &
(timeout "$T" bash tests/gpu/corpus.sh "$B" .corpus/cuda-samples-sm90.tgz .corpus/run.sh "$W/corpus" 6 >"$W/corpus.log" 2>&1; echo "rc=$?" >>"$W/corpus.log") &
wait
(cd "$W" && find . \( -name '*.txt' -o -name '*.log' \) -size -2M | tar czf "${OUT:-$W}/logs.tgz" -T -)
for f in apps share corpus; do
  echo "== $f"
  grep -E '^(FAIL|== summary|corpus:|rc=|NONDET|DETERM)' "$W/$f.log" | tail -25
done
