/* test_profiler.c - profile/profiler_common.c, profiler_stub.c and
 * profile_evtimer.c (cucap_profiler.h): metric sets, --range parsing and
 * matching, finding libcupti, the stub backend's sections and probe, and the
 * CUDA-event timeline on the mock libcuda (skipped without the mock). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_analyze.h"
#include "cucap_knobs.h"
#include "cucap_profile.h"
#include "cucap_profiler.h"
#include "cucap_reader.h"
#include "cucap_cupti.h"
#include "cucap_replay.h"
#include "replay_testcaps.h"
#include "testutil.h"

#define CHECK TU_CHECK

static void test_sets(void) {
  size_t n = 0, nf = 0;
  const char *const *sol = cucap_metric_set_names(CUCAP_METRICS_SOL, &n);
  const char *const *full = cucap_metric_set_names(CUCAP_METRICS_FULL, &nf);
  CHECK(sol && n >= 7 && full && nf > n);
  int has_sm = 0, has_mem = 0;
  for (size_t i = 0; i < n; i++) {
    has_sm |= !strcmp(sol[i], CUCAP_METRIC_SM);
    has_mem |= !strcmp(sol[i], CUCAP_METRIC_MEMORY);
    int in_full = 0; /* full is a superset of sol */
    for (size_t k = 0; k < nf; k++)
      in_full |= !strcmp(full[k], sol[i]);
    CHECK(in_full);
  }
  CHECK(has_sm && has_mem);
  /* one definition: `replay --profile` and `cupti profile` use the same
   * arrays, NULL-terminated after the counted names */
  CHECK(!sol[n] && !full[nf]);
  CHECK(cucap_cupti_metric_set("sol") == sol && cucap_cupti_metric_set("full") == full);
  CHECK(!cucap_cupti_metric_set("a,b") && !cucap_cupti_metric_set(NULL));
  /* the --metrics words and their sets, both ways */
  CHECK(cucap_metric_set_from_name("sol") == CUCAP_METRICS_SOL &&
        cucap_metric_set_from_name("full") == CUCAP_METRICS_FULL &&
        cucap_metric_set_from_name("none") == CUCAP_METRICS_NONE &&
        cucap_metric_set_from_name("sm__throughput.avg.pct_of_peak_sustained_elapsed") ==
            CUCAP_METRICS_LIST &&
        cucap_metric_set_from_name(NULL) == CUCAP_METRICS_LIST);
  CHECK(!strcmp(cucap_metric_set_name(CUCAP_METRICS_FULL), "full") &&
        !cucap_metric_set_name(CUCAP_METRICS_LIST));
  CHECK(!cucap_metric_set_names(CUCAP_METRICS_NONE, &n) && n == 0);
  cucap_profiler_options o;
  cucap_profiler_options_init(&o);
  CHECK(o.metric_set == CUCAP_METRICS_SOL && o.cache_flush && o.loops == 1 && o.timeline);
}

static void test_range(void) {
  cucap_profile_range r;
  char msg[256];
  CHECK(cucap_profile_range_parse(NULL, &r, msg, sizeof msg) == CUCAP_OK && r.kind == CUCAP_RANGE_ALL);
  CHECK(cucap_profile_range_match(&r, 123, "x"));
  cucap_profile_range_free(&r);
  CHECK(cucap_profile_range_parse("launch:10-20", &r, msg, sizeof msg) == CUCAP_OK);
  CHECK(r.kind == CUCAP_RANGE_LAUNCHES && r.first == 10 && r.last == 20);
  CHECK(!cucap_profile_range_match(&r, 9, "k") && cucap_profile_range_match(&r, 10, "k") &&
        cucap_profile_range_match(&r, 20, "k") && !cucap_profile_range_match(&r, 21, "k"));
  CHECK(!cucap_profile_range_match(&r, CUCAP_PROFILE_GRAPH_KEY(15, 0), "k"));
  cucap_profile_range_free(&r);
  CHECK(cucap_profile_range_parse("launch:7", &r, msg, sizeof msg) == CUCAP_OK && r.first == 7 &&
        r.last == 7);
  cucap_profile_range_free(&r);
  CHECK(cucap_profile_range_parse("launch:7-", &r, msg, sizeof msg) == CUCAP_OK &&
        r.last == UINT64_MAX);
  cucap_profile_range_free(&r);
  static const char *const bad[] = {"launch:", "launch:5-3", "launch:a-b", "launch:-3",
                                    "kernel:", "kernel:(", "bogus", "launch:1-2-3"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    msg[0] = 0;
    CHECK(cucap_profile_range_parse(bad[i], &r, msg, sizeof msg) == CUCAP_ERR_INVALID_ARG &&
          msg[0] && r.kind == CUCAP_RANGE_ALL);
    cucap_profile_range_free(&r);
  }
  CHECK(cucap_profile_range_parse("kernel:^gemm|copy$", &r, msg, sizeof msg) == CUCAP_OK);
  CHECK(cucap_profile_range_match(&r, 1, "gemm_kernel") && cucap_profile_range_match(&r, 1, "ncopy"));
  CHECK(!cucap_profile_range_match(&r, 1, "tiny") && !cucap_profile_range_match(&r, 1, NULL));
  CHECK(cucap_profile_range_match(&r, 2, "gemm_kernel")); /* cached */
  cucap_profile_range_free(&r);
  /* the demangled name is searched too */
  CHECK(cucap_profile_range_parse("kernel:^gemm\\(float", &r, msg, sizeof msg) == CUCAP_OK);
  int dm = cucap_profile_range_match(&r, 0, "_Z4gemmPf");
  CHECK(dm == 1 || dm == 0); /* 0 only without libstdc++'s demangler */
  cucap_profile_range_free(&r);
}

static void test_find_cupti(void) {
  char path[512], tried[1024];
  CHECK(cucap_profiler_find_cupti("/nonexistent/libcupti.so.13", path, sizeof path, tried,
                                  sizeof tried) == CUCAP_ERR_NOT_FOUND);
  CHECK(strstr(tried, "/nonexistent/libcupti.so.13") != NULL);
  /* a CUDA_HOME with extras/CUPTI/lib64/libcupti.so.13 */
  char *home = tu_tmp_path("cudahome");
  char dir[600], lib[700];
  TU_REQUIRE(home);
  snprintf(dir, sizeof dir, "%s/extras/CUPTI/lib64", home);
  char cmd[800];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
  TU_REQUIRE(system(cmd) == 0);
  snprintf(lib, sizeof lib, "%s/libcupti.so.13", dir);
  FILE *f = fopen(lib, "w");
  TU_REQUIRE(f);
  fclose(f);
  char *old = getenv("CUDA_HOME") ? strdup(getenv("CUDA_HOME")) : NULL;
  setenv("CUDA_HOME", home, 1);
  unsetenv("CUCAP_CUPTI");
  cucap_knobs_reload(); /* knobs are read once per process */
  CHECK(cucap_profiler_find_cupti(NULL, path, sizeof path, tried, sizeof tried) == CUCAP_OK &&
        !strcmp(path, lib));
  CHECK(cucap_profiler_find_cupti(lib, path, sizeof path, NULL, 0) == CUCAP_OK);
  if (old) {
    setenv("CUDA_HOME", old, 1);
    free(old);
  } else {
    unsetenv("CUDA_HOME");
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
  CHECK(system(cmd) == 0);
  free(home);
}

static void test_stub(void) {
  cucap_profile *p = NULL;
  TU_REQUIRE(cucap_profile_create(&p) == CUCAP_OK);
  cucap_profiler_options o;
  cucap_profiler_options_init(&o);
  o.pc_sampling = 1;
  cucap_profiler *prof = (cucap_profiler *)1;
  cucap_status st = cucap_profiler_create(&o, p, &prof);
  if (!strcmp(cucap_profiler_backend_name(), "none")) {
    CHECK(st == CUCAP_ERR_UNSUPPORTED && prof == NULL);
    for (int s = 0; s < 3; s++) {
      cucap_profile_state ps;
      const char *msg;
      cucap_profile_get_section(p, (cucap_profile_section)s, &ps, NULL, &msg);
      CHECK(ps == CUCAP_PROFILE_UNAVAILABLE && strstr(msg, "not built"));
    }
    cucap_profiler_probe pr;
    cucap_profiler_probe_options po = {NULL, NULL, 0};
    CHECK(cucap_profiler_probe_run(&po, &pr) == CUCAP_OK && pr.counters == CUCAP_PROBE_UNKNOWN &&
          strstr(pr.counters_msg, "not built"));
    CHECK(!cucap_profiler_observer(NULL) && cucap_profiler_finish(NULL) != CUCAP_OK);
  }
  cucap_profiler_destroy(prof);
  cucap_profile_destroy(p);
  CHECK(!strcmp(cucap_probe_state_name(CUCAP_PROBE_DENIED), "denied"));
}

/* The event timeline on the mock: every launch gets one timing per pass,
 * copies one activity per pass; launches inside a stream capture none. */
static void test_evtimer(const char *mock, int flags, int nlaunch) {
  char *path = tu_tmp_path("evt.fb");
  NLAUNCH = nlaunch;
  write_capture(path, flags);
  cucap_reader *r = NULL;
  char msg[256];
  TU_REQUIRE(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  cucap_analysis *a = NULL;
  TU_REQUIRE(cucap_analysis_create(r, NULL, &a) == CUCAP_OK);
  cucap_profile *p = NULL;
  TU_REQUIRE(cucap_profile_create(&p) == CUCAP_OK);
  TU_REQUIRE(cucap_profile_add_analysis(p, a) == CUCAP_OK);
  CHECK(cucap_profile_launch_count(p) == (size_t)nlaunch);
  cucap_evtimer *t = NULL;
  TU_REQUIRE(cucap_evtimer_create(p, &t) == CUCAP_OK);
  const cucap_replay_observer *obs[1] = {cucap_evtimer_observer(t)};
  cucap_replay_options o;
  cucap_replay_options_init(&o);
  o.libcuda = mock;
  o.loops = 3;
  o.observers = obs;
  o.nobservers = 1;
  cucap_replay_report rep;
  CHECK(cucap_replay_run(path, &o, &rep) == CUCAP_OK);
  CHECK(cucap_evtimer_finish(t) == CUCAP_OK);
  cucap_profile_state st;
  const char *src, *why;
  cucap_profile_get_section(p, CUCAP_PROFILE_TIMELINE, &st, &src, &why);
  CHECK(st == CUCAP_PROFILE_OK && !strcmp(src, "cuda-events"));
  for (size_t i = 0; i < cucap_profile_launch_count(p); i++) {
    const cucap_profile_launch *l = cucap_profile_launch_at(p, i);
    if (flags & CAP_GRAPH)
      CHECK(l->ntimings == 0); /* captured: it runs inside the graph launches */
    else
      CHECK(l->ntimings == 3 && l->timings[0].pass == 0 && l->timings[2].pass == 2 &&
            l->timings[1].end_ns >= l->timings[1].start_ns);
  }
  size_t copies = 0, graphs = 0;
  for (size_t i = 0; i < cucap_profile_activity_count(p); i++) {
    const cucap_profile_activity *x = cucap_profile_activity_at(p, i);
    copies += x->kind == CUCAP_PROFILE_ACT_MEMCPY;
    graphs += x->kind == CUCAP_PROFILE_ACT_GRAPH;
    CHECK(x->pass < 3 && x->seq > 0);
  }
  /* HtoD a, HtoD b, DtoH c per pass (the graph's DtoH is captured) */
  CHECK(copies == 9);
  CHECK(graphs == ((flags & CAP_GRAPH) ? 9u : 0u));
  cucap_profile_info in = *cucap_profile_info_get(p);
  CHECK(in.device[0] && in.cc_major == 9); /* the mock GPU, filled at begin */
  cucap_evtimer_destroy(t);
  cucap_profile_destroy(p);
  cucap_analysis_destroy(a);
  cucap_reader_destroy(r);
  unlink(path);
  free(path);
}

int main(void) {
  test_sets();
  test_range();
  test_find_cupti();
  test_stub();
  const char *bd = getenv("CUCAP_BUILD_DIR");
  char mock[1024];
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  struct stat st;
  if (stat(mock, &st) == 0) {
    test_evtimer(mock, 0, 4);
    test_evtimer(mock, CAP_GRAPH, 2);
  } else {
    printf("test_profiler: mock libcuda not built (%s); event timeline not tested\n", mock);
  }
  return tu_finish("test_profiler", 0);
}
