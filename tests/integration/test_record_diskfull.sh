#!/usr/bin/env bash
# test_record_diskfull.sh - recording onto a full disk, through I/O errors,
# never changes the program: its output is that of a native run and so is
# the exit status of `cucap record`, except that a run which exited 0 with
# its capture cut short exits 4 (no capture at all: the program's status;
# an output that cannot be created is refused before the program starts,
# see test_cli_conformance.sh); cucap logs exactly one
# error line ("cucap: error: ..."), stops recording (the failing write is the
# only one attempted), and whatever reached the file opens with `cucap info`
# and replays with --allow-partial (no driver object leaked).
#
# Faults come from an LD_PRELOAD injector (tests/integration/fault_inject.c,
# built here): the capture may take N bytes and then fails with ENOSPC (N =
# 0, inside the first chunk, mid-run, at the end of the run) or EIO; opening it fails
# (EACCES); fdatasync fails (sync_writes). Without injection: an output
# directory that does not exist and an output path that is a directory; and,
# where `mount` works (root), a real 16 KiB tmpfs. Skips (77) without the
# mock, cucap, drv_loop or a C compiler.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
SRC="${CUCAP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
CC="${CC:-cc}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_loop" ]; then
  echo "SKIP: drv_loop not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no C compiler"; exit 77; }
T="$(mktemp -d)"
MNT=""
cleanup() { [ -n "$MNT" ] && umount "$MNT" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
APP="$APPS_DIR/drv_loop"
ARGS="24 1048576"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

"$CC" -O2 -shared -fPIC ${CUCAP_TEST_CFLAGS:-} -o "$T/fi.so" "$SRC/tests/integration/fault_inject.c" -ldl \
  2> "$T/cc.err" || { cat "$T/cc.err"; echo "FAIL: cannot compile fault_inject.c"; exit 1; }
# Sanitizer builds: their runtime must be the first object of every process
# (cucap itself included), ahead of the injector.
PRE="$T/fi.so"
case "${CUCAP_TEST_CFLAGS:-}" in
  *address*) PRE="$("$CC" -print-file-name=libasan.so):$PRE" ;;
  *thread*) PRE="$("$CC" -print-file-name=libtsan.so):$PRE" ;;
esac

"$APP" $ARGS > "$T/native.out" 2> /dev/null; nrc=$?
# The capture's size varies by a few hundred bytes between runs (how records
# fall into chunks depends on timing): the smallest of three runs.
full_size=0
for _ in 1 2 3; do
  "$CUCAP" record --force -o "$T/ref.fb" -- "$APP" $ARGS > /dev/null 2>&1 || { bad "reference recording failed"; exit 1; }
  s=$(stat -c %s "$T/ref.fb")
  [ "$full_size" -eq 0 ] || [ "$s" -lt "$full_size" ] && full_size=$s
done

# verify NAME OUT FILE_EXPECTED(1|0): the program ran as natively, one error
# line, and the capture (if any) is readable.
verify() {
  local name="$1" out="$2" want_file="$3" rc="$4" want_rc="${5:-$nrc}"
  if [ "$rc" -ne "$want_rc" ]; then bad "$name: exit status $rc, want $want_rc (natively $nrc)"; return 1; fi
  if ! cmp -s "$T/native.out" "$T/s.out"; then bad "$name: program output differs"; return 1; fi
  local nerr; nerr=$(grep -c '^cucap: error:' "$T/s.err")
  if [ "$nerr" -ne 1 ]; then bad "$name: $nerr error lines, want 1"; cat "$T/s.err"; return 1; fi
  local msg; msg=$(grep '^cucap: error:' "$T/s.err" | cut -c1-170)
  if [ "$want_file" = 0 ]; then
    if [ -e "$out" ] && [ -f "$out" ] && [ -s "$out" ]; then bad "$name: a capture was left at $out"; return 1; fi
    ok "$name: program unchanged (exit $rc), no capture; $msg"
    return 0
  fi
  [ -f "$out" ] || { bad "$name: no capture file"; return 1; }
  "$CUCAP" info "$out" > /dev/null 2> "$T/info.err"; local irc=$?
  if [ $irc -ne 0 ] && [ $irc -ne 3 ]; then bad "$name: cucap info exit $irc"; cat "$T/info.err"; return 1; fi
  CUCAP_MOCK_LEAK_CHECK=1 "$CUCAP" replay --allow-partial "$out" > "$T/rep.out" 2> "$T/rep.err"; local rrc=$?
  if [ $rrc -ne 0 ] || ! grep -q "leak check: clean" "$T/rep.err"; then
    bad "$name: replay --allow-partial exit $rrc"; tail -5 "$T/rep.err"; return 1
  fi
  ok "$name: program unchanged (exit $rc), $(stat -c %s "$out") bytes readable (info exit $irc; $(head -1 "$T/rep.out" | cut -d, -f1)); $msg"
}

# injected NAME [env...]: record with the injector watching $T/df.fb
injected() {
  local name="$1"; shift
  rm -f "$T/df.fb" "$T/fi.log"
  env LD_PRELOAD="$PRE" CUCAP_FI_PATH="$T/df.fb" CUCAP_FI_LOG="$T/fi.log" "$@" \
    "$CUCAP" record -o "$T/df.fb" -- "$APP" $ARGS > "$T/s.out" 2> "$T/s.err"
}

# failed attempts at the capture: the write that hit the fault, no more
failed_writes() { sed -n 's/.* failed=\([0-9]*\)$/\1/p' "$T/fi.log" | awk '{s+=$1} END {print s+0}'; }

# 0: not even the header; then inside the first chunk, mid-run, and in the
# last chunks or the index (the index chunk is ~1.2 KiB)
for lim in 0 3000 12000 30000 $((full_size - 1300)); do
  injected "ENOSPC after $lim bytes" CUCAP_FI_LIMIT=$lim; rc=$?
  want=1; [ "$lim" -eq 0 ] && want=0 # no header: nothing readable, no file left
  cut=$nrc; [ $want = 1 ] && [ $nrc = 0 ] && cut=4
  if verify "disk full after $lim of $full_size bytes" "$T/df.fb" $want $rc $cut; then
    f=$(failed_writes)
    [ "$f" -eq 1 ] && ok "disk full after $lim bytes: recording stopped at the first failed write" ||
      bad "disk full after $lim bytes: $f failed write attempts (recording did not stop)"
  fi
done

injected "EIO" CUCAP_FI_LIMIT=20000 CUCAP_FI_ERRNO=EIO; rc=$?
verify "EIO after 20000 bytes" "$T/df.fb" 1 $rc $([ $nrc = 0 ] && echo 4 || echo $nrc)

injected "open EACCES" CUCAP_FI_OPEN=EACCES; rc=$?
verify "output cannot be opened (EACCES)" "$T/df.fb" 0 $rc

# fdatasync failures need sync_writes, which `cucap record` has no flag for:
# preload libcucap directly, as `cucap record` does.
LIB="$(dirname "$CUCAP")/../interpose/libcucap.so"
if [ -f "$LIB" ] && [ -z "${CUCAP_TEST_CFLAGS:-}" ]; then
  rm -f "$T/df.fb"
  env LD_PRELOAD="$LIB:$T/fi.so" CUCAP_OUTPUT="$T/df.fb" CUCAP_OPTIONS=sync_writes \
    CUCAP_FI_PATH="$T/df.fb" CUCAP_FI_SYNC=EIO "$APP" $ARGS > "$T/s.out" 2> "$T/s.err"; rc=$?
  verify "fdatasync fails (EIO, sync_writes)" "$T/df.fb" 1 $rc
fi

# refused before the program runs: one line, the documented code
refused() { # NAME WANT_RC OUT
  "$CUCAP" record -o "$3" -- "$APP" $ARGS > "$T/s.out" 2> "$T/s.err"; local rc=$?
  if [ $rc -eq "$2" ] && [ ! -s "$T/s.out" ] && [ "$(wc -l < "$T/s.err")" -eq 1 ]; then
    ok "$1: refused before the program ran (exit $rc): $(cat "$T/s.err")"
  else bad "$1: exit $rc, want $2, no run, one line"; cat "$T/s.err"; fi
}
rm -rf "$T/nodir"
refused "output directory does not exist" 4 "$T/nodir/x.fb"
mkdir -p "$T/adir"
refused "output path is a directory" 2 "$T/adir"

# a real full filesystem, where this machine lets us mount one
if [ "$(id -u)" = 0 ] && mkdir -p "$T/mnt" && mount -t tmpfs -o size=16k tmpfs "$T/mnt" 2>/dev/null; then
  MNT="$T/mnt"
  "$CUCAP" record -o "$T/mnt/x.fb" -- "$APP" $ARGS > "$T/s.out" 2> "$T/s.err"; rc=$?
  verify "16 KiB tmpfs fills up" "$T/mnt/x.fb" 1 $rc $([ $nrc = 0 ] && echo 4 || echo $nrc)
  umount "$MNT" && MNT=""
else
  echo "note: cannot mount a tmpfs here; the injector cases above stand for it"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
