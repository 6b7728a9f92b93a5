/* test_share.c - share/: the range spec and GPU timings parsers, the hash
 * map, trim/extract (planning, refusals, --replay through the state
 * observer on the mock libcuda, the emitted C program's files), export
 * (Perfetto bytes walked as protobuf, Chrome JSON) and diff, on the
 * replayer's test captures (replay_testcaps.c). The mock-dependent parts
 * are skipped (not failed) when the mock is not built. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_derive.h"
#include "cucap_diff.h"
#include "cucap_export.h"
#include "cucap_log.h"
#include "cucap_profile_table.h"
#include "cucap_range.h"
#include "cucap_replay.h"
#include "cucap_verify.h"
#include "cucap_writer.h"
#include "replay_testcaps.h"
#include "share_internal.h"
#include "testutil.h"

static int checks;
#define CHECK(c) do { checks++; TU_CHECK(c); } while (0)

static void test_range(void) {
  cucap_range_spec r;
  char msg[256], buf[256];
  CHECK(cucap_range_parse("launch:120-180", &r, msg, sizeof msg) == CUCAP_OK &&
        r.kind == CUCAP_RANGE_LAUNCH && r.first == 120 && r.last == 180);
  CHECK(cucap_range_parse("launch:7", &r, msg, sizeof msg) == CUCAP_OK && r.first == 7 && r.last == 7);
  CHECK(cucap_range_parse("nvtx:step@3", &r, msg, sizeof msg) == CUCAP_OK &&
        r.kind == CUCAP_RANGE_NVTX && !strcmp(r.name, "step") && r.nth == 3);
  CHECK(cucap_range_parse("nvtx:a@b@2", &r, msg, sizeof msg) == CUCAP_OK &&
        !strcmp(r.name, "a@b") && r.nth == 2);
  CHECK(cucap_range_parse("nvtx:step", &r, msg, sizeof msg) == CUCAP_OK && r.nth == 0);
  CHECK(cucap_range_parse("profiler", &r, msg, sizeof msg) == CUCAP_OK && r.kind == CUCAP_RANGE_PROFILER);
  CHECK(cucap_range_parse("profiler@4", &r, msg, sizeof msg) == CUCAP_OK && r.nth == 4);
  CHECK(cucap_range_parse("time:1.5s-2s", &r, msg, sizeof msg) == CUCAP_OK &&
        r.first == 1500000000ull && r.last == 2000000000ull);
  CHECK(cucap_range_parse("time:250us-0.5ms", &r, msg, sizeof msg) == CUCAP_OK &&
        r.first == 250000 && r.last == 500000);
  CHECK(cucap_range_parse("time:3-4", &r, msg, sizeof msg) == CUCAP_OK && r.first == 3000000); /* ms */
  CHECK(cucap_range_parse("time:.5ns-7ns", &r, msg, sizeof msg) == CUCAP_OK && r.first == 0);
  const char *bad[] = {"", "launch:", "launch:5-3", "launch:-3", "launch:1-", "launch:99999999999999999999",
                       "nvtx:", "nvtx:@3", "nvtx:x@", "profiler@", "profilerx", "profiler@-1",
                       "time:1-", "time:-2", "time:2s-1s", "time:1x-2", "time:.-1", "time:1..2-3",
                       "bogus", "time:18446744073709551615s-1s"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    msg[0] = 0;
    CHECK(cucap_range_parse(bad[i], &r, msg, sizeof msg) == CUCAP_ERR_INVALID_ARG && msg[0]);
  }
  char longname[300];
  memset(longname, 'a', sizeof longname);
  memcpy(longname, "nvtx:", 5);
  longname[sizeof longname - 1] = 0;
  CHECK(cucap_range_parse(longname, &r, msg, sizeof msg) == CUCAP_ERR_INVALID_ARG);
  /* canonical text parses back to the same range */
  const char *good[] = {"launch:3-9", "nvtx:step@2", "profiler@1", "time:5ns-9ns", "launch:4"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    cucap_range_spec a, b;
    CHECK(cucap_range_parse(good[i], &a, NULL, 0) == CUCAP_OK);
    cucap_range_format(&a, buf, sizeof buf);
    CHECK(cucap_range_parse(buf, &b, NULL, 0) == CUCAP_OK && !memcmp(&a, &b, sizeof a));
  }
}

static cucap_profile_table *parse(const char *s, cucap_status want) {
  cucap_profile_table *t = NULL;
  char msg[256] = "";
  cucap_status st = cucap_profile_table_parse(s, strlen(s), &t, msg, sizeof msg);
  CHECK(st == want);
  if (st != CUCAP_OK)
    CHECK(t == NULL && !strncmp(msg, "line ", 5));
  return t;
}

static void test_profile_table(void) {
  cucap_profile_table *t = parse("# GPU timings\n\nlaunch_index,start_ns,end_ns,kernel,occ,ipc\r\n"
                                 "3,100,250,vec_add,0.5,\n 7 , 300 , 300 , , 1e-3 ,2\n3,1,2,x,1,1\n",
                                 CUCAP_OK);
  if (t) {
    CHECK(cucap_profile_table_rows(t) == 3 && cucap_profile_table_metric_count(t) == 2);
    CHECK(!strcmp(cucap_profile_table_metric_name(t, 1), "ipc"));
    const cucap_profile_row *r = cucap_profile_table_find(t, 3);
    CHECK(r && r->start_ns == 100 && r->end_ns == 250 && !strcmp(r->kernel, "vec_add") &&
          r->metrics[0] == 0.5 && isnan(r->metrics[1])); /* the first row of a launch */
    r = cucap_profile_table_find(t, 7);
    CHECK(r && r->kernel == NULL && r->metrics[0] == 1e-3 && r->metrics[1] == 2);
    CHECK(cucap_profile_table_find(t, 4) == NULL);
    cucap_profile_table_destroy(t);
  }
  t = parse("end_ns,launch_index,start_ns\n5,1,4\n", CUCAP_OK); /* any column order */
  CHECK(t && cucap_profile_table_find(t, 1) && cucap_profile_table_find(t, 1)->start_ns == 4);
  cucap_profile_table_destroy(t);
  parse("", CUCAP_ERR_CORRUPT);                                     /* no header */
  parse("launch_index,start_ns\n1,2\n", CUCAP_ERR_CORRUPT);         /* no end_ns */
  parse("launch_index,start_ns,end_ns\n1,5,4\n", CUCAP_ERR_CORRUPT); /* end < start */
  parse("launch_index,start_ns,end_ns\n1,2\n", CUCAP_ERR_CORRUPT);   /* column count */
  parse("launch_index,start_ns,end_ns\n-1,2,3\n", CUCAP_ERR_CORRUPT);
  parse("launch_index,start_ns,end_ns,m\n1,2,3,abc\n", CUCAP_ERR_CORRUPT);
  parse("launch_index,start_ns,end_ns,m\n1,2,3,nan\n", CUCAP_ERR_CORRUPT);
  parse("launch_index,launch_index,start_ns,end_ns\n", CUCAP_ERR_CORRUPT);
  parse("launch_index,,start_ns,end_ns\n", CUCAP_ERR_CORRUPT);
  parse("launch_index,start_ns,end_ns\n1,2,99999999999999999999\n", CUCAP_ERR_CORRUPT);
  char many[2048] = "launch_index,start_ns,end_ns";
  for (int i = 0; i < 40; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), ",m%d", i);
  parse(many, CUCAP_ERR_CORRUPT);
  cucap_profile_table *z = NULL;
  char nul[] = "launch_index,start_ns,end_ns\n1,2\0,3\n";
  CHECK(cucap_profile_table_parse(nul, sizeof nul - 1, &z, NULL, 0) == CUCAP_ERR_CORRUPT && !z);
}

static void test_map(void) {
  cucap_map m = {0};
  int ok = 1;
  for (uint64_t k = 1; k <= 5000; k++)
    ok &= cucap_map_put(&m, k * 7919, k);
  CHECK(ok);
  for (uint64_t k = 1; k <= 5000; k += 2)
    ok &= cucap_map_del(&m, k * 7919, NULL);
  for (uint64_t k = 1; k <= 5000; k++) {
    uint64_t v = 0;
    int have = cucap_map_get(&m, k * 7919, &v);
    ok &= (k % 2) ? !have : (have && v == k);
  }
  CHECK(ok && cucap_map_size(&m) == 2500);
  cucap_map_free(&m);
}

/* Walks a protobuf message: every field's number and wire type must be
 * known; returns the number of Trace.packet fields, or -1. */
static long walk_pb(const uint8_t *p, size_t n) {
  size_t i = 0;
  long packets = 0;
  while (i < n) {
    uint64_t key = 0, len = 0;
    int sh = 0;
    while (i < n && (p[i] & 0x80))
      key |= (uint64_t)(p[i++] & 0x7f) << sh, sh += 7;
    if (i >= n)
      return -1;
    key |= (uint64_t)p[i++] << sh;
    if (key != (1 << 3 | 2))
      return -1; /* Trace has only `repeated TracePacket packet = 1` */
    sh = 0;
    while (i < n && (p[i] & 0x80))
      len |= (uint64_t)(p[i++] & 0x7f) << sh, sh += 7;
    if (i >= n)
      return -1;
    len |= (uint64_t)p[i++] << sh;
    if (len > n - i)
      return -1;
    i += len;
    packets++;
  }
  return packets;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  if (b)
    b[sz] = 0;
  fclose(f);
  *n = (size_t)sz;
  return b;
}

static cucap_reader *open_cap(const char *path) {
  cucap_reader *r = NULL;
  TU_REQUIRE(cucap_reader_open(path, NULL, &r, NULL, 0) == CUCAP_OK);
  return r;
}

static void test_export_diff(const char *cap, const char *bad) {
  cucap_reader *r = open_cap(cap);
  char *out = tu_tmp_path("share_export");
  for (int fmt = 1; fmt <= 2; fmt++) {
    FILE *f = fopen(out, "wb");
    TU_REQUIRE(f);
    cucap_export_options o;
    memset(&o, 0, sizeof o);
    o.format = fmt;
    cucap_export_report rep;
    CHECK(cucap_export(r, f, &o, &rep) == CUCAP_OK);
    fclose(f);
    CHECK(rep.launches == 3 && rep.gpu_ops == 6 && !strcmp(rep.gpu_times, "host")); /* 2 HtoD, 3 launches, 1 DtoH */
    size_t n = 0;
    char *b = slurp(out, &n);
    CHECK(b != NULL);
    if (b && fmt == CUCAP_EXPORT_PERFETTO)
      CHECK(walk_pb((const uint8_t *)b, n) > 10);
    if (b && fmt == CUCAP_EXPORT_CHROME_JSON)
      CHECK(strstr(b, "\"traceEvents\"") && strstr(b, "\"name\":\"vec_add\"") &&
            strstr(b, "\"ph\":\"f\""));
    free(b);
  }
  unlink(out);
  free(out);
  cucap_reader *r2 = open_cap(cap), *rb = open_cap(bad);
  FILE *dn = fopen("/dev/null", "w");
  TU_REQUIRE(dn);
  cucap_diff_options o;
  memset(&o, 0, sizeof o);
  cucap_diff_report rep;
  CHECK(cucap_diff(r, r2, dn, &o, &rep) == CUCAP_OK && rep.same && rep.launches_matched == 3 &&
        rep.copies_compared == 1);
  CHECK(cucap_diff(r, rb, dn, &o, &rep) == CUCAP_OK && !rep.same && rep.copies_differ == 1 &&
        rep.launches_differ == 0 && !rep.api_diverged);
  fclose(dn);
  cucap_reader_destroy(r);
  cucap_reader_destroy(r2);
  cucap_reader_destroy(rb);
}

/* A capture whose only DtoH copy has its bytes in a later
 * Snapshot{CopyResult} (the recorder reads asynchronous copies once they
 * completed); fill is the byte they hold. */
static void write_copyresult_capture(const char *path, uint8_t fill) {
  cucap_fbb *b = cucap_fbb_create(0);
  TU_REQUIRE(b);
  cucap_fb_file_header_start(b);
  cucap_fb_file_header_add_format_major(b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(b, CUCAP_FORMAT_MINOR);
  cucap_fb_ref hdr = cucap_fb_file_header_end(b);
  size_t sz = 0;
  const uint8_t *hb = cucap_fbb_finish(b, hdr, 1, &sz);
  cucap_writer *w = NULL;
  TU_REQUIRE(hb && cucap_writer_create(path, NULL, hb, sz, &w) == CUCAP_OK);
  uint8_t bytes[256];
  memset(bytes, fill, sizeof bytes);
  cucap_hash128 h;
  TU_REQUIRE(cucap_writer_put_blob(w, bytes, sizeof bytes, &h) == CUCAP_OK);
  for (int i = 0; i < 2; i++) {
    cucap_fbb_reset(b);
    cucap_fb_ref body;
    uint8_t type;
    if (i == 0) {
      cucap_fb_memcpy_start(b);
      cucap_fb_memcpy_add_kind(b, CUCAP_FB_MEMCPYKIND_DTOH);
      cucap_fb_memcpy_add_dst(b, 0x5000);
      cucap_fb_memcpy_add_src(b, 0x7e0000000000ull);
      cucap_fb_memcpy_add_size(b, sizeof bytes);
      cucap_fb_memcpy_add_async(b, 1);
      body = cucap_fb_memcpy_end(b);
      type = CUCAP_FB_BODY_MEMCPY;
    } else {
      cucap_fb_hash128 fh = {h.lo, h.hi};
      cucap_fb_mem_region_start(b);
      cucap_fb_mem_region_add_address(b, 0x5000);
      cucap_fb_mem_region_add_size(b, sizeof bytes);
      cucap_fb_mem_region_add_data(b, &fh);
      cucap_fb_ref reg = cucap_fb_mem_region_end(b);
      cucap_fb_ref regs = cucap_fbb_vector_refs(b, &reg, 1);
      cucap_fb_snapshot_start(b);
      cucap_fb_snapshot_add_reason(b, CUCAP_FB_SNAPSHOTREASON_COPYRESULT);
      cucap_fb_snapshot_add_regions(b, regs);
      cucap_fb_snapshot_add_copy_seq(b, 7);
      body = cucap_fb_snapshot_end(b);
      type = CUCAP_FB_BODY_SNAPSHOT;
    }
    cucap_fb_record_start(b);
    cucap_fb_record_add_seq(b, i == 0 ? 7 : 0);
    cucap_fb_record_add_tid(b, 42);
    cucap_fb_record_add_call(b, i == 0 ? 283 : 0); /* any driver call id */
    cucap_fb_record_add_body(b, type, body);
    cucap_fb_ref r = cucap_fb_record_end(b);
    const uint8_t *rb = cucap_fbb_finish(b, r, 1, &sz);
    TU_REQUIRE(rb && cucap_writer_append(w, rb, sz, NULL) == CUCAP_OK);
  }
  TU_REQUIRE(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);
  cucap_fbb_destroy(b);
}

static void test_diff_copy_results(void) {
  char *a = tu_tmp_path("share_cr_a"), *b = tu_tmp_path("share_cr_b"), *c = tu_tmp_path("share_cr_c");
  write_copyresult_capture(a, 1);
  write_copyresult_capture(b, 1);
  write_copyresult_capture(c, 2);
  cucap_reader *ra = open_cap(a), *rb = open_cap(b), *rc = open_cap(c);
  FILE *dn = fopen("/dev/null", "w");
  TU_REQUIRE(dn);
  cucap_diff_options o;
  memset(&o, 0, sizeof o);
  cucap_diff_report rep;
  CHECK(cucap_diff(ra, rb, dn, &o, &rep) == CUCAP_OK && rep.same && rep.copies_compared == 1);
  CHECK(cucap_diff(ra, rc, dn, &o, &rep) == CUCAP_OK && !rep.same && rep.copies_differ == 1 &&
        rep.regions_compared == 0);
  fclose(dn);
  cucap_reader_destroy(ra);
  cucap_reader_destroy(rb);
  cucap_reader_destroy(rc);
  unlink(a);
  unlink(b);
  unlink(c);
  free(a);
  free(b);
  free(c);
}

static void test_refusals(const char *cap) {
  cucap_reader *r = open_cap(cap);
  char *out = tu_tmp_path("share_refused");
  cucap_range_spec range;
  TU_REQUIRE(cucap_range_parse("launch:1-2", &range, NULL, 0) == CUCAP_OK);
  cucap_derive_report rep;
  /* no snapshot at the range start and no replay: exit 2, nothing written */
  CHECK(cucap_trim(r, &range, out, NULL, &rep) == CUCAP_ERR_NOT_FOUND && cucap_cli_exit_code(rep.status) == CUCAP_EXIT_USAGE &&
        strstr(rep.error, "--snapshot=launch:N"));
  CHECK(access(out, F_OK) != 0);
  TU_REQUIRE(cucap_range_parse("launch:50-60", &range, NULL, 0) == CUCAP_OK);
  CHECK(cucap_trim(r, &range, out, NULL, &rep) == CUCAP_ERR_NOT_FOUND && cucap_cli_exit_code(rep.status) == CUCAP_EXIT_USAGE &&
        strstr(rep.error, "not in the capture"));
  cucap_launch_select sel;
  memset(&sel, 0, sizeof sel);
  sel.launch_index = 1;
  CHECK(cucap_extract(r, &sel, out, NULL, &rep) == CUCAP_ERR_NOT_FOUND && cucap_cli_exit_code(rep.status) == CUCAP_EXIT_USAGE &&
        strstr(rep.error, "--snapshot=launch:1"));
  sel.kernel = "no_such_kernel";
  CHECK(cucap_extract(r, &sel, out, NULL, &rep) == CUCAP_ERR_NOT_FOUND &&
        strstr(rep.error, "no such launch"));
  CHECK(access(out, F_OK) != 0);
  cucap_reader_destroy(r);
  free(out);
}

static int replay_verify(const char *path, const char *mock, cucap_replay_report *rep,
                         cucap_verify_report *vr) {
  cucap_replay_options o;
  cucap_replay_options_init(&o);
  o.libcuda = mock;
  cucap_verify_options vo;
  cucap_verify_options_init(&vo);
  vo.mode = CUCAP_VERIFY_COPIES;
  return cucap_verify_replay_run(path, &o, &vo, rep, vr) == CUCAP_OK && vr->mismatches == 0 &&
         !rep->error[0];
}

static void test_on_mock(const char *cap, const char *graph_cap, const char *mock) {
  cucap_derive_options o;
  cucap_derive_options_init(&o);
  o.replay = 1;
  o.libcuda = mock;
  o.source_path = cap;
  cucap_derive_report rep;
  cucap_replay_report rr;
  cucap_verify_report vrr;
  cucap_range_spec range;
  char *out = tu_tmp_path("share_trim"), *ex = tu_tmp_path("share_extract");
  char *dir = tu_tmp_path("share_emit");
  cucap_reader *r = open_cap(cap);
  TU_REQUIRE(cucap_range_parse("launch:1-2", &range, NULL, 0) == CUCAP_OK);
  CHECK(cucap_trim(r, &range, out, &o, &rep) == CUCAP_OK);
  if (rep.error[0])
    fprintf(stderr, "trim: %s\n", rep.error);
  CHECK(rep.state == CUCAP_FB_STATESOURCE_REPLAY && rep.regions == 3 && rep.launches == 2 &&
        rep.launch_first == 1 && rep.launch_last == 2 && rep.modules_kept == 1);
  CHECK(replay_verify(out, mock, &rr, &vrr) && rr.launches == 2 && vrr.copies_checked == 1);
  /* the header says where it came from */
  cucap_reader *t = open_cap(out);
  const cucap_fb_origin *org = cucap_fb_file_header_origin(cucap_reader_header(t));
  CHECK(org && !strcmp(cucap_fb_origin_command(org), "trim") &&
        cucap_fb_origin_state(org) == CUCAP_FB_STATESOURCE_REPLAY &&
        cucap_fb_origin_state_records(org) == rep.state_records);
  cucap_reader_destroy(t);

  cucap_launch_select sel;
  memset(&sel, 0, sizeof sel);
  sel.kernel = "vec_add";
  sel.nth = 2;
  CHECK(cucap_extract(r, &sel, ex, &o, &rep) == CUCAP_OK && rep.launch_index == 2 &&
        rep.have_expected && rep.expected_regions == 3 && rep.expected_checksum != SH_FNV_INIT);
  CHECK(replay_verify(ex, mock, &rr, &vrr) && rr.launches == 1 && vrr.snapshot_regions_checked == 3);
  t = open_cap(ex);
  char msg[256];
  CHECK(cucap_emit_c(t, dir, msg, sizeof msg) == CUCAP_OK);
  cucap_reader_destroy(t);
  const char *files[] = {"repro.c", "Makefile", "module.bin", "args.bin"};
  for (size_t i = 0; i < 4; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && sb.st_size > 0);
    unlink(p);
  }
  for (int i = 0; i < 8; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/mem%d.bin", dir, i);
    unlink(p);
  }
  rmdir(dir);
  /* --minimal with replay: every buffer of vec_add is a parameter */
  o.minimal = 1;
  sel.kernel = NULL;
  sel.launch_index = 0;
  CHECK(cucap_extract(r, &sel, ex, &o, &rep) == CUCAP_OK && rep.regions == 3);
  cucap_reader_destroy(r);

  /* a range that starts inside a stream capture is refused */
  r = open_cap(graph_cap);
  o.source_path = graph_cap;
  TU_REQUIRE(cucap_range_parse("launch:0", &range, NULL, 0) == CUCAP_OK);
  CHECK(cucap_trim(r, &range, out, &o, &rep) == CUCAP_ERR_UNSUPPORTED && cucap_cli_exit_code(rep.status) == CUCAP_EXIT_USAGE &&
        strstr(rep.error, "stream is being captured"));
  cucap_reader_destroy(r);
  unlink(out);
  unlink(ex);
  free(out);
  free(ex);
  free(dir);
}

int main(void) {
  cucap_log_set_level(CUCAP_LOG_ERROR);
  test_range();
  test_profile_table();
  test_map();
  char *cap = tu_tmp_path("share_cap"), *bad = tu_tmp_path("share_bad");
  char *gcap = tu_tmp_path("share_graph");
  NLAUNCH = 3;
  write_capture(cap, 0);
  write_capture(bad, CAP_CORRUPT_DTOH);
  NLAUNCH = 1;
  write_capture(gcap, CAP_GRAPH);
  test_export_diff(cap, bad);
  test_diff_copy_results();
  test_refusals(cap);
  const char *bd = getenv("CUCAP_BUILD_DIR");
  char mock[4096];
  struct stat sb;
  snprintf(mock, sizeof mock, "%s/tests/mock/libcuda.so.1", bd ? bd : ".");
  if (bd && stat(mock, &sb) == 0)
    test_on_mock(cap, gcap, mock);
  else
    printf("test_share: mock libcuda not built (%s): replay parts skipped\n", mock);
  unlink(cap);
  unlink(bad);
  unlink(gcap);
  free(cap);
  free(bad);
  free(gcap);
  return tu_finish("test_share", checks);
}
