/* recorder.c - the in-app recorder runtime.
 * See cucap_recorder.h. Runs inside the recorded application: never exits,
 * aborts or prints to stdout; on any setup failure it logs once and stays
 * inactive so every call passes straight through.
 *
 * Hot path (one recorded call): TLS lookup (initial-exec: one %fs load), two
 * clock_gettime (vDSO), the record laid out in a per-thread or stack buffer,
 * then cucap_writer_append_seq: the writer's own record lock around "take
 * seq + copy into the chunk" - one lock per record, so file order == seq
 * order. No malloc, no syscall. The writer is never destroyed while the
 * process may still append (shutdown closes it: later appends fail with
 * CUCAP_ERR_STATE), so appenders need no lock of the recorder's.
 *
 * Lifetime (g_state): OFF (no CUCAP_OUTPUT) | ARMED (constructor ran, no
 * file yet) -> ACTIVE (first CUDA call opened the file) -> DONE (shut down).
 * FAILED: the file could not be created. FORKED: a fork()ed child of an
 * active recorder - inert forever; it must never touch g_writer (whose
 * thread does not exist in the child and whose fd/file belong to the
 * parent). */
#include "cucap_recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cucap_clock.h"
#include "cucap_knobs.h"
#include "cucap_lines.h"
#include "cucap_log.h"
#include "cucap_rec_query.h"
#include "cucap_rec_stats.h"
#include "cucap_schema.h"
#include "cucap_writer.h"


/* ------------------------------------------------------------ state */

static cucap_rec_options g_opts = {.stack = CUCAP_REC_STACK_FP, .stack_depth = 32};
enum { ST_OFF = 0, ST_ARMED, ST_ACTIVE, ST_DONE, ST_FAILED, ST_FORKED, ST_STOPPED };
static atomic_int g_state;           /* ST_*: ACTIVE while recording */
static atomic_int g_activating;      /* cucap_rec_activate is opening the file */
static pthread_mutex_t g_act_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int t_activating;    /* this thread is opening the file */
static atomic_int g_fork_logged;
static atomic_int g_started;         /* cucap_rec_start ran */
static atomic_int g_shutting;        /* shutdown began */
static _Atomic(cucap_writer *) g_writer; /* NULL once shut down */
/* closed, kept reachable (volatile: a store the compiler must not drop):
 * late appenders may still hold it */
static cucap_writer *volatile g_closed_writer;
static atomic_int g_err_logged;      /* the one writing error was logged */
static uint64_t g_start_mono;
static atomic_uint_fast64_t g_counts[CUCAP_REC_MAX_CBID];
/* What threads write at every record, launch or payload copy, each on a
 * cache line of its own: next to the state every call reads (g_state,
 * g_writer, g_start_mono) each such write took that line from every other
 * thread, which then missed on it at its next call (the 8-thread storm).
 * g_seq is only touched under the writer's record lock. */
static struct { _Alignas(64) uint64_t v; } g_seq;
static struct { _Alignas(64) atomic_uint_fast64_t v; } g_launch_index;
static struct { _Alignas(64) atomic_int v; } g_blob_inflight;
static atomic_int g_driver_noted;
static char g_path[4096];
static int g_toolkit_version;
static const char *g_producer = "libcucap";

#define MAX_ON_ACTIVATE 4
static void (*g_on_activate[MAX_ON_ACTIVATE])(void);
static atomic_int g_n_on_activate;

#define MAX_AT_EXIT 16
static void (*g_at_exit[MAX_AT_EXIT])(void);
static atomic_int g_n_at_exit;

static pthread_key_t g_thread_key;
/* initial-exec: libcucap is preloaded (static TLS), and a thread's state is
 * read on every wrapped call; 8 bytes of the static TLS surplus otherwise */
__thread cucap_rec_thread *cucap_rec_tls __attribute__((tls_model("initial-exec")));
#define t_th cucap_rec_tls
/* 1 while ACTIVE without stats/audit (cucap_recorder.h); relaxed accesses */
int cucap_rec_lean;
static __thread int t_th_dead; /* thread is exiting: do not recreate state */

static const int g_fatal_signals[] = {SIGSEGV, SIGABRT, SIGTERM, SIGINT};
#define N_FATAL (sizeof g_fatal_signals / sizeof g_fatal_signals[0])
static struct sigaction g_old_sa[N_FATAL];

/* Fatal signals (see fatal_handler). t_in_writer: this thread is inside the
 * writer (may hold its locks); initial-exec TLS is safe to touch from a
 * signal handler (libcucap is loaded at start-up). */
static sem_t g_closer_sem;
static atomic_int g_closer_started, g_closer_posted, g_closer_done;
static __thread int t_in_writer __attribute__((tls_model("initial-exec")));
static __thread int t_pending_sig __attribute__((tls_model("initial-exec")));
static __thread int t_in_handler __attribute__((tls_model("initial-exec")));

static inline void rec_enter(void) { t_in_writer++; }
/* Leaves the writer; a termination signal that arrived meanwhile was
 * deferred (fatal_handler) and is delivered now. */
static inline void rec_leave(void) {
  if (--t_in_writer == 0 && __builtin_expect(t_pending_sig != 0, 0)) {
    int s = t_pending_sig;
    t_pending_sig = 0;
    raise(s);
  }
}

int cucap_rec_active(void) {
  return atomic_load_explicit(&g_state, memory_order_acquire) == ST_ACTIVE;
}
int cucap_rec_is_forked_child(void) { return atomic_load(&g_state) == ST_FORKED; }
const cucap_rec_options *cucap_rec_opts(void) { return &g_opts; }
uint64_t cucap_rec_now(void) { return cucap_clock_now_ns() - g_start_mono; }
uint64_t cucap_rec_next_launch_index(void) {
  return atomic_fetch_add(&g_launch_index.v, 1);
}
uint64_t cucap_rec_recorded_count(uint32_t cbid) {
  return cbid < CUCAP_REC_MAX_CBID ? atomic_load(&g_counts[cbid]) : 0;
}

void cucap_rec_at_exit(void (*fn)(void)) {
  int i = atomic_fetch_add(&g_n_at_exit, 1);
  if (i < MAX_AT_EXIT)
    g_at_exit[i] = fn;
  else
    CUCAP_WARN("recorder: too many at-exit functions, one dropped");
}

/* ------------------------------------------------------------ threads */

static void thread_state_free(void *p) {
  cucap_rec_thread *th = p;
  if (!th)
    return;
  cucap_rec_query_thread_exit(th); /* its query counts, then its table */
  t_th_dead = 1;
  t_th = NULL;
  cucap_fbb_destroy(th->call_b);
  cucap_fbb_destroy(th->extra_b);
  free(th);
}

cucap_rec_thread *cucap_rec_thread_get(void) {
  cucap_rec_thread *th = t_th;
  if (__builtin_expect(th != NULL, 1))
    return th;
  if (t_th_dead || !cucap_rec_active())
    return NULL;
  /* a line of its own: every call writes it, and another thread's state
   * allocated next to it would share that line */
  th = cucap_lines_alloc(sizeof *th);
  if (!th)
    return NULL;
  th->tid = (uint32_t)syscall(SYS_gettid);
  th->call_b = cucap_fbb_create(4096);
  th->extra_b = cucap_fbb_create(1024);
  if (!th->call_b || !th->extra_b) {
    cucap_fbb_destroy(th->call_b);
    cucap_fbb_destroy(th->extra_b);
    free(th);
    return NULL;
  }
  t_th = th;
  pthread_setspecific(g_thread_key, th); /* frees it at thread exit */
  return th;
}

cucap_rec_thread *cucap_rec_thread_peek(void) {
  cucap_rec_thread *th = t_th;
  return th && atomic_load_explicit(&g_state, memory_order_acquire) == ST_ACTIVE ? th : NULL;
}

uint32_t cucap_rec_tid(void) {
  cucap_rec_thread *th = cucap_rec_thread_get();
  return th ? th->tid : (uint32_t)syscall(SYS_gettid);
}

cucap_fbb *cucap_rec_builder(void) {
  cucap_rec_thread *th = cucap_rec_thread_get();
  return th ? th->extra_b : NULL;
}

/* ------------------------------------------------------------ errors */

/* The writer failed (disk full, I/O error, out of memory): log it once and
 * stop recording - every later call passes straight through (STOPPED), the
 * writer is closed at exit without an index, and what reached the file
 * stays readable (the reader recovers up to the last complete chunk).
 * Returns CUCAP_ERR_STATE for such an error (reported here, so callers do
 * not report it again), st otherwise. */
static cucap_status rec_writer_failed(cucap_writer *w, cucap_status st) {
  if (st == CUCAP_OK || st == CUCAP_ERR_STATE || st == CUCAP_ERR_INVALID_ARG ||
      st == CUCAP_ERR_TOO_LARGE)
    return st; /* not the writer's sticky error */
  int s = ST_ACTIVE;
  if (atomic_compare_exchange_strong(&g_state, &s, ST_STOPPED))
    __atomic_store_n(&cucap_rec_lean, 0, __ATOMIC_RELAXED); /* calls pass through */
  if (atomic_exchange(&g_err_logged, 1))
    return CUCAP_ERR_STATE;
  const char *why = w ? cucap_writer_last_error(w) : "";
  CUCAP_ERROR("recording stopped: writing capture %s failed: %s; the program "
              "continues unrecorded, what was written before stays readable",
              g_path, *why ? why : cucap_status_str(st));
  return CUCAP_ERR_STATE;
}

/* ------------------------------------------------------------ appending */

/* Byte offset of field `id` of the root table of a size-prefixed buffer, or 0
 * if absent/out of bounds. */
static size_t root_field_offset(const uint8_t *buf, size_t size, unsigned id) {
  uint32_t root, vt_len;
  int32_t soff;
  uint16_t vlen, foff;
  if (size < 12)
    return 0;
  memcpy(&root, buf + 4, 4);
  size_t t = 4 + (size_t)root;
  if (t + 4 > size)
    return 0;
  memcpy(&soff, buf + t, 4);
  size_t vt = (size_t)((int64_t)t - soff);
  if (vt + 4 > size)
    return 0;
  memcpy(&vlen, buf + vt, 2);
  vt_len = vlen;
  if (4 + 2 * (id + 1) > vt_len || vt + vt_len > size)
    return 0;
  memcpy(&foff, buf + vt + 4 + 2 * id, 2);
  if (!foff || t + foff + 8 > size)
    return 0;
  return t + foff;
}

cucap_status cucap_rec_append_call(uint8_t *buf, size_t size, uint32_t cbid,
                                   uint64_t *seq_out) {
  size_t off = root_field_offset(buf, size, 0);
  CUCAP_RETURN_IF(off == 0, CUCAP_ERR_INVALID_ARG);
  return cucap_rec_append_call_at(buf, size, off, cbid, seq_out);
}

cucap_status cucap_rec_append_call_at(uint8_t *buf, size_t size, size_t seq_off,
                                      uint32_t cbid, uint64_t *seq_out) {
  cucap_status st = CUCAP_ERR_STATE;
  uint64_t seq = 0;
  cucap_writer *w = atomic_load_explicit(&g_writer, memory_order_acquire);
  if (w) {
    rec_enter();
    if (__builtin_expect(cucap_rec_stats_on, 0)) {
      uint64_t t0 = cucap_rec_stats_clock();
      st = cucap_writer_append_seq(w, buf, size, seq_off, &g_seq.v, &seq);
      cucap_rec_stats_add(CUCAP_STATS_APPEND_LOCK, cucap_rec_stats_clock() - t0);
    } else {
      st = cucap_writer_append_seq(w, buf, size, seq_off, &g_seq.v, &seq);
    }
    if (__builtin_expect(st != CUCAP_OK, 0))
      st = rec_writer_failed(w, st);
    rec_leave();
  }
  if (st == CUCAP_OK && __builtin_expect(g_opts.audit, 0) && cbid < CUCAP_REC_MAX_CBID)
    atomic_fetch_add_explicit(&g_counts[cbid], 1, memory_order_relaxed);
  if (seq_out)
    *seq_out = st == CUCAP_OK ? seq : 0;
  return st;
}

int cucap_rec_writer_stats(struct cucap_writer_stats *st) {
  cucap_writer *w = atomic_load_explicit(&g_writer, memory_order_acquire);
  if (!w || !st)
    return 0;
  cucap_writer_get_stats(w, st);
  return 1;
}

static cucap_status append_plain(const uint8_t *buf, size_t size) {
  cucap_writer *w = atomic_load_explicit(&g_writer, memory_order_acquire);
  if (!w)
    return CUCAP_ERR_STATE;
  rec_enter();
  cucap_status st = cucap_writer_append(w, buf, size, NULL);
  if (st != CUCAP_OK)
    st = rec_writer_failed(w, st);
  rec_leave();
  return st;
}

cucap_status cucap_rec_emit(cucap_fbb *b, uint8_t body_type, cucap_fb_ref body,
                            uint32_t stack) {
  CUCAP_RETURN_IF(!b, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(!cucap_rec_active(), CUCAP_ERR_STATE);
  uint64_t now = cucap_rec_now();
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, 0);
  cucap_fb_record_add_tid(b, cucap_rec_tid());
  cucap_fb_record_add_t_enter(b, now);
  cucap_fb_record_add_t_exit(b, now);
  if (stack)
    cucap_fb_record_add_stack(b, stack);
  if (body_type && body)
    cucap_fb_record_add_body(b, body_type, body);
  cucap_fb_ref rec = cucap_fb_record_end(b);
  size_t size = 0;
  const uint8_t *buf = cucap_fbb_finish(b, rec, 1, &size);
  CUCAP_RETURN_IF(!buf, CUCAP_ERR_NOMEM);
  return append_plain(buf, size);
}

cucap_status cucap_rec_emit_as(cucap_fbb *b, uint8_t body_type, cucap_fb_ref body,
                               uint32_t tid, uint64_t t_enter, uint64_t t_exit) {
  CUCAP_RETURN_IF(!b, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(!cucap_rec_active(), CUCAP_ERR_STATE);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, 0);
  cucap_fb_record_add_tid(b, tid);
  cucap_fb_record_add_t_enter(b, t_enter);
  cucap_fb_record_add_t_exit(b, t_exit);
  if (body_type && body)
    cucap_fb_record_add_body(b, body_type, body);
  cucap_fb_ref rec = cucap_fb_record_end(b);
  size_t size = 0;
  const uint8_t *buf = cucap_fbb_finish(b, rec, 1, &size);
  CUCAP_RETURN_IF(!buf, CUCAP_ERR_NOMEM);
  return append_plain(buf, size);
}

void cucap_rec_count_recorded(uint32_t cbid, uint64_t n) {
  if (cbid < CUCAP_REC_MAX_CBID)
    atomic_fetch_add_explicit(&g_counts[cbid], n, memory_order_relaxed);
}

cucap_status cucap_rec_note(const char *kind, const char *text, uint64_t value,
                            const void *data, size_t data_size) {
  CUCAP_RETURN_IF(!cucap_rec_active(), CUCAP_ERR_STATE);
  /* Notes may be emitted from inside a hook that uses extra_b: use a private
   * builder (notes are rare). */
  cucap_fbb *b = cucap_fbb_create(256 + data_size);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOMEM);
  cucap_fb_ref k = kind ? cucap_fbb_string(b, kind, strlen(kind)) : 0;
  cucap_fb_ref t = text ? cucap_fbb_string(b, text, strlen(text)) : 0;
  cucap_fb_ref d = data ? cucap_fbb_vector(b, data, data_size, 1, 1) : 0;
  cucap_fb_note_start(b);
  if (k)
    cucap_fb_note_add_kind(b, k);
  if (t)
    cucap_fb_note_add_text(b, t);
  cucap_fb_note_add_value(b, value);
  if (d)
    cucap_fb_note_add_data(b, d);
  cucap_fb_ref note = cucap_fb_note_end(b);
  cucap_status st = cucap_rec_emit(b, CUCAP_FB_BODY_NOTE, note, 0);
  cucap_fbb_destroy(b);
  return st;
}

cucap_status cucap_rec_blob(const void *data, size_t size, cucap_hash128 *out) {
  CUCAP_RETURN_IF(!data && size, CUCAP_ERR_INVALID_ARG);
  rec_enter();
  atomic_fetch_add(&g_blob_inflight.v, 1);
  cucap_status st = CUCAP_ERR_STATE;
  cucap_writer *w = cucap_rec_active() ? atomic_load(&g_writer) : NULL;
  if (w) {
    st = cucap_writer_put_blob(w, data, size, out);
    if (st != CUCAP_OK)
      st = rec_writer_failed(w, st);
  }
  atomic_fetch_sub(&g_blob_inflight.v, 1);
  rec_leave();
  return st;
}

void cucap_rec_set_driver_version(int version) {
  if (atomic_exchange(&g_driver_noted, 1))
    return;
  cucap_rec_note("driver_version", NULL, (uint64_t)(int64_t)version, NULL, 0);
}

/* ------------------------------------------------------------ header */

static int env_interesting(const char *kv) {
  static const char *const prefixes[] = {"CUDA_", "CUCAP_", "LD_PRELOAD=",
                                         "LD_LIBRARY_PATH=", "NVIDIA_", "PYTORCH_",
                                         "TF_", "XLA_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0)
      return 1;
  return 0;
}

static const uint8_t *build_header(cucap_fbb *b, const char *producer,
                                   const char *options, uint64_t start_real,
                                   size_t *size) {
  extern char **environ;
  /* argv from /proc/self/cmdline */
  cucap_fb_ref argv_refs[256];
  size_t nargv = 0;
  char cmd[16384];
  ssize_t n = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    n = read(fd, cmd, sizeof cmd - 1);
    close(fd);
  }
  for (ssize_t i = 0; n > 0 && i < n && nargv < 256;) {
    size_t l = strnlen(cmd + i, (size_t)(n - i));
    argv_refs[nargv++] = cucap_fbb_string(b, cmd + i, l);
    i += (ssize_t)l + 1;
  }
  cucap_fb_ref argv = cucap_fbb_vector_refs(b, argv_refs, nargv);

  cucap_fb_ref env_refs[128];
  size_t nenv = 0;
  for (char **e = environ; e && *e && nenv < 128; e++) {
    if (!env_interesting(*e))
      continue;
    const char *eq = strchr(*e, '=');
    if (!eq)
      continue;
    cucap_fb_ref k = cucap_fbb_string(b, *e, (size_t)(eq - *e));
    cucap_fb_ref v = cucap_fbb_string(b, eq + 1, strlen(eq + 1));
    cucap_fb_env_var_start(b);
    cucap_fb_env_var_add_key(b, k);
    cucap_fb_env_var_add_value(b, v);
    env_refs[nenv++] = cucap_fb_env_var_end(b);
  }
  cucap_fb_ref env = cucap_fbb_vector_refs(b, env_refs, nenv);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  cucap_fb_ref host_r = cucap_fbb_string(b, host, strlen(host));
  cucap_fb_ref ver_r = cucap_fbb_string(b, CUCAP_VERSION_STRING, strlen(CUCAP_VERSION_STRING));
  cucap_fb_ref opt_r = cucap_fbb_string(b, options ? options : "", options ? strlen(options) : 0);
  cucap_fb_ref prod_r = cucap_fbb_string(b, producer, strlen(producer));

  cucap_fb_file_header_start(b);
  cucap_fb_file_header_add_format_major(b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(b, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_cucap_version(b, ver_r);
  cucap_fb_file_header_add_hostname(b, host_r);
  cucap_fb_file_header_add_pid(b, (uint32_t)getpid());
  cucap_fb_file_header_add_start_time_ns(b, start_real);
  cucap_fb_file_header_add_start_mono_ns(b, g_start_mono);
  cucap_fb_file_header_add_toolkit_version(b, g_toolkit_version);
  cucap_fb_file_header_add_argv(b, argv);
  cucap_fb_file_header_add_env(b, env);
  cucap_fb_file_header_add_options(b, opt_r);
  cucap_fb_file_header_add_producer(b, prod_r);
  cucap_fb_ref h = cucap_fb_file_header_end(b);
  return cucap_fbb_finish(b, h, 1, size);
}

/* ------------------------------------------------------------ shutdown */

static void run_at_exit_fns(void) {
  int n = atomic_load(&g_n_at_exit);
  if (n > MAX_AT_EXIT)
    n = MAX_AT_EXIT;
  cucap_rec_thread *th = cucap_rec_thread_get();
  if (th)
    th->depth++; /* their driver calls pass through */
  for (int i = n - 1; i >= 0; i--)
    if (g_at_exit[i])
      g_at_exit[i]();
  if (th)
    th->depth--;
}

/* How the capture is closed: at exit (at-exit hooks, writer destroyed), by
 * the closer thread after a fatal signal (no at-exit hooks: the driver may
 * be unusable), or inside a signal handler when there is no closer thread
 * (locks only tried: the interrupted code may hold them). */
enum { SHUT_EXIT = 0, SHUT_CLOSER = 1, SHUT_HANDLER = 2 };

static void shutdown_impl(int mode) {
  /* Only the process that opened the capture closes it: an armed process
   * that never called CUDA, and a fork()ed child (ST_FORKED), do nothing. */
  int state = atomic_load(&g_state);
  if ((state != ST_ACTIVE && state != ST_STOPPED) || atomic_exchange(&g_shutting, 1))
    return;
  __atomic_store_n(&cucap_rec_lean, 0, __ATOMIC_RELAXED);
  /* every thread's pure-query counts, before --audit compares them (locks
   * only tried outside a normal exit) */
  cucap_rec_query_flush_all(mode != SHUT_EXIT);
  if (mode == SHUT_EXIT && state == ST_ACTIVE)
    run_at_exit_fns();
  atomic_store_explicit(&g_state, ST_DONE, memory_order_release);
  /* Take the writer away from appenders: those that already hold it find
   * it closed (CUCAP_ERR_STATE). It is never destroyed (the process is
   * exiting; g_closed_writer keeps it reachable). A handler runs this only
   * when its thread is outside the writer (fatal_handler), so the writer's
   * locks are at most held by other threads, which release them. */
  cucap_writer *w = atomic_exchange(&g_writer, NULL);
  if (!w)
    return;
  for (int i = 0; i < 1000 && atomic_load(&g_blob_inflight.v) > 0; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  cucap_status st = cucap_writer_close(w);
  if (st != CUCAP_OK) /* logged once, also when only the index failed */
    rec_writer_failed(w, st);
  g_closed_writer = w;
}

void cucap_rec_shutdown(void) { shutdown_impl(SHUT_EXIT); }

/* Waits for a fatal signal's handler to ask it, then closes the capture. A
 * thread of its own because closing takes the writer's locks and allocates,
 * which the thread that took the signal may be in the middle of. Started
 * with every signal blocked. */
static void *closer_main(void *arg) {
  (void)arg;
  while (sem_wait(&g_closer_sem) != 0 && errno == EINTR) {
  }
  shutdown_impl(SHUT_CLOSER);
  atomic_store(&g_closer_done, 1);
  return NULL;
}

static void start_closer(void) {
  pthread_t t;
  pthread_attr_t a;
  sigset_t all, old;
  if (sem_init(&g_closer_sem, 0, 0) != 0 || pthread_attr_init(&a) != 0)
    return;
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&a, 256 << 10);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  if (pthread_create(&t, &a, closer_main, NULL) == 0)
    atomic_store(&g_closer_started, 1);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&a);
}

/* A fatal signal: close the capture, then die of the same signal under the
 * program's own disposition (exit status and core dump unchanged). Only
 * async-signal-safe calls here (atomics, sem_post, nanosleep, sigaction,
 * raise): closing is the closer thread's job. A thread interrupted inside
 * the writer may hold its locks: a termination signal (TERM/INT) is then
 * deferred until it leaves the writer (rec_leave; microseconds), and a fault
 * there (a bug of ours) kills at once, leaving a capture the reader recovers
 * up to its last complete chunk. Without a closer thread (it could not be
 * started) the handler closes itself, trying locks only. */
static void fatal_handler(int sig) {
  int saved = errno;
  if (t_in_handler++) { /* a fault while handling one: just die */
    for (size_t i = 0; i < N_FATAL; i++)
      if (g_fatal_signals[i] == sig)
        sigaction(sig, &g_old_sa[i], NULL);
    raise(sig);
    return;
  }
  if (t_in_writer > 0) {
    if (sig == SIGTERM || sig == SIGINT) {
      t_pending_sig = sig;
      t_in_handler = 0;
      errno = saved;
      return;
    }
  } else if (atomic_load(&g_closer_started)) {
    if (!atomic_exchange(&g_closer_posted, 1))
      sem_post(&g_closer_sem);
    for (int i = 0; i < 10000 && !atomic_load(&g_closer_done); i++) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL); /* at most 10 s */
    }
  } else {
    shutdown_impl(SHUT_HANDLER);
  }
  for (size_t i = 0; i < N_FATAL; i++)
    if (g_fatal_signals[i] == sig)
      sigaction(sig, &g_old_sa[i], NULL);
  errno = saved;
  /* Re-raise with the original disposition. For SIGSEGV from a fault,
   * returning re-executes the instruction and faults again under it. */
  raise(sig);
}

static void at_exit_handler(void) { cucap_rec_shutdown(); }

/* ------------------------------------------------------------ fork */

/* pthread_atfork child handler. The child has one thread; the writer's
 * thread, its queue and possibly its locks (held by another parent thread at
 * fork time) are unusable copies: drop every reference to them without
 * touching them, so nothing the child does (calls, exit, signals) can write
 * to, flush or close the parent's capture. No logging here (the log sink's
 * lock may be held too): logged at the child's first CUDA call. */
static void atfork_child(void) {
  int s = atomic_load(&g_state);
  if (s == ST_ACTIVE || s == ST_DONE || s == ST_STOPPED || atomic_load(&g_activating)) {
    __atomic_store_n(&cucap_rec_lean, 0, __ATOMIC_RELAXED);
    atomic_store(&g_state, ST_FORKED);
    atomic_store(&g_writer, NULL);  /* not ours: never closed/destroyed here */
    atomic_store(&g_shutting, 1);   /* shutdown_impl: nothing to do */
  }
  pthread_mutex_init(&g_act_lock, NULL);
  atomic_store(&g_activating, 0);
  t_activating = 0;
  /* the closer thread was not copied: a fatal signal here must not wait
   * for it (the handler finds nothing to close in a child anyway) */
  atomic_store(&g_closer_started, 0);
}

/* ------------------------------------------------------------ start */

void cucap_rec_on_activate(void (*fn)(void)) {
  int i = atomic_fetch_add(&g_n_on_activate, 1);
  if (i < MAX_ON_ACTIVATE)
    g_on_activate[i] = fn;
  else
    CUCAP_WARN("recorder: too many on-activate functions, one dropped");
}

void cucap_rec_start(const char *producer, int toolkit_version) {
  if (atomic_exchange(&g_started, 1))
    return;
  g_toolkit_version = toolkit_version;
  if (producer)
    g_producer = producer;
  const char *out = cucap_knob_str(CUCAP_KNOB(CUCAP_OUTPUT));
  if (!out || !*out)
    return;
  cucap_rec_options_init(&g_opts);
  const char *optstr = cucap_knob_raw(CUCAP_KNOB(CUCAP_OPTIONS));
  if (cucap_rec_options_parse(optstr, &g_opts) != CUCAP_OK)
    CUCAP_ERROR("CUCAP_OPTIONS='%s': malformed value, using what parsed before it",
                optstr);
  if (pthread_key_create(&g_thread_key, thread_state_free) != 0) {
    CUCAP_ERROR("recorder: pthread_key_create failed; not recording");
    return;
  }
  if (pthread_atfork(NULL, NULL, atfork_child) != 0) {
    CUCAP_ERROR("recorder: pthread_atfork failed; not recording");
    return;
  }
  /* atexit at load time (not at the first CUDA call): our handler then runs
   * after the app's own atexit handlers, whose CUDA calls stay recorded. It
   * does nothing in a process that never opened a capture. */
  atexit(at_exit_handler);
  atomic_store_explicit(&g_state, ST_ARMED, memory_order_release);
}

/* Creates the file and installs exit/signal handlers. Called once, under
 * g_act_lock, by the first thread that makes a CUDA call. */
static void open_capture(void) {
  const char *out = cucap_knob_str(CUCAP_KNOB(CUCAP_OUTPUT));
  const char *optstr = cucap_knob_raw(CUCAP_KNOB(CUCAP_OPTIONS));
  long root_pid = cucap_knob_long(CUCAP_KNOB(CUCAP_ROOT_PID));
  long pid = (long)getpid();
  if (!out || !*out ||
      cucap_rec_output_path(out, pid, root_pid, g_path, sizeof g_path) != CUCAP_OK) {
    CUCAP_ERROR("CUCAP_OUTPUT='%s': cannot expand path; not recording", out ? out : "");
    atomic_store(&g_state, ST_FAILED);
    return;
  }
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  g_start_mono = cucap_clock_now_ns();
  cucap_fbb *b = cucap_fbb_create(16384);
  size_t hsize = 0;
  const uint8_t *h = b ? build_header(b, g_producer, optstr,
                                      (uint64_t)rt.tv_sec * 1000000000ull +
                                          (uint64_t)rt.tv_nsec,
                                      &hsize)
                       : NULL;
  if (!h) {
    CUCAP_ERROR("recorder: cannot build the file header; not recording");
    cucap_fbb_destroy(b);
    atomic_store(&g_state, ST_FAILED);
    return;
  }
  cucap_writer_options wo;
  cucap_writer_options_init(&wo);
  wo.level = g_opts.level;
  wo.nb_workers = g_opts.workers;
  if (g_opts.flush_ms)
    wo.flush_interval_ms = g_opts.flush_ms;
  wo.sync_writes = g_opts.sync_writes;
  wo.quiet_errors = 1; /* reported once by rec_writer_failed */
  cucap_writer *w = NULL;
  cucap_status st = cucap_writer_create(g_path, &wo, h, hsize, &w);
  cucap_fbb_destroy(b);
  if (st != CUCAP_OK) {
    /* the writer logged why (one error line); this is the consequence */
    CUCAP_INFO("not recording %s (%s): the program's calls pass through",
               g_path, cucap_status_str(st));
    atomic_store(&g_state, ST_FAILED);
    return;
  }
  atomic_store_explicit(&g_writer, w, memory_order_release);
  /* on-activate hooks (CUPTI subscription for --audit) run before the first
   * call is recorded; the state is still ARMED and this thread is marked
   * t_activating, so driver calls they make pass through. */
  int n = atomic_load(&g_n_on_activate);
  for (int i = 0; i < n && i < MAX_ON_ACTIVATE; i++)
    if (g_on_activate[i])
      g_on_activate[i]();
  start_closer();
  for (size_t i = 0; i < N_FATAL; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fatal_handler;
    sigemptyset(&sa.sa_mask);
    /* not SA_RESETHAND: a deferred TERM/INT comes back to this handler */
    sa.sa_flags = SA_NODEFER;
    if (sigaction(g_fatal_signals[i], NULL, &g_old_sa[i]) != 0)
      continue;
    /* An app that ignores a signal keeps ignoring it; an app handler
     * installed before us stays (we only take default dispositions). */
    if (g_old_sa[i].sa_handler != SIG_DFL || (g_old_sa[i].sa_flags & SA_SIGINFO))
      continue;
    sigaction(g_fatal_signals[i], &sa, NULL);
  }
  __atomic_store_n(&cucap_rec_lean, !g_opts.audit && !cucap_rec_stats_on, __ATOMIC_RELAXED);
  atomic_store_explicit(&g_state, ST_ACTIVE, memory_order_release);
  CUCAP_INFO("recording to %s", g_path);
}

int cucap_rec_activate(void) {
  int s = atomic_load_explicit(&g_state, memory_order_acquire);
  if (__builtin_expect(s == ST_ACTIVE, 1))
    return 1;
  if (s == ST_FORKED) {
    if (!atomic_exchange(&g_fork_logged, 1))
      CUCAP_INFO("process %ld is a fork()ed child of a recorded process: not "
                 "recorded (its CUDA calls pass through)", (long)getpid());
    return 0;
  }
  if (s != ST_ARMED || t_activating)
    return 0;
  t_activating = 1;
  pthread_mutex_lock(&g_act_lock);
  if (atomic_load(&g_state) == ST_ARMED) {
    atomic_store(&g_activating, 1);
    open_capture();
    atomic_store(&g_activating, 0);
  }
  pthread_mutex_unlock(&g_act_lock);
  t_activating = 0;
  return cucap_rec_active();
}
