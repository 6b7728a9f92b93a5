#!/usr/bin/env bash
# test_record_semantics.sh - what the semantic hooks record. Records the mock-driver apps with `cucap record` and checks,
# through `cucap dump --json`:
#   * the apps' output is unchanged by recording (tests/apps/<app>.expected);
#   * modules carry an image blob, functions their parameter layout;
#   * HtoD payload blobs are exactly the bytes the app uploaded (XXH3-128 of
#     bytes regenerated here, via a helper built against <xxhash.h>);
#   * launches carry the right argument block (device pointers of the
#     allocations, n, the `extra` struct of poly);
#   * callstacks: every recorded call refers to an emitted Callstack, and a
#     ModuleMap precedes them;
#   * --snapshot=launch:0 regions equal the uploaded data, --hash-launches
#     hashes every launch, --snapshot=exit captures memory left allocated;
#   * golden dumps tests/golden/<app>.jsonl after tests/golden/strip.py
#     (CUCAP_UPDATE_GOLDEN=1 rewrites them).
# Env (tests/CMakeLists.txt): CUCAP, CUCAP_SOURCE_DIR, MOCK_LIBDIR, APPS_DIR,
# PYTHON. Exit 0 pass, 1 fail, 77 skip.
set -u
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

: "${CUCAP:=}" "${CUCAP_SOURCE_DIR:=}" "${MOCK_LIBDIR:=}" "${APPS_DIR:=}"
PY=${PYTHON:-python3}
[ -x "$CUCAP" ] || skip "no cucap binary (CUCAP=$CUCAP)"
[ -e "$MOCK_LIBDIR/libcuda.so.1" ] || skip "no mock libcuda in $MOCK_LIBDIR"
[ -x "$APPS_DIR/drv_basic" ] || skip "no test apps in $APPS_DIR"
SRC=$CUCAP_SOURCE_DIR
GOLDEN=$SRC/tests/golden
# The hooks are called only once interpose/generated/ is regenerated from
# interpose/custom_table.txt; until then nothing here can pass.
if [ -f "$SRC/interpose/generated/wrappers.c" ] &&
   ! grep -q custom_launch_kernel "$SRC/interpose/generated/wrappers.c"; then
  skip "interpose/generated/ predates the semantic hooks (run: python3 interpose/gen_interpose.py)"
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/cucap-sem.XXXXXX")
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CUCAP_OPTIONS CUCAP_OUTPUT

# ---- record + dump helpers
rec() { # rec NAME APP [record options...]
  local name=$1 app=$2
  shift 2
  "$CUCAP" record "$@" -o "$T/$name.fb" -- "$APPS_DIR/$app" >"$T/$name.out" 2>"$T/$name.err" ||
    fail "cucap record $app failed: $(tail -5 "$T/$name.err")"
  "$CUCAP" dump --json "$T/$name.fb" >"$T/$name.jsonl" 2>"$T/$name.dump.err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -qi "not yet implemented\|unknown command" "$T/$name.dump.err"; then
    skip "cucap dump --json is not available yet"
  fi
  [ $rc -eq 0 ] || fail "cucap dump $name: exit $rc: $(head -3 "$T/$name.dump.err")"
}

# ---- XXH3-128 helper (hash of regenerated upload bytes)
HAVE_XXH=0
if command -v cc >/dev/null 2>&1; then
  cat >"$T/xxh128.c" <<'EOF'
#define XXH_INLINE_ALL
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n ? n : 1);
    if (!b || fread(b, 1, n, f) != (size_t)n) return 1;
    XXH128_hash_t h = XXH3_128bits(b, n);
    printf("%016llx%016llx\n", (unsigned long long)h.high64, (unsigned long long)h.low64);
    free(b);
    fclose(f);
  }
  return 0;
}
EOF
  cc -O1 -o "$T/xxh128" "$T/xxh128.c" 2>/dev/null && HAVE_XXH=1
fi
[ $HAVE_XXH -eq 1 ] || echo "note: no cc/xxhash.h: payload bytes checked by consistency only"

# ---- 1. every app records without changing its output
APPS="drv_basic drv_streams drv_threads drv_jit drv_library drv_pitch"
for app in $APPS; do
  [ -x "$APPS_DIR/$app" ] || { echo "note: $app not built, skipped"; continue; }
  rec "$app" "$app"
  if [ -f "$SRC/tests/apps/$app.expected" ]; then
    diff -q "$T/$app.out" "$SRC/tests/apps/$app.expected" >/dev/null ||
      fail "$app output changed under recording"
  fi
done

# ---- 2. extra captures: snapshots and launch hashes
rec basic_snap drv_basic --snapshot=launch:0
rec basic_hash drv_basic --hash-launches
rec basic_exit drv_basic --snapshot=exit

# an app that exits with memory still allocated (snapshot=exit regions)
HAVE_LEAK=0
if command -v cc >/dev/null 2>&1 && [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
  cat >"$T/leak.c" <<'EOF'
#include <cuda.h>
#include <stdio.h>
int main(void) {
  CUdevice d; CUcontext c; CUdeviceptr p; unsigned char h[4096];
  for (int i = 0; i < 4096; i++) h[i] = (unsigned char)(i * 7 + 1);
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
      cuCtxSetCurrent(c) || cuMemAlloc(&p, sizeof h) || cuMemcpyHtoD(p, h, sizeof h))
    return 1;
  FILE *f = fopen(LEAKBIN, "wb");
  if (!f || fwrite(h, 1, sizeof h, f) != sizeof h) return 1;
  fclose(f);
  return 0; /* p and the primary context are never released */
}
EOF
  if cc -O1 -I"${CUDA_HOME:-/usr/local/cuda}/include" -DLEAKBIN="\"$T/leak.bin\"" \
      -o "$T/leak" "$T/leak.c" -L"$MOCK_LIBDIR" -lcuda 2>"$T/leak.cc.err"; then
    HAVE_LEAK=1
    "$CUCAP" record --snapshot=exit -o "$T/leak.fb" -- "$T/leak" >/dev/null 2>"$T/leak.err" ||
      fail "recording the leak app failed: $(tail -3 "$T/leak.err")"
    "$CUCAP" dump --json "$T/leak.fb" >"$T/leak.jsonl" || fail "dump leak.fb"
  fi
fi

# ---- 3. semantic checks
echo "checks: xxh128 helper=$HAVE_XXH, leak app=$HAVE_LEAK"
"$PY" - "$T" "$HAVE_XXH" "$HAVE_LEAK" "$APPS" <<'PYEOF' || exit 1
import json, os, struct, subprocess, sys

T, have_xxh, have_leak, apps = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4].split()
errors = []

def err(msg):
    errors.append(msg)
    print("  error:", msg)

def load(name):
    recs = []
    with open(os.path.join(T, name + ".jsonl")) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "header" not in r:
                recs.append(r)
    return recs

def bodies(recs, t):
    return [r["body"] for r in recs if r.get("body_type") == t]

def xxh(data):
    p = os.path.join(T, "xxh.in")
    with open(p, "wb") as f:
        f.write(data)
    return subprocess.run([os.path.join(T, "xxh128"), p], capture_output=True,
                          text=True, check=True).stdout.strip()

def hexbytes(v):
    if isinstance(v, list):
        return bytes(v)
    return bytes.fromhex(v)

def hash_str(h):
    if isinstance(h, dict):
        return "%016x%016x" % (h["hi"], h["lo"])
    return h

for app in apps:
    if not os.path.exists(os.path.join(T, app + ".jsonl")):
        continue
    recs = load(app)
    mods = [m for m in bodies(recs, "Module") if m.get("op") == "Load"]
    if not mods:
        err("%s: no module load recorded" % app)
    for m in mods:
        if not m.get("image") or not m.get("image_size") or m.get("format") in (None, "Unknown"):
            err("%s: module without image blob: %s" % (app, m))
    fns = bodies(recs, "Function")
    if not fns:
        err("%s: no Function records" % app)
    by_handle = {}
    for f in fns:
        if not f.get("params") or not f.get("param_bytes"):
            err("%s: function %s without params" % (app, f.get("name")))
        by_handle[f["handle"]] = f
    for l in bodies(recs, "Launch"):
        if l.get("kind") == "HostFunc":
            continue
        if not l.get("args") and not l.get("has_args_blob"):
            err("%s: launch without arguments: %s" % (app, l))
        f = by_handle.get(l.get("function"))
        if f and l.get("args") and not l.get("from_extra"):
            if len(hexbytes(l["args"])) != f["param_bytes"]:
                err("%s: launch args %d bytes, function %s has %d" %
                    (app, len(hexbytes(l["args"])), f.get("name"), f["param_bytes"]))
    # callstacks
    ids = set()
    saw_map = False
    for r in recs:
        if r.get("body_type") == "ModuleMap":
            saw_map = True
        if r.get("body_type") == "Callstack":
            if not saw_map:
                err("%s: Callstack before any ModuleMap" % app)
            ids.add(r["body"]["id"])
            if not r["body"].get("frames"):
                err("%s: empty Callstack" % app)
    if not ids:
        err("%s: no Callstack records" % app)
    for r in recs:
        s = r.get("stack")
        if s and s not in ids:
            err("%s: record %s refers to unknown stack %s" % (app, r.get("index"), s))
    if not any(r.get("stack") for r in recs if r.get("body_type") == "Launch"):
        err("%s: launches without callstack" % app)

# drv_basic: exact payloads and argument blocks
if os.path.exists(os.path.join(T, "drv_basic.jsonl")):
    recs = load("drv_basic")
    N = 1 << 16
    a = b"".join(struct.pack("<f", float(i % 100)) for i in range(N))
    b = b"".join(struct.pack("<f", float(2 * (i % 7))) for i in range(N))
    allocs = [x for x in bodies(recs, "Alloc") if x.get("kind") == "Device"]
    htod = [x for x in bodies(recs, "Memcpy") if x.get("kind") == "HtoD"]
    if len(allocs) != 3 or len(htod) != 2:
        err("drv_basic: expected 3 allocations and 2 HtoD copies, got %d/%d" % (len(allocs), len(htod)))
    else:
        da, db, dc = (x["address"] for x in allocs)
        if htod[0]["dst"] != da or htod[1]["dst"] != db:
            err("drv_basic: HtoD destinations do not match the allocations")
        if not all(x.get("has_payload") for x in htod):
            err("drv_basic: HtoD without payload")
        elif have_xxh:
            if hash_str(htod[0]["payload"]) != xxh(a) or hash_str(htod[1]["payload"]) != xxh(b):
                err("drv_basic: HtoD payload blobs differ from the uploaded bytes")
        dtoh = [x for x in bodies(recs, "Memcpy") if x.get("kind") == "DtoH"]
        if len(dtoh) != 4 or not all(x.get("has_payload") for x in dtoh):
            err("drv_basic: DtoH copies without payload")
        launches = bodies(recs, "Launch")
        if len(launches) != 2:
            err("drv_basic: expected 2 launches")
        else:
            va = hexbytes(launches[0]["args"])
            want = struct.pack("<QQQi", da, db, dc, N)
            if va != want:
                err("drv_basic: vec_add args %s, want %s" % (va.hex(), want.hex()))
            if launches[0].get("launch_index") not in (None, 0) or launches[1].get("launch_index") != 1:
                err("drv_basic: launch_index not 0, 1")
            pa = hexbytes(launches[1]["args"])
            wantp = struct.pack("<b3xfffQi", 3, 0.5, 2.0, -1.0, dc, N)  # exact 28-byte block
            if not launches[1].get("from_extra") or pa != wantp:
                err("drv_basic: poly extra args %s, want %s" % (pa.hex(), wantp.hex()))

    # snapshot before launch 0: regions equal the uploaded data; after it:
    # the same regions, the output (vec_add's c) changed
    srecs = load("basic_snap")
    snaps = bodies(srecs, "Snapshot")
    if len(snaps) != 2 or snaps[0].get("reason") != "BeforeLaunch" or \
            snaps[1].get("reason") != "AfterLaunch" or snaps[1].get("launch_index") != 0:
        err("snapshot=launch:0: expected a BeforeLaunch and an AfterLaunch snapshot, got %s" % snaps)
    else:
        before = {r["address"]: r.get("data") for r in snaps[0].get("regions", [])}
        after = {r["address"]: r.get("data") for r in snaps[1].get("regions", [])}
        changed = [a for a in before if after.get(a) != before[a]]
        if sorted(after) != sorted(before) or len(changed) != 1:
            err("snapshot=launch:0: after the launch exactly one region (the output) "
                "should differ: %d do" % len(changed))
        regs = {r["address"]: r for r in snaps[0].get("regions", [])}
        sallocs = [x for x in bodies(srecs, "Alloc") if x.get("kind") == "Device"]
        shtod = [x for x in bodies(srecs, "Memcpy") if x.get("kind") == "HtoD"]
        if len(regs) != 3:
            err("snapshot=launch:0: %d regions, want 3" % len(regs))
        for cp in shtod:
            r = regs.get(cp["dst"])
            if not r or hash_str(r.get("data")) != hash_str(cp.get("payload")):
                err("snapshot=launch:0: region at %#x does not hold the uploaded data" % cp["dst"])

    hrecs = load("basic_hash")
    lh = bodies(hrecs, "LaunchHash")
    if len(lh) != 2 or any(len(x.get("regions", [])) != 3 or
                           not all(r.get("hash") for r in x["regions"]) for x in lh):
        err("--hash-launches: want 2 LaunchHash records with 3 hashed regions: %s" % lh)

    erecs = load("basic_exit")
    es = bodies(erecs, "Snapshot")
    if not es or es[0].get("reason") != "Exit":
        err("snapshot=exit: no Exit snapshot for drv_basic")

if have_leak:
    recs = load("leak")
    snaps = bodies(recs, "Snapshot")
    cp = [x for x in bodies(recs, "Memcpy") if x.get("kind") == "HtoD"]
    if len(snaps) != 1 or snaps[0].get("reason") != "Exit" or len(snaps[0].get("regions", [])) != 1:
        err("snapshot=exit (leak): want one Exit snapshot with 1 region: %s" % snaps)
    elif not cp or hash_str(snaps[0]["regions"][0].get("data")) != hash_str(cp[0].get("payload")):
        err("snapshot=exit (leak): region content differs from the uploaded data")
    elif have_xxh:
        with open(os.path.join(T, "leak.bin"), "rb") as f:
            if hash_str(cp[0]["payload"]) != xxh(f.read()):
                err("leak: HtoD payload differs from the uploaded bytes")

print("semantic checks: %d error(s) (%d apps)" % (len(errors), len(apps)))
sys.exit(1 if errors else 0)
PYEOF

# ---- 4. golden dumps
gold_fail=0
for app in $APPS; do
  [ -f "$T/$app.jsonl" ] || continue
  loose=""
  [ "$app" = drv_threads ] && loose="--loose"
  "$PY" "$GOLDEN/strip.py" $loose "$T/$app.jsonl" >"$T/$app.golden" || fail "strip.py $app"
  if [ "${CUCAP_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$T/$app.golden" "$GOLDEN/$app.jsonl"
    echo "updated $GOLDEN/$app.jsonl"
  elif [ -f "$GOLDEN/$app.jsonl" ]; then
    if ! diff -u "$GOLDEN/$app.jsonl" "$T/$app.golden" >"$T/$app.diff"; then
      echo "golden mismatch for $app:"
      head -40 "$T/$app.diff"
      gold_fail=1
    fi
  else
    echo "note: no golden file for $app (CUCAP_UPDATE_GOLDEN=1 creates it)"
  fi
done
[ $gold_fail -eq 0 ] || fail "golden dumps differ"
echo "test_record_semantics: ok"
exit 0
