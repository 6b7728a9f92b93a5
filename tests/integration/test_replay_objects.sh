#!/usr/bin/env bash
# test_replay_objects.sh - attributes, limits, CUDA arrays, texture and
# surface objects, recorded and replayed on the mock libcuda (issue 7,
# classes 2 and 3).
#  1. drv_attrs and drv_texture record with unchanged output and replay with
#     --verify at the recorded addresses, nothing skipped, also with --strict
#     and --loop 2 (objects destroyed and made again between loops; the
#     heap size the mock fixes once a kernel used it is already the
#     context's in the second loop: not a refusal).
#  2. Replayed with other texture/surface handle numbers (the mock's
#     CUCAP_MOCK_OBJ_BASE) and relocated memory: handles in kernel
#     parameters, in device memory (HtoD) and in an array (2D copy) are
#     rewritten (counted in the report), verify still passes (the handles the
#     program reads back are accepted as their live values).
#  3. The same captures without the attribute/limit/config calls (test_replay
#     --drop-calls) must fail: the launch with 96 KiB of shared memory is
#     refused (exit 4), the probes read back 0 (exit 1).
# Skips (77) when the mock, the apps or the cucap binary are missing.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
BUILD="${CUCAP_BUILD_DIR:-}"
HELPER="$BUILD/tests/test_replay"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_attrs" ] || [ ! -x "$APPS_DIR/drv_texture" ]; then
  echo "SKIP: drv_attrs/drv_texture not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
SRC="${CUCAP_SOURCE_DIR:?}/tests/apps"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
json_field() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1"; }

# ---- 1. record, replay --verify ---------------------------------------------
for app in drv_attrs drv_texture; do
  if ! "$CUCAP" record -o "$T/$app.fb" -- "$APPS_DIR/$app" > "$T/$app.out" 2> "$T/$app.rec.err"; then
    bad "$app: record failed"; tail -5 "$T/$app.rec.err"; continue
  fi
  if diff -u "$SRC/$app.expected" "$T/$app.out" > "$T/$app.diff"; then
    ok "$app: output under record identical to $app.expected"
  else
    bad "$app: output under record differs"; cat "$T/$app.diff"
  fi
  "$CUCAP" replay "$T/$app.fb" --verify --strict --json > "$T/$app.json" 2> "$T/$app.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q '"mismatches":0' "$T/$app.json" && grep -q '"skipped":0' "$T/$app.json" \
     && [ "$(json_field "$T/$app.json" copies_checked)" -ge 7 ] && grep -q '"fixed_address":true' "$T/$app.json"; then
    ok "$app: replay --verify --strict ($(json_field "$T/$app.json" copies_checked) copies, \
$(json_field "$T/$app.json" bytes_matched) bytes matched, $(json_field "$T/$app.json" executed) ops)"
  else
    bad "$app: replay --verify --strict rc=$rc"; cat "$T/$app.json" "$T/$app.err"
  fi
  # --strict: a limit the driver refuses in the second pass (the mock, like
  # the driver, fixes the heap size once heap_probe used it) would fail it
  "$CUCAP" replay "$T/$app.fb" --verify --loop 2 --strict > "$T/$app.loop" 2>&1; rc=$?
  if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/$app.loop" && ! grep -q "refused" "$T/$app.loop"; then
    ok "$app: replay --verify --loop 2 --strict (limits equal to the context's are not refusals)"
  else
    bad "$app: --loop 2 rc=$rc"; cat "$T/$app.loop"
  fi
done
n=$("$CUCAP" dump --json --body Object "$T/drv_texture.fb" 2>/dev/null | grep -c '"kind":"TexObject"')
[ "$n" -ge 20 ] && ok "drv_texture: $n TexObject records (create + destroy)" || bad "drv_texture: $n TexObject records"
n=$("$CUCAP" dump --json --body Object "$T/drv_texture.fb" 2>/dev/null | grep -c 'MipmappedLevel')
[ "$n" -eq 3 ] && ok "drv_texture: 3 MipmappedLevel records" || bad "drv_texture: $n MipmappedLevel records"

# ---- 2. other handle numbers, relocated memory ---------------------------------
CUCAP_MOCK_OBJ_BASE=0x5000 "$CUCAP" replay "$T/drv_texture.fb" --verify --json > "$T/moved.json" 2> "$T/moved.err"; rc=$?
ph=$(json_field "$T/moved.json" patched_handles); pp=$(json_field "$T/moved.json" patched_params)
# 3 handles uploaded to device memory + 3 into the atlas array; the texture
# or surface parameter of each of the 11 launches that take one
if [ $rc -eq 0 ] && grep -q '"mismatches":0' "$T/moved.json" && [ "$ph" = 6 ] && [ "$pp" = 11 ]; then
  ok "drv_texture: other handle numbers: $ph handles rewritten in uploaded data, $pp parameters, verified"
else
  bad "drv_texture: other handle numbers: rc=$rc handles=$ph params=$pp"; cat "$T/moved.json" "$T/moved.err"
fi
for app in drv_attrs drv_texture; do
  CUCAP_MOCK_OBJ_BASE=0x9000 CUCAP_MOCK_ADDR_BASE=0x7d0000000000 \
    "$CUCAP" replay "$T/$app.fb" --verify --relocate --json > "$T/$app.rel.json" 2> "$T/$app.rel.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q '"mismatches":0' "$T/$app.rel.json" && grep -q '"skipped":0' "$T/$app.rel.json" \
     && [ "$(json_field "$T/$app.rel.json" relocated_allocs)" -ge 3 ]; then
    ok "$app: --relocate with other handle numbers ($(json_field "$T/$app.rel.json" relocated_allocs) allocations moved, \
$(json_field "$T/$app.rel.json" patched_params) parameters patched)"
  else
    bad "$app: --relocate rc=$rc"; cat "$T/$app.rel.json" "$T/$app.rel.err"
  fi
done

# ---- 3. without the calls, the replay fails -------------------------------------
# CUPTI cbids: cuFuncSetAttribute 481, cuKernelSetAttribute 687, cuCtxSetLimit 136,
# cuFuncSetCacheConfig 86, cuCtxSetCacheConfig 300
if [ -x "$HELPER" ]; then
  "$HELPER" --drop-calls "$T/drv_attrs.fb" "$T/noattr.fb" 481,687 > /dev/null
  "$CUCAP" replay "$T/noattr.fb" --verify > "$T/noattr.out" 2>&1; rc=$?
  [ $rc -eq 4 ] && grep -q "launch of smem_big.*CUDA_ERROR_INVALID_VALUE" "$T/noattr.out" \
    && ok "without cuFuncSetAttribute/cuKernelSetAttribute: exit 4, smem_big refused" \
    || { bad "without attributes: rc=$rc"; cat "$T/noattr.out"; }
  "$HELPER" --drop-calls "$T/drv_attrs.fb" "$T/nolimit.fb" 136 > /dev/null
  "$CUCAP" replay "$T/nolimit.fb" --verify > "$T/nolimit.out" 2>&1; rc=$?
  [ $rc -eq 1 ] && grep -q "2 of 8 bytes differ" "$T/nolimit.out" \
    && ok "without cuCtxSetLimit: exit 1, limit and heap probes differ" \
    || { bad "without limits: rc=$rc"; cat "$T/nolimit.out"; }
  "$HELPER" --drop-calls "$T/drv_attrs.fb" "$T/nocache.fb" 86,300 > /dev/null
  "$CUCAP" replay "$T/nocache.fb" --verify > "$T/nocache.out" 2>&1; rc=$?
  [ $rc -eq 1 ] && ok "without cuFuncSetCacheConfig/cuCtxSetCacheConfig: exit 1 (attribute probe)" \
    || { bad "without cache configs: rc=$rc"; cat "$T/nocache.out"; }
else
  echo "note: $HELPER missing: negative checks skipped"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
