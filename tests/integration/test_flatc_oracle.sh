#!/usr/bin/env bash
# test_flatc_oracle.sh - our FlatBuffers builder + JSON printer against flatc.
# For every Body member (a Record with every field set), a FileHeader and a
# ChunkIndex, fb_oracle_gen writes the size-prefixed buffer and our JSON;
# flatc converts the buffer to JSON and both must be equal as JSON values.
# Also checks schema evolution: flatc --conform against schema/released/.
# Skips (77) without flatc.
set -euo pipefail
: "${CUCAP_SOURCE_DIR:?}" "${CUCAP_BUILD_DIR:?}"
if [ -z "${FLATC:-}" ] || [ ! -x "$FLATC" ]; then
  echo "SKIP: FLATC not set"; exit 77
fi
PY=${PYTHON:-python3}
GEN="$CUCAP_BUILD_DIR/tests/oracle/fb_oracle_gen"
[ -x "$GEN" ] || { echo "FAIL: $GEN not built"; exit 1; }
SCHEMA="$CUCAP_SOURCE_DIR/schema/cucap.fbs"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/cucap-oracle.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/ours" "$TMP/flatc"

"$GEN" "$TMP/ours"
fail=0; n=0
for bin in "$TMP"/ours/*.bin; do
  name=$(basename "$bin" .bin)
  root=$(cat "$TMP/ours/$name.root")
  if ! "$FLATC" --json --strict-json --raw-binary --size-prefixed \
      --root-type "$root" -o "$TMP/flatc" "$SCHEMA" -- "$bin" 2>"$TMP/err"; then
    echo "FAIL: flatc rejected $name: $(cat "$TMP/err")"; fail=1; continue
  fi
  if ! "$PY" - "$TMP/flatc/$name.json" "$TMP/ours/$name.json" <<'PYEOF'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
def diff(x, y, path):
    if type(x) != type(y) and not (isinstance(x, (int, float)) and isinstance(y, (int, float))):
        print("  %s: flatc %r ours %r" % (path, x, y)); return 1
    if isinstance(x, dict):
        bad = 0
        for k in sorted(set(x) | set(y)):
            if k not in x or k not in y:
                print("  %s.%s only in %s" % (path, k, "ours" if k in y else "flatc")); bad += 1
            else:
                bad += diff(x[k], y[k], path + "." + k)
        return bad
    if isinstance(x, list):
        if len(x) != len(y):
            print("  %s: length %d vs %d" % (path, len(x), len(y))); return 1
        return sum(diff(p, q, "%s[%d]" % (path, i)) for i, (p, q) in enumerate(zip(x, y)))
    if x != y:
        print("  %s: flatc %r ours %r" % (path, x, y)); return 1
    return 0
sys.exit(1 if diff(a, b, "$") else 0)
PYEOF
  then
    echo "FAIL: JSON differs for $name"; fail=1
  fi
  n=$((n + 1))
done
echo "compared $n buffers with flatc"
[ "$n" -ge 23 ] || { echo "FAIL: expected >= 23 buffers"; fail=1; }

# Schema evolution: the current schema must conform to every released one.
# flatc 2.0.8: `flatc --conform BASE.fbs NEW.fbs` checks NEW against BASE.
for rel in "$CUCAP_SOURCE_DIR"/schema/released/*.fbs; do
  if ! "$FLATC" --conform "$rel" "$SCHEMA"; then
    echo "FAIL: schema/cucap.fbs does not conform to $(basename "$rel")"; fail=1
  fi
done
[ $fail = 0 ] && echo "ok"
exit $fail
