/* profile_table.c - the GPU timings table parser (cucap_profile_table.h). */
#include "cucap_profile_table.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_vec.h"

#define MAX_LINE (64 * 1024)
#define MAX_COLS (4 + CUCAP_PROFILE_MAX_METRICS)

struct cucap_profile_table {
  cucap_profile_row *rows;
  size_t nrows, caprows;
  double *values;           /* nrows * nmetrics */
  size_t capvalues;
  char **names;             /* metric names */
  size_t nmetrics;
  char *strings;            /* kernel names, NUL-separated */
  size_t nstrings, capstrings;
  size_t *kernel_off;       /* per row: offset into strings + 1, 0 = none */
  uint64_t *hkeys;          /* launch_index + 1 -> row + 1 (first row) */
  size_t *hvals;
  size_t hcap;
};

static cucap_status fail(char *msg, size_t n, size_t line, const char *fmt, ...) {
  if (msg && n) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    snprintf(msg, n, "line %zu: %s", line, tmp);
  }
  return CUCAP_ERR_CORRUPT;
}

static int parse_u64(const char *s, size_t n, uint64_t *v) {
  if (n == 0 || n > 20)
    return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10)
      return -1;
    x = x * 10 + d;
  }
  *v = x;
  return 0;
}

static int parse_double(const char *s, size_t n, double *v) {
  if (n == 0) {
    *v = NAN;
    return 0;
  }
  char buf[64];
  if (n >= sizeof buf)
    return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end = NULL;
  errno = 0;
  double d = strtod(buf, &end);
  if (errno || end != buf + n || isnan(d) || isinf(d))
    return -1;
  *v = d;
  return 0;
}

/* Splits [s, s+n) at commas into at most max fields; trims spaces and a
 * trailing \r. Returns the field count, or -1 when there are too many. */
static int split(const char *s, size_t n, const char **f, size_t *fl, int max) {
  int k = 0;
  size_t i = 0;
  if (n && s[n - 1] == '\r')
    n--;
  for (;;) {
    size_t j = i;
    while (j < n && s[j] != ',')
      j++;
    if (k == max)
      return -1;
    size_t a = i, b = j;
    while (a < b && (s[a] == ' ' || s[a] == '\t'))
      a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
      b--;
    f[k] = s + a;
    fl[k] = b - a;
    k++;
    if (j >= n)
      break;
    i = j + 1;
  }
  return k;
}

static int index_rows(cucap_profile_table *t) {
  size_t cap = 64;
  while (cap < t->nrows * 2 + 2)
    cap *= 2;
  t->hkeys = calloc(cap, sizeof *t->hkeys);
  t->hvals = calloc(cap, sizeof *t->hvals);
  if (!t->hkeys || !t->hvals)
    return 0;
  t->hcap = cap;
  for (size_t r = 0; r < t->nrows; r++) {
    uint64_t key = t->rows[r].launch_index + 1;
    if (!key)
      continue; /* launch_index UINT64_MAX: not indexable, still a row */
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
    while (t->hkeys[i] && t->hkeys[i] != key)
      i = (i + 1) & (cap - 1);
    if (!t->hkeys[i]) {
      t->hkeys[i] = key;
      t->hvals[i] = r + 1;
    }
  }
  return 1;
}

/* Where the header put each column. */
typedef struct pt_cols {
  int li, s, e, k, n; /* launch_index, start_ns, end_ns, kernel; the count */
  int metric[MAX_COLS]; /* per column: index into names, -1: not a metric */
} pt_cols;

/* The header line: the fixed columns' places and the metric names. */
static cucap_status parse_header(cucap_profile_table *t, pt_cols *c, const char **f,
                                 const size_t *fl, int k, char *msg, size_t msg_size,
                                 size_t line) {
  for (int i = 0; i < k; i++) {
    if (!fl[i])
      return fail(msg, msg_size, line, "empty column name in the header");
    int *slot = fl[i] == 12 && !memcmp(f[i], "launch_index", 12) ? &c->li
                : fl[i] == 8 && !memcmp(f[i], "start_ns", 8)   ? &c->s
                : fl[i] == 6 && !memcmp(f[i], "end_ns", 6)     ? &c->e
                : fl[i] == 6 && !memcmp(f[i], "kernel", 6)     ? &c->k
                                                               : NULL;
    if (slot) {
      if (*slot >= 0)
        return fail(msg, msg_size, line, "column '%.*s' appears twice", (int)fl[i], f[i]);
      *slot = i;
      c->metric[i] = -1;
      continue;
    }
    if (t->nmetrics >= CUCAP_PROFILE_MAX_METRICS)
      return fail(msg, msg_size, line, "more than %d metric columns", CUCAP_PROFILE_MAX_METRICS);
    char **nn = realloc(t->names, (t->nmetrics + 1) * sizeof *nn);
    CUCAP_RETURN_IF(!nn, CUCAP_ERR_NOMEM);
    t->names = nn;
    t->names[t->nmetrics] = strndup(f[i], fl[i]);
    CUCAP_RETURN_IF(!t->names[t->nmetrics], CUCAP_ERR_NOMEM);
    c->metric[i] = (int)t->nmetrics++;
  }
  if (c->li < 0 || c->s < 0 || c->e < 0)
    return fail(msg, msg_size, line,
                "not a GPU timings table: the header must name launch_index, "
                "start_ns and end_ns");
  c->n = k;
  return CUCAP_OK;
}

/* One data line: a row, its metric values and its kernel name. */
static cucap_status parse_row(cucap_profile_table *t, const pt_cols *c, const char **f,
                              const size_t *fl, int k, char *msg, size_t msg_size,
                              size_t line) {
  if (k != c->n)
    return fail(msg, msg_size, line, "%d columns, the header has %d", k, c->n);
  CUCAP_RETURN_IF(
      !cucap_vec_reserve(&t->rows, &t->caprows, t->nrows + 1, sizeof *t->rows, 64) ||
          !cucap_vec_reserve(&t->values, &t->capvalues,
                             (t->nrows + 1) * (t->nmetrics ? t->nmetrics : 1),
                             sizeof *t->values, 64),
      CUCAP_ERR_NOMEM);
  cucap_profile_row *r = &t->rows[t->nrows];
  memset(r, 0, sizeof *r);
  if (parse_u64(f[c->li], fl[c->li], &r->launch_index) != 0 ||
      parse_u64(f[c->s], fl[c->s], &r->start_ns) != 0 ||
      parse_u64(f[c->e], fl[c->e], &r->end_ns) != 0)
    return fail(msg, msg_size, line, "launch_index, start_ns and end_ns must be unsigned integers");
  if (r->end_ns < r->start_ns)
    return fail(msg, msg_size, line, "end_ns is before start_ns");
  double *vals = t->values + t->nrows * t->nmetrics;
  for (int i = 0; i < k; i++) {
    if (c->metric[i] < 0)
      continue;
    if (parse_double(f[i], fl[i], &vals[c->metric[i]]) != 0)
      return fail(msg, msg_size, line, "column '%s': '%.*s' is not a number",
                  t->names[c->metric[i]], (int)(fl[i] > 40 ? 40 : fl[i]), f[i]);
  }
  /* kernel names: offsets now, pointers once the buffer stops moving */
  size_t *ko = realloc(t->kernel_off, (t->nrows + 1) * sizeof *ko);
  CUCAP_RETURN_IF(!ko, CUCAP_ERR_NOMEM);
  t->kernel_off = ko;
  ko[t->nrows] = 0;
  if (c->k >= 0 && fl[c->k]) {
    CUCAP_RETURN_IF(
        !cucap_vec_reserve(&t->strings, &t->capstrings, t->nstrings + fl[c->k] + 1, 1, 64),
        CUCAP_ERR_NOMEM);
    memcpy(t->strings + t->nstrings, f[c->k], fl[c->k]);
    t->strings[t->nstrings + fl[c->k]] = 0;
    ko[t->nrows] = t->nstrings + 1;
    t->nstrings += fl[c->k] + 1;
  }
  t->nrows++;
  return CUCAP_OK;
}

/* The lines in order: comments and blank lines skipped, the header, then
 * the rows. */
static cucap_status parse_lines(cucap_profile_table *t, const char *data, size_t size,
                                char *msg, size_t msg_size) {
  pt_cols c = {-1, -1, -1, -1, 0, {0}};
  size_t line = 0, pos = 0;
  int have_header = 0;
  while (pos < size) {
    line++;
    const char *s = data + pos;
    const char *nl = memchr(s, '\n', size - pos);
    size_t n = nl ? (size_t)(nl - s) : size - pos;
    pos += n + (nl ? 1 : 0);
    if (n > MAX_LINE)
      return fail(msg, msg_size, line, "longer than %d bytes", MAX_LINE);
    size_t a = 0;
    while (a < n && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r'))
      a++;
    if (a == n || s[a] == '#')
      continue;
    if (memchr(s, 0, n))
      return fail(msg, msg_size, line, "contains a NUL byte (not a text table)");
    const char *f[MAX_COLS];
    size_t fl[MAX_COLS];
    int k = split(s, n, f, fl, MAX_COLS);
    if (k < 0)
      return fail(msg, msg_size, line, "more than %d columns", MAX_COLS);
    if (!have_header) {
      CUCAP_FORWARD(parse_header(t, &c, f, fl, k, msg, msg_size, line));
      have_header = 1;
      continue;
    }
    CUCAP_FORWARD(parse_row(t, &c, f, fl, k, msg, msg_size, line));
  }
  if (!have_header)
    return fail(msg, msg_size, line, "no header line (launch_index,start_ns,end_ns,...)");
  return CUCAP_OK;
}

cucap_status cucap_profile_table_parse(const char *data, size_t size,
                                       cucap_profile_table **out, char *msg,
                                       size_t msg_size) {
  *out = NULL;
  if (msg && msg_size)
    msg[0] = 0;
  if (!data && size)
    return CUCAP_ERR_INVALID_ARG;
  cucap_profile_table *t = calloc(1, sizeof *t);
  if (!t)
    return CUCAP_ERR_NOMEM;
  cucap_status st = parse_lines(t, data, size, msg, msg_size);
  if (st == CUCAP_OK) {
    for (size_t r = 0; r < t->nrows; r++) {
      t->rows[r].metrics = t->nmetrics ? t->values + r * t->nmetrics : NULL;
      t->rows[r].kernel = t->kernel_off[r] ? t->strings + t->kernel_off[r] - 1 : NULL;
    }
    if (!index_rows(t))
      st = CUCAP_ERR_NOMEM;
  }
  if (st != CUCAP_OK) {
    cucap_profile_table_destroy(t);
    return st;
  }
  *out = t;
  return CUCAP_OK;
}

cucap_status cucap_profile_table_load(const char *path, cucap_profile_table **out,
                                      char *msg, size_t msg_size) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (msg && msg_size)
      snprintf(msg, msg_size, "cannot open: %s", strerror(errno));
    return CUCAP_ERR_IO;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (!cucap_vec_reserve(&buf, &cap, n + 65536, 1, 64)) {
      fclose(f);
      free(buf);
      return CUCAP_ERR_NOMEM;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0)
      break;
    if (n > ((size_t)1 << 32)) {
      fclose(f);
      free(buf);
      if (msg && msg_size)
        snprintf(msg, msg_size, "larger than 4 GiB: not a GPU timings table");
      return CUCAP_ERR_TOO_LARGE;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    if (msg && msg_size)
      snprintf(msg, msg_size, "read error");
    return CUCAP_ERR_IO;
  }
  cucap_status st = cucap_profile_table_parse(buf, n, out, msg, msg_size);
  free(buf);
  return st;
}

void cucap_profile_table_destroy(cucap_profile_table *t) {
  if (!t)
    return;
  for (size_t i = 0; i < t->nmetrics; i++)
    free(t->names[i]);
  free(t->names);
  free(t->rows);
  free(t->values);
  free(t->strings);
  free(t->kernel_off);
  free(t->hkeys);
  free(t->hvals);
  free(t);
}

size_t cucap_profile_table_rows(const cucap_profile_table *t) { return t ? t->nrows : 0; }

const cucap_profile_row *cucap_profile_table_row(const cucap_profile_table *t, size_t i) {
  return t && i < t->nrows ? &t->rows[i] : NULL;
}

const cucap_profile_row *cucap_profile_table_find(const cucap_profile_table *t,
                                                  uint64_t launch_index) {
  if (!t || !t->hcap || launch_index == UINT64_MAX)
    return NULL;
  uint64_t key = launch_index + 1;
  size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (t->hcap - 1);
  while (t->hkeys[i]) {
    if (t->hkeys[i] == key)
      return &t->rows[t->hvals[i] - 1];
    i = (i + 1) & (t->hcap - 1);
  }
  return NULL;
}

size_t cucap_profile_table_metric_count(const cucap_profile_table *t) {
  return t ? t->nmetrics : 0;
}

const char *cucap_profile_table_metric_name(const cucap_profile_table *t, size_t i) {
  return t && i < t->nmetrics ? t->names[i] : NULL;
}
