#!/usr/bin/env bash
# test_check_layers.sh - tools/check_layers.sh, the layering rules of the tree:
#  1. the tree as it is passes;
#  2. each rule fails on a copy of the tree with one violation planted, and
#     the message names the file: a cross-folder include of an internal
#     header, a public header of a folder the includer must not depend on
#     (replay/ -> capture/), the executor naming an observer (replay/ ->
#     cucap_verify), and an exit code picked outside tools/.
# Env (CTest): CUCAP_SOURCE_DIR. Exit 0 pass.
set -uo pipefail
SRC=${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK=$SRC/tools/check_layers.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

if out=$(bash "$CHECK" "$SRC" 2>&1); then ok "tree: ${out##*$'\n'}"
else bad "the tree breaks the layering rules:"; echo "$out"; fi

# a copy of the sources the script reads (folders of C files only)
copy() {
  rm -rf "$T/tree"; mkdir -p "$T/tree"
  (cd "$SRC" && find common schema reader capture interpose symbols analyze replay verify \
     profile share tools -maxdepth 2 \( -name '*.c' -o -name '*.h' \) -print0 |
     tar cf - --null -T -) | tar xf - -C "$T/tree"
}
plant() { # label file line expect-regex
  copy
  printf '%s\n' "$3" >>"$T/tree/$2"
  if out=$(bash "$CHECK" "$T/tree" 2>&1); then
    bad "$1: check_layers passed with the violation planted in $2"
  elif grep -qE "$4" <<<"$out"; then ok "$1: $(grep -E "$4" <<<"$out" | head -1)"
  else bad "$1: failed without naming it: $out"; fi
}
plant "internal header across folders" share/trim.c '#include "replay_state.h"' \
  'share/trim.c: includes replay_state.h, an internal header of replay/'
plant "forbidden dependency" replay/replay_run.c '#include "cucap_writer.h"' \
  'replay/replay_run.c: includes cucap_writer.h of capture/'
plant "executor names an observer" replay/replay_exec.c 'static void *x = cucap_verify_create;' \
  'replay/replay_exec.c:[0-9]+: replay/ names cucap_verify_create'
plant "exit code outside tools" share/diff.c 'static int y = CUCAP_EXIT_IO;' \
  'share/diff.c:[0-9]+: CUCAP_EXIT_IO outside tools/'
exit $fail
