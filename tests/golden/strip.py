#!/usr/bin/env python3
"""strip.py - normalise `cucap dump --json` output for golden comparison. Python 3 standard library only.

Reads JSON Lines on stdin (or a file), writes JSON Lines on stdout with
everything that varies between runs removed or made canonical:
  * the header line, Callstack and ModuleMap records (addresses, paths,
    build ids) and the file index are dropped;
  * per record: index, tid, t_enter, t_exit, args (scalar arguments include
    pointers), stack (ids depend on unwinding) and callstack (the symbolized
    frames `cucap dump` adds: offsets depend on the build) are dropped;
  * handle/address fields (handle, address, dst, src, function, module,
    stream, event, graph, exec, ...) become canonical names "@1", "@2", ...
    in order of first appearance, so relations survive (a Launch's function
    equals its Function's handle) while values do not; a module or library
    handle unloaded is forgotten with its functions (a new one of the same
    value is a new name);
  * Launch.args (contain device pointers) become their byte length,
    args_blob hashes are dropped; Event.elapsed_ms is dropped; Module.path
    keeps its basename; MemRegion.address becomes canonical.
Hashes of data the apps compute deterministically (module images, memcpy
payloads, snapshot contents) are kept: they are the point of the check.

--loose (multi-threaded apps): record order is not stable, so every handle
becomes "@", seq and launch_index are dropped and the lines are sorted.
"""
import json
import sys

HANDLE_KEYS = {
    "handle", "address", "dst", "src", "function", "module", "library", "stream", "event",
    "graph", "exec", "host_fn", "context", "pool", "end_event", "host_address",
    "child_graph", "src_context", "dst_context", "src_array", "dst_array",
    "value_ptr",
}
DROP_RECORD_KEYS = {"index", "tid", "t_enter", "t_exit", "args", "stack", "context",
                    "callstack"}
DROP_BODIES = {"Callstack", "ModuleMap", "BlobPiece"}


class Canon:
    def __init__(self, loose):
        self.loose = loose
        self.ids = {}
        self.fn_mod = {}  # raw function handle -> raw module handle

    def name(self, v):
        if not isinstance(v, int) or v == 0:
            return v
        if self.loose:
            return "@"
        if v not in self.ids:
            self.ids[v] = "@%d" % (len(self.ids) + 1)
        return self.ids[v]

    def forget_module(self, m):
        """An unloaded module or library, its functions and the functions
        got from those: the allocator may hand their values out again (or
        not, under ASan's quarantine or TSan's allocator); a later one gets
        a new name."""
        gone = {m}
        for _ in range(2):
            gone |= {f for f, mod in self.fn_mod.items() if mod in gone}
        for v in gone:
            self.ids.pop(v, None)
            self.fn_mod.pop(v, None)


def walk(obj, canon, parent=None):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in HANDLE_KEYS:
                out[k] = canon.name(v)
            elif k == "dependencies" and isinstance(v, list):
                out[k] = [canon.name(x) for x in v]
            elif k == "args" and parent == "launch" and isinstance(v, str):
                out[k] = "<%d bytes>" % (len(v) // 2)
            elif k == "args" and parent == "launch" and isinstance(v, list):
                out[k] = "<%d bytes>" % len(v)
            elif k == "args_blob":
                continue
            elif k == "elapsed_ms":
                continue
            elif k == "launch_index" and canon.loose:
                continue
            elif k == "path" and isinstance(v, str):
                out[k] = v.rsplit("/", 1)[-1]
            else:
                sub = "launch" if k == "launch" else parent
                out[k] = walk(v, canon, sub)
        return out
    if isinstance(obj, list):
        return [walk(x, canon, parent) for x in obj]
    return obj


def strip(lines, loose=False):
    canon = Canon(loose)
    out = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # summary/diagnostic lines
        if not isinstance(rec, dict) or "header" in rec or "index_chunk" in rec:
            continue
        if rec.get("body_type") in DROP_BODIES:
            continue
        if "seq" not in rec and "body_type" not in rec and "call" not in rec:
            continue
        for k in DROP_RECORD_KEYS:
            rec.pop(k, None)
        if loose:
            rec.pop("seq", None)
        body = rec.get("body")
        if body is not None:
            parent = "launch" if rec.get("body_type") == "Launch" else None
            if rec.get("body_type") == "Function" and body.get("module") != body.get("handle"):
                # (a KernelFunction equal to its CUkernel, as the mock's are,
                # keeps its kernel's module)
                canon.fn_mod[body.get("handle")] = body.get("module")
            rec["body"] = walk(body, canon, parent)
            if rec.get("body_type") == "Module" and body.get("op") == "Unload":
                canon.forget_module(body.get("handle"))
        out.append(json.dumps(rec, sort_keys=False, separators=(",", ":")))
    if loose:
        out.sort()
    return out


def main(argv):
    loose = "--loose" in argv
    files = [a for a in argv[1:] if not a.startswith("--")]
    src = open(files[0]) if files else sys.stdin
    for line in strip(src, loose):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
