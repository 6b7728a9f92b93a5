/* cucap_recorder.h - the in-app recorder runtime.
 *
 * The recorder is armed when libcucap.so is loaded with CUCAP_OUTPUT set
 * (cucap_rec_start: parses CUCAP_OPTIONS, touches no file). The capture file
 * is created lazily, at the first intercepted CUDA call of the process
 * (cucap_rec_activate), so the many processes that inherit LD_PRELOAD and
 * CUCAP_OUTPUT but never call CUDA (compilers, shells, tools) never touch it.
 * Path: `%p` -> pid, `%q{VAR}` -> value of env VAR; a process whose pid is
 * not CUCAP_ROOT_PID (set by `cucap record` to the pid of the program it
 * starts) writes to the path with `.<pid>` inserted before the extension
 * unless the pattern contains `%p` (cucap_rec_output_path). It then writes
 * the FileHeader and appends one Record per intercepted driver call. Records
 * appear in the file in global sequence-number order. It closes the writer at
 * exit (atexit + destructor) and on fatal signals (flush, then re-raise with
 * the app's original disposition).
 *
 * fork(): a child forked while the recorder is active (or activating) is
 * not recorded: its recorder goes inert (pure pass-through; logged once at
 * info level at its first CUDA call) and it never touches the parent's
 * writer, file descriptor or lock - no flush, close or index at its exit,
 * its atexit/destructor/signal handlers do nothing. A child forked while
 * merely armed stays armed (it is like any other process: its first CUDA
 * call creates its own `.<pid>` file).
 *
 * Never exits, aborts or prints to stdout; when the output cannot be created
 * it logs once and cucap_rec_active() stays 0 (every call passes through).
 *
 * Thread-safe unless noted. Pointers returned here are owned by the recorder
 * and stay valid until process exit (builders: see cucap_rec_builder). */
#ifndef CUCAP_RECORDER_H
#define CUCAP_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_format.h"
#include "cucap_status.h"
#include "cucap_fb_builder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cucap_rec_snapshot_mode {
  CUCAP_REC_SNAPSHOT_NONE = 0,
  CUCAP_REC_SNAPSHOT_EXIT = 1,   /* snapshot device memory at exit */
  CUCAP_REC_SNAPSHOT_LAUNCH = 2, /* before and after launch number snapshot_launch */
  CUCAP_REC_SNAPSHOT_RANGE = 3   /* at the start of the snapshot_nth occurrence
                                    of range snapshot_range: an NVTX range
                                    (push/start message) or, for the name
                                    "cuProfilerStart", a profiler range */
} cucap_rec_snapshot_mode;

typedef enum cucap_rec_stack_mode {
  CUCAP_REC_STACK_OFF = 0,
  CUCAP_REC_STACK_FP = 1,        /* frame-pointer walk (default) */
  CUCAP_REC_STACK_UNWIND = 2     /* _Unwind_Backtrace (slower, no FP needed) */
} cucap_rec_stack_mode;

/* Parsed CUCAP_OPTIONS: comma-separated `key` or `key=value` items:
 *   snapshot=none|exit|launch:N|range:NAME[@K]   hash_launches   audit
 *   stack=off|fp|unwind           stack_depth=N   level=N (zstd)
 *   no_dtoh_payload               workers=N       flush_ms=N
 *   sync_writes                   stats (cucap_rec_stats.h)
 * Unknown keys are logged (warn) and ignored. */
typedef struct cucap_rec_options {
  cucap_rec_snapshot_mode snapshot;
  uint64_t snapshot_launch;      /* N of snapshot=launch:N (0-based index) */
  char snapshot_range[128];      /* NAME of snapshot=range:NAME[@K] */
  uint64_t snapshot_nth;         /* K (0-based occurrence, default 0) */
  int hash_launches;
  int audit;
  cucap_rec_stack_mode stack;
  int stack_depth;               /* frames kept per callstack; default 32 */
  int level;                     /* zstd level; 0 = writer default */
  int no_dtoh_payload;           /* do not store DtoH results */
  int workers;                   /* zstd worker threads */
  unsigned flush_ms;             /* writer flush interval; 0 = default */
  int sync_writes;
  int stats;                     /* per-entry-point cost counters */
} cucap_rec_options;

/* Fills defaults (snapshot none, stack fp, depth 32, everything else 0). */
void cucap_rec_options_init(cucap_rec_options *o);
/* Parses `s` (may be NULL/empty) into *o (which should be initialised).
 * Returns CUCAP_ERR_INVALID_ARG on a malformed value (o keeps what was
 * parsed before it); unknown keys are not errors. */
cucap_status cucap_rec_options_parse(const char *s, cucap_rec_options *o);

/* Expands `%p` (pid), `%q{VAR}` (env VAR, empty if unset) and `%%` in
 * `pattern` into out[out_size]. CUCAP_ERR_TOO_LARGE if it does not fit,
 * CUCAP_ERR_INVALID_ARG on a malformed `%q{`. Used by the CLI as well. */
cucap_status cucap_rec_expand_path(const char *pattern, long pid, char *out,
                                   size_t out_size);

/* ---- runtime (valid inside the app once libcucap.so is loaded) -------- */

/* 1 when recording is enabled and initialised. */
int cucap_rec_active(void);
/* Parsed options; never NULL (defaults when not recording). */
const cucap_rec_options *cucap_rec_opts(void);
/* ns of CLOCK_MONOTONIC since recording start (FileHeader.start_mono_ns). */
uint64_t cucap_rec_now(void);
/* Stores a content-addressed blob; *out receives its hash (may be NULL).
 * Like every append below it returns CUCAP_ERR_STATE when not recording,
 * including once the capture could not be written (disk full, I/O error):
 * the recorder then logs one error, stops recording and lets every call
 * pass through; callers need not report that again. */
cucap_status cucap_rec_blob(const void *data, size_t size, cucap_hash128 *out);
/* A thread-local scratch builder for extra (non-call) records. Owned by the
 * recorder, valid on the calling thread until it exits; the caller resets it
 * before use. It is distinct from the builder handed to hooks in
 * cucap_call.b, so a hook may use both. NULL when not recording / OOM. */
cucap_fbb *cucap_rec_builder(void);
/* Builds a Record {seq 0, tid, t_enter = now, body, stack} with `b` (which
 * holds `body`), finishes and appends it. b is left finished: reset it before
 * reuse. */
cucap_status cucap_rec_emit(cucap_fbb *b, uint8_t body_type, cucap_fb_ref body,
                            uint32_t stack);
/* Like cucap_rec_emit, for a record made on behalf of thread tid (its
 * QueryCounts) with explicit times. */
cucap_status cucap_rec_emit_as(cucap_fbb *b, uint8_t body_type, cucap_fb_ref body,
                               uint32_t tid, uint64_t t_enter, uint64_t t_exit);
/* Adds n recorded calls of cbid (aggregated records) to the --audit counts. */
void cucap_rec_count_recorded(uint32_t cbid, uint64_t n);
/* Emits a Note {kind, text, value, data} record (convenience). */
cucap_status cucap_rec_note(const char *kind, const char *text, uint64_t value,
                            const void *data, size_t data_size);
/* Returns the next 0-based kernel launch index (atomic increment). */
uint64_t cucap_rec_next_launch_index(void);
/* Registers fn to run (in reverse registration order, at most 16) before the
 * writer is closed at exit, with the re-entrancy guard held so its driver
 * calls pass through unrecorded. */
void cucap_rec_at_exit(void (*fn)(void));
/* Flushes and closes the capture now (idempotent; used at exit/signals). */
void cucap_rec_shutdown(void);

/* ---- per-call plumbing used by the generated wrappers (interpose/) ---- */

/* Per-thread state (owned by the recorder, freed at thread exit; the pointer
 * is valid on its own thread only). NULL when not recording or on OOM. */
typedef struct cucap_rec_thread {
  int depth;             /* re-entrancy guard: >0 while inside a wrapper */
  uint32_t tid;          /* gettid(), cached */
  cucap_fbb *call_b;     /* builder handed to hooks (cucap_call.b) */
  cucap_fbb *extra_b;    /* cucap_rec_builder() */
  uint32_t audit_expect; /* --audit: cbid of the wrapper's own real call */
  struct cucap_rec_qtab *q; /* pure-query counts (cucap_rec_query.h); NULL
                               until the thread's first query */
  uint64_t q_flushed;    /* cucap_rec_now() of this thread's last flush of q */
  uintptr_t call_site;   /* return address of the recorded call being made
                            (the program's call site; a cache key only) */
} cucap_rec_thread;
cucap_rec_thread *cucap_rec_thread_get(void);
/* The calling thread's state if it exists and recording is active, else
 * NULL (no allocation: the generated wrappers' fast path). */
cucap_rec_thread *cucap_rec_thread_peek(void);

/* For the generated wrappers' inline fast paths (interpose_internal.h), inside
 * libcucap only (hidden): the calling thread's state pointer (what
 * cucap_rec_thread_peek reads; initial-exec TLS, one %fs load: libcucap is
 * preloaded, so it lives in the static TLS block), and 1 while recording is
 * active without --stats and --audit, the modes whose per-call bookkeeping
 * only the out-of-line paths do. Written by the recorder only. */
extern __thread cucap_rec_thread *cucap_rec_tls
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern int cucap_rec_lean __attribute__((visibility("hidden")));
static inline int cucap_rec_lean_on(void) {
  return __atomic_load_n(&cucap_rec_lean, __ATOMIC_RELAXED);
}

/* Appends a finished size-prefixed call Record (field 0, `seq`, must be
 * present): takes the next global sequence number (1-based), writes it into
 * the buffer and appends, under one lock, so file order == seq order. buf is
 * modified. cbid (< CUCAP_REC_MAX_CBID) is counted for --audit. *seq_out (may
 * be NULL) receives the seq. */
cucap_status cucap_rec_append_call(uint8_t *buf, size_t size, uint32_t cbid,
                                   uint64_t *seq_out);
/* The same for a hand-laid Record whose `seq` field sits at byte seq_off
 * (8-aligned, inside the buffer): no field lookup. */
cucap_status cucap_rec_append_call_at(uint8_t *buf, size_t size, size_t seq_off,
                                      uint32_t cbid, uint64_t *seq_out);

/* Arms the recorder if CUCAP_OUTPUT is set (called by libcucap's
 * constructor; idempotent): parses CUCAP_OPTIONS and installs the fork
 * handler; the file is created by cucap_rec_activate at the first CUDA call.
 * producer and toolkit_version (CUDA_VERSION cucap was built with) go into
 * the FileHeader. Never fails loudly: logs once and stays inactive. */
void cucap_rec_start(const char *producer, int toolkit_version);
/* Records the driver version in a Note {kind "driver_version"} once (the
 * FileHeader is written before the driver is initialised). Kept for
 * replay/replay_run.c, which reads that note; libcucap also emits a Devices
 * record (format 1.1) after the first successful cuInit. */
void cucap_rec_set_driver_version(int version);

/* ---- additions (format 1.1 / lazy start) ---------------------------- */

/* The path a process writes: cucap_rec_expand_path(pattern, pid), then, when
 * root_pid > 0, pid != root_pid and the pattern has no `%p`, `.<pid>` is
 * inserted before the extension of the last path component ("run/cap.fb" ->
 * "run/cap.123.fb", "cap" -> "cap.123"). Same errors as expand_path. */
cucap_status cucap_rec_output_path(const char *pattern, long pid, long root_pid,
                                   char *out, size_t out_size);

/* Opens the capture if the recorder is armed and this process has not
 * opened it yet (the first intercepted CUDA call; the generated wrappers call
 * it through cucap_call_enter). Thread-safe: concurrent first calls wait for
 * the one that opens. Re-entrant calls on the opening thread (a driver call
 * made while opening, e.g. by CUPTI) return 0 and pass through. Returns
 * cucap_rec_active(). */
int cucap_rec_activate(void);

/* Registers fn (at most 4) to run inside cucap_rec_activate after the writer
 * exists and before any call is recorded (the --audit CUPTI subscription).
 * fn runs with this thread's re-entrancy guard held (its driver calls pass
 * through unrecorded); cucap_rec_active() is still 0 while it runs. Register
 * before the first CUDA call (libcucap's constructor). */
void cucap_rec_on_activate(void (*fn)(void));

/* 1 when this process is a fork()ed child of a recording process (inert). */
int cucap_rec_is_forked_child(void);

/* The capture writer's statistics so far (cucap_writer.h; its background
 * thread's CPU time among them). 0 when no capture is open. */
struct cucap_writer_stats;
int cucap_rec_writer_stats(struct cucap_writer_stats *st);

/* Recorded calls per CUPTI driver cbid (for --audit): counts[0..MAX). */
#define CUCAP_REC_MAX_CBID 2048
uint64_t cucap_rec_recorded_count(uint32_t cbid);

#ifdef __cplusplus
}
#endif
#endif
