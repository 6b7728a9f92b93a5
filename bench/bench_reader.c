/* bench_reader.c - capture-load speed of the stream reader.
 *
 * usage: bench_reader CAPTURE [--passes N] [--threads N]
 *        bench_reader --make FILE --mib N [--seed S]
 *
 * Reading: opens CAPTURE with reader/cucap_reader.h (index load), iterates
 * every record, then reads every blob of the blob table into one reusable
 * buffer (cucap_reader_blob_read). Each pass reopens the file; the best pass
 * (shortest total) is reported, on the page cache as `cucap replay` would
 * see a capture recorded moments before. Figures, one "key: value" a line
 * (bench/gpu_bench.sh greps "raw MB/s:"):
 *   open ms      cucap_reader_open (preamble, header, index load)
 *   records/s    records / time of the record iteration
 *   records/s after rewind   the same for a second iteration (rewind; not
 *                counted in the total)
 *   raw MB/s     (uncompressed bytes of record chunks + blob bytes) / total
 *   file MB/s    file size / total        total = open + records + blobs
 * MB = 10^6 bytes.
 *
 * --threads N: cucap_reader_options.decode_threads (read-ahead workers);
 * default min(4, online CPUs - 1), at least 0; printed as "decode threads:".
 *
 * --make writes a payload-heavy synthetic capture (the test generator's blobs
 * are small) so the benchmark runs anywhere: N MiB of float-like blob data in
 * 4 MiB blobs (distinct contents, no dedup; upper mantissa bits random, so
 * zstd compresses it a little, like real tensors), each announced by a
 * Memcpy HtoD record and followed by 256 Launch records. Uses the capture
 * writer and the generated builder.
 *
 * Exit: 0 ok, 1 error (message on stderr), 2 usage. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cupti_driver_cbid.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cucap_writer.h"

#define CB(name) CUPTI_DRIVER_TRACE_CBID_##name

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
  fputs("usage: bench_reader CAPTURE [--passes N] [--threads N]\n"
        "       bench_reader --make FILE --mib N [--seed S]\n",
        f);
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;
  if (!s || !*s || *s == '-')
    return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end)
    return -1;
  *out = v;
  return 0;
}

/* ------------------------------------------------------------ --make */

static uint64_t xs(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* Finishes `root` as a size-prefixed Record and appends it. */
static cucap_status append_record(cucap_writer *w, cucap_fbb *b,
                                  cucap_fb_ref root) {
  size_t size = 0;
  const uint8_t *buf = cucap_fbb_finish(b, root, 1, &size);
  if (!buf)
    return CUCAP_ERR_NOMEM;
  cucap_status s = cucap_writer_append(w, buf, size, NULL);
  cucap_fbb_reset(b);
  return s;
}

static cucap_fb_ref record_around(cucap_fbb *b, uint64_t seq, uint32_t call,
                                  uint8_t body_type, cucap_fb_ref body,
                                  const uint64_t *args, size_t nargs) {
  cucap_fb_ref av = cucap_fbb_vector(b, args, nargs, 8, 8);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, seq);
  cucap_fb_record_add_tid(b, 4242);
  cucap_fb_record_add_t_enter(b, seq * 1000);
  cucap_fb_record_add_t_exit(b, seq * 1000 + 700);
  cucap_fb_record_add_call(b, call);
  cucap_fb_record_add_result(b, 0);
  cucap_fb_record_add_args(b, av);
  cucap_fb_record_add_body(b, body_type, body);
  return cucap_fb_record_end(b);
}

static int make_capture(const char *path, uint64_t mib, uint64_t seed) {
  const size_t blob_size = 4u << 20;
  uint64_t nblobs = (mib + 3) / 4;
  if (nblobs == 0)
    nblobs = 1;
  float *data = malloc(blob_size);
  cucap_fbb *b = cucap_fbb_create(4096);
  cucap_writer *w = NULL;
  int rc = 1;
  cucap_status s = CUCAP_OK;
  const char *what = "";
  if (!data || !b) {
    fprintf(stderr, "bench_reader: out of memory\n");
    goto out;
  }
  { /* header: what a reader needs (format version) + producer */
    cucap_fb_ref prod = cucap_fbb_string(b, "bench_reader --make", 19);
    cucap_fb_file_header_start(b);
    cucap_fb_file_header_add_format_major(b, CUCAP_FORMAT_MAJOR);
    cucap_fb_file_header_add_format_minor(b, CUCAP_FORMAT_MINOR);
    cucap_fb_file_header_add_producer(b, prod);
    size_t hsz = 0;
    const uint8_t *hdr =
        cucap_fbb_finish(b, cucap_fb_file_header_end(b), 1, &hsz);
    if (!hdr) {
      fprintf(stderr, "bench_reader: header: out of memory\n");
      goto out;
    }
    s = cucap_writer_create(path, NULL, hdr, hsz, &w);
    cucap_fbb_reset(b);
    if (s != CUCAP_OK) {
      what = "create";
      goto fail;
    }
  }
  uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1, seq = 0;
  const uint64_t dev = 0x7f0000000000ull, host = 0x7ffd00000000ull;
  for (uint64_t i = 0; i < nblobs; i++) {
    /* 1.0 .. 2.0 with 15 random mantissa bits: float-looking, a bit
     * compressible. Distinct per blob (rng keeps running). */
    for (size_t k = 0; k < blob_size / sizeof(float); k += 4) {
      uint64_t r = xs(&rng);
      for (int j = 0; j < 4; j++)
        data[k + (size_t)j] =
            1.0f + (float)((r >> (16 * j)) & 0x7fff) * (1.0f / 32768.0f);
    }
    cucap_hash128 h;
    s = cucap_writer_put_blob(w, data, blob_size, &h);
    if (s != CUCAP_OK) {
      what = "put_blob";
      goto fail;
    }
    cucap_fb_hash128 fh = {h.lo, h.hi};
    cucap_fb_memcpy_start(b);
    cucap_fb_memcpy_add_kind(b, CUCAP_FB_MEMCPYKIND_HTOD);
    cucap_fb_memcpy_add_dst(b, dev + i * blob_size);
    cucap_fb_memcpy_add_src(b, host);
    cucap_fb_memcpy_add_size(b, blob_size);
    cucap_fb_memcpy_add_payload(b, &fh);
    cucap_fb_memcpy_add_has_payload(b, 1);
    cucap_fb_ref m = cucap_fb_memcpy_end(b);
    uint64_t margs[3] = {dev + i * blob_size, host, blob_size};
    s = append_record(w, b,
                      record_around(b, ++seq, CB(cuMemcpyHtoD_v2),
                                    CUCAP_FB_BODY_MEMCPY, m,
                                    margs, 3));
    if (s != CUCAP_OK) {
      what = "append";
      goto fail;
    }
    for (int l = 0; l < 256; l++) {
      uint8_t argblk[24];
      uint64_t p = dev + i * blob_size, n = blob_size / sizeof(float);
      memcpy(argblk, &p, 8);
      memcpy(argblk + 8, &p, 8);
      memcpy(argblk + 16, &n, 8);
      cucap_fb_ref la = cucap_fb_launch_create_args(b, argblk, sizeof argblk);
      cucap_fb_dim3 grid = {(uint32_t)(n / 256), 1, 1}, block = {256, 1, 1};
      cucap_fb_launch_start(b);
      cucap_fb_launch_add_function(b, 0x5555000000f00dull + (uint64_t)(l & 7));
      cucap_fb_launch_add_grid(b, &grid);
      cucap_fb_launch_add_block(b, &block);
      cucap_fb_launch_add_stream(b, 0);
      cucap_fb_launch_add_args(b, la);
      cucap_fb_ref lr = cucap_fb_launch_end(b);
      uint64_t largs[6] = {0x5555000000f00dull, grid.x, 1, 256, 0, 0};
      s = append_record(w, b,
                        record_around(b, ++seq, CB(cuLaunchKernel),
                                      CUCAP_FB_BODY_LAUNCH, lr,
                                      largs, 6));
      if (s != CUCAP_OK) {
        what = "append";
        goto fail;
      }
    }
  }
  s = cucap_writer_close(w);
  if (s != CUCAP_OK) {
    what = "close";
    goto fail;
  }
  cucap_writer_stats st;
  cucap_writer_get_stats(w, &st);
  printf("made %s: %" PRIu64 " records, %" PRIu64 " blobs, %" PRIu64
         " raw bytes, %" PRIu64 " file bytes\n",
         path, st.records, st.blobs, st.raw_bytes, st.file_bytes);
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "bench_reader: %s: %s: %s\n", path, what,
          cucap_status_str(s));
out:
  cucap_writer_destroy(w);
  cucap_fbb_destroy(b);
  free(data);
  return rc;
}

/* ------------------------------------------------------------ reading */

typedef struct pass_result {
  double t_open, t_records, t_blobs;
  double t_rewound; /* second record iteration after rewind (not in total) */
  uint64_t records, record_bytes, record_raw, blobs, blob_bytes, file_size;
  int complete;
} pass_result;

/* One pass: open, iterate, read blobs. *buf, *cap: the reusable blob buffer
 * (owned by the caller, grown here). Returns 0 or 1 (message printed). */
static int read_pass(const char *path, pass_result *pr, void **buf,
                     uint64_t *cap, int threads) {
  memset(pr, 0, sizeof *pr);
  char msg[256] = "";
  cucap_reader *r = NULL;
  double t0 = now_s();
  cucap_reader_options ro = {.strict = 0, .decode_threads = threads};
  cucap_status s = cucap_reader_open(path, &ro, &r, msg, sizeof msg);
  pr->t_open = now_s() - t0;
  if (s != CUCAP_OK) {
    fprintf(stderr, "bench_reader: %s: %s\n", path,
            *msg ? msg : cucap_status_str(s));
    return 1;
  }
  int rc = 1;
  t0 = now_s();
  for (;;) {
    const void *rec, *rb;
    size_t sz;
    s = cucap_reader_next(r, &rec, &rb, &sz);
    if (s == CUCAP_END)
      break;
    if (s != CUCAP_OK) {
      fprintf(stderr, "bench_reader: %s: record %" PRIu64 ": %s: %s\n", path,
              pr->records, cucap_status_str(s), cucap_reader_last_error(r));
      goto out;
    }
    pr->records++;
    pr->record_bytes += sz;
  }
  pr->t_records = now_s() - t0;
  t0 = now_s();
  size_t nb = cucap_reader_blob_count(r);
  for (size_t i = 0; i < nb; i++) {
    cucap_hash128 h;
    uint64_t size = 0;
    s = cucap_reader_blob_get(r, i, &h, &size);
    if (s != CUCAP_OK) {
      fprintf(stderr, "bench_reader: %s: blob %zu: %s\n", path, i,
              cucap_status_str(s));
      goto out;
    }
    if (size > *cap) {
      void *nbuf = realloc(*buf, size);
      if (!nbuf) {
        fprintf(stderr, "bench_reader: blob of %" PRIu64 " bytes: out of memory\n",
                size);
        goto out;
      }
      *buf = nbuf;
      *cap = size;
    }
    s = cucap_reader_blob_read(r, h, *buf, *cap);
    if (s != CUCAP_OK) {
      fprintf(stderr, "bench_reader: %s: blob %zu: %s: %s\n", path, i,
              cucap_status_str(s), cucap_reader_last_error(r));
      goto out;
    }
    pr->blobs++;
    pr->blob_bytes += size;
  }
  pr->t_blobs = now_s() - t0;
  /* Second iteration, as `cucap replay` does after its first pass: the
   * reader need not verify records it verified already. */
  t0 = now_s();
  cucap_reader_rewind(r);
  uint64_t again = 0;
  while ((s = cucap_reader_next(r, NULL, NULL, NULL)) == CUCAP_OK)
    again++;
  pr->t_rewound = now_s() - t0;
  if (s != CUCAP_END || again != pr->records) {
    fprintf(stderr, "bench_reader: %s: second pass after rewind: %s (%" PRIu64
            " of %" PRIu64 " records): %s\n",
            path, cucap_status_str(s), again, pr->records,
            cucap_reader_last_error(r));
    goto out;
  }
  /* Raw bytes of record chunks, from the chunk table (what the reader
   * decompressed for the iteration above). */
  size_t nc = cucap_reader_chunk_count(r);
  for (size_t i = 0; i < nc; i++) {
    cucap_reader_chunk c;
    if (cucap_reader_chunk_get(r, i, &c) == CUCAP_OK &&
        c.kind == CUCAP_FB_CHUNKKIND_RECORDS)
      pr->record_raw += c.raw_size;
  }
  cucap_reader_recovery rec;
  cucap_reader_recovery_get(r, &rec);
  pr->complete = rec.complete;
  struct stat sb;
  pr->file_size = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : rec.file_size;
  rc = 0;
out:
  cucap_reader_destroy(r);
  return rc;
}

static double per_s(double n, double t) { return t > 0 ? n / t : 0.0; }

static int bench(const char *path, uint64_t passes, int threads) {
  void *buf = NULL;
  uint64_t cap = 0;
  pass_result best = {0};
  double best_t = -1;
  for (uint64_t p = 0; p < passes; p++) {
    pass_result pr;
    if (read_pass(path, &pr, &buf, &cap, threads) != 0) {
      free(buf);
      return 1;
    }
    double t = pr.t_open + pr.t_records + pr.t_blobs;
    printf("pass %" PRIu64 ": %.3f s (open %.3f, records %.3f, blobs %.3f)\n",
           p + 1, t, pr.t_open, pr.t_records, pr.t_blobs);
    if (best_t < 0 || t < best_t) {
      best_t = t;
      best = pr;
    }
  }
  free(buf);
  uint64_t raw = best.record_raw + best.blob_bytes;
  printf("capture: %s (%s)\n", path, best.complete ? "complete" : "recovered");
  printf("file bytes: %" PRIu64 "\n", best.file_size);
  printf("records: %" PRIu64 " (%" PRIu64 " bytes in %" PRIu64
         " raw bytes of record chunks)\n",
         best.records, best.record_bytes, best.record_raw);
  printf("blobs: %" PRIu64 " (%" PRIu64 " bytes)\n", best.blobs,
         best.blob_bytes);
  printf("decode threads: %d\n", threads);
  printf("best of %" PRIu64 " pass(es): %.6f s\n", passes, best_t);
  printf("open ms: %.3f\n", best.t_open * 1e3);
  printf("records/s: %.0f\n", per_s((double)best.records, best.t_records));
  printf("records/s after rewind: %.0f\n",
         per_s((double)best.records, best.t_rewound));
  printf("blob MB/s: %.1f\n", per_s((double)best.blob_bytes / 1e6, best.t_blobs));
  printf("raw MB/s: %.1f\n", per_s((double)raw / 1e6, best_t));
  printf("file MB/s: %.1f\n", per_s((double)best.file_size / 1e6, best_t));
  return 0;
}

int main(int argc, char **argv) {
  const char *make = NULL, *path = NULL;
  uint64_t mib = 0, seed = 1, passes = 3;
  /* Read-ahead workers: leave one core to the reading thread. */
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = ncpu > 1 ? (int)(ncpu - 1 < 4 ? ncpu - 1 : 4) : 0;
  int have_mib = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int last = i + 1 >= argc;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--make") && !last) {
      make = argv[++i];
    } else if (!strcmp(a, "--mib") && !last) {
      if (parse_u64(argv[++i], &mib) || mib == 0 || mib > (1u << 20)) {
        fprintf(stderr, "bench_reader: --mib %s: expected 1..1048576\n", argv[i]);
        return 2;
      }
      have_mib = 1;
    } else if (!strcmp(a, "--seed") && !last) {
      if (parse_u64(argv[++i], &seed)) {
        fprintf(stderr, "bench_reader: --seed %s: expected a number\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--passes") && !last) {
      if (parse_u64(argv[++i], &passes) || passes == 0 || passes > 1000) {
        fprintf(stderr, "bench_reader: --passes %s: expected 1..1000\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--threads") && !last) {
      uint64_t t;
      if (parse_u64(argv[++i], &t) || t > 64) {
        fprintf(stderr, "bench_reader: --threads %s: expected 0..64\n", argv[i]);
        return 2;
      }
      threads = (int)t;
    } else if (a[0] == '-' || path) {
      usage(stderr);
      return 2;
    } else {
      path = a;
    }
  }
  if (make) {
    if (path || !have_mib) {
      usage(stderr);
      return 2;
    }
    return make_capture(make, mib, seed);
  }
  if (!path) {
    usage(stderr);
    return 2;
  }
  return bench(path, passes, threads);
}
