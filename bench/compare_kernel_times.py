#!/usr/bin/env python3
"""compare_kernel_times.py - per-kernel GPU durations, replay vs native. Python 3 standard library only.

usage: compare_kernel_times.py NATIVE.tsv REPLAY.tsv [--tolerance 0.02]
                               [--bench NAME] [--top N]

Inputs are what bench/kernel_times.c (a CUPTI injection library) writes, one
kernel a line: "name<TAB>start_ns<TAB>duration_ns". CUPTI hands buffers over
in completion order, so each file is sorted by start time first; then the
k-th launch of kernel X in NATIVE is paired with the k-th launch of X in
REPLAY (name + occurrence index). Kernels only one side ran are counted, not
paired. For every pair the ratio replay/native is taken; printed are the
number of pairs, the median, p10 and p90 of the ratios, and the ratio of the
summed durations, plus the kernels (by name) whose median ratio is furthest
from 1.

--bench NAME also prints one machine-greppable line (bench/gpu_bench.sh):
  BENCH NAME <median> ratio target=1.00+-TOL PASS|FAIL
  BENCH NAME - FAIL (reason)          when nothing could be compared

Exit: 0 median within 1 +- tolerance, 1 outside it or nothing to compare,
2 usage / unreadable input.
"""
import argparse
import sys
from collections import defaultdict


def load(path):
    """Returns {name: [duration_ns, ...] in start order} and the line count.
    Malformed lines are skipped and counted (a killed process may leave a
    partial last line)."""
    rows = []
    bad = 0
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.rsplit("\t", 2)  # a name could hold a tab; numbers not
            try:
                name, start, dur = parts[0], int(parts[1]), int(parts[2])
            except (IndexError, ValueError):
                bad += 1
                continue
            rows.append((start, name, dur))
    rows.sort()
    by_name = defaultdict(list)
    for _, name, dur in rows:
        by_name[name].append(dur)
    return by_name, len(rows), bad


def quantile(sorted_vals, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_vals:
        return float("nan")
    pos = (len(sorted_vals) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def short(name, width=70):
    return name if len(name) <= width else name[: width - 3] + "..."


def main(argv):
    ap = argparse.ArgumentParser(
        description="Pairs kernels by name and occurrence index and compares "
        "GPU durations replay/native.")
    ap.add_argument("native")
    ap.add_argument("replay")
    ap.add_argument("--tolerance", type=float, default=0.02,
                    help="PASS when |median - 1| <= this (default 0.02)")
    ap.add_argument("--bench", metavar="NAME",
                    help="also print a 'BENCH NAME ...' line")
    ap.add_argument("--top", type=int, default=5,
                    help="kernels furthest from 1 to list (default 5)")
    args = ap.parse_args(argv)

    def fail(reason, code):
        print(f"compare_kernel_times: {reason}", file=sys.stderr)
        if args.bench:
            print(f"BENCH {args.bench} - FAIL ({reason})")
        return code

    try:
        nat, n_nat, bad_nat = load(args.native)
        rep, n_rep, bad_rep = load(args.replay)
    except OSError as e:
        return fail(f"cannot read {e.filename}: {e.strerror}", 2)

    ratios = []
    per_name = {}
    sum_nat = sum_rep = 0
    unmatched_nat = unmatched_rep = zero = 0
    for name in sorted(set(nat) | set(rep)):
        a, b = nat.get(name, []), rep.get(name, [])
        k = min(len(a), len(b))
        unmatched_nat += len(a) - k
        unmatched_rep += len(b) - k
        rs = []
        for i in range(k):
            if a[i] <= 0:  # CUPTI should never report 0 ns; guard anyway
                zero += 1
                continue
            rs.append(b[i] / a[i])
            sum_nat += a[i]
            sum_rep += b[i]
        if rs:
            ratios.extend(rs)
            rs.sort()
            per_name[name] = (len(rs), quantile(rs, 0.5))

    print(f"native: {n_nat} kernels ({len(nat)} names, {bad_nat} bad lines) "
          f"from {args.native}")
    print(f"replay: {n_rep} kernels ({len(rep)} names, {bad_rep} bad lines) "
          f"from {args.replay}")
    print(f"matched: {len(ratios)}  native-only: {unmatched_nat}  "
          f"replay-only: {unmatched_rep}"
          + (f"  zero-duration skipped: {zero}" if zero else ""))
    if not ratios:
        return fail("no kernel matched by name and occurrence", 1)
    ratios.sort()
    med = quantile(ratios, 0.5)
    p10, p90 = quantile(ratios, 0.1), quantile(ratios, 0.9)
    print(f"ratio replay/native: median {med:.4f}  p10 {p10:.4f}  "
          f"p90 {p90:.4f}  min {ratios[0]:.4f}  max {ratios[-1]:.4f}")
    print(f"summed GPU time: native {sum_nat / 1e6:.3f} ms  replay "
          f"{sum_rep / 1e6:.3f} ms  ratio {sum_rep / sum_nat:.4f}")
    if args.top > 0 and per_name:
        worst = sorted(per_name.items(), key=lambda kv: -abs(kv[1][1] - 1.0))
        print(f"furthest from 1 (median per kernel name, top {args.top}):")
        print(f"  {'count':>7}  {'median':>8}  name")
        for name, (cnt, m) in worst[: args.top]:
            print(f"  {cnt:>7}  {m:>8.4f}  {short(name)}")
    ok = abs(med - 1.0) <= args.tolerance
    if args.bench:
        print(f"BENCH {args.bench} {med:.4f} ratio "
              f"target=1.00+-{args.tolerance:g} {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
