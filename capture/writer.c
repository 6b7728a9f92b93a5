/* writer.c - the capture stream writer (see cucap_writer.h, docs/design.md).
 *
 * Threads and locks:
 *  - rec_mu guards the current record chunk; blob_mu guards the current blob
 *    chunk, the blob set and the blob table; q_mu guards the sealed-chunk
 *    queue, free buffers and counters. Order: rec_mu -> blob_mu -> q_mu
 *    (rec_mu only ever *try*-locks blob_mu).
 *  - One background thread pops sealed chunks, compresses (zstd, frame
 *    checksum on), writes header + frame + padding and records the chunk's
 *    index entry. It never blocks on rec_mu/blob_mu (try-lock only, for the
 *    flush-interval sealing), so an appender waiting for queue space while
 *    holding rec_mu cannot deadlock it.
 *  - After a write error the thread keeps draining (discarding) so appenders
 *    never wait forever; the error is sticky and returned by append, put_blob,
 *    flush and close. */
#include "cucap_vec.h"
#include "cucap_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "cucap_clock.h"
#include "cucap_hash.h"
#include "cucap_lines.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "writer_internal.h"
#include "writer_state.h"

static void set_err(cucap_writer *w, cucap_status s) {
  int expected = CUCAP_OK;
  __atomic_compare_exchange_n(&w->err, &expected, (int)s, 0, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
}

/* Records the first error with its message (logged unless quiet_errors):
 * the thread that claims errmsg writes it, then publishes the status. Any
 * thread may call it. */
void wr_fail(cucap_writer *w, cucap_status s, const char *fmt, ...) {
  int unclaimed = 0;
  if (!__atomic_compare_exchange_n(&w->err_claimed, &unclaimed, 1, 0,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return; /* an earlier error stands */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->errmsg, sizeof w->errmsg, fmt, ap);
  va_end(ap);
  if (!w->o.quiet_errors)
    CUCAP_ERROR("writer: %s", w->errmsg);
  set_err(w, s);
}

const char *cucap_writer_last_error(const cucap_writer *w) {
  if (!w || __atomic_load_n(&w->err, __ATOMIC_ACQUIRE) == CUCAP_OK)
    return "";
  return w->errmsg;
}

void cucap_writer_options_init(cucap_writer_options *o) {
  if (!o)
    return;
  memset(o, 0, sizeof *o);
  o->level = 1;
  o->chunk_size = 1u << 20;
  o->blob_chunk_size = 4u << 20;
  o->queue_depth = 8;
  o->flush_interval_ms = 500;
}

/* ---------------------------------------------------------------- buffers */

void wr_wchunk_free(wchunk *c) {
  if (!c)
    return;
  free(c->buf);
  free(c->blob_starts);
  free(c);
}

static void wchunk_reset(wchunk *c, uint8_t kind) {
  c->len = 0;
  c->records = 0;
  c->kind = kind;
  c->min_seq = c->max_seq = 0;
  c->opened_ns = 0;
  c->nstarts = 0;
  c->next = NULL;
}

/* Returns a chunk buffer with capacity >= need (reusing a free one). */
wchunk *wr_wchunk_get(cucap_writer *w, uint8_t kind, size_t need) {
  size_t std = kind == CUCAP_FB_CHUNKKIND_BLOBS ? w->blob_cap : w->rec_cap;
  wchunk **fl = kind == CUCAP_FB_CHUNKKIND_BLOBS ? &w->free_blob : &w->free_rec;
  wchunk *c = NULL;
  if (need <= std) {
    pthread_mutex_lock(&w->q_mu);
    c = *fl;
    if (c)
      *fl = c->next;
    pthread_mutex_unlock(&w->q_mu);
  }
  if (!c) {
    /* the fields an append touches share one cache line */
    c = cucap_lines_alloc(sizeof *c);
    if (!c)
      return NULL;
    c->cap = need > std ? need : std;
    c->buf = malloc(c->cap);
    if (!c->buf) {
      free(c);
      return NULL;
    }
  }
  wchunk_reset(c, kind);
  return c;
}

/* Seals *curp (caller holds its kind's mutex) and queues it. may_wait=0:
 * give up (return 0) instead of waiting for queue space (background thread).
 * Returns 1 if sealed. */
int wr_seal_locked(cucap_writer *w, wchunk **curp, int may_wait) {
  wchunk *c = *curp;
  if (!c || c->len == 0)
    return 0;
  pthread_mutex_lock(&w->q_mu);
  if (w->q_len >= w->o.queue_depth) {
    if (!may_wait) {
      pthread_mutex_unlock(&w->q_mu);
      return 0;
    }
    STAT_ADD(w, st_waits, 1);
    while (w->q_len >= w->o.queue_depth)
      pthread_cond_wait(&w->q_space, &w->q_mu);
  }
  uint64_t number = w->sealed++;
  /* once queued, c belongs to the background thread (which frees an
   * oversize buffer after writing it): nothing of it is read after that */
  size_t raw = c->len;
  /* Blob table entries learn their chunk number now (blob_mu is held by
   * whoever seals a blob chunk). */
  for (size_t i = 0; i < c->nstarts; i++)
    w->blobs[c->blob_starts[i]].chunk = (uint32_t)number;
  c->next = NULL;
  if (w->q_tail)
    w->q_tail->next = c;
  else
    w->q_head = c;
  w->q_tail = c;
  w->q_len++;
  pthread_cond_signal(&w->q_nonempty);
  pthread_mutex_unlock(&w->q_mu);
  wr_test_kill(w, TK_SEAL, NULL, 0);
  STAT_ADD(w, st_raw, raw);
  *curp = NULL; /* a fresh buffer is taken on the next append */
  return 1;
}

/* ---------------------------------------------------------------- create */

/* The teardown that cucap_writer_create's failure path and
 * cucap_writer_destroy share: the compressors, the locks, the writer. */
void wr_writer_free(cucap_writer *w) {
  ZSTD_freeCCtx(w->cctx);
  ZSTD_freeCCtx(w->rec_cctx);
  pthread_mutex_destroy(&w->rec_mu);
  pthread_mutex_destroy(&w->blob_mu);
  pthread_mutex_destroy(&w->q_mu);
  pthread_cond_destroy(&w->q_nonempty);
  pthread_cond_destroy(&w->q_space);
  pthread_cond_destroy(&w->q_done);
  free(w);
}

/* The options as the writer uses them: defaults for what opts leaves at
 * 0, the chunk sizes clamped, the standard buffer capacities. */
static void apply_options(cucap_writer *w, const cucap_writer_options *opts) {
  cucap_writer_options_init(&w->o);
  if (opts) {
    w->o = *opts;
    if (w->o.level == 0)
      w->o.level = 1;
    if (w->o.chunk_size == 0)
      w->o.chunk_size = 1u << 20;
    if (w->o.blob_chunk_size == 0)
      w->o.blob_chunk_size = 4u << 20;
    if (w->o.queue_depth == 0)
      w->o.queue_depth = 8;
    if (w->o.flush_interval_ms == 0)
      w->o.flush_interval_ms = 500;
  }
  /* Keep chunks well inside the reader's CUCAP_MAX_CHUNK_RAW. */
  if (w->o.chunk_size > (256u << 20))
    w->o.chunk_size = 256u << 20;
  if (w->o.chunk_size < 4096)
    w->o.chunk_size = 4096;
  if (w->o.blob_chunk_size > (256u << 20))
    w->o.blob_chunk_size = 256u << 20;
  w->rec_cap = w->o.chunk_size;
  w->rec_chunk_size = w->o.chunk_size;
  /* A standard blob buffer holds one piece of up to blob_chunk_size bytes
   * (at most a whole piece); a larger piece gets a buffer of its own, freed
   * once written. Small blob chunks then do not cost 4 MiB buffers each. */
  size_t piece_max = w->o.blob_chunk_size < CUCAP_BLOB_PIECE_SIZE
                         ? w->o.blob_chunk_size
                         : CUCAP_BLOB_PIECE_SIZE;
  size_t piece_rec = cucap_align8(CUCAP_BLOB_PIECE_HDR + piece_max);
  w->blob_cap =
      w->o.blob_chunk_size > piece_rec ? w->o.blob_chunk_size : piece_rec;
}

/* The compressor of blob chunks and, at another level, of record chunks. */
static cucap_status create_compressors(cucap_writer *w) {
  w->cctx = ZSTD_createCCtx();
  CUCAP_RETURN_IF(!w->cctx, CUCAP_ERR_NOMEM);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->o.level);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
  if (w->o.nb_workers > 0) {
    size_t r =
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_nbWorkers, w->o.nb_workers);
    if (ZSTD_isError(r))
      CUCAP_WARN("writer: zstd has no worker threads (%s); compressing on one "
                 "thread",
                 ZSTD_getErrorName(r));
  }

  /* Record chunks: zstd level -1 by default. On launch-like record streams
   * it compresses to the same size as level 1 (bench: 12.0 B per 272-byte
   * launch record either way) with ~9% less compressor CPU, and the
   * compressor thread is what limits small-record throughput (prebuilt
   * records: producer 55 ns/record, compressor ~150 ns). Only when `level`
   * is the default: an explicit level (cucap compress --level 19, record
   * --level N) applies to records too unless record_level says otherwise.
   * Levels below -1 lose a lot of ratio (-3: 21 B/record) for ~5%. */
  if (w->o.record_level == 0 && w->o.level == 1)
    w->o.record_level = CUCAP_WRITER_DEFAULT_RECORD_LEVEL;
  if (w->o.record_level != 0 && w->o.record_level != w->o.level) {
    w->rec_cctx = ZSTD_createCCtx();
    CUCAP_RETURN_IF(!w->rec_cctx, CUCAP_ERR_NOMEM);
    int lv = w->o.record_level;
    if (lv < ZSTD_minCLevel())
      lv = ZSTD_minCLevel();
    ZSTD_CCtx_setParameter(w->rec_cctx, ZSTD_c_compressionLevel, lv);
    ZSTD_CCtx_setParameter(w->rec_cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(w->rec_cctx, ZSTD_c_contentSizeFlag, 1);
  }
  return CUCAP_OK;
}

/* Creates the file and writes the preamble and the FileHeader; w->fd is
 * the caller's to close on failure. */
static cucap_status write_preamble(cucap_writer *w, const char *path, const void *header,
                                   size_t header_size) {
  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    CUCAP_ERROR("cannot create capture file %s: %s", path, strerror(errno));
    return CUCAP_ERR_IO;
  }
  cucap_preamble pre;
  memset(&pre, 0, sizeof pre);
  memcpy(pre.magic, CUCAP_MAGIC, CUCAP_MAGIC_LEN);
  pre.major = CUCAP_FORMAT_MAJOR;
  pre.minor = CUCAP_FORMAT_MINOR;
  pre.header_size = (uint32_t)header_size;
  pre.header_check = cucap_check32(header, header_size);
  static const uint8_t zeros[8];
  size_t pad = cucap_align8(header_size) - header_size;
  if (wr_write_all(w->fd, &pre, sizeof pre) || wr_write_all(w->fd, header, header_size) ||
      wr_write_all(w->fd, zeros, pad)) {
    CUCAP_ERROR("cannot create capture file %s: writing its header failed: %s",
                path, strerror(errno));
    /* nothing readable: do not leave a stub (O_TRUNC already emptied it) -
     * a regular file only (never a device such as /dev/full) */
    struct stat sb;
    if (fstat(w->fd, &sb) == 0 && S_ISREG(sb.st_mode))
      unlink(path);
    return CUCAP_ERR_IO;
  }
  w->file_off = sizeof pre + header_size + pad;
  w->st_file = w->file_off;
  wr_test_kill_init(w);
  wr_test_kill(w, TK_HEADER, NULL, 0);
  return CUCAP_OK;
}

static cucap_status start_thread(cucap_writer *w) {
  /* The writer's thread takes none of the program's signals (a signal
   * handler that closes the capture must not run on the thread that writes
   * it): it starts with every signal blocked. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int prc = pthread_create(&w->thr, NULL, wr_bg_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  CUCAP_RETURN_IF(prc != 0, CUCAP_ERR_INTERNAL);
  return CUCAP_OK;
}

cucap_status cucap_writer_create(const char *path,
                                 const cucap_writer_options *opts,
                                 const void *header, size_t header_size,
                                 cucap_writer **out) {
  CUCAP_RETURN_IF(!out, CUCAP_ERR_INVALID_ARG);
  *out = NULL;
  CUCAP_RETURN_IF(!path || !header, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(header_size < 8 || header_size > CUCAP_MAX_HEADER_SIZE,
                  CUCAP_ERR_INVALID_ARG);
  cucap_status vs = cucap_fb_file_header_verify(header, header_size, 1);
  if (vs != CUCAP_OK) {
    CUCAP_ERROR("writer: FileHeader failed verification (%s)",
                cucap_status_str(vs));
    return CUCAP_ERR_VERIFY;
  }

  cucap_writer *w = cucap_lines_alloc(sizeof(cucap_writer));
  CUCAP_RETURN_IF(!w, CUCAP_ERR_NOMEM);
  apply_options(w, opts);
  w->fd = -1;
  pthread_mutex_init(&w->rec_mu, NULL);
  pthread_mutex_init(&w->blob_mu, NULL);
  pthread_mutex_init(&w->q_mu, NULL);
  pthread_cond_init(&w->q_nonempty, NULL);
  pthread_cond_init(&w->q_space, NULL);
  pthread_cond_init(&w->q_done, NULL);

  cucap_status st = create_compressors(w);
  if (st == CUCAP_OK)
    st = write_preamble(w, path, header, header_size);
  if (st == CUCAP_OK)
    st = start_thread(w);
  if (st != CUCAP_OK)
    goto fail;
  w->thr_started = 1;
  *out = w;
  return CUCAP_OK;
fail:
  if (w->fd >= 0)
    close(w->fd);
  wr_writer_free(w);
  return st;
}

/* ---------------------------------------------------------------- records */

static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Record.seq (slot 0) of a size-prefixed Record, bounds-checked; 0 if absent
 * or unreadable. The writer does not verify records (too slow for the append
 * path; the reader verifies). */
static uint64_t record_seq(const uint8_t *p, size_t size) {
  size_t t = 4 + (size_t)rd32(p + 4);
  if (t + 4 > size)
    return 0;
  int32_t so;
  memcpy(&so, p + t, 4);
  int64_t vt = (int64_t)t - so;
  if (vt < 4 || (uint64_t)vt + 6 > size)
    return 0;
  uint16_t vsz, fo;
  memcpy(&vsz, p + vt, 2);
  if (vsz < 6)
    return 0;
  memcpy(&fo, p + vt + 4, 2);
  if (!fo || t + fo + 8 > size)
    return 0;
  uint64_t s;
  memcpy(&s, p + t + fo, 8);
  return s;
}

/* Shared by append and append_seq. seq_off != 0: the 8 bytes at seq_off of
 * the copy receive ++*counter, taken under rec_mu (so seq order == file
 * order for every appender using the same counter through this writer). */
static cucap_status append_impl(cucap_writer *w, const void *record,
                                size_t size, size_t seq_off, uint64_t *counter,
                                uint64_t *pos, uint64_t *seq_out) {
  CUCAP_RETURN_IF(!w || !record, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(size < 12 || size > CUCAP_MAX_RECORD_SIZE,
                  CUCAP_ERR_INVALID_ARG);
  const uint8_t *src = record;
  CUCAP_RETURN_IF((size_t)rd32(src) + 4 != size, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(counter && (seq_off < 8 || seq_off > size - 8),
                  CUCAP_ERR_INVALID_ARG);
  uint64_t seq = counter ? 0 : record_seq(src, size);
  size_t need = cucap_align8(size);

  pthread_mutex_lock(&w->rec_mu);
  cucap_status e = wr_get_err(w);
  if (e != CUCAP_OK || w->closed) {
    pthread_mutex_unlock(&w->rec_mu);
    return e != CUCAP_OK ? e : CUCAP_ERR_STATE;
  }
  wchunk *c = w->rec_cur;
  if (!c || c->len + need > c->cap) {
    if (c) {
      /* Best effort: blobs put before these records land in an earlier chunk
       * (a truncated capture then rarely holds a record without its blob). */
      if (pthread_mutex_trylock(&w->blob_mu) == 0) {
        wr_seal_locked(w, &w->blob_cur, 1);
        pthread_mutex_unlock(&w->blob_mu);
      }
      if (c->len)
        wr_seal_locked(w, &w->rec_cur, 1);
      else
        wr_wchunk_free(c);
    }
    c = w->rec_cur = wr_wchunk_get(w, CUCAP_FB_CHUNKKIND_RECORDS, need);
    if (!c) {
      /* sticky: a capture missing records must not end with an index */
      wr_fail(w, CUCAP_ERR_NOMEM, "out of memory for a %zu-byte record chunk", need);
      pthread_mutex_unlock(&w->rec_mu);
      return CUCAP_ERR_NOMEM;
    }
  }
  if (c->len == 0)
    c->opened_ns = cucap_clock_now_ns();
  {
    /* The appender's cost is mostly write misses on the chunk buffer (a
     * sealed buffer comes back cold from the compressor's core): ask for
     * the lines a few records ahead for writing now, so the memcpy of later
     * records hits cache instead of waiting for each line at the unlock. */
    size_t pf = c->len + need + CUCAP_WRITER_PREFETCH;
    size_t pf_end = pf + need < c->cap ? pf + need : c->cap;
    for (pf &= ~(size_t)63; pf < pf_end; pf += 64)
      __builtin_prefetch(c->buf + pf, 1, 3);
  }
  memcpy(c->buf + c->len, src, size);
  if (counter) {
    seq = ++*counter;
    memcpy(c->buf + c->len + seq_off, &seq, 8);
  }
  if (need != size)
    memset(c->buf + c->len + size, 0, need - size);
  c->len += need;
  c->records++;
  if (seq) {
    if (!c->min_seq || seq < c->min_seq)
      c->min_seq = seq;
    if (seq > c->max_seq)
      c->max_seq = seq;
  }
  /* relaxed store: cucap_writer_get_stats reads it without the lock */
  uint64_t p = w->rec_count;
  __atomic_store_n(&w->rec_count, p + 1, __ATOMIC_RELAXED);
  if (c->len >= w->rec_chunk_size)
    wr_seal_locked(w, &w->rec_cur, 1);
  pthread_mutex_unlock(&w->rec_mu);
  if (pos)
    *pos = p;
  if (seq_out)
    *seq_out = seq;
  return CUCAP_OK;
}

cucap_status cucap_writer_append(cucap_writer *w, const void *record,
                                 size_t size, uint64_t *pos) {
  return append_impl(w, record, size, 0, NULL, pos, NULL);
}

cucap_status cucap_writer_append_seq(cucap_writer *w, const void *record,
                                     size_t size, size_t seq_offset,
                                     uint64_t *counter, uint64_t *seq_out) {
  CUCAP_RETURN_IF(!counter, CUCAP_ERR_INVALID_ARG);
  return append_impl(w, record, size, seq_offset, counter, NULL, seq_out);
}

/* ---------------------------------------------------------------- blobs */

static size_t bset_slot(const cucap_writer *w, cucap_hash128 h) {
  return (size_t)(h.lo ^ (h.hi >> 7)) & (w->bset_cap - 1);
}

/* Returns blob index or -1. blob_mu held. */
static long bset_find(const cucap_writer *w, cucap_hash128 h) {
  if (!w->bset_cap)
    return -1;
  for (size_t i = bset_slot(w, h);; i = (i + 1) & (w->bset_cap - 1)) {
    uint32_t v = w->bset[i];
    if (!v)
      return -1;
    if (cucap_hash128_eq(w->blobs[v - 1].hash, h))
      return (long)(v - 1);
  }
}

static int bset_insert(cucap_writer *w, uint32_t idx) {
  if ((w->nblobs + 1) * 2 > w->bset_cap) {
    size_t nc = w->bset_cap ? w->bset_cap * 2 : 1024;
    uint32_t *ns = calloc(nc, sizeof *ns);
    if (!ns)
      return -1;
    uint32_t *old = w->bset;
    size_t oc = w->bset_cap;
    w->bset = ns;
    w->bset_cap = nc;
    for (size_t i = 0; i < oc; i++)
      if (old[i]) {
        size_t j = bset_slot(w, w->blobs[old[i] - 1].hash);
        while (w->bset[j])
          j = (j + 1) & (nc - 1);
        w->bset[j] = old[i];
      }
    free(old);
  }
  size_t j = bset_slot(w, w->blobs[idx].hash);
  while (w->bset[j])
    j = (j + 1) & (w->bset_cap - 1);
  w->bset[j] = idx + 1;
  return 0;
}

int cucap_writer_has_blob(cucap_writer *w, cucap_hash128 hash) {
  if (!w)
    return 0;
  pthread_mutex_lock(&w->blob_mu);
  long i = bset_find(w, hash);
  pthread_mutex_unlock(&w->blob_mu);
  return i >= 0;
}

cucap_status cucap_writer_put_blob(cucap_writer *w, const void *data,
                                   size_t size, cucap_hash128 *hash_out) {
  CUCAP_RETURN_IF(!w || (!data && size), CUCAP_ERR_INVALID_ARG);
  cucap_hash128 h = cucap_hash128_of(size ? data : "", size);
  if (hash_out)
    *hash_out = h;
  return cucap_writer_put_blob_hashed(w, data, size, h);
}

cucap_status cucap_writer_put_blob_hashed(cucap_writer *w, const void *data,
                                          size_t size, cucap_hash128 hash) {
  CUCAP_RETURN_IF(!w || (!data && size), CUCAP_ERR_INVALID_ARG);
  uint64_t npieces64 =
      size ? ((uint64_t)size + CUCAP_BLOB_PIECE_SIZE - 1) / CUCAP_BLOB_PIECE_SIZE
           : 1;
  CUCAP_RETURN_IF(npieces64 > UINT32_MAX, CUCAP_ERR_TOO_LARGE);
  pthread_mutex_lock(&w->blob_mu);
  cucap_status st = wr_get_err(w);
  if (st != CUCAP_OK || w->closed) {
    pthread_mutex_unlock(&w->blob_mu);
    return st != CUCAP_OK ? st : CUCAP_ERR_STATE;
  }
  if (bset_find(w, hash) >= 0) {
    pthread_mutex_unlock(&w->blob_mu);
    STAT_ADD(w, st_dedup, 1);
    return CUCAP_OK;
  }
  if (!CUCAP_VEC_RESERVE(w->blobs, w->cblobs, w->nblobs + 1, 256)) {
    pthread_mutex_unlock(&w->blob_mu);
    return CUCAP_ERR_NOMEM;
  }
  uint32_t idx = (uint32_t)w->nblobs;
  blob_entry *be = &w->blobs[idx];
  be->hash = hash;
  be->size = size;
  be->chunk = 0;
  be->pieces = (uint32_t)npieces64;
  w->nblobs++;
  if (bset_insert(w, idx) != 0) {
    w->nblobs--;
    pthread_mutex_unlock(&w->blob_mu);
    return CUCAP_ERR_NOMEM;
  }
  const uint8_t *src = data;
  size_t off = 0;
  do {
    size_t n = size - off;
    if (n > CUCAP_BLOB_PIECE_SIZE)
      n = CUCAP_BLOB_PIECE_SIZE;
    size_t need = cucap_align8(CUCAP_BLOB_PIECE_HDR + n);
    wchunk *c = w->blob_cur;
    if (!c || c->len + need > c->cap) {
      if (c && c->len)
        wr_seal_locked(w, &w->blob_cur, 1);
      else
        wr_wchunk_free(c);
      c = w->blob_cur = wr_wchunk_get(w, CUCAP_FB_CHUNKKIND_BLOBS, need);
      if (!c) {
        st = CUCAP_ERR_NOMEM;
        /* the blob table now names a blob that is missing */
        wr_fail(w, st, "out of memory for a blob chunk");
        break;
      }
    }
    if (off == 0) {
      if (!CUCAP_VEC_RESERVE(c->blob_starts, c->cstarts, c->nstarts + 1, 16)) {
        st = CUCAP_ERR_NOMEM;
        wr_fail(w, st, "out of memory for a blob chunk");
        break;
      }
      c->blob_starts[c->nstarts++] = idx;
    }
    if (c->len == 0)
      c->opened_ns = cucap_clock_now_ns();
    uint8_t *dst = c->buf + c->len;
    cucap_blob_piece_header(dst, hash, size, off, (uint32_t)n);
    if (n)
      memcpy(dst + CUCAP_BLOB_PIECE_HDR, src + off, n);
    memset(dst + CUCAP_BLOB_PIECE_HDR + n, 0, need - CUCAP_BLOB_PIECE_HDR - n);
    c->len += need;
    c->records++;
    off += n;
    if (c->len >= w->o.blob_chunk_size)
      wr_seal_locked(w, &w->blob_cur, 1);
  } while (off < size);
  pthread_mutex_unlock(&w->blob_mu);
  if (st == CUCAP_OK)
    STAT_ADD(w, st_blobs, 1);
  return st;
}

void cucap_writer_get_stats(cucap_writer *w, cucap_writer_stats *st) {
  if (!st)
    return;
  memset(st, 0, sizeof *st);
  if (!w)
    return;
  st->records = __atomic_load_n(&w->rec_count, __ATOMIC_RELAXED);
  st->chunks = __atomic_load_n(&w->st_chunks, __ATOMIC_RELAXED);
  st->blobs = __atomic_load_n(&w->st_blobs, __ATOMIC_RELAXED);
  st->blob_dedup_hits = __atomic_load_n(&w->st_dedup, __ATOMIC_RELAXED);
  st->raw_bytes = __atomic_load_n(&w->st_raw, __ATOMIC_RELAXED);
  st->file_bytes = __atomic_load_n(&w->st_file, __ATOMIC_RELAXED);
  st->producer_waits = __atomic_load_n(&w->st_waits, __ATOMIC_RELAXED);
  st->record_chunks = __atomic_load_n(&w->st_chunks_rec, __ATOMIC_RELAXED);
  st->record_raw_bytes = __atomic_load_n(&w->st_raw_rec, __ATOMIC_RELAXED);
  st->record_cpu_ns = __atomic_load_n(&w->st_cpu_rec, __ATOMIC_RELAXED);
  st->blob_cpu_ns = __atomic_load_n(&w->st_cpu_blob, __ATOMIC_RELAXED);
  clockid_t cid;
  struct timespec ts;
  if (w->thr_started && pthread_getcpuclockid(w->thr, &cid) == 0 &&
      clock_gettime(cid, &ts) == 0)
    st->thread_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
