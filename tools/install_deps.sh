#!/usr/bin/env bash
# Installs the Debian packages cucap needs to build and test (as root), and
# checks for the CUDA toolkit. Used by tests/run.sh and examples/demo.sh.
set -euo pipefail
# libdw-dev/libelf-dev: libdw.a + libelf.a, linked statically into the cucap
# tool for source lines of host frames, with the static libraries they need
# (zlib, lzma, bzip2; zstd above); protobuf-compiler: CI decodes the Perfetto
# export with protoc; binutils: strip (test_dump_symbols).
pkgs=(cmake ninja-build gcc g++ clang libclang-rt-14-dev libzstd-dev libxxhash-dev
      flatbuffers-compiler python3 xxd libdw-dev libelf-dev zlib1g-dev liblzma-dev
      libbz2-dev protobuf-compiler binutils)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "cucap: missing packages (run as root to install): ${missing[*]}" >&2
    exit 2
  fi
  echo "== installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cuda.h" ]; then
  echo "cucap: CUDA toolkit headers not found under $CUDA_HOME (set CUDA_HOME)" >&2
  exit 2
fi
