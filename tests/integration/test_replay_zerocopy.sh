#!/usr/bin/env bash
# test_replay_zerocopy.sh - zero-copy pinned host memory in `cucap replay`
# on the mock libcuda.
# tests/apps/drv_zerocopy writes a cuMemHostAlloc(DEVICEMAP) buffer from a
# kernel through its mapped pointer and reads it from a second kernel into
# device memory, then copies that back (DtoH). Replay must re-create the
# pinned buffer at its recorded host address (mmap + cuMemHostRegister) or
# the kernels would touch unmapped memory: `cucap replay --verify` must exit
# 0, report all bytes matched, and log the pinned range as placed; the same
# with --relocate while the mock hands out device addresses from another
# base. Skips (77) when the mock, the app or `cucap record` are not there.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_zerocopy" ]; then
  echo "SKIP: drv_zerocopy not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
if "$CUCAP" record --help 2>&1 | grep -q "not yet implemented"; then
  echo "SKIP: cucap record is not yet implemented"; exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
placed="1 pinned host range(s) at recorded addresses, 0 not placed"

if ! "$CUCAP" record -o "$T/z.fb" -- "$APPS_DIR/drv_zerocopy" > "$T/rec.out" 2> "$T/rec.err"; then
  bad "record failed"; tail -5 "$T/rec.err"; exit 1
fi
if ! grep -q "HostAlloc" <("$CUCAP" dump "$T/z.fb" 2>/dev/null); then
  bad "the capture holds no HostAlloc record"
fi

CUCAP_LOG_LEVEL=info "$CUCAP" replay "$T/z.fb" --verify > "$T/rep.out" 2> "$T/rep.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/rep.out" \
   && grep -q "1048576 of 1048576 bytes matched" "$T/rep.out" \
   && grep -q "^memory: fixed addresses" "$T/rep.out" \
   && grep -qF "$placed" "$T/rep.err"; then
  ok "replay --verify: pinned buffer placed, $(grep '^verify:' "$T/rep.out" | cut -c9-90)"
else
  bad "replay --verify rc=$rc"; cat "$T/rep.out"; tail -5 "$T/rep.err"
fi

CUCAP_LOG_LEVEL=info CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/z.fb" \
  --verify --relocate > "$T/rel.out" 2> "$T/rel.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched" "$T/rel.out" \
   && grep -qF "$placed" "$T/rel.err"; then
  ok "replay --verify --relocate ($(grep '^memory:' "$T/rel.out" | cut -c9-120))"
else
  bad "replay --relocate rc=$rc"; cat "$T/rel.out"; tail -5 "$T/rel.err"
fi

# loops: the pinned buffer stays placed across loops
if "$CUCAP" replay "$T/z.fb" --verify --loop 2 > "$T/loop.out" 2> "$T/loop.err" \
   && grep -q "all bytes matched" "$T/loop.out"; then
  ok "replay --verify --loop 2"
else
  bad "replay --loop 2"; cat "$T/loop.out"; tail -5 "$T/loop.err"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
