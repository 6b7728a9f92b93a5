#!/usr/bin/env bash
# examples/demo.sh - the README's main command.
#  * On a machine with an NVIDIA GPU: builds cucap (unless $CUCAP_BUILD already
#    holds a build), builds examples/saxpy.cu, runs it natively, records it,
#    checks the output is identical, shows `cucap info`, replays the capture
#    with --verify, re-profiles it with `replay --profile` (CUPTI timeline,
#    metrics, instruction-level stacks) and prints `cucap analyze`.
#  * Without a GPU: builds cucap and shows `cucap info`, `cucap analyze` and
#    `cucap dump` of the bundled real capture examples/sample.fb (recorded on
#    an H100).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${CUCAP_BUILD:-$ROOT/build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUCAP=$BUILD/tools/cucap

if [ ! -x "$CUCAP" ]; then
  bash tools/install_deps.sh
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target cucap cucap_interpose
fi

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  have_gpu=1
fi

if [ "$have_gpu" = 0 ]; then
  echo "== no GPU here: showing the bundled capture examples/sample.fb (recorded on a GPU machine)"
  echo "\$ cucap info examples/sample.fb"
  "$CUCAP" info examples/sample.fb
  echo
  echo "\$ cucap analyze examples/sample.fb"
  "$CUCAP" analyze examples/sample.fb
  echo
  echo "\$ cucap dump examples/sample.fb --limit 25"
  "$CUCAP" dump examples/sample.fb --limit 25
  exit 0
fi

work=${CUCAP_DEMO_DIR:-$(mktemp -d)}
mkdir -p "$work"
app=$work/saxpy
if [ ! -x "$app" ]; then
  "$CUDA_HOME/bin/nvcc" -O2 -arch=native -o "$app" examples/saxpy.cu
fi
echo "== native run"
"$app" | tee "$work/native.txt"
echo "== cucap record"
"$CUCAP" record -o "$work/saxpy.fb" -- "$app" | tee "$work/recorded.txt"
if cmp -s "$work/native.txt" "$work/recorded.txt"; then
  echo "   output identical with and without cucap"
else
  echo "   OUTPUT DIFFERS under cucap" >&2; exit 1
fi
echo "== cucap info"
"$CUCAP" info "$work/saxpy.fb"
echo "== cucap replay --verify"
"$CUCAP" replay "$work/saxpy.fb" --verify
echo "== cucap replay --profile (CUPTI: timeline, SOL metrics, PC samples joined to SASS and host stacks)"
"$CUCAP" replay "$work/saxpy.fb" --profile --folded "$work/saxpy.folded" --profile-out "$work/saxpy.cuprof"
echo "   folded instruction-level stacks: $work/saxpy.folded ($(wc -l <"$work/saxpy.folded") stacks)"
echo "== cucap analyze"
"$CUCAP" analyze "$work/saxpy.fb"
