#!/usr/bin/env bash
# tests/gpu/stage.sh BUILD_DIR STAGE_DIR - copies what tests/gpu/run.sh needs
# from a build folder into a small folder with the same layout (binaries only),
# for machines that cannot build cucap themselves (no libelf headers there).
set -euo pipefail
B=$1; S=$2
rm -rf "$S"; mkdir -p "$S/tools" "$S/interpose" "$S/tests/apps" "$S/bench"
cp "$B/tools/cucap" "$S/tools/"
cp "$B/interpose/libcucap.so" "$S/interpose/"
for f in "$B"/tests/apps/*; do
  [ -f "$f" ] && [ -x "$f" ] && cp "$f" "$S/tests/apps/"
done
cp "$B"/tests/apps/*.fatbin "$B"/tests/apps/*.ptx "$S/tests/apps/" 2>/dev/null || true
for f in libkernel_times.so libpc_sampler.so bench_reader bench_writer bench_hostfn; do
  [ -f "$B/bench/$f" ] && cp "$B/bench/$f" "$S/bench/"
done
# test_replay's helper modes (--flip-dtoh) make the flipped-byte checks
mkdir -p "$S/tests"
cp "$B/tests/test_replay" "$S/tests/" 2>/dev/null || true
du -sh "$S"
