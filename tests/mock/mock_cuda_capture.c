/* Mock driver: stream-capture rules like the real driver's, an optional
 * asynchronous execution mode, and synchronisation counts - what CI needs to
 * prove that a recorder never breaks a capture and never adds a
 * synchronisation. See mock_cuda.md ("Capture rules", "Asynchronous mode").
 *
 * Capture rules (cuThreadExchangeStreamCaptureMode's documentation): a
 * thread in mode GLOBAL is prohibited from potentially unsafe calls while it
 * has a capture of its own not begun RELAXED, or while another thread has a
 * capture begun GLOBAL; THREAD_LOCAL only for its own captures; RELAXED
 * never. A prohibited call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * and invalidates the captures that prohibit it (their cuStreamEndCapture
 * then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). Calls that
 * conflict with capture in every mode (synchronising/querying a capturing
 * stream or an event recorded in a capture, cuCtxSynchronize during any
 * capture, legacy-stream work while a blocking stream captures) fail and
 * invalidate likewise.
 *
 * Asynchronous mode (CUCAP_MOCK_ASYNC=1): work enqueued on a created
 * stream runs only when something waits for it - cuStreamSynchronize,
 * cuCtxSynchronize, cuEventSynchronize, cuStreamWaitEvent, frees, legacy
 * stream work (which waits for blocking streams), and a cuStreamQuery /
 * cuEventQuery that finds work pending (runs it and returns
 * CUDA_ERROR_NOT_READY once). Copies between device and pageable host
 * memory complete before the call returns, as the real driver's do.
 * Reading a DtoH destination before its stream was waited for therefore
 * gives stale bytes. Owner: tests/mock. */
#include "mock_cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- capture registry -------------------------------------------------------- */
#define MOCK_MAX_CAPTURES 64
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  struct mock_graph *g;
  CUstream s;
} caps[MOCK_MAX_CAPTURES];
static int ncaps;
static unsigned long long next_cap_id = 1;
static __thread CUstreamCaptureMode tls_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

int mock_capture_any(void) { return __atomic_load_n(&ncaps, __ATOMIC_ACQUIRE) != 0; }

int mock_capture_active(const struct mock_graph *g) {
  int found = 0;
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < ncaps && !found; i++) found = caps[i].g == g;
  pthread_mutex_unlock(&cap_lock);
  return found;
}

void mock_capture_register(struct mock_graph *g, CUstream s, CUstreamCaptureMode mode) {
  pthread_mutex_lock(&cap_lock);
  g->cap_mode = (int)mode;
  g->owner = pthread_self();
  g->invalidated = 0;
  g->cap_id = next_cap_id++;
  if (ncaps < MOCK_MAX_CAPTURES) {
    caps[ncaps].g = g;
    caps[ncaps].s = s;
    __atomic_store_n(&ncaps, ncaps + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&cap_lock);
}

void mock_capture_unregister(const struct mock_graph *g) {
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < ncaps; i++)
    if (caps[i].g == g) {
      caps[i] = caps[ncaps - 1];
      __atomic_store_n(&ncaps, ncaps - 1, __ATOMIC_RELEASE);
      break;
    }
  pthread_mutex_unlock(&cap_lock);
}

void mock_capture_invalidate(struct mock_graph *g) {
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < ncaps; i++)
    if (!g || caps[i].g == g) caps[i].g->invalidated = 1;
  pthread_mutex_unlock(&cap_lock);
}

CUresult mock_unsafe(void) {
  if (!mock_capture_any()) return CUDA_SUCCESS;
  CUstreamCaptureMode mode = tls_mode;
  if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  pthread_t self = pthread_self();
  int hit = 0;
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < ncaps; i++) {
    struct mock_graph *g = caps[i].g;
    int own = pthread_equal(g->owner, self);
    int prohibits = (own && g->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
                    (!own && mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                     g->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (prohibits) {
      g->invalidated = 1;
      hit = 1;
    }
  }
  pthread_mutex_unlock(&cap_lock);
  return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult mock_legacy_check(CUstream s, int per_thread_build) {
  int legacy = s == CU_STREAM_LEGACY || (s == NULL && !per_thread_build);
  if (!legacy || !mock_capture_any()) return CUDA_SUCCESS;
  int hit = 0;
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < ncaps; i++)
    if (!(caps[i].s->flags & CU_STREAM_NON_BLOCKING)) {
      caps[i].g->invalidated = 1;
      hit = 1;
    }
  pthread_mutex_unlock(&cap_lock);
  return hit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode old = tls_mode;
  tls_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

/* ---- asynchronous mode ---------------------------------------------------------- */
struct mock_queue {
  mock_op *ops;
  size_t head, n, cap;
};

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static int async_mode = -1; /* __atomic: threads may ask first at once */

int mock_async(void) {
  int m = __atomic_load_n(&async_mode, __ATOMIC_RELAXED);
  if (m < 0) {
    const char *e = getenv("CUCAP_MOCK_ASYNC");
    m = e && *e == '1';
    __atomic_store_n(&async_mode, m, __ATOMIC_RELAXED);
  }
  return m;
}

static struct CUstream_st *stream_list_head(void);

CUresult mock_enqueue(CUstream s, mock_op *op) {
  pthread_mutex_lock(&q_lock);
  struct mock_queue *q = s->q;
  if (!q) q = s->q = calloc(1, sizeof *q);
  if (!q) { pthread_mutex_unlock(&q_lock); free(op->argbuf); return CUDA_ERROR_OUT_OF_MEMORY; }
  if (q->head + q->n == q->cap) {
    if (q->head) { /* compact */
      memmove(q->ops, q->ops + q->head, q->n * sizeof *q->ops);
      q->head = 0;
    }
    if (q->n == q->cap) {
      size_t nc = q->cap ? q->cap * 2 : 32;
      mock_op *no = realloc(q->ops, nc * sizeof *no);
      if (!no) { pthread_mutex_unlock(&q_lock); free(op->argbuf); return CUDA_ERROR_OUT_OF_MEMORY; }
      q->ops = no;
      q->cap = nc;
    }
  }
  q->ops[q->head + q->n++] = *op;
  pthread_mutex_unlock(&q_lock);
  return CUDA_SUCCESS;
}

/* Runs s's queued work up to (and including) the first mark of (e, gen);
 * everything when e is NULL. q_lock held. Returns 1 if anything ran. */
static int drain_locked(CUstream s, CUevent e, unsigned long gen) {
  struct mock_queue *q = s ? s->q : NULL;
  int ran = 0;
  while (q && q->n) {
    mock_op op = q->ops[q->head++];
    q->n--;
    ran = 1;
    if (op.kind == MOCK_OP_MARK) {
      if (op.event->magic == MOCK_MAGIC_EVENT && op.gen > op.event->done_gen) {
        op.event->done_gen = op.gen;
        op.event->time_ms = mock_now_ms();
        op.event->recorded = 1;
      }
      if (e && op.event == e && op.gen == gen) break;
      continue;
    }
    (void)mock_run_op(&op); /* errors of queued work are not reported (as async faults) */
    free(op.argbuf);
  }
  if (q && !q->n) q->head = 0;
  return ran;
}

int mock_stream_pending(CUstream s) {
  pthread_mutex_lock(&q_lock);
  int n = s->q && s->q->n;
  pthread_mutex_unlock(&q_lock);
  return n;
}

void mock_drain_stream(CUstream s) {
  if (!mock_async() || !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return;
  pthread_mutex_lock(&q_lock);
  drain_locked(s, NULL, 0);
  pthread_mutex_unlock(&q_lock);
}

int mock_drain_event(CUevent e) {
  if (!mock_async()) return 0;
  pthread_mutex_lock(&q_lock);
  int pending = e->done_gen != e->rec_gen;
  if (pending && e->rec_stream) drain_locked(e->rec_stream, e, e->rec_gen);
  pthread_mutex_unlock(&q_lock);
  return pending;
}

void mock_drain_all(int blocking_only) {
  if (!mock_async()) return;
  pthread_mutex_lock(&q_lock);
  pthread_mutex_lock(&mock_lock);
  struct CUstream_st *head = stream_list_head();
  pthread_mutex_unlock(&mock_lock);
  /* streams are unlinked only with q_lock held (mock_queue_lock) */
  for (CUstream s = head; s; s = s->next)
    if (!blocking_only || !(s->flags & CU_STREAM_NON_BLOCKING)) drain_locked(s, NULL, 0);
  pthread_mutex_unlock(&q_lock);
}

void mock_queue_lock(void) { pthread_mutex_lock(&q_lock); }
void mock_queue_unlock(void) { pthread_mutex_unlock(&q_lock); }

void mock_stream_gone(CUstream s) {
  if (!s || !s->q) return;
  pthread_mutex_lock(&q_lock);
  drain_locked(s, NULL, 0);
  free(s->q->ops);
  free(s->q);
  s->q = NULL;
  pthread_mutex_unlock(&q_lock);
}

static struct CUstream_st *stream_list_head(void) { return mock_all_streams; }

/* ---- synchronisation counts ---------------------------------------------------- */
static unsigned long sync_counts[3];

void mock_count_sync(int kind) { __atomic_fetch_add(&sync_counts[kind], 1, __ATOMIC_RELAXED); }

__attribute__((destructor)) static void mock_sync_report(void) {
  const char *path = getenv("CUCAP_MOCK_SYNC_LOG");
  if (!path || !*path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "ctx_synchronize=%lu stream_synchronize=%lu event_synchronize=%lu\n",
          sync_counts[MOCK_SYNC_CTX], sync_counts[MOCK_SYNC_STREAM], sync_counts[MOCK_SYNC_EVENT]);
  fclose(f);
}
