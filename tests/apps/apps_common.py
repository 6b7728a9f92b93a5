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
    garbage-collector pauses and scheduling hiccups of a shared host."""

    def __init__(self, warm):
        self.warm, self.marks, self.step = warm, [], 0

    def tick(self):
        """Call once per step, after the step's work was waited for."""
        self.step += 1
        if self.step >= self.warm:
            self.marks.append(time.perf_counter())

    def report(self, name):
        d = sorted((b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:]))
        if d:
            mean = sum(d) / len(d)
            print(f"{name}_ms_per_step: {d[len(d) // 2]:.4f} (median of {len(d)} steps; "
                  f"mean {mean:.4f})", file=sys.stderr)


def checksum_torch(params):
    """Sum of all parameters in double precision, as one float."""
    return sum(float(p.detach().double().sum().cpu()) for p in params)
