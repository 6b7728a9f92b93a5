"""apps_common.py - shared pieces of the Python test programs in tests/apps/.

Every program prints its results (losses, checksums) on stdout, rounded so
that the program's own run-to-run noise stays out of the comparison, and its
timing on stderr, so stdout is identical natively and under `cucap record`.
Exit code 77 means "cannot run here" (no GPU, package missing): a skip.
"""
import os
import select
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
    far the loop is host-bound (issue 10's breakdown).

    Taking turns (bench/gpu_bench.sh): with BENCH_TURNS=IN:OUT:first|second
    two copies of a program run at once and take one step each in turn, a
    token passed through the FIFOs IN and OUT after every step; a step is
    timed from the moment its process holds the token. Both copies then see
    the host in the same state, step by step, and their ratio leaves out the
    host's slow phases that move whole sequential runs (docs/bench-log.md,
    runs G5-G8). Turns start at the first tick (the first step, untimed warm-up,
    runs in both at once): the "first" copy passes the token there, the
    "second" waits for it. The token comes back within BENCH_TURNS_TIMEOUT
    seconds (120) or the copy goes on alone and says so on stderr."""

    def __init__(self, warm):
        self.warm, self.dur, self.cpu, self.enq, self.step = warm, [], [], [], 0
        self.start = self.cpu0 = None
        self.sampler = None
        if os.environ.get("PCSAMP_WINDOW") == "1":  # bench/pc_sampler.c is preloaded
            import ctypes
            try:
                self.sampler = ctypes.CDLL(None)
                self.sampler.pcsamp_stop.argtypes = [ctypes.c_long]
            except (OSError, AttributeError):
                self.sampler = None
        self.turns = None
        spec = os.environ.get("BENCH_TURNS", "")
        if spec:
            tin, tout, role = spec.rsplit(":", 2)
            # O_RDWR: opening never blocks and a write never meets a FIFO
            # without a reader (the peer may have exited)
            self.turns = (os.open(tin, os.O_RDWR), os.open(tout, os.O_RDWR), role)
            self.turn_wait = float(os.environ.get("BENCH_TURNS_TIMEOUT", "120"))

    def _take_turn(self):
        tin, tout, role = self.turns
        if self.step > 1 or role == "first":
            os.write(tout, b"t")
        if not select.select([tin], [], [], self.turn_wait)[0]:
            print(f"StepTimer: no turn back in {self.turn_wait:.0f} s: running alone",
                  file=sys.stderr)
            self.turns = None
            return
        os.read(tin, 1)

    def enqueued(self):
        """Optional: call once per step after its work was issued, before
        waiting for it."""
        if self.start is not None:
            self.enq.append(time.perf_counter() - self.start)

    def tick(self):
        """Call once per step, after the step's work was waited for."""
        end, cpu = time.perf_counter(), time.thread_time()
        self.step += 1
        if self.start is not None:
            self.dur.append(end - self.start)
            self.cpu.append(cpu - self.cpu0)
        if self.turns is not None:
            self._take_turn()
        if self.step >= self.warm:
            if self.sampler is not None and self.step == self.warm:
                self.sampler.pcsamp_start()
            self.start, self.cpu0 = time.perf_counter(), time.thread_time()

    def report(self, name):
        if self.sampler is not None:
            self.sampler.pcsamp_stop(len(self.dur))
        if self.turns is not None:
            os.write(self.turns[1], b"t")  # the peer's last step is waiting for it
        def med(v):
            v = sorted(v)
            return v[len(v) // 2]
        d = [x * 1e3 for x in self.dur]
        if d:
            mean = sum(d) / len(d)
            print(f"{name}_ms_per_step: {med(d):.4f} (median of {len(d)} steps; "
                  f"mean {mean:.4f})", file=sys.stderr)
            print(f"{name}_cpu_ms_per_step: {med([c * 1e3 for c in self.cpu]):.4f} "
                  "(the main thread's CPU time)", file=sys.stderr)
            if self.turns is not None:
                print(f"{name}_turn_steps_ms: {','.join(f'{x:.3f}' for x in d)}",
                      file=sys.stderr)
        if self.enq:
            print(f"{name}_enqueue_ms_per_step: {med([e * 1e3 for e in self.enq]):.4f} "
                  "(step start to its work issued)", file=sys.stderr)


def checksum_torch(params):
    """Sum of all parameters in double precision, as one float."""
    return sum(float(p.detach().double().sum().cpu()) for p in params)
