#!/usr/bin/env python3
"""gpu_times_csv.py - GPU timings of a capture's launches as the table
`cucap export/diff --profile` read (launch_index,start_ns,end_ns,kernel),
from bench/libkernel_times.so's output of a replay of that capture.

Usage: gpu_times_csv.py DUMP_JSONL KERNEL_TIMES OUT_CSV
  DUMP_JSONL    `cucap dump --json --no-symbols CAPTURE` (Function and
                Launch records are used)
  KERNEL_TIMES  "name<TAB>start_ns<TAB>duration_ns" lines (CUPTI activity
                records of the replay, CUCAP_KERNEL_TIMES=file)
The replay runs the launches in recorded order; the k-th kernel of a name in
time order is the k-th launch of that kernel in the capture (CUPTI's names
are the mangled ones the Function records hold). Launches a replay ran more
than once (--loop) keep their first run. Prints how many were matched."""
import json
import sys


def main():
    dump, times, out = sys.argv[1:4]
    names = {}
    launches = []  # (launch_index, mangled name) in record order
    for line in open(dump):
        r = json.loads(line)
        b = r.get("body") or {}
        if r.get("body_type") == "Function":
            nm = b.get("name") or names.get(b.get("module"))
            names[b.get("handle")] = nm
        elif r.get("body_type") == "Launch" and b.get("kind") != "HostFunc" and not r.get("result"):
            launches.append((b.get("launch_index", 0), names.get(b.get("function"), "?")))
    runs = {}
    for line in open(times):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3:
            continue
        runs.setdefault(parts[0], []).append((int(parts[1]), int(parts[2])))
    for v in runs.values():
        v.sort()
    seen = {}
    n = 0
    with open(out, "w") as f:
        f.write("# GPU timings of %s (replay timed by libkernel_times.so)\n" % dump)
        f.write("launch_index,start_ns,end_ns,kernel\n")
        for li, nm in launches:
            k = seen.get(nm, 0)
            seen[nm] = k + 1
            r = runs.get(nm, [])
            if k >= len(r):
                continue
            start, dur = r[k]
            f.write("%d,%d,%d,%s\n" % (li, start, start + dur, nm.replace(",", ";")))
            n += 1
    print("gpu_times_csv: %d of %d launches timed" % (n, len(launches)))
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
