/* test_profile.c - profile/profile_*.c (cucap_profile.h): the bottleneck
 * classification (a GEMM-like, a copy-like and a tiny kernel must come out
 * compute, memory and latency), the model (timings over passes, metrics,
 * PC samples, kernels table, sections), thread-safe filling, the writers
 * (report, JSON, folded stacks) and the profile file (round trip, damaged
 * and foreign files never crash). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_demangle.h"
#include "cucap_json.h"
#include "cucap_profile.h"
#include "cucap_reader.h"
#include "testutil.h"
#include "workload.h"

#define CHECK TU_CHECK

static cucap_classification classify(double sm, double mem, double dram, double l2, double l1,
                                     double occ, double tensor, uint64_t blocks) {
  cucap_sol s;
  cucap_sol_init(&s);
  s.sm_pct = sm;
  s.memory_pct = mem;
  s.dram_pct = dram;
  s.l2_pct = l2;
  s.l1_pct = l1;
  s.occupancy_pct = occ;
  s.tensor_pct = tensor;
  s.blocks = blocks;
  s.sm_count = 132;
  cucap_classification c;
  cucap_classify(&s, &c);
  return c;
}

static void test_classify(void) {
  /* GEMM: SM busy, tensor pipes busy */
  cucap_classification c = classify(85, 45, 30, 40, 45, 48, 72, 1056);
  CHECK(c.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(c.unit, "tensor"));
  CHECK(strstr(c.reason, "85.0%") != NULL);
  /* copy / elementwise: DRAM busy */
  c = classify(18, 91, 89, 50, 30, 80, -1, 4096);
  CHECK(c.cls == CUCAP_BOTTLENECK_MEMORY && !strcmp(c.unit, "dram"));
  /* tiny kernel: nothing busy, one block */
  c = classify(1.5, 0.8, 0.2, 0.5, 0.7, 3, -1, 1);
  CHECK(c.cls == CUCAP_BOTTLENECK_LATENCY);
  CHECK(strstr(c.reason, "grid of 1 blocks < 132 SMs") && strstr(c.reason, "occupancy 3.0%"));
  c = classify(78, 72, 70, 60, 50, 60, -1, 2000);
  CHECK(c.cls == CUCAP_BOTTLENECK_MIXED);
  /* rt_tensor's wgmma GEMM on an H200: only compute saturated (>= 80), memory
   * bound and 18.8 points below: compute (tensor), not mixed */
  c = classify(86.5, 67.7, 24.6, 52.5, 71.7, 14.6, 91.5, 1056);
  CHECK(c.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(c.unit, "tensor"));
  c = classify(62, 81, 81, 60, 50, 60, -1, 2000); /* only memory saturated */
  CHECK(c.cls == CUCAP_BOTTLENECK_MEMORY && !strcmp(c.unit, "dram"));
  c = classify(88, 82, 82, 60, 50, 60, -1, 2000); /* both saturated and close */
  CHECK(c.cls == CUCAP_BOTTLENECK_MIXED);
  c = classify(95, 70, 70, 60, 50, 60, 10, 2000); /* both bound but 25 points apart */
  CHECK(c.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(c.unit, "sm"));
  c = classify(30, 75, 40, 75, 20, 50, -1, 2000);
  CHECK(c.cls == CUCAP_BOTTLENECK_MEMORY && !strcmp(c.unit, "l2"));
  c = classify(20, -1, 85, -1, -1, -1, -1, 0); /* memory SOL rebuilt from its units */
  CHECK(c.cls == CUCAP_BOTTLENECK_MEMORY);
  c = classify(60, 10, -1, -1, -1, -1, -1, 0); /* thresholds are inclusive */
  CHECK(c.cls == CUCAP_BOTTLENECK_COMPUTE);
  c = classify(59.9, 59.9, -1, -1, -1, -1, -1, 0);
  CHECK(c.cls == CUCAP_BOTTLENECK_LATENCY);
  c = classify(-1, -1, -1, -1, -1, -1, -1, 0);
  CHECK(c.cls == CUCAP_BOTTLENECK_UNKNOWN && strstr(c.reason, "not measured"));
  CHECK(!strcmp(cucap_bottleneck_name(CUCAP_BOTTLENECK_LATENCY), "latency"));
}

static void add_sol(cucap_profile *p, uint64_t key, double sm, double mem, double dram,
                    double occ, double tensor) {
  CHECK(cucap_profile_add_metric(p, key, CUCAP_METRIC_SM, sm) == CUCAP_OK);
  CHECK(cucap_profile_add_metric(p, key, CUCAP_METRIC_MEMORY, mem) == CUCAP_OK);
  CHECK(cucap_profile_add_metric(p, key, CUCAP_METRIC_DRAM, dram) == CUCAP_OK);
  CHECK(cucap_profile_add_metric(p, key, CUCAP_METRIC_OCCUPANCY, occ) == CUCAP_OK);
  if (tensor >= 0)
    CHECK(cucap_profile_add_metric(p, key, CUCAP_METRIC_TENSOR_HMMA, tensor) == CUCAP_OK);
}

static const char *const FRAMES[3] = {"libcuda.so.1+0x10", "main+0x20 (app+0x20)",
                                      "__libc_start_main"};

/* launches 0,1 gemm; 2 copy; 3 tiny; a graph kernel; timings, metrics,
 * samples */
static cucap_profile *build(void) {
  cucap_profile *p = NULL;
  TU_REQUIRE(cucap_profile_create(&p) == CUCAP_OK);
  cucap_profile_info in = *cucap_profile_info_get(p);
  snprintf(in.capture_path, sizeof in.capture_path, "x.fb");
  memset(in.capture_id, 0xab, 16);
  snprintf(in.device, sizeof in.device, "Test GPU");
  in.sm_count = 132;
  in.loops = 3;
  in.passes = 3;
  snprintf(in.metric_set, sizeof in.metric_set, "sol");
  cucap_profile_set_info(p, &in);
  static const char *const k[4] = {"_Z4gemmPf", "_Z4gemmPf", "_Z4copyPfS_", "_Z4tinyv"};
  const uint32_t blocks[4] = {1056, 1056, 4096, 1};
  for (int i = 3; i >= 0; i--) { /* out of order on purpose */
    cucap_profile_launch_desc d = {(uint64_t)i, 100 + (uint64_t)i, k[i], {blocks[i], 1, 1},
                                   {256, 1, 1}, 0, 0x5100, i < 2 ? 7u : 0u};
    CHECK(cucap_profile_add_launch(p, &d) == CUCAP_OK);
  }
  cucap_profile_launch_desc g = {CUCAP_PROFILE_GRAPH_KEY(500, 2), 500, "_Z4tinyv", {1, 1, 1},
                                 {32, 1, 1}, 0, 0x5100, 0};
  CHECK(cucap_profile_add_launch(p, &g) == CUCAP_OK);
  CHECK(cucap_profile_add_launch(p, &g) == CUCAP_OK); /* duplicate: kept once */
  CHECK(cucap_profile_set_stack(p, 7, FRAMES, 3, 1) == CUCAP_OK);
  const uint64_t dur[4][3] = {{100, 110, 90}, {200, 200, 200}, {400, 380, 420}, {5, 5, 6}};
  for (int i = 0; i < 4; i++)
    for (unsigned pass = 0; pass < 3; pass++)
      CHECK(cucap_profile_add_kernel_timing(p, (uint64_t)i, pass, 1000 * pass + 10 * i,
                                            1000 * pass + 10 * i + dur[i][pass]) == CUCAP_OK);
  CHECK(cucap_profile_add_kernel_timing(p, CUCAP_PROFILE_GRAPH_KEY(500, 2), 0, 0, 7) == CUCAP_OK);
  CHECK(cucap_profile_add_kernel_timing(p, 42, 0, 0, 1) == CUCAP_ERR_NOT_FOUND);
  CHECK(cucap_profile_add_metric(p, 42, CUCAP_METRIC_SM, 1) == CUCAP_ERR_NOT_FOUND);
  add_sol(p, 0, 85, 45, 30, 48, 72);
  add_sol(p, 1, 10, 5, 5, 5, 1); /* replaced below */
  add_sol(p, 1, 85, 45, 30, 48, 72);
  add_sol(p, 2, 18, 91, 89, 80, -1);
  add_sol(p, 3, 1.5, 0.8, 0.2, 3, -1);
  cucap_profile_pc a = {"_Z4gemmPf", 0x1234, 0x10, "FFMA R0, R1, R2, R3", "a.cu", 10, NULL};
  cucap_profile_pc b = {"_Z4gemmPf", 0x1234, 0x20, NULL, "a.cu", 12, "inl@a.cu:3"};
  CHECK(cucap_profile_add_pc_sample(p, 0, &a, "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                                    30) == CUCAP_OK);
  CHECK(cucap_profile_add_pc_sample(p, 0, &a, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle",
                                    10) == CUCAP_OK);
  CHECK(cucap_profile_add_pc_sample(p, 0, &b, NULL, 20) == CUCAP_OK);
  CHECK(cucap_profile_add_pc_sample(p, 1, &a, "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                                    25) == CUCAP_OK);
  CHECK(cucap_profile_add_pc_sample(p, 1, &a, "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                                    15) == CUCAP_OK); /* adds up */
  CHECK(cucap_profile_add_pc_sample(p, 9, &a, "x", 1) == CUCAP_ERR_NOT_FOUND);
  CHECK(cucap_profile_add_sass_metric(p, 0, &a, "smsp__sass_inst_executed", 1000) == CUCAP_OK);
  cucap_profile_activity act = {CUCAP_PROFILE_ACT_MEMCPY, 99, 12, 0, 0, 50, 4096, 0, 0};
  CHECK(cucap_profile_add_activity(p, &act) == CUCAP_OK);
  cucap_profile_set_section(p, CUCAP_PROFILE_TIMELINE, CUCAP_PROFILE_OK, "test", "%d ops", 13);
  cucap_profile_set_section(p, CUCAP_PROFILE_METRICS, CUCAP_PROFILE_PARTIAL, "test",
                            "missing %s", "l1");
  cucap_finding f;
  memset(&f, 0, sizeof f);
  snprintf(f.id, sizeof f.id, "sync_calls");
  snprintf(f.title, sizeof f.title, "synchronisation: test");
  f.severity = CUCAP_SEVERITY_MEDIUM;
  f.estimated = 1;
  f.recoverable_ns = 1234;
  f.recoverable_pct = 4.5;
  f.nnumbers = 1;
  snprintf(f.numbers[0].name, sizeof f.numbers[0].name, "syncs");
  f.numbers[0].value = 3;
  f.nsites = 1;
  f.sites[0] = (cucap_finding_site){7, 3, 99};
  CHECK(cucap_profile_add_finding(p, &f) == CUCAP_OK);
  return p;
}

/* Tensor-pipe use: every tensor pipe (CUCAP_METRIC_TENSOR, Hopper's wgmma
 * included) where measured, the larger of it and HMMA; HMMA alone for a
 * profile made before the sets had it. */
static void test_tensor_pipes(void) {
  cucap_profile *p = NULL;
  TU_REQUIRE(cucap_profile_create(&p) == CUCAP_OK);
  for (uint64_t k = 0; k < 3; k++) {
    cucap_profile_launch_desc d = {k, 10 + k, "_Z4gemmPf", {1056, 1, 1}, {256, 1, 1}, 0, 0, 0};
    CHECK(cucap_profile_add_launch(p, &d) == CUCAP_OK);
    CHECK(cucap_profile_add_metric(p, k, CUCAP_METRIC_SM, 85) == CUCAP_OK);
    CHECK(cucap_profile_add_metric(p, k, CUCAP_METRIC_MEMORY, 40) == CUCAP_OK);
  }
  /* 0: a wgmma GEMM - no HMMA, the tensor pipes busy */
  CHECK(cucap_profile_add_metric(p, 0, CUCAP_METRIC_TENSOR_HMMA, 0) == CUCAP_OK);
  CHECK(cucap_profile_add_metric(p, 0, CUCAP_METRIC_TENSOR, 81) == CUCAP_OK);
  /* 1: HMMA only (an older profile) */
  CHECK(cucap_profile_add_metric(p, 1, CUCAP_METRIC_TENSOR_HMMA, 70) == CUCAP_OK);
  /* 2: an FFMA GEMM - neither */
  CHECK(cucap_profile_add_metric(p, 2, CUCAP_METRIC_TENSOR_HMMA, 0) == CUCAP_OK);
  CHECK(cucap_profile_add_metric(p, 2, CUCAP_METRIC_TENSOR, 0.5) == CUCAP_OK);
  const cucap_profile_launch *l = cucap_profile_launch_find(p, 0);
  CHECK(l && l->cls.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(l->cls.unit, "tensor"));
  l = cucap_profile_launch_find(p, 1);
  CHECK(l && l->cls.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(l->cls.unit, "tensor"));
  l = cucap_profile_launch_find(p, 2);
  CHECK(l && l->cls.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(l->cls.unit, "sm"));
  cucap_profile_destroy(p);
}

static void test_model(cucap_profile *p) {
  CHECK(cucap_profile_launch_count(p) == 5);
  const cucap_profile_launch *l = cucap_profile_launch_at(p, 0);
  CHECK(l && l->key == 0 && l->seq == 100 && l->ntimings == 3);
  CHECK(l && l->median_ns == 100 && l->min_ns == 90 && l->max_ns == 110 &&
        fabs(l->spread_pct - 20.0) < 1e-9);
  CHECK(l && l->cls.cls == CUCAP_BOTTLENECK_COMPUTE && !strcmp(l->cls.unit, "tensor"));
  CHECK(l && l->samples == 60 && l->stalls[0].samples == 30 && l->stalls[1].samples == 20 &&
        !strcmp(l->stalls[1].name, "none") && l->stalls[2].samples == 10);
  double v = 0;
  CHECK(l && cucap_profile_launch_metric(p, l, CUCAP_METRIC_SM, &v) && v == 85);
  l = cucap_profile_launch_find(p, 1);
  CHECK(l && cucap_profile_launch_metric(p, l, CUCAP_METRIC_SM, &v) && v == 85); /* replaced */
  CHECK(l && l->nmetrics == 5 && l->samples == 40);
  l = cucap_profile_launch_find(p, 2);
  CHECK(l && l->cls.cls == CUCAP_BOTTLENECK_MEMORY && !strcmp(l->cls.unit, "dram"));
  l = cucap_profile_launch_find(p, 3);
  CHECK(l && l->cls.cls == CUCAP_BOTTLENECK_LATENCY && strstr(l->cls.reason, "grid of 1"));
  l = cucap_profile_launch_at(p, 4);
  CHECK(l && CUCAP_PROFILE_KEY_IS_GRAPH(l->key) && CUCAP_PROFILE_KEY_SEQ(l->key) == 500 &&
        CUCAP_PROFILE_KEY_NODE(l->key) == 2 && l->median_ns == 7 &&
        l->cls.cls == CUCAP_BOTTLENECK_UNKNOWN);
  CHECK(!cucap_profile_launch_find(p, 77));

  /* kernels by total time: copy 400, gemm 100+200, tiny 5+7 */
  CHECK(cucap_profile_kernel_count(p) == 3);
  const cucap_profile_kernel *k = cucap_profile_kernel_at(p, 0);
  CHECK(k && !strcmp(k->kernel, "_Z4copyPfS_") && k->total_ns == 400 && k->launches == 1);
  CHECK(k && fabs(k->share_pct - 100.0 * 400 / 712) < 1e-9 && k->cls.cls == CUCAP_BOTTLENECK_MEMORY);
  k = cucap_profile_kernel_at(p, 1);
  CHECK(k && !strcmp(k->kernel, "_Z4gemmPf") && k->launches == 2 && k->total_ns == 300 &&
        k->median_ns == 150);
  CHECK(k && fabs(k->sm_pct - 85) < 1e-9 && k->cls.cls == CUCAP_BOTTLENECK_COMPUTE);
  CHECK(k && k->samples == 100 && k->stalls[0].samples == 70 &&
        !strcmp(k->stalls[0].name, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"));
  CHECK(k && !strcmp(k->lines[0].name, "a.cu:10") && fabs(k->lines[0].pct - 80) < 1e-9);
  CHECK(k && !strcmp(k->lines[1].name, "a.cu:12") && k->lines[1].samples == 20);
  k = cucap_profile_kernel_at(p, 2);
  CHECK(k && k->launches == 2 && k->total_ns == 12 && k->cls.cls == CUCAP_BOTTLENECK_LATENCY);
  char dem[256];
  if (cucap_demangle("_Z4gemmPf", dem, sizeof dem)) { /* libstdc++ present */
    CHECK(!strcmp(dem, "gemm(float*)"));
    CHECK(!strcmp(cucap_profile_kernel_at(p, 1)->short_name, "gemm"));
  }

  CHECK(cucap_profile_sample_count(p) == 4);
  cucap_profile_sample_row row;
  CHECK(cucap_profile_sample_at(p, 0, &row) == CUCAP_OK && row.key == 0 &&
        row.pc->pc_offset == 0x10 && !strcmp(row.pc->sass, "FFMA R0, R1, R2, R3"));
  CHECK(cucap_profile_sample_at(p, 3, &row) == CUCAP_OK && row.key == 1 && row.samples == 40);
  CHECK(cucap_profile_sample_at(p, 4, &row) == CUCAP_ERR_NOT_FOUND);
  cucap_profile_sass_row sr;
  CHECK(cucap_profile_sass_count(p) == 1 && cucap_profile_sass_at(p, 0, &sr) == CUCAP_OK &&
        sr.value == 1000 && !strcmp(sr.metric, "smsp__sass_inst_executed"));
  CHECK(cucap_profile_activity_count(p) == 1 && cucap_profile_activity_at(p, 0)->bytes == 4096);
  cucap_profile_state st;
  const char *src, *msg;
  cucap_profile_get_section(p, CUCAP_PROFILE_METRICS, &st, &src, &msg);
  CHECK(st == CUCAP_PROFILE_PARTIAL && !strcmp(src, "test") && !strcmp(msg, "missing l1"));
  cucap_profile_get_section(p, CUCAP_PROFILE_PCSAMPLING, &st, &src, &msg);
  CHECK(st == CUCAP_PROFILE_NOT_REQUESTED);
  size_t n = 0, first = 0;
  const char *const *fr = cucap_profile_stack(p, 7, &n, &first);
  CHECK(fr && n == 3 && first == 1 && !strcmp(fr[2], "__libc_start_main"));
}

static char *slurp(FILE *f, size_t *n) {
  fflush(f);
  long sz = ftell(f);
  rewind(f);
  char *b = malloc((size_t)sz + 1);
  if (!b)
    return NULL;
  *n = fread(b, 1, (size_t)sz, f);
  b[*n] = 0;
  return b;
}

static char *json_of(cucap_profile *p) {
  cucap_json *w = cucap_json_create_mem(0);
  TU_REQUIRE(w);
  CHECK(cucap_profile_write_json(p, w) == CUCAP_OK);
  size_t len = 0;
  const char *s = cucap_json_mem_data(w, &len);
  char *copy = strdup(s ? s : "");
  cucap_json_destroy(w);
  return copy;
}

static void test_writers(cucap_profile *p) {
  char dem[256], sh[128];
  cucap_demangle("_Z4gemmPf", dem, sizeof dem);
  cucap_demangle_short(dem, sh, sizeof sh, 80);
  FILE *f = tmpfile();
  TU_REQUIRE(f);
  size_t lines = 0;
  CHECK(cucap_profile_write_folded(p, f, &lines) == CUCAP_OK && lines == 2);
  size_t n = 0;
  char *txt = slurp(f, &n);
  char want[1024];
  snprintf(want, sizeof want,
           "__libc_start_main;main+0x20 (app+0x20);%s;a.cu:10;0x0010 FFMA R0, R1, R2, R3 80\n"
           "__libc_start_main;main+0x20 (app+0x20);%s;a.cu:12;0x0020 20\n",
           sh, sh);
  CHECK(txt && !strcmp(txt, want));
  if (txt && strcmp(txt, want))
    fprintf(stderr, "folded:\n%swant:\n%s", txt, want);
  free(txt);
  fclose(f);

  char *js = json_of(p);
  CHECK(js && js[0] == '{' && js[strlen(js) - 1] == '}');
  CHECK(js && strstr(js, "\"launch_index\":3") && strstr(js, "\"graph_launch_seq\":500"));
  CHECK(js && strstr(js, "\"class\":\"compute\"") && strstr(js, "\"unit\":\"tensor\""));
  CHECK(js && strstr(js, "\"state\":\"partial\"") && strstr(js, "\"id\":\"sync_calls\""));
  CHECK(js && strstr(js, "\"copy_kind\":\"HtoD\"") && strstr(js, "\"inlined\":\"inl@a.cu:3\""));
  free(js);

  f = tmpfile();
  TU_REQUIRE(f);
  cucap_profile_print(p, f, NULL);
  txt = slurp(f, &n);
  CHECK(txt && strstr(txt, "top kernels") && strstr(txt, "compute/tensor") &&
        strstr(txt, "memory/dram") && strstr(txt, "latency"));
  CHECK(txt && strstr(txt, "note: metrics partial: missing l1"));
  CHECK(txt && strstr(txt, "long_scoreboard") && strstr(txt, "line  a.cu:10"));
  CHECK(txt && strstr(txt, "[medium] sync_calls") && strstr(txt, "main+0x20 (app+0x20)"));
  free(txt);
  fclose(f);
}

static void test_file(cucap_profile *p) {
  char *path = tu_tmp_path("p.prof");
  TU_REQUIRE(path && cucap_profile_save(p, path) == CUCAP_OK);
  const char *seed = getenv("CUCAP_PROFILE_SEED"); /* tests/run.sh seeds fuzz_profile */
  if (seed)
    CHECK(cucap_profile_save(p, seed) == CUCAP_OK);
  cucap_profile *q = NULL;
  char msg[256];
  CHECK(cucap_profile_load(path, &q, msg, sizeof msg) == CUCAP_OK);
  if (q) {
    char *a = json_of(p), *b = json_of(q);
    CHECK(a && b && !strcmp(a, b));
    free(a);
    free(b);
    CHECK(cucap_profile_same_capture(p, q));
    const cucap_finding *f = cucap_profile_finding_at(q, 0);
    CHECK(f && f->recoverable_ns == 1234 && f->nsites == 1 && f->numbers[0].value == 3);
    cucap_profile_destroy(q);
  }
  FILE *fp = fopen(path, "rb");
  TU_REQUIRE(fp);
  fseek(fp, 0, SEEK_END);
  size_t n = (size_t)ftell(fp);
  rewind(fp);
  uint8_t *buf = malloc(n);
  TU_REQUIRE(buf && fread(buf, 1, n, fp) == n);
  fclose(fp);
  /* every truncation and a bit flip in every byte are errors, not crashes */
  for (size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : 7)) {
    q = NULL;
    CHECK(cucap_profile_load_memory(buf, cut, &q, msg, sizeof msg) != CUCAP_OK && !q);
  }
  /* a flipped bit is an error, or changed nothing that is read (the minor
   * version, flags bits, unused bits of the zstd frame): then the profile
   * loads identical */
  char *orig = json_of(p);
  size_t same = 0;
  for (size_t i = 0; i < n; i++) {
    buf[i] ^= 0x10;
    q = NULL;
    cucap_status st = cucap_profile_load_memory(buf, n, &q, msg, sizeof msg);
    if (st == CUCAP_OK) {
      char *got = q ? json_of(q) : NULL;
      CHECK(got && orig && !strcmp(got, orig));
      free(got);
      same++;
    } else {
      CHECK(!q);
    }
    cucap_profile_destroy(q);
    buf[i] ^= 0x10;
  }
  CHECK(same < 16);
  free(orig);
  buf[8] = 2; /* major 2 */
  CHECK(cucap_profile_load_memory(buf, n, &q, msg, sizeof msg) == CUCAP_ERR_VERSION &&
        strstr(msg, "2.0"));
  buf[0] = 'X';
  CHECK(cucap_profile_load_memory(buf, n, &q, msg, sizeof msg) == CUCAP_ERR_BAD_MAGIC);
  CHECK(cucap_profile_load("/nonexistent/x.prof", &q, msg, sizeof msg) == CUCAP_ERR_IO);
  free(buf);
  unlink(path);
  free(path);
}

typedef struct thr {
  cucap_profile *p;
  uint64_t key;
} thr;

static void *filler(void *arg) {
  thr *t = arg;
  for (unsigned i = 0; i < 2000; i++) {
    cucap_profile_add_kernel_timing(t->p, t->key, i, i * 10, i * 10 + 5);
    cucap_profile_add_metric(t->p, t->key, i % 2 ? "m.a" : "m.b", i);
  }
  return NULL;
}

static void test_threads(void) {
  cucap_profile *p = NULL;
  TU_REQUIRE(cucap_profile_create(&p) == CUCAP_OK);
  thr t[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    cucap_profile_launch_desc d = {(uint64_t)i, (uint64_t)i, "k", {1, 1, 1}, {1, 1, 1}, 0, 0, 0};
    cucap_profile_add_launch(p, &d);
    t[i] = (thr){p, (uint64_t)i};
  }
  for (int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, filler, &t[i]);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    const cucap_profile_launch *l = cucap_profile_launch_find(p, (uint64_t)i);
    CHECK(l && l->ntimings == 2000 && l->nmetrics == 2 && l->median_ns == 5);
  }
  cucap_profile_destroy(p);
}

static void test_analysis(void) {
  char *path = tu_tmp_path("train.fb");
  char err[256];
  TU_REQUIRE(path && wl_write(path, "train", err, sizeof err) == 0);
  cucap_reader *r = NULL;
  TU_REQUIRE(cucap_reader_open(path, NULL, &r, err, sizeof err) == CUCAP_OK);
  cucap_analysis *a = NULL;
  TU_REQUIRE(cucap_analysis_create(r, NULL, &a) == CUCAP_OK);
  cucap_profile *p = NULL;
  TU_REQUIRE(cucap_profile_create(&p) == CUCAP_OK);
  CHECK(cucap_profile_add_analysis(p, a) == CUCAP_OK);
  CHECK(cucap_profile_launch_count(p) == 330);
  CHECK(cucap_profile_finding_count(p) == cucap_analysis_finding_count(a));
  const cucap_profile_launch *l = cucap_profile_launch_find(p, 17);
  CHECK(l && !strcmp(l->kernel, "_Z4tinyv") && l->callstack == 6);
  size_t n = 0, first = 0;
  const char *const *fr = cucap_profile_stack(p, 6, &n, &first);
  CHECK(fr && n == 3 && first == 1 && !strncmp(fr[1], "trainer+0x", 10));
  cucap_profile_state st;
  cucap_profile_get_section(p, CUCAP_PROFILE_ANALYSIS, &st, NULL, NULL);
  CHECK(st == CUCAP_PROFILE_OK);
  /* folded without samples or times: one line per launch site, launch counts */
  FILE *f = tmpfile();
  size_t lines = 0;
  CHECK(f && cucap_profile_write_folded(p, f, &lines) == CUCAP_OK && lines == 18);
  if (f)
    fclose(f);
  uint8_t id[16];
  cucap_profile_capture_id(r, id);
  static const uint8_t zero[16];
  CHECK(memcmp(id, zero, 16) != 0);
  cucap_profile_clear_findings(p);
  CHECK(cucap_profile_finding_count(p) == 0);
  cucap_profile_destroy(p);
  cucap_analysis_destroy(a);
  cucap_reader_destroy(r);
  unlink(path);
  free(path);
}

int main(void) {
  test_classify();
  test_tensor_pipes();
  cucap_profile *p = build();
  test_model(p);
  test_writers(p);
  test_file(p);
  cucap_profile_destroy(p);
  test_threads();
  test_analysis();
  char s[64];
  cucap_demangle_short("void a::b<int, c<d>>::run(float*)", s, sizeof s, 80);
  CHECK(!strcmp(s, "a::b<int, c<d>>::run"));
  cucap_demangle_short("void a::b<int, c<d>>::run(float*)", s, sizeof s, 8);
  CHECK(!strcmp(s, "a::b<...") || strlen(s) <= 8);
  CHECK(cucap_demangle("plain_c", s, sizeof s) == 0 && !strcmp(s, "plain_c"));
  return tu_finish("test_profile", 0);
}
