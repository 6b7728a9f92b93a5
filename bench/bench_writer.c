/* bench_writer.c - capture writer throughput.
 *
 * (a) 1M launch-like Records (seq/tid/t_enter/t_exit/call/result/args[6] +
 *     Launch body with grid/block/stream/40-byte args) built with cucap_fbb
 *     and appended by one thread; (b) 1 GiB of float-like blob payload as
 *     4 x 256 MiB buffers with different content (no dedup). Each is compared
 *     with building/producing the same bytes and fwrite'ing them to a file in
 *     the same directory, measured in the same run (best of 3). Times include
 *     close (everything compressed and written; no fsync on either side).
 * Experiment knobs (environment): CUCAP_BENCH_LEVEL (level),
 * CUCAP_BENCH_RLEVEL (record_level), CUCAP_BENCH_CHUNK (chunk_size),
 * CUCAP_BENCH_QUEUE (queue_depth), CUCAP_BENCH_ONLY_RECORDS=1 (skip (b)). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "cucap_hash.h"
#include "cucap_schema.h"
#include "cucap_writer.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* (c): a ~64-byte Record without body (e.g. cuCtxGetCurrent-like calls). */
static const uint8_t *make_small(cucap_fbb *b, uint64_t seq, size_t *size) {
  cucap_fbb_reset(b);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, seq);
  cucap_fb_record_add_t_enter(b, seq * 1000);
  cucap_fb_record_add_t_exit(b, seq * 1000 + 800);
  cucap_fb_record_add_tid(b, 4242);
  cucap_fb_record_add_call(b, 17);
  cucap_fb_record_add_result(b, 0);
  return cucap_fbb_finish(b, cucap_fb_record_end(b), 1, size);
}

static const uint8_t *make_launch(cucap_fbb *b, uint64_t seq, size_t *size) {
  cucap_fbb_reset(b);
  uint8_t argblk[40];
  memcpy(argblk, &seq, 8);
  memset(argblk + 8, 0x11, 32);
  uint64_t args[6] = {0xf00d, seq & 1023, 1, 128, 7, 0};
  cucap_fb_ref la = cucap_fb_launch_create_args(b, argblk, sizeof argblk);
  cucap_fb_dim3 grid = {(uint32_t)(seq & 1023) + 1, 1, 1}, block = {256, 1, 1};
  cucap_fb_launch_start(b);
  cucap_fb_launch_add_function(b, 0x5555000000f00dull);
  cucap_fb_launch_add_grid(b, &grid);
  cucap_fb_launch_add_block(b, &block);
  cucap_fb_launch_add_stream(b, 0x7f0000001000ull);
  cucap_fb_launch_add_args(b, la);
  cucap_fb_ref l = cucap_fb_launch_end(b);
  cucap_fb_ref ra = cucap_fb_record_create_args(b, args, 6);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, seq);
  cucap_fb_record_add_tid(b, 4242);
  cucap_fb_record_add_t_enter(b, seq * 1000);
  cucap_fb_record_add_t_exit(b, seq * 1000 + 800);
  cucap_fb_record_add_call(b, 307);
  cucap_fb_record_add_result(b, 0);
  cucap_fb_record_add_args(b, ra);
  cucap_fb_record_add_body(b, CUCAP_FB_BODY_LAUNCH, l);
  return cucap_fbb_finish(b, cucap_fb_record_end(b), 1, size);
}

static void *make_header(size_t *size) {
  cucap_fbb *b = cucap_fbb_create(0);
  cucap_fb_ref prod = cucap_fbb_string(b, "bench_writer", 12);
  cucap_fb_file_header_start(b);
  cucap_fb_file_header_add_format_major(b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_producer(b, prod);
  const uint8_t *buf =
      cucap_fbb_finish(b, cucap_fb_file_header_end(b), 1, size);
  void *c = malloc(*size);
  memcpy(c, buf, *size);
  cucap_fbb_destroy(b);
  return c;
}

typedef struct result {
  double t, t_append;
  uint64_t raw, file, waits;
} result;

#define NREC 1000000u

static cucap_writer_options g_opts;
static const uint8_t *(*make_record)(cucap_fbb *, uint64_t, size_t *) =
    make_launch;
static int g_only_records;

static result records_cucap(const char *path, void *hdr, size_t hsz) {
  result r = {0};
  cucap_fbb *b = cucap_fbb_create(1024);
  cucap_writer *w = NULL;
  double t0 = now_s();
  if (cucap_writer_create(path, &g_opts, hdr, hsz, &w) != CUCAP_OK) {
    fprintf(stderr, "cannot create %s\n", path);
    exit(1);
  }
  for (uint32_t i = 0; i < NREC; i++) {
    size_t sz;
    const uint8_t *rec = make_record(b, i + 1, &sz);
    if (cucap_writer_append(w, rec, sz, NULL) != CUCAP_OK) {
      fprintf(stderr, "append failed\n");
      exit(1);
    }
  }
  r.t_append = now_s() - t0;
  if (cucap_writer_close(w) != CUCAP_OK) {
    fprintf(stderr, "close failed\n");
    exit(1);
  }
  r.t = now_s() - t0;
  cucap_writer_stats st;
  cucap_writer_get_stats(w, &st);
  r.raw = st.raw_bytes;
  r.file = st.file_bytes;
  r.waits = st.producer_waits;
  cucap_writer_destroy(w);
  cucap_fbb_destroy(b);
  return r;
}

static result records_fwrite(const char *path) {
  result r = {0};
  cucap_fbb *b = cucap_fbb_create(1024);
  double t0 = now_s();
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot create %s\n", path);
    exit(1);
  }
  for (uint32_t i = 0; i < NREC; i++) {
    size_t sz;
    const uint8_t *rec = make_record(b, i + 1, &sz);
    fwrite(rec, 1, sz, f);
    r.raw += sz;
  }
  fclose(f);
  r.t = now_s() - t0;
  cucap_fbb_destroy(b);
  return r;
}

static double build_only(void) {
  cucap_fbb *b = cucap_fbb_create(1024);
  double t0 = now_s();
  uint64_t sum = 0;
  for (uint32_t i = 0; i < NREC; i++) {
    size_t sz;
    const uint8_t *rec = make_record(b, i + 1, &sz);
    sum += sz + rec[8];
  }
  double t = now_s() - t0;
  cucap_fbb_destroy(b);
  if (sum == 1)
    printf(" ");
  return t;
}

#define BLOB_BUF (256u << 20)
#define NBLOB 4

/* float-like data: a smooth field plus noise in the low mantissa bits */
static void fill_floats(float *f, size_t n, unsigned round) {
  uint32_t x = 2463534242u + round * 7919u;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f[i] = sinf((float)i * 1e-3f + (float)round) * 100.0f +
           (float)(x & 0xffff) * 1e-4f;
  }
}

static result blobs_cucap(const char *path, void *hdr, size_t hsz,
                          float *bufs[NBLOB]) {
  result r = {0};
  cucap_writer *w = NULL;
  double t0 = now_s();
  if (cucap_writer_create(path, &g_opts, hdr, hsz, &w) != CUCAP_OK)
    exit(1);
  for (int i = 0; i < NBLOB; i++)
    if (cucap_writer_put_blob(w, bufs[i], BLOB_BUF, NULL) != CUCAP_OK)
      exit(1);
  r.t_append = now_s() - t0;
  if (cucap_writer_close(w) != CUCAP_OK)
    exit(1);
  r.t = now_s() - t0;
  cucap_writer_stats st;
  cucap_writer_get_stats(w, &st);
  r.raw = st.raw_bytes;
  r.file = st.file_bytes;
  r.waits = st.producer_waits;
  cucap_writer_destroy(w);
  return r;
}

static result blobs_fwrite(const char *path, float *bufs[NBLOB]) {
  result r = {0};
  double t0 = now_s();
  FILE *f = fopen(path, "wb");
  if (!f)
    exit(1);
  for (int i = 0; i < NBLOB; i++)
    fwrite(bufs[i], 1, BLOB_BUF, f);
  fclose(f);
  r.t = now_s() - t0;
  r.raw = (uint64_t)NBLOB * BLOB_BUF;
  return r;
}

static double zstd1_only(float *buf) {
  /* reference: zstd level 1 on 4 MiB pieces of one buffer, one thread */
  size_t piece = 4u << 20;
  size_t cap = ZSTD_compressBound(piece);
  void *out = malloc(cap);
  double t0 = now_s();
  for (size_t off = 0; off < BLOB_BUF; off += piece)
    ZSTD_compress(out, cap, (uint8_t *)buf + off, piece, 1);
  double t = now_s() - t0;
  free(out);
  return t * NBLOB; /* extrapolated to 1 GiB */
}

static const char *g_dir;
static void *g_hdr;
static size_t g_hsz;

static void run_records(const char *tag, const char *what,
                        const uint8_t *(*mk)(cucap_fbb *, uint64_t, size_t *)) {
  char p1[4096], p2[4096];
  snprintf(p1, sizeof p1, "%s/bench_writer-%d.cucap", g_dir, (int)getpid());
  snprintf(p2, sizeof p2, "%s/bench_writer-%d.raw", g_dir, (int)getpid());
  make_record = mk;
  size_t hsz = g_hsz;
  void *hdr = g_hdr;
  double tb = build_only();
  result best_c = {0}, best_f = {0};
  for (int rep = 0; rep < 3; rep++) {
    result f = records_fwrite(p2);
    unlink(p2);
    result c = records_cucap(p1, hdr, hsz);
    unlink(p1);
    if (rep == 0 || f.t < best_f.t)
      best_f = f;
    if (rep == 0 || c.t < best_c.t)
      best_c = c;
  }
  printf("(%s) %u %s, %.1f bytes each; build only: %.3f s (%.2f "
         "Mrec/s)\n",
         tag, NREC, what, (double)best_f.raw / NREC, tb, NREC / tb / 1e6);
  printf("    cucap: append loop %.3f s (%.2f Mrec/s), incl. close %.3f s "
         "(%.2f Mrec/s, %.0f MB/s raw), file %.1f MB (ratio %.1fx), %llu "
         "producer waits\n",
         best_c.t_append, NREC / best_c.t_append / 1e6, best_c.t,
         NREC / best_c.t / 1e6, best_c.raw / best_c.t / 1e6, best_c.file / 1e6,
         (double)best_c.raw / (double)best_c.file,
         (unsigned long long)best_c.waits);
  printf("    fwrite: %.3f s (%.2f Mrec/s, %.0f MB/s)\n", best_f.t,
         NREC / best_f.t / 1e6, best_f.raw / best_f.t / 1e6);
  printf("SUMMARY %s: %.2f Mrec/s %.0f MB/s (append loop %.2f Mrec/s); "
         "fwrite %.2f Mrec/s; cucap/fwrite time ratio %.2f\n",
         what, NREC / best_c.t / 1e6, best_c.raw / best_c.t / 1e6,
         NREC / best_c.t_append / 1e6, NREC / best_f.t / 1e6,
         best_c.t / best_f.t);
  fflush(stdout);

}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR");
  if (!dir || !*dir)
    dir = "/tmp";
  char p1[4096], p2[4096];
  snprintf(p1, sizeof p1, "%s/bench_writer-%d.cucap", dir, (int)getpid());
  snprintf(p2, sizeof p2, "%s/bench_writer-%d.raw", dir, (int)getpid());
  size_t hsz;
  void *hdr = make_header(&hsz);
  g_dir = dir;
  g_hdr = hdr;
  g_hsz = hsz;
  cucap_writer_options_init(&g_opts);
  if (getenv("CUCAP_BENCH_LEVEL")) /* experiments: zstd level override */
    g_opts.level = atoi(getenv("CUCAP_BENCH_LEVEL"));
  if (getenv("CUCAP_BENCH_RLEVEL")) /* experiments: record chunk level */
    g_opts.record_level = atoi(getenv("CUCAP_BENCH_RLEVEL"));
  if (getenv("CUCAP_BENCH_CHUNK")) /* experiments: record chunk size */
    g_opts.chunk_size = (size_t)atol(getenv("CUCAP_BENCH_CHUNK"));
  if (getenv("CUCAP_BENCH_QUEUE")) /* experiments: queue depth */
    g_opts.queue_depth = (size_t)atol(getenv("CUCAP_BENCH_QUEUE"));
  if (getenv("CUCAP_BENCH_ONLY_RECORDS"))
    g_only_records = 1;

  run_records("a", "launch records (Record + Launch body)", make_launch);
  run_records("c", "small records (Record, no body)", make_small);
  if (g_only_records)
    return 0;
  /* (b) blobs */
  float *bufs[NBLOB];
  for (int i = 0; i < NBLOB; i++) {
    bufs[i] = malloc(BLOB_BUF);
    if (!bufs[i]) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
    fill_floats(bufs[i], BLOB_BUF / sizeof(float), (unsigned)i);
  }
  double tz = zstd1_only(bufs[0]);
  double th0 = now_s();
  cucap_hash128_of(bufs[0], BLOB_BUF);
  double th = (now_s() - th0) * NBLOB;
  result bc = {0}, bf = {0};
  for (int rep = 0; rep < 3; rep++) {
    result f = blobs_fwrite(p2, bufs);
    unlink(p2);
    result c = blobs_cucap(p1, hdr, hsz, bufs);
    unlink(p1);
    if (rep == 0 || f.t < bf.t)
      bf = f;
    if (rep == 0 || c.t < bc.t)
      bc = c;
  }
  double gib = (double)NBLOB * BLOB_BUF;
  printf("(b) %d blobs x %u MiB float-like data\n", NBLOB, BLOB_BUF >> 20);
  printf("    cucap: put_blob %.3f s, incl. close %.3f s (%.0f MB/s), file "
         "%.1f MB (ratio %.2fx), %llu producer waits\n",
         bc.t_append, bc.t, gib / bc.t / 1e6, bc.file / 1e6,
         (double)bc.raw / (double)bc.file, (unsigned long long)bc.waits);
  printf("    reference: zstd -1 alone %.3f s (%.0f MB/s), XXH3-128 alone "
         "%.3f s, fwrite %.3f s (%.0f MB/s)\n",
         tz, gib / tz / 1e6, th, bf.t, gib / bf.t / 1e6);
  printf("SUMMARY blobs: %.0f MB/s; fwrite %.0f MB/s; cucap/fwrite time ratio "
         "%.2f; cucap/zstd-1-alone time ratio %.2f\n",
         gib / bc.t / 1e6, gib / bf.t / 1e6, bc.t / bf.t, bc.t / tz);
  for (int i = 0; i < NBLOB; i++)
    free(bufs[i]);
  free(hdr);
  return 0;
}
