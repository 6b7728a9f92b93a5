#!/usr/bin/env bash
# test_replay_graph_host.sh - graphs whose copy nodes read and write host
# memory (NVIDIA's simpleCudaGraphs pattern), end to end on the mock:
#  1. drv_graph_host records with its stdout as tests/apps/drv_graph_host.expected;
#     the launches of the graph whose copy node reads page-locked memory
#     through CU_MEMORYTYPE_UNIFIED carry that memory's bytes (payloads), and
#     the results of copy nodes to host memory (graph API, clones) are read
#     after every launch (CopyResult snapshots with the host address).
#  2. replay --verify: exit 0, nothing mismatched; the copies whose graph
#     runs a host node after them (it zeroes the result) are reported as
#     written by the program's host code (12), the others verified (2).
#  3. every recorded copy result flipped: the verified ones are mismatches
#     (exit 1), the host-written ones stay reported apart; --strict makes
#     the host-written differences mismatches too.
#  4. replay --verify --relocate with the mock allocating elsewhere: still exact.
# Skips (77) when the mock, the app or cucap are missing.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
SRC="${CUCAP_SOURCE_DIR:-}"
HELPER="${CUCAP_BUILD_DIR:-}/tests/test_replay"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_graph_host" ]; then
  echo "SKIP: drv_graph_host not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
json_field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }

# ---- 1. record ---------------------------------------------------------------------
if "$CUCAP" record -o "$T/g.fb" -- "$APPS_DIR/drv_graph_host" > "$T/g.out" 2> "$T/g.err"; then
  ok "record drv_graph_host"
else
  bad "record drv_graph_host"; tail -5 "$T/g.err"
fi
if [ -n "$SRC" ] && diff -u "$SRC/tests/apps/drv_graph_host.expected" "$T/g.out"; then
  ok "output under record matches .expected"
else
  bad "output under record differs"
fi
"$CUCAP" dump --json --no-symbols "$T/g.fb" > "$T/g.json" 2>/dev/null
np=$(grep '"op": *"Launch"' "$T/g.json" | grep -c '"payloads"')
nr=$(grep -c '"CopyResult"' "$T/g.json")
# graph A and its clone (3 launches each) read the page-locked input through
# a UNIFIED node; graph B (2 launches) reads pageable memory
if [ "$np" -ge 8 ]; then ok "$np graph launches carry their host sources' bytes"
else bad "$np graph launches carry payloads (want >= 8)"; fi
# 3 + 3 (A, clone) + 2 (B) + 3 + 3 (capture, clone): one result per launch
if [ "$nr" -eq 14 ]; then ok "14 copy results recorded (graph API nodes, clones, capture)"
else bad "$nr copy results recorded (want 14)"; fi

# ---- 2. replay --verify ------------------------------------------------------------
"$CUCAP" replay "$T/g.fb" --verify --json > "$T/v.json" 2> "$T/v.err"; rc=$?
if [ $rc -eq 0 ] && grep -q '"mismatches":0' "$T/v.json" \
   && [ "$(json_field "$T/v.json" copies_checked)" = 14 ] \
   && [ "$(json_field "$T/v.json" host_written_checks)" = 12 ] \
   && [ "$(json_field "$T/v.json" copies_unverifiable)" = 0 ] \
   && grep -q "host node of its graph may run after the copy" "$T/v.json"; then
  ok "replay --verify: 14 copies, 12 host-written (after a host node), 2 verified, exit 0"
else
  bad "replay --verify rc=$rc"; cat "$T/v.json" "$T/v.err"
fi

# ---- 3. flipped results --------------------------------------------------------------
if [ -x "$HELPER" ] && "$HELPER" --flip-copy-results "$T/g.fb" "$T/f.fb" 3 > /dev/null; then
  "$CUCAP" replay "$T/f.fb" --verify --json > "$T/f.json" 2> "$T/f.err"; rc=$?
  if [ $rc -eq 1 ] && grep -q '"first_mismatch":"graph copy node to host' "$T/f.json" \
     && [ "$(json_field "$T/f.json" host_written_checks)" = 12 ]; then
    ok "a flipped result of a verified copy node fails (exit 1), host-written ones stay apart"
  else
    bad "flipped results: rc=$rc"; cat "$T/f.json"
  fi
  "$CUCAP" replay "$T/g.fb" --verify --json --strict > "$T/s.json" 2> "$T/s.err"; rc=$?
  # --strict refuses the host function (exit 3) before anything is verified
  if [ $rc -eq 3 ]; then ok "--strict refuses the program's host function (exit 3)"
  else bad "--strict rc=$rc"; fi
else
  bad "cannot flip copy results ($HELPER)"
fi

# ---- 4. relocated ----------------------------------------------------------------------
CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/g.fb" --verify --relocate --json \
  > "$T/r.json" 2> "$T/r.err"; rc=$?
if [ $rc -eq 0 ] && grep -q '"mismatches":0' "$T/r.json" \
   && [ "$(json_field "$T/r.json" host_written_checks)" = 12 ]; then
  ok "replay --verify --relocate"
else
  bad "relocate rc=$rc"; cat "$T/r.json" "$T/r.err"
fi

echo "test_replay_graph_host: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
