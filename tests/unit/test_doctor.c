/* test_doctor.c - tools/doctor.c (cucap_doctor.h): exit codes and the
 * fixes named for a missing driver, the mock libcuda (replay possible,
 * --profile lacking the CUPTI backend), a fake /proc with counters
 * restricted to admin users and a strict perf_event_paranoid, a missing
 * libcupti; the CUCAP_* variables it lists (known, unknown). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cucap_doctor.h"
#include "cucap_json.h"
#include "cucap_knobs.h"
#include "cucap_profiler.h"
#include "testutil.h"

#define CHECK TU_CHECK

static const cucap_doctor_check *get(const cucap_doctor_report *r, const char *name) {
  for (unsigned i = 0; i < r->n; i++)
    if (!strcmp(r->checks[i].name, name))
      return &r->checks[i];
  return NULL;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  TU_REQUIRE(f);
  fputs(text, f);
  fclose(f);
}

static int has(const char *text, const char *needle) {
  if (!strstr(text, needle))
    fprintf(stderr, "missing: %s\n", needle);
  return strstr(text, needle) != NULL;
}

/* the CUCAP_* variables set, in the report, the text and the JSON: a knob
 * with its registry doc, a typo flagged unknown, other variables left out */
static void test_knob_listing(cucap_doctor_options *o) {
  char *env[] = {"PATH=/bin", "CUCAP_LOG_LEVLE=info", "XCUCAP_OUTPUT=x",
                 "CUCAP_LOG_LEVEL=debug", NULL};
  cucap_doctor_report r;
  o->env = env;
  CHECK(cucap_doctor_run(o, &r) == CUCAP_OK);
  o->env = NULL;
  const cucap_knob_info *in = cucap_knob_find("CUCAP_LOG_LEVEL", 15);
  TU_REQUIRE(in);
  CHECK(r.nknobs == 2 && !strcmp(r.knobs[0].name, "CUCAP_LOG_LEVEL") &&
        !strcmp(r.knobs[0].value, "debug") && r.knobs[0].doc == in->doc &&
        !strcmp(r.knobs[1].name, "CUCAP_LOG_LEVLE") && !strcmp(r.knobs[1].value, "info") &&
        r.knobs[1].doc == NULL);
  char *txt = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&txt, &n);
  TU_REQUIRE(m);
  cucap_doctor_print(&r, m);
  fclose(m);
  char line[512];
  snprintf(line, sizeof line, "[env]  CUCAP_LOG_LEVEL=debug\n                    %s\n", in->doc);
  CHECK(has(txt, line) && has(txt, "[env?] CUCAP_LOG_LEVLE=info\n") &&
        has(txt, "unknown: cucap reads no such variable") && !strstr(txt, "XCUCAP") &&
        has(txt, "[FAIL] driver") && strstr(txt, "\nresult: ") > strstr(txt, "[env?]"));
  free(txt);
  cucap_json *w = cucap_json_create_mem(0);
  TU_REQUIRE(w);
  cucap_doctor_write_json(&r, w);
  const char *js = cucap_json_mem_data(w, &n);
  CHECK(js && has(js, "\"environment\":[{\"name\":\"CUCAP_LOG_LEVEL\",\"value\":\"debug\","
                      "\"known\":true,\"doc\":\"log level: ") &&
        has(js, "{\"name\":\"CUCAP_LOG_LEVLE\",\"value\":\"info\",\"known\":false,"
                "\"doc\":null}]") &&
        has(js, "\"exit_code\":3"));
  cucap_json_destroy(w);
  /* this process's own environment: ctest sets CUCAP_BUILD_DIR, which only
   * tests read */
  if (getenv("CUCAP_BUILD_DIR")) {
    CHECK(cucap_doctor_run(o, &r) == CUCAP_OK);
    int seen = 0;
    for (unsigned i = 0; i < r.nknobs; i++)
      seen |= !strcmp(r.knobs[i].name, "CUCAP_BUILD_DIR") && !r.knobs[i].doc;
    CHECK(seen);
  }
}

int main(void) {
  cucap_doctor_report r;
  cucap_doctor_options o;
  memset(&o, 0, sizeof o);
  o.libcuda = "/nonexistent/libcuda.so.1";
  o.libcupti = "/nonexistent/libcupti.so.13";
  CHECK(cucap_doctor_run(&o, &r) == CUCAP_OK);
  const cucap_doctor_check *c = get(&r, "driver");
  CHECK(c && c->state == CUCAP_CHECK_FAIL && strstr(c->fix, "--libcuda"));
  CHECK(get(&r, "gpu") && get(&r, "gpu")->state == CUCAP_CHECK_SKIP);
  c = get(&r, "cupti");
  CHECK(c && c->state == CUCAP_CHECK_FAIL && strstr(c->value, "/nonexistent/libcupti.so.13") &&
        strstr(c->fix, "--cupti"));
  CHECK(!r.can_replay && !r.can_profile && r.exit_code == 3);
  CHECK(get(&r, "perf_event") && get(&r, "nvdisasm") && get(&r, "libdw"));
  test_knob_listing(&o);

  const char *bd = getenv("CUCAP_BUILD_DIR");
  char mock[1024];
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  struct stat st;
  if (stat(mock, &st) != 0) {
    printf("test_doctor: mock libcuda not built (%s); skipping the driver checks\n", mock);
    return tu_finish("test_doctor", 0);
  }
  char *root = tu_tmp_path("proc");
  char cmd[2048], path[1200];
  TU_REQUIRE(root);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/driver/nvidia' '%s/sys/kernel'", root, root);
  TU_REQUIRE(system(cmd) == 0);
  snprintf(path, sizeof path, "%s/driver/nvidia/params", root);
  write_file(path, "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nRmLogonRC: 1\n");
  snprintf(path, sizeof path, "%s/sys/kernel/perf_event_paranoid", root);
  write_file(path, "3\n");
  memset(&o, 0, sizeof o);
  o.libcuda = mock;
  o.libcupti = "/nonexistent/libcupti.so.13";
  o.proc_root = root;
  o.assume_non_root = 1;
  CHECK(cucap_doctor_run(&o, &r) == CUCAP_OK);
  c = get(&r, "driver");
  CHECK(c && c->state == CUCAP_CHECK_OK && strstr(c->value, "CUDA 13.0"));
  c = get(&r, "gpu");
  CHECK(c && c->state == CUCAP_CHECK_OK && strstr(c->value, "cucap mock GPU") &&
        strstr(c->value, "sm_90"));
  c = get(&r, "counters");
  CHECK(c && c->state == CUCAP_CHECK_FAIL && strstr(c->value, "RmProfilingAdminOnly: 1") &&
        strstr(c->fix, "NVreg_RestrictProfilingToAdminUsers=0"));
  c = get(&r, "perf_event");
  CHECK(c && c->state == CUCAP_CHECK_WARN && strstr(c->fix, "perf_event_paranoid"));
  c = get(&r, "backend");
  CHECK(c && (strcmp(cucap_profiler_backend_name(), "none") ? c->state == CUCAP_CHECK_OK
                                                            : c->state == CUCAP_CHECK_FAIL));
  CHECK(r.can_replay && !r.can_profile && r.exit_code == 1);
  /* as root the restriction does not apply */
  o.assume_non_root = 0;
  write_file(path, "1\n");
  snprintf(path, sizeof path, "%s/driver/nvidia/params", root);
  write_file(path, "RmProfilingAdminOnly: 0\n");
  CHECK(cucap_doctor_run(&o, &r) == CUCAP_OK);
  c = get(&r, "counters");
  CHECK(c && c->state != CUCAP_CHECK_FAIL && strstr(c->value, "RmProfilingAdminOnly: 0"));
  CHECK(get(&r, "perf_event")->state == CUCAP_CHECK_OK);
  cucap_json *w = cucap_json_create_mem(0);
  TU_REQUIRE(w);
  cucap_doctor_write_json(&r, w);
  size_t len = 0;
  const char *js = cucap_json_mem_data(w, &len);
  CHECK(js && strstr(js, "\"name\":\"counters\"") && strstr(js, "\"exit_code\":1"));
  cucap_json_destroy(w);
  FILE *dn = fopen("/dev/null", "w");
  if (dn) {
    cucap_doctor_print(&r, dn);
    fclose(dn);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0);
  free(root);
  return tu_finish("test_doctor", 0);
}
