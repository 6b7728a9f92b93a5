/* reader_blob.c - reading blobs out of a capture (cucap_reader_blob_*):
 * piece by piece from their chunks, straight into the caller's buffer when
 * a piece is one zstd frame, with optional read-ahead threads decoding the
 * following blob chunks. See reader.c for the reader's rules. */
#include "cucap_reader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "reader_internal.h"

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
  if (!cucap_hash128_eq(rd_piece_hash(bp), c->b->hash))
    return 0;
  size_t n = 0;
  const uint8_t *d = cucap_fb_blob_piece_data(bp, &n);
  if (cucap_fb_blob_piece_total_size(bp) != c->b->size ||
      cucap_fb_blob_piece_offset(bp) != c->got || n > c->b->size - c->got) {
    rd_set_msg(r, "chunk %zu: blob piece at offset %llu does not fit its blob", ci,
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

#define PX_CAP (ZSTD_BLOCKSIZE_MAX + PIECE_HDR + 64)
/* direct_piece's checks before decoding: one piece in the chunk that fits
 * what is left of the blob (*n_out: its data's size), a good payload and
 * frame size, the decoder and r->px, the frame begun. Returns 1 go on, 0
 * not applicable, -1 error (as direct_piece). */
static int direct_ready(cucap_reader *r, size_t ci, copy_ctx *c, uint64_t *n_out) {
  rchunk *ch = &r->chunks[ci];
  if (ch->records != 1 || ch->raw < PIECE_HDR + 8 || r->bc_chunk == ci ||
      ch->raw % 8 != 0)
    return 0;
  uint64_t n = ch->raw - PIECE_HDR; /* the data, if the layout holds */
  *n_out = n;
  if (c->got > c->b->size || n > c->b->size - c->got)
    return 0;
  const uint8_t *p = r->data + ch->offset + sizeof(cucap_chunk_header);
  if (!ch->payload_ok) {
    if (!rd_payload_ok(r, ch)) {
      rd_set_msg(r, "chunk %zu at offset %llu: payload checksum mismatch", ci,
                 (unsigned long long)ch->offset);
      c->bad = 1; /* corruption, not out of memory */
      return -1;
    }
    ch->payload_ok = 1;
  }
  if (ZSTD_getFrameContentSize(p, (size_t)ch->csize) != ch->raw) {
    rd_set_msg(r, "chunk %zu at offset %llu: zstd frame size does not match the "
               "chunk header",
               ci, (unsigned long long)ch->offset);
    c->bad = 1;
    return -1;
  }
  if (!rd_get_dctx(r)) {
    rd_set_msg(r, "out of memory");
    return -1;
  }
  if (!r->px && !(r->px = malloc(PX_CAP))) {
    rd_set_msg(r, "out of memory");
    return -1;
  }
  if (ZSTD_isError(ZSTD_decompressBegin(r->dctx)))
    return 0;
  return 1;
}

/* The piece header decoded into r->px: the writer's layout, this blob, at
 * c->got. Returns 0 good, -2 another layout or blob (the general path), -1
 * error. */
static int piece_header_ok(cucap_reader *r, size_t ci, copy_ctx *c, const rchunk *ch,
                           uint64_t n) {
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
    rd_set_msg(r, "chunk %zu: blob piece at offset %llu does not fit its blob",
               ci, (unsigned long long)off);
    c->bad = 1;
    return -1;
  }
  return 0;
}

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
static int direct_piece(cucap_reader *r, size_t ci, copy_ctx *c) {
  uint64_t n;
  int rv = direct_ready(r, ci, c, &n);
  if (rv != 1)
    return rv;
  const rchunk *ch = &r->chunks[ci];
  const uint8_t *p = r->data + ch->offset + sizeof(cucap_chunk_header);
  uint8_t *out = c->dst + c->got; /* piece data goes to out[0..n) */
  size_t ipos = 0, hdr_fill = 0; /* bytes decoded into px so far */
  uint64_t dpos = 0;             /* bytes of data placed in out */
  int in_px = 1;
  for (;;) {
    size_t need = ZSTD_nextSrcSizeToDecompress(r->dctx);
    if (need == 0)
      break;
    if (need > (size_t)ch->csize - ipos) {
      rd_set_msg(r, "chunk %zu: zstd frame is truncated", ci);
      goto bad;
    }
    uint8_t *op = in_px ? r->px + hdr_fill : out + dpos;
    size_t ocap = in_px ? PX_CAP - hdr_fill : (size_t)(n - dpos);
    size_t k = ZSTD_decompressContinue(r->dctx, op, ocap, p + ipos, need);
    if (ZSTD_isError(k)) {
      rd_set_msg(r, "chunk %zu: zstd decompression failed (%s)", ci,
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
    int hv = piece_header_ok(r, ci, c, ch, n);
    if (hv != 0)
      return hv;
    dpos = hdr_fill - PIECE_HDR;
    if (dpos > n)
      goto bad_size;
    memcpy(out, r->px + PIECE_HDR, (size_t)dpos);
    in_px = 0;
  }
  if (in_px || dpos != n || ipos != (size_t)ch->csize) {
  bad_size:
    rd_set_msg(r, "chunk %zu: zstd frame does not hold the announced piece", ci);
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
  cucap_status st = rd_decode_chunk(ra->data, ci, off, csize, raw, &checked,
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

void rd_ra_destroy(ra_state *ra) {
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
    rd_ra_destroy(ra);
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
  ZSTD_DCtx *dctx = rd_get_dctx(r);
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
      rd_set_msg(r, "%s", s->msg);
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
        d == 1 ? CUCAP_OK : rd_walk_pieces(r, ci, copy_piece, &cc);
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
    rd_set_msg(r, "blob %s is incomplete (%llu of %llu bytes found)", hex,
               (unsigned long long)cc.got, (unsigned long long)b->size);
    return CUCAP_ERR_CORRUPT;
  }
  return CUCAP_OK;
}

cucap_status cucap_reader_blob_size(cucap_reader *r, cucap_hash128 h,
                                    uint64_t *size) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  const rblob *b = rd_blob_find(r, h);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOT_FOUND);
  if (size)
    *size = b->size;
  return CUCAP_OK;
}

cucap_status cucap_reader_blob_read(cucap_reader *r, cucap_hash128 h,
                                    void *dst, uint64_t cap) {
  CUCAP_RETURN_IF(!r, CUCAP_ERR_INVALID_ARG);
  rblob *b = rd_blob_find(r, h);
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
  rblob *b = rd_blob_find(r, h);
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

/* ------------------------------------------------------------ launch args */

/* The launch's argument blob, if it has one. */
static int launch_args_blob(const cucap_fb_launch *l, cucap_hash128 *h) {
  const cucap_fb_hash128 *b =
      cucap_fb_launch_has_args_blob(l) ? cucap_fb_launch_args_blob(l) : NULL;
  if (!b)
    return 0;
  h->lo = b->lo;
  h->hi = b->hi;
  return 1;
}

cucap_status cucap_reader_launch_args_size(cucap_reader *r, const void *launch,
                                           uint64_t *size) {
  CUCAP_RETURN_IF(!r || !launch || !size, CUCAP_ERR_INVALID_ARG);
  cucap_hash128 h;
  if (launch_args_blob(launch, &h))
    return cucap_reader_blob_size(r, h, size);
  size_t n = 0;
  (void)cucap_fb_launch_args(launch, &n);
  *size = n;
  return CUCAP_OK;
}

cucap_status cucap_reader_launch_args_read(cucap_reader *r, const void *launch,
                                           void *dst, uint64_t cap) {
  CUCAP_RETURN_IF(!r || !launch, CUCAP_ERR_INVALID_ARG);
  cucap_hash128 h;
  if (launch_args_blob(launch, &h))
    return cucap_reader_blob_read(r, h, dst, cap);
  size_t n = 0;
  const uint8_t *a = cucap_fb_launch_args(launch, &n);
  CUCAP_RETURN_IF(cap < n || (!dst && n), CUCAP_ERR_INVALID_ARG);
  if (n)
    memcpy(dst, a, n);
  return CUCAP_OK;
}
