#!/usr/bin/env bash
# test_record_fork.sh - processes other than the recorded one never clobber
# its capture. With the mock libcuda:
#  1. record_fork_app fork: children forked after cuInit (normal exit with
#     atexit/destructors, a driver call then exit, death by SIGTERM) are not
#     recorded and leave the parent's capture complete, with all of the
#     parent's calls (seq 1..N contiguous), and create no file.
#  2. record_fork_app spawn: `sh -c true` (no CUDA) writes nothing; a second
#     CUDA process (fork+exec) writes its own PATH.<pid> capture; the
#     parent's capture is complete and has the parent's calls only.
#  3. a program that never calls CUDA creates no capture file at all.
#  4. a Devices record follows the first cuInit, and calls carry `context`.
# Skips (77) when the mock, cucap or a C compiler is missing.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
PY="${PYTHON:-python3}"
SRC="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
CC="${CC:-cc}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no C compiler"; exit 77; }
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

"$CC" -O2 ${CUCAP_TEST_CFLAGS:-} -o "$T/app" "$SRC/tests/integration/record_fork_app.c" -ldl 2> "$T/cc.err" ||
  { cat "$T/cc.err"; echo "FAIL: cannot compile record_fork_app.c"; exit 1; }

# inspect FILE CALLNAME=COUNT... : capture complete (cucap info exit 0), seq
# 1..N contiguous in file order, exact per-name call counts (as cucap info
# names them), one Devices record right after cuInit, context on calls after
# cuInit... (the mock has a current context only after cuCtxSetCurrent, so
# only "present or absent consistently" is checked there).
inspect() {
  local f="$1"; shift
  "$CUCAP" info --json "$f" > "$T/info.json" 2> "$T/info.err" || { cat "$T/info.err"; return 1; }
  "$CUCAP" dump --json "$f" > "$T/dump.jsonl" 2> "$T/dump.err" || { cat "$T/dump.err"; return 1; }
  "$PY" - "$T/info.json" "$T/dump.jsonl" "$@" <<'PYEOF'
import json, sys
info = json.load(open(sys.argv[1]))
recs = [json.loads(l) for l in open(sys.argv[2])][1:]
if not info.get("complete", True) or info.get("problem"):
    sys.exit("capture incomplete: %s" % info.get("problem"))
seqs = [r["seq"] for r in recs if r.get("seq")]
if seqs != list(range(1, len(seqs) + 1)):
    sys.exit("seq not 1..N in file order")
calls = info["calls_by_name"]
for want in sys.argv[3:]:
    name, n = want.split("=")
    if calls.get(name, 0) != int(n):
        sys.exit("%s: %d calls, want %s (all: %s)" % (name, calls.get(name, 0), n, calls))
devs = [i for i, r in enumerate(recs) if r.get("body_type") == "Devices"]
if len(devs) != 1:
    sys.exit("want exactly one Devices record, got %d" % len(devs))
prev = recs[devs[0] - 1]
if prev.get("call") != 1 or prev.get("result") != 0:   # cbid 1 = cuInit
    sys.exit("the Devices record does not follow the cuInit record")
d = recs[devs[0]]["body"]
if d.get("driver_version", 0) <= 0 or not d.get("devices"):
    sys.exit("Devices record empty: %s" % d)
if "devices_record" not in info:
    sys.exit("cucap info --json lacks devices_record")
print("%d calls, Devices: driver %d, %d device(s)" % (len(seqs), d["driver_version"], len(d["devices"])))
PYEOF
}

# ---- 1. fork ----------------------------------------------------------------
"$T/app" fork 200 > "$T/native.out" 2>&1; nrc=$?
mkdir -p "$T/f"
"$CUCAP" record -o "$T/f/cap.fb" -- "$T/app" fork 200 > "$T/rec.out" 2> "$T/rec.err"; rrc=$?
if [ "$nrc" = 0 ] && [ "$rrc" = 0 ] && cmp -s "$T/native.out" "$T/rec.out"; then
  ok "fork: same output and exit code"
else bad "fork: rc native $nrc recorded $rrc"; cat "$T/rec.err"; fi
if inspect "$T/f/cap.fb" cuInit=1 cuDeviceGet=200 cuDriverGetVersion=1; then
  ok "fork: parent capture complete with all the parent's calls"
else bad "fork: parent capture"; fi
n=$(ls "$T/f" | wc -l)
if [ "$n" = 1 ]; then ok "fork: children created no file"; else bad "fork: files: $(ls "$T/f")"; fi

# ---- 2. subprocesses ----------------------------------------------------------
mkdir -p "$T/s"
"$CUCAP" record -o "$T/s/cap.fb" -- "$T/app" spawn 150 > "$T/spawn.out" 2> "$T/spawn.err"; rc=$?
cpid=$(sed -n 's/^child pid \([0-9]*\)$/\1/p' "$T/spawn.out")
if [ "$rc" = 0 ] && grep -q "parent done" "$T/spawn.out" && [ -n "$cpid" ]; then
  ok "spawn: app ran (CUDA child pid $cpid)"
else bad "spawn: rc $rc"; cat "$T/spawn.out" "$T/spawn.err"; fi
if inspect "$T/s/cap.fb" cuInit=1 cuDeviceGet=150 cuDriverGetVersion=1; then
  ok "spawn: parent capture complete, parent's calls only"
else bad "spawn: parent capture"; fi
if [ -n "$cpid" ] && [ -f "$T/s/cap.$cpid.fb" ] &&
   inspect "$T/s/cap.$cpid.fb" cuInit=1 cuDriverGetVersion=1 cuDeviceGet=0; then
  ok "spawn: CUDA child wrote its own cap.$cpid.fb"
else bad "spawn: child capture cap.$cpid.fb: $(ls "$T/s")"; fi
n=$(ls "$T/s" | wc -l)
if [ "$n" = 2 ]; then ok "spawn: sh -c true wrote nothing"; else bad "spawn: files: $(ls "$T/s")"; fi
if grep -q "cap.$cpid.fb" "$T/spawn.err"; then ok "spawn: summary lists the child capture"
else bad "spawn: no summary line for the child capture"; cat "$T/spawn.err"; fi
# %p pattern: the child's name is its own expansion, no suffix
mkdir -p "$T/p"
"$CUCAP" record -o "$T/p/cap-%p.fb" -- "$T/app" spawn 10 > "$T/p.out" 2>/dev/null
cpid=$(sed -n 's/^child pid \([0-9]*\)$/\1/p' "$T/p.out")
if [ -n "$cpid" ] && [ -f "$T/p/cap-$cpid.fb" ] && [ "$(ls "$T/p" | wc -l)" = 2 ]; then
  ok "%p pattern: child capture cap-$cpid.fb"
else bad "%p pattern: $(ls "$T/p")"; fi

# ---- 3. no CUDA, no file -------------------------------------------------------
mkdir -p "$T/n"
"$CUCAP" record -o "$T/n/cap.fb" -- sh -c 'true; ls / >/dev/null' 2> "$T/n.err"; rc=$?
if [ "$rc" = 0 ] && [ -z "$(ls "$T/n")" ]; then ok "no CUDA call: no file created"
else bad "no CUDA call: rc $rc, files $(ls "$T/n")"; fi

# ---- 4. Record.context ---------------------------------------------------------
if [ -n "${APPS_DIR:-}" ] && [ -x "$APPS_DIR/drv_basic" ]; then
  "$CUCAP" record -o "$T/ctx.fb" -- "$APPS_DIR/drv_basic" > /dev/null 2>&1
  "$CUCAP" dump --json "$T/ctx.fb" > "$T/ctx.jsonl" 2>/dev/null
  if "$PY" - "$T/ctx.jsonl" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
calls = [r for r in recs if r.get("seq")]
ctx = [r for r in calls if r.get("context")]
create = next(r for r in calls if r.get("body_type") == "Context" and r["body"].get("op") == "Create")
assert create.get("context") == create["body"]["handle"], create
assert len(ctx) >= len(calls) // 2, (len(ctx), len(calls))
print("%d of %d calls carry a context" % (len(ctx), len(calls)))
PYEOF
  then ok "Record.context filled"; else bad "Record.context"; fi
else
  echo "skip: APPS_DIR/drv_basic not built"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ] || exit 1
exit 0
