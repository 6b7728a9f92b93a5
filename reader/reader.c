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

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "reader_internal.h"

void rd_set_msg(cucap_reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- chunks */

/* Reads and validates the chunk header at off. why receives the reason. */
int rd_chunk_header_at(const cucap_reader *r, uint64_t off,
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

int rd_payload_ok(const cucap_reader *r, const rchunk *c) {
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
ZSTD_DCtx *rd_get_dctx(cucap_reader *r) {
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
void rd_put_dctx(ZSTD_DCtx *d) {
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
cucap_status rd_decode_chunk(const uint8_t *data, size_t ci, uint64_t off,
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
cucap_status rd_load_chunk(cucap_reader *r, size_t ci, uint8_t **buf,
                           size_t *cap, size_t *len) {
  rchunk *c = &r->chunks[ci];
  int checked = c->payload_ok;
  cucap_status st =
      rd_decode_chunk(r->data, ci, c->offset, c->csize, c->raw, &checked,
                      rd_get_dctx(r), buf, cap, len, r->msg, sizeof r->msg);
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
    rd_set_msg(r, "chunk %zu: %zu stray bytes after record %u", ci, len - p, idx);
    return CUCAP_ERR_CORRUPT;
  }
  uint32_t n = rd32(buf + p);
  if (n < 4 || n > CUCAP_MAX_RECORD_SIZE || n > len - p - 4) {
    rd_set_msg(r, "chunk %zu: record %u has an impossible size %u", ci, idx, n);
    return CUCAP_ERR_CORRUPT;
  }
  cucap_status vs = r->chunks[ci].records_ok
                        ? CUCAP_OK
                        : cucap_fb_record_verify(buf + p, (size_t)n + 4, 1);
  if (vs != CUCAP_OK) {
    rd_set_msg(r, "chunk %zu: record %u failed FlatBuffers verification (%s)", ci,
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

rblob *rd_blob_find(const cucap_reader *r, cucap_hash128 h) {
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

int rd_blob_rehash(cucap_reader *r) {
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

rblob *rd_blob_add(cucap_reader *r) {
  if (!CUCAP_VEC_RESERVE(r->blobs, r->cblobs, r->nblobs + 1, 64))
    return NULL;
  rblob *b = &r->blobs[r->nblobs++];
  memset(b, 0, sizeof *b);
  return b;
}

int rd_chunk_add(cucap_reader *r, uint64_t off, const cucap_chunk_header *h,
                 int checked) {
  if (!CUCAP_VEC_RESERVE(r->chunks, r->cchunks, r->nchunks + 1, 64))
    return -1;
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
  CUCAP_FORWARD(rd_load_chunk(r, ci, &r->bc_buf, &r->bc_cap, &r->bc_len));
  r->bc_chunk = ci;
  return CUCAP_OK;
}

/* Visits the BlobPiece records of blob chunk ci (verified). fn returns
 * nonzero to stop. Non-BlobPiece records in a blob chunk are corruption. */
cucap_status rd_walk_pieces(cucap_reader *r, size_t ci, piece_fn fn,
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
      rd_set_msg(r, "chunk %zu: record %u of a blob chunk is not a BlobPiece", ci,
                 idx);
      return CUCAP_ERR_CORRUPT;
    }
    idx++;
    if (fn(r, ci, bp, user))
      break;
  }
  if (pos >= r->bc_len && idx != r->chunks[ci].records) {
    rd_set_msg(r, "chunk %zu: holds %u records, header says %u", ci, idx,
               r->chunks[ci].records);
    return CUCAP_ERR_CORRUPT;
  }
  if (pos >= r->bc_len)
    r->chunks[ci].records_ok = 1;
  return CUCAP_OK;
}

cucap_hash128 rd_piece_hash(const cucap_fb_blob_piece *bp) {
  const cucap_fb_hash128 *fh = cucap_fb_blob_piece_hash(bp);
  cucap_hash128 h = {fh->lo, fh->hi};
  return h;
}

/* Scan mode: learn blobs from their pieces. */
int rd_scan_piece(cucap_reader *r, size_t ci, const cucap_fb_blob_piece *bp,
                  void *user) {
  int *oom = user;
  cucap_hash128 h = rd_piece_hash(bp);
  uint64_t total = cucap_fb_blob_piece_total_size(bp);
  uint64_t off = cucap_fb_blob_piece_offset(bp);
  size_t n = 0;
  cucap_fb_blob_piece_data(bp, &n);
  rblob *b = rd_blob_find(r, h);
  if (!b) {
    if (off != 0)
      return 0; /* orphan piece (its first piece was lost): ignore */
    b = rd_blob_add(r);
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
    if (r->nblobs * 2 + 2 > r->bmap_cap && rd_blob_rehash(r) != 0) {
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
        rd_set_msg(r, "chunk %zu holds more records than its header says (%u)",
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
      rd_set_msg(r, "chunk %zu holds %u records, its header says %u", r->it_chunk,
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
    cucap_status st = rd_load_chunk(r, ci, &r->it_buf, &r->it_cap, &r->it_len);
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
