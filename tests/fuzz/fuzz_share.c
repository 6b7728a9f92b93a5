/* fuzz_share.c - libFuzzer target for what trim, extract, export and diff
 * read: the input is opened as a capture (as given, and with its checks
 * recomputed so the fuzzer gets past them) and given to cucap_export (both
 * formats, to /dev/null), cucap_diff (the capture against itself), cucap_trim
 * (every range kind, recorded snapshots only: no replay here) and
 * cucap_extract (launch 0 and by kernel name), whose outputs land in a
 * private temporary directory; an extracted file is read back and turned
 * into a C program (cucap_emit_c). An input holding two captures separated
 * by PAIR_MARK is diffed A against B instead (the comparison of argument
 * words, host address ranges and allocations of two different runs). Seed
 * with a small capture (tests/run.sh uses cucap-testgen's, drv_train's and
 * drv_share's, and a pair of drv_share runs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_derive.h"
#include "cucap_diff.h"
#include "cucap_export.h"
#include "cucap_log.h"
#include "cucap_reader.h"
#include "fuzz_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[256];
static FILE *g_null;

#define PAIR_MARK "\n--cucap-diff-b--\n"

static void run_pair(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
  cucap_reader *ra = NULL, *rb = NULL;
  if (cucap_reader_open_memory(a, na, NULL, &ra, NULL, 0) == CUCAP_OK &&
      cucap_reader_open_memory(b, nb, NULL, &rb, NULL, 0) == CUCAP_OK) {
    cucap_diff_options dopt;
    memset(&dopt, 0, sizeof dopt);
    cucap_diff_report dr;
    cucap_diff(ra, rb, g_null, &dopt, &dr);
  }
  cucap_reader_destroy(ra);
  cucap_reader_destroy(rb);
}

static void run(const uint8_t *d, size_t n) {
  cucap_reader *r = NULL, *r2 = NULL;
  if (cucap_reader_open_memory(d, n, NULL, &r, NULL, 0) != CUCAP_OK)
    return;
  for (int fmt = 1; fmt <= 2; fmt++) {
    cucap_export_options eo;
    memset(&eo, 0, sizeof eo);
    eo.format = fmt;
    cucap_export_report er;
    cucap_export(r, g_null, &eo, &er);
  }
  if (cucap_reader_open_memory(d, n, NULL, &r2, NULL, 0) == CUCAP_OK) {
    cucap_diff_options dopt;
    memset(&dopt, 0, sizeof dopt);
    cucap_diff_report dr;
    cucap_diff(r, r2, g_null, &dopt, &dr);
    cucap_reader_destroy(r2);
  }
  char out[512];
  snprintf(out, sizeof out, "%s/out.fb", g_dir);
  static const char *ranges[] = {"launch:0-1", "nvtx:step@0", "profiler", "time:0ns-1s"};
  cucap_derive_report rep;
  for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
    cucap_range_spec rs;
    if (cucap_range_parse(ranges[i], &rs, NULL, 0) == CUCAP_OK)
      cucap_trim(r, &rs, out, NULL, &rep);
  }
  cucap_launch_select sel;
  memset(&sel, 0, sizeof sel);
  cucap_extract(r, &sel, out, NULL, &rep);
  sel.kernel = "vec_add";
  if (cucap_extract(r, &sel, out, NULL, &rep) == CUCAP_OK) {
    cucap_reader *x = NULL;
    char msg[256], dir[512];
    snprintf(dir, sizeof dir, "%s/c", g_dir);
    if (cucap_reader_open(out, NULL, &x, NULL, 0) == CUCAP_OK)
      cucap_emit_c(x, dir, msg, sizeof msg);
    cucap_reader_destroy(x);
  }
  cucap_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_null) {
    cucap_log_set_level(CUCAP_LOG_OFF);
    snprintf(g_dir, sizeof g_dir, "%s/cucap-fuzz-share.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir))
      abort();
    g_null = fopen("/dev/null", "w");
    if (!g_null)
      abort();
  }
  const uint8_t *mark = memmem(data, size, PAIR_MARK, sizeof PAIR_MARK - 1);
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  if (mark) {
    size_t na = (size_t)(mark - data), off = na + sizeof PAIR_MARK - 1;
    run_pair(data, na, data + off, size - off);
    fix_checks(copy, na);
    fix_checks(copy + off, size - off);
    run_pair(copy, na, copy + off, size - off);
  } else {
    run(data, size);
    fix_checks(copy, size);
    run(copy, size);
  }
  free(copy);
  return 0;
}
