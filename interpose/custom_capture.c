/* custom_capture.c - the stream-capture state of the process, as the
 * recorder must know it so that recording never changes what a capturing
 * program sees.
 *
 * While a stream captures in CU_STREAM_CAPTURE_MODE_GLOBAL (the default of
 * cuStreamBeginCapture, cudaStreamBeginCapture and torch.cuda.graph), a
 * "potentially unsafe" driver call (allocation, synchronisation, ...) made
 * by any thread whose own interaction mode is not RELAXED fails and
 * invalidates the capture: cuStreamEndCapture then returns
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Some calls conflict with capture in
 * every mode: synchronising or querying a capturing stream, querying an
 * event recorded inside a capture, work on the legacy stream while a
 * blocking stream captures. The recorder's own driver calls therefore
 *   (a) run in RELAXED mode, swapped in with the real
 *       cuThreadExchangeStreamCaptureMode around them and restored after
 *       (cx_relax_begin/end: the app's mode is never changed as it sees it),
 *   (b) never touch a capturing stream (cx_stream_capturing): work enqueued
 *       there runs when the graph runs, not now - its payload is not read,
 *       the stream is not synchronised, and an event is not recorded on it.
 *
 * State kept here (this file owns it):
 *  - every capture sequence begun through a hooked entry point
 *    (cuStreamBeginCapture*, cuStreamBeginCaptureToGraph*) or seen active in
 *    the app's own cuStreamIsCapturing / cuStreamGetCaptureInfo results:
 *    stream, mode; removed at cuStreamEndCapture* or cuStreamDestroy* once
 *    the driver says the stream no longer captures (an EndCapture from the
 *    wrong thread leaves it capturing);
 *  - the calling thread's interaction mode, from the app's own
 *    cuThreadExchangeStreamCaptureMode calls (cx_thread_capture_mode).
 * cx_capture_any() is one atomic load; while it is 0 nothing else here runs.
 * Whether a given stream captures is asked of the driver (cuStreamIsCapturing
 * is legal during capture, in every mode) because streams also join a
 * capture through cuStreamWaitEvent on an event recorded in one. */
#include <pthread.h>
#include <stdatomic.h>

#include "custom_internal.h"

#define CX_MAX_CAPTURES 256

typedef struct capture_ent {
  uint64_t stream;
  int mode;
} capture_ent;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static capture_ent g_caps[CX_MAX_CAPTURES];
static int g_ncaps;                 /* under g_mu */
static atomic_int g_active;         /* == g_ncaps, read without the lock */
static atomic_int g_active_global;  /* entries with mode GLOBAL */
static __thread int t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static __thread int t_mode_pending = -1; /* desired mode of an exchange in flight */

int cx_capture_any(void) {
  return atomic_load_explicit(&g_active, memory_order_acquire) != 0;
}

int cx_capture_global_any(void) {
  return atomic_load_explicit(&g_active_global, memory_order_acquire) != 0;
}

int cx_thread_capture_mode(void) { return t_mode; }

void cx_relax_begin(cx_relaxed *r) {
  r->swapped = 0;
  r->old = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (cucap_real.cuThreadExchangeStreamCaptureMode &&
      cucap_real.cuThreadExchangeStreamCaptureMode(&r->old) == CUDA_SUCCESS)
    r->swapped = 1;
}

void cx_relax_end(cx_relaxed *r) {
  if (r->swapped)
    (void)cucap_real.cuThreadExchangeStreamCaptureMode(&r->old);
  r->swapped = 0;
}

static void add_locked(uint64_t s, int mode) {
  for (int i = 0; i < g_ncaps; i++)
    if (g_caps[i].stream == s)
      return;
  if (g_ncaps == CX_MAX_CAPTURES) {
    /* more concurrent captures than slots: cx_capture_any() stays 1 (we
     * never under-count), the extra streams are asked of the driver */
    CUCAP_DEBUG("capture table full; stream 0x%llx not tracked", (unsigned long long)s);
    return;
  }
  g_caps[g_ncaps].stream = s;
  g_caps[g_ncaps].mode = mode;
  g_ncaps++;
  atomic_store(&g_active, g_ncaps);
  if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
    atomic_fetch_add(&g_active_global, 1);
}

void cx_capture_begin(CUstream s, int mode) {
  pthread_mutex_lock(&g_mu);
  add_locked(CX_U64(s), mode);
  pthread_mutex_unlock(&g_mu);
}

/* Status of s from the driver, in RELAXED mode. -1 when it cannot be asked
 * (no entry point, or an error such as CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
 * the legacy stream while a blocking stream captures). */
static int driver_status(CUstream s, int variant) {
  CUresult (*fn)(CUstream, CUstreamCaptureStatus *) = cucap_real.cuStreamIsCapturing;
  if (variant == CUCAP_FB_CALLVARIANT_PTSZ && cucap_real.cuStreamIsCapturing_ptsz)
    fn = cucap_real.cuStreamIsCapturing_ptsz;
  if (!fn)
    return -1;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  CUresult r = fn(s, &st);
  cx_relax_end(&rx);
  return r == CUDA_SUCCESS ? (int)st : -1;
}

static void forget(CUstream s) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_ncaps; i++) {
    if (g_caps[i].stream != CX_U64(s))
      continue;
    if (g_caps[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
      atomic_fetch_sub(&g_active_global, 1);
    g_caps[i] = g_caps[--g_ncaps];
    atomic_store(&g_active, g_ncaps);
    break;
  }
  pthread_mutex_unlock(&g_mu);
}

void cx_capture_end(CUstream s, int variant) {
  if (!cx_capture_any())
    return;
  if (driver_status(s, variant) == CU_STREAM_CAPTURE_STATUS_ACTIVE)
    return; /* e.g. CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: still capturing */
  forget(s);
}

int cx_stream_capturing(CUstream s, int variant) {
  if (!cx_capture_any())
    return 0;
  int st = driver_status(s, variant);
  /* a tracked stream the driver says is not capturing (its capture ended
   * out of our sight): forget it, so that cx_capture_any() drops to 0 */
  if (st == CU_STREAM_CAPTURE_STATUS_NONE)
    forget(s);
  /* INVALIDATED: still inside a capture sequence (until EndCapture); an
   * error: cannot tell, assume the worst */
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- hooks (custom_table.txt) ---- */

void custom_stream_begin_capture_to_graph(cucap_call *c, CUresult r, CUstream s, CUgraph g,
                                          const CUgraphNode *deps,
                                          const CUgraphEdgeData *edges, size_t n,
                                          CUstreamCaptureMode mode) {
  (void)deps, (void)edges, (void)n;
  if (r == CUDA_SUCCESS)
    cx_capture_begin(s, (int)mode);
  /* recorded like a BeginCapture into the existing graph g */
  c->stack = cucap_rec_stack_id();
  cucap_fbb *b = c->b;
  cucap_fb_stream_start(b);
  cucap_fb_stream_add_op(b, CUCAP_FB_STREAMOP_BEGINCAPTURE);
  cucap_fb_stream_add_handle(b, CX_U64(s));
  cucap_fb_stream_add_capture_mode(b, (int)mode);
  cucap_fb_stream_add_graph(b, CX_U64(g));
  c->body = cucap_fb_stream_end(b);
  c->body_type = CUCAP_FB_BODY_STREAM;
}

void custom_exchange_mode_pre(cucap_call *c, CUstreamCaptureMode *mode) {
  (void)c;
  t_mode_pending = mode ? (int)*mode : -1;
}

void custom_exchange_mode(cucap_call *c, CUresult r, CUstreamCaptureMode *mode) {
  (void)c, (void)mode;
  if (r == CUDA_SUCCESS && t_mode_pending >= 0)
    t_mode = t_mode_pending;
  t_mode_pending = -1;
}

/* A capture the app sees active while we track none: its begin escaped us
 * (mode unknown: counted as GLOBAL, the strictest). With captures tracked,
 * an active stream is one of theirs or joined one (event waits), and the
 * driver is asked per stream anyway. */
static void learn(CUstream s, CUresult r, const CUstreamCaptureStatus *st) {
  if (r != CUDA_SUCCESS || !st || *st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !s ||
      cx_capture_any())
    return;
  pthread_mutex_lock(&g_mu);
  if (g_ncaps == 0)
    add_locked(CX_U64(s), CU_STREAM_CAPTURE_MODE_GLOBAL);
  pthread_mutex_unlock(&g_mu);
}

void custom_stream_is_capturing(cucap_call *c, CUresult r, CUstream s,
                                CUstreamCaptureStatus *st) {
  (void)c;
  learn(s, r, st);
}

void custom_get_capture_info(cucap_call *c, CUresult r, CUstream s,
                             CUstreamCaptureStatus *st, cuuint64_t *id) {
  (void)c, (void)id;
  learn(s, r, st);
}

void custom_get_capture_info_v2(cucap_call *c, CUresult r, CUstream s,
                                CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                const CUgraphNode **deps, size_t *n) {
  (void)c, (void)id, (void)g, (void)deps, (void)n;
  learn(s, r, st);
}

void custom_get_capture_info_v3(cucap_call *c, CUresult r, CUstream s,
                                CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                const CUgraphNode **deps, const CUgraphEdgeData **e,
                                size_t *n) {
  (void)c, (void)id, (void)g, (void)deps, (void)e, (void)n;
  learn(s, r, st);
}
