/* cupti_disasm_early.c - nvdisasm run beside the counter passes, for the
 * CUPTI engine's instruction resolution (cupti_sass.c, ck_sites_resolve).
 *
 * Why: the SASS text of the sampled instructions comes from one nvdisasm
 * process per cubin. Run after the PC-sampling pass, it would sit on the
 * profile's critical path (a large part of a second even for one small
 * cubin; CUCAP_LOG_LEVEL=info prints the profile's timing breakdown,
 * CUCAP_PROFILE_EARLY_DISASM=0 turns this thread off to compare, and
 * docs/bench-log.md, "nvdisasm", has the figures). Which instructions get
 * sampled is known only after that pass,
 * but which functions can be sampled is known after the timeline pass: the
 * kernels that ran in the window. So when PC sampling is requested, a
 * thread of its own starts nvdisasm on those kernels (-fun, their symbol
 * indices in each cubin the timeline pass loaded) as soon as the timeline
 * pass ends, and keeps each listing in memory; the counter passes run
 * meanwhile. ck_sites_resolve parses those listings, and runs nvdisasm
 * itself only for sampled functions no early listing covers (a non-inlined
 * device function, a cubin loaded later, an nvdisasm that refused -fun: it
 * then also disassembles the whole cubin, which this file never does).
 *
 * The thread touches only its own copies (job array, symbol lists) and the
 * cubin bytes, which never move or go away before ck_cubin_free; it makes
 * no CUDA or CUPTI call. Owns: E->early and its listings, released by
 * ck_disasm_early_free (which joins the thread). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cupti_internal.h"

typedef struct ck_early_job {
  size_t cubin;              /* index in E->cubin */
  const void *data;          /* E->cubin[cubin].data (stable) */
  size_t size;
  char *funs;                /* "3,17": symbol indices of the kernels */
  const char **names;        /* the same kernels' names (interned, E->str) */
  size_t nnames;
  char *text;                /* the listing kept (NULL: none) */
  size_t len;
} ck_early_job;

struct ck_disasm_early {
  pthread_t th;
  int on;                    /* th runs or has not been joined */
  char tool[1024];
  ck_early_job *job;
  size_t njob;
  unsigned parallel, runs;
  double wall_s;             /* the thread's own time */
};

static void ck_early_count(void *user, const char *function, uint64_t pc,
                           const char *text, const char *file, uint32_t line,
                           const char *chain) {
  (void)function, (void)pc, (void)text, (void)file, (void)line, (void)chain;
  ++*(size_t *)user;
}

/* Keeps a listing that has at least one instruction (the first variant
 * that gives one, -gi then -g). Runs on the early thread. */
static int ck_early_take(void *user, size_t job, const char *text, size_t len,
                         int whole) {
  ck_disasm_early *d = user;
  (void)whole;
  size_t n = 0;
  ck_disasm_parse(text, len, ck_early_count, &n);
  if (!n)
    return 0;
  ck_early_job *j = &d->job[job];
  j->text = malloc(len + 1);
  if (!j->text)
    return 0;
  memcpy(j->text, text, len);
  j->text[len] = 0;
  j->len = len;
  return 1;
}

static void *ck_early_main(void *u) {
  ck_disasm_early *d = u;
  double t0 = cucap_clock_now_s();
  ck_nvd_job *nj = calloc(d->njob, sizeof *nj);
  if (nj) {
    for (size_t i = 0; i < d->njob; i++) {
      nj[i].cubin = d->job[i].data;
      nj[i].size = d->job[i].size;
      nj[i].funs = d->job[i].funs;
      nj[i].whole_fallback = 0;
    }
    d->runs = ck_nvdisasm_run(d->tool, nj, d->njob, d->parallel, ck_early_take, d);
    free(nj);
  }
  d->wall_s = cucap_clock_now_s() - t0;
  return NULL;
}

static int ck_ptr_cmp(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (const char *const *)a;
  uintptr_t y = (uintptr_t) * (const char *const *)b;
  return x < y ? -1 : x > y;
}

/* The distinct kernel names of the window, sorted by pointer (interned). */
static const char **ck_early_names(const ck_engine *E, size_t *n) {
  const char **v = malloc((E->tl.nkern ? E->tl.nkern : 1) * sizeof *v);
  size_t m = 0;
  for (size_t k = 0; v && k < E->tl.nkern; k++)
    if (E->tl.kern[k].name)
      v[m++] = E->tl.kern[k].name;
  if (!v)
    return NULL;
  qsort(v, m, sizeof *v, ck_ptr_cmp);
  size_t u = 0;
  for (size_t i = 0; i < m; i++)
    if (!u || v[i] != v[u - 1])
      v[u++] = v[i];
  *n = u;
  return v;
}

/* One job for a cubin that holds some of the names: its indices and the
 * names found (which stay sorted by pointer). 0 when none is in its symbol
 * table (or out of memory). */
static int ck_early_job_make(ck_early_job *j, const ck_cubin *cb,
                             const char **names, size_t n) {
  j->names = malloc((n ? n : 1) * sizeof *j->names);
  j->funs = j->names ? ck_cubin_fun_indices(cb, names, n, j->names, &j->nnames)
                     : NULL;
  if (!j->funs) {
    free(j->names);
    j->names = NULL;
    return 0;
  }
  j->data = cb->data;
  j->size = cb->size;
  return 1;
}

void ck_disasm_early_start(ck_engine *E) {
  if (E->cb.early || !E->tl.nkern || !E->cb.ncubin)
    return;
  if (!cucap_knob_flag(CUCAP_KNOB(CUCAP_PROFILE_EARLY_DISASM)))
    return;
  ck_disasm_early *d = calloc(1, sizeof *d);
  if (!d)
    return;
  const char *tool = ck_nvdisasm_path(E, d->tool, sizeof d->tool);
  size_t nn = 0;
  const char **names = tool ? ck_early_names(E, &nn) : NULL;
  /* under cubin_mu: a module callback on another thread may grow the list
   * (symbol lookups only: no CUPTI call is made with it held) */
  pthread_mutex_lock(&E->cb.cubin_mu);
  size_t nc = E->cb.ncubin;
  d->job = names ? calloc(nc ? nc : 1, sizeof *d->job) : NULL;
  for (size_t ci = 0; d->job && ci < nc; ci++) {
    ck_early_job *j = &d->job[d->njob];
    j->cubin = ci;
    d->njob += ck_early_job_make(j, &E->cb.cubin[ci], names, nn);
  }
  pthread_mutex_unlock(&E->cb.cubin_mu);
  free(names);
  if (tool && tool != d->tool)
    snprintf(d->tool, sizeof d->tool, "%s", tool);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  /* half the CPUs: the passes keep the main thread and CUPTI's busy */
  d->parallel = ncpu < 4 ? 1 : ncpu / 2 > 8 ? 8 : (unsigned)(ncpu / 2);
  E->cb.early = d;
  if (!d->njob)
    return;
  d->on = pthread_create(&d->th, NULL, ck_early_main, d) == 0;
  CUCAP_DEBUG("profile: nvdisasm started beside the passes on %zu cubin(s)%s",
              d->njob, d->on ? "" : " (no thread: left for the resolution)");
}

static void ck_early_join(ck_engine *E) {
  ck_disasm_early *d = E->cb.early;
  if (!d || !d->on)
    return;
  double t0 = cucap_clock_now_s();
  pthread_join(d->th, NULL);
  d->on = 0;
  double waited = cucap_clock_now_s() - t0;
  E->tm.nvdisasm_s += waited; /* only the wait is on the critical path */
  E->tm.nvdisasm_runs += d->runs;
  size_t kept = 0;
  for (size_t i = 0; i < d->njob; i++)
    kept += d->job[i].text != NULL;
  CUCAP_DEBUG("profile: nvdisasm beside the passes: %u run(s) in %.3f s, %zu "
              "of %zu listing(s) kept, %.3f s waited for at the end", d->runs,
              d->wall_s, kept, d->njob, waited);
}

const char *ck_disasm_early_listing(ck_engine *E, size_t cubin, size_t *len,
                                    const char *const **names, size_t *nnames) {
  ck_early_join(E);
  ck_disasm_early *d = E->cb.early;
  for (size_t i = 0; d && i < d->njob; i++) {
    ck_early_job *j = &d->job[i];
    if (j->cubin != cubin || !j->text)
      continue;
    *len = j->len;
    *names = j->names;
    *nnames = j->nnames;
    return j->text;
  }
  return NULL;
}

int ck_disasm_early_has(const char *const *names, size_t n, const char *name) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)names[mid] < (uintptr_t)name)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && names[lo] == name;
}

void ck_disasm_early_free(ck_engine *E) {
  ck_disasm_early *d = E->cb.early;
  if (!d)
    return;
  if (d->on) {
    pthread_join(d->th, NULL);
    d->on = 0;
  }
  for (size_t i = 0; i < d->njob; i++) {
    free(d->job[i].funs);
    free(d->job[i].names);
    free(d->job[i].text);
  }
  free(d->job);
  free(d);
  E->cb.early = NULL;
}
