/* cmd_stats.c - `cucap stats CAPTURE [--profile P] [--csv|--json]
 * [--table LIST] [--no-demangle]`: the summary tables `nsys stats` users
 * know, from a capture: driver API calls by host time (the records'
 * t_enter/t_exit), kernels by name and launch geometry, copies and memsets
 * by kind; with a `replay --profile-out` file, the GPU times of the kernels
 * and copies too. Owner: tools/.
 *
 * Exit: 0; 3 damaged/truncated/not a capture, or a profile of another
 * capture (the tables of what was recovered are still printed); 4 I/O
 * error; 2 usage. */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_cli.h"
#include "cucap_json.h"
#include "cucap_map.h"
#include "cucap_profile.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cucap_units.h"

static const char stats_usage[] =
    "usage: cucap stats CAPTURE [--profile P] [--csv|--json] [--table LIST]\n"
    "                   [--no-demangle]\n"
    "  Summary tables of a capture:\n"
    "    api      driver calls by name: calls, host time total/avg/min/max (ns,\n"
    "             from each record's enter/exit times) and its % of all calls'\n"
    "             time; queries: pure queries the recorder only counted (no time)\n"
    "    kernels  launches by kernel name, grid and block; with --profile the\n"
    "             GPU time total/avg/min/max (ns, each launch's median over the\n"
    "             replay passes) and its % of all kernels' GPU time\n"
    "    copies   memcpy by kind and memset: count, bytes; with --profile the\n"
    "             GPU time total/avg/min/max (ns, each copy's mean over passes)\n"
    "  --profile P     a profile file of this capture, as written by\n"
    "                  `cucap replay --profile --profile-out P`\n"
    "  --csv           the tables as CSV, each with its header row, separated\n"
    "                  by an empty line\n"
    "  --json          one JSON object {\"api\", \"kernels\", \"copies\"}\n"
    "  --table LIST    only these tables (comma-separated: api,kernels,copies)\n"
    "  --no-demangle   kernel names as recorded\n"
    "exit: 0, 3 damaged/truncated/not a capture or a profile of another\n"
    "capture (what was recovered is still printed), 4 I/O error, 2 usage\n";

enum { T_API = 1, T_KERNELS = 2, T_COPIES = 4 };
enum { F_TEXT, F_CSV, F_JSON };

/* min/max/total of a set of durations or sizes */
typedef struct stats_agg {
  uint64_t n, total, min, max;
} stats_agg;

static void stats_agg_add(stats_agg *a, uint64_t v) {
  if (!a->n || v < a->min)
    a->min = v;
  if (!a->n || v > a->max)
    a->max = v;
  a->n++;
  a->total += v;
}

typedef struct stats_api {
  uint32_t call;
  uint64_t queries, failed;
  stats_agg host;
} stats_api;

typedef struct stats_kernel {
  const char *name; /* mangled; owned by the names table */
  uint32_t grid[3], block[3];
  uint64_t launches;
  stats_agg gpu;
} stats_kernel;

/* Copy kinds are the MemcpyKind values; memsets get their own row. */
#define STATS_KINDS 257
#define STATS_MEMSET 256
typedef struct stats_copy {
  uint64_t count, bytes;
  stats_agg gpu;
} stats_copy;

typedef struct stats_state {
  cucap_cli_fnames *names;
  cucap_map api_index; /* call -> index in api */
  stats_api *api;
  size_t napi, capi;
  stats_kernel *kern;
  size_t nkern, ckern;
  stats_copy copy[STATS_KINDS];
  cucap_profile *prof;
  cucap_map copy_gpu; /* seq -> mean GPU ns over passes (profile activities) */
  int demangle;
} stats_state;

static stats_api *stats_api_get(stats_state *st, uint32_t call) {
  uint64_t i;
  if (cucap_map_get(&st->api_index, call, &i))
    return &st->api[i];
  if (st->napi == st->capi) {
    size_t nc = st->capi ? 2 * st->capi : 64;
    stats_api *v = realloc(st->api, nc * sizeof *v);
    if (!v)
      return NULL;
    st->api = v;
    st->capi = nc;
  }
  if (!cucap_map_put(&st->api_index, call, st->napi))
    return NULL;
  stats_api *a = &st->api[st->napi++];
  memset(a, 0, sizeof *a);
  a->call = call;
  return a;
}

static stats_kernel *stats_kernel_get(stats_state *st, const char *name, const uint32_t g[3],
                                      const uint32_t b[3]) {
  /* Few distinct (kernel, geometry) pairs per program: a linear search from
   * the latest row keeps loops over one kernel cheap. */
  for (size_t i = st->nkern; i-- > 0;) {
    stats_kernel *k = &st->kern[i];
    if (!memcmp(k->grid, g, sizeof k->grid) && !memcmp(k->block, b, sizeof k->block) &&
        !strcmp(k->name, name))
      return k;
  }
  if (st->nkern == st->ckern) {
    size_t nc = st->ckern ? 2 * st->ckern : 32;
    stats_kernel *v = realloc(st->kern, nc * sizeof *v);
    if (!v)
      return NULL;
    st->kern = v;
    st->ckern = nc;
  }
  stats_kernel *k = &st->kern[st->nkern++];
  memset(k, 0, sizeof *k);
  k->name = name;
  memcpy(k->grid, g, sizeof k->grid);
  memcpy(k->block, b, sizeof k->block);
  return k;
}

static void dim3_get(const cucap_fb_dim3 *d, uint32_t out[3]) {
  out[0] = d ? d->x : 0;
  out[1] = d ? d->y : 0;
  out[2] = d ? d->z : 0;
}

static int stats_launch(stats_state *st, const cucap_fb_record *rec) {
  const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
  /* A failed launch ran nothing; a host function is no kernel. */
  if (!l || cucap_fb_record_result(rec) != 0 ||
      cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    return 0;
  const char *nm = cucap_cli_fnames_get(st->names, cucap_fb_launch_function(l));
  uint32_t g[3], b[3];
  dim3_get(cucap_fb_launch_grid(l), g);
  dim3_get(cucap_fb_launch_block(l), b);
  stats_kernel *k = stats_kernel_get(st, nm ? nm : "(unknown function)", g, b);
  if (!k)
    return -1;
  k->launches++;
  if (st->prof) {
    const cucap_profile_launch *pl =
        cucap_profile_launch_find(st->prof, cucap_fb_launch_launch_index(l));
    if (pl && pl->ntimings)
      stats_agg_add(&k->gpu, pl->median_ns);
  }
  return 0;
}

static void stats_copy_add(stats_state *st, unsigned slot, uint64_t bytes, uint64_t seq) {
  stats_copy *c = &st->copy[slot];
  c->count++;
  c->bytes += bytes;
  uint64_t ns;
  if (st->prof && seq && cucap_map_get(&st->copy_gpu, seq, &ns))
    stats_agg_add(&c->gpu, ns);
}

static int stats_record(stats_state *st, const cucap_fb_record *rec) {
  cucap_cli_fnames_feed(st->names, rec);
  uint32_t call = cucap_fb_record_call(rec);
  if (call) {
    stats_api *a = stats_api_get(st, call);
    if (!a)
      return -1;
    uint64_t te = cucap_fb_record_t_enter(rec), tx = cucap_fb_record_t_exit(rec);
    stats_agg_add(&a->host, tx > te ? tx - te : 0);
    a->failed += cucap_fb_record_result(rec) != 0;
  }
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_QUERYCOUNTS: {
    const cucap_fb_query_counts *qc = cucap_fb_record_body_as_query_counts(rec);
    size_t nq = qc ? cucap_fb_query_counts_entries_len(qc) : 0;
    for (size_t i = 0; i < nq; i++) {
      const cucap_fb_query_count *e = cucap_fb_query_counts_entries_at(qc, i);
      if (!e || !cucap_fb_query_count_call(e))
        continue;
      stats_api *a = stats_api_get(st, cucap_fb_query_count_call(e));
      if (!a)
        return -1;
      a->queries += cucap_fb_query_count_count(e);
      if (cucap_fb_query_count_result(e) != 0)
        a->failed += cucap_fb_query_count_count(e);
    }
    break;
  }
  case CUCAP_FB_BODY_LAUNCH:
    return stats_launch(st, rec);
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (m && cucap_fb_record_result(rec) == 0)
      stats_copy_add(st, cucap_fb_memcpy_kind(m), cucap_fb_memcpy_size(m),
                     cucap_fb_record_seq(rec));
    break;
  }
  case CUCAP_FB_BODY_MEMSET: {
    const cucap_fb_memset *m = cucap_fb_record_body_as_memset(rec);
    if (m && cucap_fb_record_result(rec) == 0) {
      uint64_t h = cucap_fb_memset_height(m);
      uint64_t bytes = cucap_fb_memset_count(m) * cucap_fb_memset_elem_size(m) * (h ? h : 1);
      stats_copy_add(st, STATS_MEMSET, bytes, cucap_fb_record_seq(rec));
    }
    break;
  }
  default:
    break;
  }
  return 0;
}

/* The profile's copies and memsets: each recorded call's mean GPU time
 * over the replay passes, by Record.seq. */
static int stats_profile_copies(stats_state *st) {
  cucap_map sum = {0}, cnt = {0};
  size_t n = cucap_profile_activity_count(st->prof);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const cucap_profile_activity *a = cucap_profile_activity_at(st->prof, i);
    if (!a || (a->kind != CUCAP_PROFILE_ACT_MEMCPY && a->kind != CUCAP_PROFILE_ACT_MEMSET))
      continue;
    uint64_t *s = cucap_map_slot(&sum, a->seq, 1), *c = cucap_map_slot(&cnt, a->seq, 1);
    if (!s || !c) {
      rc = -1;
      break;
    }
    *s += a->end_ns > a->start_ns ? a->end_ns - a->start_ns : 0;
    (*c)++;
  }
  uint64_t seq, total, k;
  for (size_t pos = 0; !rc && cucap_map_next(&sum, &pos, &seq, &total);)
    if (cucap_map_get(&cnt, seq, &k) && k && !cucap_map_put(&st->copy_gpu, seq, total / k))
      rc = -1;
  cucap_map_free(&sum);
  cucap_map_free(&cnt);
  return rc;
}

/* ---------------------------------------------------------------- tables */

/* One table as strings: the three formats print the same cells (JSON
 * prints numbers from the same values, see stats_json_*). */
#define STATS_MAXCOL 12
typedef struct stats_table {
  int ncol;
  const char *hdr[STATS_MAXCOL];
  int left[STATS_MAXCOL]; /* left-aligned (text) columns */
  char **cells;           /* nrows * ncol, malloc'ed strings */
  size_t nrows, cap;
} stats_table;

static int stats_table_row(stats_table *t, ...) {
  if (t->nrows == t->cap) {
    size_t nc = t->cap ? 2 * t->cap : 32;
    char **v = realloc(t->cells, nc * (size_t)t->ncol * sizeof *v);
    if (!v)
      return -1;
    t->cells = v;
    t->cap = nc;
  }
  va_list ap;
  va_start(ap, t);
  char **row = t->cells + t->nrows * (size_t)t->ncol;
  int rc = 0;
  for (int c = 0; c < t->ncol; c++) {
    const char *s = va_arg(ap, const char *);
    row[c] = strdup(s ? s : "");
    if (!row[c])
      rc = -1;
  }
  va_end(ap);
  t->nrows++;
  return rc;
}

static void stats_table_free(stats_table *t) {
  for (size_t i = 0; i < t->nrows * (size_t)t->ncol; i++)
    free(t->cells[i]);
  free(t->cells);
}

static void stats_table_print_text(const stats_table *t, const char *title, FILE *f) {
  size_t w[STATS_MAXCOL];
  for (int c = 0; c < t->ncol; c++) {
    w[c] = strlen(t->hdr[c]);
    for (size_t r = 0; r < t->nrows; r++) {
      size_t l = strlen(t->cells[r * (size_t)t->ncol + c]);
      if (l > w[c])
        w[c] = l;
    }
  }
  fprintf(f, "%s\n\n", title);
  for (int pass = -1; pass < (int)t->nrows; pass++) {
    for (int c = 0; c < t->ncol; c++) {
      const char *s = pass < 0 ? t->hdr[c] : t->cells[(size_t)pass * (size_t)t->ncol + c];
      int last = c == t->ncol - 1;
      /* The last column (names) is not padded: no trailing blanks. */
      if (last && t->left[c])
        fputs(s, f);
      else if (t->left[c])
        fprintf(f, "%-*s", (int)w[c], s);
      else
        fprintf(f, "%*s", (int)w[c], s);
      if (!last)
        fputs("  ", f);
    }
    fputc('\n', f);
  }
  if (!t->nrows)
    fputs("(none)\n", f);
}

static void stats_csv_cell(const char *s, FILE *f) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void stats_table_print_csv(const stats_table *t, FILE *f) {
  for (int pass = -1; pass < (int)t->nrows; pass++) {
    for (int c = 0; c < t->ncol; c++) {
      if (c)
        fputc(',', f);
      stats_csv_cell(pass < 0 ? t->hdr[c] : t->cells[(size_t)pass * (size_t)t->ncol + c], f);
    }
    fputc('\n', f);
  }
}

#define U64S(buf, v) (snprintf(buf, sizeof buf, "%" PRIu64, (uint64_t)(v)), buf)
#define PCTS(buf, v) (snprintf(buf, sizeof buf, "%.1f", (double)(v)), buf)

static const char *stats_call_name(uint32_t call, char *buf, size_t n) {
  const char *s = cucap_cli_cbid_name(call);
  if (s)
    return s;
  snprintf(buf, n, "cbid%u", (unsigned)call);
  return buf;
}

static uint64_t stats_api_total(const stats_state *st) {
  uint64_t t = 0;
  for (size_t i = 0; i < st->napi; i++)
    t += st->api[i].host.total;
  return t;
}

static double pct_of(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static int cmp_api(const void *a, const void *b) {
  const stats_api *x = a, *y = b;
  if (x->host.total != y->host.total)
    return x->host.total > y->host.total ? -1 : 1;
  uint64_t cx = x->host.n + x->queries, cy = y->host.n + y->queries;
  if (cx != cy)
    return cx > cy ? -1 : 1;
  return x->call < y->call ? -1 : (x->call > y->call);
}

static int cmp_kernel(const void *a, const void *b) {
  const stats_kernel *x = a, *y = b;
  if (x->gpu.total != y->gpu.total)
    return x->gpu.total > y->gpu.total ? -1 : 1;
  if (x->launches != y->launches)
    return x->launches > y->launches ? -1 : 1;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  return memcmp(x->grid, y->grid, sizeof x->grid + sizeof x->block);
}

static uint64_t stats_kernel_gpu_total(const stats_state *st) {
  uint64_t t = 0;
  for (size_t i = 0; i < st->nkern; i++)
    t += st->kern[i].gpu.total;
  return t;
}

static const char *copy_kind_name(unsigned k) {
  if (k == STATS_MEMSET)
    return "memset";
  const char *s = cucap_fb_memcpy_kind_name((int)k);
  return s ? s : "?";
}

static int build_api(const stats_state *st, stats_table *t) {
  static const char *const h[] = {"Time(%)", "Total(ns)", "Calls", "Avg(ns)", "Min(ns)",
                                  "Max(ns)", "Queries", "Failed", "Name"};
  t->ncol = 9;
  memcpy(t->hdr, h, sizeof h);
  t->left[8] = 1;
  uint64_t all = stats_api_total(st);
  for (size_t i = 0; i < st->napi; i++) {
    const stats_api *a = &st->api[i];
    char p[32], tot[32], n[32], avg[32], mn[32], mx[32], q[32], f[32], nm[32];
    int rc = stats_table_row(t, PCTS(p, pct_of(a->host.total, all)), U64S(tot, a->host.total),
                             U64S(n, a->host.n), a->host.n ? U64S(avg, a->host.total / a->host.n) : "-",
                             a->host.n ? U64S(mn, a->host.min) : "-",
                             a->host.n ? U64S(mx, a->host.max) : "-", U64S(q, a->queries),
                             U64S(f, a->failed), stats_call_name(a->call, nm, sizeof nm));
    if (rc)
      return -1;
  }
  return 0;
}

static const char *stats_kernel_name(const stats_state *st, const char *nm, char *buf, size_t n) {
  return st->demangle ? cucap_cli_demangle(nm, buf, n) : nm;
}

static int build_kernels(const stats_state *st, stats_table *t) {
  int gpu = st->prof != NULL;
  static const char *const h[] = {"Time(%)", "Total(ns)", "Launches", "Timed", "Avg(ns)",
                                  "Min(ns)", "Max(ns)",   "Grid",     "Block", "Name"};
  static const char *const hn[] = {"Launches", "Grid", "Block", "Name"};
  t->ncol = gpu ? 10 : 4;
  memcpy(t->hdr, gpu ? h : hn, (size_t)t->ncol * sizeof *h);
  t->left[t->ncol - 1] = 1;
  uint64_t all = stats_kernel_gpu_total(st);
  for (size_t i = 0; i < st->nkern; i++) {
    const stats_kernel *k = &st->kern[i];
    char g[48], b[48], l[32], nb[4096];
    snprintf(g, sizeof g, "%ux%ux%u", k->grid[0], k->grid[1], k->grid[2]);
    snprintf(b, sizeof b, "%ux%ux%u", k->block[0], k->block[1], k->block[2]);
    const char *nm = stats_kernel_name(st, k->name, nb, sizeof nb);
    int rc;
    if (gpu) {
      char p[32], tot[32], tm[32], avg[32], mn[32], mx[32];
      int has = k->gpu.n != 0;
      rc = stats_table_row(t, PCTS(p, pct_of(k->gpu.total, all)), U64S(tot, k->gpu.total),
                           U64S(l, k->launches), U64S(tm, k->gpu.n),
                           has ? U64S(avg, k->gpu.total / k->gpu.n) : "-",
                           has ? U64S(mn, k->gpu.min) : "-", has ? U64S(mx, k->gpu.max) : "-", g,
                           b, nm);
    } else {
      rc = stats_table_row(t, U64S(l, k->launches), g, b, nm);
    }
    if (rc)
      return -1;
  }
  return 0;
}

static int build_copies(const stats_state *st, stats_table *t) {
  int gpu = st->prof != NULL;
  /* "Size": the bytes in human units (Total(ns) is a time) */
  static const char *const h[] = {"Count", "Bytes", "Size", "Timed", "Total(ns)",
                                  "Avg(ns)", "Min(ns)", "Max(ns)", "Kind"};
  t->ncol = gpu ? 9 : 4;
  memcpy(t->hdr, h, 3 * sizeof *h);
  memcpy(t->hdr + 3, gpu ? h + 3 : h + 8, (size_t)(t->ncol - 3) * sizeof *h);
  t->left[t->ncol - 1] = 1;
  for (unsigned k = 0; k < STATS_KINDS; k++) {
    const stats_copy *c = &st->copy[k];
    if (!c->count)
      continue;
    char n[32], by[32], hb[32];
    cucap_bytes_human(c->bytes, hb, sizeof hb);
    int rc;
    if (gpu) {
      char tm[32], tot[32], avg[32], mn[32], mx[32];
      int has = c->gpu.n != 0;
      rc = stats_table_row(t, U64S(n, c->count), U64S(by, c->bytes), hb, U64S(tm, c->gpu.n),
                           U64S(tot, c->gpu.total), has ? U64S(avg, c->gpu.total / c->gpu.n) : "-",
                           has ? U64S(mn, c->gpu.min) : "-", has ? U64S(mx, c->gpu.max) : "-",
                           copy_kind_name(k));
    } else {
      rc = stats_table_row(t, U64S(n, c->count), U64S(by, c->bytes), hb, copy_kind_name(k));
    }
    if (rc)
      return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- JSON */

static void stats_json_agg(cucap_json *w, const char *key, const stats_agg *a) {
  cucap_json_key(w, key);
  cucap_json_object_begin(w);
  cucap_json_key(w, "count");
  cucap_json_uint(w, a->n);
  cucap_json_key(w, "total_ns");
  cucap_json_uint(w, a->total);
  if (a->n) {
    cucap_json_key(w, "avg_ns");
    cucap_json_uint(w, a->total / a->n);
    cucap_json_key(w, "min_ns");
    cucap_json_uint(w, a->min);
    cucap_json_key(w, "max_ns");
    cucap_json_uint(w, a->max);
  }
  cucap_json_object_end(w);
}

static void stats_json_dim3(cucap_json *w, const char *key, const uint32_t d[3]) {
  cucap_json_key(w, key);
  cucap_json_array_begin(w);
  for (int i = 0; i < 3; i++)
    cucap_json_uint(w, d[i]);
  cucap_json_array_end(w);
}

static cucap_status stats_print_json(const stats_state *st, const char *path,
                                     const char *profile, unsigned tables) {
  cucap_json *w = cucap_json_create_file(stdout, CUCAP_JSON_PRETTY);
  if (!w)
    return CUCAP_ERR_NOMEM;
  cucap_json_object_begin(w);
  cucap_json_key(w, "capture");
  cucap_json_string(w, path);
  cucap_json_key(w, "profile");
  cucap_json_string(w, profile);
  if (tables & T_API) {
    uint64_t all = stats_api_total(st);
    cucap_json_key(w, "api");
    cucap_json_array_begin(w);
    for (size_t i = 0; i < st->napi; i++) {
      const stats_api *a = &st->api[i];
      char nm[32];
      cucap_json_object_begin(w);
      cucap_json_key(w, "name");
      cucap_json_string(w, stats_call_name(a->call, nm, sizeof nm));
      cucap_json_key(w, "cbid");
      cucap_json_uint(w, a->call);
      cucap_json_key(w, "calls");
      cucap_json_uint(w, a->host.n);
      cucap_json_key(w, "queries");
      cucap_json_uint(w, a->queries);
      cucap_json_key(w, "failed");
      cucap_json_uint(w, a->failed);
      stats_json_agg(w, "host", &a->host);
      cucap_json_key(w, "time_pct");
      cucap_json_double(w, pct_of(a->host.total, all));
      cucap_json_object_end(w);
    }
    cucap_json_array_end(w);
  }
  if (tables & T_KERNELS) {
    uint64_t all = stats_kernel_gpu_total(st);
    cucap_json_key(w, "kernels");
    cucap_json_array_begin(w);
    for (size_t i = 0; i < st->nkern; i++) {
      const stats_kernel *k = &st->kern[i];
      char nb[4096];
      cucap_json_object_begin(w);
      cucap_json_key(w, "name");
      cucap_json_string(w, stats_kernel_name(st, k->name, nb, sizeof nb));
      cucap_json_key(w, "mangled");
      cucap_json_string(w, k->name);
      stats_json_dim3(w, "grid", k->grid);
      stats_json_dim3(w, "block", k->block);
      cucap_json_key(w, "launches");
      cucap_json_uint(w, k->launches);
      if (st->prof) {
        stats_json_agg(w, "gpu", &k->gpu);
        cucap_json_key(w, "time_pct");
        cucap_json_double(w, pct_of(k->gpu.total, all));
      }
      cucap_json_object_end(w);
    }
    cucap_json_array_end(w);
  }
  if (tables & T_COPIES) {
    cucap_json_key(w, "copies");
    cucap_json_array_begin(w);
    for (unsigned k = 0; k < STATS_KINDS; k++) {
      const stats_copy *c = &st->copy[k];
      if (!c->count)
        continue;
      cucap_json_object_begin(w);
      cucap_json_key(w, "kind");
      cucap_json_string(w, copy_kind_name(k));
      cucap_json_key(w, "count");
      cucap_json_uint(w, c->count);
      cucap_json_key(w, "bytes");
      cucap_json_uint(w, c->bytes);
      if (st->prof)
        stats_json_agg(w, "gpu", &c->gpu);
      cucap_json_object_end(w);
    }
    cucap_json_array_end(w);
  }
  cucap_json_object_end(w);
  cucap_json_newline(w);
  cucap_status s = cucap_json_flush(w);
  if (s == CUCAP_OK)
    s = cucap_json_status(w);
  cucap_json_destroy(w);
  return s;
}

/* ---------------------------------------------------------------- command */

static int stats_parse_tables(const char *arg, unsigned *out) {
  *out = 0;
  const char *p = arg;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n == 3 && !strncmp(p, "api", 3))
      *out |= T_API;
    else if (n == 7 && !strncmp(p, "kernels", 7))
      *out |= T_KERNELS;
    else if (n == 6 && !strncmp(p, "copies", 6))
      *out |= T_COPIES;
    else {
      cucap_cli_error("stats", NULL, "--table=%s: expected a list of api, kernels, copies", arg);
      return -1;
    }
    p += n;
    if (*p == ',')
      p++;
  }
  return *out ? 0 : -1;
}

static int stats_print(stats_state *st, const char *path, const char *profile, unsigned tables,
                       int format) {
  if (format == F_JSON) {
    cucap_status s = stats_print_json(st, path, profile, tables);
    if (s != CUCAP_OK) {
      cucap_cli_error("stats", NULL, "writing the output: %s", cucap_status_str(s));
      return cucap_cli_exit_code(s);
    }
    return CUCAP_EXIT_OK;
  }
  static const struct {
    unsigned bit;
    const char *title;
    int (*build)(const stats_state *, stats_table *);
  } parts[] = {
      {T_API, "driver API calls (host time)", build_api},
      {T_KERNELS, "kernels", build_kernels},
      {T_COPIES, "copies and memsets", build_copies},
  };
  int first = 1;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (!(tables & parts[i].bit))
      continue;
    stats_table t;
    memset(&t, 0, sizeof t);
    if (parts[i].build(st, &t) != 0) {
      stats_table_free(&t);
      cucap_cli_error("stats", NULL, "out of memory");
      return CUCAP_EXIT_IO;
    }
    if (!first)
      fputc('\n', stdout);
    first = 0;
    if (format == F_CSV)
      stats_table_print_csv(&t, stdout);
    else
      stats_table_print_text(&t, parts[i].title, stdout);
    stats_table_free(&t);
  }
  if (fflush(stdout) != 0 || ferror(stdout)) {
    cucap_cli_error("stats", NULL, "writing the output failed");
    return CUCAP_EXIT_IO;
  }
  return CUCAP_EXIT_OK;
}

static int stats_load_profile(stats_state *st, cucap_reader *r, const char *path,
                              const char *profile) {
  char msg[512] = "";
  cucap_status s = cucap_profile_load(profile, &st->prof, msg, sizeof msg);
  if (s != CUCAP_OK) {
    cucap_cli_error("stats", profile, "%s", msg[0] ? msg : cucap_status_str(s));
    int rc = cucap_cli_exit_code(s);
    return rc == CUCAP_EXIT_OK ? CUCAP_EXIT_BAD_INPUT : rc;
  }
  uint8_t id[16];
  cucap_profile_capture_id(r, id);
  if (memcmp(id, cucap_profile_info_get(st->prof)->capture_id, sizeof id) != 0) {
    cucap_cli_error("stats", profile, "a profile of another capture than %s", path);
    return CUCAP_EXIT_BAD_INPUT;
  }
  if (stats_profile_copies(st) != 0) {
    cucap_cli_error("stats", profile, "out of memory");
    return CUCAP_EXIT_IO;
  }
  return CUCAP_EXIT_OK;
}

int cucap_cmd_stats(int argc, char **argv) {
  enum { O_PROFILE = 256, O_CSV, O_JSON, O_TABLE, O_NODEM };
  static const struct option longopts[] = {
      {"profile", required_argument, NULL, O_PROFILE}, {"csv", no_argument, NULL, O_CSV},
      {"json", no_argument, NULL, O_JSON},             {"table", required_argument, NULL, O_TABLE},
      {"no-demangle", no_argument, NULL, O_NODEM},     {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *profile = NULL;
  int format = F_TEXT, demangle = 1, c;
  unsigned tables = T_API | T_KERNELS | T_COPIES;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
    case O_PROFILE: profile = optarg; break;
    case O_CSV:
    case O_JSON:
      if (format != F_TEXT && format != (c == O_CSV ? F_CSV : F_JSON)) {
        cucap_cli_error("stats", NULL, "--csv and --json exclude each other");
        return CUCAP_EXIT_USAGE;
      }
      format = c == O_CSV ? F_CSV : F_JSON;
      break;
    case O_TABLE:
      if (stats_parse_tables(optarg, &tables) != 0)
        return CUCAP_EXIT_USAGE;
      break;
    case O_NODEM: demangle = 0; break;
    case 'h': fputs(stats_usage, stdout); return CUCAP_EXIT_OK;
    default: fputs(stats_usage, stderr); return CUCAP_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    cucap_cli_error("stats", NULL, optind >= argc ? "missing CAPTURE" : "one CAPTURE only");
    fputs(stats_usage, stderr);
    return CUCAP_EXIT_USAGE;
  }
  const char *path = argv[optind];
  cucap_reader *r = NULL;
  int rc = cucap_cli_open("stats", path, &r);
  if (rc != CUCAP_EXIT_OK)
    return rc;
  stats_state st;
  memset(&st, 0, sizeof st);
  st.demangle = demangle;
  st.names = cucap_cli_fnames_create();
  if (!st.names) {
    cucap_reader_destroy(r);
    cucap_cli_error("stats", NULL, "out of memory");
    return CUCAP_EXIT_IO;
  }
  if (profile)
    rc = stats_load_profile(&st, r, path, profile);
  cucap_status s = CUCAP_OK;
  while (rc == CUCAP_EXIT_OK) {
    const void *rec, *buf;
    size_t size;
    s = cucap_reader_next(r, &rec, &buf, &size);
    if (s != CUCAP_OK)
      break;
    if (stats_record(&st, rec) != 0) {
      cucap_cli_error("stats", NULL, "out of memory");
      rc = CUCAP_EXIT_IO;
    }
  }
  if (rc == CUCAP_EXIT_OK) {
    if (st.napi) /* qsort's base must not be NULL, even for no element */
      qsort(st.api, st.napi, sizeof *st.api, cmp_api);
    if (st.nkern)
      qsort(st.kern, st.nkern, sizeof *st.kern, cmp_kernel);
    rc = stats_print(&st, path, profile, tables, format);
    /* What was recovered is printed; then the damage is reported. */
    int vrc;
    if (s != CUCAP_END) {
      cucap_reader_recovery rec;
      cucap_reader_recovery_get(r, &rec);
      rec.problem[sizeof rec.problem - 1] = 0;
      cucap_cli_error("stats", path, "%s: %s", cucap_status_str(s),
                      rec.problem[0] ? rec.problem : "reading stopped");
      vrc = cucap_cli_exit_code(s);
      if (vrc == CUCAP_EXIT_OK)
        vrc = CUCAP_EXIT_BAD_INPUT;
    } else {
      vrc = cucap_cli_report_recovery("stats", path, r);
    }
    if (rc == CUCAP_EXIT_OK)
      rc = vrc;
  }
  cucap_profile_destroy(st.prof);
  cucap_map_free(&st.copy_gpu);
  cucap_map_free(&st.api_index);
  free(st.api);
  free(st.kern);
  cucap_cli_fnames_destroy(st.names);
  cucap_reader_destroy(r);
  return rc;
}
