/* test_reader.c - capture stream reader: preamble/version checks, header,
 * chunk and blob tables, memory open, strict mode, rewind. */
#include <unistd.h>

#include "stream_testutil.h"

static int checks;
#define CHECK(c)                                                               \
  do {                                                                         \
    checks++;                                                                  \
    TU_CHECK(c);                                                               \
  } while (0)

static cucap_hash128 g_blob_hash;
static uint8_t g_blob[5000];

static void make_capture(const char *path, uint32_t n) {
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 16 << 10;
  cucap_writer *w = NULL;
  TU_REQUIRE(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  cucap_fbb *b = cucap_fbb_create(0);
  st_fill(g_blob, sizeof g_blob, 11);
  for (uint32_t i = 0; i < n; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, 5, &sz);
    TU_REQUIRE(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
    if (i == n / 2)
      TU_REQUIRE(cucap_writer_put_blob(w, g_blob, sizeof g_blob,
                                       &g_blob_hash) == CUCAP_OK);
  }
  TU_REQUIRE(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);
  cucap_fbb_destroy(b);
  free(hdr);
}

static void check_good(cucap_reader *r, uint32_t n) {
  unsigned ma = 0, mi = 0;
  cucap_reader_version(r, &ma, &mi);
  CHECK(ma == CUCAP_FORMAT_MAJOR);
  const cucap_fb_file_header *h = cucap_reader_header(r);
  CHECK(h && cucap_fb_file_header_pid(h) == 1234);
  const char *prod = h ? cucap_fb_file_header_producer(h) : NULL;
  CHECK(prod && strcmp(prod, "cucap-test") == 0);
  size_t hs = 0;
  CHECK(cucap_reader_header_buffer(r, &hs) && hs > 8);
  cucap_status s;
  CHECK(st_count_records(r, &s) == n && s == CUCAP_END);
  CHECK(cucap_reader_next(r, NULL, NULL, NULL) == CUCAP_END);
  CHECK(st_count_records(r, &s) == n && s == CUCAP_END); /* rewind works */
  size_t nc = cucap_reader_chunk_count(r);
  CHECK(nc >= 3);
  uint64_t recs = 0;
  int blob_chunks = 0;
  for (size_t i = 0; i < nc; i++) {
    cucap_reader_chunk c;
    CHECK(cucap_reader_chunk_get(r, i, &c) == CUCAP_OK);
    if (c.kind == CUCAP_FB_CHUNKKIND_RECORDS)
      recs += c.records;
    else
      blob_chunks++;
    CHECK(c.offset % 8 == 0 && c.compressed_size > 0);
  }
  cucap_reader_chunk c;
  CHECK(cucap_reader_chunk_get(r, nc, &c) == CUCAP_ERR_NOT_FOUND);
  CHECK(recs == n);
  CHECK(blob_chunks == 1);
  CHECK(cucap_reader_blob_count(r) == 1);
  cucap_hash128 bh;
  uint64_t bs;
  CHECK(cucap_reader_blob_get(r, 0, &bh, &bs) == CUCAP_OK &&
        cucap_hash128_eq(bh, g_blob_hash) && bs == sizeof g_blob);
  CHECK(cucap_reader_blob_get(r, 1, &bh, &bs) == CUCAP_ERR_NOT_FOUND);
  uint8_t back[sizeof g_blob];
  CHECK(cucap_reader_blob_read(r, g_blob_hash, back, sizeof back) == CUCAP_OK &&
        memcmp(back, g_blob, sizeof back) == 0);
}

int main(void) {
  char *path = tu_tmp_path("reader.cucap");
  char *bad = tu_tmp_path("reader-bad.cucap");
  const uint32_t N = 3000;
  make_capture(path, N);
  char msg[512];
  cucap_reader *r = NULL;

  /* good file, both modes, file and memory */
  for (int strict = 0; strict < 2; strict++) {
    cucap_reader_options o = {strict};
    CHECK(cucap_reader_open(path, &o, &r, msg, sizeof msg) == CUCAP_OK);
    TU_REQUIRE(r);
    cucap_reader_recovery rc;
    cucap_reader_recovery_get(r, &rc);
    CHECK(rc.complete && rc.used_index && rc.records == N && !rc.problem[0]);
    CHECK(rc.good_bytes == rc.file_size);
    check_good(r, N);
    cucap_reader_destroy(r);
  }
  size_t fsz;
  uint8_t *file = st_read_file(path, &fsz);
  CHECK(cucap_reader_open_memory(file, fsz, NULL, &r, msg, sizeof msg) ==
        CUCAP_OK);
  TU_REQUIRE(r);
  check_good(r, N);
  cucap_reader_destroy(r);
  cucap_reader_destroy(NULL);

  /* missing file, directory */
  r = (cucap_reader *)1;
  CHECK(cucap_reader_open("/nonexistent/x.cucap", NULL, &r, msg, sizeof msg) ==
            CUCAP_ERR_IO &&
        r == NULL && strstr(msg, "cannot open"));
  CHECK(cucap_reader_open("/tmp", NULL, &r, msg, sizeof msg) == CUCAP_ERR_IO);

  /* bad magic: text, empty, short */
  st_write_file(bad, "hello, this is not a capture at all\n", 36);
  CHECK(cucap_reader_open(bad, NULL, &r, msg, sizeof msg) ==
            CUCAP_ERR_BAD_MAGIC &&
        strstr(msg, "not a cucap capture"));
  st_write_file(bad, "", 0);
  CHECK(cucap_reader_open(bad, NULL, &r, msg, sizeof msg) ==
        CUCAP_ERR_BAD_MAGIC);
  CHECK(cucap_reader_open_memory(file, 5, NULL, &r, msg, sizeof msg) ==
        CUCAP_ERR_BAD_MAGIC);
  CHECK(cucap_reader_open_memory(file, 20, NULL, &r, msg, sizeof msg) ==
        CUCAP_ERR_TRUNCATED);

  /* unknown major refused with both versions named; a newer minor is fine */
  uint8_t *copy = malloc(fsz);
  TU_REQUIRE(copy);
  memcpy(copy, file, fsz);
  uint16_t major = 99, minor = 7;
  memcpy(copy + 8, &major, 2);
  st_write_file(bad, copy, fsz);
  CHECK(cucap_reader_open(bad, NULL, &r, msg, sizeof msg) == CUCAP_ERR_VERSION &&
        r == NULL);
  CHECK(strstr(msg, "99.") != NULL /* 99.<CUCAP_FORMAT_MINOR> */ && strstr(msg, "1.") != NULL);
  printf("version message: %s\n", msg);
  major = CUCAP_FORMAT_MAJOR;
  memcpy(copy + 8, &major, 2);
  memcpy(copy + 10, &minor, 2);
  CHECK(cucap_reader_open_memory(copy, fsz, NULL, &r, msg, sizeof msg) ==
        CUCAP_OK);
  if (r) {
    unsigned ma, mi;
    cucap_reader_version(r, &ma, &mi);
    CHECK(ma == 1 && mi == 7);
    cucap_reader_destroy(r);
  }

  /* no trailer: strict refuses, default recovers everything */
  cucap_reader_options so = {1};
  CHECK(cucap_reader_open_memory(file, fsz - 1, &so, &r, msg, sizeof msg) !=
        CUCAP_OK);
  printf("strict message: %s\n", msg);
  CHECK(cucap_reader_open_memory(file, fsz - 1, NULL, &r, msg, sizeof msg) ==
        CUCAP_OK);
  if (r) {
    cucap_reader_recovery rc;
    cucap_reader_recovery_get(r, &rc);
    CHECK(!rc.complete && !rc.used_index && rc.records == N);
    CHECK(strstr(rc.problem, "recovered") != NULL);
    printf("recovery: %s\n", rc.problem);
    check_good(r, N);
    cucap_reader_destroy(r);
  }

  /* blob lookups that miss */
  CHECK(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  if (r) {
    cucap_hash128 h = {123, 456};
    uint64_t s;
    const void *m;
    CHECK(cucap_reader_blob_size(r, h, &s) == CUCAP_ERR_NOT_FOUND);
    CHECK(cucap_reader_blob_map(r, h, &m, &s) == CUCAP_ERR_NOT_FOUND);
    CHECK(cucap_reader_blob_read(r, h, NULL, 0) == CUCAP_ERR_NOT_FOUND);
    cucap_reader_destroy(r);
  }

  free(copy);
  free(file);
  unlink(path);
  unlink(bad);
  free(path);
  free(bad);
  printf("%d passed, %d failed\n", checks - tu_failures, tu_failures);
  return tu_finish("test_reader", checks);
}
