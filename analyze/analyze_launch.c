/* analyze_launch.c - the launch and stream findings of the analysis: launch
 * overhead, launch-bound phases (when GPU durations are known: a one-queue
 * model of the GPU fed at the recorded submission times), work imbalance
 * across streams and legacy default-stream serialization. Definitions and
 * estimates are in docs/design.md ("Program analysis"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_vec.h"
#include "analyze_internal.h"

static int is_work(const az_ev *e) {
  return (e->kind == AZ_LAUNCH || e->kind == AZ_GRAPH || e->kind == AZ_COPY ||
          e->kind == AZ_MEMSET) &&
         !(e->flags & AZF_CAPTURED);
}

static int is_launch(const az_ev *e) {
  return (e->kind == AZ_LAUNCH || e->kind == AZ_GRAPH) && !(e->flags & AZF_CAPTURED);
}

/* a call that makes the host wait for the GPU */
static int is_sync(const az_ev *e) {
  return e->kind == AZ_SYNC_CTX || e->kind == AZ_SYNC_STREAM || e->kind == AZ_SYNC_EVENT ||
         (e->kind == AZ_COPY && !(e->flags & AZF_ASYNC)) || (e->flags & AZF_RECSYNC);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

static uint64_t median(uint64_t *v, size_t n) {
  if (!n)
    return 0;
  cucap_sort(v, n, sizeof *v, cmp_u64);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct u64vec {
  uint64_t *v;
  size_t n, cap;
} u64vec;

static void push(u64vec *x, uint64_t v) {
  if (!CUCAP_VEC_RESERVE(x->v, x->cap, x->n + 1, 64))
    return;
  x->v[x->n++] = v;
}

/* ------------------------------------------------------------ overhead */

/* Fraction (0..1) of the window's launches with a measured GPU duration. */
static double gpu_coverage(const cucap_analysis *a, size_t *nl) {
  size_t n = 0, g = 0;
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (!is_launch(e) || !az_in_window(a, e))
      continue;
    n++;
    g += e->gpu_ns > 0;
  }
  *nl = n;
  return n ? (double)g / (double)n : 0;
}

static void find_overhead(cucap_analysis *a, u64vec *intervals) {
  uint64_t n = 0, n_graph = 0, host = 0;
  u64vec calls = {0};
  cucap_map last_t1; /* tid -> t_exit of its previous launch */
  memset(&last_t1, 0, sizeof last_t1);
  az_sites sites = {0};
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (!is_launch(e) || !az_in_window(a, e))
      continue;
    n++;
    n_graph += e->kind == AZ_GRAPH;
    uint64_t t = e->t1 - e->t0, prev;
    host += t;
    push(&calls, t);
    if (cucap_map_get(&last_t1, e->tid, &prev) && e->t0 >= prev)
      push(intervals, e->t0 - prev);
    cucap_map_put(&last_t1, e->tid, e->t1);
    az_site_add(&sites, e->stack, 1, t);
  }
  cucap_map_free(&last_t1);
  if (!n) {
    free(calls.v);
    az_sites_free(&sites);
    return;
  }
  cucap_finding *f = az_finding_new(a, "launch_overhead");
  if (!f) {
    free(calls.v);
    az_sites_free(&sites);
    return;
  }
  double ws = az_window_ns(a), pct = 100.0 * (double)host / ws;
  uint64_t mc = median(calls.v, calls.n);
  free(calls.v);
  /* intervals are sorted by median() but kept for the launch-bound finding */
  uint64_t mi = median(intervals->v, intervals->n);
  snprintf(f->title, sizeof f->title,
           "launch overhead: %llu launches (%.0f/s) spend %.3f ms (%.1f%% of the window) in "
           "launch calls, median %.1f us each, median gap %.1f us between calls",
           (unsigned long long)n, (double)n / (ws / 1e9), (double)host / 1e6, pct,
           (double)mc / 1e3, (double)mi / 1e3);
  az_num(f, "launches", "", (double)n);
  az_num(f, "graph_launches", "", (double)n_graph);
  az_num(f, "rate", "/s", (double)n / (ws / 1e9));
  az_num(f, "host_time", "ns", (double)host);
  az_num(f, "host_pct", "%", pct);
  az_num(f, "median_call", "ns", (double)mc);
  az_num(f, "median_interval", "ns", (double)mi);
  snprintf(f->estimate, sizeof f->estimate,
           "not estimated: host time only matters where the GPU waits for it (see "
           "launch_bound, %s)",
           a->o.in_profile ? "from this profile's GPU durations"
                           : "which needs GPU durations from `cucap replay --profile`");
  snprintf(f->advice, sizeof f->advice,
           "if kernels are short, submit fewer launches: CUDA graphs "
           "(torch.compile mode=reduce-overhead, torch.cuda.graphs), fused kernels, "
           "larger batches; keep other host work off the submitting thread");
  az_sites_take(a, f, &sites);
  az_finish(a, f, 0, 0,
            pct >= CUCAP_ANALYZE_LAUNCH_HOST_PCT ? CUCAP_SEVERITY_LOW : CUCAP_SEVERITY_INFO);
}

/* ------------------------------------------------------------ launch-bound */

typedef struct phase {
  size_t ev0, ev1;   /* [ev0, ev1) */
  uint64_t launches, idle, span;
} phase;

/* One queue: work starts when submitted (t_exit of its call) or when the
 * previous work ends, whichever is later, and runs for its GPU duration.
 * Syncs end a phase; the idle before a phase's first work belongs to the
 * sync (sync_calls). With sites != NULL, launches of launch-bound phases
 * add their preceding idle to their callsite. */
static void simulate(cucap_analysis *a, phase **ph, size_t *nph, uint64_t *busy,
                     uint64_t *idle_all, az_sites *sites, const phase *bound, size_t nbound) {
  uint64_t gpu_end = 0;
  phase cur = {a->window_ev0, a->window_ev0, 0, 0, 0};
  uint64_t first_start = 0;
  int have = 0;
  size_t pcap = 0, bi = 0;
  for (size_t i = a->window_ev0; i <= a->nev; i++) {
    const az_ev *e = i < a->nev ? &a->ev[i] : NULL;
    if (!e || is_sync(e)) {
      if (have && ph) {
        cur.ev1 = i;
        cur.span = gpu_end > first_start ? gpu_end - first_start : 0;
        (void)CUCAP_VEC_RESERVE(*ph, pcap, *nph + 1, 64); /* else the phase is dropped */
        if (*nph < pcap)
          (*ph)[(*nph)++] = cur;
      }
      have = 0;
      cur = (phase){i + 1, i + 1, 0, 0, 0};
      if (!e)
        break;
      if (!(e->kind == AZ_COPY && !(e->flags & AZF_CAPTURED)))
        continue;
    }
    if (!is_work(e) || !az_in_window(a, e))
      continue;
    uint64_t s = e->t1, start = s > gpu_end ? s : gpu_end, idle = 0;
    if (have && s > gpu_end) {
      idle = s - gpu_end;
      cur.idle += idle;
      if (idle_all)
        *idle_all += idle;
    }
    if (!have) {
      first_start = start;
      cur.ev0 = i;
      have = 1;
    }
    gpu_end = start + e->gpu_ns;
    if (busy)
      *busy += e->gpu_ns;
    if (is_launch(e))
      cur.launches++;
    if (sites && is_launch(e)) {
      while (bi < nbound && bound[bi].ev1 <= i)
        bi++;
      if (bi < nbound && i >= bound[bi].ev0)
        az_site_add(sites, e->stack, 1, idle);
    }
  }
}

static void find_bound(cucap_analysis *a, u64vec *intervals) {
  phase *ph = NULL;
  size_t nph = 0;
  uint64_t busy = 0, idle_all = 0;
  simulate(a, &ph, &nph, &busy, &idle_all, NULL, NULL, 0);
  size_t nb = 0;
  uint64_t launches = 0, idle = 0;
  for (size_t i = 0; i < nph; i++) {
    const phase *p = &ph[i];
    if (p->launches >= CUCAP_ANALYZE_PHASE_MIN_LAUNCHES && p->span &&
        100.0 * (double)p->idle >= CUCAP_ANALYZE_PHASE_IDLE_PCT * (double)p->span) {
      ph[nb++] = *p;
      launches += p->launches;
      idle += p->idle;
    }
  }
  u64vec durs = {0};
  for (size_t i = a->window_ev0; i < a->nev; i++)
    if (is_launch(&a->ev[i]) && az_in_window(a, &a->ev[i]) && a->ev[i].gpu_ns)
      push(&durs, a->ev[i].gpu_ns);
  uint64_t md = median(durs.v, durs.n), mi = median(intervals->v, intervals->n);
  free(durs.v);
  cucap_finding *f = az_finding_new(a, "launch_bound");
  if (!f) {
    free(ph);
    return;
  }
  double ws = az_window_ns(a);
  if (nb)
    snprintf(f->title, sizeof f->title,
             "GPU starved by the host: %zu launch-bound phase%s (%llu launches) leave the GPU "
             "idle %.3f ms; kernels take a median %.1f us, launches come every %.1f us",
             nb, nb == 1 ? "" : "s", (unsigned long long)launches, (double)idle / 1e6,
             (double)md / 1e3, (double)mi / 1e3);
  else
    snprintf(f->title, sizeof f->title,
             "no launch-bound phase: the GPU is busy %.1f%% of the window; kernels take a "
             "median %.1f us, launches come every %.1f us",
             100.0 * (double)busy / ws, (double)md / 1e3, (double)mi / 1e3);
  az_num(f, "phases", "", (double)nph);
  az_num(f, "bound_phases", "", (double)nb);
  az_num(f, "bound_launches", "", (double)launches);
  az_num(f, "bound_idle", "ns", (double)idle);
  az_num(f, "gpu_busy", "ns", (double)busy);
  az_num(f, "gpu_busy_pct", "%", 100.0 * (double)busy / ws);
  az_num(f, "modelled_idle", "ns", (double)idle_all);
  az_num(f, "median_kernel", "ns", (double)md);
  az_num(f, "median_interval", "ns", (double)mi);
  snprintf(f->estimate, sizeof f->estimate,
           "GPU idle inside launch-bound phases of a one-queue model fed at the recorded "
           "submission times with the measured durations (streams not overlapped)");
  snprintf(f->advice, sizeof f->advice,
           "submit the phase as one CUDA graph (torch.compile mode=reduce-overhead, "
           "torch.cuda.graphs, cudaStreamBeginCapture), fuse small kernels, and keep "
           "host work off the submitting thread");
  az_sites sites = {0};
  simulate(a, NULL, NULL, NULL, NULL, &sites, ph, nb);
  az_sites_take(a, f, &sites);
  az_finish(a, f, idle, 1, CUCAP_SEVERITY_INFO);
  free(ph);
}

/* ------------------------------------------------------------ streams */

typedef struct strm {
  uint64_t stream, n, gpu, gpu_n;
} strm;

static void find_streams(cucap_analysis *a) {
  strm *s = NULL;
  size_t ns = 0, cap = 0;
  cucap_map idx;
  memset(&idx, 0, sizeof idx);
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (!is_work(e) || !az_in_window(a, e) || (e->kind == AZ_COPY && !(e->flags & AZF_ASYNC)))
      continue;
    uint64_t k;
    if (!cucap_map_get(&idx, e->stream, &k)) {
      if (!CUCAP_VEC_RESERVE(s, cap, ns + 1, 16))
        continue;
      k = ns;
      s[ns++] = (strm){e->stream, 0, 0, 0};
      cucap_map_put(&idx, e->stream, k);
    }
    s[k].n++;
    s[k].gpu += e->gpu_ns;
    s[k].gpu_n += e->gpu_ns > 0;
  }
  cucap_map_free(&idx);
  if (ns < 2) {
    free(s);
    return;
  }
  uint64_t tot_n = 0, tot_gpu = 0, tot_gpu_n = 0;
  for (size_t i = 0; i < ns; i++) {
    tot_n += s[i].n;
    tot_gpu += s[i].gpu;
    tot_gpu_n += s[i].gpu_n;
  }
  int by_gpu = tot_gpu > 0 && 10 * tot_gpu_n >= 9 * tot_n;
  size_t best = 0, second = SIZE_MAX;
  for (size_t i = 1; i < ns; i++)
    if ((by_gpu ? s[i].gpu : s[i].n) > (by_gpu ? s[best].gpu : s[best].n))
      best = i;
  for (size_t i = 0; i < ns; i++)
    if (i != best && (second == SIZE_MAX ||
                      (by_gpu ? s[i].gpu : s[i].n) > (by_gpu ? s[second].gpu : s[second].n)))
      second = i;
  double tot = by_gpu ? (double)tot_gpu : (double)tot_n;
  double share = 100.0 * (double)(by_gpu ? s[best].gpu : s[best].n) / tot;
  double share2 = 100.0 * (double)(by_gpu ? s[second].gpu : s[second].n) / tot;
  cucap_finding *f = az_finding_new(a, "stream_imbalance");
  if (!f) {
    free(s);
    return;
  }
  snprintf(f->title, sizeof f->title,
           "stream imbalance: %zu streams carry work; the busiest holds %.1f%% of it (by %s), "
           "the next %.1f%%",
           ns, share, by_gpu ? "GPU time" : "operation count", share2);
  az_num(f, "streams", "", (double)ns);
  az_num(f, "busiest_share_pct", "%", share);
  az_num(f, "second_share_pct", "%", share2);
  az_num(f, "by_gpu_time", "", by_gpu);
  az_num(f, "busiest_ops", "", (double)s[best].n);
  if (by_gpu)
    az_num(f, "busiest_gpu", "ns", (double)s[best].gpu);
  snprintf(f->estimate, sizeof f->estimate,
           "not estimated: what overlap streams can give depends on dependencies the "
           "capture does not show");
  snprintf(f->advice, sizeof f->advice,
           "spread independent work (copies, side computations, communication) over "
           "streams so it overlaps; synchronise streams with events, not the host");
  az_sites sites = {0};
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (is_work(e) && az_in_window(a, e) && e->stream == s[best].stream)
      az_site_add(&sites, e->stack, 1, e->gpu_ns);
  }
  az_sites_take(a, f, &sites);
  az_finish(a, f, 0, 0,
            share >= CUCAP_ANALYZE_IMBALANCE_PCT ? CUCAP_SEVERITY_LOW : CUCAP_SEVERITY_INFO);
  free(s);
}

/* ------------------------------------------------------------ default stream */

static void find_default(cucap_analysis *a) {
  uint64_t ops = 0, launches = 0, copies = 0, memsets = 0, gpu = 0, gpu_n = 0;
  uint64_t other_gpu = 0;
  cucap_map others; /* blocking non-default streams with work in the window */
  memset(&others, 0, sizeof others);
  az_sites sites = {0};
  for (size_t i = a->window_ev0; i < a->nev; i++) {
    const az_ev *e = &a->ev[i];
    if (!is_work(e) || !az_in_window(a, e))
      continue;
    if (e->flags & AZF_LEGACY) {
      ops++;
      launches += is_launch(e);
      copies += e->kind == AZ_COPY;
      memsets += e->kind == AZ_MEMSET;
      gpu += e->gpu_ns;
      gpu_n += e->gpu_ns > 0;
      az_site_add(&sites, e->stack, 1, e->gpu_ns);
      continue;
    }
    uint64_t fl = 0;
    if (e->stream > 2 && !(cucap_map_get(&a->stream_flags, e->stream, &fl) && (fl & 1))) {
      cucap_map_put(&others, e->stream, 1);
      other_gpu += e->gpu_ns;
    }
  }
  size_t nothers = cucap_map_size(&others);
  cucap_map_free(&others);
  if (!ops || !nothers) {
    az_sites_free(&sites);
    return;
  }
  cucap_finding *f = az_finding_new(a, "default_stream");
  if (!f) {
    az_sites_free(&sites);
    return;
  }
  int est = gpu_n * 10 >= ops * 9 && gpu > 0;
  uint64_t rec = est ? (gpu < other_gpu ? gpu : other_gpu) : 0;
  snprintf(f->title, sizeof f->title,
           "default-stream serialization: %llu operations (%llu launches, %llu copies, "
           "%llu memsets) on the legacy default stream while %zu blocking stream%s work",
           (unsigned long long)ops, (unsigned long long)launches, (unsigned long long)copies,
           (unsigned long long)memsets, nothers, nothers == 1 ? "" : "s");
  az_num(f, "legacy_ops", "", (double)ops);
  az_num(f, "legacy_launches", "", (double)launches);
  az_num(f, "legacy_copies", "", (double)copies);
  az_num(f, "legacy_memsets", "", (double)memsets);
  az_num(f, "blocking_streams", "", (double)nothers);
  if (est) {
    az_num(f, "legacy_gpu", "ns", (double)gpu);
    az_num(f, "other_gpu", "ns", (double)other_gpu);
  }
  snprintf(f->estimate, sizeof f->estimate,
           est ? "min(GPU time on the legacy stream, GPU time on the blocking streams): the "
                 "most that could overlap"
           : a->o.in_profile ? "not estimated: this profile's timeline has no GPU durations "
                               "for these operations"
                             : "not estimated without GPU durations (`cucap replay --profile`)");
  snprintf(f->advice, sizeof f->advice,
           "every legacy default-stream operation waits for all blocking streams and they "
           "for it: use the per-thread default stream (nvcc --default-stream per-thread), "
           "explicit streams, or create streams with CU_STREAM_NON_BLOCKING");
  az_sites_take(a, f, &sites);
  az_finish(a, f, rec, est, CUCAP_SEVERITY_LOW);
}

void az_find_launch(cucap_analysis *a) {
  u64vec intervals = {0};
  find_overhead(a, &intervals);
  size_t nl = 0;
  if (gpu_coverage(a, &nl) >= 0.9 && nl)
    find_bound(a, &intervals);
  free(intervals.v);
  find_streams(a);
  find_default(a);
}
