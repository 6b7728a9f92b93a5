/* state_observer.c - reads device memory at one record of a replay
 * (cucap_state_observer.h). */
#include "cucap_state_observer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"

typedef int (*ctx_sync_fn)(void); /* CUresult cuCtxSynchronize(void) */

struct cucap_state_observer {
  cucap_replay_observer ob;
  cucap_writer *w;
  uint64_t at;
  cucap_state_region *before, *after;
  size_t nbefore, nafter;
  int state;        /* 0 waiting, 1 before read (waiting for op_after), 2 done, -1 failed */
  ctx_sync_fn sync;
  uint64_t after_fnv;
  void *buf;        /* host buffer for one region */
  size_t cap;
  char problem[256];
};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static int read_regions(cucap_state_observer *o, cucap_replay_session *s,
                        cucap_state_region *g, size_t n, const char *when) {
  int after = when[0] == 'a'; /* "after": the result regions */
  if (o->sync && o->sync() != 0) {
    snprintf(o->problem, sizeof o->problem, "cuCtxSynchronize failed %s record %" PRIu64,
             when, o->at);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    if (g[i].size > o->cap) {
      void *nb = realloc(o->buf, g[i].size);
      if (!nb) {
        snprintf(o->problem, sizeof o->problem, "no host memory for %" PRIu64 " bytes",
                 g[i].size);
        return 0;
      }
      o->buf = nb;
      o->cap = g[i].size;
    }
    if (cucap_replay_session_read(s, g[i].address, o->buf, g[i].size) != CUCAP_OK) {
      snprintf(o->problem, sizeof o->problem,
               "cannot read device memory 0x%" PRIx64 "+%" PRIu64 " %s record %" PRIu64,
               g[i].address, g[i].size, when, o->at);
      return 0;
    }
    if (after)
      o->after_fnv = fnv(o->after_fnv, o->buf, g[i].size);
    cucap_status st = cucap_writer_put_blob(o->w, o->buf, g[i].size, &g[i].data);
    if (st != CUCAP_OK) {
      snprintf(o->problem, sizeof o->problem, "writing a blob: %s", cucap_status_str(st));
      return 0;
    }
    g[i].read = 1;
  }
  return 1;
}

static void fail(cucap_state_observer *o, cucap_replay_session *s) {
  o->state = -1;
  cucap_replay_session_fail(s, CUCAP_ERR_CUDA, "%s", o->problem);
}

static cucap_status so_begin(void *u, cucap_replay_session *s) {
  cucap_state_observer *o = u;
  o->sync = (ctx_sync_fn)cucap_replay_session_proc(s, "cuCtxSynchronize", 2000);
  if (!o->sync) {
    snprintf(o->problem, sizeof o->problem, "the driver has no cuCtxSynchronize");
    return CUCAP_ERR_ENV;
  }
  return CUCAP_OK;
}

static void so_before(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  cucap_state_observer *o = u;
  if (o->state != 0 || op->pass != 0 || op->rec_index < o->at)
    return;
  if (op->capturing) {
    snprintf(o->problem, sizeof o->problem,
             "record %" PRIu64 " comes while a stream is being captured: device memory "
             "cannot be read there (choose another range start)", op->rec_index);
    fail(o, s);
    return;
  }
  if (!read_regions(o, s, o->before, o->nbefore, "before")) {
    fail(o, s);
    return;
  }
  if (o->nafter) {
    if (op->rec_index != o->at) {
      snprintf(o->problem, sizeof o->problem,
               "record %" PRIu64 " was not executed in the replay", o->at);
      fail(o, s);
      return;
    }
    o->state = 1; /* read again once it executed */
    return;
  }
  o->state = 2;
  cucap_replay_session_stop(s);
}

static void so_after(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  cucap_state_observer *o = u;
  if (o->state != 1 || op->rec_index != o->at)
    return;
  if (op->status != 0) {
    snprintf(o->problem, sizeof o->problem, "record %" PRIu64 " was %s in the replay",
             o->at, op->status > 0 ? "skipped" : "not executed (failed)");
    fail(o, s);
    return;
  }
  if (!read_regions(o, s, o->after, o->nafter, "after")) {
    fail(o, s);
    return;
  }
  o->state = 2;
  cucap_replay_session_stop(s);
}

cucap_status cucap_state_observer_create(cucap_writer *w, uint64_t at,
                                         cucap_state_region *before, size_t nbefore,
                                         cucap_state_region *after, size_t nafter,
                                         cucap_state_observer **out) {
  *out = NULL;
  CUCAP_RETURN_IF(!w || (nbefore && !before) || (nafter && !after), CUCAP_ERR_INVALID_ARG);
  cucap_state_observer *o = calloc(1, sizeof *o);
  CUCAP_RETURN_IF(!o, CUCAP_ERR_NOMEM);
  o->w = w;
  o->at = at;
  o->before = before;
  o->nbefore = nbefore;
  o->after = after;
  o->nafter = nafter;
  o->after_fnv = 1469598103934665603ull;
  o->ob.name = "state";
  o->ob.user = o;
  o->ob.begin = so_begin;
  o->ob.op_before = so_before;
  o->ob.op_after = so_after;
  *out = o;
  return CUCAP_OK;
}

void cucap_state_observer_destroy(cucap_state_observer *o) {
  if (!o)
    return;
  free(o->buf);
  free(o);
}

uint64_t cucap_state_observer_after_checksum(const cucap_state_observer *o) {
  return o ? o->after_fnv : 0;
}

const cucap_replay_observer *cucap_state_observer_get(cucap_state_observer *o) {
  return o ? &o->ob : NULL;
}

cucap_status cucap_state_observer_result(const cucap_state_observer *o, char *msg,
                                         size_t msg_size) {
  if (o->state == 2)
    return CUCAP_OK;
  if (msg && msg_size)
    snprintf(msg, msg_size, "%s",
             o->problem[0] ? o->problem
                           : o->state == 1 ? "the replay ended before the record executed"
                                           : "the replay ended before reaching the record");
  return o->state == 1 || o->state == 0 ? CUCAP_ERR_NOT_FOUND : CUCAP_ERR_CUDA;
}
