#!/usr/bin/env bash
# test_replay_graph_features.sh - graph features and complete relocation, end
# to end on the mock libcuda:
#  1. drv_graph_cond (IF/WHILE/SWITCH conditional nodes, a body captured into,
#     a conditional node added during a capture), drv_graph_mem (memory
#     nodes, exec update, set-params, enable/disable, clone, child graph,
#     event record node, host node, alloc/free inside a capture) and
#     drv_reloc (pointers stored in device memory) recorded: stdout as in
#     tests/apps/<app>.expected.
#  2. The recorded topology names conditional nodes with their bodies.
#  3. replay --verify: all bytes matched, nothing skipped; the host node is
#     reported as skipped with a substitute; --strict refuses it (exit 3).
#  4. replay --verify --relocate with the mock allocating elsewhere: graph
#     allocations, kernel parameters and the pointers inside drv_reloc's
#     upload are relocated (16384 rewritten), all bytes matched.
#  5. replay --loop 3: conditional handles are new values in loops 2 and 3
#     (the mock counts them up), mapped in kernel parameters.
#  6. drv_globals (module variables written by the host): replay --loop 3
#     keeps its module loaded across passes and gives the variables back
#     their load-time contents at each pass start (every byte matched in
#     every pass, none "nondeterministic"); without CUCAP_REPLAY_KEEP_MODULES=1
#     (a fresh load in every pass) gives the same.
#  7. copy payloads cached across passes (replay/replay_paycache.c, every
#     size with CUCAP_REPLAY_PAYLOAD_CACHE_MIN=1): drv_reloc --loop 3 copies
#     from the cache in passes 2 and 3, every byte matched; with --relocate
#     the pointers inside the upload are patched again for each pass's
#     placement (still every byte matched, 3 x 16384 patched).
# Skips (77) when the mock, the apps or cucap are missing.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
SRC="${CUCAP_SOURCE_DIR:-}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
for app in drv_graph_cond drv_graph_mem drv_reloc drv_globals; do
  if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/$app" ]; then
    echo "SKIP: $app not built (APPS_DIR=$APPS_DIR)"; exit 77
  fi
done
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

# ---- 1. record ---------------------------------------------------------------
for app in drv_graph_cond drv_graph_mem drv_reloc; do
  if "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > "$T/$app.out" 2> "$T/$app.err"; then
    ok "record $app"
  else
    bad "record $app"; tail -5 "$T/$app.err"
  fi
  if [ -n "$SRC" ] && [ -f "$SRC/tests/apps/$app.expected" ]; then
    if diff -u "$SRC/tests/apps/$app.expected" "$T/$app.out"; then ok "$app output under record matches .expected"
    else bad "$app output under record differs"; fi
  fi
done

# ---- 2. the recorded topology of conditional nodes ---------------------------------
"$CUCAP" dump --json --no-symbols "$T/drv_graph_cond.fb" > "$T/cond.json" 2>/dev/null || bad "dump --json"
if "$PY" - "$T/cond.json" <<'PYEOF'
import json, sys
types = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    b = r.get("body") or {}
    if r.get("body_type") != "Graph" or b.get("op") != "Instantiate":
        continue
    for n in b.get("nodes") or []:
        if n.get("type") != "Conditional":
            continue
        bodies = n.get("bodies") or []
        if len(bodies) != n.get("cond_size") or not n.get("cond_handle"):
            sys.exit("conditional node without its bodies/handle: %s" % n)
        if any(not bd.get("nodes") for bd in bodies if n.get("cond_type") != 2):
            sys.exit("empty body graph: %s" % n)
        types.append(n.get("cond_type"))
# IF, WHILE, SWITCH, WHILE (captured body), IF (added during a capture)
if sorted(types) != [0, 0, 1, 1, 2]:
    sys.exit("conditional node types %s" % types)
print("conditional nodes with bodies:", types)
PYEOF
then ok "dump: conditional nodes recorded with their handles and bodies"; else bad "dump: conditional topology"; fi

# ---- 3. replay, fixed addresses ---------------------------------------------------
for app in drv_graph_cond drv_graph_mem drv_reloc; do
  "$CUCAP" replay "$T/$app.fb" --verify > "$T/$app.rep" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/$app.rep" && grep -q " 0 skipped" "$T/$app.rep"; then
    ok "$app replay --verify ($(grep '^verify:' "$T/$app.rep" | cut -c9-80))"
  else
    bad "$app replay --verify rc=$rc"; cat "$T/$app.rep"
  fi
done
if grep -q "skipped with a substitute: graph host node" "$T/drv_graph_mem.rep"; then
  ok "drv_graph_mem: the host node is reported as run by a substitute"
else bad "drv_graph_mem: no substitute reported"; fi
"$CUCAP" replay "$T/drv_graph_mem.fb" --strict > "$T/strict.rep" 2>&1; rc=$?
if [ $rc -eq 3 ] && grep -q "cannot be replayed exactly: graph host node" "$T/strict.rep"; then
  ok "--strict refuses the host node"
else bad "--strict rc=$rc"; tail -3 "$T/strict.rep"; fi

# ---- 4. relocation ------------------------------------------------------------------
for app in drv_graph_cond drv_graph_mem drv_reloc; do
  CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/$app.fb" --verify --relocate \
    > "$T/$app.rel" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/$app.rel" && grep -q " 0 skipped" "$T/$app.rel"; then
    ok "$app replay --relocate ($(grep '^memory:' "$T/$app.rel" | cut -c9-140))"
  else
    bad "$app replay --relocate rc=$rc"; cat "$T/$app.rel"
  fi
done
if grep -q " 16384 pointer(s) in uploaded data patched" "$T/drv_reloc.rel"; then
  ok "drv_reloc: the pointers inside the upload were relocated"
else bad "drv_reloc: pointers in uploaded data not patched"; fi

# ---- 5. loops: new conditional handles mapped ------------------------------------------
"$CUCAP" replay "$T/drv_graph_cond.fb" --verify --loop 3 > "$T/loop.rep" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/loop.rep" \
   && grep -Eq " [1-9][0-9]* kernel parameter\(s\) patched" "$T/loop.rep"; then
  ok "drv_graph_cond --loop 3 ($(grep '^memory:' "$T/loop.rep" | cut -c9-120))"
else
  bad "drv_graph_cond --loop 3 rc=$rc"; cat "$T/loop.rep"
fi

# ---- 6. module variables across passes ------------------------------------------------
app=drv_globals
if "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > "$T/$app.out" 2> "$T/$app.err" &&
   { [ -z "$SRC" ] || diff -u "$SRC/tests/apps/$app.expected" "$T/$app.out"; }; then
  ok "record $app"
else bad "record $app"; tail -5 "$T/$app.err"; fi
for reload in 0 1; do
  CUCAP_REPLAY_KEEP_MODULES=$((1 - reload)) CUCAP_LOG_LEVEL=info "$CUCAP" replay "$T/$app.fb" \
    --verify --loop 3 > "$T/g$reload.rep" 2>&1; rc=$?
  kept=$(grep -c "1 module(s) kept loaded across passes, 56 byte(s) of their variables restored" "$T/g$reload.rep")
  if [ $rc -eq 0 ] && grep -q "56 of 56 bytes matched; 0 unverifiable; all bytes matched (3 passes)" "$T/g$reload.rep" &&
     [ "$kept" = $((1 - reload)) ]; then
    ok "$app --loop 3, KEEP_MODULES=$((1 - reload)): every byte matched in every pass (kept modules: $kept)"
  else
    bad "$app --loop 3, KEEP_MODULES=$((1 - reload)) rc=$rc kept=$kept"; cat "$T/g$reload.rep"
  fi
done

# ---- 7. copy payloads cached across passes ---------------------------------------------
CUCAP_REPLAY_PAYLOAD_CACHE_MIN=1 CUCAP_LOG_LEVEL=info "$CUCAP" replay "$T/drv_reloc.fb" --verify \
  --loop 3 > "$T/pc.rep" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched (3 passes)" "$T/pc.rep" &&
   grep -q "4 copies (0 MiB) replayed from 2 cached payload(s)" "$T/pc.rep"; then
  ok "drv_reloc --loop 3: copies of passes 2-3 from cached payloads, every byte matched"
else bad "drv_reloc --loop 3 payload cache rc=$rc"; cat "$T/pc.rep"; fi
CUCAP_REPLAY_PAYLOAD_CACHE_MIN=1 CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/drv_reloc.fb" \
  --verify --relocate --loop 3 > "$T/pcr.rep" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched (3 passes)" "$T/pcr.rep" &&
   grep -q " 49152 pointer(s) in uploaded data patched" "$T/pcr.rep"; then
  ok "drv_reloc --relocate --loop 3: cached payloads patched again per pass, every byte matched"
else bad "drv_reloc --relocate --loop 3 payload cache rc=$rc"; cat "$T/pcr.rep"; fi
# the profiler's kernel-only passes upload cached payloads from device
# copies (CUCAP_REPLAY_DEVICE_UPLOADS=1 asks it for passes 2-3): in the
# primary context (drv_globals) they do; drv_reloc's own context is made
# again in every pass, so its uploads stay on the host path
for app in drv_globals drv_reloc; do
  for reloc in "" --relocate; do
    CUCAP_REPLAY_DEVICE_UPLOADS=1 CUCAP_REPLAY_PAYLOAD_CACHE_MIN=1 CUCAP_LOG_LEVEL=info \
      CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/$app.fb" --verify $reloc \
      --loop 3 > "$T/pd.rep" 2>&1; rc=$?
    used=$(grep -c "replayed from device copies of their payloads" "$T/pd.rep")
    # --relocate places allocations anew in every pass: the payloads are
    # patched again, and their device copies filled again, each pass
    want=1; [ $app = drv_reloc ] && want=0; [ -n "$reloc" ] && want=$used
    if [ $rc -eq 0 ] && grep -q "all bytes matched (3 passes)" "$T/pd.rep" && [ "$used" = $want ]; then
      ok "$app $reloc --loop 3, device uploads asked: every byte matched (device path used: $used)"
    else bad "$app $reloc --loop 3 device uploads rc=$rc used=$used"; cat "$T/pd.rep"; fi
  done
done
CUCAP_REPLAY_DEVICE_UPLOADS=1 CUCAP_REPLAY_PAYLOAD_DEVICE_MB=0 CUCAP_REPLAY_PAYLOAD_CACHE_MIN=1 \
  CUCAP_LOG_LEVEL=info "$CUCAP" replay "$T/drv_globals.fb" --verify --loop 3 > "$T/pd0.rep" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched (3 passes)" "$T/pd0.rep" &&
   ! grep -q "device copies of their payloads" "$T/pd0.rep"; then
  ok "drv_globals --loop 3, CUCAP_REPLAY_PAYLOAD_DEVICE_MB=0: uploads from host memory"
else bad "drv_globals device uploads off rc=$rc"; cat "$T/pd0.rep"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
