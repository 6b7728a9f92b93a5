/* reader.c - the capture stream reader (see cucap_reader.h, docs/design.md).
 *
 * Owner: stream reader. The file is mmap'ed read-only (or copied, for
 * cucap_reader_open_memory); every size read from it is untrusted and checked
 * against the file size and the limits of cucap_format.h before use.
 *
 * Chunk discovery: the trailer's index is used when it is valid and agrees
 * with the chunk headers it points at (contiguous, same kinds/sizes/counts).
 * Otherwise (killed app, damage) the chunks are scanned from the start and the
 * scan stops at the first incomplete or corrupt chunk; in that mode every
 * payload checksum is checked and blob chunks are decompressed at open to
 * rebuild the blob table. In index mode payload checks happen when a chunk
 * is first decompressed (and at open in strict mode).
 *
 * A file that shrinks while mapped (another process truncating it) would
 * fault on access; captures are only ever appended to, so this is accepted. */
#include "cucap_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

/* Buffer-less streaming API (ZSTD_decompressContinue): zstd is linked
 * statically (CMakeLists.txt: libzstd.a), so the experimental section's ABI
 * is the one this file was compiled against. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_schema.h"

/* Read-ahead (see the section of that name); cap on decode_threads. */
#define RA_MAX_THREADS 64
struct ra_state;
static void ra_destroy(struct ra_state *ra);

typedef struct rchunk {
  uint64_t offset, csize, raw;
  uint32_t records;
  uint8_t kind;
  uint8_t payload_ok; /* payload checksum already verified */
  /* Every record of the chunk passed FlatBuffers verification once (and the
   * count matched its header): decoding the same checked payload again
   * yields the same bytes, so later passes (rewind, blob re-reads) only
   * bounds-check the size prefixes. */
  uint8_t records_ok;
} rchunk;

typedef struct rblob {
  cucap_hash128 hash;
  uint64_t size;
  uint32_t chunk;
  uint32_t pieces;
  uint64_t seen; /* scan mode: contiguous bytes found */
  void *mapped;  /* blob_map cache, owned */
} rblob;

struct cucap_reader {
  const uint8_t *data;
  size_t size;
  int is_mmap;
  int owns_copy; /* data is a malloc'ed copy (open_memory) */
  int strict;
  unsigned major, minor;
  const uint8_t *hdr_buf;
  size_t hdr_size;
  uint64_t data_start;

  rchunk *chunks;
  size_t nchunks, cchunks;
  rblob *blobs;
  size_t nblobs, cblobs;
  uint32_t *bmap; /* blob index + 1 */
  size_t bmap_cap;

  cucap_reader_recovery rec;
  ZSTD_DCtx *dctx;

  /* record iteration */
  size_t it_chunk; /* index of the loaded chunk, or SIZE_MAX */
  size_t it_next;  /* next chunk to look at */
  uint8_t *it_buf;
  size_t it_cap, it_len, it_pos;
  uint32_t it_seen;
  cucap_status it_err;

  uint8_t *px; /* direct_piece: first block(s) of a piece, PX_CAP bytes */

  /* one decompressed blob chunk */
  size_t bc_chunk;
  uint8_t *bc_buf;
  size_t bc_cap, bc_len;

  int decode_threads;  /* cucap_reader_options.decode_threads (>= 0) */
  struct ra_state *ra; /* read-ahead state, created on first blob read */

  char msg[512];
};

static void set_msg(cucap_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_msg(cucap_reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
}

static inline uint64_t align8u(uint64_t n) { return (n + 7) & ~(uint64_t)7; }
static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* ---------------------------------------------------------------- chunks */

enum { CH_OK = 0, CH_TRUNC = 1, CH_BAD = 2 };

/* Reads and validates the chunk header at off. why receives the reason. */
static int chunk_header_at(const cucap_reader *r, uint64_t off,
                           cucap_chunk_header *h, char *why, size_t whysz) {
  if (off > r->size || r->size - off < sizeof *h) {
    snprintf(why, whysz, "file ends inside the chunk header");
    return CH_TRUNC;
  }
  memcpy(h, r->data + off, sizeof *h);
  if (h->magic != CUCAP_CHUNK_MAGIC) {
    snprintf(why, whysz, "bad chunk magic 0x%08x", h->magic);
    return CH_BAD;
  }
  if (cucap_check32(h, 36) != h->header_check) {
    snprintf(why, whysz, "chunk header checksum mismatch");
    return CH_BAD;
  }
  if (h->codec != CUCAP_CODEC_ZSTD) {
    snprintf(why, whysz, "unknown codec %u", h->codec);
    return CH_BAD;
  }
  if (h->kind > CUCAP_FB_CHUNKKIND_INDEX) {
    snprintf(why, whysz, "unknown chunk kind %u", h->kind);
    return CH_BAD;
  }
  if (h->raw_size > CUCAP_MAX_CHUNK_RAW || h->compressed_size == 0 ||
      h->compressed_size > ZSTD_compressBound((size_t)h->raw_size) ||
      h->records > h->raw_size / 8) {
    snprintf(why, whysz,
             "implausible sizes (compressed %llu, raw %llu, records %u)",
             (unsigned long long)h->compressed_size,
             (unsigned long long)h->raw_size, h->records);
    return CH_BAD;
  }
  if (r->size - off - sizeof *h < h->compressed_size) {
    snprintf(why, whysz, "file ends inside the chunk payload");
    return CH_TRUNC;
  }
  return CH_OK;
}

static int payload_ok(const cucap_reader *r, const rchunk *c) {
  const uint8_t *p = r->data + c->offset + sizeof(cucap_chunk_header);
  uint32_t want;
  memcpy(&want, r->data + c->offset + 32, 4);
  return cucap_check32(p, (size_t)c->csize) == want;
}

static ZSTD_DCtx *g_spare_dctx; /* see get_dctx; __atomic access */

/* The decompression context, created on first use. zstd's own content
 * checksum (XXH64 of the decoded bytes, ~7% of load time) is not checked:
 * every payload is checked against the chunk header's payload_check (XXH3
 * of the compressed bytes) before its first decode, which already proves
 * the frame is the one the writer produced. */
static ZSTD_DCtx *get_dctx(cucap_reader *r) {
  if (!r->dctx) {
    /* A context a destroyed reader left behind first: ZSTD_createDCtx
     * probes the CPU (cpuid traps in a VM) and allocates ~100 KiB, which
     * dominated opening small captures (tools opening many, fuzzing). */
    r->dctx = __atomic_exchange_n(&g_spare_dctx, NULL, __ATOMIC_ACQ_REL);
    if (!r->dctx)
      r->dctx = ZSTD_createDCtx();
    if (r->dctx)
      ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_forceIgnoreChecksum,
                             ZSTD_d_ignoreChecksum);
  }
  return r->dctx;
}

/* Keeps one reset context for the next reader (frees the one it replaces). */
static void put_dctx(ZSTD_DCtx *d) {
  if (!d)
    return;
  if (ZSTD_isError(ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters))) {
    ZSTD_freeDCtx(d);
    return;
  }
  ZSTD_freeDCtx(__atomic_exchange_n(&g_spare_dctx, d, __ATOMIC_ACQ_REL));
}

/* Decompresses chunk ci (at off, csize compressed, raw decoded bytes) of
 * data into *buf (grown as needed) with dctx; checks the payload first
 * unless *checked, and sets *checked once it passed. Touches nothing
 * shared, so read-ahead workers run it too (data is immutable while the
 * reader lives). msg receives the error. */
static cucap_status decode_chunk(const uint8_t *data, size_t ci, uint64_t off,
                                 uint64_t csize, uint64_t raw, int *checked,
                                 ZSTD_DCtx *dctx, uint8_t **buf, size_t *cap,
                                 size_t *len, char *msg, size_t msgsz) {
  const uint8_t *p = data + off + sizeof(cucap_chunk_header);
  *len = 0;
  if (!*checked) {
    uint32_t want;
    memcpy(&want, data + off + 32, 4);
    if (cucap_check32(p, (size_t)csize) != want) {
      snprintf(msg, msgsz, "chunk %zu at offset %llu: payload checksum mismatch",
               ci, (unsigned long long)off);
      return CUCAP_ERR_CORRUPT;
    }
    *checked = 1;
  }
  unsigned long long fcs = ZSTD_getFrameContentSize(p, (size_t)csize);
  if (fcs != raw) {
    snprintf(msg, msgsz,
             "chunk %zu at offset %llu: zstd frame size does not match the "
             "chunk header",
             ci, (unsigned long long)off);
    return CUCAP_ERR_CORRUPT;
  }
  size_t need = raw ? (size_t)raw : 1;
  if (need > *cap) {
    uint8_t *nb = malloc(need);
    if (!nb) {
      snprintf(msg, msgsz, "chunk %zu: out of memory (%zu bytes)", ci, need);
      return CUCAP_ERR_NOMEM;
    }
    free(*buf);
    *buf = nb;
    *cap = need;
  }
  if (!dctx) {
    snprintf(msg, msgsz, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  size_t got = ZSTD_decompressDCtx(dctx, *buf, *cap, p, (size_t)csize);
  if (ZSTD_isError(got) || got != raw) {
    snprintf(msg, msgsz,
             "chunk %zu at offset %llu: zstd decompression failed (%s)", ci,
             (unsigned long long)off,
             ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size mismatch");
    return CUCAP_ERR_CORRUPT;
  }
  *len = got;
  return CUCAP_OK;
}

/* Decompresses chunk ci into *buf (grown as needed). Sets r->msg on error. */
static cucap_status load_chunk(cucap_reader *r, size_t ci, uint8_t **buf,
                               size_t *cap, size_t *len) {
  rchunk *c = &r->chunks[ci];
  int checked = c->payload_ok;
  cucap_status st =
      decode_chunk(r->data, ci, c->offset, c->csize, c->raw, &checked,
                   get_dctx(r), buf, cap, len, r->msg, sizeof r->msg);
  c->payload_ok = (uint8_t)checked;
  return st;
}

/* Parses the size-prefixed record at buf[*pos]; verifies it. */
static cucap_status next_record(cucap_reader *r, const uint8_t *buf,
                                size_t len, size_t *pos, size_t ci,
                                uint32_t idx, const uint8_t **rec,
                                size_t *rec_size) {
  size_t p = *pos;
  if (len - p < 8) {
    set_msg(r, "chunk %zu: %zu stray bytes after record %u", ci, len - p, idx);
    return CUCAP_ERR_CORRUPT;
  }
  uint32_t n = rd32(buf + p);
  if (n < 4 || n > CUCAP_MAX_RECORD_SIZE || n > len - p - 4) {
    set_msg(r, "chunk %zu: record %u has an impossible size %u", ci, idx, n);
    return CUCAP_ERR_CORRUPT;
  }
  cucap_status vs = r->chunks[ci].records_ok
                        ? CUCAP_OK
                        : cucap_fb_record_verify(buf + p, (size_t)n + 4, 1);
  if (vs != CUCAP_OK) {
    set_msg(r, "chunk %zu: record %u failed FlatBuffers verification (%s)", ci,
            idx, cucap_status_str(vs));
    return CUCAP_ERR_CORRUPT;
  }
  *rec = buf + p;
  *rec_size = (size_t)n + 4;
  uint64_t np = align8u((uint64_t)p + 4 + n);
  *pos = np > len ? len : (size_t)np;
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- blobs */

static size_t bmap_slot(size_t cap, cucap_hash128 h) {
  return (size_t)(h.lo ^ (h.hi >> 7)) & (cap - 1);
}

static rblob *blob_find(const cucap_reader *r, cucap_hash128 h) {
  if (!r->bmap_cap)
    return NULL;
  for (size_t i = bmap_slot(r->bmap_cap, h);; i = (i + 1) & (r->bmap_cap - 1)) {
    uint32_t v = r->bmap[i];
    if (!v)
      return NULL;
    if (cucap_hash128_eq(r->blobs[v - 1].hash, h))
      return &r->blobs[v - 1];
  }
}

static int blob_rehash(cucap_reader *r) {
  size_t cap = 16;
  while (cap < r->nblobs * 2 + 2)
    cap *= 2;
  uint32_t *m = calloc(cap, sizeof *m);
  if (!m)
    return -1;
  for (size_t i = 0; i < r->nblobs; i++) {
    size_t j = bmap_slot(cap, r->blobs[i].hash);
    while (m[j])
      j = (j + 1) & (cap - 1);
    m[j] = (uint32_t)i + 1;
  }
  free(r->bmap);
  r->bmap = m;
  r->bmap_cap = cap;
  return 0;
}

static rblob *blob_add(cucap_reader *r) {
  if (r->nblobs == r->cblobs) {
    size_t nc = r->cblobs ? r->cblobs * 2 : 64;
    rblob *nb = realloc(r->blobs, nc * sizeof *nb);
    if (!nb)
      return NULL;
    r->blobs = nb;
    r->cblobs = nc;
  }
  rblob *b = &r->blobs[r->nblobs++];
  memset(b, 0, sizeof *b);
  return b;
}

static int chunk_add(cucap_reader *r, uint64_t off, const cucap_chunk_header *h,
                     int checked) {
  if (r->nchunks == r->cchunks) {
    size_t nc = r->cchunks ? r->cchunks * 2 : 64;
    rchunk *n = realloc(r->chunks, nc * sizeof *n);
    if (!n)
      return -1;
    r->chunks = n;
    r->cchunks = nc;
  }
  rchunk *c = &r->chunks[r->nchunks++];
  c->offset = off;
  c->csize = h->compressed_size;
  c->raw = h->raw_size;
  c->records = h->records;
  c->kind = h->kind;
  c->payload_ok = (uint8_t)checked;
  c->records_ok = 0;
  return 0;
}

static cucap_status blob_chunk_load(cucap_reader *r, size_t ci) {
  if (r->bc_chunk == ci)
    return CUCAP_OK;
  r->bc_chunk = SIZE_MAX;
  CUCAP_FORWARD(load_chunk(r, ci, &r->bc_buf, &r->bc_cap, &r->bc_len));
  r->bc_chunk = ci;
  return CUCAP_OK;
}

/* Visits the BlobPiece records of blob chunk ci (verified). fn returns
 * nonzero to stop. Non-BlobPiece records in a blob chunk are corruption. */
typedef int (*piece_fn)(cucap_reader *r, size_t ci,
                        const cucap_fb_blob_piece *bp, void *user);
static cucap_status walk_pieces(cucap_reader *r, size_t ci, piece_fn fn,
                                void *user) {
  CUCAP_FORWARD(blob_chunk_load(r, ci));
  size_t pos = 0;
  uint32_t idx = 0;
  while (pos < r->bc_len) {
    const uint8_t *rec;
    size_t rs;
    CUCAP_FORWARD(next_record(r, r->bc_buf, r->bc_len, &pos, ci, idx, &rec, &rs));
    const cucap_fb_record *t = cucap_fb_record_root_sp(rec);
    const cucap_fb_blob_piece *bp = cucap_fb_record_body_as_blob_piece(t);
    if (!bp || !cucap_fb_blob_piece_hash(bp)) {
      set_msg(r, "chunk %zu: record %u of a blob chunk is not a BlobPiece", ci,
              idx);
      return CUCAP_ERR_CORRUPT;
    }
    idx++;
    if (fn(r, ci, bp, user))
      break;
  }
  if (pos >= r->bc_len && idx != r->chunks[ci].records) {
    set_msg(r, "chunk %zu: holds %u records, header says %u", ci, idx,
            r->chunks[ci].records);
    return CUCAP_ERR_CORRUPT;
  }
  if (pos >= r->bc_len)
    r->chunks[ci].records_ok = 1;
  return CUCAP_OK;
}

static cucap_hash128 piece_hash(const cucap_fb_blob_piece *bp) {
  const cucap_fb_hash128 *fh = cucap_fb_blob_piece_hash(bp);
  cucap_hash128 h = {fh->lo, fh->hi};
  return h;
}

/* Scan mode: learn blobs from their pieces. */
static int scan_piece(cucap_reader *r, size_t ci, const cucap_fb_blob_piece *bp,
                      void *user) {
  int *oom = user;
  cucap_hash128 h = piece_hash(bp);
  uint64_t total = cucap_fb_blob_piece_total_size(bp);
  uint64_t off = cucap_fb_blob_piece_offset(bp);
  size_t n = 0;
  cucap_fb_blob_piece_data(bp, &n);
  rblob *b = blob_find(r, h);
  if (!b) {
    if (off != 0)
      return 0; /* orphan piece (its first piece was lost): ignore */
    b = blob_add(r);
    if (!b) {
      *oom = 1;
      return 1;
    }
    b->hash = h;
    b->size = total;
    b->chunk = (uint32_t)ci;
    b->pieces = total ? (uint32_t)((total + CUCAP_BLOB_PIECE_SIZE - 1) /
                                   CUCAP_BLOB_PIECE_SIZE)
                      : 1;
    if (r->nblobs * 2 + 2 > r->bmap_cap && blob_rehash(r) != 0) {
      *oom = 1;
      return 1;
    }
    if (r->nblobs * 2 + 2 <= r->bmap_cap) {
      size_t j = bmap_slot(r->bmap_cap, h);
      while (r->bmap[j] && r->bmap[j] != r->nblobs)
        j = (j + 1) & (r->bmap_cap - 1);
      r->bmap[j] = (uint32_t)r->nblobs;
    }
  }
  if (b->size == total && off == b->seen && n <= total - b->seen)
    b->seen += n;
  return 0;
}

/* ---------------------------------------------------------------- open */

static void recovery_totals(cucap_reader *r) {
  cucap_reader_recovery *rc = &r->rec;
  rc->chunks = r->nchunks;
  rc->record_chunks = rc->blob_chunks = rc->records = 0;
  rc->raw_bytes = rc->compressed_bytes = 0;
  for (size_t i = 0; i < r->nchunks; i++) {
    const rchunk *c = &r->chunks[i];
    if (c->kind == CUCAP_FB_CHUNKKIND_RECORDS) {
      rc->record_chunks++;
      rc->records += c->records;
    } else {
      rc->blob_chunks++;
    }
    rc->raw_bytes += c->raw;
    rc->compressed_bytes += c->csize;
  }
  rc->blobs = r->nblobs;
}

/* Tries the trailer + index. Returns CUCAP_OK when used; otherwise msg says
 * why and the caller scans (or fails in strict mode). */
static cucap_status try_index(cucap_reader *r) {
  const cucap_trailer *tp;
  cucap_trailer t;
  if (r->size < r->data_start + sizeof t) {
    set_msg(r, "no trailer (file ends at %zu)", r->size);
    return CUCAP_ERR_TRUNCATED;
  }
  tp = (const cucap_trailer *)(r->data + r->size - sizeof t);
  memcpy(&t, tp, sizeof t);
  if (t.magic != CUCAP_TRAILER_MAGIC) {
    set_msg(r, "no trailer (app killed or file cut short?)");
    return CUCAP_ERR_TRUNCATED;
  }
  if (cucap_check32(&t, 24) != t.check || t.file_size != r->size ||
      t.index_offset < r->data_start || t.index_offset > r->size ||
      t.index_size != r->size - sizeof t - t.index_offset) {
    set_msg(r, "trailer is damaged or does not match the file size");
    return CUCAP_ERR_CORRUPT;
  }
  cucap_chunk_header h;
  char why[160];
  if (chunk_header_at(r, t.index_offset, &h, why, sizeof why) != CH_OK ||
      h.kind != CUCAP_FB_CHUNKKIND_INDEX ||
      align8u(sizeof h + h.compressed_size) != t.index_size) {
    set_msg(r, "index chunk at offset %llu is damaged",
            (unsigned long long)t.index_offset);
    return CUCAP_ERR_CORRUPT;
  }
  /* Decompress the index through the chunk machinery (temporary entry). */
  if (chunk_add(r, t.index_offset, &h, 0) != 0)
    return CUCAP_ERR_NOMEM;
  uint8_t *ib = NULL;
  size_t icap = 0, ilen = 0;
  cucap_status st = load_chunk(r, r->nchunks - 1, &ib, &icap, &ilen);
  r->nchunks = 0;
  if (st != CUCAP_OK) {
    free(ib);
    if (st == CUCAP_ERR_NOMEM)
      return st;
    return CUCAP_ERR_CORRUPT; /* msg set */
  }
  if (ilen < 8 || cucap_fb_chunk_index_verify(ib, ilen, 1) != CUCAP_OK) {
    free(ib);
    set_msg(r, "index failed FlatBuffers verification");
    return CUCAP_ERR_CORRUPT;
  }
  const cucap_fb_chunk_index *ix = cucap_fb__root_sp(ib);
  size_t n = cucap_fb_chunk_index_chunks_len(ix);
  uint64_t expect = r->data_start, nrec = 0;
  st = CUCAP_OK;
  for (size_t i = 0; i < n && st == CUCAP_OK; i++) {
    const cucap_fb_chunk_entry *e = cucap_fb_chunk_index_chunks_at(ix, i);
    cucap_chunk_header ch;
    if (!e || cucap_fb_chunk_entry_offset(e) != expect ||
        chunk_header_at(r, expect, &ch, why, sizeof why) != CH_OK ||
        ch.kind != cucap_fb_chunk_entry_kind(e) ||
        ch.kind == CUCAP_FB_CHUNKKIND_INDEX ||
        ch.compressed_size != cucap_fb_chunk_entry_compressed_size(e) ||
        ch.raw_size != cucap_fb_chunk_entry_raw_size(e) ||
        ch.records != cucap_fb_chunk_entry_records(e) ||
        align8u(sizeof ch + ch.compressed_size) > t.index_offset - expect) {
      set_msg(r, "index entry %zu does not match the chunk at offset %llu", i,
              (unsigned long long)expect);
      st = CUCAP_ERR_CORRUPT;
      break;
    }
    if (chunk_add(r, expect, &ch, 0) != 0)
      st = CUCAP_ERR_NOMEM;
    if (ch.kind == CUCAP_FB_CHUNKKIND_RECORDS)
      nrec += ch.records;
    expect += align8u(sizeof ch + ch.compressed_size);
  }
  if (st == CUCAP_OK && expect != t.index_offset) {
    set_msg(r, "index does not cover the file (gap at offset %llu)",
            (unsigned long long)expect);
    st = CUCAP_ERR_CORRUPT;
  }
  if (st == CUCAP_OK && nrec != cucap_fb_chunk_index_records(ix)) {
    set_msg(r, "index record count %llu disagrees with its chunks (%llu)",
            (unsigned long long)cucap_fb_chunk_index_records(ix),
            (unsigned long long)nrec);
    st = CUCAP_ERR_CORRUPT;
  }
  size_t nb = cucap_fb_chunk_index_blobs_len(ix);
  /* A blob cannot be larger than all blob chunks together (keeps a forged
   * index from making blob_map allocate absurd sizes). */
  uint64_t blob_raw = 0;
  for (size_t i = 0; i < r->nchunks; i++)
    if (r->chunks[i].kind == CUCAP_FB_CHUNKKIND_BLOBS)
      blob_raw += r->chunks[i].raw;
  for (size_t i = 0; i < nb && st == CUCAP_OK; i++) {
    const cucap_fb_blob_entry *e = cucap_fb_chunk_index_blobs_at(ix, i);
    const cucap_fb_hash128 *fh = e ? cucap_fb_blob_entry_hash(e) : NULL;
    uint64_t sz = e ? cucap_fb_blob_entry_size(e) : 0;
    uint32_t ci = e ? cucap_fb_blob_entry_chunk(e) : 0;
    uint64_t want = sz ? (sz + CUCAP_BLOB_PIECE_SIZE - 1) / CUCAP_BLOB_PIECE_SIZE
                       : 1;
    if (!fh || ci >= r->nchunks || sz > blob_raw ||
        r->chunks[ci].kind != CUCAP_FB_CHUNKKIND_BLOBS ||
        cucap_fb_blob_entry_pieces(e) != want) {
      set_msg(r, "index blob entry %zu is inconsistent", i);
      st = CUCAP_ERR_CORRUPT;
      break;
    }
    rblob *b = blob_add(r);
    if (!b) {
      st = CUCAP_ERR_NOMEM;
      break;
    }
    b->hash.lo = fh->lo;
    b->hash.hi = fh->hi;
    b->size = sz;
    b->chunk = ci;
    b->pieces = (uint32_t)want;
    b->seen = sz;
  }
  if (st == CUCAP_OK && blob_rehash(r) != 0)
    st = CUCAP_ERR_NOMEM;
  if (st == CUCAP_OK) {
    r->rec.complete = cucap_fb_chunk_index_complete(ix) ? 1 : 0;
    r->rec.end_mono_ns = cucap_fb_chunk_index_end_mono_ns(ix);
    r->rec.used_index = 1;
    r->rec.good_bytes = r->size;
  }
  free(ib);
  if (st != CUCAP_OK) {
    r->nchunks = 0;
    r->nblobs = 0;
    free(r->bmap);
    r->bmap = NULL;
    r->bmap_cap = 0;
  }
  return st;
}

/* Scans chunks from the start; stops at the first bad one (recorded in
 * r->rec.problem). Returns an error only for OOM or, in strict mode, damage. */
static cucap_status scan(cucap_reader *r, const char *index_problem) {
  uint64_t off = r->data_start;
  char why[160];
  char problem[256] = "";
  int saw_index = 0;
  size_t idx = 0;
  while (off < r->size) {
    cucap_chunk_header h;
    if (saw_index) {
      /* What follows a valid index chunk is the (damaged) trailer. */
      break;
    }
    int res = chunk_header_at(r, off, &h, why, sizeof why);
    if (res == CH_TRUNC) {
      snprintf(problem, sizeof problem,
               "file ends inside chunk %zu at offset %llu (app killed?)", idx,
               (unsigned long long)off);
      break;
    }
    if (res == CH_BAD) {
      snprintf(problem, sizeof problem, "chunk %zu at offset %llu is corrupt (%s)",
               idx, (unsigned long long)off, why);
      break;
    }
    rchunk tmp = {off, h.compressed_size, h.raw_size, h.records, h.kind, 0, 0};
    if (!payload_ok(r, &tmp)) {
      snprintf(problem, sizeof problem,
               "chunk %zu at offset %llu is corrupt (payload checksum mismatch)",
               idx, (unsigned long long)off);
      break;
    }
    if (h.kind == CUCAP_FB_CHUNKKIND_INDEX) {
      saw_index = 1;
    } else if (chunk_add(r, off, &h, 1) != 0) {
      return CUCAP_ERR_NOMEM;
    }
    idx++;
    uint64_t adv = align8u(sizeof h + h.compressed_size);
    off = adv > r->size - off ? r->size : off + adv;
  }
  /* Rebuild the blob table; a blob chunk that does not decode ends the
   * recovered part. */
  for (size_t ci = 0; ci < r->nchunks; ci++) {
    if (r->chunks[ci].kind != CUCAP_FB_CHUNKKIND_BLOBS)
      continue;
    int oom = 0;
    cucap_status st = walk_pieces(r, ci, scan_piece, &oom);
    if (oom || st == CUCAP_ERR_NOMEM)
      return CUCAP_ERR_NOMEM;
    if (st != CUCAP_OK) {
      snprintf(problem, sizeof problem, "%.200s", r->msg);
      r->nchunks = ci;
      /* Drop blobs that started in or after the bad chunk. */
      size_t k = 0;
      for (size_t i = 0; i < r->nblobs; i++)
        if (r->blobs[i].chunk < ci)
          r->blobs[k++] = r->blobs[i];
      r->nblobs = k;
      saw_index = 0;
      break;
    }
  }
  /* Keep only blobs whose bytes were all found. */
  size_t k = 0;
  for (size_t i = 0; i < r->nblobs; i++)
    if (r->blobs[i].seen == r->blobs[i].size)
      r->blobs[k++] = r->blobs[i];
  r->nblobs = k;
  if (blob_rehash(r) != 0)
    return CUCAP_ERR_NOMEM;
  r->bc_chunk = SIZE_MAX;

  r->rec.used_index = 0;
  r->rec.complete = 0;
  r->rec.good_bytes = r->nchunks
                          ? r->chunks[r->nchunks - 1].offset +
                                align8u(sizeof(cucap_chunk_header) +
                                        r->chunks[r->nchunks - 1].csize)
                          : r->data_start;
  if (r->rec.good_bytes > r->size)
    r->rec.good_bytes = r->size;
  recovery_totals(r);
  if (!problem[0]) {
    if (saw_index)
      snprintf(problem, sizeof problem, "%.200s", index_problem);
    else
      snprintf(problem, sizeof problem, "no index (app killed?): %.200s",
               index_problem);
  }
  snprintf(r->rec.problem, sizeof r->rec.problem,
           "%.150s; recovered %llu chunks, %llu records", problem,
           (unsigned long long)r->rec.chunks,
           (unsigned long long)r->rec.records);
  return CUCAP_OK;
}

static cucap_status open_common(cucap_reader *r, const cucap_reader_options *o) {
  r->strict = o ? o->strict : 0;
  r->decode_threads = o && o->decode_threads > 0 ? o->decode_threads : 0;
  if (r->decode_threads > RA_MAX_THREADS)
    r->decode_threads = RA_MAX_THREADS;
  r->bc_chunk = SIZE_MAX;
  r->it_chunk = SIZE_MAX;
  r->rec.file_size = r->size;
  cucap_preamble pre;
  if (r->size < CUCAP_MAGIC_LEN ||
      memcmp(r->data, CUCAP_MAGIC, CUCAP_MAGIC_LEN) != 0) {
    set_msg(r, "not a cucap capture (bad magic)");
    return CUCAP_ERR_BAD_MAGIC;
  }
  if (r->size < sizeof pre) {
    set_msg(r, "capture is truncated inside the preamble (%zu bytes)", r->size);
    return CUCAP_ERR_TRUNCATED;
  }
  memcpy(&pre, r->data, sizeof pre);
  r->major = pre.major;
  r->minor = pre.minor;
  if (pre.major != CUCAP_FORMAT_MAJOR) {
    set_msg(r,
            "capture format version %u.%u is not supported by this cucap "
            "(reads format %u.x, writes %u.%u)",
            pre.major, pre.minor, CUCAP_FORMAT_MAJOR, CUCAP_FORMAT_MAJOR,
            CUCAP_FORMAT_MINOR);
    return CUCAP_ERR_VERSION;
  }
  if (pre.header_size < 8 || pre.header_size > CUCAP_MAX_HEADER_SIZE) {
    set_msg(r, "file header size %u is impossible", pre.header_size);
    return CUCAP_ERR_CORRUPT;
  }
  if (r->size - sizeof pre < pre.header_size) {
    set_msg(r, "capture is truncated inside the file header");
    return CUCAP_ERR_TRUNCATED;
  }
  r->hdr_buf = r->data + sizeof pre;
  r->hdr_size = pre.header_size;
  if (cucap_check32(r->hdr_buf, r->hdr_size) != pre.header_check) {
    set_msg(r, "file header checksum mismatch");
    return CUCAP_ERR_CORRUPT;
  }
  if (cucap_fb_file_header_verify(r->hdr_buf, r->hdr_size, 1) != CUCAP_OK) {
    set_msg(r, "file header failed FlatBuffers verification");
    return CUCAP_ERR_CORRUPT;
  }
  r->data_start = align8u(sizeof pre + (uint64_t)pre.header_size);

  cucap_status st = try_index(r);
  if (st == CUCAP_ERR_NOMEM)
    return st;
  if (st == CUCAP_OK && r->strict) {
    for (size_t i = 0; i < r->nchunks; i++) {
      if (!payload_ok(r, &r->chunks[i])) {
        set_msg(r, "chunk %zu at offset %llu: payload checksum mismatch", i,
                (unsigned long long)r->chunks[i].offset);
        return CUCAP_ERR_CORRUPT;
      }
      r->chunks[i].payload_ok = 1;
    }
  }
  if (st == CUCAP_OK) {
    recovery_totals(r);
    if (!r->rec.complete)
      snprintf(r->rec.problem, sizeof r->rec.problem,
               "index marks the capture incomplete");
    return CUCAP_OK;
  }
  if (r->strict)
    return st; /* msg says why */
  char iprob[256];
  snprintf(iprob, sizeof iprob, "%.200s", r->msg);
  CUCAP_FORWARD(scan(r, iprob));
  CUCAP_INFO("reader: recovering: %s", r->rec.problem);
  return CUCAP_OK;
}

static void put_msg(char *msg, size_t msg_size, const char *text) {
  if (msg && msg_size)
    snprintf(msg, msg_size, "%s", text);
}

static cucap_status finish_open(cucap_reader *r, const cucap_reader_options *o,
                                cucap_reader **out, char *msg,
                                size_t msg_size) {
  cucap_status st = open_common(r, o);
  if (st != CUCAP_OK) {
    if (!r->msg[0])
      set_msg(r, "%s", cucap_status_str(st));
    put_msg(msg, msg_size, r->msg);
    cucap_reader_destroy(r);
    return st;
  }
  r->msg[0] = 0;
  *out = r;
  return CUCAP_OK;
}

cucap_status cucap_reader_open(const char *path,
                               const cucap_reader_options *opts,
                               cucap_reader **out, char *msg, size_t msg_size) {
  char buf[512];
  if (!out || !path) {
    put_msg(msg, msg_size, "invalid argument");
    return CUCAP_ERR_INVALID_ARG;
  }
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(buf, sizeof buf, "cannot open %s: %s", path, strerror(errno));
    put_msg(msg, msg_size, buf);
    return CUCAP_ERR_IO;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    snprintf(buf, sizeof buf, "%s is not a regular file", path);
    close(fd);
    put_msg(msg, msg_size, buf);
    return CUCAP_ERR_IO;
  }
  cucap_reader *r = calloc(1, sizeof *r);
  if (!r) {
    close(fd);
    put_msg(msg, msg_size, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  r->size = (size_t)sb.st_size;
  if (r->size > 0) {
    void *m = mmap(NULL, r->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      snprintf(buf, sizeof buf, "cannot map %s: %s", path, strerror(errno));
      close(fd);
      free(r);
      put_msg(msg, msg_size, buf);
      return CUCAP_ERR_IO;
    }
    r->data = m;
    r->is_mmap = 1;
  } else {
    r->data = (const uint8_t *)"";
  }
  close(fd);
  return finish_open(r, opts, out, msg, msg_size);
}

cucap_status cucap_reader_open_memory(const void *data, size_t size,
                                      const cucap_reader_options *opts,
                                      cucap_reader **out, char *msg,
                                      size_t msg_size) {
  if (!out || (!data && size)) {
    put_msg(msg, msg_size, "invalid argument");
    return CUCAP_ERR_INVALID_ARG;
  }
  *out = NULL;
  cucap_reader *r = calloc(1, sizeof *r);
  uint8_t *copy = malloc(size ? size : 1);
  if (!r || !copy) {
    free(r);
    free(copy);
    put_msg(msg, msg_size, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  if (size)
    memcpy(copy, data, size);
  r->data = copy;
  r->owns_copy = 1;
  r->size = size;
  return finish_open(r, opts, out, msg, msg_size);
}

void cucap_reader_destroy(cucap_reader *r) {
  if (!r)
    return;
  ra_destroy(r->ra); /* first: its workers read r->data */
  if (r->is_mmap)
    munmap((void *)r->data, r->size);
  else if (r->owns_copy)
    free((void *)r->data);
  for (size_t i = 0; i < r->nblobs; i++)
    free(r->blobs[i].mapped);
  free(r->blobs);
  free(r->bmap);
  free(r->chunks);
  free(r->it_buf);
  free(r->bc_buf);
  free(r->px);
  put_dctx(r->dctx);
  free(r);
}

const char *cucap_reader_last_error(const cucap_reader *r) {
  return r ? r->msg : "";
}

void cucap_reader_version(const cucap_reader *r, unsigned *major,
                          unsigned *minor) {
  if (major)
    *major = r ? r->major : 0;
  if (minor)
    *minor = r ? r->minor : 0;
}

const void *cucap_reader_header(const cucap_reader *r) {
  return r ? cucap_fb__root_sp(r->hdr_buf) : NULL;
}

const void *cucap_reader_header_buffer(const cucap_reader *r, size_t *size) {
  if (size)
    *size = r ? r->hdr_size : 0;
  return r ? r->hdr_buf : NULL;
}

/* ---------------------------------------------------------------- records */

cucap_status cucap_reader_next(cucap_reader *r, const void **record,
                               const void **buf, size_t *size) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  if (r->it_err != CUCAP_OK)
    return r->it_err;
  for (;;) {
    if (r->it_chunk != SIZE_MAX && r->it_pos < r->it_len) {
      const uint8_t *rec;
      size_t rs;
      cucap_status st = next_record(r, r->it_buf, r->it_len, &r->it_pos,
                                    r->it_chunk, r->it_seen, &rec, &rs);
      if (st == CUCAP_OK && ++r->it_seen > r->chunks[r->it_chunk].records) {
        set_msg(r, "chunk %zu holds more records than its header says (%u)",
                r->it_chunk, r->chunks[r->it_chunk].records);
        st = CUCAP_ERR_CORRUPT;
      }
      if (st != CUCAP_OK) {
        r->it_err = st;
        return st;
      }
      if (record)
        *record = cucap_fb_record_root_sp(rec);
      if (buf)
        *buf = rec;
      if (size)
        *size = rs;
      return CUCAP_OK;
    }
    if (r->it_chunk != SIZE_MAX &&
        r->it_seen != r->chunks[r->it_chunk].records) {
      set_msg(r, "chunk %zu holds %u records, its header says %u", r->it_chunk,
              r->it_seen, r->chunks[r->it_chunk].records);
      r->it_err = CUCAP_ERR_CORRUPT;
      return r->it_err;
    }
    if (r->it_chunk != SIZE_MAX)
      r->chunks[r->it_chunk].records_ok = 1; /* all verified, count right */
    while (r->it_next < r->nchunks &&
           r->chunks[r->it_next].kind != CUCAP_FB_CHUNKKIND_RECORDS)
      r->it_next++;
    if (r->it_next >= r->nchunks) {
      r->it_chunk = SIZE_MAX;
      return CUCAP_END;
    }
    size_t ci = r->it_next++;
    r->it_chunk = SIZE_MAX;
    cucap_status st = load_chunk(r, ci, &r->it_buf, &r->it_cap, &r->it_len);
    if (st != CUCAP_OK) {
      r->it_err = st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_CORRUPT;
      return r->it_err;
    }
    r->it_chunk = ci;
    r->it_pos = 0;
    r->it_seen = 0;
  }
}

cucap_status cucap_reader_rewind(cucap_reader *r) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  r->it_chunk = SIZE_MAX;
  r->it_next = 0;
  r->it_pos = r->it_len = 0;
  r->it_seen = 0;
  r->it_err = CUCAP_OK;
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- blob API */

typedef struct copy_ctx {
  const rblob *b;
  uint8_t *dst;
  uint64_t got;
  int found_here;
  int bad;
} copy_ctx;

static int copy_piece(cucap_reader *r, size_t ci, const cucap_fb_blob_piece *bp,
                      void *user) {
  copy_ctx *c = user;
  if (!cucap_hash128_eq(piece_hash(bp), c->b->hash))
    return 0;
  size_t n = 0;
  const uint8_t *d = cucap_fb_blob_piece_data(bp, &n);
  if (cucap_fb_blob_piece_total_size(bp) != c->b->size ||
      cucap_fb_blob_piece_offset(bp) != c->got || n > c->b->size - c->got) {
    set_msg(r, "chunk %zu: blob piece at offset %llu does not fit its blob", ci,
            (unsigned long long)cucap_fb_blob_piece_offset(bp));
    c->bad = 1;
    return 1;
  }
  if (n)
    memcpy(c->dst + c->got, d, n);
  c->got += n;
  c->found_here = 1;
  return c->got == c->b->size;
}

/* The writer's fixed BlobPiece record layout (capture/writer_internal.h,
 * checked against the generated verifier by tests/unit/test_writer.c):
 * bytes [4,72) and [104,108) never vary; [0,4) is the size prefix, [72,104)
 * hash/total_size/offset, [108,112) the data length. A piece header that
 * matches it byte for byte is a valid Record whose data are the n bytes at
 * +112, so those can be decompressed straight into the caller's buffer. */
#define PIECE_HDR 112u
static const uint8_t piece_tpl[PIECE_HDR] = {
    108, 0, 0, 0, 36, 0, 0, 0, 67, 67, 65, 80, 26, 0, 12, 0,
    0,   0, 0, 0, 0,  0, 0, 0, 0,  0,  0,  0,  0,  0, 0,  0,
    0,   0, 8, 0, 4,  0, 0, 0, 28, 0,  0,  0,  24, 0, 0,  0,
    21,  0, 0, 0, 12, 0, 40, 0, 4, 0,  20, 0,  28, 0, 36, 0,
    0,   0, 0, 0, 16, 0, 0, 0, 0,  0,  0,  0,  0,  0, 0,  0,
    0,   0, 0, 0, 0,  0, 0, 0, 0,  0,  0,  0,  0,  0, 0,  0,
    0,   0, 0, 0, 0,  0, 0, 0, 4,  0,  0,  0,  0,  0, 0,  0};

/* Fast path of blob_copy for a blob chunk that holds exactly one piece and
 * no padding (the common case: 4 MiB pieces in 4 MiB blob chunks): decodes
 * the frame block by block with ZSTD_decompressContinue, the first block(s)
 * (which hold the 112-byte piece header) into r->px, every later block
 * straight into the caller's buffer, so the 4 MiB are written once instead
 * of being decompressed into the chunk buffer and copied. The one break in
 * contiguity (px -> dst) is the one zstd supports: px stays alive as its
 * external history. Offsets reaching outside the history are rejected by
 * zstd as corruption. As everywhere (get_dctx), the payload was checked
 * against the chunk header before decoding.
 * Returns 1 done (c updated), 0/-2 not applicable (nothing written to the
 * caller's buffer beyond c->got's piece: use the general path), -1 error. */
#define PX_CAP (ZSTD_BLOCKSIZE_MAX + PIECE_HDR + 64)
static int direct_piece(cucap_reader *r, size_t ci, copy_ctx *c) {
  rchunk *ch = &r->chunks[ci];
  if (ch->records != 1 || ch->raw < PIECE_HDR + 8 || r->bc_chunk == ci ||
      ch->raw % 8 != 0)
    return 0;
  uint64_t n = ch->raw - PIECE_HDR; /* the data, if the layout holds */
  if (c->got > c->b->size || n > c->b->size - c->got)
    return 0;
  const uint8_t *p = r->data + ch->offset + sizeof(cucap_chunk_header);
  if (!ch->payload_ok) {
    if (!payload_ok(r, ch)) {
      set_msg(r, "chunk %zu at offset %llu: payload checksum mismatch", ci,
              (unsigned long long)ch->offset);
      c->bad = 1; /* corruption, not out of memory */
      return -1;
    }
    ch->payload_ok = 1;
  }
  if (ZSTD_getFrameContentSize(p, (size_t)ch->csize) != ch->raw) {
    set_msg(r, "chunk %zu at offset %llu: zstd frame size does not match the "
               "chunk header",
            ci, (unsigned long long)ch->offset);
    c->bad = 1;
    return -1;
  }
  if (!get_dctx(r)) {
    set_msg(r, "out of memory");
    return -1;
  }
  if (!r->px && !(r->px = malloc(PX_CAP))) {
    set_msg(r, "out of memory");
    return -1;
  }
  if (ZSTD_isError(ZSTD_decompressBegin(r->dctx)))
    return 0;
  uint8_t *out = c->dst + c->got; /* piece data goes to out[0..n) */
  size_t ipos = 0, hdr_fill = 0; /* bytes decoded into px so far */
  uint64_t dpos = 0;             /* bytes of data placed in out */
  int in_px = 1;
  for (;;) {
    size_t need = ZSTD_nextSrcSizeToDecompress(r->dctx);
    if (need == 0)
      break;
    if (need > (size_t)ch->csize - ipos) {
      set_msg(r, "chunk %zu: zstd frame is truncated", ci);
      goto bad;
    }
    uint8_t *op = in_px ? r->px + hdr_fill : out + dpos;
    size_t ocap = in_px ? PX_CAP - hdr_fill : (size_t)(n - dpos);
    size_t k = ZSTD_decompressContinue(r->dctx, op, ocap, p + ipos, need);
    if (ZSTD_isError(k)) {
      set_msg(r, "chunk %zu: zstd decompression failed (%s)", ci,
              ZSTD_getErrorName(k));
      goto bad;
    }
    ipos += need;
    if (!in_px) {
      dpos += k;
      continue;
    }
    hdr_fill += k;
    if (hdr_fill < PIECE_HDR)
      continue;
    /* The piece header is complete: check it before using the caller's
     * buffer. */
    const uint8_t *hdr = r->px;
    uint64_t tot, off;
    cucap_hash128 h;
    memcpy(&h.lo, hdr + 72, 8);
    memcpy(&h.hi, hdr + 80, 8);
    memcpy(&tot, hdr + 88, 8);
    memcpy(&off, hdr + 96, 8);
    if (memcmp(hdr + 4, piece_tpl + 4, 72 - 4) != 0 ||
        memcmp(hdr + 104, piece_tpl + 104, 4) != 0 ||
        (uint64_t)rd32(hdr) + 4 != ch->raw || rd32(hdr + 108) != n ||
        !cucap_hash128_eq(h, c->b->hash))
      return -2; /* another layout or another blob: general path */
    if (tot != c->b->size || off != c->got) {
      set_msg(r, "chunk %zu: blob piece at offset %llu does not fit its blob",
              ci, (unsigned long long)off);
      c->bad = 1;
      return -1;
    }
    dpos = hdr_fill - PIECE_HDR;
    if (dpos > n)
      goto bad_size;
    memcpy(out, r->px + PIECE_HDR, (size_t)dpos);
    in_px = 0;
  }
  if (in_px || dpos != n || ipos != (size_t)ch->csize) {
  bad_size:
    set_msg(r, "chunk %zu: zstd frame does not hold the announced piece", ci);
    goto bad;
  }
  c->got += n;
  c->found_here = 1;
  return 1;
bad:
  c->bad = 1;
  return -1;
}

/* ---------------------------------------------------------- read-ahead
 *
 * With decode_threads = N > 0 the reader owns N workers (started on the
 * first blob read, joined by destroy) and 2*N slots. Each blob_copy visit
 * of blob chunk ci first takes ci's slot (while a worker is decoding it,
 * the calling thread decodes queued later chunks itself; a slot still
 * queued is cancelled and ci decoded synchronously; a worker's out-of-memory
 * is treated as a miss), then queues the next 2*N blob chunks after ci in
 * file order and drops slots outside that window. A worker decodes with
 * decode_chunk, the very function of the synchronous path (payload XXH3
 * check unless already known good, frame size, zstd), into its slot's
 * buffer; the error and message are kept in the slot and handed out only
 * when the caller reaches that chunk, so errors surface exactly where they
 * do without read-ahead. A taken buffer is swapped with bc_buf, so the
 * reader holds at most 2*N + 1 decoded chunks (each <= its raw size, at
 * most CUCAP_MAX_CHUNK_RAW; 4 MiB for typical blob chunks).
 *
 * Locking: ra->mu guards every slot field and ra->stop. Workers read only
 * r->data (immutable while the reader lives) and their slot's snapshot of
 * the chunk's offset/sizes/checked flag; everything else stays with the
 * calling thread. */
enum { RA_EMPTY = 0, RA_QUEUED, RA_BUSY, RA_DONE };

typedef struct ra_slot {
  int state;
  size_t ci;
  uint64_t off, csize, raw;
  int checked;      /* in: payload known good; out: it passed */
  cucap_status st;  /* RA_DONE: result of decode_chunk */
  uint8_t *buf;     /* owned; swapped with bc_buf when taken */
  size_t cap, len;
  char msg[256];
} ra_slot;

typedef struct ra_state {
  pthread_mutex_t mu;
  pthread_cond_t work; /* a slot was queued, or stop */
  pthread_cond_t done; /* a slot became RA_DONE */
  int stop;
  const uint8_t *data;
  ra_slot *slots;
  size_t nslots;
  pthread_t *threads;
  size_t nthreads; /* started */
  size_t *next_blob; /* [ci]: index of the first blob chunk after ci, or
                        nchunks; owned, set by ra_get */
} ra_state;

/* Decodes queued slot s with dctx. Called and returns with ra->mu held;
 * drops it while decoding (only the decoding thread touches a BUSY slot). */
static void ra_run(ra_state *ra, ra_slot *s, ZSTD_DCtx *dctx) {
  s->state = RA_BUSY;
  uint8_t *buf = s->buf;
  size_t cap = s->cap, len = 0;
  int checked = s->checked;
  size_t ci = s->ci;
  uint64_t off = s->off, csize = s->csize, raw = s->raw;
  char msg[256] = "";
  pthread_mutex_unlock(&ra->mu);
  cucap_status st = decode_chunk(ra->data, ci, off, csize, raw, &checked,
                                 dctx, &buf, &cap, &len, msg, sizeof msg);
  pthread_mutex_lock(&ra->mu);
  s->buf = buf;
  s->cap = cap;
  s->len = len;
  s->checked = checked;
  s->st = st;
  memcpy(s->msg, msg, sizeof msg);
  s->state = RA_DONE;
  pthread_cond_broadcast(&ra->done);
}

/* The queued slot of the lowest chunk (file order), or NULL. mu held. */
static ra_slot *ra_next_queued(ra_state *ra) {
  ra_slot *s = NULL;
  for (size_t i = 0; i < ra->nslots; i++)
    if (ra->slots[i].state == RA_QUEUED && (!s || ra->slots[i].ci < s->ci))
      s = &ra->slots[i];
  return s;
}

static void *ra_worker(void *arg) {
  ra_state *ra = arg;
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  if (dctx)
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_forceIgnoreChecksum,
                           ZSTD_d_ignoreChecksum);
  pthread_mutex_lock(&ra->mu);
  while (!ra->stop) {
    ra_slot *s = ra_next_queued(ra);
    if (s)
      ra_run(ra, s, dctx);
    else
      pthread_cond_wait(&ra->work, &ra->mu);
  }
  pthread_mutex_unlock(&ra->mu);
  ZSTD_freeDCtx(dctx);
  return NULL;
}

static void ra_destroy(ra_state *ra) {
  if (!ra)
    return;
  pthread_mutex_lock(&ra->mu);
  ra->stop = 1;
  pthread_cond_broadcast(&ra->work);
  pthread_mutex_unlock(&ra->mu);
  for (size_t i = 0; i < ra->nthreads; i++)
    pthread_join(ra->threads[i], NULL);
  for (size_t i = 0; i < ra->nslots; i++)
    free(ra->slots[i].buf);
  free(ra->slots);
  free(ra->threads);
  free(ra->next_blob);
  pthread_cond_destroy(&ra->done);
  pthread_cond_destroy(&ra->work);
  pthread_mutex_destroy(&ra->mu);
  free(ra);
}

/* Creates r->ra and starts its workers. On failure (memory, threads) read-
 * ahead is switched off for this reader: the synchronous path still works. */
static ra_state *ra_get(cucap_reader *r) {
  if (r->ra || r->decode_threads <= 0)
    return r->ra;
  size_t n = (size_t)r->decode_threads;
  ra_state *ra = calloc(1, sizeof *ra);
  if (!ra || pthread_mutex_init(&ra->mu, NULL) != 0) {
    free(ra);
    r->decode_threads = 0;
    return NULL;
  }
  pthread_cond_init(&ra->work, NULL);
  pthread_cond_init(&ra->done, NULL);
  ra->data = r->data;
  ra->nslots = 2 * n;
  ra->slots = calloc(ra->nslots, sizeof *ra->slots);
  ra->threads = calloc(n, sizeof *ra->threads);
  ra->next_blob = malloc((r->nchunks ? r->nchunks : 1) * sizeof(size_t));
  if (ra->next_blob)
    for (size_t i = r->nchunks, next = r->nchunks; i-- > 0;) {
      ra->next_blob[i] = next;
      if (r->chunks[i].kind == CUCAP_FB_CHUNKKIND_BLOBS)
        next = i;
    }
  if (ra->slots && ra->threads && ra->next_blob)
    for (size_t i = 0; i < n; i++) {
      if (pthread_create(&ra->threads[i], NULL, ra_worker, ra) != 0)
        break;
      ra->nthreads++;
    }
  if (ra->nthreads == 0) {
    CUCAP_WARN("reader: read-ahead unavailable, decoding synchronously");
    ra_destroy(ra);
    r->decode_threads = 0;
    return NULL;
  }
  r->ra = ra;
  return ra;
}

/* If chunk ci was decoded ahead (or is being decoded), makes the result the
 * blob chunk buffer, or returns its error exactly as blob_chunk_load would.
 * Otherwise (not read ahead, or still queued: cancelled here) returns
 * CUCAP_OK and leaves ci to the synchronous path. */
static cucap_status ra_take(cucap_reader *r, size_t ci) {
  ra_state *ra = r->ra;
  if (!ra || r->bc_chunk == ci)
    return CUCAP_OK;
  cucap_status st = CUCAP_OK;
  ZSTD_DCtx *dctx = get_dctx(r);
  pthread_mutex_lock(&ra->mu);
  for (size_t i = 0; i < ra->nslots; i++) {
    ra_slot *s = &ra->slots[i];
    if (s->state == RA_EMPTY || s->ci != ci)
      continue;
    if (s->state == RA_QUEUED) {
      s->state = RA_EMPTY;
      break;
    }
    /* While a worker decodes ci, this thread decodes queued chunks after
     * it instead of idling (the workers could otherwise always be first). */
    while (s->state == RA_BUSY) {
      ra_slot *q = dctx ? ra_next_queued(ra) : NULL;
      if (q)
        ra_run(ra, q, dctx);
      else
        pthread_cond_wait(&ra->done, &ra->mu);
    }
    if (s->checked)
      r->chunks[ci].payload_ok = 1;
    if (s->st == CUCAP_ERR_NOMEM) { /* retried synchronously */
      s->state = RA_EMPTY;
      break;
    }
    st = s->st;
    if (st == CUCAP_OK) {
      uint8_t *b = r->bc_buf;
      size_t c = r->bc_cap;
      r->bc_buf = s->buf;
      r->bc_cap = s->cap;
      r->bc_len = s->len;
      r->bc_chunk = ci;
      s->buf = b;
      s->cap = c;
    } else {
      set_msg(r, "%s", s->msg);
    }
    s->state = RA_EMPTY;
    break;
  }
  pthread_mutex_unlock(&ra->mu);
  return st;
}

/* Queues the next nslots blob chunks after ci that are not decoded or
 * queued yet, dropping results outside that window (a caller that jumped
 * elsewhere). */
static void ra_schedule(cucap_reader *r, size_t ci) {
  ra_state *ra = ra_get(r);
  if (!ra)
    return;
  size_t want[2 * RA_MAX_THREADS], nw = 0;
  for (size_t j = ra->next_blob[ci]; j < r->nchunks && nw < ra->nslots;
       j = ra->next_blob[j])
    want[nw++] = j;
  pthread_mutex_lock(&ra->mu);
  for (size_t i = 0; i < ra->nslots; i++) {
    ra_slot *s = &ra->slots[i];
    if (s->state != RA_QUEUED && s->state != RA_DONE)
      continue;
    int keep = 0;
    for (size_t k = 0; k < nw && !keep; k++)
      keep = want[k] == s->ci;
    if (!keep)
      s->state = RA_EMPTY;
  }
  int queued = 0;
  for (size_t k = 0; k < nw; k++) {
    size_t j = want[k];
    if (j == r->bc_chunk)
      continue;
    ra_slot *free_slot = NULL;
    int have = 0;
    for (size_t i = 0; i < ra->nslots && !have; i++) {
      ra_slot *s = &ra->slots[i];
      if (s->state == RA_EMPTY) {
        if (!free_slot)
          free_slot = s;
      } else if (s->ci == j) {
        have = 1;
      }
    }
    if (have)
      continue;
    if (!free_slot)
      break; /* a dropped chunk is still being decoded: no room now */
    const rchunk *c = &r->chunks[j];
    free_slot->state = RA_QUEUED;
    free_slot->ci = j;
    free_slot->off = c->offset;
    free_slot->csize = c->csize;
    free_slot->raw = c->raw;
    free_slot->checked = c->payload_ok;
    free_slot->st = CUCAP_OK;
    free_slot->msg[0] = 0;
    queued = 1;
  }
  if (queued)
    pthread_cond_broadcast(&ra->work);
  pthread_mutex_unlock(&ra->mu);
}

static cucap_status blob_copy(cucap_reader *r, const rblob *b, uint8_t *dst) {
  copy_ctx cc = {b, dst, 0, 0, 0};
  int any = 0;
  for (size_t ci = b->chunk; ci < r->nchunks; ci++) {
    if (r->chunks[ci].kind != CUCAP_FB_CHUNKKIND_BLOBS)
      continue;
    cc.found_here = 0;
    if (r->decode_threads > 0) {
      /* A read-ahead result for ci becomes the blob chunk buffer (so
       * direct_piece steps aside); then the next chunks are queued. */
      cucap_status rs = ra_take(r, ci);
      if (rs != CUCAP_OK)
        return rs == CUCAP_ERR_NOMEM ? rs : CUCAP_ERR_CORRUPT;
      ra_schedule(r, ci);
    }
    int d = direct_piece(r, ci, &cc);
    if (d == -1)
      return cc.bad ? CUCAP_ERR_CORRUPT : CUCAP_ERR_NOMEM;
    cucap_status st =
        d == 1 ? CUCAP_OK : walk_pieces(r, ci, copy_piece, &cc);
    if (st != CUCAP_OK)
      return st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_CORRUPT;
    if (cc.bad)
      return CUCAP_ERR_CORRUPT;
    if (cc.found_here)
      any = 1;
    else if (any)
      break; /* pieces of one blob are contiguous */
    if (any && cc.got == b->size)
      break;
  }
  if (!any || cc.got != b->size) {
    char hex[33];
    cucap_hash128_hex(b->hash, hex);
    set_msg(r, "blob %s is incomplete (%llu of %llu bytes found)", hex,
            (unsigned long long)cc.got, (unsigned long long)b->size);
    return CUCAP_ERR_CORRUPT;
  }
  return CUCAP_OK;
}

cucap_status cucap_reader_blob_size(cucap_reader *r, cucap_hash128 h,
                                    uint64_t *size) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  const rblob *b = blob_find(r, h);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOT_FOUND);
  if (size)
    *size = b->size;
  return CUCAP_OK;
}

cucap_status cucap_reader_blob_read(cucap_reader *r, cucap_hash128 h,
                                    void *dst, uint64_t cap) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  rblob *b = blob_find(r, h);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOT_FOUND);
  CUCAP_RETURN_IF(cap < b->size || (!dst && b->size), CUCAP_ERR_INVALID_ARG);
  if (b->mapped) {
    if (b->size)
      memcpy(dst, b->mapped, (size_t)b->size);
    return CUCAP_OK;
  }
  return blob_copy(r, b, dst);
}

cucap_status cucap_reader_blob_map(cucap_reader *r, cucap_hash128 h,
                                   const void **data, uint64_t *size) {
  CUCAP_RETURN_IF(!r || !data, CUCAP_ERR_INVALID_ARG);
  rblob *b = blob_find(r, h);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOT_FOUND);
  if (!b->mapped) {
    CUCAP_RETURN_IF(b->size > SIZE_MAX - 1, CUCAP_ERR_TOO_LARGE);
    uint8_t *m = malloc(b->size ? (size_t)b->size : 1);
    CUCAP_RETURN_IF(!m, CUCAP_ERR_NOMEM);
    cucap_status st = blob_copy(r, b, m);
    if (st != CUCAP_OK) {
      free(m);
      return st;
    }
    b->mapped = m;
  }
  *data = b->mapped;
  if (size)
    *size = b->size;
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- info */

void cucap_reader_recovery_get(const cucap_reader *r,
                               cucap_reader_recovery *out) {
  if (!out)
    return;
  if (!r) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = r->rec;
}

size_t cucap_reader_chunk_count(const cucap_reader *r) {
  return r ? r->nchunks : 0;
}

cucap_status cucap_reader_chunk_get(const cucap_reader *r, size_t i,
                                    cucap_reader_chunk *out) {
  CUCAP_RETURN_IF(!r || !out, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(i >= r->nchunks, CUCAP_ERR_NOT_FOUND);
  const rchunk *c = &r->chunks[i];
  out->offset = c->offset;
  out->compressed_size = c->csize;
  out->raw_size = c->raw;
  out->records = c->records;
  out->kind = c->kind;
  return CUCAP_OK;
}

size_t cucap_reader_blob_count(const cucap_reader *r) {
  return r ? r->nblobs : 0;
}

cucap_status cucap_reader_blob_get(const cucap_reader *r, size_t i,
                                   cucap_hash128 *hash, uint64_t *size) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(i >= r->nblobs, CUCAP_ERR_NOT_FOUND);
  if (hash)
    *hash = r->blobs[i].hash;
  if (size)
    *size = r->blobs[i].size;
  return CUCAP_OK;
}

cucap_status cucap_reader_blob_place(const cucap_reader *r, size_t i,
                                     uint32_t *chunk, uint32_t *pieces) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(i >= r->nblobs, CUCAP_ERR_NOT_FOUND);
  if (chunk)
    *chunk = r->blobs[i].chunk;
  if (pieces)
    *pieces = r->blobs[i].pieces;
  return CUCAP_OK;
}
