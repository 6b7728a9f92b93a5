#!/usr/bin/env bash
# test_dump_symbols.sh - symbolized host callstacks in `cucap dump`.
#  1. drv_basic (APPS_DIR, built with symbols) recorded on the mock libcuda:
#     every Launch/Memcpy record of `dump --json` has a "callstack" whose
#     frames include "main (drv_basic.c:N)" (libdw, the app has DWARF).
#  2. the human dump prints "    at main (drv_basic.c:N)" lines (DWARF).
#  3. --no-symbols: no "callstack" key, no "at" lines, and otherwise the same
#     output as with symbols.
#  4. a copy of drv_basic with a different build-id at the recorded path:
#     frames read "drv_basic+0x.. (build-id mismatch, no debug info)".
#  6. the app without DWARF: "main+0x.. (drv_basic+0x.., no debug info)".
#  5. --body Launch still symbolizes (Callstack/ModuleMap records are read
#     even when filtered out).
# Env (CTest): CUCAP, MOCK_LIBDIR, APPS_DIR, PYTHON. Exit 0 pass, 77 skip.
set -u
: "${CUCAP:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
PY="${PYTHON:-python3}"
if [ ! -e "$MOCK_LIBDIR/libcuda.so.1" ] || [ ! -x "$CUCAP" ] || [ ! -x "$APPS_DIR/drv_basic" ]; then
  echo "SKIP: mock libcuda ($MOCK_LIBDIR), cucap ($CUCAP) or drv_basic ($APPS_DIR) missing"; exit 77
fi
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-dumpsym.XXXXXX")"; trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }
# dump OUT ARGS... : cucap dump ARGS > OUT, must exit 0 and not crash
dump() {
  local out="$1"; shift
  "$CUCAP" dump "$@" >"$out" 2>"$T/dump.err"; local rc=$?
  if [ $rc != 0 ] || grep -qE 'Sanitizer|runtime error' "$T/dump.err"; then
    bad "cucap dump $*: exit $rc"; head -20 "$T/dump.err"; return 1
  fi
  return 0
}

# The app runs from a copy so that test 4 can replace it afterwards.
mkdir -p "$T/bin"
cp "$APPS_DIR/drv_basic" "$T/bin/drv_basic"
"$CUCAP" record -o "$T/basic.fb" -- "$T/bin/drv_basic" >"$T/rec.out" 2>"$T/rec.err" ||
  { bad "record drv_basic (rc $?)"; cat "$T/rec.err"; }

# ---- 1. JSON callstacks
if dump "$T/sym.jsonl" --json "$T/basic.fb"; then
  if "$PY" - "$T/sym.jsonl" <<'PYEOF'; then ok "launch/memcpy callstacks name main in drv_basic"; else bad "JSON callstacks"; fi
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
main_re = re.compile(r"^main \(drv_basic\.c:[0-9]+\)$")
n = 0
for r in recs:
    if r.get("body_type") not in ("Launch", "Memcpy"):
        continue
    n += 1
    assert r.get("stack"), ("no stack id", r)
    cs = r.get("callstack")
    assert isinstance(cs, list) and cs, ("no callstack", r)
    assert all(isinstance(f, str) and f for f in cs), cs
    assert any(main_re.match(f) for f in cs), ("main not in", cs)
    assert list(r.keys())[-1] == "callstack", "callstack should be the last key"
assert n >= 2, "want launches and copies, got %d" % n
assert sum(1 for r in recs if r.get("body_type") == "Launch") >= 1
# records without a stack get no callstack key
assert all("callstack" not in r for r in recs if not r.get("stack"))
print("%d launch/memcpy records symbolized, e.g. %s" % (
    n, next(r["callstack"] for r in recs if r.get("body_type") == "Launch")))
PYEOF
fi

# ---- 2. human dump
if dump "$T/sym.txt" "$T/basic.fb"; then
  if grep -qE '^    at main \(drv_basic\.c:[0-9]+\)' "$T/sym.txt" &&
     grep -B1 -E '^    at ' "$T/sym.txt" | grep -qE 'cuLaunchKernel 0 Launch'; then
    ok "human dump: $(grep -m1 -E '^    at ' "$T/sym.txt")"
  else bad "human dump has no 'at main' line after a launch"; head -40 "$T/sym.txt"; fi
fi

# ---- 3. --no-symbols
if dump "$T/nosym.jsonl" --json --no-symbols "$T/basic.fb"; then
  if grep -q '"callstack"' "$T/nosym.jsonl"; then bad "--no-symbols still prints callstack"
  elif "$PY" - "$T/sym.jsonl" "$T/nosym.jsonl" <<'PYEOF'; then ok "--no-symbols: same records without callstack"; else bad "--no-symbols differs"; fi
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
for r in a:
    r.pop("callstack", None)
assert a == b
PYEOF
fi
if dump "$T/nosym.txt" --no-symbols "$T/basic.fb"; then
  if grep -qE '^    at ' "$T/nosym.txt"; then bad "--no-symbols: human dump has stack lines"
  else ok "--no-symbols: no stack lines in human dump"; fi
fi

# ---- 5. --body filter keeps the stack context
if dump "$T/launch.jsonl" --json --body Launch "$T/basic.fb"; then
  if grep -qE '"callstack":\["[^]]*main \(drv_basic\.c:[0-9]+\)' "$T/launch.jsonl"; then
    ok "--body Launch still symbolized"
  else bad "--body Launch lost the callstacks"; head -3 "$T/launch.jsonl"; fi
fi

# ---- 6. the same binary without DWARF (strip --strip-debug keeps the
#         build-id and .symtab): function+offset, "no debug info"
if command -v strip >/dev/null 2>&1 && cp "$APPS_DIR/drv_basic" "$T/stripped" &&
   strip --strip-debug "$T/stripped" && cp "$T/stripped" "$T/bin/drv_basic"; then
  if dump "$T/strip.txt" "$T/basic.fb" &&
     grep -qE '^    at main\+0x[0-9a-f]+ \(drv_basic\+0x[0-9a-f]+, no debug info\)' "$T/strip.txt"; then
    ok "no DWARF: $(grep -m1 -E '^    at ' "$T/strip.txt")"
  else bad "stripped binary: no 'main+0x.. (drv_basic+0x.., no debug info)' frame"; grep -m2 '^    at' "$T/strip.txt"; fi
  cp "$APPS_DIR/drv_basic" "$T/bin/drv_basic"
else
  echo "skip: no strip for the no-debug-info case"
fi

# ---- 4. a different file at the recorded path: no symbols from it
CC="${CC:-cc}"
if command -v "$CC" >/dev/null 2>&1 &&
   printf 'int main(void){return 0;}\n' >"$T/other.c" &&
   "$CC" -Wl,--build-id=sha1 -o "$T/bin/drv_basic" "$T/other.c" 2>"$T/cc.err"; then
  if dump "$T/mism.jsonl" --json "$T/basic.fb"; then
    if "$PY" - "$T/mism.jsonl" <<'PYEOF'; then ok "build-id mismatch marked, not symbolized"; else bad "build-id mismatch"; fi
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:]
cs = [r["callstack"] for r in recs if r.get("body_type") == "Launch"]
assert cs, "no launch callstacks"
for s in cs:
    assert not any(f.startswith("main+") for f in s), s
    assert any(re.match(r"^drv_basic\+0x[0-9a-f]+ \(build-id mismatch, no debug info\)$", f)
               for f in s), s
print(cs[0])
PYEOF
  fi
  rm -f "$T/bin/drv_basic"
  if dump "$T/gone.jsonl" --json "$T/basic.fb" &&
     grep -qE '"callstack":\["drv_basic\+0x[0-9a-f]+ \(no debug info\)"' "$T/gone.jsonl"; then
    ok "object file gone: object+offset frames"
  else bad "object file gone"; grep -m1 callstack "$T/gone.jsonl"; fi
else
  echo "skip: no C compiler for the build-id mismatch case"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
