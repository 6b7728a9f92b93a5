/* interpose_internal.h - contract between the generated wrappers
 * (interpose/generated/), the plumbing in
 * interpose/hooks.c and the semantic hooks in interpose/custom_*.c. Internal to libcucap.so.
 *
 * Flow of one wrapped call (see interpose/generated/wrappers.c):
 *   cucap_call c;
 *   if (!cucap_call_enter(&c, CUCAP_API_x)) return cucap_real.x(...);
 *   [pre hook (c, args...)]  r = cucap_real.x(...);  c.args[] = args;
 *   [post hook (c, r, args...)]  cucap_call_exit(&c, r);  return r;
 * Pre and post hooks run with the thread's re-entrancy guard held: any hooked
 * function they call passes straight through unrecorded. Hooks call the real
 * driver via cucap_real.<symbol>; they never exit/abort/print to stdout and
 * never change the CUresult the app sees.
 *
 * Everything in c (including c->b's buffer) is valid only during the call. */
#ifndef CUCAP_INTERPOSE_INTERNAL_H
#define CUCAP_INTERPOSE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* The versioned names (cuMemAlloc_v2, cuLaunchKernel_ptsz, ...) must be plain
 * identifiers here and the old internal-only types (CUdeviceptr_v1, ...) must
 * exist: compile cuda.h the way NVIDIA's own generated_cuda_meta.h does.
 * Include this header before anything that includes cuda.h. */
#if defined(__cuda_cuda_h__) && !defined(__CUDA_API_VERSION_INTERNAL)
#error "include interpose_internal.h before cuda.h"
#endif
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <stdatomic.h>

#include "cucap_rec_query.h"
#include "cucap_rec_stats.h"
#include "cucap_recorder.h"
#include "cucap_schema.h" /* generated FlatBuffers API (CUCAP_FB_*) */
#include "cucap_fb_builder.h"

#define CUCAP_MAX_ARGS 32

typedef struct cucap_call {
  uint32_t api;            /* CUCAP_API_<exported symbol>, index in the generated table */
  uint32_t cbid;           /* CUPTI driver cbid (0 if none) */
  uint8_t variant;         /* CUCAP_FB_CALLVARIANT_DEFAULT/PTSZ/PTDS */
  uint64_t t_enter;        /* ns since recording start */
  uint64_t args[CUCAP_MAX_ARGS]; uint32_t nargs;  /* scalar args as 64-bit values, pointers as addresses */
  cucap_fbb *b;            /* this thread's builder, reset for this call: customs build the Record body with it */
  uint8_t body_type;       /* CUCAP_FB_BODY_* set by a custom post hook (0 = none) */
  cucap_fb_ref body;       /* the body table built with b */
  uint32_t stack;          /* callstack id, set by customs via cucap_rec_stack_id() */
  uint64_t launch_index;   /* launches: taken by the pre hook, recorded by the post hook */
  int drop;                /* custom sets 1 to suppress the Record (rare) */
  /* Set by a custom post hook that must learn the Record's seq (deferred
   * payload reads): cucap_call_exit calls it once, after the append, with
   * the seq (0 when nothing was appended). */
  void (*after_append)(void *arg, uint64_t seq);
  void *after_arg;
  /* --stats (cucap_rec_stats.h): clock at wrapper entry and around the real
   * call (CUCAP_REAL_BEGIN/END in the generated wrappers) */
  int stats;
  uint64_t st0, st_real0, st_real1;
  /* --- framework-private (hooks.c) --- */
  cucap_rec_thread *th;
} cucap_call;

#include "generated/cucap_api.h" /* CUCAP_API_*, cucap_real, cucap_api_table */

/* Returns 1 and fills c (api, cbid, variant, t_enter, b reset, guard taken)
 * when the call is to be recorded; 0 when recording is off, the thread is
 * already inside a wrapper (re-entered from a hook or from the driver), or
 * the recorder failed: then the wrapper calls the real function only. */
int cucap_call_enter_at(cucap_call *c, uint32_t api, uintptr_t call_site);
/* A macro, so that __builtin_return_address(0) is the wrapper's: the
 * program's call site, kept in the thread state as the callstack cache's
 * key (capture/callstack.c). */
#define cucap_call_enter(c, api)                                               \
  cucap_call_enter_at((c), (api), (uintptr_t)__builtin_return_address(0))

/* Pure queries (gen_interpose.py's list: side-effect-free Get/Query/
 * Occupancy entry points; format 1.3): the generated wrapper is
 *   cucap_call c;
 *   if (!cucap_query_enter(&c, CUCAP_API_x)) return cucap_real.x(...);
 *   r = cucap_real.x(...);
 *   if (cucap_query_exit(&c, r)) return r;       counted, no Record
 *   c.args[] = args; cucap_call_exit(&c, r);     not countable: recorded
 * enter takes the guard like cucap_call_enter but fills only what counting
 * needs (no clock, no builder); exit counts the call in the thread's table
 * (capture/cucap_rec_query.h) and releases the guard, or, returning 0,
 * prepares c for cucap_call_exit. */
int cucap_query_enter(cucap_call *c, uint32_t api);
int cucap_query_exit(cucap_call *c, CUresult r);

/* What the generated wrappers call: the common case of cucap_query_enter/
 * exit inlined (recording, no --stats/--audit, the thread's table exists and
 * this (entry point, success) was counted before): a TLS load, the guard, and
 * one counter increment in the thread's own table - no clock, no lock, no
 * shared cache line. Everything else goes to the out-of-line functions,
 * with identical results. */
static inline int cucap_query_begin(cucap_call *c, uint32_t api) {
  cucap_rec_thread *th = cucap_rec_tls;
  if (__builtin_expect(th != NULL && !th->depth && cucap_rec_lean_on(), 1)) {
    th->depth = 1;
    c->th = th;
    c->api = api;
    c->stats = 0;
    return 1;
  }
  return cucap_query_enter(c, api);
}
static inline int cucap_query_end(cucap_call *c, CUresult r) {
  cucap_rec_thread *th = c->th;
  struct cucap_rec_qtab *q = th->q;
  if (__builtin_expect(q != NULL && r == CUDA_SUCCESS && !c->stats, 1)) {
    uint64_t n = atomic_load_explicit(&q->ok[c->api], memory_order_relaxed);
    if (__builtin_expect(n != 0, 1)) {
      atomic_store_explicit(&q->ok[c->api], n + 1, memory_order_relaxed);
      th->depth = 0;
      return 1;
    }
  }
  return cucap_query_exit(c, r);
}

/* Entry points with a `count=` hook (custom_table.txt; cuKernelGetFunction):
 * entered like pure queries (cucap_query_begin), and counted like them when
 * the hook says the call holds nothing the capture lacks; otherwise this
 * prepares c for the pre-existing record path (post hook, cucap_call_exit),
 * guard still held. The Record's t_enter is then taken after the real call
 * (the clock is not read for calls that end up counted). */
void cucap_query_to_call(cucap_call *c);

/* Around the real call in each generated wrapper: --stats measures the time
 * spent in the wrapper outside it (one untaken branch each when off). */
#define CUCAP_REAL_BEGIN(c)                                                    \
  do {                                                                         \
    if (__builtin_expect((c)->stats, 0))                                       \
      (c)->st_real0 = cucap_rec_stats_clock();                                 \
  } while (0)
#define CUCAP_REAL_END(c)                                                      \
  do {                                                                         \
    if (__builtin_expect((c)->stats, 0))                                       \
      (c)->st_real1 = cucap_rec_stats_clock();                                 \
  } while (0)

/* Builds the Record {seq, tid, t_enter, t_exit, call=cbid, variant, result,
 * args, stack, body, context}, appends it (unless c->drop) and releases the
 * guard. Always releases the guard, whatever happens. */
void cucap_call_exit(cucap_call *c, CUresult r);

/* Resolves the real libcuda (dlopen libcuda.so.1) and fills cucap_real;
 * idempotent and thread-safe. Called from the constructor and lazily. */
void cucap_real_init(void);


/* Our wrapper for an exported symbol name, or NULL if we do not wrap it. */
void *cucap_wrapper_lookup(const char *symbol);

/* Real dlsym (never our interposed one). */
void *cucap_real_dlsym(void *handle, const char *name);

/* --audit support (interpose/audit.c): start CUPTI counting / write the
 * Audit record at exit. */
void cucap_audit_start(void);

#endif
