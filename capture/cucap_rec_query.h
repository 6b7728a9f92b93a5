/* cucap_rec_query.h - pure queries counted per thread, written as aggregated
 * QueryCounts records (format 1.3) instead of one Record per call.
 *
 * A pure query is a Get/Query/Occupancy-style driver entry point with no
 * side effect whose result neither the recorder nor a replay needs
 * (interpose/gen_interpose.py generates the list; cuDNN and PyTorch make
 * thousands per training step: cuCtxGetDevice, cuKernelGetAttribute,
 * cuDevicePrimaryCtxGetState, ...). Each thread counts them per (entry
 * point, result) in its own table - no lock, no allocation, no clock read,
 * no record per call - and the counts since the thread's previous flush are
 * written as one QueryCounts record {tid: the counting thread, t_enter: its
 * previous flush (or its first query), t_exit: now}:
 *   - on the owner thread: at the program's synchronisations
 *     (cucap_rec_query_flush_self) and when a recorded call finds the last
 *     flush older than CUCAP_REC_QUERY_FLUSH_NS (cucap_rec_query_tick);
 *   - when the thread exits, and for every thread at process exit, before
 *     --audit compares counts (cucap_rec_query_flush_all).
 * The counts written are added to the recorded counts per cbid
 * (cucap_rec_recorded_count), so --audit, `cucap info` and `cucap analyze`
 * see every call. Per (entry point, result) counts are monotonic; a flush
 * writes the difference with what it wrote before, under the table's mutex,
 * so the owner's flush and the exit flush never count twice.
 *
 * Thread-safe as described. Tables are owned by the recorder: freed when
 * their thread exits (after its final flush), never returned to callers. */
#ifndef CUCAP_REC_QUERY_H
#define CUCAP_REC_QUERY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cucap_recorder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A recorded call on a thread whose last flush is older than this flushes
 * its query counts first (100 ms). */
#define CUCAP_REC_QUERY_FLUSH_NS 100000000ull
/* Distinct (entry point, non-success result) pairs a thread can count;
 * more are recorded one by one (cucap_rec_query_count returns 0). */
#define CUCAP_REC_QUERY_ERRS 64

typedef struct cucap_rec_qerr {
  _Atomic uint64_t key; /* (api + 1) << 32 | (uint32_t)result; 0: free */
  _Atomic uint64_t count;
  uint64_t flushed;
} cucap_rec_qerr;

struct cucap_rec_qtab {
  _Atomic uint64_t *ok;      /* [napis] calls that returned CUDA_SUCCESS */
  uint64_t *ok_flushed;      /* [napis] ok[] at the last flush (under mu) */
  uint32_t *touched;         /* apis with ok > 0, in order of first use */
  _Atomic uint32_t ntouched;
  cucap_rec_qerr err[CUCAP_REC_QUERY_ERRS];
  uint8_t err_used[CUCAP_REC_QUERY_ERRS]; /* slots holding a key, in order */
  _Atomic uint32_t nerr;
  uint64_t t_flush;          /* ns (cucap_rec_now) of the last flush */
  uint32_t tid;
  int linked;                /* in the global list (under its lock) */
  struct cucap_rec_qtab *next, *prev;
  pthread_mutex_t mu;        /* flushes: the owner's and the exit's */
};

/* Called once by the interposer's constructor: napis entry points, their
 * CUPTI cbid and CallVariant (arrays owned by the caller, static). */
void cucap_rec_query_init(size_t napis, const uint32_t *cbid, const uint8_t *variant);

/* Slow paths of cucap_rec_query_count. */
int cucap_rec_query_count_slow(cucap_rec_thread *th, uint32_t api, int result);

/* Counts one call of pure query `api` (< the napis given to
 * cucap_rec_query_init) returning `result` on th's thread. 1: counted; 0:
 * not counted (no table, out of memory, error slots full): record it. */
static inline int cucap_rec_query_count(cucap_rec_thread *th, uint32_t api, int result) {
  struct cucap_rec_qtab *q = th->q;
  if (__builtin_expect(q != NULL && result == 0, 1)) {
    uint64_t c = atomic_load_explicit(&q->ok[api], memory_order_relaxed);
    if (__builtin_expect(c != 0, 1)) {
      atomic_store_explicit(&q->ok[api], c + 1, memory_order_relaxed);
      return 1;
    }
  }
  return cucap_rec_query_count_slow(th, api, result);
}

/* Owner thread, at a recorded call made at time now (ns): flushes when its
 * last flush is older than CUCAP_REC_QUERY_FLUSH_NS. */
void cucap_rec_query_flush_due(cucap_rec_thread *th, uint64_t now);
static inline void cucap_rec_query_tick(cucap_rec_thread *th, uint64_t now) {
  /* th->q_flushed mirrors the table's last flush by this thread (another
   * thread's flush_all makes it older: one flush with nothing new, then) -
   * read from th's own cache line, not the table's */
  if (__builtin_expect(now - th->q_flushed >= CUCAP_REC_QUERY_FLUSH_NS, 0) && th->q)
    cucap_rec_query_flush_due(th, now);
}
/* The calling thread's counts now (a program synchronisation). */
void cucap_rec_query_flush_self(void);
/* Every thread's counts (process exit; from_signal: never blocks). */
void cucap_rec_query_flush_all(int from_signal);
/* The thread owning th exits: final flush, then its table is freed. */
void cucap_rec_query_thread_exit(cucap_rec_thread *th);

#ifdef __cplusplus
}
#endif
#endif
