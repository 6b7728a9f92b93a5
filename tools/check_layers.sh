#!/usr/bin/env bash
# check_layers.sh - checks the layering rules of the tree (docs/design.md,
# "Layers"); run by tests/run.sh. Exits 1 and names every violation:
#
#  1. A folder includes another folder's headers only by their public name
#     (cucap_*.h): no *_internal.h, replay_state.h, ... across folders.
#     Exempt: tests/ and bench/ (white-box unit tests of one module).
#  2. A folder includes public headers only of the folders it may depend on
#     (DEPS below: the one dependency graph of the tree).
#  3. replay/ never names verify, profile or analyze (they watch it through
#     cucap_replay_observer.h), and carries no verification state.
#  4. Only tools/ knows process exit codes: no CUCAP_*EXIT_* and no exit()
#     in the libraries.
#
#   tools/check_layers.sh [ROOT]
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
exec python3 - "$ROOT" <<'EOF'
import os, re, sys
root = sys.argv[1]
# folder -> folders whose public headers it may include (besides its own)
DEPS = {
    "common": [],
    "schema": ["common"],
    "reader": ["common", "schema"],
    "capture": ["common", "schema"],
    "interpose": ["common", "schema", "capture"],
    "symbols": ["common", "schema"],
    "analyze": ["common", "schema", "reader", "symbols"],
    "replay": ["common", "schema", "reader"],
    "verify": ["common", "schema", "reader", "replay"],
    "profile": ["common", "schema", "reader", "symbols", "analyze", "replay"],
    "profile/cupti": ["common", "schema", "reader", "symbols", "analyze", "replay", "profile"],
    "share": ["common", "schema", "reader", "capture", "replay"],
    "tools": ["common", "schema", "reader", "capture", "symbols", "analyze", "replay",
              "verify", "profile", "profile/cupti", "share"],
}
LIBS = [d for d in DEPS if d != "tools"]
# where each header lives (generated headers count as their folder's)
owner = {}
for d in DEPS:
    for sub in (d, d + "/generated"):
        p = os.path.join(root, sub)
        if os.path.isdir(p):
            for f in os.listdir(p):
                if f.endswith(".h"):
                    owner.setdefault(f, d)
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
bad = []
def src_files(d):
    p = os.path.join(root, d)
    for f in sorted(os.listdir(p)):
        if f.endswith((".c", ".h")):
            yield os.path.join(d, f), open(os.path.join(p, f), encoding="utf-8").read()
for d in DEPS:
    for rel, text in src_files(d):
        for h in inc.findall(text):
            base = os.path.basename(h)
            o = owner.get(base)
            if o is None or o == d or (h.startswith("generated/") and o == d):
                continue
            if not base.startswith("cucap_"):
                bad.append("%s: includes %s, an internal header of %s/" % (rel, h, o))
            elif o not in DEPS[d]:
                bad.append("%s: includes %s of %s/, which %s/ must not depend on" % (rel, h, o, d))
# 3. the executor knows nothing of its observers
names = re.compile(r'\b(cucap_verify\w*|cucap_profile\w*|cucap_profiler\w*|cucap_cupti\w*|'
                   r'cucap_analy[sz]\w*|vo_\w+|CUCAP_REPLAY_VERIFY\w*|verify_mode|verify_passes|'
                   r'nondet_\w+|first_mismatch)\b')
for rel, text in src_files("replay"):
    code = re.sub(r'/\*.*?\*/', lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for i, line in enumerate(code.split("\n"), 1):
        for m in names.finditer(line):
            bad.append("%s:%d: replay/ names %s (observers are its callers' business)" % (rel, i, m.group(1)))
# 4. exit codes belong to tools/
exits = re.compile(r'\b(CUCAP_\w*EXIT_\w+|exit_code)\b|(?<![\w.>])(_?exit)\s*\(')
for d in LIBS:
    for rel, text in src_files(d):
        code = re.sub(r'/\*.*?\*/', lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
        for i, line in enumerate(code.split("\n"), 1):
            m = exits.search(line)
            if m:
                bad.append("%s:%d: %s outside tools/ (libraries return a status; tools/ picks the exit code)"
                           % (rel, i, m.group(1) or m.group(2)))
for b in bad:
    print("check_layers: " + b)
if bad:
    print("check_layers: %d violation(s)" % len(bad))
    sys.exit(1)
print("check_layers: %d folders, layering rules hold" % len(DEPS))
EOF
