/* analyze_find.c - finding helpers and the memory and synchronisation
 * findings of the analysis: allocation churn, small transfers (with the
 * achieved bandwidth), pageable host memory in copies, synchronisation
 * calls and the GPU idle time after them. Definitions and estimates are in
 * docs/design.md ("Program analysis"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "analyze_internal.h"
#include "cucap_schema.h"
#include "cucap_units.h"
#include "cucap_vec.h"

/* ------------------------------------------------------------ helpers */

cucap_finding *az_finding_new(cucap_analysis *a, const char *id) {
  if (!CUCAP_VEC_RESERVE(a->findings, a->capfind, a->nfind + 1, 8))
    return NULL;
  cucap_finding *f = &a->findings[a->nfind++];
  memset(f, 0, sizeof *f);
  snprintf(f->id, sizeof f->id, "%s", id);
  return f;
}

void az_num(cucap_finding *f, const char *name, const char *unit, double v) {
  if (f->nnumbers >= CUCAP_FINDING_MAX_NUMBERS)
    return;
  cucap_finding_number *n = &f->numbers[f->nnumbers++];
  snprintf(n->name, sizeof n->name, "%s", name);
  snprintf(n->unit, sizeof n->unit, "%s", unit);
  n->value = v;
}

double az_window_ns(const cucap_analysis *a) {
  uint64_t d = a->window_t1 > a->window_t0 ? a->window_t1 - a->window_t0 : 0;
  return d ? (double)d : 1.0;
}

int az_in_window(const cucap_analysis *a, const az_ev *e) {
  return e->t0 >= a->window_t0;
}

void az_finish(cucap_analysis *a, cucap_finding *f, uint64_t recoverable_ns, int estimated,
               cucap_severity count_severity) {
  f->estimated = estimated;
  f->recoverable_ns = estimated ? recoverable_ns : 0;
  f->recoverable_pct = estimated ? 100.0 * (double)recoverable_ns / az_window_ns(a) : 0;
  if (!estimated) {
    f->severity = count_severity;
    return;
  }
  double p = f->recoverable_pct;
  f->severity = p >= CUCAP_ANALYZE_HIGH_PCT     ? CUCAP_SEVERITY_HIGH
                : p >= CUCAP_ANALYZE_MEDIUM_PCT ? CUCAP_SEVERITY_MEDIUM
                : p >= CUCAP_ANALYZE_LOW_PCT    ? CUCAP_SEVERITY_LOW
                                                : CUCAP_SEVERITY_INFO;
}

void az_site_add(az_sites *t, uint32_t stack, uint64_t count, uint64_t time_ns) {
  uint64_t v = 0;
  if (cucap_map_get(&t->idx, stack, &v) && v) {
    t->s[v - 1].count += count;
    t->s[v - 1].time_ns += time_ns;
    return;
  }
  if (!CUCAP_VEC_RESERVE(t->s, t->cap, t->n + 1, 16))
    return;
  if (!cucap_map_put(&t->idx, stack, t->n + 1))
    return;
  t->s[t->n++] = (cucap_finding_site){stack, count, time_ns};
}

void az_sites_free(az_sites *t) {
  free(t->s);
  cucap_map_free(&t->idx);
  memset(t, 0, sizeof *t);
}

static int cmp_site(const void *x, const void *y) {
  const cucap_finding_site *a = x, *b = y;
  if (a->time_ns != b->time_ns)
    return a->time_ns > b->time_ns ? -1 : 1;
  if (a->count != b->count)
    return a->count > b->count ? -1 : 1;
  return a->stack < b->stack ? -1 : a->stack > b->stack;
}

void az_sites_take(cucap_analysis *a, cucap_finding *f, az_sites *t) {
  if (t->n)
    cucap_sort(t->s, t->n, sizeof *t->s, cmp_site);
  f->nsites = 0;
  for (size_t i = 0; i < t->n && f->nsites < a->o.max_sites; i++)
    f->sites[f->nsites++] = t->s[i];
  free(t->s);
  cucap_map_free(&t->idx);
  memset(t, 0, sizeof *t);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* median of v[0..n) (sorts v); 0 for n == 0 */
static uint64_t median_u64(uint64_t *v, size_t n) {
  if (!n)
    return 0;
  cucap_sort(v, n, sizeof *v, cmp_u64);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cmp_dbl(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* The time a copy took, when it can be known: its GPU duration from a
 * profile; else the host time of an async call (the enqueue, which for
 * pageable memory includes the staging copy) unless the recorder
 * synchronised it; else the host time of a synchronous copy that found
 * nothing queued before it. 0 = unknown. */
static uint64_t copy_time(const az_ev *e) {
  if (e->gpu_ns)
    return e->gpu_ns;
  if ((e->flags & AZF_ASYNC) && !(e->flags & AZF_RECSYNC))
    return e->t1 - e->t0 ? e->t1 - e->t0 : 1;
  if (!(e->flags & AZF_ASYNC) && (e->flags & AZF_CLEAN))
    return e->t1 - e->t0 ? e->t1 - e->t0 : 1;
  return 0;
}

/* Transfer bandwidth of a copy in GB/s, when its time is the transfer's:
 * GPU-measured, or a synchronous copy with nothing queued before it. */
static double copy_gbps(const az_ev *e) {
  uint64_t t = e->gpu_ns;
  if (!t && !(e->flags & AZF_ASYNC) && (e->flags & AZF_CLEAN))
    t = e->t1 - e->t0;
  return t ? (double)e->bytes / (double)t : 0; /* bytes/ns == GB/s */
}

/* ------------------------------------------------------------ churn */

static void find_churn(cucap_analysis *a) {
  uint64_t n_alloc = 0, n_free = 0, n_host = 0, n_pool = 0, t_dev = 0, t_host = 0;
  uint64_t bytes = 0, same_size = 0;
  cucap_map freed;     /* size -> frees not yet matched by an allocation */
  cucap_map live;      /* address -> size (whole capture) */
  memset(&freed, 0, sizeof freed);
  memset(&live, 0, sizeof live);
  az_sites sites = {0};
  /* A free after the last GPU work of a buffer allocated before the first
   * work or before the window (or never seen allocated) is the program's
   * teardown: setup buffers freed once at exit are not churn. A buffer
   * allocated between works and freed after the last one still is (the
   * last step's cycle). */
  cucap_map born; /* address -> index of its allocation + 1 */
  memset(&born, 0, sizeof born);
  size_t work_begin = a->nev, work_end = 0;
  uint64_t n_exit_free = 0;
  for (size_t i = 0; i < a->nev; i++)
    if (a->ev[i].kind == AZ_LAUNCH || a->ev[i].kind == AZ_GRAPH || a->ev[i].kind == AZ_COPY ||
        a->ev[i].kind == AZ_MEMSET) {
      if (work_begin == a->nev)
        work_begin = i;
      work_end = i + 1;
    }
  for (size_t i = 0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (e->kind != AZ_ALLOC && e->kind != AZ_FREE)
      continue;
    uint64_t size = e->bytes, c = 0;
    uint64_t b1 = 0;
    if (e->kind == AZ_ALLOC) {
      cucap_map_put(&live, e->addr, e->bytes);
      cucap_map_put(&born, e->addr, i + 1);
    } else {
      if (cucap_map_get(&live, e->addr, &size))
        cucap_map_del(&live, e->addr, NULL);
      if (cucap_map_get(&born, e->addr, &b1))
        cucap_map_del(&born, e->addr, NULL);
    }
    if (!az_in_window(a, e))
      continue;
    if (e->kind == AZ_FREE && i >= work_end && (!b1 || b1 - 1 < work_begin ||
                                                !az_in_window(a, &a->ev[b1 - 1]))) {
      n_exit_free++;
      continue;
    }
    uint64_t t = e->t1 - e->t0;
    if (e->flags & AZF_HOSTMEM) {
      n_host++;
      t_host += t;
    } else {
      t_dev += t;
    }
    if (e->sub == CUCAP_FB_ALLOCKIND_ASYNC || e->sub == CUCAP_FB_ALLOCKIND_FROMPOOL)
      n_pool++;
    if (e->kind == AZ_ALLOC) {
      n_alloc++;
      bytes += e->bytes;
      if (cucap_map_get(&freed, e->bytes, &c) && c) {
        same_size++;
        cucap_map_put(&freed, e->bytes, c - 1);
      }
    } else {
      n_free++;
      if (size) {
        cucap_map_get(&freed, size, &c);
        cucap_map_put(&freed, size, c + 1);
      }
    }
    az_site_add(&sites, e->stack, 1, t);
  }
  cucap_map_free(&freed);
  cucap_map_free(&live);
  cucap_map_free(&born);
  if (!n_alloc && !n_free) {
    az_sites_free(&sites);
    return;
  }
  cucap_finding *f = az_finding_new(a, "alloc_churn");
  if (!f) {
    az_sites_free(&sites);
    return;
  }
  double ws = az_window_ns(a) / 1e9;
  uint64_t total = t_dev + t_host;
  snprintf(f->title, sizeof f->title,
           "allocation churn: %llu allocations and %llu frees in the %s (%.0f/s), "
           "%.3f ms in the calls",
           (unsigned long long)n_alloc, (unsigned long long)n_free,
           a->sum.steady ? "steady state" : "capture", (double)(n_alloc + n_free) / ws,
           (double)total / 1e6);
  az_num(f, "allocs", "", (double)n_alloc);
  az_num(f, "frees", "", (double)n_free);
  az_num(f, "rate", "/s", (double)(n_alloc + n_free) / ws);
  az_num(f, "time_in_calls", "ns", (double)total);
  az_num(f, "device_calls_time", "ns", (double)t_dev);
  az_num(f, "pinned_host_calls", "", (double)n_host);
  az_num(f, "pinned_host_calls_time", "ns", (double)t_host);
  az_num(f, "stream_ordered_calls", "", (double)n_pool);
  az_num(f, "bytes_allocated", "bytes", (double)bytes);
  az_num(f, "same_size_reallocs", "", (double)same_size);
  if (n_exit_free)
    az_num(f, "exit_frees_not_counted", "", (double)n_exit_free);
  snprintf(f->estimate, sizeof f->estimate,
           "the host time of the allocation and free calls in the window (a reused "
           "buffer costs none; cuMemFree also waits for the device)");
  snprintf(f->advice, sizeof f->advice,
           "allocate once and reuse: a caching allocator (PyTorch's is on unless "
           "PYTORCH_NO_CUDA_MEMORY_CACHING is set), cuMemAllocAsync from a pool with a "
           "release threshold, or keep pinned staging buffers alive across steps");
  az_sites_take(a, f, &sites);
  az_finish(a, f, total, 1, CUCAP_SEVERITY_INFO);
}

/* ------------------------------------------------------------ transfers */

static const uint64_t bucket_lim[5] = {1024, 4096, 65536, 1u << 20, 16u << 20};
static const char *const bucket_name[6] = {"copies_lt_1k", "copies_1k_4k", "copies_4k_64k",
                                           "copies_64k_1m", "copies_1m_16m", "copies_ge_16m"};

/* best and median achieved GB/s of big copies of one direction/memory kind */
static void bw_stats(const cucap_analysis *a, int dir, uint16_t mem, double *best, double *med,
                     size_t *n) {
  *best = *med = 0;
  *n = 0;
  size_t cap = 0;
  double *v = NULL;
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (e->kind != AZ_COPY || e->sub != dir || !(e->flags & mem) ||
        e->bytes < CUCAP_ANALYZE_BW_MIN_COPY || !az_in_window(a, e))
      continue;
    double g = copy_gbps(e);
    if (g <= 0)
      continue;
    if (!CUCAP_VEC_RESERVE(v, cap, *n + 1, 32))
      break;
    v[(*n)++] = g;
  }
  if (*n) {
    cucap_sort(v, *n, sizeof *v, cmp_dbl);
    *best = v[*n - 1];
    *med = *n % 2 ? v[*n / 2] : (v[*n / 2 - 1] + v[*n / 2]) / 2;
  }
  free(v);
}

/* The host<->device copies of the window, counted by size; the small ones'
 * times and call sites. */
typedef struct small_tally {
  uint64_t hist[6], n_host, n_small, bytes_small;
  uint64_t n_timed, t_timed, bytes_timed;
  size_t cap, nt;
  uint64_t *times; /* of the timed small copies */
  az_sites sites;
} small_tally;

static void tally_small(cucap_analysis *a, small_tally *s) {
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (e->kind != AZ_COPY || (e->sub != AZ_DIR_H2D && e->sub != AZ_DIR_D2H) ||
        (e->flags & AZF_CAPTURED) || !az_in_window(a, e))
      continue;
    s->n_host++;
    int b = 0;
    while (b < 5 && e->bytes >= bucket_lim[b])
      b++;
    s->hist[b]++;
    if (e->bytes >= CUCAP_ANALYZE_SMALL_COPY)
      continue;
    s->n_small++;
    s->bytes_small += e->bytes;
    uint64_t t = copy_time(e);
    az_site_add(&s->sites, e->stack, 1, t);
    if (!t)
      continue;
    s->n_timed++;
    s->t_timed += t;
    s->bytes_timed += e->bytes;
    if (!CUCAP_VEC_RESERVE(s->times, s->cap, s->nt + 1, 64))
      continue;
    s->times[s->nt++] = t;
  }
}

/* The best and median GB/s of big copies per direction and memory kind,
 * next to the small copies' numbers. */
static void small_bw_nums(const cucap_analysis *a, cucap_finding *f) {
  static const struct { int dir; uint16_t mem; const char *best, *med; } bwk[4] = {
      {AZ_DIR_H2D, AZF_PINNED, "htod_pinned_best", "htod_pinned_median"},
      {AZ_DIR_H2D, AZF_PAGEABLE, "htod_pageable_best", "htod_pageable_median"},
      {AZ_DIR_D2H, AZF_PINNED, "dtoh_pinned_best", "dtoh_pinned_median"},
      {AZ_DIR_D2H, AZF_PAGEABLE, "dtoh_pageable_best", "dtoh_pageable_median"}};
  for (int k = 0; k < 4; k++) {
    double best, m;
    size_t n;
    bw_stats(a, bwk[k].dir, bwk[k].mem, &best, &m, &n);
    if (n) {
      az_num(f, bwk[k].best, "GB/s", best);
      az_num(f, bwk[k].med, "GB/s", m);
    }
  }
}

static void find_small(cucap_analysis *a) {
  small_tally s = {0};
  tally_small(a, &s);
  if (!s.n_host) {
    az_sites_free(&s.sites);
    free(s.times);
    return;
  }
  cucap_finding *f = az_finding_new(a, "small_transfers");
  if (!f) {
    az_sites_free(&s.sites);
    free(s.times);
    return;
  }
  double bw = a->sum.link_gbps > 0 ? a->sum.link_gbps : 1;
  uint64_t med = median_u64(s.times, s.nt);
  free(s.times);
  uint64_t rec = 0;
  int estimated = s.n_timed > 0;
  if (estimated) {
    /* what the timed small copies cost beyond moving their bytes at the
     * link's peak, extrapolated to all small copies; one copy remains */
    double over = (double)s.t_timed - (double)s.bytes_timed / bw;
    if (over < 0)
      over = 0;
    over *= (double)s.n_small / (double)s.n_timed;
    over -= (double)med;
    rec = over > 0 ? (uint64_t)over : 0;
  }
  double ws = az_window_ns(a) / 1e9;
  char hb[48];
  snprintf(f->title, sizeof f->title,
           "small transfers: %llu of %llu host<->device copies are under %u KiB "
           "(%.0f/s, %s in all)",
           (unsigned long long)s.n_small, (unsigned long long)s.n_host,
           CUCAP_ANALYZE_SMALL_COPY / 1024, (double)s.n_small / ws,
           cucap_bytes_exact(s.bytes_small, hb, sizeof hb));
  az_num(f, "host_copies", "", (double)s.n_host);
  az_num(f, "small_copies", "", (double)s.n_small);
  az_num(f, "small_bytes", "bytes", (double)s.bytes_small);
  az_num(f, "small_rate", "/s", (double)s.n_small / ws);
  az_num(f, "small_timed", "", (double)s.n_timed);
  az_num(f, "small_time", "ns", (double)s.t_timed);
  az_num(f, "small_median_time", "ns", (double)med);
  for (int b = 0; b < 6; b++)
    az_num(f, bucket_name[b], "", (double)s.hist[b]);
  az_num(f, "link_peak", "GB/s", bw);
  small_bw_nums(a, f);
  snprintf(f->estimate, sizeof f->estimate,
           "time of the small copies whose time is known, less their bytes at the "
           "link peak, scaled to all small copies, less one copy (batched into one "
           "transfer)");
  snprintf(f->advice, sizeof f->advice,
           "batch small copies into one buffer and one transfer (pack on the host or "
           "the device), keep scalars on the GPU instead of reading them back each "
           "step, and use pinned memory with async copies");
  az_sites_take(a, f, &s.sites);
  double per_s = (double)s.n_small / ws;
  az_finish(a, f, rec, estimated,
            per_s >= 1000 ? CUCAP_SEVERITY_LOW : CUCAP_SEVERITY_INFO);
}

/* ------------------------------------------------------------ pageable */

static void find_pageable(cucap_analysis *a) {
  uint64_t n = 0, n_async = 0, bytes = 0, n_timed = 0, t_timed = 0;
  double rec = 0;
  double ref[3] = {0, 0, 0}; /* per direction: best pinned GB/s seen */
  size_t cnt;
  double med;
  bw_stats(a, AZ_DIR_H2D, AZF_PINNED, &ref[AZ_DIR_H2D], &med, &cnt);
  bw_stats(a, AZ_DIR_D2H, AZF_PINNED, &ref[AZ_DIR_D2H], &med, &cnt);
  double dflt = 0.8 * (a->sum.link_gbps > 0 ? a->sum.link_gbps : 1);
  az_sites sites = {0};
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (e->kind != AZ_COPY || !(e->flags & AZF_PAGEABLE) || (e->flags & AZF_CAPTURED) ||
        !az_in_window(a, e))
      continue;
    n++;
    bytes += e->bytes;
    if (e->flags & AZF_ASYNC)
      n_async++;
    uint64_t t = copy_time(e);
    az_site_add(&sites, e->stack, 1, t);
    if (!t)
      continue;
    n_timed++;
    t_timed += t;
    double bw = e->sub <= AZ_DIR_D2H && ref[e->sub] > 0 ? ref[e->sub] : dflt;
    double over = (double)t - (double)e->bytes / bw;
    if (over > 0)
      rec += over;
  }
  if (!n) {
    az_sites_free(&sites);
    return;
  }
  cucap_finding *f = az_finding_new(a, "pageable_copies");
  if (!f) {
    az_sites_free(&sites);
    return;
  }
  char hb[48];
  snprintf(f->title, sizeof f->title,
           "pageable host memory: %llu copies of %s use host memory that is not "
           "page-locked%s",
           (unsigned long long)n, cucap_bytes_exact(bytes, hb, sizeof hb),
           n_async ? "; async ones among them are not asynchronous" : "");
  az_num(f, "copies", "", (double)n);
  az_num(f, "bytes", "bytes", (double)bytes);
  az_num(f, "async_api_copies", "", (double)n_async);
  az_num(f, "timed", "", (double)n_timed);
  az_num(f, "time", "ns", (double)t_timed);
  az_num(f, "reference_htod", "GB/s", ref[AZ_DIR_H2D] > 0 ? ref[AZ_DIR_H2D] : dflt);
  az_num(f, "reference_dtoh", "GB/s", ref[AZ_DIR_D2H] > 0 ? ref[AZ_DIR_D2H] : dflt);
  snprintf(f->estimate, sizeof f->estimate,
           "time of the pageable copies whose time is known, less their bytes at the "
           "best pinned bandwidth seen in this capture (else 80%% of the link peak)");
  snprintf(f->advice, sizeof f->advice,
           "page-lock the host buffers (cuMemHostAlloc/cudaHostAlloc, "
           "cudaHostRegister, torch pin_memory=True / DataLoader(pin_memory=True)); a "
           "copy from pageable memory is staged and blocks the host even when async");
  az_sites_take(a, f, &sites);
  az_finish(a, f, (uint64_t)rec, n_timed > 0, CUCAP_SEVERITY_LOW);
}

void az_find_memory(cucap_analysis *a) {
  find_churn(a);
  find_small(a);
  find_pageable(a);
}

/* ------------------------------------------------------------ sync */

/* first non-captured work event submitted at or after t (by t0) */
static const az_ev *next_work(const cucap_analysis *a, uint64_t t) {
  size_t lo = 0, hi = a->nwork;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a->ev[a->work_by_t0[mid]].t0 < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < a->nwork; lo++) {
    const az_ev *e = &a->ev[a->work_by_t0[lo]];
    if (!(e->flags & AZF_CAPTURED))
      return e;
  }
  return NULL;
}

typedef struct span {
  uint64_t lo, hi;
} span;

static int cmp_span(const void *x, const void *y) {
  const span *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* total length of the union of the spans (sorts them) */
static uint64_t union_len(span *s, size_t n) {
  cucap_sort(s, n, sizeof *s, cmp_span);
  uint64_t tot = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < n; i++) {
    if (i && s[i].lo <= hi) {
      if (s[i].hi > hi)
        hi = s[i].hi;
      continue;
    }
    tot += hi - lo;
    lo = s[i].lo;
    hi = s[i].hi;
  }
  return tot + (hi - lo);
}

static int span_add(span **v, size_t *n, size_t *cap, uint64_t lo, uint64_t len) {
  if (!len)
    return 1;
  if (!CUCAP_VEC_RESERVE(*v, *cap, *n + 1, 64))
    return 0;
  (*v)[(*n)++] = (span){lo, lo + len};
  return 1;
}

void az_find_sync(cucap_analysis *a) {
  uint64_t n_ctx = 0, n_stream = 0, n_event = 0, n_dtoh = 0, n_query = 0, t_query = 0;
  uint64_t blocked = 0, idle = 0, drained = 0, rec = 0;
  az_sites sites = {0};
  /* syncs of several threads may overlap in time: sums are taken over the
   * union of their spans */
  span *gaps = NULL, *recs = NULL;
  size_t ngaps = 0, capgaps = 0, nrecs = 0, caprecs = 0;
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (!az_in_window(a, e))
      continue;
    if (e->kind == AZ_QUERY) {
      n_query++;
      t_query += e->t1 - e->t0;
      continue;
    }
    int blocking_dtoh = e->kind == AZ_COPY && e->sub == AZ_DIR_D2H &&
                        !(e->flags & AZF_ASYNC) && !(e->flags & AZF_CAPTURED);
    if (e->kind != AZ_SYNC_CTX && e->kind != AZ_SYNC_STREAM && e->kind != AZ_SYNC_EVENT &&
        !blocking_dtoh)
      continue;
    n_ctx += e->kind == AZ_SYNC_CTX;
    n_stream += e->kind == AZ_SYNC_STREAM;
    n_event += e->kind == AZ_SYNC_EVENT;
    n_dtoh += blocking_dtoh;
    uint64_t b = e->t1 - e->t0;
    blocked += b;
    /* the host's time until it submits GPU work again: work it could have
     * done while the GPU was still busy, had it not waited */
    const az_ev *nx = next_work(a, e->t1);
    uint64_t until = nx ? nx->t0 : a->window_t1;
    uint64_t gap = until > e->t1 ? until - e->t1 : 0, r = gap < b ? gap : b;
    span_add(&recs, &nrecs, &caprecs, e->t1, r);
    if (e->flags & AZF_DRAINED) { /* nothing queued anywhere: the GPU is empty */
      drained++;
      span_add(&gaps, &ngaps, &capgaps, e->t1, gap);
    }
    az_site_add(&sites, e->stack, 1, r);
  }
  idle = ngaps ? union_len(gaps, ngaps) : 0;
  rec = nrecs ? union_len(recs, nrecs) : 0;
  free(gaps);
  free(recs);
  uint64_t n = n_ctx + n_stream + n_event + n_dtoh;
  if (!n && !n_query) {
    az_sites_free(&sites);
    return;
  }
  cucap_finding *f = az_finding_new(a, "sync_calls");
  if (!f) {
    az_sites_free(&sites);
    return;
  }
  double ws = az_window_ns(a) / 1e9;
  snprintf(f->title, sizeof f->title,
           "synchronisation: %llu calls (%llu context, %llu stream, %llu event, %llu "
           "blocking DtoH) blocked the host %.3f ms; the GPU sat empty %.3f ms after them",
           (unsigned long long)n, (unsigned long long)n_ctx, (unsigned long long)n_stream,
           (unsigned long long)n_event, (unsigned long long)n_dtoh, (double)blocked / 1e6,
           (double)idle / 1e6);
  az_num(f, "syncs", "", (double)n);
  az_num(f, "ctx_syncs", "", (double)n_ctx);
  az_num(f, "stream_syncs", "", (double)n_stream);
  az_num(f, "event_syncs", "", (double)n_event);
  az_num(f, "blocking_dtoh", "", (double)n_dtoh);
  az_num(f, "rate", "/s", (double)n / ws);
  az_num(f, "host_blocked", "ns", (double)blocked);
  az_num(f, "drained_syncs", "", (double)drained);
  az_num(f, "gpu_idle_after", "ns", (double)idle);
  az_num(f, "queries", "", (double)n_query);
  az_num(f, "query_time", "ns", (double)t_query);
  snprintf(f->estimate, sizeof f->estimate,
           "per sync: min(host time blocked in it, host time until it submitted GPU work "
           "again), the overlap a later sync allows; union over overlapping syncs");
  snprintf(f->advice, sizeof f->advice,
           "sync less often and later: read results back asynchronously (pinned buffer, "
           "event) and check them a step later, avoid .item()/.cpu() inside the loop, "
           "wait on events between streams instead of synchronising the host");
  az_sites_take(a, f, &sites);
  az_finish(a, f, rec, 1, CUCAP_SEVERITY_INFO);
}
