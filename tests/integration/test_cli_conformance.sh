#!/usr/bin/env bash
# test_cli_conformance.sh - every cucap command with an input and/or an
# output against the same bad command lines, on the mock libcuda: the exit
# code documented in README.md ("Exit codes"), the message exactly once, and
# no input changed (checksums before and after).
#
#  outputs (trim, extract, extract --emit-c, export, compress, replay
#  --profile-out, replay --folded, cupti profile --json: the last without a
#  CUPTI only the first four): output = input, through a symlink, through
#  a hard link (2); missing and unwritable output directory (4); output is a
#  directory (2); an existing output file is replaced whole (0), and no
#  temporary file is left;
#  inputs (those and info, dump, analyze, replay, diff): empty, truncated,
#  not a capture (3), a directory (3 "is a directory"), missing (4);
#  record: missing / unwritable directory (4), a directory, an existing file
#  without --force, %q{VAR} unset (2), all before the program runs; --force
#  overwrites; the program's own status otherwise (disk full: 4 is in
#  test_record_diskfull.sh);
#  a full disk (fault injector) and a failing command over an existing
#  output (kept), an output that is a symlink elsewhere; help help,
#  analyze --help, --verify=launch without LaunchHash records (one warning),
#  a verify mismatch (reported once);
#  SIGKILL while compress / trim write over an existing output: that output
#  is the old one or the complete new one, never a torn file.
# Env (from CTest): CUCAP, CUCAP_BUILD_DIR, MOCK_LIBDIR, APPS_DIR. Exit 0
# pass, 77 skip.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR) or cucap ($CUCAP) missing"; exit 77
fi
if [ -z "$APPS_DIR" ] || [ ! -x "$APPS_DIR/drv_loop" ]; then
  echo "SKIP: drv_loop not built (APPS_DIR=$APPS_DIR)"; exit 77
fi
T="$(mktemp -d)"; trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
APP="$APPS_DIR/drv_loop"
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

# the inputs: a capture, a larger one (for the kills), a profile
mkdir -p "$T/in" "$T/w"
"$CUCAP" record -o "$T/in/v.fb" -- "$APP" > /dev/null 2>&1 || { echo "FAIL: record"; exit 1; }
"$CUCAP" record -o "$T/in/big.fb" --level 1 -- "$APP" 64 4194304 > /dev/null 2>&1 ||
  { echo "FAIL: record big"; exit 1; }
: > "$T/in/empty.fb"
head -c 20 "$T/in/v.fb" > "$T/in/trunc.fb"
printf 'not a capture at all, just some text\n' > "$T/in/junk.fb"
mkdir "$T/in/dir.fb"
IN="$T/in/v.fb"
sums() { (cd "$T/in" && find . -type f -print0 | sort -z | xargs -0 md5sum); }
sums > "$T/sums.before"
UNWRITABLE="$T/ro"
mkdir "$UNWRITABLE"; chmod 0555 "$UNWRITABLE"
# root writes into a mode 0555 directory: /sys refuses it new files
[ "$(id -u)" = 0 ] && UNWRITABLE=/sys

# cmd KIND IN OUT: the command KIND reading IN and writing OUT
cmd() {
  local k="$1" in="$2" out="$3"
  case "$k" in
  trim) "$CUCAP" trim "$in" -o "$out" --range=launch:2-3 --replay ;;
  extract) "$CUCAP" extract "$in" --launch 1 -o "$out" --replay ;;
  emit-c) "$CUCAP" extract "$in" --launch 1 -o "$T/w/e.fb" --replay --emit-c "$out" ;;
  export) "$CUCAP" export "$in" --format=perfetto -o "$out" ;;
  compress) "$CUCAP" compress "$in" -o "$out" ;;
  profile-out) "$CUCAP" replay --profile --quiet "$in" --profile-out "$out" ;;
  folded) "$CUCAP" replay --profile --quiet "$in" --folded "$out" ;;
  cupti-json) "$CUCAP" cupti profile --quiet "$in" --json "$out" ;;
  info) "$CUCAP" info "$in" ;;
  dump) "$CUCAP" dump "$in" ;;
  analyze) "$CUCAP" analyze "$in" ;;
  replay) "$CUCAP" replay "$in" ;;
  diff) "$CUCAP" diff "$in" "$IN" ;;
  esac
}

# expect NAME WANT_RC MSG_REGEX KIND IN OUT: exit code, the message exactly
# once (and no other cucap line), inputs unchanged, no temporary file left
expect() {
  local name="$1" want="$2" re="$3"; shift 3
  cmd "$@" > "$T/o" 2> "$T/e"; local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, want $want"; head -3 "$T/e"; return; fi
  if [ -n "$re" ]; then
    local n; n=$(grep -cE -- "$re" "$T/e")
    local all; all=$(grep -c '^cucap' "$T/e")
    if [ "$n" -ne 1 ] || [ "$all" -ne 1 ]; then
      bad "$name: message /$re/ $n times, $all cucap lines"; cat "$T/e"; return
    fi
  fi
  if ! sums | cmp -s - "$T/sums.before"; then bad "$name: an input changed"; return; fi
  if ls -a "$T/in" "$T/w" | grep -q '\.cucap-'; then bad "$name: temporary file left"; return; fi
  ok
}

OUTS="trim extract emit-c export compress profile-out folded cupti-json"
ln -s "$IN" "$T/w/sym.fb"
ln "$IN" "$T/w/hard.fb"
for k in $OUTS; do
  expect "$k: output = input" 2 'is the input .*refusing' $k "$IN" "$IN"
  expect "$k: output = input (relative)" 2 'is the input .*refusing' $k "$IN" "$T/in/../in/v.fb"
  expect "$k: output = symlink to input" 2 'is the input .*refusing' $k "$IN" "$T/w/sym.fb"
  expect "$k: output = hard link of input" 2 'is the input .*refusing' $k "$IN" "$T/w/hard.fb"
  [ $k = emit-c ] && continue # DIR is created: a missing one is fine
  # the mock has no CUPTI: its outputs are checked, then loading CUPTI fails
  [ $k = cupti-json ] && continue
  expect "$k: missing output directory" 4 'cannot create: No such file or directory' \
    $k "$IN" "$T/nodir/out"
  expect "$k: unwritable output directory" 4 'cannot create: Permission denied' \
    $k "$IN" "$UNWRITABLE/out"
  expect "$k: output is a directory" 2 'is a directory, not an output file' $k "$IN" "$T/w"
  printf 'old' > "$T/w/old.out"
  expect "$k: existing output replaced" 0 '' $k "$IN" "$T/w/old.out"
  [ "$(head -c 3 "$T/w/old.out" | tr -d '\0')" != old ] && [ -s "$T/w/old.out" ] && ok ||
    bad "$k: existing output not replaced"
  rm -f "$T/w/old.out"
done

for k in $OUTS info dump analyze replay diff; do
  o="$T/w/x.out"
  expect "$k: empty input" 3 'not a cucap capture \(empty file\)' $k "$T/in/empty.fb" "$o"
  expect "$k: truncated input" 3 'truncated: file is 20 bytes' $k "$T/in/trunc.fb" "$o"
  expect "$k: not a capture" 3 'not a cucap capture \(bad magic\)' $k "$T/in/junk.fb" "$o"
  expect "$k: directory input" 3 'is a directory, not a cucap capture' $k "$T/in/dir.fb" "$o"
  expect "$k: missing input" 4 'cannot open: No such file or directory' $k "$T/in/nope.fb" "$o"
  [ -e "$o" ] && bad "$k: an output was written for a bad input"
  rm -rf "$o" "$T/w/e.fb"
done

# record: every refusal before the program runs (drv_loop prints to stdout)
rec() { # NAME WANT_RC MSG_REGEX OUT [record options]
  local name="$1" want="$2" re="$3" out="$4"; shift 4
  env -u CUCAP_CONF_UNSET "$CUCAP" record -o "$out" "$@" -- "$APP" > "$T/o" 2> "$T/e"; local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "record: $name: exit $rc, want $want"; head -3 "$T/e"; return; fi
  if [ -n "$re" ]; then
    local n; n=$(grep -cE -- "$re" "$T/e")
    if [ "$n" -ne 1 ] || [ "$(wc -l < "$T/e")" -ne 1 ]; then
      bad "record: $name: message /$re/ $n times"; cat "$T/e"; return
    fi
    [ -s "$T/o" ] && { bad "record: $name: the program ran"; return; }
  fi
  ok
}
rec "missing directory" 4 'cannot create: No such file or directory' "$T/nodir/x.fb"
rec "unwritable directory" 4 'cannot create: Permission denied' "$UNWRITABLE/x.fb"
rec "output is a directory" 2 'is a directory, not an output file' "$T/w"
rec "%q{VAR} unset" 2 '%q\{CUCAP_CONF_UNSET\}: CUCAP_CONF_UNSET is not set' \
  "$T/w/r-%q{CUCAP_CONF_UNSET}.fb"
CUCAP_CONF_DIR="$T/nodir" rec "%q{VAR} naming a missing directory" 4 \
  'cannot create: No such file or directory' "$T/w/%q{CUCAP_CONF_DIR}/x.fb"
cp "$IN" "$T/w/r.fb"
rec "existing output" 2 'exists: refusing to overwrite it \(--force does\)' "$T/w/r.fb"
cmp -s "$IN" "$T/w/r.fb" && ok || bad "record: existing output changed"
rec "existing output --force" 0 '' "$T/w/r.fb" --force
"$CUCAP" info "$T/w/r.fb" > /dev/null 2>&1 && ! cmp -s "$IN" "$T/w/r.fb" && ok ||
  bad "record --force: not a new capture"
# a program that never calls CUDA writes no capture: its own status
"$CUCAP" record -o "$T/w/none.fb" -- true > /dev/null 2> "$T/e"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'no capture was written' "$T/e")" -eq 1 ] && ok ||
  { bad "record: no CUDA: exit $rc, want 0"; cat "$T/e"; }
"$CUCAP" record -o "$T/w/none.fb" -- false > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && ok || bad "record: the program's own status: exit $rc, want 1"

# a command that fails leaves the existing output as it was; an output that
# is a symlink to another file is replaced where it points, the link kept
printf 'old' > "$T/w/keep.out"
"$CUCAP" trim "$IN" -o "$T/w/keep.out" --range=launch:900-901 --replay > /dev/null 2> "$T/e"; rc=$?
[ $rc -eq 2 ] && [ "$(cat "$T/w/keep.out")" = old ] && ok ||
  bad "trim of a missing range: exit $rc, output $(head -c 8 "$T/w/keep.out" | tr -d '\0')"
ln -s keep.out "$T/w/link.out"
"$CUCAP" compress "$IN" -o "$T/w/link.out" > /dev/null 2>&1 && [ -L "$T/w/link.out" ] &&
  "$CUCAP" info "$T/w/keep.out" > /dev/null 2>&1 && ok || bad "compress through a symlink"

# one problem, one message; help and its texts
"$CUCAP" help help > "$T/o" 2> "$T/e" && grep -q '^usage' "$T/o" && ok || bad "help help"
"$CUCAP" analyze --help | grep -q 'PCT% of' && ! "$CUCAP" analyze --help | grep -q '%%' && ok ||
  bad "analyze --help: PCT%"
"$CUCAP" replay --verify=launch "$IN" > "$T/o" 2> "$T/e"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'no LaunchHash records' "$T/e")" -eq 1 ] && ok ||
  { bad "--verify=launch without LaunchHash records: exit $rc, warned $(grep -c LaunchHash "$T/e")x"; cat "$T/e"; }
"$CUCAP" record -o "$T/w/hashed.fb" --hash-launches -- "$APP" > /dev/null 2>&1
"$CUCAP" replay --verify=launch "$T/w/hashed.fb" > "$T/o" 2> "$T/e"; rc=$?
[ $rc -eq 0 ] && [ ! -s "$T/e" ] && ok || { bad "--verify=launch with hashes: exit $rc"; cat "$T/e"; }
HELPER="${CUCAP_BUILD_DIR:-}/tests/test_replay"
if [ -x "$HELPER" ] && "$HELPER" --flip-dtoh "$IN" "$T/w/flip.fb" 100 > /dev/null 2>&1; then
  "$CUCAP" replay --verify "$T/w/flip.fb" > "$T/o" 2> "$T/e"; rc=$?
  n=$(cat "$T/o" "$T/e" | grep -c 'first differing offset')
  [ $rc -eq 1 ] && [ "$n" -eq 1 ] && [ "$(wc -l < "$T/e")" -eq 1 ] && ok ||
    { bad "verify mismatch: exit $rc, reported $n times"; cat "$T/o" "$T/e"; }
fi

# a full disk while writing over an existing output (the fault injector of
# test_record_diskfull.sh, watching the temporary files): exit 4, one
# message, the old output intact, the temporary file removed
CC="${CC:-cc}"
FI_SRC="${CUCAP_SOURCE_DIR:-}/tests/integration/fault_inject.c"
if [ -z "${CUCAP_TEST_CFLAGS:-}" ] && [ -f "$FI_SRC" ] && command -v "$CC" > /dev/null &&
   "$CC" -O2 -shared -fPIC -o "$T/fi.so" "$FI_SRC" -ldl 2> /dev/null; then
  for k in compress trim extract; do
    printf 'old output' > "$T/w/full.out"
    # trim / extract: the writer inside share/ logs the failure too
    re=''; [ $k = compress ] && re='No space left on device'
    LD_PRELOAD="$T/fi.so" CUCAP_FI_PATH=.cucap- CUCAP_FI_LIMIT=1000 \
      expect "$k: disk full" 4 "$re" $k "$IN" "$T/w/full.out"
    [ "$(cat "$T/w/full.out")" = "old output" ] && ok || bad "$k: disk full: the old output changed"
  done
fi

# SIGKILL while writing over an existing output: old or new, never torn
BIG="$T/in/big.fb"
kills=0
for k in compress trim; do
  for delay in 0.05 0.1 0.2 0.4; do
    printf 'old output' > "$T/w/k.out"
    case $k in
    compress) "$CUCAP" compress "$BIG" -o "$T/w/k.out" --level 19 > /dev/null 2>&1 & ;;
    trim) "$CUCAP" trim "$BIG" -o "$T/w/k.out" --range=launch:10-60 --replay > /dev/null 2>&1 & ;;
    esac
    pid=$!
    sleep $delay; kill -KILL $pid 2>/dev/null && kills=$((kills+1)); wait $pid 2>/dev/null
    if [ "$(head -c 10 "$T/w/k.out" | tr -d '\0')" = "old output" ] || "$CUCAP" info "$T/w/k.out" > /dev/null 2>&1; then
      ok
    else
      bad "$k killed after ${delay}s: output neither the old file nor a complete capture"
    fi
    rm -f "$T/w"/.k.out.cucap-* # SIGKILL leaves the temporary file behind
  done
done
[ $kills -gt 0 ] && ok || bad "no kill landed while writing (capture too small?)"
sums | cmp -s - "$T/sums.before" && ok || bad "an input changed"

echo "cli conformance: $pass passed, $fail failed ($kills kills landed)"
[ $fail -eq 0 ]
