/* test_reader.c - capture stream reader: preamble/version checks, header,
 * chunk and blob tables, memory open, strict mode, rewind, read-ahead
 * decoding (decode_threads), launch argument blocks inline and in blobs. */
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

/* A launch's argument block through cucap_reader_launch_args_size/read:
 * inline (the capture's records: 40 bytes, byte i = seq + i) and in a blob
 * (g_blob), a missing blob, a buffer too small. */
static void check_launch_args(cucap_reader *r) {
  CHECK(cucap_reader_rewind(r) == CUCAP_OK);
  const void *rec = NULL;
  CHECK(cucap_reader_next(r, &rec, NULL, NULL) == CUCAP_OK);
  const cucap_fb_launch *l = rec ? cucap_fb_record_body_as_launch(rec) : NULL;
  CHECK(l != NULL);
  uint64_t n = 0;
  uint8_t got[64];
  CHECK(cucap_reader_launch_args_size(r, l, &n) == CUCAP_OK && n == 40);
  CHECK(cucap_reader_launch_args_read(r, l, got, sizeof got) == CUCAP_OK);
  uint64_t seq = rec ? cucap_fb_record_seq(rec) : 0;
  int same = 1;
  for (int i = 0; i < 40; i++)
    same &= got[i] == (uint8_t)(seq + (uint64_t)i);
  CHECK(same);
  CHECK(cucap_reader_launch_args_read(r, l, got, 39) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_reader_launch_args_size(r, NULL, &n) == CUCAP_ERR_INVALID_ARG);
  /* blob-held: g_blob, and a blob the capture does not hold */
  cucap_fbb *b = cucap_fbb_create(0);
  for (int missing = 0; missing < 2; missing++) {
    cucap_fbb_reset(b);
    cucap_fb_hash128 h = {g_blob_hash.lo, g_blob_hash.hi ^ (uint64_t)missing};
    cucap_fb_launch_start(b);
    cucap_fb_launch_add_function(b, 0xf00d);
    cucap_fb_launch_add_args_blob(b, &h);
    cucap_fb_launch_add_has_args_blob(b, 1);
    cucap_fb_ref lr = cucap_fb_launch_end(b);
    cucap_fb_record_start(b);
    cucap_fb_record_add_seq(b, 1);
    cucap_fb_record_add_body(b, CUCAP_FB_BODY_LAUNCH, lr);
    size_t len = 0;
    const uint8_t *buf = cucap_fbb_finish(b, cucap_fb_record_end(b), 1, &len);
    CHECK(buf && cucap_fb_record_verify(buf, len, 1) == CUCAP_OK);
    const cucap_fb_launch *bl = buf ? cucap_fb_record_body_as_launch(cucap_fb_record_root_sp(buf)) : NULL;
    uint8_t *back = malloc(sizeof g_blob);
    TU_REQUIRE(back);
    if (!missing) {
      CHECK(cucap_reader_launch_args_size(r, bl, &n) == CUCAP_OK && n == sizeof g_blob);
      CHECK(cucap_reader_launch_args_read(r, bl, back, sizeof g_blob) == CUCAP_OK &&
            memcmp(back, g_blob, sizeof g_blob) == 0);
      CHECK(cucap_reader_launch_args_read(r, bl, back, sizeof g_blob - 1) ==
            CUCAP_ERR_INVALID_ARG);
    } else {
      CHECK(cucap_reader_launch_args_size(r, bl, &n) == CUCAP_ERR_NOT_FOUND);
      CHECK(cucap_reader_launch_args_read(r, bl, back, sizeof g_blob) == CUCAP_ERR_NOT_FOUND);
    }
    free(back);
  }
  cucap_fbb_destroy(b);
}

/* ------------------------------------------------ read-ahead (decode_threads)
 * A capture with many blob chunks: small blobs packed several to a 64 KiB
 * blob chunk, larger ones split over chunks, and a 9 MiB blob (three 4 MiB
 * pieces, the direct path of one piece per chunk). */
#define RA_NBLOBS 24
static uint64_t g_ra_size[RA_NBLOBS];
static cucap_hash128 g_ra_hash[RA_NBLOBS];

static uint64_t ra_blob_size(int i) {
  if (i == 7)
    return (9u << 20) + 123;
  if (i == 15)
    return 4u << 20;
  return 1000 + (uint64_t)i * 7001;
}

static void make_blob_capture(const char *path) {
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 16 << 10;
  o.blob_chunk_size = 64 << 10;
  cucap_writer *w = NULL;
  TU_REQUIRE(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  cucap_fbb *b = cucap_fbb_create(0);
  for (int i = 0; i < RA_NBLOBS; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, (uint32_t)i + 1, 5, &sz);
    TU_REQUIRE(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
    g_ra_size[i] = ra_blob_size(i);
    uint8_t *d = malloc((size_t)g_ra_size[i]);
    TU_REQUIRE(d);
    st_fill(d, (size_t)g_ra_size[i], 100 + (uint64_t)i);
    TU_REQUIRE(cucap_writer_put_blob(w, d, (size_t)g_ra_size[i],
                                     &g_ra_hash[i]) == CUCAP_OK);
    free(d);
  }
  TU_REQUIRE(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);
  cucap_fbb_destroy(b);
  free(hdr);
}

/* Reads blob i (in the given order) with blob_read (or blob_map when
 * use_map) and compares it with what was written. */
static void ra_check_all(cucap_reader *r, const int *order, int use_map) {
  uint8_t *want = malloc((size_t)ra_blob_size(7));
  uint8_t *got = malloc((size_t)ra_blob_size(7));
  TU_REQUIRE(want && got);
  for (int k = 0; k < RA_NBLOBS; k++) {
    int i = order ? order[k] : k;
    st_fill(want, (size_t)g_ra_size[i], 100 + (uint64_t)i);
    const void *m = NULL;
    uint64_t sz = 0;
    if (use_map) {
      CHECK(cucap_reader_blob_map(r, g_ra_hash[i], &m, &sz) == CUCAP_OK);
      CHECK(m && sz == g_ra_size[i] && memcmp(m, want, (size_t)sz) == 0);
    } else {
      memset(got, 0, (size_t)g_ra_size[i]);
      CHECK(cucap_reader_blob_read(r, g_ra_hash[i], got, g_ra_size[i]) ==
            CUCAP_OK);
      CHECK(memcmp(got, want, (size_t)g_ra_size[i]) == 0);
    }
  }
  free(want);
  free(got);
}

/* Statuses and messages of reading every blob in file order. */
typedef struct ra_outcome {
  cucap_status st[RA_NBLOBS];
  char msg[RA_NBLOBS][200];
} ra_outcome;

static void ra_read_damaged(const uint8_t *file, size_t fsz, int threads,
                            ra_outcome *out) {
  cucap_reader_options o = {.strict = 0, .decode_threads = threads};
  cucap_reader *r = NULL;
  char msg[256];
  TU_REQUIRE(cucap_reader_open_memory(file, fsz, &o, &r, msg, sizeof msg) ==
             CUCAP_OK);
  uint8_t *got = malloc((size_t)ra_blob_size(7));
  TU_REQUIRE(got);
  /* twice: a failed chunk fails again the second time round */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < RA_NBLOBS; i++) {
      out->st[i] = cucap_reader_blob_read(r, g_ra_hash[i], got, g_ra_size[i]);
      snprintf(out->msg[i], sizeof out->msg[i], "%s",
               out->st[i] == CUCAP_OK ? "" : cucap_reader_last_error(r));
    }
  free(got);
  cucap_reader_destroy(r);
}

static void test_readahead(void) {
  char *path = tu_tmp_path("reader-ra.cucap");
  make_blob_capture(path);
  int reverse[RA_NBLOBS], scattered[RA_NBLOBS];
  for (int i = 0; i < RA_NBLOBS; i++) {
    reverse[i] = RA_NBLOBS - 1 - i;
    scattered[i] = (i * 7) % RA_NBLOBS; /* 7 and 24 coprime */
  }
  const int threads[] = {0, 1, 3};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    cucap_reader_options o = {.strict = 0, .decode_threads = threads[t]};
    cucap_reader *r = NULL;
    char msg[256];
    CHECK(cucap_reader_open(path, &o, &r, msg, sizeof msg) == CUCAP_OK);
    TU_REQUIRE(r);
    CHECK(cucap_reader_blob_count(r) == RA_NBLOBS);
    CHECK(cucap_reader_chunk_count(r) > 20);
    ra_check_all(r, NULL, 0);      /* file order */
    ra_check_all(r, NULL, 0);      /* again, from the start */
    ra_check_all(r, reverse, 0);   /* against the read-ahead */
    ra_check_all(r, scattered, 0); /* jumps */
    cucap_status s;
    CHECK(st_count_records(r, &s) == RA_NBLOBS && s == CUCAP_END);
    ra_check_all(r, NULL, 1);      /* blob_map */
    cucap_reader_destroy(r);
    /* destroy while workers are busy */
    CHECK(cucap_reader_open(path, &o, &r, msg, sizeof msg) == CUCAP_OK);
    uint8_t one[1000];
    CHECK(cucap_reader_blob_read(r, g_ra_hash[0], one, sizeof one) == CUCAP_OK);
    cucap_reader_destroy(r);
  }

  /* Damage the payload of two blob chunks (one holding small blobs, one
   * holding a single 4 MiB piece of the 9 MiB blob): with and without
   * read-ahead the same blobs fail with the same status and message, and
   * all others read. */
  size_t fsz;
  uint8_t *file = st_read_file(path, &fsz);
  cucap_reader *r = NULL;
  char msg[256];
  TU_REQUIRE(cucap_reader_open_memory(file, fsz, NULL, &r, msg, sizeof msg) ==
             CUCAP_OK);
  size_t small_ci = 0, big_ci = 0;
  for (size_t i = 0; i < cucap_reader_chunk_count(r); i++) {
    cucap_reader_chunk c;
    TU_REQUIRE(cucap_reader_chunk_get(r, i, &c) == CUCAP_OK);
    if (c.kind != CUCAP_FB_CHUNKKIND_BLOBS)
      continue;
    if (!small_ci && c.records > 1)
      small_ci = i;
    if (c.raw_size > (4u << 20))
      big_ci = i; /* the last one: the 9 MiB blob's second piece or later */
  }
  CHECK(small_ci && big_ci);
  const size_t bad_ci[2] = {small_ci, big_ci};
  for (int k = 0; k < 2; k++) {
    cucap_reader_chunk c;
    TU_REQUIRE(cucap_reader_chunk_get(r, bad_ci[k], &c) == CUCAP_OK);
    file[c.offset + sizeof(cucap_chunk_header) + c.compressed_size / 2] ^= 0x5a;
  }
  cucap_reader_destroy(r);
  static ra_outcome base, ra1, ra3;
  ra_read_damaged(file, fsz, 0, &base);
  ra_read_damaged(file, fsz, 1, &ra1);
  ra_read_damaged(file, fsz, 3, &ra3);
  int bad = 0;
  for (int i = 0; i < RA_NBLOBS; i++) {
    if (base.st[i] != CUCAP_OK) {
      bad++;
      CHECK(base.st[i] == CUCAP_ERR_CORRUPT);
      CHECK(strstr(base.msg[i], "payload checksum mismatch") != NULL);
    }
    CHECK(ra1.st[i] == base.st[i] && strcmp(ra1.msg[i], base.msg[i]) == 0);
    CHECK(ra3.st[i] == base.st[i] && strcmp(ra3.msg[i], base.msg[i]) == 0);
  }
  CHECK(bad >= 2 && bad < RA_NBLOBS - 2);
  printf("read-ahead: %d of %d blobs in damaged chunks reported alike\n", bad,
         RA_NBLOBS);
  free(file);
  unlink(path);
  free(path);
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
    cucap_reader_options o = {.strict = strict};
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
  check_launch_args(r);
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
  cucap_reader_options so = {.strict = 1};
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

  test_readahead();

  free(copy);
  free(file);
  unlink(path);
  unlink(bad);
  free(path);
  free(bad);
  printf("%d passed, %d failed\n", checks - tu_failures, tu_failures);
  return tu_finish("test_reader", checks);
}
