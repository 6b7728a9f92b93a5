/* test_analyze.c - analyze/analyze_*.c (cucap_analyze.h) and stacktab.c on
 * the synthetic workloads of tests/testgen/workload.h, whose host timing is
 * exact, so every finding's numbers are known: steady-state window,
 * allocation churn, small transfers and bandwidth, pageable copies, syncs
 * and the idle after them, default stream, stream imbalance, launch
 * overhead, launch-bound phases once GPU durations are given, ranking,
 * severities, callsite symbolization, options, damaged captures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_analyze.h"
#include "cucap_json.h"
#include "cucap_reader.h"
#include "testutil.h"
#include "workload.h"

#define CHECK TU_CHECK

static const cucap_finding *find(cucap_analysis *a, const char *id) {
  for (size_t i = 0; i < cucap_analysis_finding_count(a); i++)
    if (!strcmp(cucap_analysis_finding(a, i)->id, id))
      return cucap_analysis_finding(a, i);
  return NULL;
}

static double num(const cucap_finding *f, const char *name) {
  for (unsigned i = 0; f && i < f->nnumbers; i++)
    if (!strcmp(f->numbers[i].name, name))
      return f->numbers[i].value;
  return NAN;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * (fabs(b) + 1); }

static cucap_analysis *analyse(const char *path, const cucap_analyze_options *o) {
  cucap_reader *r = NULL;
  char msg[256];
  TU_REQUIRE(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  cucap_analysis *a = NULL;
  TU_REQUIRE(cucap_analysis_create(r, o, &a) == CUCAP_OK);
  cucap_reader_destroy(r);
  return a;
}

static char *scenario(const char *name) {
  char *p = tu_tmp_path(name);
  char err[256];
  TU_REQUIRE(p && wl_write(p, name, err, sizeof err) == 0);
  return p;
}

static void check_ranking(cucap_analysis *a) {
  for (size_t i = 0; i < cucap_analysis_finding_count(a); i++) {
    const cucap_finding *f = cucap_analysis_finding(a, i);
    if (i)
      CHECK(cucap_analysis_finding(a, i - 1)->recoverable_ns >= f->recoverable_ns);
    if (f->estimated) {
      cucap_severity want = f->recoverable_pct >= CUCAP_ANALYZE_HIGH_PCT     ? CUCAP_SEVERITY_HIGH
                            : f->recoverable_pct >= CUCAP_ANALYZE_MEDIUM_PCT ? CUCAP_SEVERITY_MEDIUM
                            : f->recoverable_pct >= CUCAP_ANALYZE_LOW_PCT    ? CUCAP_SEVERITY_LOW
                                                                             : CUCAP_SEVERITY_INFO;
      CHECK(f->severity == want);
    }
    CHECK(f->title[0] && f->advice[0] && f->estimate[0]);
  }
}

static void test_train(const char *path) {
  cucap_analysis *a = analyse(path, NULL);
  const cucap_analysis_summary *s = cucap_analysis_summary_get(a);
  CHECK(s->read_status == CUCAP_OK);
  CHECK(s->launches == WL_WARMUP_KERNELS + WL_STEPS * WL_STEP_LAUNCHES);
  CHECK(s->copies == 3 * WL_STEPS);
  CHECK(!strcmp(s->device, "Synthetic H100") && s->cc_major == 9 && s->sm_count == 132);
  CHECK(s->driver_version == 13000);
  CHECK(near(s->link_gbps, 63.0) && strstr(s->link_name, "Gen5"));
  /* 8 new kernels at launches 10..17; from 15 on, 3 new of 315 <= 1% */
  CHECK(s->steady == 1 && s->window_first_launch == 15 && s->window_launches == 315);
  CHECK(s->ncaveats == 0 && s->gpu_times == 0);
  check_ranking(a);

  const cucap_finding *f = find(a, "alloc_churn");
  CHECK(f && num(f, "allocs") == 39 && num(f, "frees") == 40);
  CHECK(f && num(f, "same_size_reallocs") == 39 && num(f, "time_in_calls") == 39 * 20e3 + 40 * 30e3);
  CHECK(f && f->estimated && f->recoverable_ns == 39 * 20000 + 40 * 30000);
  CHECK(f && f->nsites == 2 && f->sites[0].stack == 12 && f->sites[0].count == 40);
  size_t n = 0, first = 9;
  const char *const *fr = f ? cucap_analysis_stack(a, f->sites[0].stack, &n, &first) : NULL;
  CHECK(fr && n == 3 && first == 1);
  CHECK(fr && !strncmp(fr[0], "libcuda.so.1+0x", 15) && !strncmp(fr[1], "trainer+0x", 10));

  f = find(a, "small_transfers");
  CHECK(f && num(f, "small_copies") == 79 && num(f, "host_copies") == 118);
  CHECK(f && num(f, "small_time") == 39 * 12e3 + 40 * 5e3);
  CHECK(f && num(f, "copies_lt_1k") == 39 && num(f, "copies_4k_64k") == 40 &&
        num(f, "copies_1m_16m") == 39);
  /* 4 MiB in 100 us */
  CHECK(f && near(num(f, "htod_pinned_best"), (4 << 20) / 100e3));
  CHECK(f && isnan(num(f, "htod_pageable_best")));

  f = find(a, "pageable_copies");
  CHECK(f && num(f, "copies") == 39 && num(f, "bytes") == 39 * 256 && num(f, "async_api_copies") == 0);

  f = find(a, "sync_calls");
  CHECK(f && num(f, "ctx_syncs") == 40 && num(f, "stream_syncs") == 40);
  CHECK(f && num(f, "drained_syncs") == 40); /* the stream sync leaves S2/legacy work */
  CHECK(f && num(f, "host_blocked") == 40 * 300e3 + 40 * 5e3);
  /* after each context sync: free 30 + host work 200 + alloc 20 + 1 us */
  CHECK(f && num(f, "gpu_idle_after") == 39 * 251e3 + 30e3);
  /* the 300 us stream sync could overlap the host's next 256 us (ctx sync 5,
   * free 30, host work 200, alloc 20, 1), the last one 35 us; the context
   * syncs' 5 us lie inside those spans */
  CHECK(f && f->recoverable_ns == 39 * 256000ull + 35000);

  f = find(a, "default_stream");
  CHECK(f && num(f, "legacy_launches") == 40 && num(f, "blocking_streams") == 2);
  CHECK(f && !f->estimated && f->severity == CUCAP_SEVERITY_LOW);
  f = find(a, "stream_imbalance");
  CHECK(f && num(f, "streams") == 3 && near(num(f, "busiest_share_pct"), 100.0 * 275 / 355));
  f = find(a, "launch_overhead");
  CHECK(f && num(f, "launches") == 315 && num(f, "median_call") == 4000 &&
        num(f, "median_interval") == 1000);
  CHECK(!find(a, "launch_bound")); /* needs GPU durations */

  /* the launch table the profile is keyed to */
  CHECK(cucap_analysis_launch_count(a) == 330);
  cucap_analysis_launch l;
  CHECK(cucap_analysis_launch_get(a, 0, &l) == CUCAP_OK && l.launch_index == 0 &&
        !strcmp(l.kernel, "_Z7warmup0v") && l.grid[0] == 132 && l.block[0] == 256);
  CHECK(cucap_analysis_launch_get(a, 17, &l) == CUCAP_OK && !strcmp(l.kernel, "_Z4tinyv") &&
        l.stream == 0 && l.stack == 6);
  CHECK(cucap_analysis_launch_get(a, 330, &l) == CUCAP_ERR_NOT_FOUND);

  /* short kernels (1 us) submitted every 5 us: every step's phase is
   * launch-bound except the first, cut by the window */
  CHECK(cucap_analysis_set_gpu_time(a, 999999, 1) == CUCAP_ERR_NOT_FOUND);
  for (size_t i = 0; i < 330; i++) {
    cucap_analysis_launch_get(a, i, &l);
    CHECK(cucap_analysis_set_gpu_time(a, l.seq, 1000) == CUCAP_OK);
  }
  cucap_analysis_run(a);
  f = find(a, "launch_bound");
  CHECK(f && num(f, "bound_phases") == WL_STEPS - 1 && num(f, "bound_launches") == 312);
  CHECK(f && f->estimated && f->recoverable_ns > 0 && f->nsites > 0);
  f = find(a, "stream_imbalance");
  CHECK(f && num(f, "by_gpu_time") == 0); /* copies without GPU times: by count */
  /* long kernels: the GPU is never starved */
  for (size_t i = 0; i < 330; i++) {
    cucap_analysis_launch_get(a, i, &l);
    cucap_analysis_set_gpu_time(a, l.seq, 1000000);
  }
  cucap_analysis_run(a);
  f = find(a, "launch_bound");
  CHECK(f && num(f, "bound_phases") == 0 && f->recoverable_ns == 0);
  CHECK(cucap_analysis_summary_get(a)->gpu_times == 330);
  /* the legacy stream's copies have no GPU time (< 90% of its ops timed) */
  f = find(a, "default_stream");
  CHECK(f && !f->estimated && f->severity == CUCAP_SEVERITY_LOW);
  check_ranking(a);

  /* JSON and text */
  cucap_json *w = cucap_json_create_mem(0);
  TU_REQUIRE(w);
  cucap_analysis_write_json(a, w);
  size_t len = 0;
  const char *js = cucap_json_mem_data(w, &len);
  CHECK(cucap_json_status(w) == CUCAP_OK && js && js[0] == '{' && js[len - 1] == '}');
  CHECK(js && strstr(js, "\"id\":\"alloc_churn\"") && strstr(js, "\"first_app_frame\":1"));
  CHECK(js && strstr(js, "\"steady_state\":true"));
  cucap_json_destroy(w);
  FILE *devnull = fopen("/dev/null", "w");
  if (devnull) {
    cucap_analysis_print(a, devnull, CUCAP_SEVERITY_INFO);
    fclose(devnull);
  }
  cucap_analysis_destroy(a);
}

static void test_options(const char *path) {
  cucap_analyze_options o;
  cucap_analyze_options_init(&o);
  o.window = CUCAP_ANALYZE_WINDOW_ALL;
  cucap_analysis *a = analyse(path, &o);
  CHECK(!cucap_analysis_summary_get(a)->steady &&
        cucap_analysis_summary_get(a)->window_launches == 330);
  const cucap_finding *f = find(a, "alloc_churn");
  CHECK(f && num(f, "allocs") == 41 && num(f, "pinned_host_calls") == 1); /* + the pinned buffer */
  cucap_analysis_destroy(a);

  cucap_analyze_options_init(&o);
  o.warmup_pct = 50;
  o.link_gbps = 25;
  o.symbolize = 0;
  o.max_sites = 1;
  a = analyse(path, &o);
  const cucap_analysis_summary *s = cucap_analysis_summary_get(a);
  CHECK(s->steady && s->window_first_launch == 165 && s->window_launches == 165);
  CHECK(near(s->link_gbps, 25) && strstr(s->link_name, "given"));
  f = find(a, "alloc_churn");
  CHECK(f && f->nsites == 1);
  size_t n = 0;
  const char *const *fr = f ? cucap_analysis_stack(a, f->sites[0].stack, &n, NULL) : NULL;
  CHECK(fr && n == 3 && !strncmp(fr[1], "0x", 2)); /* not symbolized */
  cucap_analysis_destroy(a);
}

static void test_oneshot(void) {
  char *path = scenario("oneshot");
  cucap_analysis *a = analyse(path, NULL);
  const cucap_analysis_summary *s = cucap_analysis_summary_get(a);
  CHECK(!s->steady && s->window_launches == 5 && strstr(s->window_reason, "too few"));
  const cucap_finding *f = find(a, "pageable_copies");
  CHECK(f && num(f, "copies") == 2 && num(f, "bytes") == 2.0 * (8 << 20));
  f = find(a, "sync_calls");
  CHECK(f && num(f, "blocking_dtoh") == 1 && num(f, "syncs") == 1);
  f = find(a, "small_transfers");
  CHECK(f && num(f, "small_copies") == 0 && f->recoverable_ns == 0);
  /* 8 MiB pageable in 2 ms, clean (nothing queued) */
  CHECK(f && near(num(f, "htod_pageable_best"), (8 << 20) / 2000e3));
  CHECK(!find(a, "default_stream") && !find(a, "stream_imbalance"));
  check_ranking(a);
  cucap_analysis_destroy(a);
  unlink(path);
  free(path);
}

static void test_graph(void) {
  char *path = scenario("graph");
  cucap_analysis *a = analyse(path, NULL);
  const cucap_analysis_summary *s = cucap_analysis_summary_get(a);
  CHECK(s->launches == 3 && s->graph_launches == WL_STEPS);
  /* captured launches are not GPU work: the window is the graph launches */
  CHECK(s->steady && s->window_launches == WL_STEPS - 1);
  const cucap_finding *f = find(a, "launch_overhead");
  CHECK(f && num(f, "graph_launches") == WL_STEPS - 1 && num(f, "launches") == WL_STEPS - 1);
  f = find(a, "sync_calls");
  CHECK(f && num(f, "stream_syncs") == WL_STEPS - 1 && num(f, "drained_syncs") == WL_STEPS - 1);
  CHECK(!find(a, "stream_imbalance") && !find(a, "alloc_churn"));
  cucap_analysis_destroy(a);
  unlink(path);
  free(path);
}

static void test_damaged(const char *path) {
  struct stat st;
  TU_REQUIRE(stat(path, &st) == 0);
  FILE *in = fopen(path, "rb");
  char *cut = tu_tmp_path("cut.fb");
  FILE *out = cut ? fopen(cut, "wb") : NULL;
  TU_REQUIRE(in && out);
  char *buf = malloc((size_t)st.st_size);
  TU_REQUIRE(buf && fread(buf, 1, (size_t)st.st_size, in) == (size_t)st.st_size);
  fwrite(buf, 1, (size_t)st.st_size * 2 / 3, out);
  fclose(in);
  fclose(out);
  free(buf);
  cucap_reader *r = NULL;
  char msg[256];
  cucap_status os = cucap_reader_open(cut, NULL, &r, msg, sizeof msg);
  if (os == CUCAP_OK) {
    cucap_analysis *a = NULL;
    CHECK(cucap_analysis_create(r, NULL, &a) == CUCAP_OK);
    if (a) {
      const cucap_analysis_summary *s = cucap_analysis_summary_get(a);
      CHECK(s->launches < 330);
      CHECK(s->read_status != CUCAP_OK || s->records < 647);
      cucap_analysis_destroy(a);
    }
    cucap_reader_destroy(r);
  }
  unlink(cut);
  free(cut);
}

int main(void) {
  CHECK(cucap_severity_parse("high") == CUCAP_SEVERITY_HIGH && cucap_severity_parse("x") == -1);
  CHECK(!strcmp(cucap_severity_name(CUCAP_SEVERITY_MEDIUM), "medium"));
  char *train = scenario("train");
  test_train(train);
  test_options(train);
  test_oneshot();
  test_graph();
  test_damaged(train);
  unlink(train);
  free(train);
  return tu_finish("test_analyze", 0);
}
