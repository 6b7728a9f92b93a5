#!/usr/bin/env bash
# test_corrupt_cli.sh - `cucap info` / `cucap dump --json` on damaged captures:
# bit flips (fixed seeds), truncation at every chunk boundary and mid-chunk,
# zero-length file, random garbage, major version 99. Each must exit 0 (damage
# the format tolerates or that falls in padding) or 3 with exactly one error
# line "cucap <cmd>: FILE: ..." on stderr - never crash (exit >= 128) and never
# a sanitizer report. Env: CUCAP, CUCAP_BUILD_DIR, PYTHON. Exit 0/1/77.
set -u
CUCAP="${CUCAP:?CUCAP not set}"
PY="${PYTHON:-python3}"
TESTGEN="${CUCAP_BUILD_DIR:?}/tests/testgen/cucap-testgen"
[ -x "$CUCAP" ] || { echo "skip: $CUCAP not built"; exit 77; }
[ -x "$TESTGEN" ] || { echo "skip: $TESTGEN not built"; exit 77; }
T="$(mktemp -d "${TMPDIR:-/tmp}/cucap-corrupt.XXXXXX")"
trap 'rm -rf "$T"' EXIT
"$TESTGEN" "$T/base.fb" --records 300 2>/dev/null || { echo "FAIL: testgen"; exit 1; }
export CUCAP
exec "$PY" - "$T" <<'PYEOF'
import os, random, struct, subprocess, sys

T = sys.argv[1]
CUCAP = os.environ["CUCAP"]
base = open(os.path.join(T, "base.fb"), "rb").read()

def chunks(d):
    """(offset, end) of every chunk, walking the framing (cucap_format.h)."""
    hsize = struct.unpack_from("<I", d, 16)[0]
    off = (32 + hsize + 7) & ~7
    out = []
    while off + 40 <= len(d):
        magic, = struct.unpack_from("<I", d, off)
        if magic != 0x4B4E4843:
            break
        csize, = struct.unpack_from("<Q", d, off + 16)
        end = (off + 40 + csize + 7) & ~7
        out.append((off, end))
        off = end
    return out

cases = []  # (name, bytes, expect) expect: None = 0 or 3, else exact rc
cl = chunks(base)
assert len(cl) >= 4, "testgen capture should have several chunks, got %d" % len(cl)
cases.append(("intact", base, 0))
# truncation at every chunk boundary, mid-chunk, mid-header, in the trailer
for i, (s, e) in enumerate(cl):
    cases.append(("trunc-at-chunk%d" % i, base[:s], 3))
    cases.append(("trunc-mid-chunk%d" % i, base[:(s + e) // 2], 3))
    cases.append(("trunc-in-header%d" % i, base[:s + 20], 3))
for cut in (1, 7, 8, 31, 32, 33, 64, len(base) - 1, len(base) - 16, len(base) - 32):
    cases.append(("trunc-%d" % cut, base[:cut], 3))
# bit flips, fixed seeds; some concentrated in the preamble/header
for seed in range(150):
    rng = random.Random(seed)
    d = bytearray(base)
    nflip = 1 if seed < 100 else rng.randint(2, 16)
    for _ in range(nflip):
        pos = rng.randrange(len(d)) if seed % 5 else rng.randrange(min(len(d), 512))
        d[pos] ^= 1 << rng.randrange(8)
    cases.append(("flip-seed%d" % seed, bytes(d), None))
# byte smashes over whole ranges (chunk headers, index)
for i, (s, e) in enumerate(cl[:4]):
    d = bytearray(base); d[s:s + 40] = b"\xff" * 40
    cases.append(("smash-chunkhdr%d" % i, bytes(d), None))
d = bytearray(base); d[-32:] = bytes(32)
cases.append(("zero-trailer", bytes(d), None))
cases.append(("empty", b"", 3))
rng = random.Random(12345)
cases.append(("garbage-1k", bytes(rng.randrange(256) for _ in range(1024)), 3))
cases.append(("garbage-100k", bytes(rng.randrange(256) for _ in range(100000)), 3))
cases.append(("magic-only", base[:8], 3))
cases.append(("magic-garbage", base[:8] + bytes(rng.randrange(256) for _ in range(5000)), 3))
cases.append(("preamble-only", base[:32], 3))
d = bytearray(base); struct.pack_into("<H", d, 8, 99)
cases.append(("major99", bytes(d), 3))
d = bytearray(base); struct.pack_into("<H", d, 10, 77)
cases.append(("minor77", bytes(d), None))  # minor is accepted; header check may object

fails = 0
ran = 0
must_say = {"empty": "empty file", "garbage-1k": "bad magic",
            "garbage-100k": "bad magic",
            "major99": "unsupported capture format version 99."}
for name, data, expect in cases:
    path = os.path.join(T, "case.fb")
    with open(path, "wb") as f:
        f.write(data)
    for cmd in (["info"], ["dump", "--json"], ["info", "--json"]):
        ran += 1
        p = subprocess.run([CUCAP] + cmd + [path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        err = p.stderr.decode("utf-8", "replace")
        why = None
        if p.returncode < 0 or p.returncode >= 128:
            why = "crashed (rc=%d)" % p.returncode
        elif "Sanitizer" in err or "runtime error" in err:
            why = "sanitizer report"
        elif p.returncode not in (0, 3):
            why = "exit %d, want 0 or 3" % p.returncode
        elif expect is not None and p.returncode != expect:
            why = "exit %d, want %d" % (p.returncode, expect)
        elif p.returncode == 3:
            lines = err.splitlines()
            if len(lines) != 1 or not lines[0].startswith("cucap %s: %s: " % (cmd[0], path)):
                why = "want one error line, got %r" % err[:500]
            elif name in must_say and must_say[name] not in lines[0]:
                why = "message lacks %r: %r" % (must_say[name], lines[0])
        elif p.returncode == 0 and err.strip():
            why = "exit 0 but stderr: %r" % err[:300]
        if why is None and cmd == ["dump", "--json"]:
            try:
                import json
                for l in p.stdout.decode("utf-8").splitlines():
                    json.loads(l)
            except Exception as e:  # noqa
                why = "dump output is not JSON Lines: %s" % e
        if why:
            fails += 1
            if fails <= 30:
                print("FAIL %s: cucap %s: %s" % (name, " ".join(cmd), why))
print("%d passed, %d failed (%d cases, %d chunks)" % (ran - fails, fails, len(cases), len(cl)))
sys.exit(1 if fails else 0)
PYEOF
