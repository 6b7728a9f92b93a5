/* rec_query.c - pure queries counted per thread, flushed as QueryCounts
 * records. See cucap_rec_query.h. */
#include "cucap_rec_query.h"

#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_schema.h"

static size_t g_napis;
static const uint32_t *g_cbid;
static const uint8_t *g_variant;
static pthread_mutex_t g_list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cucap_rec_qtab *g_list; /* every live table, under g_list_mu */

void cucap_rec_query_init(size_t napis, const uint32_t *cbid, const uint8_t *variant) {
  g_napis = napis;
  g_cbid = cbid;
  g_variant = variant;
}

static struct cucap_rec_qtab *qtab_create(cucap_rec_thread *th) {
  if (!g_napis)
    return NULL;
  struct cucap_rec_qtab *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->ok = calloc(g_napis, sizeof *q->ok);
  q->ok_flushed = calloc(g_napis, sizeof *q->ok_flushed);
  q->touched = calloc(g_napis, sizeof *q->touched);
  if (!q->ok || !q->ok_flushed || !q->touched) {
    free((void *)q->ok);
    free(q->ok_flushed);
    free(q->touched);
    free(q);
    return NULL;
  }
  pthread_mutex_init(&q->mu, NULL);
  q->tid = th->tid;
  q->t_flush = cucap_rec_now();
  th->q_flushed = q->t_flush;
  pthread_mutex_lock(&g_list_mu);
  q->next = g_list;
  if (g_list)
    g_list->prev = q;
  g_list = q;
  q->linked = 1;
  pthread_mutex_unlock(&g_list_mu);
  return q;
}

static void qtab_free(struct cucap_rec_qtab *q) {
  pthread_mutex_destroy(&q->mu);
  free((void *)q->ok);
  free(q->ok_flushed);
  free(q->touched);
  free(q);
}

int cucap_rec_query_count_slow(cucap_rec_thread *th, uint32_t api, int result) {
  if (api >= g_napis)
    return 0;
  struct cucap_rec_qtab *q = th->q;
  if (!q && !(q = th->q = qtab_create(th)))
    return 0;
  if (result == 0) {
    uint64_t c = atomic_load_explicit(&q->ok[api], memory_order_relaxed);
    if (c == 0) { /* first success of this entry point on this thread */
      uint32_t n = atomic_load_explicit(&q->ntouched, memory_order_relaxed);
      q->touched[n] = api;
      atomic_store_explicit(&q->ntouched, n + 1, memory_order_release);
    }
    atomic_store_explicit(&q->ok[api], c + 1, memory_order_relaxed);
    return 1;
  }
  uint64_t key = ((uint64_t)api + 1) << 32 | (uint32_t)result;
  for (size_t i = 0; i < CUCAP_REC_QUERY_ERRS; i++) {
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 58) + i;
    cucap_rec_qerr *e = &q->err[j % CUCAP_REC_QUERY_ERRS];
    uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);
    if (k == key) {
      atomic_store_explicit(&e->count,
                            atomic_load_explicit(&e->count, memory_order_relaxed) + 1,
                            memory_order_relaxed);
      return 1;
    }
    if (k == 0) {
      /* count first, then publish the key and the slot: a flusher that
       * sees them sees a count >= 1 */
      atomic_store_explicit(&e->count, 1, memory_order_relaxed);
      atomic_store_explicit(&e->key, key, memory_order_release);
      uint32_t n = atomic_load_explicit(&q->nerr, memory_order_relaxed);
      q->err_used[n] = (uint8_t)(j % CUCAP_REC_QUERY_ERRS);
      atomic_store_explicit(&q->nerr, n + 1, memory_order_release);
      return 1;
    }
  }
  return 0; /* full: recorded one by one */
}

/* Writes q's counts since its previous flush as one QueryCounts record.
 * q->mu held. */
static void flush_locked(struct cucap_rec_qtab *q, uint64_t now) {
  enum { MAXE = 1024 };
  cucap_fbb *b = NULL;
  cucap_fb_ref refs[MAXE];
  size_t n = 0;
  uint32_t nt = atomic_load_explicit(&q->ntouched, memory_order_acquire);
  uint32_t ne = atomic_load_explicit(&q->nerr, memory_order_acquire);
  for (uint32_t i = 0; i < nt + ne; i++) {
    uint32_t api;
    int32_t result;
    uint64_t c, d;
    if (i < nt) {
      api = q->touched[i];
      result = 0;
      c = atomic_load_explicit(&q->ok[api], memory_order_relaxed);
      d = c - q->ok_flushed[api];
    } else {
      cucap_rec_qerr *e = &q->err[q->err_used[i - nt]];
      uint64_t key = atomic_load_explicit(&e->key, memory_order_acquire);
      if (!key)
        continue;
      api = (uint32_t)(key >> 32) - 1;
      result = (int32_t)(uint32_t)key;
      c = atomic_load_explicit(&e->count, memory_order_relaxed);
      d = c - e->flushed;
    }
    if (!d || api >= g_napis)
      continue;
    if (!b && !(b = cucap_fbb_create(4096)))
      return; /* out of memory: counted next time */
    if (n == MAXE)
      break; /* the rest next time */
    cucap_fb_query_count_start(b);
    cucap_fb_query_count_add_call(b, g_cbid[api]);
    if (g_variant[api])
      cucap_fb_query_count_add_variant(b, g_variant[api]);
    cucap_fb_query_count_add_result(b, result);
    cucap_fb_query_count_add_count(b, d);
    refs[n++] = cucap_fb_query_count_end(b);
    if (i < nt)
      q->ok_flushed[api] = c;
    else
      q->err[q->err_used[i - nt]].flushed = c;
    cucap_rec_count_recorded(g_cbid[api], d);
  }
  if (b) {
    cucap_fb_ref v = cucap_fbb_vector_refs(b, refs, n);
    cucap_fb_query_counts_start(b);
    cucap_fb_query_counts_add_entries(b, v);
    cucap_fb_ref body = cucap_fb_query_counts_end(b);
    cucap_status st = cucap_rec_emit_as(b, CUCAP_FB_BODY_QUERYCOUNTS, body, q->tid,
                                        q->t_flush, now);
    if (st != CUCAP_OK && st != CUCAP_ERR_STATE)
      CUCAP_DEBUG("query counts not recorded: %s", cucap_status_str(st));
    cucap_fbb_destroy(b);
  }
  q->t_flush = now;
}

static void flush(struct cucap_rec_qtab *q, int may_block) {
  if (may_block)
    pthread_mutex_lock(&q->mu);
  else if (pthread_mutex_trylock(&q->mu) != 0)
    return;
  flush_locked(q, cucap_rec_now());
  pthread_mutex_unlock(&q->mu);
}

void cucap_rec_query_flush_due(cucap_rec_thread *th, uint64_t now) {
  struct cucap_rec_qtab *q = th->q;
  if (!q)
    return;
  pthread_mutex_lock(&q->mu);
  flush_locked(q, now);
  pthread_mutex_unlock(&q->mu);
  th->q_flushed = now;
}

void cucap_rec_query_flush_self(void) {
  cucap_rec_thread *th = cucap_rec_thread_peek();
  if (th && th->q) {
    flush(th->q, 1);
    th->q_flushed = cucap_rec_now();
  }
}

void cucap_rec_query_flush_all(int from_signal) {
  if (from_signal) {
    if (pthread_mutex_trylock(&g_list_mu) != 0)
      return;
  } else {
    pthread_mutex_lock(&g_list_mu);
  }
  for (struct cucap_rec_qtab *q = g_list; q; q = q->next)
    flush(q, !from_signal);
  pthread_mutex_unlock(&g_list_mu);
}

void cucap_rec_query_thread_exit(cucap_rec_thread *th) {
  struct cucap_rec_qtab *q = th->q;
  if (!q)
    return;
  th->q = NULL;
  pthread_mutex_lock(&g_list_mu);
  if (q->linked) {
    if (q->prev)
      q->prev->next = q->next;
    else
      g_list = q->next;
    if (q->next)
      q->next->prev = q->prev;
    q->linked = 0;
  }
  pthread_mutex_unlock(&g_list_mu);
  if (cucap_rec_active())
    flush(q, 1);
  qtab_free(q);
}
