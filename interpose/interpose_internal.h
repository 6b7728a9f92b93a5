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

#include "cucap_rec_stats.h"
#include "cucap_recorder.h"
#include "cucap_schema.h" /* generated FlatBuffers API (CUCAP_FB_*) */
#include "fb_builder.h"

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
int cucap_call_enter(cucap_call *c, uint32_t api);

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
