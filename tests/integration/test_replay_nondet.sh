#!/usr/bin/env bash
# test_replay_nondet.sh - `cucap replay --verify` on a nondeterministic
# program (tests/apps/drv_nondet: a kernel stamps clock-like values into half
# of a buffer; the mock's `stamp` writes a monotonic-clock counter, different
# in every run and every replay pass):
#  1. --verify exits 0 and reports the stamped half as nondeterministic,
#     written by `stamp`, in 3 passes (first differs, second tells the bytes
#     apart, third is the diagnostic pass that names the writer); --json too;
#  2. --verify-passes 1 (one pass): every difference is a mismatch, exit 1;
#  3. a flipped recorded byte in the deterministic half still fails (exit 1,
#     "same in all N passes"); one in the nondeterministic half does not;
#  4. a deterministic program replays once (nothing to tell apart) and
#     --verify-passes 3 compares 3 passes without finding anything;
#  5. --relocate: relocated allocations start zeroed in every pass.
#  6. perturbed passes (drv_sched, primary context: an atomicCAS chain whose
#     result depends on scheduling; the mock's stand-in agrees with itself
#     in every replay of one process and differs from the recording, as on
#     the H100): without perturbation a mismatch "same in all 6 passes";
#     with it (the default) the chain's bytes vary in the perturbed pass and
#     are nondeterministic, written by sched_probe; a flipped recorded byte
#     of the deterministic copy still fails after 5 perturbed passes (of 7:
#     the first is plain, the last names the chain's writer). Its copy of
#     device-malloc pointers (the mock's heap is placed per process) is 32
#     relocated pointers, one offset. Its stack (newdelete's push/pop: the
#     popped values land on other threads in every process) varies in the
#     perturbed passes and the pops that agreed in every pass differ from the
#     recording only in order (verify_order.c): passes; a flipped popped
#     value fails, and so do those pops with CUCAP_REPLAY_VERIFY_ORDER=0.
# Skips (77) without the mock or the app.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
BUILD="${CUCAP_BUILD_DIR:-}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_nondet" ] || [ ! -x "$APPS_DIR/drv_basic" ]; then
  echo "SKIP: drv_nondet/drv_basic not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
vline() { grep '^verify:' "$1" | cut -c1-220; }

"$CUCAP" record -o "$T/n.fb" -- "$APPS_DIR/drv_nondet" > "$T/rec.out" 2> "$T/rec.err" \
  || { bad "record drv_nondet"; cat "$T/rec.err"; exit 1; }

# ---- 1. nondeterministic bytes told apart and named ------------------------
"$CUCAP" replay "$T/n.fb" --verify > "$T/v.out" 2> "$T/v.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "16384 bytes nondeterministic (differ between replays; in 1 copies, written by kernels stamp)" "$T/v.out" \
   && grep -q "all deterministic bytes matched (3 passes)" "$T/v.out" \
   && grep -q "^  nondeterministic: DtoH copy (record [0-9]*, seq [0-9]*): 16384 of 32768 bytes in 1 range(s) from 0x[0-9a-f]*, written by stamp" "$T/v.out"; then
  ok "replay --verify: $(vline "$T/v.out")"
else
  bad "replay --verify rc=$rc"; cat "$T/v.out" "$T/v.err"
fi
"$CUCAP" replay "$T/n.fb" --verify --json > "$T/v.json" 2> /dev/null; rc=$?
if [ $rc -eq 0 ] && grep -q '"nondeterministic_bytes":16384' "$T/v.json" && grep -q '"mismatches":0' "$T/v.json" \
   && grep -q '"nondeterministic_kernels":"stamp"' "$T/v.json" && grep -q '"verify_passes":3' "$T/v.json"; then
  ok "--json carries the nondeterminism"
else
  bad "--json rc=$rc"; cat "$T/v.json"
fi

# ---- 2. one pass: nothing told apart, the stamps are mismatches ------------
"$CUCAP" replay "$T/n.fb" --verify-passes 1 > "$T/p1.out" 2> "$T/p1.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "MISMATCH" "$T/p1.out" && ! grep -q "nondeterministic" "$T/p1.out"; then
  ok "--verify-passes 1: exit 1 ($(grep -o '[0-9]* of [0-9]* bytes differ' "$T/p1.err" | head -1))"
else
  bad "--verify-passes 1 rc=$rc"; cat "$T/p1.out" "$T/p1.err"
fi

# ---- 3. a real corruption still fails; a flip in the varying half does not -
HELPER="$BUILD/tests/test_replay"
if [ -x "$HELPER" ]; then
  "$HELPER" --flip-dtoh "$T/n.fb" "$T/flip.fb" 5 > /dev/null 2>&1
  "$CUCAP" replay "$T/flip.fb" --verify > "$T/f.out" 2> "$T/f.err"; rc=$?
  # the flip changes 3.0f into 3.00006f: the message says it may still be
  # nondeterminism (this run showed some) but the exit code is 1
  if [ $rc -eq 1 ] && grep -q "first differing offset 5 " "$T/f.err" \
     && grep -q "1 of 32768 bytes differ (besides 16384 nondeterministic); same in all [0-9]* passes; may still be nondeterminism: the copy holds 16384 nondeterministic bytes too; the values differ like floating-point rounding" "$T/f.err"; then
    ok "flipped deterministic byte: exit 1, $(grep -o 'same in all [0-9]* passes' "$T/f.err" | head -1)"
  else
    bad "flipped deterministic byte rc=$rc"; cat "$T/f.out" "$T/f.err"
  fi
  "$HELPER" --flip-dtoh "$T/n.fb" "$T/flip2.fb" 20000 > /dev/null 2>&1
  "$CUCAP" replay "$T/flip2.fb" --verify > "$T/f2.out" 2> "$T/f2.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "16384 bytes nondeterministic" "$T/f2.out"; then
    ok "flipped byte inside the nondeterministic half: not a mismatch (those bytes are not checked)"
  else
    bad "flip in the nondeterministic half rc=$rc"; cat "$T/f2.out" "$T/f2.err"
  fi
else
  echo "note: flip helper ($HELPER) unavailable"
fi

# ---- 4. deterministic program: one pass, or N when asked -------------------
"$CUCAP" record -o "$T/b.fb" -- "$APPS_DIR/drv_basic" > /dev/null 2>&1 || bad "record drv_basic"
"$CUCAP" replay "$T/b.fb" --verify > "$T/b.out" 2> "$T/b.err"; rc=$?
if [ $rc -eq 0 ] && grep -q " x 1 loop(s)" "$T/b.out" && grep -q "; all bytes matched$" "$T/b.out"; then
  ok "deterministic program: one pass ($(vline "$T/b.out"))"
else
  bad "deterministic program rc=$rc"; cat "$T/b.out" "$T/b.err"
fi
"$CUCAP" replay "$T/b.fb" --verify-passes 3 > "$T/b3.out" 2> "$T/b3.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "all bytes matched (3 passes)" "$T/b3.out" && ! grep -q nondeterministic "$T/b3.out"; then
  ok "--verify-passes 3 on a deterministic program: nothing nondeterministic"
else
  bad "--verify-passes 3 rc=$rc"; cat "$T/b3.out" "$T/b3.err"
fi

# the same flip in a program that showed no nondeterminism: no excuse offered
if [ -x "$HELPER" ]; then
  "$HELPER" --flip-dtoh "$T/b.fb" "$T/bflip.fb" 5 > /dev/null 2>&1
  "$CUCAP" replay "$T/bflip.fb" --verify > "$T/bf.out" 2> "$T/bf.err"; rc=$?
  if [ $rc -eq 1 ] && grep -q "first differing offset 5 " "$T/bf.err" \
     && grep -q "1 of 262144 bytes differ; same in all 6 passes$" "$T/bf.err" && ! grep -q "may still be" "$T/bf.err"; then
    ok "flipped byte of a deterministic program: exit 1 after 6 agreeing passes, no hint"
  else
    bad "deterministic flip rc=$rc"; cat "$T/bf.out" "$T/bf.err"
  fi
fi

# ---- 5. relocation ----------------------------------------------------------
CUCAP_MOCK_ADDR_BASE=0x7d0000000000 "$CUCAP" replay "$T/n.fb" --verify --relocate > "$T/r.out" 2> "$T/r.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "16384 bytes nondeterministic" "$T/r.out" && grep -q "allocation(s) relocated" "$T/r.out"; then
  ok "--relocate: $(vline "$T/r.out" | cut -c1-120)"
else
  bad "--relocate rc=$rc"; cat "$T/r.out" "$T/r.err"
fi

# ---- 6. perturbed passes -----------------------------------------------------
if [ -x "$APPS_DIR/drv_sched" ]; then
  "$CUCAP" record -o "$T/s.fb" -- "$APPS_DIR/drv_sched" > "$T/s.rec" 2>&1 || bad "record drv_sched"
  CUCAP_REPLAY_VERIFY_PERTURB=0 "$CUCAP" replay "$T/s.fb" --verify > "$T/s0.out" 2> "$T/s0.err"; rc=$?
  if [ $rc -eq 1 ] && grep -q "same in all 6 passes" "$T/s0.err" && ! grep -q perturbed "$T/s0.out"; then
    ok "drv_sched unperturbed: the scheduling-dependent int agrees in all 6 replays, differs from the recording"
  else
    bad "drv_sched unperturbed rc=$rc"; cat "$T/s0.out" "$T/s0.err"
  fi
  "$CUCAP" replay "$T/s.fb" --verify --json > "$T/s.json" 2> "$T/s.err"; rc=$?
  if [ $rc -eq 0 ] && grep -q '"mismatches":0' "$T/s.json" && grep -q '"nondeterministic_kernels":"sched_probe, stack_pop"' "$T/s.json" \
     && grep -q '"reordered_bytes":[1-9]' "$T/s.json" && grep -q 'only in order' "$T/s.json" \
     && grep -q '"perturbed_passes":[1-9]' "$T/s.json" && grep -q '"perturb_note":""' "$T/s.json" \
     && grep -q '"relocated_pointer_words":32,"relocated_pointer_offsets":"[+-]0x[0-9a-f]* (32 words)"' "$T/s.json"; then
    ok "drv_sched: varies in the perturbed pass: nondeterministic, written by sched_probe; 32 heap pointers relocated; the stack's pops differ only in order ($(grep -o '"reordered_bytes":[0-9]*' "$T/s.json"))"
  else
    bad "drv_sched perturbed rc=$rc"; cat "$T/s.json" "$T/s.err"
  fi
  if [ -x "$HELPER" ] && "$HELPER" --flip-dtoh "$T/s.fb" "$T/sflip.fb" 100 > /dev/null 2>&1; then
    "$CUCAP" replay "$T/sflip.fb" --verify > "$T/sf.out" 2> "$T/sf.err"; rc=$?
    if [ $rc -eq 1 ] && grep -q "first differing offset 100 " "$T/sf.err" \
       && grep -q "same in all 7 passes" "$T/sf.err" && grep -q "(7 passes, 5 perturbed)" "$T/sf.out"; then
      ok "drv_sched: a flipped byte of the deterministic copy fails after 5 perturbed passes (and the diagnostic one)"
    else
      bad "drv_sched flipped rc=$rc"; cat "$T/sf.out" "$T/sf.err"
    fi
  fi
  # the popped values (the 4th copy): a flipped value is not a reordering
  if [ -x "$HELPER" ] && CUCAP_TEST_FLIP_NTH=3 "$HELPER" --flip-dtoh "$T/s.fb" "$T/sflip3.fb" 8 > /dev/null 2>&1; then
    "$CUCAP" replay "$T/sflip3.fb" --verify --json > "$T/sf3.json" 2> "$T/sf3.err"; rc=$?
    if [ $rc -eq 1 ] && grep -q '"reordered_bytes":0' "$T/sf3.json" && grep -q 'first differing offset' "$T/sf3.err"; then
      ok "drv_sched: a flipped byte among the popped values fails (the values are no longer a permutation)"
    else
      bad "drv_sched flipped pop rc=$rc"; cat "$T/sf3.json" "$T/sf3.err"
    fi
    CUCAP_REPLAY_VERIFY_ORDER=0 "$CUCAP" replay "$T/s.fb" --verify > "$T/so.out" 2> "$T/so.err"; rc=$?
    if [ $rc -eq 1 ] && grep -q "may still be nondeterminism" "$T/so.err"; then
      ok "drv_sched with CUCAP_REPLAY_VERIFY_ORDER=0: the pops that agreed in every pass are a mismatch"
    else
      bad "drv_sched order rule off rc=$rc"; cat "$T/so.out" "$T/so.err"
    fi
  fi
else
  echo "note: drv_sched not built"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
