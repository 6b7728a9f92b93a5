/* profile_finalize.c - finalize and the queries of the profile model
 * (cucap_profile.h): launches in key order, per-launch statistics over the
 * passes, bottleneck classes, PC sample aggregates (top stalls and source
 * lines) and the per-kernel table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_demangle.h"
#include "profile_internal.h"

/* ------------------------------------------------------------ finalize */

static int cmp_launch(const void *x, const void *y) {
  uint64_t a = ((const pf_launch *)x)->pub.key, b = ((const pf_launch *)y)->pub.key;
  return a < b ? -1 : a > b;
}

static int cmp_row(const void *x, const void *y) {
  const pf_row *a = x, *b = y;
  if (a->key != b->key)
    return a->key < b->key ? -1 : 1;
  if (a->pc != b->pc)
    return a->pc < b->pc ? -1 : 1;
  return a->what < b->what ? -1 : a->what > b->what;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

static int cmp_timing(const void *x, const void *y) {
  const cucap_profile_timing *a = x, *b = y;
  if (a->pass != b->pass)
    return a->pass < b->pass ? -1 : 1;
  return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

static void rows_reindex(pf_rows *t) {
  if (t->n)
    cucap_sort(t->r, t->n, sizeof *t->r, cmp_row);
  cucap_map_free(&t->idx);
  for (size_t i = 0; i < t->n; i++) {
    uint64_t h = pf_mix3(t->r[i].key, t->r[i].pc, t->r[i].what);
    while (cucap_map_get(&t->idx, h, NULL))
      h = h * 31 + 7;
    cucap_map_put(&t->idx, h, i);
  }
}

/* accumulator of (id, samples) for the top-3 tables */
typedef struct acc {
  cucap_map m;  /* id -> samples */
  uint64_t total;
} acc;

static void acc_add(acc *a, uint64_t id, uint64_t n) {
  uint64_t c = 0;
  cucap_map_get(&a->m, id, &c);
  cucap_map_put(&a->m, id, c + n);
  a->total += n;
}

/* top entries of a; names from name_of(id) */
static void acc_top(cucap_profile *p, acc *a, cucap_profile_top *out, int lines) {
  memset(out, 0, CUCAP_PROFILE_TOP * sizeof *out);
  uint64_t ids[CUCAP_PROFILE_TOP] = {0};
  uint64_t id, n;
  for (size_t pos = 0; cucap_map_next(&a->m, &pos, &id, &n);) {
    for (int k = 0; k < CUCAP_PROFILE_TOP; k++)
      if (n > out[k].samples || (n == out[k].samples && n && id < ids[k])) {
        for (int j = CUCAP_PROFILE_TOP - 1; j > k; j--) {
          out[j] = out[j - 1];
          ids[j] = ids[j - 1];
        }
        out[k].samples = n;
        ids[k] = id;
        break;
      }
  }
  for (int k = 0; k < CUCAP_PROFILE_TOP && out[k].samples; k++) {
    if (lines) { /* id = file id << 32 | line */
      char buf[600];
      snprintf(buf, sizeof buf, "%s:%u", ids[k] >> 32 ? pf_s(p, (uint32_t)(ids[k] >> 32)) : "??",
               (unsigned)(ids[k] & 0xffffffffu));
      out[k].name = pf_s(p, pf_str(p, buf));
    } else {
      out[k].name = pf_s(p, (uint32_t)ids[k]);
    }
    out[k].pct = a->total ? 100.0 * (double)out[k].samples / (double)a->total : 0;
  }
  cucap_map_free(&a->m);
  a->total = 0;
}

static void acc_rows(cucap_profile *p, const pf_launch *L, acc *stalls, acc *lines) {
  for (size_t r = L->row0; r < L->row1; r++) {
    const pf_row *row = &p->samples.r[r];
    const pf_pc *pc = &p->pcs[row->pc];
    acc_add(stalls, row->what, row->count);
    acc_add(lines, (uint64_t)pc->file << 32 | pc->view.line, row->count);
  }
}

static uint32_t metric_id(cucap_profile *p, const char *name) {
  return cucap_strs_lookup(&p->strs, name);
}

static double launch_metric(const pf_launch *L, uint32_t id) {
  if (!id)
    return -1;
  for (size_t i = 0; i < L->pub.nmetrics; i++)
    if (L->mid[i] == id)
      return L->mval[i];
  return -1;
}

typedef struct sol_ids {
  uint32_t sm, mem, dram, l2, l1, occ, hmma, tensor;
} sol_ids;

static void sol_of(const pf_launch *L, const sol_ids *id, cucap_sol *s) {
  cucap_sol_init(s);
  s->sm_pct = launch_metric(L, id->sm);
  s->memory_pct = launch_metric(L, id->mem);
  s->dram_pct = launch_metric(L, id->dram);
  s->l2_pct = launch_metric(L, id->l2);
  s->l1_pct = launch_metric(L, id->l1);
  s->occupancy_pct = launch_metric(L, id->occ);
  /* every tensor pipe where measured, else HMMA alone (a profile made
   * with the earlier sets) */
  double h = launch_metric(L, id->hmma), t = launch_metric(L, id->tensor);
  s->tensor_pct = t > h ? t : h;
  s->blocks = (uint64_t)L->pub.grid[0] * L->pub.grid[1] * L->pub.grid[2];
}

static void names_of(cucap_profile *p, uint32_t kid, const char **dem, const char **sh) {
  uint64_t v = 0;
  if (!cucap_map_get(&p->dem, kid, &v)) {
    char d[4096], s[256];
    cucap_demangle(pf_s(p, kid), d, sizeof d);
    cucap_demangle_short(d, s, sizeof s, 80);
    uint32_t di = pf_str(p, d), si = pf_str(p, s);
    v = (uint64_t)di << 32 | si;
    cucap_map_put(&p->dem, kid, v);
  }
  *dem = pf_s(p, (uint32_t)(v >> 32));
  *sh = pf_s(p, (uint32_t)v);
}

static void finalize_launch(cucap_profile *p, pf_launch *L, const sol_ids *ids) {
  cucap_profile_launch *l = &L->pub;
  l->kernel = pf_s(p, L->kernel_id);
  names_of(p, L->kernel_id, &l->demangled, &l->short_name);
  l->timings = L->t;
  l->metric_ids = L->mid;
  l->metric_values = L->mval;
  l->median_ns = l->min_ns = l->max_ns = 0;
  l->spread_pct = 0;
  if (l->ntimings) {
    cucap_sort(L->t, l->ntimings, sizeof *L->t, cmp_timing);
    uint64_t *d = malloc(l->ntimings * sizeof *d);
    if (d) {
      for (size_t i = 0; i < l->ntimings; i++)
        d[i] = L->t[i].end_ns - L->t[i].start_ns;
      cucap_sort(d, l->ntimings, sizeof *d, cmp_u64);
      size_t n = l->ntimings;
      l->median_ns = n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
      l->min_ns = d[0];
      l->max_ns = d[n - 1];
      l->spread_pct = l->median_ns ? 100.0 * (double)(l->max_ns - l->min_ns) / (double)l->median_ns : 0;
      free(d);
    }
  }
  cucap_sol s;
  sol_of(L, ids, &s);
  s.sm_count = p->info.sm_count;
  cucap_classify(&s, &l->cls);
  acc st = {0}, ln = {0};
  acc_rows(p, L, &st, &ln);
  l->samples = st.total;
  acc_top(p, &st, l->stalls, 0);
  acc_top(p, &ln, l->lines, 1);
}

static int cmp_kernel(const void *x, const void *y) {
  const cucap_profile_kernel *a = &((const pf_kernel *)x)->pub, *b = &((const pf_kernel *)y)->pub;
  if (a->total_ns != b->total_ns)
    return a->total_ns > b->total_ns ? -1 : 1;
  if (a->launches != b->launches)
    return a->launches > b->launches ? -1 : 1;
  return strcmp(a->kernel, b->kernel);
}

static void finalize_kernels(cucap_profile *p, const sol_ids *ids) {
  free(p->K);
  p->K = NULL;
  p->nk = 0;
  cucap_map kidx;
  memset(&kidx, 0, sizeof kidx);
  uint32_t *of = malloc((p->nl ? p->nl : 1) * sizeof *of); /* launch -> kernel */
  if (!of)
    return;
  size_t cap = 0;
  for (size_t i = 0; i < p->nl; i++) {
    uint64_t k;
    if (!cucap_map_get(&kidx, p->L[i].kernel_id, &k)) {
      if (!cucap_vec_reserve(&p->K, &cap, p->nk + 1, sizeof *p->K, 16))
        break;
      k = p->nk++;
      memset(&p->K[k], 0, sizeof p->K[k]);
      p->K[k].kernel_id = p->L[i].kernel_id;
      cucap_map_put(&kidx, p->L[i].kernel_id, k);
    }
    of[i] = (uint32_t)k;
  }
  cucap_map_free(&kidx);
  uint64_t all = 0;
  for (size_t k = 0; k < p->nk; k++) {
    pf_kernel *K = &p->K[k];
    cucap_profile_kernel *o = &K->pub;
    o->kernel = pf_s(p, K->kernel_id);
    names_of(p, K->kernel_id, &o->demangled, &o->short_name);
    double sum[5] = {0}, w[5] = {0};
    uint64_t *med = NULL, *spr = NULL;
    size_t nmed = 0, capmed = 0, nspr = 0, capspr = 0;
    acc st = {0}, ln = {0};
    for (size_t i = 0; i < p->nl; i++) {
      if (of[i] != k)
        continue;
      const pf_launch *L = &p->L[i];
      o->launches++;
      if (L->pub.ntimings) {
        o->timed++;
        o->total_ns += L->pub.median_ns;
        if (cucap_vec_reserve(&med, &capmed, nmed + 1, sizeof *med, 16))
          med[nmed++] = L->pub.median_ns;
        /* spreads in 1/1000 %, sorted as integers */
        if (L->pub.ntimings > 1 && cucap_vec_reserve(&spr, &capspr, nspr + 1, sizeof *spr, 16))
          spr[nspr++] = (uint64_t)(L->pub.spread_pct * 1000.0 + 0.5);
      }
      double wt = L->pub.median_ns ? (double)L->pub.median_ns : 1.0;
      cucap_sol s;
      sol_of(L, ids, &s);
      const double v[5] = {s.sm_pct, s.memory_pct, s.dram_pct, s.occupancy_pct, s.tensor_pct};
      for (int m = 0; m < 5; m++)
        if (v[m] >= 0) {
          sum[m] += v[m] * wt;
          w[m] += wt;
        }
      acc_rows(p, L, &st, &ln);
    }
    if (nmed) {
      cucap_sort(med, nmed, sizeof *med, cmp_u64);
      o->median_ns = nmed % 2 ? med[nmed / 2] : (med[nmed / 2 - 1] + med[nmed / 2]) / 2;
    }
    free(med);
    if (nspr) {
      cucap_sort(spr, nspr, sizeof *spr, cmp_u64);
      o->spread_pct = (double)(nspr % 2 ? spr[nspr / 2] : (spr[nspr / 2 - 1] + spr[nspr / 2]) / 2) / 1000.0;
    }
    free(spr);
    double *dst[5] = {&o->sm_pct, &o->memory_pct, &o->dram_pct, &o->occupancy_pct,
                      &o->tensor_pct};
    for (int m = 0; m < 5; m++)
      *dst[m] = w[m] > 0 ? sum[m] / w[m] : -1;
    cucap_sol s;
    cucap_sol_init(&s);
    s.sm_pct = o->sm_pct;
    s.memory_pct = o->memory_pct;
    s.dram_pct = o->dram_pct;
    s.occupancy_pct = o->occupancy_pct;
    s.tensor_pct = o->tensor_pct;
    s.sm_count = p->info.sm_count;
    cucap_classify(&s, &o->cls);
    o->samples = st.total;
    acc_top(p, &st, o->stalls, 0);
    acc_top(p, &ln, o->lines, 1);
    all += o->total_ns;
  }
  for (size_t k = 0; k < p->nk; k++)
    p->K[k].pub.share_pct = all ? 100.0 * (double)p->K[k].pub.total_ns / (double)all : 0;
  if (p->nk)
    cucap_sort(p->K, p->nk, sizeof *p->K, cmp_kernel);
  free(of);
}

cucap_status cucap_profile_finalize(cucap_profile *p) {
  if (!p->dirty && p->K)
    return CUCAP_OK;
  if (p->nl)
    cucap_sort(p->L, p->nl, sizeof *p->L, cmp_launch);
  cucap_map_free(&p->key_idx);
  for (size_t i = 0; i < p->nl; i++)
    if (!cucap_map_put(&p->key_idx, p->L[i].pub.key, i + 1))
      return CUCAP_ERR_NOMEM;
  rows_reindex(&p->samples);
  rows_reindex(&p->sass);
  size_t r = 0;
  for (size_t i = 0; i < p->nl; i++) { /* rows and launches are both in key order */
    pf_launch *L = &p->L[i];
    while (r < p->samples.n && p->samples.r[r].key < L->pub.key)
      r++;
    L->row0 = r;
    while (r < p->samples.n && p->samples.r[r].key == L->pub.key)
      r++;
    L->row1 = r;
  }
  sol_ids ids = {metric_id(p, CUCAP_METRIC_SM),     metric_id(p, CUCAP_METRIC_MEMORY),
                 metric_id(p, CUCAP_METRIC_DRAM),   metric_id(p, CUCAP_METRIC_L2),
                 metric_id(p, CUCAP_METRIC_L1),     metric_id(p, CUCAP_METRIC_OCCUPANCY),
                 metric_id(p, CUCAP_METRIC_TENSOR_HMMA), metric_id(p, CUCAP_METRIC_TENSOR)};
  for (size_t i = 0; i < p->nl; i++)
    finalize_launch(p, &p->L[i], &ids);
  finalize_kernels(p, &ids);
  p->dirty = 0;
  return CUCAP_OK;
}

/* ------------------------------------------------------------ queries */

size_t cucap_profile_launch_count(cucap_profile *p) {
  cucap_profile_finalize(p);
  return p->nl;
}

const cucap_profile_launch *cucap_profile_launch_at(cucap_profile *p, size_t i) {
  cucap_profile_finalize(p);
  return i < p->nl ? &p->L[i].pub : NULL;
}

const cucap_profile_launch *cucap_profile_launch_find(cucap_profile *p, uint64_t key) {
  cucap_profile_finalize(p);
  pf_launch *L = pf_launch_get(p, key);
  return L ? &L->pub : NULL;
}

int cucap_profile_launch_metric(cucap_profile *p, const cucap_profile_launch *l,
                                const char *name, double *v) {
  uint32_t id = metric_id(p, name);
  for (size_t i = 0; id && i < l->nmetrics; i++)
    if (l->metric_ids[i] == id) {
      *v = l->metric_values[i];
      return 1;
    }
  return 0;
}

const char *cucap_profile_metric_name(const cucap_profile *p, uint32_t id) { return pf_s(p, id); }

size_t cucap_profile_kernel_count(cucap_profile *p) {
  cucap_profile_finalize(p);
  return p->nk;
}

const cucap_profile_kernel *cucap_profile_kernel_at(cucap_profile *p, size_t i) {
  cucap_profile_finalize(p);
  return i < p->nk ? &p->K[i].pub : NULL;
}

size_t cucap_profile_activity_count(const cucap_profile *p) { return p->nact; }

const cucap_profile_activity *cucap_profile_activity_at(const cucap_profile *p, size_t i) {
  return i < p->nact ? &p->act[i] : NULL;
}

size_t cucap_profile_finding_count(const cucap_profile *p) { return p->nf; }

const cucap_finding *cucap_profile_finding_at(const cucap_profile *p, size_t i) {
  return i < p->nf ? &p->F[i] : NULL;
}

size_t cucap_profile_sample_count(cucap_profile *p) {
  cucap_profile_finalize(p);
  return p->samples.n;
}

cucap_status cucap_profile_sample_at(cucap_profile *p, size_t i, cucap_profile_sample_row *out) {
  cucap_profile_finalize(p);
  if (i >= p->samples.n)
    return CUCAP_ERR_NOT_FOUND;
  const pf_row *r = &p->samples.r[i];
  *out = (cucap_profile_sample_row){r->key, &p->pcs[r->pc].view, pf_s(p, r->what), r->count};
  return CUCAP_OK;
}

size_t cucap_profile_sass_count(cucap_profile *p) {
  cucap_profile_finalize(p);
  return p->sass.n;
}

cucap_status cucap_profile_sass_at(cucap_profile *p, size_t i, cucap_profile_sass_row *out) {
  cucap_profile_finalize(p);
  if (i >= p->sass.n)
    return CUCAP_ERR_NOT_FOUND;
  const pf_row *r = &p->sass.r[i];
  *out = (cucap_profile_sass_row){r->key, &p->pcs[r->pc].view, pf_s(p, r->what), r->value};
  return CUCAP_OK;
}
