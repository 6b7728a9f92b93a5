/* rec_stats.c - per-entry-point cost counters of the recorder. See
 * cucap_rec_stats.h. */
#include "cucap_sort.h"
#include "cucap_rec_stats.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_clock.h"
#include "cucap_log.h"
#include "cucap_recorder.h"
#include "cucap_writer.h"

int cucap_rec_stats_on;

typedef struct api_count {
  uint64_t calls, ticks, slow;
} api_count;

typedef struct stats_block { /* one per thread, never freed */
  struct stats_block *next;
  uint64_t extra_n[CUCAP_STATS_NEXTRA], extra_ticks[CUCAP_STATS_NEXTRA];
  api_count api[]; /* g_napis */
} stats_block;

static size_t g_napis;
static const char *(*g_name)(size_t);
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static stats_block *g_blocks;
static __thread stats_block *t_block __attribute__((tls_model("initial-exec")));
static uint64_t g_tick0, g_ns0;
static atomic_int g_reported;

void cucap_rec_stats_init(int enable, size_t napis, const char *(*name)(size_t api)) {
  if (!enable || cucap_rec_stats_on)
    return;
  g_napis = napis;
  g_name = name;
  g_tick0 = cucap_rec_stats_clock();
  g_ns0 = cucap_clock_now_ns();
  cucap_rec_stats_on = 1;
}

static stats_block *block(void) {
  stats_block *b = t_block;
  if (__builtin_expect(b != NULL, 1))
    return b;
  b = calloc(1, sizeof *b + g_napis * sizeof(api_count));
  if (!b)
    return NULL;
  pthread_mutex_lock(&g_mu);
  b->next = g_blocks;
  g_blocks = b;
  pthread_mutex_unlock(&g_mu);
  t_block = b;
  return b;
}

void cucap_rec_stats_call(uint32_t api, uint64_t overhead, int slow) {
  stats_block *b = block();
  if (!b || api >= g_napis)
    return;
  b->api[api].calls++;
  b->api[api].ticks += overhead;
  b->api[api].slow += slow != 0;
}

void cucap_rec_stats_add(int what, uint64_t ticks) {
  stats_block *b = block();
  if (!b || what < 0 || what >= CUCAP_STATS_NEXTRA)
    return;
  b->extra_n[what]++;
  b->extra_ticks[what] += ticks;
}

typedef struct row {
  size_t api;
  api_count c;
} row;

static int by_ticks(const void *a, const void *b) {
  const row *x = a, *y = b;
  if (x->c.ticks != y->c.ticks)
    return x->c.ticks < y->c.ticks ? 1 : -1;
  return x->c.calls < y->c.calls ? 1 : x->c.calls > y->c.calls ? -1 : 0;
}

static void put(char *text, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *text, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(text + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (w > 0)
    *len += (size_t)w < cap - *len ? (size_t)w : cap - *len - 1;
}

void cucap_rec_stats_report(void) {
  if (!cucap_rec_stats_on || atomic_exchange(&g_reported, 1))
    return;
  /* ticks -> ns over the whole run (rdtsc is invariant on current x86) */
  uint64_t dt = cucap_rec_stats_clock() - g_tick0, dn = cucap_clock_now_ns() - g_ns0;
  double ns_per_tick = dt ? (double)dn / (double)dt : 1.0;
#if !defined(__x86_64__)
  ns_per_tick = 1.0;
#endif
  row *rows = calloc(g_napis ? g_napis : 1, sizeof *rows);
  if (!rows)
    return;
  uint64_t en[CUCAP_STATS_NEXTRA] = {0}, et[CUCAP_STATS_NEXTRA] = {0};
  size_t nthreads = 0;
  pthread_mutex_lock(&g_mu);
  for (stats_block *b = g_blocks; b; b = b->next) {
    nthreads++;
    for (size_t i = 0; i < g_napis; i++) {
      rows[i].api = i;
      rows[i].c.calls += b->api[i].calls;
      rows[i].c.ticks += b->api[i].ticks;
      rows[i].c.slow += b->api[i].slow;
    }
    for (int k = 0; k < CUCAP_STATS_NEXTRA; k++) {
      en[k] += b->extra_n[k];
      et[k] += b->extra_ticks[k];
    }
  }
  pthread_mutex_unlock(&g_mu);
  cucap_sort(rows, g_napis, sizeof *rows, by_ticks);
  size_t cap = 1024 + g_napis * 96, len = 0;
  char *text = malloc(cap);
  if (!text) {
    free(rows);
    return;
  }
  uint64_t calls = 0, ticks = 0, slow = 0;
  for (size_t i = 0; i < g_napis; i++) {
    calls += rows[i].c.calls;
    ticks += rows[i].c.ticks;
    slow += rows[i].c.slow;
  }
#define PUT(...) put(text, cap, &len, __VA_ARGS__)
  PUT("recorder cost per driver entry point (time in the wrapper outside the "
      "real call; %zu thread(s), %.3f ns/tick)\n", nthreads, ns_per_tick);
  PUT("%-44s %12s %12s %10s %10s\n", "function", "calls", "total_ms", "avg_ns", "slow_path");
  for (size_t i = 0; i < g_napis && rows[i].c.calls; i++) {
    const char *nm = g_name ? g_name(rows[i].api) : NULL;
    double ms = (double)rows[i].c.ticks * ns_per_tick / 1e6;
    PUT("%-44s %12llu %12.3f %10.1f %10llu\n", nm ? nm : "?",
        (unsigned long long)rows[i].c.calls, ms, ms * 1e6 / (double)rows[i].c.calls,
        (unsigned long long)rows[i].c.slow);
  }
  PUT("%-44s %12llu %12.3f %10.1f %10llu\n", "(all)", (unsigned long long)calls,
      (double)ticks * ns_per_tick / 1e6,
      calls ? (double)ticks * ns_per_tick / (double)calls : 0.0, (unsigned long long)slow);
  static const char *const extra[CUCAP_STATS_NEXTRA] = {
      "callstack walks", "module-map rescans", "writer appends (lock + copy)",
      "copy-result host functions"};
  for (int k = 0; k < CUCAP_STATS_NEXTRA; k++)
    PUT("%-44s %12llu %12.3f %10.1f\n", extra[k], (unsigned long long)en[k],
        (double)et[k] * ns_per_tick / 1e6,
        en[k] ? (double)et[k] * ns_per_tick / (double)en[k] : 0.0);
  /* The writer's background thread: compression and I/O, off the program's
   * threads (what a step costs there is what these lines would add if it
   * shared their core). count = chunks, avg = ns per chunk. */
  cucap_writer_stats ws;
  if (cucap_rec_writer_stats(&ws)) {
    PUT("%-44s %12llu %12.3f %10.1f\n", "writer CPU: record chunks",
        (unsigned long long)ws.record_chunks, (double)ws.record_cpu_ns / 1e6,
        ws.record_chunks ? (double)ws.record_cpu_ns / (double)ws.record_chunks : 0.0);
    PUT("%-44s %12llu %12.3f %10.1f\n", "writer: raw record MB (in total_ms)",
        (unsigned long long)ws.record_chunks, (double)ws.record_raw_bytes / 1e6, 0.0);
    PUT("%-44s %12llu %12.3f %10.1f\n", "writer CPU: blob chunks",
        (unsigned long long)(ws.chunks - ws.record_chunks), (double)ws.blob_cpu_ns / 1e6,
        ws.chunks > ws.record_chunks
            ? (double)ws.blob_cpu_ns / (double)(ws.chunks - ws.record_chunks)
            : 0.0);
    PUT("%-44s %12llu %12.3f %10.1f\n", "writer CPU: thread total",
        (unsigned long long)ws.chunks, (double)ws.thread_cpu_ns / 1e6, 0.0);
  }
#undef PUT
  (void)cucap_rec_note("stats", text, calls, NULL, 0);
  /* one log line per table line (the sink formats into a bounded buffer) */
  for (char *line = text, *nl; *line; line = nl + 1) {
    nl = strchr(line, '\n');
    if (!nl)
      nl = line + strlen(line) - 1;
    CUCAP_INFO("stats: %.*s", (int)(nl - line), line);
  }
  free(text);
  free(rows);
}
