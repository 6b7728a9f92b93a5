/* test_corrupt.c - damaged captures: truncation at every chunk boundary and
 * inside chunks (exact recovery), bit flips in preamble/header, chunk
 * headers, payloads and trailer (clear error or recovery, never a crash).
 * Meant to be run under ASan/UBSan too (-DCUCAP_SANITIZE=ON). */
#include <unistd.h>

#include "stream_testutil.h"

static int checks;
#define CHECK(c)                                                               \
  do {                                                                         \
    checks++;                                                                  \
    TU_CHECK(c);                                                               \
  } while (0)

typedef struct chunk_info {
  uint64_t offset, end; /* end: offset of the next chunk */
  uint32_t records;
  uint8_t kind;
} chunk_info;

static uint8_t *g_file;
static size_t g_size;
static chunk_info g_chunks[4096];
static size_t g_nchunks;  /* record/blob chunks */
static uint64_t g_index_off;
static uint64_t g_data_start;
static cucap_hash128 g_blobs[8];
static uint64_t g_blob_sizes[8];
static int g_nblobs;
static uint32_t g_total;

static void build(const char *path) {
  size_t hsz;
  void *hdr = st_make_header(&hsz);
  cucap_writer_options o;
  cucap_writer_options_init(&o);
  o.chunk_size = 8 << 10;
  o.blob_chunk_size = 8 << 10;
  cucap_writer *w = NULL;
  TU_REQUIRE(cucap_writer_create(path, &o, hdr, hsz, &w) == CUCAP_OK);
  cucap_fbb *b = cucap_fbb_create(0);
  g_total = 1500;
  for (uint32_t i = 0; i < g_total; i++) {
    size_t sz;
    const uint8_t *rec = st_make_record(b, i + 1, 9, &sz);
    TU_REQUIRE(cucap_writer_append(w, rec, sz, NULL) == CUCAP_OK);
    if (i % 300 == 150 && g_nblobs < 8) {
      size_t n = 3000 + (size_t)g_nblobs * 2000;
      uint8_t *d = malloc(n);
      TU_REQUIRE(d);
      st_fill(d, n, (uint64_t)i);
      TU_REQUIRE(cucap_writer_put_blob(w, d, n, &g_blobs[g_nblobs]) ==
                 CUCAP_OK);
      g_blob_sizes[g_nblobs++] = n;
      free(d);
    }
  }
  TU_REQUIRE(cucap_writer_close(w) == CUCAP_OK);
  cucap_writer_destroy(w);
  cucap_fbb_destroy(b);
  free(hdr);
  g_file = st_read_file(path, &g_size);
  /* chunk map from a strict, complete open */
  cucap_reader_options so = {.strict = 1};
  cucap_reader *r = NULL;
  char msg[256];
  TU_REQUIRE(cucap_reader_open(path, &so, &r, msg, sizeof msg) == CUCAP_OK);
  g_nchunks = cucap_reader_chunk_count(r);
  TU_REQUIRE(g_nchunks > 10 && g_nchunks < 4096);
  for (size_t i = 0; i < g_nchunks; i++) {
    cucap_reader_chunk c;
    TU_REQUIRE(cucap_reader_chunk_get(r, i, &c) == CUCAP_OK);
    g_chunks[i].offset = c.offset;
    g_chunks[i].end = (c.offset + 40 + c.compressed_size + 7) & ~7ull;
    g_chunks[i].records = c.records;
    g_chunks[i].kind = c.kind;
  }
  cucap_trailer t;
  memcpy(&t, g_file + g_size - 32, 32);
  g_index_off = t.index_offset;
  g_data_start = g_chunks[0].offset;
  TU_REQUIRE(g_chunks[g_nchunks - 1].end == g_index_off);
  cucap_reader_destroy(r);
}

static uint64_t records_before(size_t k) {
  uint64_t n = 0;
  for (size_t i = 0; i < k; i++)
    if (g_chunks[i].kind == CUCAP_FB_CHUNKKIND_RECORDS)
      n += g_chunks[i].records;
  return n;
}

/* Reads everything a damaged capture offers; never crashes. Returns the
 * number of records iterated. */
static uint64_t read_all(cucap_reader *r, cucap_status *last) {
  uint64_t n = st_count_records(r, last);
  if (*last != CUCAP_END && *last != CUCAP_OK)
    CHECK(cucap_reader_last_error(r)[0] != 0);
  size_t nb = cucap_reader_blob_count(r);
  for (size_t i = 0; i < nb; i++) {
    cucap_hash128 h;
    uint64_t sz;
    if (cucap_reader_blob_get(r, i, &h, &sz) != CUCAP_OK)
      continue;
    const void *m;
    cucap_reader_blob_map(r, h, &m, &sz);
  }
  return n;
}

/* Cut the file at `cut`; expect exactly `k` good chunks. */
static void check_cut(uint64_t cut, size_t k) {
  cucap_reader *r = NULL;
  char msg[256];
  cucap_status st = cucap_reader_open_memory(g_file, cut, NULL, &r, msg, sizeof msg);
  CHECK(st == CUCAP_OK);
  if (!r) {
    fprintf(stderr, "cut %llu: %s\n", (unsigned long long)cut, msg);
    return;
  }
  cucap_reader_recovery rc;
  cucap_reader_recovery_get(r, &rc);
  int ok = !rc.complete && rc.chunks == k && rc.records == records_before(k) &&
           strstr(rc.problem, "recovered") != NULL;
  CHECK(ok);
  if (!ok)
    fprintf(stderr, "cut %llu: chunks %llu (want %zu) records %llu: %s\n",
            (unsigned long long)cut, (unsigned long long)rc.chunks, k,
            (unsigned long long)rc.records, rc.problem);
  cucap_status last;
  CHECK(read_all(r, &last) == records_before(k) && last == CUCAP_END);
  /* the blobs fully inside the good part are readable, none other listed */
  for (size_t i = 0; i < cucap_reader_blob_count(r); i++) {
    cucap_hash128 h;
    uint64_t sz;
    const void *m;
    cucap_reader_blob_get(r, i, &h, &sz);
    CHECK(cucap_reader_blob_map(r, h, &m, &sz) == CUCAP_OK);
  }
  cucap_reader_destroy(r);
  /* strict mode refuses every cut file */
  cucap_reader_options so = {.strict = 1};
  CHECK(cucap_reader_open_memory(g_file, cut, &so, &r, msg, sizeof msg) !=
        CUCAP_OK);
  CHECK(r == NULL && msg[0]);
}

static void test_truncation(void) {
  int printed = 0;
  for (size_t k = 0; k <= g_nchunks; k++) {
    uint64_t start = k < g_nchunks ? g_chunks[k].offset : g_index_off;
    check_cut(start, k); /* exactly at the boundary */
    uint64_t len = k < g_nchunks ? g_chunks[k].end - start : g_size - 32 - start;
    uint64_t inside[] = {1, 20, 39, 40, 41, len / 2, len - 9};
    for (size_t j = 0; j < sizeof inside / sizeof inside[0]; j++)
      if (inside[j] < len && start + inside[j] < g_size)
        check_cut(start + inside[j], k);
    if (!printed && k == 5) {
      cucap_reader *r = NULL;
      if (cucap_reader_open_memory(g_file, start + 17, NULL, &r, NULL, 0) ==
          CUCAP_OK) {
        cucap_reader_recovery rc;
        cucap_reader_recovery_get(r, &rc);
        printf("example: %s\n", rc.problem);
        CHECK(strstr(rc.problem, "file ends inside chunk 5 at offset") != NULL);
        cucap_reader_destroy(r);
      }
      printed = 1;
    }
  }
  /* inside the index chunk and the trailer: every record chunk survives */
  for (uint64_t cut = g_index_off + 1; cut < g_size; cut += 7)
    check_cut(cut, g_nchunks);
  /* inside the preamble/header: refused */
  for (uint64_t cut = 0; cut < g_data_start; cut += 3) {
    cucap_reader *r = NULL;
    char msg[256];
    cucap_status st =
        cucap_reader_open_memory(g_file, cut, NULL, &r, msg, sizeof msg);
    if (cut > g_data_start - 8 && st == CUCAP_OK) {
      cucap_reader_destroy(r); /* header complete, only padding missing */
      continue;
    }
    CHECK(st == CUCAP_ERR_BAD_MAGIC || st == CUCAP_ERR_TRUNCATED);
    CHECK(r == NULL);
  }
  /* one cut through the mmap path */
  char *p = tu_tmp_path("corrupt-cut.cucap");
  st_write_file(p, g_file, g_chunks[3].offset + 100);
  cucap_reader *r = NULL;
  char msg[256];
  CHECK(cucap_reader_open(p, NULL, &r, msg, sizeof msg) == CUCAP_OK);
  if (r) {
    cucap_reader_recovery rc;
    cucap_reader_recovery_get(r, &rc);
    CHECK(rc.chunks == 3);
    cucap_reader_destroy(r);
  }
  unlink(p);
  free(p);
}

/* Opens a copy with one bit flipped; reads everything in both modes.
 * Returns the non-strict open status; *k_out the recovered chunk count. */
static cucap_status flip(uint64_t pos, int bit, uint64_t *records,
                         uint64_t *chunks, cucap_status *iter) {
  g_file[pos] ^= (uint8_t)(1u << bit);
  cucap_reader *r = NULL;
  char msg[256] = "";
  cucap_status st = cucap_reader_open_memory(g_file, g_size, NULL, &r, msg, sizeof msg);
  *records = *chunks = 0;
  *iter = CUCAP_END;
  if (st != CUCAP_OK) {
    CHECK(msg[0] != 0);
  } else {
    cucap_reader_recovery rc;
    cucap_reader_recovery_get(r, &rc);
    *chunks = rc.chunks;
    *records = read_all(r, iter);
    cucap_reader_destroy(r);
  }
  cucap_reader_options so = {.strict = 1};
  cucap_status ss = cucap_reader_open_memory(g_file, g_size, &so, &r, msg, sizeof msg);
  if (ss == CUCAP_OK) {
    cucap_status it;
    read_all(r, &it);
    cucap_reader_destroy(r);
  }
  g_file[pos] ^= (uint8_t)(1u << bit);
  return st;
}

static void test_bit_flips(void) {
  uint64_t recs, chunks;
  cucap_status it, st;
  /* preamble + FileHeader: every bit */
  for (uint64_t pos = 0; pos < g_data_start; pos++)
    for (int bit = 0; bit < 8; bit++) {
      st = flip(pos, bit, &recs, &chunks, &it);
      if (pos < 8)
        CHECK(st == CUCAP_ERR_BAD_MAGIC);
      else if (pos < 10)
        CHECK(st == CUCAP_ERR_VERSION);
      else if (pos < 16 || (pos >= 24 && pos < 32)) /* minor, flags, reserved */
        CHECK(st == CUCAP_OK && recs == g_total);
      else if (pos < 32 + (g_data_start - 32))
        CHECK(st != CUCAP_OK || recs == g_total); /* header padding unchecked */
    }
  /* chunk headers of several chunks: every bit; recovery stops right there */
  size_t picks[] = {0, 1, 2, g_nchunks / 2, g_nchunks - 1};
  for (size_t pi = 0; pi < sizeof picks / sizeof picks[0]; pi++) {
    size_t k = picks[pi];
    for (uint64_t b = 0; b < 40; b++)
      for (int bit = 0; bit < 8; bit++) {
        st = flip(g_chunks[k].offset + b, bit, &recs, &chunks, &it);
        CHECK(st == CUCAP_OK && chunks == k && recs == records_before(k) &&
              it == CUCAP_END);
      }
  }
  /* payloads: a spread of positions in every chunk */
  for (size_t k = 0; k < g_nchunks; k++) {
    uint64_t a = g_chunks[k].offset + 40, e = g_chunks[k].end;
    for (uint64_t pos = a; pos < e; pos += (e - a) / 5 + 1) {
      st = flip(pos, (int)(pos % 8), &recs, &chunks, &it);
      CHECK(st == CUCAP_OK);
      /* padding bytes are not covered by any check; everything else is */
      if (recs != g_total)
        CHECK(recs == records_before(k) &&
              (g_chunks[k].kind != CUCAP_FB_CHUNKKIND_RECORDS ||
               it == CUCAP_ERR_CORRUPT));
    }
  }
  /* index chunk and trailer: every bit of the trailer, a spread of the index;
   * the chunks themselves are intact, so a scan recovers everything */
  for (uint64_t pos = g_index_off; pos < g_size;
       pos += pos >= g_size - 32 || pos < g_index_off + 40 ? 1 : 5)
    for (int bit = 0; bit < 8; bit++) {
      st = flip(pos, bit, &recs, &chunks, &it);
      CHECK(st == CUCAP_OK && recs == g_total && chunks == g_nchunks);
    }
}

/* Random multi-byte garbage: only "no crash" and sane statuses. */
static void test_garbage(void) {
  uint8_t *copy = malloc(g_size);
  TU_REQUIRE(copy);
  for (int round = 0; round < 300; round++) {
    memcpy(copy, g_file, g_size);
    uint64_t x = (uint64_t)round * 2654435761u + 17;
    int nflips = 1 + round % 20;
    for (int f = 0; f < nflips; f++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      copy[x % g_size] = (uint8_t)(x >> 32);
    }
    cucap_reader *r = NULL;
    char msg[256];
    size_t len = round % 3 == 0 ? (size_t)(x % g_size) : g_size;
    if (cucap_reader_open_memory(copy, len, NULL, &r, msg, sizeof msg) ==
        CUCAP_OK) {
      cucap_status it;
      read_all(r, &it);
      CHECK(it == CUCAP_END || it == CUCAP_ERR_CORRUPT);
      cucap_reader_destroy(r);
    }
  }
  free(copy);
}

int main(void) {
  char *path = tu_tmp_path("corrupt.cucap");
  build(path);
  printf("capture: %zu bytes, %zu chunks, %d blobs, %u records\n", g_size,
         g_nchunks, g_nblobs, g_total);
  test_truncation();
  test_bit_flips();
  test_garbage();
  unlink(path);
  free(path);
  free(g_file);
  printf("%d passed, %d failed\n", checks - tu_failures, tu_failures);
  return tu_finish("test_corrupt", checks);
}
