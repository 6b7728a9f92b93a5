#!/usr/bin/env bash
# test_share.sh - trim, extract (+ --emit-c), export, diff, NVTX recording
# and the readable info/dump, end to end on the mock libcuda with drv_train
# (8 steps, an NVTX "step" range per step, step 3 also a profiler range).
#  1. NVTX: the capture holds the pushes/pops, domain ranges, marks and
#     start/end ranges with thread and time; `cucap record` set
#     NVTX_INJECTION64_PATH itself.
#  2. trim by NVTX range, profiler range and launch range from recorded
#     snapshots (--snapshot=range:step@3 / range:cuProfilerStart /
#     launch:9): each replays with --verify, every byte matched, smaller
#     than the source, the header says where the memory came from; trim
#     --replay (state read by the replay observer on the mock) of a capture
#     without snapshots, also by time window; no snapshot and no --replay:
#     exit 2 naming the fix.
#  3. extract of one launch (recorded snapshot, --minimal, --replay, by
#     kernel name): replays standalone with --verify and --loop; the
#     --emit-c program builds with cc against libcuda (the mock), runs and
#     prints the checksum `extract` printed, "MATCH".
#  4. export: Perfetto decoded by protoc with tests/export/
#     perfetto_subset.proto and checked (check_perfetto.py), and with
#     Perfetto's own complete protos when PERFETTO_PROTOS names them, Chrome JSON
#     loaded and checked (check_chrome.py), with and without --profile.
#  5. diff: two recordings of the same program: "same", exit 0; a changed
#     kernel argument (DRV_TRAIN_SCALE): exit 1 naming the scale launches'
#     parameter 1; two GPU timings files: per-kernel changes listed.
#  5b. drv_share (a fatbin with SASS sm_75/80/90 + PTX compute_80/90, a
#     struct parameter with device pointers, host addresses and stale pointer
#     halves): trim/extract reduce the image to sm_90 SASS + compute_90 PTX,
#     a new blob the Module record names, and the mock replays it with
#     --verify (--keep-all-archs keeps the source image); diff of two runs
#     with other device/host addresses: "same", host addresses counted
#     apart; a changed struct member or scalar is named; stale padding
#     bytes the kernel never reads (DRV_SHARE_JUNK): "same" with launch
#     hashes in both captures (without effect), a difference without them.
#  6. bad input: truncated / bit-flipped captures and a broken timings file
#     give exit 3 and one error line from every new command, never a crash.
# Skips (77) without the mock, drv_train or cucap.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
SRC="${CUCAP_SOURCE_DIR:?}"
PY="${PYTHON:-python3}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ] || [ ! -x "$APPS_DIR/drv_train" ]; then
  echo "SKIP: mock libcuda, cucap or drv_train missing"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset NVTX_INJECTION64_PATH
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
APP="$APPS_DIR/drv_train"
rec() { # out options...
  local out=$1; shift
  "$CUCAP" record "$@" -o "$out" -- "$APP" >"$out.out" 2>"$out.err" ||
    { bad "record $* (rc $?)"; tail -3 "$out.err"; return 1; }
}
verify() { # label capture [replay options]
  local label=$1 cap=$2; shift 2
  if "$CUCAP" replay "$cap" --verify "$@" >"$cap.rep" 2>&1 && grep -q "all bytes matched" "$cap.rep" &&
     ! grep -q "skipped:" "$cap.rep"; then
    ok "$label: replay --verify $* ($(grep -o '[0-9]* of [0-9]* bytes matched' "$cap.rep"))"
  else bad "$label: replay --verify $*"; cat "$cap.rep"; fi
}
size() { stat -c %s "$1"; }

rec "$T/plain.fb" || exit 1
rec "$T/step.fb" --snapshot=range:step@3
rec "$T/prof.fb" --snapshot=range:cuProfilerStart
rec "$T/launch.fb" --snapshot=launch:9
cmp -s "$T/plain.fb.out" "$SRC/tests/apps/drv_train.expected" && ok "drv_train output unchanged under record" ||
  bad "drv_train output differs under record"

# ---- 1. NVTX records
"$CUCAP" dump --json --body Nvtx "$T/plain.fb" >"$T/nvtx.jsonl" 2>&1
if "$PY" - "$T/nvtx.jsonl" <<'PYEOF'; then ok "NVTX: pushes/pops, domain, marks, start/end with tid and time"; else bad "NVTX records"; fi
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
ops = {}
for r in recs:
    b = r["body"]
    ops.setdefault(b["op"], []).append(r)
    assert r["tid"] > 0 and "t_enter" in r, r
push = [r["body"] for r in ops["Push"]]
assert sum(1 for b in push if b["message"] == "step" and not b.get("domain")) == 8, push
fwd = [b for b in push if b["message"] == "forward"]
assert len(fwd) == 8 and all(b.get("domain") and b.get("color") == 0xff3366cc for b in fwd), fwd
assert len(ops["Pop"]) == 16 and len(ops["Mark"]) == 8, {k: len(v) for k, v in ops.items()}
starts = {r["body"]["range_id"] for r in ops["RangeStart"]}
ends = {r["body"]["range_id"] for r in ops["RangeEnd"]}
assert len(starts) == 8 and starts == ends, (starts, ends)
dc = ops["DomainCreate"][0]["body"]
assert dc["message"] == "train" and dc["domain"] == fwd[0]["domain"], dc
assert ops["NameThread"][0]["body"]["message"] == "trainer"
times = [r["t_enter"] for r in recs]
assert times == sorted(times), "NVTX records out of time order"
PYEOF

# ---- 2. trim
trim() { # label src range expect-state options...
  local label=$1 src=$2 range=$3 state=$4; shift 4
  local out="$T/trim-$label.fb"
  if "$CUCAP" trim "$src" -o "$out" --range="$range" "$@" >"$out.txt" 2>"$out.err"; then
    if "$CUCAP" info "$out" | grep -q "^state prefix: .*memory contents from $state" &&
       [ "$(size "$out")" -lt "$(size "$src")" ]; then
      ok "trim $range $*: $(size "$src") -> $(size "$out") bytes, memory from $state"
    else bad "trim $range: header or size"; "$CUCAP" info "$out" | grep -E "made by|state prefix"; fi
    verify "trim $range $*" "$out"
  else bad "trim $range $* (rc $?)"; cat "$out.err"; fi
}
trim nvtx "$T/step.fb" nvtx:step@3 "a snapshot recorded"
trim prof "$T/prof.fb" profiler "a snapshot recorded"
trim launch "$T/launch.fb" launch:9-11 "a snapshot recorded"
trim nvtx-replay "$T/plain.fb" nvtx:step@5 "a replay" --replay
trim launch-replay "$T/plain.fb" launch:4-16 "a replay" --replay
trim prof-replay "$T/plain.fb" profiler@0 "a replay" --replay
# a time window: steps 2..5 of the recording (its NVTX times)
win=$("$PY" - "$T/nvtx.jsonl" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
steps = [r["t_enter"] for r in recs if r["body"]["op"] == "Push" and r["body"].get("message") == "step"]
print("time:%dns-%dns" % (steps[2], steps[5]))
PYEOF
)
trim time "$T/plain.fb" "$win" "a replay" --replay
"$CUCAP" trim "$T/plain.fb" -o "$T/x.fb" --range=nvtx:step@3 >/dev/null 2>"$T/nosnap.err"; rc=$?
[ $rc = 2 ] && grep -q "snapshot=range:NAME@K, or use trim --replay" "$T/nosnap.err" &&
  ok "no snapshot, no --replay: exit 2: $(cut -c1-120 "$T/nosnap.err")" || { bad "no-snapshot trim rc=$rc"; cat "$T/nosnap.err"; }
"$CUCAP" trim "$T/plain.fb" -o "$T/x.fb" --range=nvtx:nosuch --replay >/dev/null 2>"$T/nf.err"; rc=$?
[ $rc = 2 ] && grep -q "not in the capture" "$T/nf.err" && ok "unknown range: exit 2" || bad "unknown range rc=$rc"
"$CUCAP" trim "$T/plain.fb" -o "$T/x.fb" --range=bogus:1 >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "bad range spec: exit 2" || bad "bad range spec rc=$rc"

# ---- 3. extract
ex() { # label src options...
  local label=$1 src=$2; shift 2
  local out="$T/ex-$label.fb"
  if "$CUCAP" extract "$src" -o "$out" "$@" >"$out.txt" 2>"$out.err"; then
    ok "extract $*: $(head -1 "$out.txt" | cut -c1-110)"
    verify "extract $*" "$out"
  else bad "extract $* (rc $?)"; cat "$out.err"; fi
}
ex snap "$T/launch.fb" --launch 9 --emit-c "$T/c"
ex minimal "$T/launch.fb" --launch 9 --minimal
ex replay "$T/plain.fb" --kernel scale --nth 5 --replay
ex replay-min "$T/plain.fb" --launch 20 --replay --minimal
verify "extract --loop 200" "$T/ex-snap.fb" --loop 200
# saxpy(a, x, y, n) reads 2 of the 3 buffers: --minimal keeps those
grep -q "^extract launch 20 (saxpy) .*: 2 regions" "$T/ex-replay-min.fb.txt" &&
  grep -q "^extract launch 16 (scale) .*: 3 regions" "$T/ex-replay.fb.txt" &&
  ok "--minimal keeps only the allocations the pointer parameters point into" ||
  { bad "--minimal regions"; cat "$T/ex-replay-min.fb.txt"; }
"$CUCAP" extract "$T/launch.fb" --launch 10 -o "$T/x.fb" >/dev/null 2>"$T/ex10.err"; rc=$?
[ $rc = 2 ] && grep -q "snapshot=launch:10" "$T/ex10.err" && ok "extract without a snapshot there: exit 2" ||
  { bad "extract launch 10 rc=$rc"; cat "$T/ex10.err"; }
CC=${CC:-cc}
want=$(sed -n 's/^expected checksum \(0x[0-9a-f]*\).*/\1/p' "$T/ex-snap.fb.txt")
# shellcheck disable=SC2086 # (flags: the sanitizers of this build, like the mock it loads)
if (cd "$T/c" && $CC ${CUCAP_TEST_CFLAGS:-} -O2 -o repro repro.c -I"${CUDA_HOME:-/usr/local/cuda}/include" -L"$MOCK_LIBDIR" -lcuda \
      >"$T/cc.out" 2>&1); then
  if (cd "$T/c" && ./repro >"$T/repro.out" 2>&1) && grep -q "^checksum $want$" "$T/repro.out" &&
     grep -q "MATCH" "$T/repro.out"; then
    ok "--emit-c program: builds with cc -lcuda, prints checksum $want, MATCH"
  else bad "--emit-c program run"; cat "$T/repro.out"; fi
else bad "--emit-c program does not build"; cat "$T/cc.out"; fi

# ---- 4. export
EX="$SRC/tests/export"
"$PY" - "$T/nvtx.jsonl" "$T/times.csv" "$T/times2.csv" <<'PYEOF'
import json, sys
# GPU timings tables for --profile: launch i runs 1000 ns (2000 in the second)
with open(sys.argv[2], "w") as f, open(sys.argv[3], "w") as g:
    f.write("# cucap GPU timings\nlaunch_index,start_ns,end_ns,kernel,achieved_occupancy\n")
    g.write("launch_index,start_ns,end_ns,achieved_occupancy\n")
    for i in range(24):
        f.write("%d,%d,%d,k,0.5\n" % (i, 10**9 + 5000 * i, 10**9 + 5000 * i + 1000))
        g.write("%d,%d,%d,%s\n" % (i, 5000 * i, 5000 * i + (2000 if i % 3 == 1 else 1000), "0.25"))
PYEOF
for prof in "" "--profile $T/times.csv"; do
  # shellcheck disable=SC2086
  if "$CUCAP" export "$T/plain.fb" --format=perfetto -o "$T/t.pftrace" $prof >"$T/exp.txt" 2>&1 &&
     protoc --proto_path="$EX" --decode=perfetto.protos.Trace perfetto_subset.proto \
       <"$T/t.pftrace" >"$T/t.txt" 2>"$T/protoc.err" &&
     "$PY" "$EX/check_perfetto.py" "$T/t.txt" --expect kernels=24 --expect nvtx=24 --expect flows=24 \
       --expect threads=1 >"$T/chk.txt"; then
    ok "perfetto ${prof:+(--profile) }decoded by protoc: $(cat "$T/chk.txt")"
  else bad "perfetto export ${prof}"; cat "$T/exp.txt" "$T/protoc.err" "$T/chk.txt" 2>/dev/null | head; fi
  # PERFETTO_PROTOS=DIR (a checkout of google/perfetto, or its protos/ tree
  # under DIR): decoded once more with Perfetto's own complete trace.proto;
  # a field it does not know comes out as a bare number and fails
  if [ -n "${PERFETTO_PROTOS:-}" ] && [ -f "$PERFETTO_PROTOS/protos/perfetto/trace/trace.proto" ]; then
    if protoc --proto_path="$PERFETTO_PROTOS" --decode=perfetto.protos.Trace \
         protos/perfetto/trace/trace.proto <"$T/t.pftrace" >"$T/t_full.txt" 2>"$T/protoc_full.err" &&
       ! grep -qE '^ *[0-9]+( \{|:)' "$T/t_full.txt" &&
       [ "$(grep -c '^packet {' "$T/t_full.txt")" = "$(grep -c '^packet {' "$T/t.txt")" ]; then
      ok "perfetto ${prof:+(--profile) }decoded with Perfetto's own trace.proto: $(grep -c '^packet {' "$T/t_full.txt") packets, no unknown field"
    else bad "perfetto ${prof}: Perfetto's trace.proto: $(head -3 "$T/protoc_full.err")"; fi
  fi
  # shellcheck disable=SC2086
  if "$CUCAP" export "$T/plain.fb" --format=chrome-json -o "$T/t.json" $prof >"$T/exp.txt" 2>&1 &&
     "$PY" "$EX/check_chrome.py" "$T/t.json" --expect kernels=24 --expect nvtx=24 --expect flows=24 >"$T/chk.txt"; then
    ok "chrome-json ${prof:+(--profile) }loaded: $(cat "$T/chk.txt")"
  else bad "chrome-json export ${prof}"; cat "$T/exp.txt" "$T/chk.txt"; fi
done
grep -q "GPU times from profile: 24 timed" "$T/exp.txt" && ok "--profile times every kernel" || bad "--profile not used: $(cat "$T/exp.txt")"
"$PY" - "$T/t.json" <<'PYEOF' && ok "profiled kernels last 1 us, after their launch calls" || bad "profiled kernel times"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
k = [e for e in ev if e.get("cat") == "kernel"]
assert len(k) == 24 and all(abs(e["dur"] - 1.0) < 1e-6 for e in k), [e["dur"] for e in k][:5]
launch = {e["args"]["seq"]: e for e in ev if e.get("ph") == "X" and e.get("name") == "cuLaunchKernel"}
starts = {e["id"]: e["ts"] for e in ev if e["ph"] == "s"}
ends = {e["id"]: e["ts"] for e in ev if e["ph"] == "f"}
assert all(ends[i] >= starts[i] for i in ends)
PYEOF

# ---- 5. diff
rec "$T/plain2.fb"
DRV_TRAIN_SCALE=0.25 rec "$T/scaled.fb"
# 58 calls: the pure queries (cuDeviceGetCount, ...) are counted, not sequenced (QueryCounts)
"$CUCAP" diff "$T/plain.fb" "$T/plain2.fb" >"$T/d1.txt" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^same: 58 / 58 calls, 24 launches matched" "$T/d1.txt" && ok "diff of two runs: $(cat "$T/d1.txt")" ||
  { bad "diff same rc=$rc"; cat "$T/d1.txt"; }
"$CUCAP" diff "$T/plain.fb" "$T/scaled.fb" >"$T/d2.txt" 2>&1; rc=$?
if [ $rc = 1 ] && grep -q "^launch 1 (B: 1) scale, occurrence 0 at its call site: parameter 1 (offset 8, 4 bytes): A 0x3f000000, B 0x3e800000" "$T/d2.txt" &&
   grep -q "^differ: .* launches matched (8 differ, 0 unmatched)" "$T/d2.txt"; then
  ok "diff with a changed kernel argument: exit 1: $(head -1 "$T/d2.txt")"
else bad "diff changed argument rc=$rc"; cat "$T/d2.txt"; fi
"$CUCAP" diff "$T/plain.fb" "$T/plain2.fb" --profile-a "$T/times.csv" --profile-b "$T/times2.csv" >"$T/d3.txt" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^  scale: 8.000 us (8 launches) -> 16.000 us (8) +100.0%; achieved_occupancy 0.5 -> 0.25" "$T/d3.txt" &&
  ok "diff with profiles: $(grep -m1 '^  scale' "$T/d3.txt")" || { bad "diff profiles rc=$rc"; cat "$T/d3.txt"; }

# ---- 5b. drv_share: a multi-architecture image (SASS sm_75/80/90, PTX
# compute_80/90) and a struct parameter holding device pointers, host
# addresses and stale pointer halves in its padding
SH="$APPS_DIR/drv_share"
if [ -x "$SH" ]; then
  shrec() { # out env... -- options
    local out=$1; shift
    env "$@" "$CUCAP" record -o "$out" ${SHOPT:-} -- "$SH" >"$out.out" 2>"$out.err" ||
      { bad "record drv_share $* (rc $?)"; tail -3 "$out.err"; }
  }
  SHOPT=--snapshot=launch:2 shrec "$T/sh.fb" X=1
  cmp -s "$T/sh.fb.out" "$SRC/tests/apps/drv_share.expected" && ok "drv_share output unchanged under record" ||
    bad "drv_share output differs under record"
  # trim: the image keeps the sm_90 SASS and the compute_90 PTX, a new blob
  # the trimmed Module record names; the mock loads it and the replay verifies
  if "$CUCAP" trim "$T/sh.fb" -o "$T/sh-trim.fb" --range=launch:2-3 >"$T/sh-trim.txt" 2>&1 &&
     grep -q "^module images: 1 (1 reduced to sm_90 + PTX <= compute_90), [0-9]* -> [0-9]* bytes" "$T/sh-trim.txt"; then
    ok "trim of a multi-arch image: $(tail -1 "$T/sh-trim.txt" | cut -c1-100)"
  else bad "trim drv_share"; cat "$T/sh-trim.txt"; fi
  verify "trim drv_share (reduced image)" "$T/sh-trim.fb"
  "$CUCAP" trim "$T/sh.fb" -o "$T/sh-all.fb" --range=launch:2-3 --keep-all-archs >"$T/sh-all.txt" 2>&1 ||
    bad "trim --keep-all-archs"
  verify "trim drv_share --keep-all-archs" "$T/sh-all.fb"
  for f in sh sh-trim sh-all; do
    "$CUCAP" dump --json --body Module --no-symbols "$T/$f.fb" >"$T/$f.mod.jsonl" 2>/dev/null
  done
  if "$PY" - "$T/sh.mod.jsonl" "$T/sh-trim.mod.jsonl" "$T/sh-all.mod.jsonl" <<'PYEOF'; then
import json, sys
def load(p):
    return [json.loads(l)["body"] for l in open(p) if '"body"' in l and '"Load"' in l]
src, red, full = (load(p) for p in sys.argv[1:4])
assert len(src) == len(red) == len(full) == 1, (src, red, full)
assert full[0]["image"] == src[0]["image"] and full[0]["image_size"] == src[0]["image_size"], full
assert red[0]["image"] != src[0]["image"] and red[0]["image_size"] < src[0]["image_size"] / 2, (red, src)
PYEOF
    ok "the trimmed Module record names the reduced image; --keep-all-archs the source's"
  else bad "Module records of the trimmed captures"; fi
  "$CUCAP" dump --json --body Launch "$T/sh-trim.fb" >"$T/sh-trim.launch.jsonl" 2>/dev/null
  grep -q '"callstack":\[' "$T/sh-trim.launch.jsonl" && ok "trimmed launches keep their callstacks" ||
    bad "trimmed launches lost their callstacks"
  # extract: the emitted module file is the reduced fatbin
  if "$CUCAP" extract "$T/sh.fb" --launch 2 -o "$T/sh-ex.fb" --emit-c "$T/shc" >"$T/sh-ex.txt" 2>&1 &&
     "$PY" - "$T/shc/module.bin" <<'PYEOF'; then
import struct, sys
d = open(sys.argv[1], "rb").read()
magic, ver, hs, fs = struct.unpack_from("<IHHQ", d, 0)
assert magic == 0xBA55ED50 and hs + fs == len(d) and len(d) % 8 == 0, (hex(magic), hs, fs, len(d))
off, kept = hs, []
while off < hs + fs:
    kind, _, ehs, psz = struct.unpack_from("<HHIQ", d, off)
    kept.append(("ELF" if kind == 2 else "PTX" if kind == 1 else kind, struct.unpack_from("<I", d, off + 28)[0]))
    off += ehs + psz
assert off == hs + fs and sorted(kept) == [("ELF", 90), ("PTX", 90)], kept
PYEOF
    ok "extract: the module file holds sm_90 SASS + compute_90 PTX only"
  else bad "extract drv_share image"; cat "$T/sh-ex.txt"; fi
  verify "extract drv_share (reduced image)" "$T/sh-ex.fb"
  # diff: another run with other device and host addresses (mock base,
  # 64 GiB reserved first, a deeper stack): the same program
  SHOPT= shrec "$T/sh1.fb" X=1
  SHOPT= shrec "$T/sh2.fb" DRV_SHARE_SHIFT=1 CUCAP_MOCK_ADDR_BASE=0x7c0000000000
  SHOPT= shrec "$T/sh-beta.fb" DRV_SHARE_SHIFT=1 DRV_SHARE_BETA=0.5
  SHOPT= shrec "$T/sh-scale.fb" DRV_SHARE_SCALE=0.25
  "$CUCAP" diff "$T/sh1.fb" "$T/sh2.fb" >"$T/shd.txt" 2>&1; rc=$?
  if [ $rc = 0 ] && grep -q "^same: .* 6 launches matched (0 differ, 0 unmatched).*host addresses differ (not compared)$" "$T/shd.txt" &&
     grep -qE "^host addresses: [0-9]+ argument words of 6 otherwise equal launches differ only as host addresses \(stack [1-9].*stale pointer halves [1-9]" "$T/shd.txt"; then
    ok "diff of two runs with other addresses: same ($(head -1 "$T/shd.txt" | cut -c1-150))"
  else bad "diff drv_share runs rc=$rc"; cat "$T/shd.txt"; fi
  "$CUCAP" diff "$T/sh1.fb" "$T/sh-beta.fb" >"$T/shb.txt" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "^launch 0 (B: 0) struct_axpy, occurrence 0 at its call site: parameter 0 (offset 0, 56 bytes), bytes 24..39: A 0x000000003e800000[0-9a-f]\{16\}, B 0x000000003f000000" "$T/shb.txt" &&
    ok "diff: a changed member of a struct parameter is named: $(head -1 "$T/shb.txt" | cut -c1-140)" ||
    { bad "diff beta rc=$rc"; cat "$T/shb.txt"; }
  "$CUCAP" diff "$T/sh2.fb" "$T/sh-scale.fb" >"$T/shs.txt" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "^launch 0 (B: 0) struct_axpy, occurrence 0 at its call site: parameter 1 (offset 56, 4 bytes): A 0x3f000000, B 0x3e800000" "$T/shs.txt" &&
    grep -q "^differ: .* 6 launches matched (6 differ, 0 unmatched)" "$T/shs.txt" &&
    ok "diff: a changed scalar next to the struct is named" || { bad "diff scale rc=$rc"; cat "$T/shs.txt"; }
  # stale bytes the kernel never reads (the padding after beta): with launch
  # hashes in both captures, the same memory after every launch makes them
  # "without effect"; without hashes they are a difference; a changed beta
  # next to them changes the memory and is named
  SHOPT=--hash-launches shrec "$T/shj1.fb" DRV_SHARE_JUNK=305419896
  SHOPT=--hash-launches shrec "$T/shj2.fb" DRV_SHARE_JUNK=2596069104 DRV_SHARE_SHIFT=1
  SHOPT=--hash-launches shrec "$T/shjb.fb" DRV_SHARE_JUNK=2596069104 DRV_SHARE_BETA=0.5
  SHOPT= shrec "$T/shj3.fb" DRV_SHARE_JUNK=2596069104
  "$CUCAP" diff "$T/shj1.fb" "$T/shj2.fb" >"$T/shj.txt" 2>&1; rc=$?
  [ $rc = 0 ] && grep -q "^without effect: 6 launches' argument bytes differ" "$T/shj.txt" &&
    grep -q "^same: .* 6 launches matched (0 differ" "$T/shj.txt" &&
    ok "diff: stale bytes the kernel never reads, same memory after each launch: same" ||
    { bad "diff junk with hashes rc=$rc"; cat "$T/shj.txt"; }
  "$CUCAP" diff "$T/shj1.fb" "$T/shjb.fb" >"$T/shjb.txt" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "^launch 0 (B: 0) struct_axpy, .*parameter 0 (offset 0, 56 bytes)" "$T/shjb.txt" &&
    ! grep -q "^without effect" "$T/shjb.txt" &&
    ok "diff: a changed beta next to stale bytes changes the memory: named" ||
    { bad "diff junk+beta rc=$rc"; cat "$T/shjb.txt"; }
  "$CUCAP" diff "$T/sh1.fb" "$T/shj3.fb" >"$T/shj3.txt" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "^differ: .* 6 launches matched (6 differ" "$T/shj3.txt" &&
    ok "diff: stale bytes without launch hashes are a difference" ||
    { bad "diff junk without hashes rc=$rc"; cat "$T/shj3.txt"; }
else
  bad "drv_share not built"
fi

# ---- info / dump readability
"$CUCAP" info "$T/plain.fb" >"$T/info.txt" 2>&1
grep -qE '^ +8  saxpy$' "$T/info.txt" && grep -q "^device memory:   high-water mark 196608 bytes" "$T/info.txt" &&
  grep -q "^NVTX ranges:     24" "$T/info.txt" && ok "info: top kernels, high-water mark, NVTX ranges" ||
  { bad "info"; cat "$T/info.txt"; }

# ---- 6. bad input: exit 3, one error line, no crash
sz=$(size "$T/plain.fb")
head -c $((sz / 2)) "$T/plain.fb" >"$T/trunc.fb"
# one byte flipped in the middle of the first record chunk / blob chunk
"$PY" - "$T/plain.fb" "$T/flip-rec.fb" "$T/flip-blob.fb" <<'PYEOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
off = (32 + struct.unpack_from("<I", d, 16)[0] + 7) & ~7
first = {}
while off + 40 <= len(d) and struct.unpack_from("<I", d, off)[0] == 0x4B4E4843:
    kind, size = d[off + 4], struct.unpack_from("<Q", d, off + 16)[0]
    first.setdefault(kind, (off, size))
    off = (off + 40 + size + 7) & ~7
for kind, out in ((0, sys.argv[2]), (1, sys.argv[3])):
    o, size = first[kind]
    b = bytearray(d)
    b[o + 40 + size // 2] ^= 0x40
    open(out, "wb").write(b)
PYEOF
printf 'launch_index,start_ns\n1,2\n' >"$T/bad.csv"
check3() { # label cmd...
  local label=$1; shift
  "$@" >"$T/b.out" 2>"$T/b.err"; local rc=$?
  if [ $rc = 3 ] && [ "$(wc -l <"$T/b.err")" -ge 1 ] && ! grep -qE 'Sanitizer|runtime error' "$T/b.err"; then
    ok "$label: exit 3: $(head -1 "$T/b.err" | cut -c1-110)"
  else bad "$label: rc=$rc"; cat "$T/b.err"; fi
}
for f in trunc flip-rec flip-blob; do
  check3 "trim $f" "$CUCAP" trim "$T/$f.fb" -o "$T/o.fb" --range=launch:1-2 --replay
  check3 "extract $f" "$CUCAP" extract "$T/$f.fb" -o "$T/o.fb" --launch 1 --replay
  # export and diff read records only (and DtoH payloads when they differ):
  # damage inside a module image does not reach them
  [ $f = flip-blob ] && continue
  check3 "export $f" "$CUCAP" export "$T/$f.fb" --format=perfetto -o "$T/o.pf"
  check3 "diff $f" "$CUCAP" diff "$T/plain.fb" "$T/$f.fb"
done
check3 "export with a broken timings file" "$CUCAP" export "$T/plain.fb" --format=chrome-json -o "$T/o.json" --profile "$T/bad.csv"
check3 "diff with a broken timings file" "$CUCAP" diff "$T/plain.fb" "$T/plain2.fb" --profile-a "$T/bad.csv" --profile-b "$T/times.csv"
[ ! -e "$T/o.fb" ] && ok "no output left behind by failed trims/extracts" || bad "a failed command left $T/o.fb"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
