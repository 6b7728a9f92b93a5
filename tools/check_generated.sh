#!/usr/bin/env bash
# check_generated.sh - regenerates every checked-in generated file and fails
# if any differs from what is committed (CI). Append new generators to GENS
# (command) and their output paths to OUTS.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
GENS=(
  "$PY schema/gen_schema.py"
  "$PY interpose/gen_interpose.py"
  "$PY tools/gen_cbid_names.py"
)
OUTS=(
  schema/generated
  interpose/generated
  tools/cbid_names.c
)
for g in "${GENS[@]}"; do
  echo "+ $g"
  $g
done
if ! git diff --exit-code -- "${OUTS[@]}"; then
  echo "check_generated.sh: generated files are stale; run the generators above and commit" >&2
  exit 1
fi
# Generated files that were never added to git escape `git diff`: warn (set
# CUCAP_STRICT_UNTRACKED=1 in CI to make it an error).
untracked=$(git ls-files --others --exclude-standard -- "${OUTS[@]}")
if [ -n "$untracked" ]; then
  echo "check_generated.sh: warning: untracked generated files (git add them):" >&2
  echo "$untracked" >&2
  [ "${CUCAP_STRICT_UNTRACKED:-0}" = 1 ] && exit 1
fi
echo "generated files are up to date"
