/* test_replay_verify.c - verify/verify_observer.c + verify_judge.c: --verify
 * as an observer, on the mock libcuda (its `stamp` kernel writes a
 * monotonic-clock value: different in every replay pass, like clock()).
 *  - nondeterministic bytes are told apart over passes, counted, located
 *    and their writer named; deterministic bytes still verify;
 *  - a flipped recorded byte of a deterministic copy still fails, after the
 *    extra passes, and says how many passes agreed;
 *  - one pass (verify_passes = 1): every difference is a mismatch;
 *  - snapshots other than Exit are checked at their point in the record
 *    stream (Manual before the stamp overwrites its buffer; AfterLaunch
 *    after the launch it names, which the file holds later);
 *  - --verify=launch: a LaunchHash region that changes between passes is
 *    nondeterministic, one that matches is checked;
 *  - kernel names shortened for summaries (vo_short_name).
 * Skips (77) without the mock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_log.h"
#include "cucap_replay.h"
#include "cucap_cli.h"
#include "cucap_verify.h"
#include "replay_testcaps.h"
#include "testutil.h"

/* --verify of the runs below, their verdicts and the exit code `cucap
 * replay` gives for each (tools/ maps the status) */
static cucap_verify_options vo;
static cucap_verify_report vr;
static int exit_code;
static cucap_status vrun(const char *path, const cucap_replay_options *o,
                         cucap_replay_report *rep) {
  cucap_status st = cucap_verify_replay_run(path, o, &vo, rep, &vr);
  exit_code = cucap_cli_exit_code(st);
  return st;
}

/* verify_judge.c (declared in verify_internal.h, which needs cuda.h) */
void vo_short_name(const char *name, char *out, size_t cap);

static int checks;

static void short_names(void) {
  static const struct { const char *in, *out; } t[] = {
      {"_Z14timedReductionPKfPfPl", "timedReduction"},
      {"_ZN7cutlass6KernelINS_4gemm6kernel4GemmIEEEEvNT_6ParamsE", "cutlass::Kernel"},
      {"_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", "at::native::vectorized_elementwise_kernel"},
      {"_ZNSt6vectorIiE4pushEi", "std::vector"},
      {"stamp", "stamp"},
      {"_Z", "_Z"},
      {"_Z999toolong", "_Z999toolong"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    char out[72];
    vo_short_name(t[i].in, out, sizeof out);
    checks++;
    TU_CHECK(strcmp(out, t[i].out) == 0);
    if (strcmp(out, t[i].out))
      fprintf(stderr, "short name of %s: %s\n", t[i].in, out);
  }
  char longn[300], out[72];
  memset(longn, 'k', sizeof longn - 1);
  longn[sizeof longn - 1] = 0;
  vo_short_name(longn, out, sizeof out);
  checks++;
  TU_CHECK(strlen(out) == 64 && strcmp(out + 61, "...") == 0);
}

int main(void) {
  short_names();
  const char *bd = getenv("CUCAP_BUILD_DIR");
  char mock[4096];
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (!bd || stat(mock, &sb) != 0) {
    printf("test_replay_verify: mock libcuda not built (%s); skipping\n", mock);
    return tu_finish("test_replay_verify", checks) ? 1 : 77;
  }
  cucap_log_set_level(CUCAP_LOG_ERROR);
  char *good = tu_tmp_path("verify_nondet"), *flip = tu_tmp_path("verify_flip");
  write_capture_nondet(good, 0);
  write_capture_nondet(flip, NONDET_FLIP);
  cucap_replay_options o;
  cucap_replay_report rep;

  /* 1: default: pass 1 differs (stamps), pass 2 tells them apart, pass 3 is
   * the diagnostic pass naming `stamp` */
  cucap_replay_options_init(&o);
  cucap_verify_options_init(&vo);
  o.libcuda = mock;
  vo.mode = CUCAP_VERIFY_COPIES;
  cucap_status st = vrun(good, &o, &rep);
  cucap_replay_report_print(&rep, stderr, 0);
  cucap_verify_report_print(&vr, stderr, 0);
  checks += 9;
  TU_CHECK(st == CUCAP_OK && exit_code == 0 && vr.mismatches == 0);
  TU_CHECK(rep.loops == 3 && vr.verify_passes == 3);
  TU_CHECK(vr.copies_checked == 2);
  TU_CHECK(vr.snapshot_regions_checked == 3); /* manual, after-launch, exit */
  TU_CHECK(vr.nondet_bytes == N * 4 && vr.nondet_copies == 1 && vr.nondet_regions == 0);
  TU_CHECK(vr.bytes_checked == 5 * N * 4 && vr.bytes_matched == 4 * N * 4);
  TU_CHECK(strcmp(vr.nondet_kernels, "stamp") == 0);
  TU_CHECK(strstr(vr.nondet_detail, "nondeterministic: DtoH copy (record ") &&
           strstr(vr.nondet_detail, "bytes in 1 range(s) from 0x7e1200200000, written by stamp"));
  TU_CHECK(rep.launches == 9); /* 3 launches x 3 passes */

  /* 2: a flipped recorded byte of the deterministic copy: a mismatch after
   * 2 + 4 passes that agreed, then the diagnostic pass */
  st = vrun(flip, &o, &rep);
  checks += 4;
  TU_CHECK(st == CUCAP_ERR_MISMATCH && exit_code == CUCAP_EXIT_MISMATCH);
  TU_CHECK(vr.mismatches == 1 && vr.nondet_bytes == N * 4);
  TU_CHECK(strstr(vr.first_mismatch, "first differing offset 1234") &&
           strstr(vr.first_mismatch, "1 of 4096 bytes differ; same in all 7 passes"));
  TU_CHECK(rep.loops == 2 + CUCAP_VERIFY_MAX_EXTRA + 1);
  if (!strstr(vr.first_mismatch, "offset 1234"))
    fprintf(stderr, "flip: %s\n", vr.first_mismatch);

  /* 3: one pass: the stamps are mismatches, nothing is nondeterministic */
  vo.passes = 1;
  st = vrun(good, &o, &rep);
  checks += 3;
  TU_CHECK(st == CUCAP_ERR_MISMATCH && rep.loops == 1 && vr.nondet_bytes == 0);
  TU_CHECK(strstr(vr.first_mismatch, "DtoH copy (record ") &&
           strstr(vr.first_mismatch, " of 4096 bytes differ"));
  TU_CHECK(vr.verify_passes == 1);

  /* 4: N = 4 passes asked, then the diagnostic one */
  vo.passes = 4;
  st = vrun(good, &o, &rep);
  checks += 2;
  TU_CHECK(st == CUCAP_OK && rep.loops == 5 && vr.nondet_bytes == N * 4);
  TU_CHECK(strcmp(vr.nondet_kernels, "stamp") == 0);

  /* 5: --verify=launch: launch 0's hash matches, launch 1's (stamp) differs
   * between passes: a nondeterministic region named after its launch */
  vo.passes = 0;
  vo.mode = CUCAP_VERIFY_LAUNCH;
  st = vrun(good, &o, &rep);
  checks += 3;
  TU_CHECK(st == CUCAP_OK && vr.mismatches == 0);
  TU_CHECK(vr.launch_hashes_checked == 2 && vr.nondet_regions == 1);
  TU_CHECK(strstr(vr.nondet_detail, "launch hash region 0 of launch 1") &&
           strstr(vr.nondet_detail, "written by stamp"));
  if (st != CUCAP_OK) {
    cucap_replay_report_print(&rep, stderr, 0);
    cucap_verify_report_print(&vr, stderr, 0);
  }
  cucap_verify_report_print(&vr, stderr, 0);

  /* 6: --loop 2 --verify on a nondeterministic capture: both loops compared
   * (and the diagnostic pass after them) */
  vo.mode = CUCAP_VERIFY_COPIES;
  o.loops = 2;
  st = vrun(good, &o, &rep);
  checks++;
  TU_CHECK(st == CUCAP_OK && rep.loops == 3 && vr.nondet_bytes == N * 4);

  /* 7: relocation: relocated allocations start zeroed in every pass */
  o.loops = 1;
  o.relocate = 1;
  st = vrun(good, &o, &rep);
  checks++;
  TU_CHECK(st == CUCAP_OK && rep.relocated_allocs > 0 && vr.nondet_bytes == N * 4);

  /* the JSON report carries the nondeterminism */
  FILE *f = tmpfile();
  if (f) {
    cucap_replay_report_print(&rep, f, 1);
    cucap_verify_report_print(&vr, f, 1);
    rewind(f);
    char buf[8192] = "";
    size_t nr = fread(buf, 1, sizeof buf - 1, f);
    buf[nr] = 0;
    fclose(f);
    checks++;
    TU_CHECK(strstr(buf, "\"nondeterministic_bytes\":4096") &&
             strstr(buf, "\"nondeterministic_kernels\":\"stamp\""));
  }
  unlink(good);
  unlink(flip);
  free(good);
  free(flip);
  return tu_finish("test_replay_verify", checks);
}
