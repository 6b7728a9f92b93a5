#!/usr/bin/env python3
"""pc_report.py - tables from bench/pc_sampler.c's samples (issue 10's
breakdown of a recorded training step).

usage: pc_report.py [--steps N] [--top K] [--runs] LABEL=FILE[,FILE...] ...

Each LABEL names a set of sample files (e.g. native=a.1,a.2 rec=b.1,b.2).
The sampler samples the main thread's wall clock at a fixed rate, so a
sample is 1/hz seconds of that thread's time. Files written with
PCSAMP_WINDOW=1 name the steps they cover, and the tables are in ms per
step; otherwise --steps N (steps per run) does, else they are in ms per run.
--runs adds one line per file (to tell a slow run from a fast one).
Printed per label:
  module table: exclusive time per shared object (where the PC was);
  libcucap: exclusive time per function (ELF .symtab/.dynsym, read here
    without binutils), and "recorder inclusive": samples whose PC is in
    libcucap, or in libc/the vDSO called straight from libcucap (the return
    address at the stack pointer or the first frame-pointer frame is in
    libcucap: memcpy, clock_gettime, pthread locks on its behalf).
  threads (files written with PCSAMP_THREADS=all): time per step of each
    thread name (PyTorch's autograd thread is pt_autograd_#: digits in a
    name become '#', so numbered threads group across runs), its largest
    modules and its recorder-inclusive time.
A second label is compared module by module with the first.
Symbols are read from the module paths the samples name: run it on the
machine that took them (elsewhere the same path may hold another build of
libc or libtorch, and its names would be wrong), or give --syms for copies.
"""
import argparse
import bisect
import collections
import os
import re
import struct
import sys


def elf_funcs(path):
    """[(start, end, name)] sorted, from .symtab (else .dynsym), file offsets
    as virtual addresses of the ELF (p_vaddr based)."""
    try:
        data = open(path, "rb").read()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        o = shoff + i * shentsize
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, o)
        secs.append((typ, off, size, link, entsize))
    out = []
    for want in (2, 11):  # SHT_SYMTAB, then SHT_DYNSYM
        for typ, off, size, link, entsize in secs:
            if typ != want or not entsize:
                continue
            stroff = secs[link][1]
            for k in range(size // entsize):
                nm, info, other, shndx, value, sz = struct.unpack_from(
                    "<IBBHQQ", data, off + k * entsize)
                if (info & 0xF) != 2 or not value:  # STT_FUNC
                    continue
                e = data.index(b"\0", stroff + nm)
                out.append((value, value + max(sz, 1), data[stroff + nm:e].decode(errors="replace")))
        if out:
            break
    out.sort()
    return out


class Modules:
    def __init__(self):
        self.ranges = []  # (lo, hi, path, base)
        self.syms = {}

    def add(self, path, base, lo, hi):
        self.ranges.append((lo, hi, path, base))

    def find(self, a):
        for lo, hi, path, base in self.ranges:
            if lo <= a < hi:
                return path, base
        return None, 0

    def func(self, path, base, a, syms_for):
        if path not in self.syms:
            self.syms[path] = syms_for(path)
        fs = self.syms[path]
        v = a - base
        i = bisect.bisect_right(fs, (v, float("inf"), "")) - 1
        if i >= 0 and fs[i][0] <= v < fs[i][1]:
            return fs[i][2]
        return "?+%x" % v


# Libraries whose samples count as the recorder's when libcucap called them
HELPERS = ("libc.so", "linux-vdso", "libpthread", "libzstd")


def short(path):
    b = os.path.basename(path or "?")
    return b.split(".so")[0] + (".so" if ".so" in b else "")


def load(files, syms_for):
    funcs = collections.Counter()
    per_run = []
    steps = 0
    thr = collections.Counter()          # thread name -> samples
    thr_mods = collections.defaultdict(collections.Counter)
    thr_incl = collections.Counter()
    mods_by_module = collections.Counter()
    cucap_self = collections.Counter()
    cucap_callee = collections.Counter()
    incl = 0
    n = 0
    hz = 0
    for fn in files:
        mods = Modules()
        run = collections.Counter()
        names = {}
        lines = open(fn).read().splitlines()
        for line in lines:
            if line.startswith("T "):
                p = line.split()
                # numbered names (cuda00001400006, a pool's workers) group
                # across runs and threads as one row: cuda#
                names[p[1]] = re.sub(r"\d+", "#", p[2]) if len(p) > 2 else "?"
        for line in lines:
            if line.startswith("# pcsamp"):
                hz = int(line.split("hz=")[1].split()[0])
                st = int(line.split("steps=")[1].split()[0]) if "steps=" in line else 0
                steps += st
                run["#steps"] = st
            elif line.startswith("M "):
                p = line.split()
                mods.add(p[1], int(p[2], 16), int(p[3], 16), int(p[4], 16))
            elif line.startswith("S "):
                p = line.split()
                addrs = [int(x, 16) for x in p[3:]]
                if not addrs:
                    continue
                tname = "main" if p[2] == "1" else names.get(p[1], "?")
                path, base = mods.find(addrs[0])
                m = short(path) if path else "[unknown]"
                caller = None  # the libcucap return address a libc/vDSO sample is under
                if m.startswith(HELPERS):
                    for a in addrs[1:3]:
                        p2, b2 = mods.find(a)
                        if p2 and short(p2).startswith("libcucap"):
                            caller = (p2, b2, a)
                            break
                in_rec = m.startswith("libcucap") or caller is not None
                thr[tname] += 1
                thr_mods[tname][m] += 1
                thr_incl[tname] += in_rec
                if p[2] != "1":
                    continue
                n += 1
                incl += in_rec
                mods_by_module[m] += 1
                run[m] += 1
                run["#n"] += 1
                fname = mods.func(path, base, addrs[0], syms_for) if path else "?"
                funcs[m + ":" + fname] += 1
                if m.startswith("libcucap"):
                    cucap_self[fname] += 1
                elif caller:
                    cucap_callee["%s <- %s" % (fname, mods.func(*caller, syms_for))] += 1
        per_run.append((fn, run))
    return dict(n=n, hz=hz or 1, mods=mods_by_module, self=cucap_self, funcs=funcs,
                thr=thr, thr_mods=thr_mods, thr_incl=thr_incl,
                callee=cucap_callee, incl=incl, runs=len(files), steps=steps,
                per_run=per_run)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--runs", action="store_true")
    ap.add_argument("--syms", action="append", default=[],
                    help="BASENAME=PATH: read a module's symbols from PATH instead")
    ap.add_argument("sets", nargs="+")
    a = ap.parse_args()
    over = dict(s.split("=", 1) for s in a.syms)

    def syms_for(path):
        return elf_funcs(over.get(os.path.basename(path), path))

    sets = []
    for s in a.sets:
        label, files = s.split("=", 1)
        fl = [f for f in files.split(",") if f and os.path.exists(f)]
        if not fl:
            print("%s: no sample files" % label)
            continue
        sets.append((label, load(sorted(fl), syms_for)))
    if not sets:
        return 1
    unit = "ms/step" if a.steps or all(d["steps"] for _, d in sets) else "ms/run"

    def ms(count, d):
        per = d["steps"] or d["runs"] * (a.steps or 1)
        return 1e3 * count / d["hz"] / per

    for label, d in sets:
        print("== %s: %d runs, %d samples at %d Hz, main thread %.3f %s" % (
            label, d["runs"], d["n"], d["hz"], ms(d["n"], d), unit))
        print("  recorder inclusive (libcucap + libc/vDSO it called): %.3f %s (%.1f%%)" % (
            ms(d["incl"], d), unit, 100.0 * d["incl"] / max(d["n"], 1)))
        for m, c in d["mods"].most_common(a.top):
            print("  %-34s %8.3f %s %5.1f%%" % (m, ms(c, d), unit, 100.0 * c / max(d["n"], 1)))
        if a.runs:
            print("  -- per run: ms/step total, then the largest modules")
            for fn, run in d["per_run"]:
                st = run["#steps"] or a.steps or 1
                mods = [(c, m) for m, c in run.items() if not m.startswith("#")]
                mods.sort(reverse=True)
                print("  %-28s %7.3f  %s" % (os.path.basename(fn), 1e3 * run["#n"] / d["hz"] / st,
                      " ".join("%s=%.3f" % (m, 1e3 * c / d["hz"] / st) for c, m in mods[:6])))
        if len(d["thr"]) > 1:
            print("  recorder inclusive, all threads: %.3f %s" % (
                ms(sum(d["thr_incl"].values()), d), unit))
            print("  -- threads (ms/step each; recorder-inclusive; largest modules)")
            for t, c in d["thr"].most_common(a.top):
                mods = d["thr_mods"][t].most_common(4)
                print("  %-20s %8.3f  rec %6.3f  %s" % (t[:20], ms(c, d), ms(d["thr_incl"][t], d),
                      " ".join("%s=%.3f" % (m, ms(x, d)) for m, x in mods)))
        print("  -- functions, all modules (exclusive)")
        for f, c in d["funcs"].most_common(a.top):
            print("  %-60s %8.4f %s" % (f[:60], ms(c, d), unit))
        if d["self"]:
            print("  -- libcucap functions (exclusive)")
            for f, c in d["self"].most_common(a.top):
                print("  %-60s %8.4f %s" % (f[:60], ms(c, d), unit))
        if d["callee"]:
            print("  -- libc/vDSO called from libcucap")
            for f, c in d["callee"].most_common(a.top // 2):
                print("  %-60s %8.4f %s" % (f[:60], ms(c, d), unit))
    if len(sets) > 1:
        (l0, d0) = sets[0]
        for l1, d1 in sets[1:]:
            print("== %s minus %s, per module (%s)" % (l1, l0, unit))
            keys = set(d0["mods"]) | set(d1["mods"])
            rows = sorted(((ms(d1["mods"][k], d1) - ms(d0["mods"][k], d0), k) for k in keys),
                          reverse=True)
            print("  %-34s %+8.3f" % ("TOTAL", ms(d1["n"], d1) - ms(d0["n"], d0)))
            for t in sorted(set(d0["thr"]) | set(d1["thr"])):
                if t != "main" and (d0["thr"][t] or d1["thr"][t]):
                    print("  %-34s %+8.3f  (%.3f -> %.3f)" % (
                        "thread " + t, ms(d1["thr"][t], d1) - ms(d0["thr"][t], d0),
                        ms(d0["thr"][t], d0), ms(d1["thr"][t], d1)))
            for diff, k in rows[:a.top]:
                if abs(diff) >= 0.005:
                    print("  %-34s %+8.3f  (%.3f -> %.3f)" % (
                        k, diff, ms(d0["mods"][k], d0), ms(d1["mods"][k], d1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
