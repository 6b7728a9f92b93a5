#!/usr/bin/env python3
"""check_perfetto.py - checks `protoc --decode=perfetto.protos.Trace` text of a
`cucap export --format=perfetto` trace (stdin or a file) the way Perfetto's
trace processor would read it. Python 3 standard library only.

Checks: protoc knew every field (no bare field numbers = no field cucap got
wrong); every packet is on sequence 1 and the first clears incremental
state; every track has a unique uuid, parents exist; thread tracks carry a
pid/tid; events only refer to described tracks; per track, slice BEGIN/END
pairs nest and balance, END never precedes its BEGIN; timestamps of events
never decrease; counter events only on counter tracks; every terminating
flow id was started by an earlier event. With --expect KEY=N (repeatable)
asserts counts: slices, counters, instants, flows, threads, tracks,
nvtx (slices in category nvtx*), kernels (slices in category kernel).
Prints a summary line; exit 1 with the first problem."""
import re
import sys


def parse(text):
    """Nested dicts/lists from protoc's text format (only what it prints)."""
    root = {}
    stack = [root]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|\d+) \{$", line)
        if m:
            child = {}
            stack[-1].setdefault(m.group(1), []).append(child)
            stack.append(child)
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|\d+): (.*)$", line)
        if not m:
            raise SystemExit("line %d: cannot parse %r" % (lineno, raw))
        key, val = m.group(1), m.group(2)
        if val.startswith('"'):
            val = bytes(val[1:-1], "utf-8").decode("unicode_escape")
        elif re.match(r"^-?\d+$", val):
            val = int(val)
        elif re.match(r"^-?[\d.]+(e[-+]?\d+)?$", val):
            val = float(val)
        stack[-1].setdefault(key, []).append(val)
    return root


def one(d, k, default=None):
    v = d.get(k)
    return v[0] if v else default


def fail(msg):
    print("check_perfetto: FAIL: " + msg)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    expect = {}
    paths = []
    while args:
        a = args.pop(0)
        if a == "--expect":
            k, v = args.pop(0).split("=")
            expect[k] = int(v)
        else:
            paths.append(a)
    text = open(paths[0]).read() if paths else sys.stdin.read()
    for line in text.splitlines():
        if re.match(r"^\s*\d+: ", line) or re.match(r"^\s*\d+ \{", line):
            fail("unknown field (wrong field number?): " + line.strip())
    packets = parse(text).get("packet", [])
    if not packets:
        fail("no packets")
    if one(packets[0], "sequence_flags") != 1:
        fail("first packet does not clear incremental state")
    tracks = {}
    counts = dict(slices=0, counters=0, instants=0, flows=0, threads=0, tracks=0, nvtx=0,
                  kernels=0)
    open_slices = {}
    flows = set()
    last_ts = -1
    for i, p in enumerate(packets):
        if one(p, "trusted_packet_sequence_id") != 1:
            fail("packet %d: not on sequence 1" % i)
        td = one(p, "track_descriptor")
        if td is not None:
            u = one(td, "uuid")
            if u is None or u in tracks:
                fail("packet %d: track without uuid or duplicate %s" % (i, u))
            parent = one(td, "parent_uuid")
            if parent is not None and parent not in tracks:
                fail("packet %d: parent %s of track %s not described before" % (i, parent, u))
            th = one(td, "thread")
            if th is not None:
                if one(th, "pid") is None or one(th, "tid") is None:
                    fail("packet %d: thread track without pid/tid" % i)
                counts["threads"] += 1
            tracks[u] = "counter" if "counter" in td else "slices"
            counts["tracks"] += 1
            continue
        te = one(p, "track_event")
        if te is None:
            fail("packet %d: neither a track descriptor nor a track event" % i)
        ts = one(p, "timestamp")
        if ts is None or ts < last_ts:
            fail("packet %d: timestamp %s missing or decreasing (last %s)" % (i, ts, last_ts))
        last_ts = ts
        u = one(te, "track_uuid")
        if u not in tracks:
            fail("packet %d: event on undescribed track %s" % (i, u))
        typ = one(te, "type")
        st = open_slices.setdefault(u, [])
        if typ == "TYPE_COUNTER":
            if tracks[u] != "counter":
                fail("packet %d: counter value on a slice track" % i)
            if one(te, "counter_value") is None and one(te, "double_counter_value") is None:
                fail("packet %d: counter event without a value" % i)
            counts["counters"] += 1
        elif tracks[u] == "counter":
            fail("packet %d: %s on a counter track" % (i, typ))
        elif typ == "TYPE_SLICE_BEGIN":
            if not one(te, "name"):
                fail("packet %d: slice without a name" % i)
            st.append((ts, one(te, "name")))
            counts["slices"] += 1
            cats = te.get("categories", [])
            if any(c.startswith("nvtx") for c in cats):
                counts["nvtx"] += 1
            if "kernel" in cats:
                counts["kernels"] += 1
            for f in te.get("flow_ids", []):
                flows.add(f)
            for f in te.get("terminating_flow_ids", []):
                if f not in flows:
                    fail("packet %d: flow %s terminates before it started" % (i, f))
                counts["flows"] += 1
        elif typ == "TYPE_SLICE_END":
            if not st:
                fail("packet %d: END without BEGIN on track %s" % (i, u))
            b_ts, name = st.pop()
            if ts < b_ts:
                fail("packet %d: slice %r ends before it begins" % (i, name))
        elif typ == "TYPE_INSTANT":
            counts["instants"] += 1
        else:
            fail("packet %d: event type %s" % (i, typ))
    for u, st in open_slices.items():
        if st:
            fail("track %s: %d slices never end (first %r)" % (u, len(st), st[0][1]))
    for k, v in expect.items():
        if counts.get(k) != v:
            fail("expected %s=%d, found %s (%s)" % (k, v, counts.get(k), counts))
    print("check_perfetto: ok: %d packets, %s" % (len(packets), " ".join(
        "%s=%d" % kv for kv in sorted(counts.items()))))


if __name__ == "__main__":
    main()
