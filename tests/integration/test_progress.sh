#!/usr/bin/env bash
# test_progress.sh - the CLI's progress line (tools/cli_progress.c) on the
# mock libcuda: with stderr a pseudo-terminal (python3's pty module; stdout
# stays a file) `replay --verify --loop`, `replay --profile`, `compress` and
# `trim --replay` draw "\r\033[Kcucap CMD: ..." lines and erase the last
# one; with stderr a pipe, or with --quiet, stderr holds no \r; stdout is
# byte-identical either way (replay: its timings masked; profile: its
# report up to the sections, timings masked, and no \r or escape anywhere). Also the writer's
# totals in `cucap record`'s summary. CUCAP_PROGRESS_DELAY_MS=0 so that
# these short runs draw at once. Skips (77) without the mock or cucap.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ] || [ ! -x "$APPS_DIR/drv_loop" ]; then
  echo "SKIP: mock libcuda, cucap or drv_loop missing"; exit 77
fi
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUCAP_PROGRESS_DELAY_MS=0
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

# on_tty OUT ERR CMD...: CMD with stdout to OUT, stderr on a pty whose
# bytes go to ERR; exits with CMD's status.
on_tty() {
  "$PY" - "$@" <<'PYEOF'
import os, pty, subprocess, sys
out, err, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
m, s = pty.openpty()
with open(out, "wb") as fo:
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=s)
os.close(s)
data = b""
while True:
    try:
        b = os.read(m, 4096)
    except OSError:  # EIO: the last holder of the pty's other end is gone
        break
    if not b:
        break
    data += b
open(err, "wb").write(data)
sys.exit(p.wait())
PYEOF
}
# replay: its timings masked; a profile's findings (which, their severity,
# their order) follow measured times: only its first lines, which do not
mask() {
  if [ "$2" = 1 ]; then sed -E 's/[0-9]+\.[0-9]+/N/g' "$1"; else sed -E 's/[0-9]+\.[0-9]+/N/g' "$1" | head -n 5; fi
}

# check LABEL MASK CMD...: progress on the pty, none in a pipe or with --quiet
# (appended to CMD), same stdout (masked when MASK is 1 or 2, see mask).
check() {
  local label="$1" m="$2"; shift 2
  on_tty "$T/tty.out" "$T/tty.err" "$@"; local rc1=$?
  rm -f "$T/o.fb"
  "$@" >"$T/pipe.out" 2>"$T/pipe.err"; local rc2=$?
  rm -f "$T/o.fb"
  on_tty "$T/q.out" "$T/q.err" "$@" --quiet; local rc3=$?
  rm -f "$T/o.fb"
  [ $rc1 = $rc2 ] && [ $rc2 = $rc3 ] || { bad "$label: exit codes $rc1 (tty) $rc2 (pipe) $rc3 (--quiet)"; return; }
  if grep -q $'\r\033\\[Kcucap ' "$T/tty.err"; then
    ok "$label: progress on the terminal: $(tr '\r' '\n' <"$T/tty.err" | grep -a 'cucap ' | sed 's/\x1b\[K//' | tail -1)"
  else bad "$label: no progress on the terminal"; od -c "$T/tty.err" | head; fi
  # the line is erased before anything else is printed: the last progress
  # draw is followed by the erase
  "$PY" - "$T/tty.err" <<'PYEOF' && ok "$label: the line is erased at the end" || bad "$label: line left on the terminal"
import sys
d = open(sys.argv[1], "rb").read()
last = d.rfind(b"\r\033[Kcucap ")
sys.exit(0 if last >= 0 and d.find(b"\r\033[K", last + 1) > last else 1)
PYEOF
  if grep -q $'\r' "$T/pipe.err"; then bad "$label: progress in a pipe"; else ok "$label: nothing in a pipe"; fi
  if grep -q $'\r' "$T/q.err"; then bad "$label: progress with --quiet"; else ok "$label: nothing with --quiet"; fi
  if [ "$m" != 0 ]; then mask "$T/tty.out" "$m" >"$T/a"; mask "$T/pipe.out" "$m" >"$T/b"
  else cp "$T/tty.out" "$T/a"; cp "$T/pipe.out" "$T/b"; fi
  if grep -q $'[\r\033]' "$T/tty.out"; then bad "$label: progress in stdout"
  elif [ -s "$T/b" ] && cmp -s "$T/a" "$T/b"; then ok "$label: stdout identical"
  else bad "$label: stdout differs between terminal and pipe"; diff "$T/a" "$T/b" | head; fi
}

"$CUCAP" record --snapshot=launch:2 -o "$T/c.fb" -- "$APPS_DIR/drv_loop" >/dev/null 2>"$T/rec.err" ||
  { bad "record"; cat "$T/rec.err"; }
grep -Eq '^cucap record: .*: [0-9]+ records, [0-9]+ bytes \([0-9]+ bytes raw, [0-9.]+x compressed\)$' "$T/rec.err" &&
  ok "record: writer totals: $(cat "$T/rec.err")" || { bad "record summary"; cat "$T/rec.err"; }

check "replay --verify --loop 3" 1 "$CUCAP" replay "$T/c.fb" --verify --loop 3
check "replay --profile" 2 "$CUCAP" replay "$T/c.fb" --profile --metrics=none
check "compress" 0 "$CUCAP" compress "$T/c.fb" -o "$T/o.fb" --level 3

# trim has no --quiet: a terminal and a pipe
on_tty "$T/t.out" "$T/t.err" "$CUCAP" trim "$T/c.fb" -o "$T/o.fb" --range=launch:2 --replay; rc1=$?
rm -f "$T/o.fb"
"$CUCAP" trim "$T/c.fb" -o "$T/o.fb" --range=launch:2 --replay >"$T/t2.out" 2>"$T/t2.err"; rc2=$?
[ $rc1 = 0 ] && [ $rc2 = 0 ] || bad "trim --replay: exit $rc1 / $rc2"
grep -q $'\r\033\\[Kcucap trim --replay: pass 1, records' "$T/t.err" && ok "trim --replay: progress on the terminal" ||
  { bad "trim --replay: no progress"; od -c "$T/t.err" | head; }
grep -q $'\r' "$T/t2.err" && bad "trim --replay: progress in a pipe" || ok "trim --replay: nothing in a pipe"
cmp -s "$T/t.out" "$T/t2.out" && ok "trim --replay: stdout identical" || bad "trim --replay: stdout differs"

# a run shorter than the delay prints nothing
CUCAP_PROGRESS_DELAY_MS=60000 on_tty "$T/d.out" "$T/d.err" "$CUCAP" replay "$T/c.fb" --verify
grep -q $'\r' "$T/d.err" && bad "short replay drew a progress line" || ok "short replay: no progress line"

echo "progress: $pass passed, $fail failed"
[ "$fail" = 0 ]
