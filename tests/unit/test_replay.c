/* test_replay.c - unit tests of replay/ (cucap_replay.h).
 *
 * Builds small captures with the writer and the generated builders (a PTX
 * vec_add module, three device buffers at chosen addresses, HtoD, launch,
 * DtoH, exit snapshot) and replays them on the mock libcuda
 * ($CUCAP_BUILD_DIR/tests/mock/libcuda.so.1, which runs vec_add on the host
 * and honours fixed VMM addresses). Skips (77) when the mock is not built. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_hash.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_reader.h"
#include "cucap_replay.h"
#include "cucap_cli.h"
#include "cucap_verify.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
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

static int checks;

static char mock[4096];

/* log sink of the CAP_PINNED case: keeps the pinned-host summary line and
 * counts the warnings about pinned host memory */
static char pin_line[512];
static int pin_warns;
static void pin_sink(cucap_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == CUCAP_LOG_WARN && strstr(msg, "pinned host memory"))
    pin_warns++;
  if (strstr(msg, "pinned host range(s)"))
    snprintf(pin_line, sizeof pin_line, "%s", msg);
}

static void opts(cucap_replay_options *o) {
  cucap_replay_options_init(o);
  cucap_verify_options_init(&vo);
  o->libcuda = mock;
  vo.mode = CUCAP_VERIFY_COPIES;
}

/* Helper modes for the integration tests (tests/integration/):
 *   test_replay --flip-dtoh IN OUT OFFSET
 * copies capture IN to OUT, flipping one byte (at OFFSET, clamped) of the
 * payload blob of the first DtoH copy that has one. The blob keeps its hash
 * (the reader does not re-hash blobs), so only --verify can notice. Prints
 * "flipped <offset> seq <seq>". CUCAP_TEST_FLIP_NTH=N: the (N+1)th such copy.
 *   test_replay --flip-copy-results IN OUT OFFSET
 * the same for the blob of every CopyResult snapshot region (the results of
 * asynchronous copies to the host, captured ones included). Prints
 * "flipped <n> copy result(s)".
 *   test_replay --flip-syncpoints IN OUT OFFSET
 * the same for every SyncPoint snapshot region (managed memory the program
 * read after a synchronisation).
 *   test_replay --drop-calls IN OUT CBID[,CBID...]
 * copies IN to OUT without the records of those driver calls (CUPTI cbids),
 * as an older recorder or a replayer that ignores them would have it.
 * Prints "dropped <n>". */
static int in_list(const char *list, uint32_t cbid) {
  for (const char *p = list; p && *p;) {
    char *end;
    unsigned long v = strtoul(p, &end, 0);
    if (end == p)
      return 0;
    if (v == cbid)
      return 1;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}

#define MAX_FLIPS 64
static int copy_results; /* --flip-copy-results (2: --flip-syncpoints) */

static int rewrite(const char *in, const char *out, uint64_t off, const char *drop) {
  cucap_reader *r = NULL;
  char msg[256];
  if (cucap_reader_open(in, NULL, &r, msg, sizeof msg) != CUCAP_OK) {
    fprintf(stderr, "rewrite: %s\n", msg);
    return 2;
  }
  const void *rec, *buf;
  size_t sz;
  cucap_hash128 target = {0, 0};
  cucap_hash128 results[MAX_FLIPS];
  size_t nresults = 0;
  uint64_t seq = 0;
  int found = 0;
  while (copy_results && cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK) {
    const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
    if (!sn || cucap_fb_snapshot_reason(sn) != (copy_results == 2
                                                    ? CUCAP_FB_SNAPSHOTREASON_SYNCPOINT
                                                    : CUCAP_FB_SNAPSHOTREASON_COPYRESULT))
      continue;
    for (size_t i = 0; i < cucap_fb_snapshot_regions_len(sn) && nresults < MAX_FLIPS; i++) {
      const cucap_fb_hash128 *h = cucap_fb_mem_region_data(cucap_fb_snapshot_regions_at(sn, i));
      if (h)
        results[nresults++] = (cucap_hash128){h->lo, h->hi};
    }
    found = nresults > 0;
  }
  const char *nth_env = getenv("CUCAP_TEST_FLIP_NTH"); /* skip the first N such copies */
  long nth = nth_env ? atol(nth_env) : 0;
  while (!drop && !found && cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK) {
    const cucap_fb_memcpy *c = cucap_fb_record_body_as_memcpy(rec);
    if (c && cucap_fb_memcpy_kind(c) == CUCAP_FB_MEMCPYKIND_DTOH &&
        cucap_fb_memcpy_has_payload(c) && cucap_fb_memcpy_payload(c) &&
        cucap_fb_memcpy_size(c) > 0 && nth-- <= 0) {
      target.lo = cucap_fb_memcpy_payload(c)->lo;
      target.hi = cucap_fb_memcpy_payload(c)->hi;
      seq = cucap_fb_record_seq(rec);
      found = 1;
    }
  }
  if (!drop && !found) {
    fprintf(stderr, "flip: no DtoH copy with a payload in %s\n", in);
    cucap_reader_destroy(r);
    return 2;
  }
  size_t hsz = 0;
  const void *hdr = cucap_reader_header_buffer(r, &hsz);
  cucap_writer *w = NULL;
  if (cucap_writer_create(out, NULL, hdr, hsz, &w) != CUCAP_OK) {
    cucap_reader_destroy(r);
    return 2;
  }
  int rc = 0;
  for (size_t i = 0; i < cucap_reader_blob_count(r) && !rc; i++) {
    cucap_hash128 h;
    uint64_t bs = 0;
    if (cucap_reader_blob_get(r, i, &h, &bs) != CUCAP_OK)
      continue;
    uint8_t *d = malloc(bs ? bs : 1);
    if (!d || cucap_reader_blob_read(r, h, d, bs) != CUCAP_OK) {
      free(d);
      rc = 2;
      break;
    }
    int hit = 0;
    for (size_t k = 0; copy_results && k < nresults && !hit; k++)
      hit = cucap_hash128_eq(h, results[k]);
    if (hit && bs) {
      d[off < bs ? off : bs - 1] ^= 0x01;
      found++;
    } else if (!drop && !copy_results && cucap_hash128_eq(h, target) && bs) {
      if (off >= bs)
        off = bs - 1;
      d[off] ^= 0x01;
      printf("flipped %llu seq %llu\n", (unsigned long long)off,
             (unsigned long long)seq);
    }
    if (cucap_writer_put_blob_hashed(w, d, bs, h) != CUCAP_OK)
      rc = 2;
    free(d);
  }
  cucap_reader_rewind(r);
  unsigned long dropped = 0;
  while (!rc && cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK) {
    if (drop && in_list(drop, cucap_fb_record_call(rec))) {
      dropped++;
      continue;
    }
    if (cucap_writer_append(w, buf, sz, NULL) != CUCAP_OK)
      rc = 2;
  }
  if (drop)
    printf("dropped %lu\n", dropped);
  if (copy_results)
    printf("flipped %d copy result(s)\n", found - 1);
  if (cucap_writer_close(w) != CUCAP_OK)
    rc = 2;
  cucap_writer_destroy(w);
  cucap_reader_destroy(r);
  return rc;
}

static char plain_line[512];
static void plain_sink(cucap_log_level level, const char *msg, void *user) {
  (void)level;
  (void)user;
  if (strstr(msg, "fatbin image(s) loaded as"))
    snprintf(plain_line, sizeof plain_line, "%s", msg);
}

/* Case 1c (needs nvcc to build the fatbin; skipped without it). */
static void test_plain_elf(void) {
  char nvcc[512];
  if (!tu_nvcc(nvcc, sizeof nvcc)) {
    printf("test_replay: no nvcc at %s: the plain-ELF case is skipped\n", nvcc);
    return;
  }
  char *dir = tu_tmp_dir_with("replay_plainelf", "v.ptx",
                              ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry vec_add(\n .param .u64 a,\n .param "
                              ".u64 b,\n .param .u64 c,\n .param .u32 n\n)\n{\n ret;\n}\n");
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s -fatbin -arch=sm_90 --compress-mode=speed -Xfatbin "
           "-compress-all -o v.fatbin v.ptx", dir, nvcc);
  TU_REQUIRE(system(cmd) == 0);
  snprintf(cmd, sizeof cmd, "%s/v.fatbin", dir);
  FILE *f = fopen(cmd, "rb");
  TU_REQUIRE(f);
  static uint8_t fb[1 << 16];
  size_t n = fread(fb, 1, sizeof fb, f);
  fclose(f);
  TU_REQUIRE(n > 0 && n < sizeof fb);
  char *cap = tu_tmp_path("replay_plainelf_cap");
  TC_IMAGE = fb;
  TC_IMAGE_SIZE = n;
  write_capture(cap, 0);
  TC_IMAGE = NULL;
  TC_IMAGE_SIZE = 0;
  cucap_replay_options o;
  cucap_replay_report rep;
  cucap_log_level lv = cucap_log_get_level();
  cucap_log_set_level(CUCAP_LOG_INFO);
  cucap_log_sink old = cucap_log_set_sink(plain_sink, NULL);
  opts(&o);
  o.loops = 2; /* the second pass loads the same ELF again */
  TU_CHECK(vrun(cap, &o, &rep) == CUCAP_OK);
  checks += 4;
  TU_CHECK(exit_code == 0 && rep.launches == 2);
  TU_CHECK(vr.mismatches == 0 && rep.skipped == 0);
  TU_CHECK(strstr(plain_line, "1 of 1 fatbin image(s) loaded as their sm_90 ELF") != NULL);
  if (rep.error[0] || !plain_line[0])
    fprintf(stderr, "error: %s; log: %s\n", rep.error, plain_line);
  /* images as recorded: asked for, or the driver told to JIT the PTX */
  const char *off[2] = {"CUCAP_REPLAY_PLAIN_ELF", "CUDA_FORCE_PTX_JIT"};
  for (int i = 0; i < 2; i++) {
    plain_line[0] = 0;
    setenv(off[i], i ? "1" : "0", 1);
    cucap_knobs_reload(); /* knobs are read once per process */
    opts(&o);
    TU_CHECK(vrun(cap, &o, &rep) != CUCAP_OK);
    unsetenv(off[i]);
    cucap_knobs_reload();
    checks += 2;
    TU_CHECK(exit_code != 0 && strstr(rep.error, "cuModuleLoadDataEx") != NULL);
    TU_CHECK(plain_line[0] == 0);
  }
  cucap_log_set_sink(old, NULL);
  cucap_log_set_level(lv);
  remove(cap);
  free(cap);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  free(dir);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write-capture")) { /* fuzz seeds */
    write_capture(argv[2], CAP_HOSTFUNC);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "--write-launches")) { /* profiling */
    NLAUNCH = atol(argv[3]);
    write_capture(argv[2], 0);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "--write-capture2")) {
    write_capture2(argv[2]);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "--flip-dtoh"))
    return rewrite(argv[2], argv[3], strtoull(argv[4], NULL, 0), NULL);
  if (argc == 5 && !strcmp(argv[1], "--flip-copy-results")) {
    copy_results = 1;
    return rewrite(argv[2], argv[3], strtoull(argv[4], NULL, 0), NULL);
  }
  if (argc == 5 && !strcmp(argv[1], "--flip-syncpoints")) { /* managed memory */
    copy_results = 2;
    return rewrite(argv[2], argv[3], strtoull(argv[4], NULL, 0), NULL);
  }
  if (argc == 5 && !strcmp(argv[1], "--drop-calls"))
    return rewrite(argv[2], argv[3], 0, argv[4]);
  const char *bd = getenv("CUCAP_BUILD_DIR");
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (!bd || stat(mock, &sb) != 0) {
    printf("test_replay: mock libcuda not built (%s); skipping\n", mock);
    return 77;
  }
  cucap_log_set_level(CUCAP_LOG_ERROR);
  char *good = tu_tmp_path("replay_good"), *bad = tu_tmp_path("replay_bad");
  char *hf = tu_tmp_path("replay_hostfunc"), *tr = tu_tmp_path("replay_trunc");
  write_capture(good, 0);
  write_capture(bad, CAP_CORRUPT_DTOH);
  write_capture(hf, CAP_HOSTFUNC);
  cucap_replay_options o;
  cucap_replay_report rep;

  /* 1: fixed-address replay, verified */
  opts(&o);
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_OK);
  cucap_replay_report_print(&rep, stderr, 0);
  cucap_verify_report_print(&vr, stderr, 0);
  checks += 7;
  TU_CHECK(exit_code == 0);
  TU_CHECK(rep.fixed_address == 1);
  TU_CHECK(rep.launches == 1);
  TU_CHECK(vr.copies_checked == 1 && vr.snapshot_regions_checked == 1);
  TU_CHECK(vr.bytes_checked == 2 * N * 4 && vr.bytes_matched == vr.bytes_checked);
  TU_CHECK(vr.mismatches == 0 && rep.skipped == 0);
  if (rep.error[0])
    fprintf(stderr, "error: %s\n", rep.error);

  /* 1a: an attribute set on a function before its record: applied at the
   * first launch (the mock refuses 96 KiB of shared memory without it) */
  {
    char *ap = tu_tmp_path("replay_attr");
    write_capture(ap, CAP_ATTR_LATE);
    opts(&o);
    TU_CHECK(vrun(ap, &o, &rep) == CUCAP_OK);
    checks += 3;
    TU_CHECK(exit_code == 0);
    TU_CHECK(rep.launches == 1 && rep.skipped == 0);
    TU_CHECK(vr.mismatches == 0 && vr.copies_checked == 1);
    if (rep.error[0])
      fprintf(stderr, "error: %s\n", rep.error);
    remove(ap);
    free(ap);
  }

  /* 1b: stream capture -> graph -> 3 graph launches, with the mock ignoring
   * hints that are not 32 MiB-aligned like the real driver (placement from
   * a base that is not 32 MiB-aligned: tests/integration/test_replay_mock.sh) */
  {
    char *gp = tu_tmp_path("replay_graph");
    write_capture(gp, CAP_GRAPH);
    setenv("CUCAP_MOCK_STRICT_VA", "1", 1);
    opts(&o);
    TU_CHECK(vrun(gp, &o, &rep) == CUCAP_OK);
    unsetenv("CUCAP_MOCK_STRICT_VA");
    checks += 5;
    TU_CHECK(exit_code == 0);
    TU_CHECK(rep.fixed_address == 1 && rep.fixed_ranges == 1);
    TU_CHECK(rep.launches == 3); /* graph launches; the captured one is not run */
    TU_CHECK(vr.copies_checked == 1 && vr.copies_unverifiable >= 1);
    TU_CHECK(vr.mismatches == 0 && rep.skipped == 0);
    if (rep.error[0])
      fprintf(stderr, "error: %s\n", rep.error);
    remove(gp);
    free(gp);
  }

  /* 1c: a compressed fatbin goes to the driver as the ELF it would pick
   * (replay_plainelf.c), decompressed by the replayer: the mock, which
   * cannot decompress fatbin entries, runs it; told to load images as
   * recorded (CUCAP_REPLAY_PLAIN_ELF=0) it refuses the same capture */
  test_plain_elf();

  /* 2: forced relocation: pointer parameters get patched */
  opts(&o);
  o.relocate = 1;
  o.loops = 2;
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_OK);
  checks += 5;
  TU_CHECK(rep.fixed_address == 0 && rep.relocated_allocs == 6);
  TU_CHECK(rep.patched_params == 6);
  TU_CHECK(rep.loops == 2 && rep.launches == 2);
  TU_CHECK(vr.mismatches == 0);
  if (rep.error[0])
    fprintf(stderr, "error: %s\n", rep.error);

  /* 3: a flipped payload byte is found, with its offset */
  opts(&o);
  TU_CHECK(vrun(bad, &o, &rep) == CUCAP_ERR_MISMATCH);
  checks += 3;
  TU_CHECK(exit_code == CUCAP_EXIT_MISMATCH);
  TU_CHECK(strstr(vr.first_mismatch, "offset 1234") != NULL);
  /* --verify=launch names the first divergent kernel */
  vo.mode = CUCAP_VERIFY_LAUNCH;
  checks += 3;
  TU_CHECK(vrun(bad, &o, &rep) == CUCAP_ERR_MISMATCH);
  TU_CHECK(vr.launch_hashes_checked == 1);
  TU_CHECK(strstr(vr.first_mismatch, "launch 0 (vec_add)") != NULL);
  vo.mode = CUCAP_VERIFY_LAUNCH;
  checks += 2;
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_OK);
  TU_CHECK(vr.launch_hashes_checked == 1 && vr.mismatches == 0);
  /* without --verify the same capture replays fine */
  vo.mode = CUCAP_VERIFY_NONE;
  checks++;
  TU_CHECK(vrun(bad, &o, &rep) == CUCAP_OK);

  /* 4: host functions are skipped and named, refused with --strict */
  opts(&o);
  checks += 4;
  TU_CHECK(vrun(hf, &o, &rep) == CUCAP_OK);
  TU_CHECK(rep.skipped == 1 && rep.skip_kinds == 1 &&
           strcmp(rep.skip_name[0], "cuLaunchHostFunc") == 0);
  o.strict = 1;
  TU_CHECK(vrun(hf, &o, &rep) != CUCAP_OK);
  TU_CHECK(exit_code == CUCAP_EXIT_BAD_INPUT && rep.launches == 0);

  /* 5: truncated capture: clear error, exit 3; --allow-partial runs */
  {
    FILE *in = fopen(good, "rb"), *out = fopen(tr, "wb");
    TU_REQUIRE(in && out);
    fseek(in, 0, SEEK_END);
    long sz = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)sz);
    TU_REQUIRE(buf && fread(buf, 1, (size_t)sz, in) == (size_t)sz);
    fwrite(buf, 1, (size_t)sz * 2 / 3, out);
    free(buf);
    fclose(in);
    fclose(out);
  }
  opts(&o);
  checks += 3;
  TU_CHECK(vrun(tr, &o, &rep) != CUCAP_OK);
  TU_CHECK(exit_code == CUCAP_EXIT_BAD_INPUT && rep.error[0]);
  fprintf(stderr, "truncated: %s\n", rep.error);
  o.allow_partial = 1;
  vrun(tr, &o, &rep); /* must not crash */
  TU_CHECK(rep.partial == 1 || exit_code == CUCAP_EXIT_BAD_INPUT);

  /* 5b: no code for this GPU (PTX for sm_100 only; the mock is sm_90) */
  {
    char *sm = tu_tmp_path("replay_sm100");
    write_capture(sm, CAP_SM100);
    opts(&o);
    checks += 2;
    TU_CHECK(vrun(sm, &o, &rep) == CUCAP_ERR_ENV);
    TU_CHECK(exit_code == CUCAP_EXIT_BAD_INPUT &&
             strstr(rep.error, "no code for this GPU (sm_90)") && rep.launches == 0);
    fprintf(stderr, "sm_100 image: %s\n", rep.error);
    unlink(sm);
    free(sm);
  }

  /* 5b: pinned host allocations re-created at their recorded addresses:
   * one placed, one whose address is taken here (warned once, replay goes
   * on and still verifies) */
  {
    char *pp = tu_tmp_path("replay_pinned");
    write_capture(pp, CAP_PINNED);
    pin_line[0] = 0;
    pin_warns = 0;
    cucap_log_set_level(CUCAP_LOG_INFO);
    cucap_log_sink old_sink = cucap_log_set_sink(pin_sink, NULL);
    opts(&o);
    cucap_status pst = vrun(pp, &o, &rep);
    cucap_log_set_sink(old_sink, NULL);
    cucap_log_set_level(CUCAP_LOG_ERROR);
    checks += 4;
    TU_CHECK(pst == CUCAP_OK && vr.mismatches == 0);
    TU_CHECK(strstr(pin_line, "1 pinned host range(s) at recorded addresses, "
                              "1 not placed") != NULL);
    TU_CHECK(pin_warns == 1);
    /* released at the end: the address is free again */
    void *m = mmap((void *)(uintptr_t)(PIN_FREE & ~0xfffULL), 4096,
                   PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                   -1, 0);
    TU_CHECK(m == (void *)(uintptr_t)(PIN_FREE & ~0xfffULL));
    if (m != MAP_FAILED)
      munmap(m, 4096);
    if (!strstr(pin_line, "1 not placed"))
      fprintf(stderr, "pinned: \"%s\", %d warning(s)\n", pin_line, pin_warns);
    unlink(pp);
    free(pp);
  }

  /* 6: missing file / no driver */
  opts(&o);
  checks += 2;
  TU_CHECK(vrun("/nonexistent/x.fb", &o, &rep) != CUCAP_OK && rep.error[0]);
  o.libcuda = "/nonexistent/libcuda.so.1";
  TU_CHECK(vrun(good, &o, &rep) == CUCAP_ERR_ENV &&
           exit_code == CUCAP_EXIT_BAD_INPUT);

  /* 7: library kernel via cuLaunchKernelEx, streams/events, memset, 2D
   * copies on the per-thread stream, Unified DtoH */
  {
    char *c2 = tu_tmp_path("replay_cap2");
    write_capture2(c2);
    opts(&o);
    checks += 4;
    TU_CHECK(vrun(c2, &o, &rep) == CUCAP_OK);
    TU_CHECK(rep.launches == 1 && rep.skipped == 0);
    TU_CHECK(vr.copies_checked == 2 && vr.mismatches == 0);
    TU_CHECK(vr.bytes_matched == W2 * H2 + N * 4);
    if (rep.error[0] || vr.mismatches || rep.skipped)
      cucap_replay_report_print(&rep, stderr, 0);
    opts(&o);
    o.relocate = 1;
    o.sync_each = 1;
    checks += 2;
    TU_CHECK(vrun(c2, &o, &rep) == CUCAP_OK);
    TU_CHECK(rep.patched_params == 1 && vr.mismatches == 0);
    unlink(c2);
    free(c2);
  }

  /* report printers */
  FILE *dn = fopen("/dev/null", "w");
  if (dn) {
    cucap_replay_report_print(&rep, dn, 0);
    cucap_verify_report_print(&vr, dn, 0);
    cucap_replay_report_print(&rep, dn, 1);
    cucap_verify_report_print(&vr, dn, 1);
    fclose(dn);
  }
  unlink(good);
  unlink(bad);
  unlink(hf);
  unlink(tr);
  free(good);
  free(bad);
  free(hf);
  free(tr);
  return tu_finish("test_replay", checks);
}
