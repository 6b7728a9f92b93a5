#!/usr/bin/env python3
"""strip_analyze.py - normalise `cucap analyze --json` for golden comparison.
Python 3 standard library only.

  strip_analyze.py [--exact] [FILE]   reads FILE (or stdin), prints JSON

--exact (synthetic captures, whose host times are exact): everything is kept;
the output is only re-indented so that golden diffs are readable.
--fixed (a fixed capture file): everything but the callsites' frames, whose
symbolization depends on the object files of the machine.
Default (captures recorded from programs, whose times vary run to run):
  * the capture's record count (it includes Callstack records, which depend
    on how the program was compiled);
  * every number with a time-like unit (ns, /s, %, GB/s), recoverable_ns/_pct,
    window start/end, capture duration_ns are dropped;
  * severity, title, rank are dropped and findings are sorted by id (they
    follow from the times);
  * callsites keep their count but not time_ns or frames (offsets depend on
    the build); the list is sorted by count.
What stays is what the analysis counted: finding ids, counts, the window's
launches and reason, the link assumption, caveats.
"""
import json
import sys

TIME_UNITS = {"ns", "/s", "%", "GB/s"}


def strip(d):
    cap = d.get("capture", {})
    cap.pop("duration_ns", None)
    cap.pop("records", None)  # Callstack/ModuleMap records vary with the build
    win = d.get("window", {})
    for k in ("start_ns", "end_ns"):
        win.pop(k, None)
    out = []
    for f in d.get("findings", []):
        units = f.get("units", {})
        nums = {k: v for k, v in f.get("numbers", {}).items()
                if units.get(k) not in TIME_UNITS}
        sites = sorted(s.get("count", 0) for s in f.get("callsites", []))
        out.append({"id": f["id"], "estimated": f.get("estimated"),
                    "numbers": nums, "callsite_counts": sites})
    d["findings"] = sorted(out, key=lambda f: f["id"])
    return d


def main(argv):
    exact = "--exact" in argv
    fixed = "--fixed" in argv
    files = [a for a in argv[1:] if not a.startswith("--")]
    src = open(files[0]) if files else sys.stdin
    d = json.load(src)
    if fixed:
        for f in d.get("findings", []):
            for s in f.get("callsites", []):
                s.pop("frames", None)
                s.pop("first_app_frame", None)
    elif not exact:
        d = strip(d)
    json.dump(d, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
