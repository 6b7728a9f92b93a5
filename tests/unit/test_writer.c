/* test_writer.c - capture stream writer: round trip, blobs, threads, flush
 * interval, sticky background errors. */
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stream_testutil.h"
#include "writer_internal.h"

static int checks;
#define CHECK(c)                                                               \
  do {                                                                         \
    checks++;                                                                  \
    TU_CHECK(c);                                                               \
  } while (0)

static void test_piece_layout(void) {
  uint8_t data[13];
  st_fill(data, sizeof data, 5);
  size_t n = cucap_align8(CUCAP_BLOB_PIECE_HDR + sizeof data);
  uint8_t *buf = aligned_alloc(8, n);
  TU_REQUIRE(buf);
  cucap_hash128 h = cucap_hash128_of(data, sizeof data);
  cucap_blob_piece_header(buf, h, 1000, 64, sizeof data);
  memcpy(buf + CUCAP_BLOB_PIECE_HDR, data, sizeof data);
  memset(buf + CUCAP_BLOB_PIECE_HDR + sizeof data, 0,
         n - CUCAP_BLOB_PIECE_HDR - sizeof data);
  CHECK(cucap_fb_record_verify(buf, n, 1) == CUCAP_OK);
  const cucap_fb_record *r = cucap_fb_record_root_sp(buf);
  const cucap_fb_blob_piece *bp = cucap_fb_record_body_as_blob_piece(r);
  CHECK(bp != NULL);
  if (bp) {
    const cucap_fb_hash128 *fh = cucap_fb_blob_piece_hash(bp);
    CHECK(fh && fh->lo == h.lo && fh->hi == h.hi);
    CHECK(cucap_fb_blob_piece_total_size(bp) == 1000);
    CHECK(cucap_fb_blob_piece_offset(bp) == 64);
    size_t dn = 0;
    const uint8_t *d = cucap_fb_blob_piece_data(bp, &dn);
    CHECK(dn == sizeof data && d && memcmp(d, data, dn) == 0);
  }
  CHECK(cucap_fb_record_seq(r) == 0);
  /* empty piece */
  cucap_blob_piece_header(buf, h, 0, 0, 0);
  CHECK(cucap_fb_record_verify(buf, CUCAP_BLOB_PIECE_HDR, 1) == CUCAP_OK);
  free(buf);
}

static void test_round_trip(void) {
  char *path = tu_tmp_path("writer-rt.cucap");
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 64 << 10; /* several record chunks */
  cucap_writer *w = NULL;
  CHECK(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  TU_REQUIRE(w);
  cucap_fbb *b = cucap_fbb_create(0);
  const uint32_t N = 20000;
  size_t big_n = (9u << 20) + 12345; /* 3 pieces */
  uint8_t *big = malloc(big_n);
  uint8_t small[1000];
  TU_REQUIRE(big);
  st_fill(big, big_n, 1);
  st_fill(small, sizeof small, 2);
  cucap_hash128 hbig, hsmall, hempty, hdup;
  for (uint32_t i = 0; i < N; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, 77, &sz);
    uint64_t pos = 99;
    CHECK(cucap_writer_append(w, rec, sz, &pos) == CUCAP_OK && pos == i);
    if (i == 100)
      CHECK(cucap_writer_put_blob(w, big, big_n, &hbig) == CUCAP_OK);
    if (i == 200)
      CHECK(cucap_writer_put_blob(w, small, sizeof small, &hsmall) == CUCAP_OK);
    if (i == 300) {
      CHECK(cucap_writer_put_blob(w, NULL, 0, &hempty) == CUCAP_OK);
      CHECK(cucap_writer_put_blob(w, small, sizeof small, &hdup) == CUCAP_OK);
      CHECK(cucap_hash128_eq(hdup, hsmall));
    }
  }
  CHECK(cucap_writer_has_blob(w, hbig));
  CHECK(cucap_writer_has_blob(w, hempty));
  cucap_hash128 nope = {1, 2};
  CHECK(!cucap_writer_has_blob(w, nope));
  /* bad arguments */
  CHECK(cucap_writer_append(w, small, 3, NULL) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_writer_append(w, small, 16, NULL) == CUCAP_ERR_INVALID_ARG);
  CHECK(cucap_writer_close(w) == CUCAP_OK);
  CHECK(cucap_writer_close(w) == CUCAP_OK); /* idempotent */
  cucap_writer_stats st;
  cucap_writer_get_stats(w, &st);
  CHECK(st.records == N);
  CHECK(st.blobs == 3);
  CHECK(st.blob_dedup_hits == 1);
  CHECK(st.chunks > 3);
  struct stat sb;
  TU_REQUIRE(stat(path, &sb) == 0);
  CHECK(st.file_bytes == (uint64_t)sb.st_size);
  {
    size_t sz;
    const uint8_t *rec = st_make_record(b, 1, 1, &sz);
    CHECK(cucap_writer_append(w, rec, sz, NULL) == CUCAP_ERR_STATE);
  }
  cucap_writer_destroy(w);

  char msg[256] = "";
  cucap_reader *r = NULL;
  cucap_reader_options ro = {.strict = 1};
  CHECK(cucap_reader_open(path, &ro, &r, msg, sizeof msg) == CUCAP_OK);
  TU_REQUIRE(r);
  cucap_reader_recovery rc;
  cucap_reader_recovery_get(r, &rc);
  CHECK(rc.complete == 1 && rc.used_index == 1);
  CHECK(rc.records == N);
  CHECK(rc.blobs == 3);
  CHECK(rc.end_mono_ns > 0);
  CHECK(cucap_reader_blob_count(r) == 3);
  const void *rec, *buf;
  size_t sz;
  uint32_t i = 0;
  cucap_status s;
  int bad = 0;
  while ((s = cucap_reader_next(r, &rec, &buf, &sz)) == CUCAP_OK) {
    const cucap_fb_record *t = rec;
    if (cucap_fb_record_seq(t) != i + 1 || cucap_fb_record_tid(t) != 77)
      bad++;
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(t);
    size_t an = 0;
    const uint8_t *a = l ? cucap_fb_launch_args(l, &an) : NULL;
    if (!a || an != 40 || a[5] != (uint8_t)(i + 1 + 5))
      bad++;
    i++;
  }
  CHECK(s == CUCAP_END);
  CHECK(i == N);
  CHECK(bad == 0);
  /* blobs */
  uint64_t bs = 0;
  CHECK(cucap_reader_blob_size(r, hbig, &bs) == CUCAP_OK && bs == big_n);
  uint8_t *back = malloc(big_n);
  TU_REQUIRE(back);
  CHECK(cucap_reader_blob_read(r, hbig, back, big_n) == CUCAP_OK);
  CHECK(memcmp(back, big, big_n) == 0);
  CHECK(cucap_reader_blob_read(r, hbig, back, big_n - 1) ==
        CUCAP_ERR_INVALID_ARG);
  const void *m = NULL;
  uint64_t ms = 0;
  CHECK(cucap_reader_blob_map(r, hsmall, &m, &ms) == CUCAP_OK &&
        ms == sizeof small && memcmp(m, small, ms) == 0);
  const void *m2 = NULL;
  CHECK(cucap_reader_blob_map(r, hsmall, &m2, &ms) == CUCAP_OK && m2 == m);
  CHECK(cucap_reader_blob_map(r, hempty, &m, &ms) == CUCAP_OK && ms == 0);
  CHECK(cucap_reader_blob_size(r, nope, &bs) == CUCAP_ERR_NOT_FOUND);
  free(back);
  cucap_reader_destroy(r);
  /* the same through the scan path (trailer removed) */
  size_t fsz;
  uint8_t *file = st_read_file(path, &fsz);
  CHECK(cucap_reader_open_memory(file, fsz - 32, NULL, &r, msg, sizeof msg) ==
        CUCAP_OK);
  if (r) {
    cucap_reader_recovery_get(r, &rc);
    CHECK(rc.complete == 0 && rc.used_index == 0);
    CHECK(rc.records == N);
    CHECK(rc.blobs == 3);
    CHECK(st_count_records(r, &s) == N && s == CUCAP_END);
    CHECK(cucap_reader_blob_map(r, hbig, &m, &ms) == CUCAP_OK && ms == big_n &&
          memcmp(m, big, big_n) == 0);
    cucap_reader_destroy(r);
  }
  free(file);
  free(big);
  cucap_fbb_destroy(b);
  free(hdr);
  unlink(path);
  free(path);
}

typedef struct thr_arg {
  cucap_writer *w;
  uint32_t tid;
  uint32_t n;
} thr_arg;

static void *thr_main(void *p) {
  thr_arg *a = p;
  cucap_fbb *b = cucap_fbb_create(0);
  for (uint32_t i = 0; i < a->n; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, a->tid, &sz);
    if (cucap_writer_append(a->w, rec, sz, NULL) != CUCAP_OK)
      break;
    if (i % 10000 == 0) {
      uint8_t blob[256];
      st_fill(blob, sizeof blob, i % 30000); /* shared between threads */
      cucap_writer_put_blob(a->w, blob, sizeof blob, NULL);
    }
  }
  cucap_fbb_destroy(b);
  return NULL;
}

static void test_threads(void) {
  char *path = tu_tmp_path("writer-mt.cucap");
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 256 << 10;
  o.queue_depth = 2; /* provoke back-pressure */
  cucap_writer *w = NULL;
  CHECK(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  TU_REQUIRE(w);
  enum { T = 4, PER = 100000 };
  pthread_t th[T];
  thr_arg args[T];
  for (int t = 0; t < T; t++) {
    args[t].w = w;
    args[t].tid = (uint32_t)t + 1;
    args[t].n = PER;
    pthread_create(&th[t], NULL, thr_main, &args[t]);
  }
  for (int t = 0; t < T; t++)
    pthread_join(th[t], NULL);
  CHECK(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_stats st;
  cucap_writer_get_stats(w, &st);
  CHECK(st.records == (uint64_t)T * PER);
  CHECK(st.blobs + st.blob_dedup_hits == (uint64_t)T * (PER / 10000));
  printf("threads: %llu chunks, %llu producer waits, %llu blobs, %llu dedup\n",
         (unsigned long long)st.chunks, (unsigned long long)st.producer_waits,
         (unsigned long long)st.blobs, (unsigned long long)st.blob_dedup_hits);
  cucap_writer_destroy(w);

  cucap_reader *r = NULL;
  char msg[256];
  CHECK(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  TU_REQUIRE(r);
  uint64_t last[T + 1] = {0};
  uint64_t count = 0, order_bad = 0;
  const void *rec;
  cucap_status s;
  while ((s = cucap_reader_next(r, &rec, NULL, NULL)) == CUCAP_OK) {
    uint32_t tid = cucap_fb_record_tid(rec);
    uint64_t seq = cucap_fb_record_seq(rec);
    if (tid < 1 || tid > T || seq != last[tid] + 1)
      order_bad++;
    else
      last[tid] = seq;
    count++;
  }
  CHECK(s == CUCAP_END);
  CHECK(count == (uint64_t)T * PER);
  CHECK(order_bad == 0);
  for (int t = 1; t <= T; t++)
    CHECK(last[t] == PER);
  cucap_reader_destroy(r);
  free(hdr);
  unlink(path);
  free(path);
}

static void test_flush_interval(void) {
  char *path = tu_tmp_path("writer-fi.cucap");
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.flush_interval_ms = 20;
  cucap_writer *w = NULL;
  CHECK(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  TU_REQUIRE(w);
  cucap_fbb *b = cucap_fbb_create(0);
  for (uint32_t i = 0; i < 10; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, 1, &sz);
    CHECK(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
  }
  uint8_t blob[100];
  st_fill(blob, sizeof blob, 9);
  cucap_hash128 h;
  CHECK(cucap_writer_put_blob(w, blob, sizeof blob, &h) == CUCAP_OK);
  /* No flush: the background thread must seal both partial chunks. */
  cucap_writer_stats st;
  for (int k = 0; k < 100; k++) {
    cucap_writer_get_stats(w, &st);
    if (st.chunks >= 2)
      break;
    usleep(10000);
  }
  CHECK(st.chunks >= 2); /* more if the test thread was descheduled */
  /* A reader sees them while the writer is still open (killed-app view). */
  cucap_reader *r = NULL;
  char msg[256];
  CHECK(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  if (r) {
    cucap_reader_recovery rc;
    cucap_reader_recovery_get(r, &rc);
    CHECK(rc.complete == 0 && rc.records == 10 && rc.chunks == st.chunks);
    cucap_status s;
    CHECK(st_count_records(r, &s) == 10 && s == CUCAP_END);
    uint8_t back[100];
    CHECK(cucap_reader_blob_read(r, h, back, sizeof back) == CUCAP_OK &&
          memcmp(back, blob, sizeof back) == 0);
    cucap_reader_destroy(r);
  }
  cucap_writer_destroy(w); /* closes */
  CHECK(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  if (r) {
    cucap_reader_recovery rc;
    cucap_reader_recovery_get(r, &rc);
    CHECK(rc.complete == 1 && rc.records == 10);
    cucap_reader_destroy(r);
  }
  cucap_fbb_destroy(b);
  free(hdr);
  unlink(path);
  free(path);
}

/* A background write error (file size limit) is sticky and never blocks. */
static void test_sticky_error(void) {
  char *path = tu_tmp_path("writer-err.cucap");
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 256 << 10;
  TU_REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 64 << 10;
  o.level = 0;
  o.queue_depth = 1;
  cucap_writer *w = NULL;
  o.quiet_errors = 1; /* the message is checked below instead */
  CHECK(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  TU_REQUIRE(w);
  CHECK(cucap_writer_last_error(w)[0] == 0);
  cucap_fbb *b = cucap_fbb_create(0);
  /* random blobs do not compress: the limit is hit quickly */
  uint8_t *blob = malloc(1 << 20);
  TU_REQUIRE(blob);
  cucap_status last = CUCAP_OK;
  for (int i = 0; i < 8 && last == CUCAP_OK; i++) {
    st_fill(blob, 1 << 20, 100 + (uint64_t)i);
    last = cucap_writer_put_blob(w, blob, 1 << 20, NULL);
    cucap_writer_flush(w);
  }
  for (uint32_t i = 0; i < 1000; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, 1, &sz);
    cucap_status s = cucap_writer_append(w, rec, sz, NULL);
    if (s != CUCAP_OK) {
      last = s;
      break;
    }
  }
  CHECK(cucap_writer_flush(w) == CUCAP_ERR_IO);
  CHECK(cucap_writer_close(w) == CUCAP_ERR_IO);
  CHECK(last == CUCAP_ERR_IO);
  /* the first error, with its cause */
  CHECK(strstr(cucap_writer_last_error(w), "chunk at offset") &&
        strstr(cucap_writer_last_error(w), "too large"));
  cucap_writer_destroy(w);
  setrlimit(RLIMIT_FSIZE, &old);
  /* Whatever made it to disk is still readable. */
  cucap_reader *r = NULL;
  char msg[256];
  CHECK(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  cucap_reader_destroy(r);
  free(blob);
  cucap_fbb_destroy(b);
  free(hdr);
  unlink(path);
  free(path);
}

static void test_create_errors(void) {
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer *w = (cucap_writer *)1;
  CHECK(cucap_writer_create("/nonexistent-dir/x.cucap", NULL, hdr, hsz, &w) ==
            CUCAP_ERR_IO &&
        w == NULL);
  char *path = tu_tmp_path("writer-bad.cucap");
  uint8_t junk[64];
  st_fill(junk, sizeof junk, 3);
  w = (cucap_writer *)1;
  CHECK(cucap_writer_create(path, NULL, junk, sizeof junk, &w) ==
            CUCAP_ERR_VERIFY &&
        w == NULL);
  CHECK(cucap_writer_create(path, NULL, NULL, 0, &w) == CUCAP_ERR_INVALID_ARG);
  cucap_writer_destroy(NULL);
  /* the header cannot be written: no stub file is left behind ... */
  {
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 16;
    TU_REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    CHECK(cucap_writer_create(path, NULL, hdr, hsz, &w) == CUCAP_ERR_IO && w == NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(access(path, F_OK) != 0);
  }
  /* ... but a device is never removed (writes to /dev/full fail) */
  struct stat ds;
  if (stat("/dev/full", &ds) == 0 && S_ISCHR(ds.st_mode)) {
    CHECK(cucap_writer_create("/dev/full", NULL, hdr, hsz, &w) == CUCAP_ERR_IO && w == NULL);
    CHECK(stat("/dev/full", &ds) == 0 && S_ISCHR(ds.st_mode));
  }
  /* empty capture */
  CHECK(cucap_writer_create(path, NULL, hdr, hsz, &w) == CUCAP_OK);
  CHECK(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);
  cucap_reader *r = NULL;
  char msg[256];
  cucap_reader_options ro = {.strict = 1};
  CHECK(cucap_reader_open(path, &ro, &r, msg, sizeof msg) == CUCAP_OK);
  cucap_status s;
  CHECK(r && st_count_records(r, &s) == 0 && s == CUCAP_END);
  cucap_reader_destroy(r);
  unlink(path);
  free(path);
  free(hdr);
}

/* zstd worker threads, a record larger than chunk_size, sync_writes. */
static void test_options(void) {
  char *path = tu_tmp_path("writer-opt.cucap");
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.nb_workers = 2;
  o.level = 3;
  o.chunk_size = 4096;
  o.sync_writes = 1;
  cucap_writer *w = NULL;
  CHECK(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  TU_REQUIRE(w);
  cucap_fbb *b = cucap_fbb_create(0);
  for (uint32_t i = 0; i < 50; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, 1, &sz);
    CHECK(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
  }
  /* a 100 KB Note record: bigger than a chunk, gets a chunk of its own */
  cucap_fbb_reset(b);
  size_t big = 100000;
  uint8_t *d = malloc(big);
  TU_REQUIRE(d);
  st_fill(d, big, 4);
  cucap_fb_ref dv = cucap_fb_note_create_data(b, d, big);
  cucap_fb_note_start(b);
  cucap_fb_note_add_data(b, dv);
  cucap_fb_ref note = cucap_fb_note_end(b);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, 51);
  cucap_fb_record_add_body(b, CUCAP_FB_BODY_NOTE, note);
  size_t sz;
  const uint8_t *rec =
      cucap_fbb_finish(b, cucap_fb_record_end(b), 1, &sz);
  TU_REQUIRE(rec);
  CHECK(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
  for (uint32_t i = 51; i < 60; i++) {
    rec = st_make_record(b, i + 1, 1, &sz);
    CHECK(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
  }
  CHECK(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);
  cucap_reader *r = NULL;
  char msg[256];
  cucap_reader_options so = {.strict = 1};
  CHECK(cucap_reader_open(path, &so, &r, msg, sizeof msg) == CUCAP_OK);
  if (r) {
    const void *t;
    uint64_t n = 0, bad = 0;
    while (cucap_reader_next(r, &t, NULL, NULL) == CUCAP_OK) {
      n++;
      if (cucap_fb_record_seq(t) != n)
        bad++;
      const cucap_fb_note *nt = cucap_fb_record_body_as_note(t);
      if (nt) {
        size_t dn = 0;
        const uint8_t *dd = cucap_fb_note_data(nt, &dn);
        CHECK(dn == big && memcmp(dd, d, big) == 0);
      }
    }
    CHECK(n == 60 && bad == 0);
    cucap_reader_destroy(r);
  }
  free(d);
  cucap_fbb_destroy(b);
  free(hdr);
  unlink(path);
  free(path);
}

/* Offset of Record.seq (field 0) in a size-prefixed Record, 0 if absent. */
static size_t seq_offset_of(const uint8_t *buf, size_t size) {
  uint32_t root;
  int32_t soff;
  uint16_t vlen, foff;
  memcpy(&root, buf + 4, 4);
  size_t t = 4 + (size_t)root;
  memcpy(&soff, buf + t, 4);
  size_t vt = (size_t)((int64_t)t - soff);
  memcpy(&vlen, buf + vt, 2);
  if (vlen < 6)
    return 0;
  memcpy(&foff, buf + vt + 4, 2);
  return foff && t + foff + 8 <= size ? t + foff : 0;
}

typedef struct seq_arg {
  cucap_writer *w;
  uint64_t *counter;
  uint32_t tid, n, bad;
  uint64_t *got; /* seq given to each of this thread's records */
} seq_arg;

static void *seq_main(void *p) {
  seq_arg *a = p;
  cucap_fbb *b = cucap_fbb_create(0);
  for (uint32_t i = 0; i < a->n; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, 0xdead0000u + i, a->tid, &sz);
    size_t off = seq_offset_of(rec, sz);
    uint64_t before, after, seq = 0;
    memcpy(&before, rec + off, 8);
    if (!off ||
        cucap_writer_append_seq(a->w, rec, sz, off, a->counter, &seq) !=
            CUCAP_OK) {
      a->bad++;
      break;
    }
    memcpy(&after, rec + off, 8);
    if (after != before || seq == 0 || (i && seq <= a->got[i - 1]))
      a->bad++; /* caller's buffer untouched; numbers rise per thread */
    a->got[i] = seq;
  }
  cucap_fbb_destroy(b);
  return NULL;
}

/* append_seq: 8 threads share one counter with no lock of their own; the
 * file must hold seq 1..N in file order, each thread's numbers as returned.
 * A second iteration after rewind (records verified once) reads the same. */
static void test_append_seq(void) {
  char *path = tu_tmp_path("writer-seq.cucap");
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 64 << 10;
  o.record_level = -3; /* record chunks at a fast level, blobs at level */
  cucap_writer *w = NULL;
  CHECK(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  TU_REQUIRE(w);
  uint64_t counter = 0;
  enum { T = 8, PER = 20000 };
  pthread_t th[T];
  seq_arg a[T];
  for (int t = 0; t < T; t++) {
    a[t].w = w;
    a[t].counter = &counter;
    a[t].tid = (uint32_t)t + 1;
    a[t].n = PER;
    a[t].bad = 0;
    a[t].got = calloc(PER, sizeof *a[t].got);
    TU_REQUIRE(a[t].got);
    pthread_create(&th[t], NULL, seq_main, &a[t]);
  }
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    CHECK(a[t].bad == 0);
  }
  CHECK(counter == (uint64_t)T * PER);
  /* bad arguments */
  {
    cucap_fbb *b = cucap_fbb_create(0);
    size_t sz;
    const uint8_t *rec = st_make_record(b, 5, 1, &sz);
    uint64_t seq = 77;
    CHECK(cucap_writer_append_seq(w, rec, sz, 4, &counter, &seq) ==
          CUCAP_ERR_INVALID_ARG);
    CHECK(cucap_writer_append_seq(w, rec, sz, sz - 7, &counter, &seq) ==
          CUCAP_ERR_INVALID_ARG);
    CHECK(cucap_writer_append_seq(w, rec, sz, 8, NULL, &seq) ==
          CUCAP_ERR_INVALID_ARG);
    CHECK(seq == 77 && counter == (uint64_t)T * PER);
    cucap_fbb_destroy(b);
  }
  uint8_t blob[5000];
  st_fill(blob, sizeof blob, 9);
  cucap_hash128 hb;
  CHECK(cucap_writer_put_blob(w, blob, sizeof blob, &hb) == CUCAP_OK);
  CHECK(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);

  cucap_reader *r = NULL;
  char msg[256];
  CHECK(cucap_reader_open(path, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  TU_REQUIRE(r);
  for (int pass = 0; pass < 2; pass++) {
    uint32_t idx[T + 1] = {0};
    uint64_t n = 0, bad = 0;
    const void *rec;
    cucap_status s;
    while ((s = cucap_reader_next(r, &rec, NULL, NULL)) == CUCAP_OK) {
      uint32_t tid = cucap_fb_record_tid(rec);
      uint64_t seq = cucap_fb_record_seq(rec);
      n++;
      if (seq != n || tid < 1 || tid > T || idx[tid] >= PER ||
          a[tid - 1].got[idx[tid]++] != seq)
        bad++;
    }
    CHECK(s == CUCAP_END);
    CHECK(n == (uint64_t)T * PER);
    CHECK(bad == 0);
    CHECK(cucap_reader_rewind(r) == CUCAP_OK);
  }
  uint8_t back[sizeof blob];
  CHECK(cucap_reader_blob_read(r, hb, back, sizeof back) == CUCAP_OK &&
        memcmp(back, blob, sizeof blob) == 0);
  cucap_reader_destroy(r);
  for (int t = 0; t < T; t++)
    free(a[t].got);
  free(hdr);
  unlink(path);
  free(path);
}

int main(void) {
  test_piece_layout();
  test_create_errors();
  test_round_trip();
  test_options();
  test_flush_interval();
  test_threads();
  test_append_seq();
  test_sticky_error();
  printf("%d passed, %d failed\n", checks - tu_failures, tu_failures);
  return tu_finish("test_writer", checks);
}
