#!/usr/bin/env python3
"""strip_stats.py - normalises `cucap stats` output for the golden files of
tests/integration/test_stats_cli.sh. Python 3 standard library only.

  strip_stats.py text|csv|json < OUTPUT

What varies between runs of the same program is the host time of each
driver call: in the api table the Time(%), Total, Avg, Min and Max columns
become "*" and the rows (ordered by time) are sorted by name; the JSON's
api entries keep only calls, queries, failed and host.count. Columns are
joined by one blank (their widths follow the times). The capture path keeps
its basename. Kernel and copy rows carry no times without --profile and are
kept as they are.
"""
import json
import os
import sys

TIMES = (0, 1, 3, 4, 5)  # api columns that are host times


def api_row(cells):
    return [("*" if i in TIMES else c) for i, c in enumerate(cells)]


def text(lines):
    out, section, rows = [], None, []

    def flush():
        out.extend(sorted(rows, key=lambda r: r.split(" ")[-1]))
        rows.clear()
    for line in lines:
        if not line.strip():
            flush()
            out.append("")
            continue
        if line.startswith("driver API calls"):
            section = "api"
        elif not line.startswith(" ") and not line[0].isdigit() and "Name" not in line \
                and "Kind" not in line and "(none)" not in line:
            section = line
        cells = line.split()
        if section == "api" and cells and cells[0] != "Time(%)" and len(cells) == 9:
            rows.append(" ".join(api_row(cells)))
        else:
            out.append(" ".join(cells))
    flush()
    return "\n".join(out).rstrip("\n") + "\n"


def csv_(lines):
    import csv
    import io
    out, block, rows = [], 0, []
    for rec in csv.reader(io.StringIO("".join(lines))):
        if not rec:
            out.extend(sorted(rows, key=lambda r: r[-1]))
            rows = []
            out.append([])
            block += 1
            continue
        if block == 0 and rec[0] != "Time(%)":
            rows.append(api_row(rec))
        else:
            out.append(rec)
    out.extend(sorted(rows, key=lambda r: r[-1]))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for r in out:
        w.writerow(r)
    return buf.getvalue()


def json_(text_in):
    d = json.loads(text_in)
    d["capture"] = os.path.basename(d["capture"])
    if d.get("profile"):
        d["profile"] = os.path.basename(d["profile"])
    for a in d.get("api", []):
        a["host"] = {"count": a["host"]["count"]}
        a.pop("time_pct", None)
    d["api"] = sorted(d.get("api", []), key=lambda a: a["name"])
    return json.dumps(d, indent=1, sort_keys=True) + "\n"


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "text"
    data = sys.stdin.read()
    if mode == "json":
        sys.stdout.write(json_(data))
    elif mode == "csv":
        sys.stdout.write(csv_(data.splitlines(True)))
    else:
        sys.stdout.write(text(data.splitlines()))


if __name__ == "__main__":
    main()
