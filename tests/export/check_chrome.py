#!/usr/bin/env python3
"""check_chrome.py - loads a `cucap export --format=chrome-json` trace with
Python's json module and checks it against the Trace Event Format (the
format chrome://tracing and ui.perfetto.dev import). Standard library only.

Checks: the top level is {"traceEvents": [...]} with displayTimeUnit; every
event has ph, pid, tid; X events have name, cat, numeric ts >= 0 and dur >= 0;
C events have args with numeric values; i events have a scope; M events
name processes/threads; every event's (pid, tid) thread is named; flow
events come in s/f pairs with the same id, the f not before the s and bound
to the enclosing slice ("bp":"e"); X slices of one thread nest (a slice that
starts inside another ends inside it). --expect KEY=N asserts counts of
slices, counters, instants, flows, nvtx (cat nvtx*), kernels (cat kernel).
Exit 1 with the first problem."""
import json
import sys


def fail(msg):
    print("check_chrome: FAIL: " + msg)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    expect = {}
    path = None
    while args:
        a = args.pop(0)
        if a == "--expect":
            k, v = args.pop(0).split("=")
            expect[k] = int(v)
        else:
            path = a
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("top level is not {\"traceEvents\": [...]}")
    if doc.get("displayTimeUnit") not in ("ns", "ms"):
        fail("displayTimeUnit")
    named = set()
    counts = dict(slices=0, counters=0, instants=0, flows=0, nvtx=0, kernels=0)
    starts = {}
    per_thread = {}
    for i, e in enumerate(doc["traceEvents"]):
        for k in ("ph", "pid", "tid"):
            if k not in e:
                fail("event %d lacks %s: %s" % (i, k, e))
        ph = e["ph"]
        if ph == "M":
            if e.get("name") == "thread_name":
                named.add((e["pid"], e["tid"]))
            if "name" not in e.get("args", {}) and e.get("name") in ("thread_name", "process_name"):
                fail("event %d: metadata without a name" % i)
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            fail("event %d: bad ts %r" % (i, ts))
        if ph == "X":
            if not e.get("name") or "cat" not in e:
                fail("event %d: slice without name/cat" % i)
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                fail("event %d: bad dur" % i)
            if (e["pid"], e["tid"]) not in named:
                fail("event %d: thread %s of pid %s has no thread_name" % (i, e["tid"], e["pid"]))
            per_thread.setdefault((e["pid"], e["tid"]), []).append((ts, ts + e["dur"], e["name"]))
            counts["slices"] += 1
            if e["cat"].startswith("nvtx"):
                counts["nvtx"] += 1
            if e["cat"] == "kernel":
                counts["kernels"] += 1
        elif ph == "C":
            if not e.get("name") or not e.get("args") or \
                    not all(isinstance(v, (int, float)) for v in e["args"].values()):
                fail("event %d: counter without numeric args" % i)
            counts["counters"] += 1
        elif ph == "i":
            if e.get("s") not in ("t", "p", "g"):
                fail("event %d: instant without scope" % i)
            counts["instants"] += 1
        elif ph == "s":
            starts[e["id"]] = ts
        elif ph == "f":
            if e.get("bp") != "e" or e["id"] not in starts or ts < starts[e["id"]]:
                fail("event %d: flow end without an earlier start" % i)
            counts["flows"] += 1
        else:
            fail("event %d: unexpected phase %r" % (i, ph))
    eps = 0.0015  # microsecond values are printed with 3 decimals
    for th, sl in per_thread.items():
        sl.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for b, en, name in sl:
            while stack and stack[-1][1] <= b + eps:
                stack.pop()
            if stack and en > stack[-1][1] + eps:
                fail("thread %s: slice %r [%s, %s] overlaps %r without nesting" %
                     (th, name, b, en, stack[-1][2]))
            stack.append((b, en, name))
    for k, v in expect.items():
        if counts.get(k) != v:
            fail("expected %s=%d, found %s (%s)" % (k, v, counts.get(k), counts))
    print("check_chrome: ok: %d events, %s" % (len(doc["traceEvents"]), " ".join(
        "%s=%d" % kv for kv in sorted(counts.items()))))


if __name__ == "__main__":
    main()
