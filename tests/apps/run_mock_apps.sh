#!/usr/bin/env bash
# CTest mock.apps_run: runs each driver-API program against the mock
# libcuda.so.1 and compares its stdout with tests/apps/<name>.expected.
# Usage: run_mock_apps.sh APPS_DIR MOCK_LIBDIR SOURCE_DIR app...
# Set UPDATE_GOLDEN=1 to rewrite the golden files instead.
set -u
apps_dir=$1 mock_dir=$2 src_dir=$3
shift 3
fail=0
for app in "$@"; do
  out=$(LD_LIBRARY_PATH="$mock_dir" "$apps_dir/$app" 2>"$apps_dir/$app.stderr")
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL $app: exit $rc"; cat "$apps_dir/$app.stderr"; fail=1; continue
  fi
  if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
    printf '%s\n' "$out" > "$src_dir/$app.expected"; echo "updated $app.expected"; continue
  fi
  if ! diff -u "$src_dir/$app.expected" <(printf '%s\n' "$out"); then
    echo "FAIL $app: output differs from $app.expected"; fail=1; continue
  fi
  echo "ok   $app"
done
exit $fail
