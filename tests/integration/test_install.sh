#!/usr/bin/env bash
# test_install.sh - `cmake --install` of the build tree into a temporary
# prefix P, then the installed layout on its own:
#  1. P/bin/cucap, P/lib/cucap/libcucap.so, P/share/man/man1/cucap.1 and one
#     cucap-<command>.1 per command of `cucap --help`, and
#     P/share/bash-completion/completions/cucap exist;
#  2. P/bin/cucap --help and --version run;
#  3. the man pages render (man -l, else groff, else they have .TH/.SH);
#  4. the completion passes `bash -n`, defines `complete -p cucap` when
#     sourced and completes commands, a command's options and cupti's
#     subcommands;
#  5. P/bin/cucap record of a mock app finds P/lib/cucap/libcucap.so (no
#     CUCAP_LIB) and writes a capture that P/bin/cucap info reads.
# Env (CTest): CUCAP_BUILD_DIR, MOCK_LIBDIR, APPS_DIR. Exit 0 pass, 77 skip.
set -u
: "${CUCAP_BUILD_DIR:?}" "${MOCK_LIBDIR:?}"
APPS_DIR="${APPS_DIR:-}"
if ! command -v cmake > /dev/null; then echo "SKIP: no cmake"; exit 77; fi
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-install.XXXXXX")"; trap 'rm -rf "$T"' EXIT
P="$T/prefix"
pass=0; fail=0
ok() { echo "ok: $*"; pass=$((pass+1)); }
bad() { echo "FAIL: $*"; fail=$((fail+1)); }

if cmake --install "$CUCAP_BUILD_DIR" --prefix "$P" > "$T/install.log" 2>&1; then ok "cmake --install"
else cat "$T/install.log"; echo "FAIL: cmake --install"; exit 1; fi

# ---- 1. files
cmds=$("$P/bin/cucap" --help | awk '/^commands:/{c=1; next} c && /^$/{exit} c && /^  [a-z]/{print $1}' | grep -vx help | sort -u)
missing=""
for f in bin/cucap lib/cucap/libcucap.so share/man/man1/cucap.1 share/bash-completion/completions/cucap; do
  [ -e "$P/$f" ] || missing="$missing $f"
done
for c in $cmds; do [ -s "$P/share/man/man1/cucap-$c.1" ] || missing="$missing share/man/man1/cucap-$c.1"; done
if [ -z "$missing" ] && [ -n "$cmds" ]; then ok "installed: bin, lib/cucap, $(echo $cmds | wc -w) command man pages, completion"
else bad "missing:$missing (commands: $cmds)"; fi
[ -x "$P/bin/cucap" ] && [ "$(ls "$P/share/man/man1" | wc -l)" = $(( $(echo $cmds | wc -w) + 1 )) ] \
  && ok "one page per command and cucap.1" || bad "pages: $(ls "$P/share/man/man1")"

# ---- 2. the binary runs from the prefix
"$P/bin/cucap" --help > "$T/help" 2>&1 && grep -q "^usage: cucap" "$T/help" && ok "bin/cucap --help" || bad "--help"
"$P/bin/cucap" --version | grep -q "^cucap " && ok "bin/cucap --version" || bad "--version"

# ---- 3. man pages
for page in "$P"/share/man/man1/*.1; do
  name=$(basename "$page" .1)
  if ! grep -q '^\.TH ' "$page" || ! grep -q '^\.SH NAME' "$page" || ! grep -q '^\.SH SYNOPSIS' "$page"; then
    bad "$name.1: no .TH/.SH NAME/.SH SYNOPSIS"; continue
  fi
  if command -v groff > /dev/null; then
    groff -man -Tutf8 -ww -z "$page" > "$T/groff.err" 2>&1
    [ -s "$T/groff.err" ] && { bad "$name.1: groff warnings"; cat "$T/groff.err"; continue; }
    out=$(groff -man -Tutf8 "$page" 2> /dev/null | sed 's/.\x08//g')  # no overstrike bold
  elif command -v man > /dev/null; then
    out=$(MANWIDTH=80 man -l "$page" 2> /dev/null | sed 's/.\x08//g')
  else
    out="NAME"
  fi
  echo "$out" | grep -q "NAME" || bad "$name.1 does not render"
done
ok "man pages have .TH/.SH and render ($(command -v groff > /dev/null && echo groff || { command -v man > /dev/null && echo man; } || echo 'roff checked only'))"
grep -q "^cucap\\\\-stats \\\\- " "$P/share/man/man1/cucap-stats.1" && grep -q -- "--profile P" "$P/share/man/man1/cucap-stats.1" \
  && ok "cucap-stats.1 from the command's --help" || bad "cucap-stats.1 content"

# ---- 4. bash completion
C="$P/share/bash-completion/completions/cucap"
bash -n "$C" && ok "completion: bash -n" || bad "completion: bash -n"
out=$(bash -c 'source "$1"; complete -p cucap' _ "$C" 2>&1)
echo "$out" | grep -q -- "-F _cucap cucap" && ok "complete -p cucap: $out" || bad "complete -p cucap: $out"
got=$(bash -c 'source "$1"; COMP_WORDS=(cucap st); COMP_CWORD=1; _cucap; echo "${COMPREPLY[*]}"' _ "$C")
[ "$got" = stats ] && ok "completes 'st' to stats" || bad "completion of 'st': '$got'"
got=$(bash -c 'source "$1"; COMP_WORDS=(cucap stats --pr); COMP_CWORD=2; _cucap; echo "${COMPREPLY[*]}"' _ "$C")
[ "$got" = --profile ] && ok "completes 'stats --pr' to --profile" || bad "completion of 'stats --pr': '$got'"
got=$(bash -c 'source "$1"; COMP_WORDS=(cucap cupti pro); COMP_CWORD=2; _cucap; echo "${COMPREPLY[*]}"' _ "$C")
[ "$got" = "probe profile" ] && ok "completes cupti's subcommands" || bad "cupti subcommands: '$got'"
got=$(bash -c 'source "$1"; COMP_WORDS=(cucap record --); COMP_CWORD=2; _cucap; echo "${COMPREPLY[*]}"' _ "$C")
case " $got " in *" --output "*) ok "record options";; *) bad "record options: '$got'";; esac

# ---- 5. record from the installed layout
if [ -e "$MOCK_LIBDIR/libcuda.so.1" ] && [ -x "$APPS_DIR/drv_basic" ]; then
  (unset CUCAP_LIB; cd "$T" && LD_LIBRARY_PATH="$MOCK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$P/bin/cucap" record -o "$T/inst.fb" -- "$APPS_DIR/drv_basic" > "$T/rec.out" 2> "$T/rec.err"); rc=$?
  if [ $rc = 0 ] && grep -q "drv_basic ok" "$T/rec.out" && grep -q "records" "$T/rec.err" \
     && "$P/bin/cucap" info "$T/inst.fb" > "$T/info" 2>&1 && grep -q "^launches: *2" "$T/info"; then
    ok "installed cucap record of drv_basic"
  else bad "installed record rc=$rc"; cat "$T/rec.err"; head -20 "$T/info" 2>/dev/null; fi
  # the installed binary, moved with its prefix, still finds its library
  mv "$P" "$T/moved"
  (unset CUCAP_LIB; LD_LIBRARY_PATH="$MOCK_LIBDIR" "$T/moved/bin/cucap" record -o "$T/moved.fb" -- "$APPS_DIR/drv_basic" > /dev/null 2>&1) \
    && [ -s "$T/moved.fb" ] && ok "relocated prefix records" || bad "relocated prefix"
else
  echo "skip: mock libcuda or drv_basic missing: no record check"
fi

echo "passed $pass, failed $fail"
[ $fail = 0 ]
