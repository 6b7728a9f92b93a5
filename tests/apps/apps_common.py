"""apps_common.py - shared pieces of the Python test programs in tests/apps/.

Every program prints its results (losses, checksums) on stdout, rounded so
that the program's own run-to-run noise stays out of the comparison, and its
timing on stderr, so stdout is identical natively and under `cucap record`.
Exit code 77 means "cannot run here" (no GPU, package missing): a skip.
"""
import os
import sys
import time

SKIP = 77


def need(module_name):
    """Imports a package or exits 77 (skip) with a message."""
    try:
        return __import__(module_name)
    except Exception as e:  # ImportError, or a broken CUDA plugin
        print(f"{os.path.basename(sys.argv[0])}: {module_name} unavailable: {e}",
              file=sys.stderr)
        sys.exit(SKIP)


class StepTimer:
    """Per-step wall times after `warm` steps; the median is robust to the
    garbage-collector pauses and scheduling hiccups of a shared host.

    Besides the wall time per step it reports the calling thread's CPU time
    per step and, when the loop calls enqueued() before it waits for the
    step's result, the wall time from a step's start to that point (the
    host's cost of issuing the step). A recorder's cost shows in the step
    time only as far as it lengthens the host's part: these two tell how
    far the loop is host-bound (issue 10's breakdown)."""

    def __init__(self, warm):
        self.warm, self.marks, self.cpu, self.enq, self.step = warm, [], [], [], 0
        self.last = None
        self.sampler = None
        if os.environ.get("PCSAMP_WINDOW") == "1":  # bench/pc_sampler.c is preloaded
            import ctypes
            try:
                self.sampler = ctypes.CDLL(None)
                self.sampler.pcsamp_stop.argtypes = [ctypes.c_long]
            except (OSError, AttributeError):
                self.sampler = None

    def enqueued(self):
        """Optional: call once per step after its work was issued, before
        waiting for it."""
        if self.last is not None:
            self.enq.append(time.perf_counter() - self.last)

    def tick(self):
        """Call once per step, after the step's work was waited for."""
        self.step += 1
        if self.step >= self.warm:
            if self.sampler is not None and self.step == self.warm:
                self.sampler.pcsamp_start()
            self.last = time.perf_counter()
            self.marks.append(self.last)
            self.cpu.append(time.thread_time())

    def report(self, name):
        if self.sampler is not None:
            self.sampler.pcsamp_stop(max(len(self.marks) - 1, 0))
        def med(v):
            v = sorted(v)
            return v[len(v) // 2]
        d = [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]
        if d:
            mean = sum(d) / len(d)
            print(f"{name}_ms_per_step: {med(d):.4f} (median of {len(d)} steps; "
                  f"mean {mean:.4f})", file=sys.stderr)
            c = [(b - a) * 1e3 for a, b in zip(self.cpu, self.cpu[1:])]
            print(f"{name}_cpu_ms_per_step: {med(c):.4f} (the main thread's CPU time)",
                  file=sys.stderr)
        if self.enq:
            print(f"{name}_enqueue_ms_per_step: {med([e * 1e3 for e in self.enq]):.4f} "
                  "(step start to its work issued)", file=sys.stderr)


def checksum_torch(params):
    """Sum of all parameters in double precision, as one float."""
    return sum(float(p.detach().double().sum().cpu()) for p in params)
