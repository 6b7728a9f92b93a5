/* cupti_calls.c - how the CUPTI engine calls CUPTI (profile/cupti/cupti_*.c):
 * every call checked and logged with CUPTI's error string (CK_CALL), what a
 * CUPTI_ERROR_HARDWARE_BUSY means for the user, CUPTI's own health (after
 * an internal error CUPTI may have torn itself down: ck_cupti_alive checks
 * that its driver callback still fires, and once it does not, the engine
 * calls CUPTI no more), activity kinds enabled and disabled in pairs
 * (ck_act_set), and the engine's small shared helpers (growth, interned
 * strings). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_log.h"
#include "cupti_internal.h"


/* What a CUPTI_ERROR_HARDWARE_BUSY means for the user: the counters (and
 * PC sampling) of a GPU serve one profiling session at a time. */
#define CK_BUSY_HINT                                                           \
  "another process is profiling this GPU (Nsight Compute `ncu`, `nsys "        \
  "--gpu-metrics-devices`, DCGM profiling metrics, another `cucap replay "     \
  "--profile` or `cucap cupti profile`): the GPU's counters serve one "        \
  "profiler at a time; let it finish or stop it (`nvidia-smi` lists the "      \
  "processes on the GPU; `dcgmi profile --pause` pauses DCGM), then run "      \
  "again"

int ck_check(ck_engine *E, CUptiResult r, const char *fn) {
  if (r == CUPTI_SUCCESS)
    return 1;
  E->last = r;
  char buf[200];
  ck_strerror(&E->api, r, buf, sizeof buf);
  if (r == CUPTI_ERROR_HARDWARE_BUSY)
    snprintf(E->last_msg, sizeof E->last_msg, "%.100s failed: %.200s: %s", fn,
             buf, CK_BUSY_HINT);
  else
    snprintf(E->last_msg, sizeof E->last_msg, "%.100s failed: %.200s", fn, buf);
  cucap_log(E->quiet ? CUCAP_LOG_DEBUG : CUCAP_LOG_WARN, "cupti: %s",
            E->last_msg);
  /* an internal error may mean CUPTI detached itself: check before the next
   * call (the error is kept in last/last_msg either way) */
  if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED) {
    CUptiResult keep = E->last;
    char msg[sizeof E->last_msg];
    memcpy(msg, E->last_msg, sizeof msg);
    ck_cupti_alive(E, fn);
    E->last = keep;
    memcpy(E->last_msg, msg, sizeof msg);
  }
  return 0;
}

int ck_skip(ck_engine *E, const char *fn) {
  (void)fn;
  E->last = CUPTI_ERROR_NOT_INITIALIZED;
  snprintf(E->last_msg, sizeof E->last_msg, "%s", E->dead_why);
  return 0;
}

int ck_cupti_alive(ck_engine *E, const char *fn) {
  if (E->dead)
    return 0;
  if (!E->attached || !E->sub || !E->cu.CtxGetCurrent)
    return 1; /* cannot tell yet */
  E->probe_hits = 0;
  E->probing = 1;
  int own = E->own_call;
  E->own_call = 1;
  CUcontext c = NULL;
  E->cu.CtxGetCurrent(&c);
  if (E->cu.DriverGetVersion) {
    int v = 0;
    E->cu.DriverGetVersion(&v);
  }
  E->own_call = own;
  E->probing = 0;
  if (E->probe_hits)
    return 1;
  E->dead = 1;
  snprintf(E->dead_why, sizeof E->dead_why,
           "CUPTI stopped working in this process after %.300s (it no longer "
           "calls back: it detached itself); this happens when %s",
           E->last_msg[0] ? E->last_msg : fn, CK_BUSY_HINT);
  CUCAP_ERROR("profile: %s; no further CUPTI call is made, what was "
              "collected is kept", E->dead_why);
  ck_timeline_forget(E); /* CUPTI's buffer threads must not find the engine */
  E->act_on = 0;         /* nothing to disable any more */
  E->sub = NULL;
  return 0;
}

int ck_act_set(ck_engine *E, CUpti_ActivityKind kind, int on) {
  unsigned bit = (unsigned)kind < 32 ? 1u << kind : 0;
  if (!bit)
    return 0;
  if (!!(E->act_on & bit) == !!on)
    return 1; /* already so (or never enabled by this engine) */
  int ok = on ? CK_CALL(E, cuptiActivityEnable, kind)
              : CK_CALL(E, cuptiActivityDisable, kind);
  if (on && ok)
    E->act_on |= bit;
  else if (!on)
    E->act_on &= ~bit; /* a failed disable is not tried again */
  return ok;
}

int ck_missing(ck_engine *E, const char *fn) {
  E->last = CUPTI_ERROR_API_NOT_IMPLEMENTED;
  snprintf(E->last_msg, sizeof E->last_msg, "%.100s is not exported by %.300s", fn,
           E->api.path);
  cucap_log(E->quiet ? CUCAP_LOG_DEBUG : CUCAP_LOG_WARN, "cupti: %s",
            E->last_msg);
  return 0;
}

/* ------------------------------------------------------------ strings */

static uint64_t ck_fnv(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

const char *ck_intern_n(ck_strtab *t, const char *s, size_t len) {
  if (!s)
    return NULL;
  uint64_t h = ck_fnv(s, len);
  for (uint64_t probe = 0;; probe++) {
    uint64_t v = 0;
    if (!cucap_map_get(&t->idx, h + probe, &v))
      break;
    const char *c = t->s[v - 1];
    if (strlen(c) == len && !memcmp(c, s, len))
      return c;
  }
  if (!cucap_vec_reserve(&t->s, &t->cap, t->n + 1, sizeof *t->s, 16))
    return NULL;
  char *d = malloc(len + 1);
  if (!d)
    return NULL;
  memcpy(d, s, len);
  d[len] = 0;
  uint64_t probe = 0;
  while (cucap_map_get(&t->idx, h + probe, NULL))
    probe++;
  if (!cucap_map_put(&t->idx, h + probe, t->n + 1)) {
    free(d);
    return NULL;
  }
  t->s[t->n++] = d;
  return d;
}

const char *ck_intern(ck_strtab *t, const char *s) {
  return s ? ck_intern_n(t, s, strlen(s)) : NULL;
}

void ck_strtab_free(ck_strtab *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->s[i]);
  free(t->s);
  cucap_map_free(&t->idx);
  memset(t, 0, sizeof *t);
}
