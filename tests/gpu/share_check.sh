#!/usr/bin/env bash
# tests/gpu/share_check.sh BUILD_DIR OUT_DIR - the GPU checks of trim,
# extract (+ --emit-c), export and diff (issue 9's "done when"), on a GPU
# machine. Builds nothing but the emitted C programs; prints one PASS/FAIL/
# SKIP line per check (run.sh collects them) and a summary; exit 0 only if
# nothing failed.
#  1. torch_mlp (400 iterations, an NVTX range "step" each, a fresh input
#     batch copied in and the loss read back every step, like a loop fed by
#     a data loader) recorded with --snapshot=range:step@200: trim to
#     iteration 200 by NVTX range from the recorded snapshot and with
#     --replay, and by launch range (--replay): each file under 1/5 of the
#     capture (sizes of images / payloads / state are in OUT_DIR/*.info.txt),
#     replay --verify passes.
#  2. extract of one GEMM and one elementwise launch of that iteration
#     (--replay): replay --verify and --loop 1000 pass; the --emit-c program
#     builds with cc -lcuda and with nvcc, prints the checksum extract
#     printed, MATCH.
#  3. export of the iteration with GPU times measured in a replay
#     (bench/libkernel_times.so -> gpu_times_csv.py -> --profile): Perfetto
#     (decoded and checked when protoc is there; the file is kept in OUT_DIR)
#     and Chrome JSON (checked).
#  4. diff: two recordings of torch_mlp with --hash-launches -> "same",
#     exit 0 (host addresses in arguments counted apart, stale bytes of
#     TensorListMetadata "without effect": both lines go to the summary);
#     --lr changed -> exit 1 naming a launch whose argument differs;
#     drv_train likewise.
#  5. drv_train on the real driver: trim --replay, extract + C program.
#  5b. drv_share: its multi-arch fatbin reduced by trim (recorded snapshot and
#     --replay) and extract, replayed with --verify by the real driver; diff
#     of two runs with other host/device addresses: same; a changed struct
#     member: named.
#  5c. with CUCAP_SHARE_TRIM="CAPTURE A-B": trim --replay of that capture,
#     size breakdown, replay --verify.
# Sizes: every trim line shows the compressed bytes by use (module images,
# memory uploads, records: `cucap info`'s "stored by use").
#  6. OUT_DIR/sample.fb: examples/saxpy recorded by this cucap (format 1.3,
#     cuGetProcAddress names) to replace examples/sample.fb.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$(cd "${1:?usage: share_check.sh BUILD_DIR OUT_DIR}" && pwd)
OUT=${2:?usage: share_check.sh BUILD_DIR OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
CUCAP=$BUILD/tools/cucap
APPS=$BUILD/tests/apps
PY=${PYTHON:-python3}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-cc}
export CUCAP_LOG_LEVEL=${CUCAP_LOG_LEVEL:-warn}
pass=0; fail=0; skip=0
res() { # status name detail
  printf '%-5s %-38s %s\n' "$1" "$2" "$3" | tee -a "$OUT/share_summary.txt"
  case $1 in PASS) pass=$((pass+1));; FAIL) fail=$((fail+1));; SKIP) skip=$((skip+1));; esac
}
size() { stat -c %s "$1"; }
# "images 3.1 MB, uploads 0.4 MB, records 0.1 MB" (compressed, from `cucap info`'s stored bytes by use)
breakdown() {
  "$CUCAP" info --json "$1" 2>/dev/null | "$PY" -c '
import json, sys
st = json.load(sys.stdin).get("stored", {})
parts = ["%s %.2f MB" % (k, v["compressed_bytes"] / 1e6) for k, v in st.items() if v.get("count")]
print(", ".join(parts))' 2>/dev/null
}
ratio() { "$PY" -c "import sys; print('%.4f' % (int(sys.argv[1]) / int(sys.argv[2])))" "$1" "$2"; }
verify() { # name capture [options]
  local name=$1 cap=$2; shift 2
  if "$CUCAP" replay "$cap" --verify "$@" >"$cap.verify.txt" 2>&1; then
    res PASS "$name" "$(grep -E '^verify:' "$cap.verify.txt" | cut -c1-130)"
  else res FAIL "$name" "exit $? ($(tail -1 "$cap.verify.txt"))"; fi
}
[ -x "$CUCAP" ] || { echo "no cucap at $CUCAP"; exit 2; }
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU here"; exit 77; }
: >"$OUT/share_summary.txt"
W=$OUT/w; mkdir -p "$W"

# C program of an extracted launch: cc and nvcc builds, checksum = expected
emit_check() { # name extract.txt dir
  local name=$1 txt=$2 dir=$3
  local want; want=$(sed -n 's/^expected checksum \(0x[0-9a-f]*\).*/\1/p' "$txt")
  if [ -z "$want" ]; then res FAIL "$name C program" "extract printed no checksum"; return; fi
  if (cd "$dir" && $CC -O2 -o repro repro.c -I"$CUDA/include" -L"$CUDA/lib64/stubs" -lcuda) >"$dir/cc.txt" 2>&1 &&
     (cd "$dir" && ./repro) >"$dir/run.txt" 2>&1 && grep -q "^checksum $want$" "$dir/run.txt" &&
     grep -q MATCH "$dir/run.txt"; then
    res PASS "$name C program (cc -lcuda)" "checksum $want, $(tail -1 "$dir/run.txt")"
  else res FAIL "$name C program (cc -lcuda)" "$(tail -2 "$dir/cc.txt" "$dir/run.txt" 2>/dev/null | tr '\n' ' ' | cut -c1-150)"; fi
  if command -v "$CUDA/bin/nvcc" >/dev/null 2>&1 &&
     (cd "$dir" && "$CUDA/bin/nvcc" -o repro_nvcc repro.c -lcuda) >"$dir/nvcc.txt" 2>&1 &&
     (cd "$dir" && ./repro_nvcc) >"$dir/run_nvcc.txt" 2>&1 && grep -q "^checksum $want$" "$dir/run_nvcc.txt"; then
    res PASS "$name C program (nvcc -lcuda)" "checksum $want"
  else res FAIL "$name C program (nvcc -lcuda)" "$(tail -2 "$dir/nvcc.txt" "$dir/run_nvcc.txt" 2>/dev/null | tr '\n' ' ' | cut -c1-150)"; fi
}

extract_check() { # name src kernel
  local name=$1 src=$2 kernel=$3
  local x=$W/$name.fb
  if "$CUCAP" extract "$src" --kernel "$kernel" --replay -o "$x" --emit-c "$W/$name-c" >"$W/$name.txt" 2>&1; then
    res PASS "extract $name" "$(head -1 "$W/$name.txt" | cut -c1-150)"
    verify "extract $name replay --verify" "$x"
    verify "extract $name --loop 1000" "$x" --loop 1000
    emit_check "$name" "$W/$name.txt" "$W/$name-c"
  else res FAIL "extract $name" "$(tail -1 "$W/$name.txt")"; fi
}

# ---- 1. torch_mlp: one iteration of a training loop
if $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  MLP=("$PY" "$ROOT/tests/apps/torch_mlp.py" --steps 400 --fresh-batch)
  "${MLP[@]}" >"$W/mlp.native.out" 2>/dev/null
  if "$CUCAP" record --snapshot=range:step@200 -o "$W/mlp.fb" -- "${MLP[@]}" >"$W/mlp.rec.out" 2>"$W/mlp.rec.err" &&
     diff -q "$W/mlp.native.out" "$W/mlp.rec.out" >/dev/null; then
    res PASS "torch_mlp record (NVTX, snapshot)" "$(size "$W/mlp.fb") bytes, output identical"
  else res FAIL "torch_mlp record" "$(tail -1 "$W/mlp.rec.err")"; fi
  n_nvtx=$("$CUCAP" info --json "$W/mlp.fb" 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin).get("nvtx_ranges", 0))')
  "$CUCAP" info "$W/mlp.fb" >"$OUT/mlp.info.txt" 2>&1
  [ "${n_nvtx:-0}" -ge 400 ] && res PASS "torch_mlp NVTX ranges recorded" "$n_nvtx ranges" ||
    res FAIL "torch_mlp NVTX ranges recorded" "${n_nvtx:-0} (torch.cuda.nvtx through NVTX_INJECTION64_PATH?)"
  trim_check() { # name out options...
    local name=$1 out=$2; shift 2
    if "$CUCAP" trim "$W/mlp.fb" -o "$out" "$@" >"$out.txt" 2>&1; then
      "$CUCAP" info "$out" >"$OUT/$(basename "$out" .fb).info.txt" 2>&1
      local r; r=$(ratio "$(size "$out")" "$(size "$W/mlp.fb")")
      local bd; bd="$(breakdown "$out"); $(grep -m1 '^module images:' "$out.txt" | cut -c1-110)"
      if "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 0.2 else 1)" "$r"; then
        res PASS "trim $name < 1/5" "$(size "$out") of $(size "$W/mlp.fb") bytes = $r ($bd)"
      else res FAIL "trim $name < 1/5" "$(size "$out") of $(size "$W/mlp.fb") bytes = $r ($bd; $(head -1 "$out.txt" | cut -c1-100))"; fi
      verify "trim $name replay --verify" "$out"
    else res FAIL "trim $name" "$(tail -1 "$out.txt")"; fi
  }
  trim_check "nvtx:step@200 (recorded)" "$W/step.fb" --range=nvtx:step@200
  trim_check "nvtx:step@200 --replay" "$W/step-replay.fb" --range=nvtx:step@200 --replay
  lr=$("$CUCAP" info "$W/step.fb" 2>/dev/null | sed -n 's/^made by: .*(launches \([0-9]*\)\.\.\([0-9]*\))$/\1-\2/p')
  if [ -n "$lr" ]; then trim_check "launch:$lr --replay" "$W/step-launch.fb" --range="launch:$lr" --replay
  else res FAIL "trim launch range" "no launch range in the NVTX trim's header"; fi

  # ---- 2. extract a GEMM and an elementwise launch of the iteration
  "$CUCAP" info --json --no-demangle "$W/step.fb" >"$W/step.info.json" 2>/dev/null
  pick() { "$PY" -c '
import json, re, sys
ks = [k["name"] for k in json.load(open(sys.argv[1])).get("top_kernels", [])]
m = [k for k in ks if re.search(sys.argv[2], k, re.I)]
print(m[0] if m else "")' "$W/step.info.json" "$1"; }
  gemm=$(pick 'gemm|cutlass|xmma|sm90_|cublas')
  elem=$(pick 'elementwise|vectorized')
  [ -n "$gemm" ] && extract_check gemm "$W/step.fb" "$gemm" || res FAIL "extract gemm" "no GEMM kernel in $(head -c 300 "$W/step.info.json")"
  [ -n "$elem" ] && extract_check elementwise "$W/step.fb" "$elem" || res FAIL "extract elementwise" "no elementwise kernel"

  # ---- 3. export the iteration with GPU times from a timed replay
  KT=$BUILD/bench/libkernel_times.so
  if [ -f "$KT" ]; then
    CUDA_INJECTION64_PATH=$KT CUCAP_KERNEL_TIMES=$W/step.times "$CUCAP" replay "$W/step.fb" >/dev/null 2>&1
    "$CUCAP" dump --json --no-symbols "$W/step.fb" >"$W/step.jsonl" 2>/dev/null
    if "$PY" "$ROOT/tests/gpu/gpu_times_csv.py" "$W/step.jsonl" "$W/step.times" "$W/step.csv" >"$W/csv.txt" 2>&1; then
      res PASS "GPU times of the iteration" "$(cat "$W/csv.txt")"
      prof=(--profile "$W/step.csv")
    else res FAIL "GPU times of the iteration" "$(cat "$W/csv.txt")"; prof=(); fi
  else res SKIP "GPU times of the iteration" "no $KT (CUPTI not found at build time)"; prof=(); fi
  if "$CUCAP" export "$W/step.fb" --format=perfetto -o "$OUT/step.pftrace" "${prof[@]}" >"$W/exp.txt" 2>&1; then
    res PASS "export perfetto" "$(cut -c1-150 "$W/exp.txt"); kept: $OUT/step.pftrace"
    if command -v protoc >/dev/null 2>&1; then
      if protoc --proto_path="$ROOT/tests/export" --decode=perfetto.protos.Trace perfetto_subset.proto \
           <"$OUT/step.pftrace" >"$W/step.pf.txt" 2>&1 &&
         "$PY" "$ROOT/tests/export/check_perfetto.py" "$W/step.pf.txt" >"$W/chk.txt" 2>&1; then
        res PASS "perfetto decoded + checked" "$(cat "$W/chk.txt")"
      else res FAIL "perfetto decoded + checked" "$(tail -1 "$W/chk.txt" "$W/step.pf.txt" | tr '\n' ' ' | cut -c1-150)"; fi
    else res SKIP "perfetto decoded + checked" "no protoc here: check $OUT/step.pftrace elsewhere"; fi
  else res FAIL "export perfetto" "$(tail -1 "$W/exp.txt")"; fi
  if "$CUCAP" export "$W/step.fb" --format=chrome-json -o "$OUT/step.json" "${prof[@]}" >"$W/expj.txt" 2>&1 &&
     "$PY" "$ROOT/tests/export/check_chrome.py" "$OUT/step.json" >"$W/chkj.txt" 2>&1; then
    res PASS "export chrome-json checked" "$(cat "$W/chkj.txt")"
  else res FAIL "export chrome-json checked" "$(tail -1 "$W/expj.txt" "$W/chkj.txt" | tr '\n' ' ')"; fi

  # ---- 4. diff
  D=("$PY" "$ROOT/tests/apps/torch_mlp.py" --steps 20)
  # with launch hashes: PyTorch's TensorListMetadata (foreach/AdamW kernels)
  # carries stale host stack bytes in its unused slots, which differ from
  # run to run; the same memory after each launch shows they had no effect
  "$CUCAP" record --hash-launches -o "$W/d1.fb" -- "${D[@]}" >/dev/null 2>&1
  "$CUCAP" record --hash-launches -o "$W/d2.fb" -- "${D[@]}" >/dev/null 2>&1
  "$CUCAP" record --hash-launches -o "$W/d3.fb" -- "${D[@]}" --lr 0.04 >/dev/null 2>&1
  "$CUCAP" diff "$W/d1.fb" "$W/d2.fb" >"$W/diff-same.txt" 2>&1; rc=$?
  [ $rc = 0 ] && res PASS "diff torch_mlp twice: same" "$(tail -1 "$W/diff-same.txt" | cut -c1-200)" ||
    res FAIL "diff torch_mlp twice: same" "exit $rc: $(head -3 "$W/diff-same.txt" | tr '\n' ' ' | cut -c1-160)"
  grep -m1 '^host addresses:' "$W/diff-same.txt" | cut -c1-250 >>"$OUT/share_summary.txt"
  grep -m1 '^without effect:' "$W/diff-same.txt" | cut -c1-250 >>"$OUT/share_summary.txt"
  "$CUCAP" diff "$W/d1.fb" "$W/d3.fb" >"$W/diff-lr.txt" 2>&1; rc=$?
  if [ $rc = 1 ] && grep -qE '^launch [0-9]+ .*: parameter [0-9]+' "$W/diff-lr.txt"; then
    res PASS "diff --lr changed: names the launch" "$(grep -m1 -E '^launch ' "$W/diff-lr.txt" | cut -c1-160)"
  else res FAIL "diff --lr changed" "exit $rc: $(head -3 "$W/diff-lr.txt" | tr '\n' ' ' | cut -c1-160)"; fi
else
  res SKIP "torch_mlp checks" "no torch with CUDA"
fi

# ---- 4b/5. drv_train on the real driver
if [ -x "$APPS/drv_train" ]; then
  "$CUCAP" record -o "$W/t1.fb" -- "$APPS/drv_train" >"$W/t1.out" 2>/dev/null
  "$CUCAP" record -o "$W/t2.fb" -- "$APPS/drv_train" >/dev/null 2>&1
  DRV_TRAIN_SCALE=0.25 "$CUCAP" record -o "$W/t3.fb" -- "$APPS/drv_train" >/dev/null 2>&1
  diff -q "$W/t1.out" "$ROOT/tests/apps/drv_train.expected" >/dev/null && res PASS "drv_train on the GPU" "output as on the mock" ||
    res FAIL "drv_train on the GPU" "output differs from drv_train.expected"
  "$CUCAP" diff "$W/t1.fb" "$W/t2.fb" >/dev/null 2>&1 && res PASS "diff drv_train twice: same" "" || res FAIL "diff drv_train twice" "exit $?"
  "$CUCAP" diff "$W/t1.fb" "$W/t3.fb" >"$W/t.diff" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "scale, occurrence 0 at its call site: parameter 1" "$W/t.diff" &&
    res PASS "diff drv_train scale changed" "$(head -1 "$W/t.diff" | cut -c1-150)" || res FAIL "diff drv_train scale changed" "exit $rc"
  if "$CUCAP" trim "$W/t1.fb" -o "$W/t-trim.fb" --range=nvtx:step@3 --replay >"$W/tt.txt" 2>&1; then
    verify "drv_train trim --replay" "$W/t-trim.fb"
  else res FAIL "drv_train trim --replay" "$(tail -1 "$W/tt.txt")"; fi
  extract_check drv_saxpy "$W/t1.fb" saxpy
else
  res SKIP "drv_train checks" "not built"
fi

# ---- 5b. drv_share: a fatbin with SASS sm_75/80/90 + PTX compute_80/90 reduced
# by trim/extract to what the recorded GPU runs, loaded by the real driver;
# diff of two runs whose host and device addresses differ (64 GiB reserved
# first, a deeper stack) inside a struct parameter
if [ -x "$APPS/drv_share" ]; then
  "$CUCAP" record --snapshot=launch:2 -o "$W/sh.fb" -- "$APPS/drv_share" >"$W/sh.out" 2>/dev/null
  "$CUCAP" record -o "$W/sh1.fb" -- "$APPS/drv_share" >/dev/null 2>&1
  DRV_SHARE_SHIFT=1 "$CUCAP" record -o "$W/sh2.fb" -- "$APPS/drv_share" >/dev/null 2>&1
  DRV_SHARE_BETA=0.5 "$CUCAP" record -o "$W/sh3.fb" -- "$APPS/drv_share" >/dev/null 2>&1
  diff -q "$W/sh.out" "$ROOT/tests/apps/drv_share.expected" >/dev/null && res PASS "drv_share on the GPU" "output as on the mock" ||
    res FAIL "drv_share on the GPU" "output differs from drv_share.expected"
  if "$CUCAP" trim "$W/sh.fb" -o "$W/sh-trim.fb" --range=launch:2-3 >"$W/sh-trim.txt" 2>&1 &&
     grep -q "^module images: 1 (1 reduced to sm_90 + PTX <= compute_90)" "$W/sh-trim.txt"; then
    res PASS "drv_share trim: image reduced" "$(grep '^module images:' "$W/sh-trim.txt" | cut -c1-120)"
    verify "drv_share trim (reduced image) --verify" "$W/sh-trim.fb"
  else res FAIL "drv_share trim: image reduced" "$(tail -2 "$W/sh-trim.txt" | tr '\n' ' ' | cut -c1-150)"; fi
  if "$CUCAP" trim "$W/sh1.fb" -o "$W/sh-trimr.fb" --range=launch:2-3 --replay >"$W/sh-trimr.txt" 2>&1; then
    verify "drv_share trim --replay (reduced) --verify" "$W/sh-trimr.fb"
  else res FAIL "drv_share trim --replay" "$(tail -1 "$W/sh-trimr.txt")"; fi
  extract_check drv_share_x "$W/sh1.fb" struct_axpy
  "$CUCAP" diff "$W/sh1.fb" "$W/sh2.fb" >"$W/sh-d.txt" 2>&1; rc=$?
  [ $rc = 0 ] && res PASS "diff drv_share (other addresses): same" "$(head -1 "$W/sh-d.txt" | cut -c1-160)" ||
    res FAIL "diff drv_share (other addresses): same" "exit $rc: $(head -2 "$W/sh-d.txt" | tr '\n' ' ' | cut -c1-160)"
  "$CUCAP" diff "$W/sh1.fb" "$W/sh3.fb" >"$W/sh-db.txt" 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "struct_axpy, occurrence 0 at its call site: parameter 0 (offset 0, 56 bytes)" "$W/sh-db.txt" &&
    res PASS "diff drv_share struct member changed" "$(head -1 "$W/sh-db.txt" | cut -c1-160)" ||
    res FAIL "diff drv_share struct member changed" "exit $rc: $(head -2 "$W/sh-db.txt" | tr '\n' ' ' | cut -c1-160)"
else
  res SKIP "drv_share checks" "not built"
fi

# ---- 5c. (optional) a given capture trimmed by launch range with --replay:
# CUCAP_SHARE_TRIM="CAPTURE A-B", e.g. the 3-step transformer of run2
# ("/path/torch_transformer.fb 519-805": one AdamW step); size breakdown
# and replay --verify of the trimmed file
if [ -n "${CUCAP_SHARE_TRIM:-}" ]; then
  set -- $CUCAP_SHARE_TRIM
  if [ -f "${1:-}" ] && [ -n "${2:-}" ] &&
     "$CUCAP" trim "$1" -o "$W/given.fb" --range="launch:$2" --replay >"$W/given.txt" 2>&1; then
    "$CUCAP" info "$W/given.fb" >"$OUT/given.info.txt" 2>&1
    res PASS "trim launch:$2 of $(basename "$1") --replay" "$(size "$1") -> $(size "$W/given.fb") bytes = $(ratio "$(size "$W/given.fb")" "$(size "$1")") ($(breakdown "$W/given.fb"))"
    verify "trim of $(basename "$1") --verify" "$W/given.fb"
  else res FAIL "trim launch:${2:-?} of ${1:-?} --replay" "$(tail -1 "$W/given.txt" 2>/dev/null)"; fi
fi

# ---- 6. a new examples/sample.fb
if command -v "$CUDA/bin/nvcc" >/dev/null 2>&1 &&
   "$CUDA/bin/nvcc" -O2 -g -o "$W/saxpy" "$ROOT/examples/saxpy.cu" >/dev/null 2>&1 &&
   (cd "$W" && "$CUCAP" record -o "$OUT/sample.fb" -- ./saxpy >/dev/null 2>&1); then
  res PASS "sample.fb recorded" "$OUT/sample.fb ($(size "$OUT/sample.fb") bytes): copy to examples/sample.fb"
else res SKIP "sample.fb recorded" "nvcc or saxpy failed"; fi

echo "== share_check: $pass passed, $fail failed, $skip skipped (details in $OUT)"
[ $fail = 0 ]
