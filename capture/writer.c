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
#include "cucap_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "writer_internal.h"

#define CUCAP_WRITER_DEFAULT_RECORD_LEVEL (-1)
#ifndef CUCAP_WRITER_PREFETCH
#define CUCAP_WRITER_PREFETCH 4096 /* bytes ahead of the append position */
#endif

typedef struct wchunk {
  uint8_t *buf;
  size_t len, cap;
  uint32_t records;
  uint8_t kind;
  uint64_t min_seq, max_seq; /* nonzero Record.seq range (0,0: none) */
  uint64_t opened_ns;        /* CLOCK_MONOTONIC when the first byte went in */
  uint32_t *blob_starts;     /* blob table entries whose first piece is here */
  size_t nstarts, cstarts;
  struct wchunk *next;
} wchunk;

typedef struct chunk_entry {
  uint64_t offset, csize, raw;
  uint8_t kind;
  uint32_t records;
  uint64_t first_seq, last_seq;
} chunk_entry;

typedef struct blob_entry {
  cucap_hash128 hash;
  uint64_t size;
  uint32_t chunk;
  uint32_t pieces;
} blob_entry;

struct cucap_writer {
  /* What every record append touches, first and together (the struct is
   * 64-byte aligned): the lock, the open chunk, the counters - two cache
   * lines, instead of five spread over the struct (a training step's own
   * work evicts them between two launches). */
  pthread_mutex_t rec_mu;
  wchunk *rec_cur;
  uint64_t rec_count;
  size_t rec_chunk_size; /* o.chunk_size */
  int err; /* cucap_status, sticky; __atomic access */
  int closed;
  uint64_t st_records; /* __atomic, relaxed (stats) */

  int fd;
  cucap_writer_options o;
  size_t rec_cap, blob_cap; /* standard buffer capacities */

  pthread_mutex_t blob_mu;
  wchunk *blob_cur;
  blob_entry *blobs;
  size_t nblobs, cblobs;
  uint32_t *bset; /* open addressing: blob index + 1, 0 = empty */
  size_t bset_cap;

  pthread_mutex_t q_mu;
  pthread_cond_t q_nonempty, q_space, q_done;
  wchunk *q_head, *q_tail;
  size_t q_len;
  uint64_t sealed, done;
  wchunk *free_rec, *free_blob;
  int stop;

  pthread_t thr;
  int thr_started;
  ZSTD_CCtx *cctx;      /* blob + index chunks (level) */
  ZSTD_CCtx *rec_cctx;  /* record chunks (record_level); NULL: use cctx */
  uint8_t *cbuf;
  size_t cbuf_cap;
  uint64_t file_off;         /* background thread (and close after join) */
  chunk_entry *entries;      /* written chunks, file order */
  size_t nentries, centries;

  char errmsg[256]; /* the first error, written before err is set */
  int err_claimed;  /* 1 once a thread owns errmsg (__atomic) */
  cucap_status close_status;

  /* stats (__atomic, relaxed) */
  uint64_t st_chunks, st_blobs, st_dedup, st_raw, st_file, st_waits;
  uint64_t st_cpu_rec, st_cpu_blob, st_raw_rec, st_chunks_rec;

  int tk_point;               /* CUCAP_TEST_KILL_AT (see test_kill) */
  unsigned long tk_nth, tk_count;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_err(cucap_writer *w, cucap_status s) {
  int expected = CUCAP_OK;
  __atomic_compare_exchange_n(&w->err, &expected, (int)s, 0, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
}
static cucap_status get_err(cucap_writer *w) {
  return (cucap_status)__atomic_load_n(&w->err, __ATOMIC_ACQUIRE);
}

/* Records the first error with its message (logged unless quiet_errors):
 * the thread that claims errmsg writes it, then publishes the status. Any
 * thread may call it. */
static void fail(cucap_writer *w, cucap_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(cucap_writer *w, cucap_status s, const char *fmt, ...) {
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
#define STAT_ADD(w, f, n) __atomic_fetch_add(&(w)->f, (n), __ATOMIC_RELAXED)

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

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t k = write(fd, b, n);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (k == 0) {
      errno = EIO;
      return -1;
    }
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* ---------------------------------------------------------------- test hook
 * CUCAP_TEST_KILL_AT=POINT[:N], for the kill tests only (inert unless set,
 * read once per writer): the writer raises SIGKILL the N-th time (default
 * the first) it reaches POINT, so a recording can be killed at an exact
 * moment. Points: header (file header written, no chunk yet), seal (a chunk
 * queued, not yet written), chunk_write / blob_write / index_write (half of
 * a record / blob / index chunk written), chunk_done (a record or blob chunk
 * completely written), trailer (index written, no trailer), trailer_write
 * (half of the trailer written). */
enum { TK_NONE, TK_HEADER, TK_SEAL, TK_CHUNK_WRITE, TK_BLOB_WRITE, TK_CHUNK_DONE,
       TK_INDEX_WRITE, TK_TRAILER, TK_TRAILER_WRITE };

static void test_kill_init(cucap_writer *w) {
  static const char *const names[] = {"", "header", "seal", "chunk_write",
                                      "blob_write", "chunk_done", "index_write",
                                      "trailer", "trailer_write"};
  const char *e = getenv("CUCAP_TEST_KILL_AT");
  if (!e || !*e)
    return;
  size_t n = strcspn(e, ":");
  for (int i = 1; i < (int)(sizeof names / sizeof names[0]); i++)
    if (strlen(names[i]) == n && !strncmp(e, names[i], n))
      w->tk_point = i;
  w->tk_nth = e[n] == ':' ? strtoul(e + n + 1, NULL, 10) : 1;
  if (!w->tk_nth)
    w->tk_nth = 1;
}

static void write_half_and_die(int fd, const void *buf, size_t n);
static inline void test_kill(cucap_writer *w, int point, const void *buf,
                             size_t n) {
  if (__builtin_expect(w->tk_point != point, 1) ||
      __atomic_add_fetch(&w->tk_count, 1, __ATOMIC_RELAXED) != w->tk_nth)
    return;
  write_half_and_die(w->fd, buf, n);
}

static void write_half_and_die(int fd, const void *buf, size_t n) {
  if (buf && n / 2)
    write_all(fd, buf, n / 2);
  raise(SIGKILL);
}

/* ---------------------------------------------------------------- buffers */

static void wchunk_free(wchunk *c) {
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
static wchunk *wchunk_get(cucap_writer *w, uint8_t kind, size_t need) {
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
    size_t csize = (sizeof *c + 63) & ~(size_t)63;
    c = aligned_alloc(64, csize);
    if (!c)
      return NULL;
    memset(c, 0, csize);
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
static int seal_locked(cucap_writer *w, wchunk **curp, int may_wait) {
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
  test_kill(w, TK_SEAL, NULL, 0);
  STAT_ADD(w, st_raw, raw);
  *curp = NULL; /* a fresh buffer is taken on the next append */
  return 1;
}

/* ---------------------------------------------------------------- background */

static void write_chunk(cucap_writer *w, wchunk *c) {
  if (get_err(w) != CUCAP_OK)
    return; /* discard: the error is already sticky */
  size_t bound = ZSTD_compressBound(c->len);
  size_t need = sizeof(cucap_chunk_header) + bound + 8;
  if (need > w->cbuf_cap) {
    uint8_t *nb = realloc(w->cbuf, need);
    if (!nb) {
      fail(w, CUCAP_ERR_NOMEM, "out of memory for a %zu-byte compression buffer",
           need);
      return;
    }
    w->cbuf = nb;
    w->cbuf_cap = need;
  }
  uint8_t *payload = w->cbuf + sizeof(cucap_chunk_header);
  ZSTD_CCtx *cx = c->kind == CUCAP_FB_CHUNKKIND_RECORDS && w->rec_cctx
                      ? w->rec_cctx
                      : w->cctx;
  size_t cs = ZSTD_compress2(cx, payload, bound, c->buf, c->len);
  if (ZSTD_isError(cs)) {
    fail(w, CUCAP_ERR_COMPRESS, "zstd compression failed: %s",
         ZSTD_getErrorName(cs));
    return;
  }
  cucap_chunk_header h;
  memset(&h, 0, sizeof h);
  h.magic = CUCAP_CHUNK_MAGIC;
  h.kind = c->kind;
  h.codec = CUCAP_CODEC_ZSTD;
  h.records = c->records;
  h.compressed_size = cs;
  h.raw_size = c->len;
  h.payload_check = cucap_check32(payload, cs);
  h.header_check = cucap_check32(&h, 36);
  memcpy(w->cbuf, &h, sizeof h);
  size_t total = cucap_align8(sizeof h + cs);
  memset(w->cbuf + sizeof h + cs, 0, total - sizeof h - cs);
  test_kill(w, c->kind == CUCAP_FB_CHUNKKIND_BLOBS   ? TK_BLOB_WRITE
               : c->kind == CUCAP_FB_CHUNKKIND_INDEX ? TK_INDEX_WRITE
                                                     : TK_CHUNK_WRITE,
            w->cbuf, total);
  if (write_all(w->fd, w->cbuf, total) != 0) {
    fail(w, CUCAP_ERR_IO, "writing a %zu-byte chunk at offset %llu failed: %s",
         total, (unsigned long long)w->file_off, strerror(errno));
    return;
  }
  if (w->o.sync_writes && fdatasync(w->fd) != 0) {
    fail(w, CUCAP_ERR_IO, "fdatasync failed: %s", strerror(errno));
    return;
  }
  if (w->nentries == w->centries) {
    size_t nc = w->centries ? w->centries * 2 : 256;
    chunk_entry *ne = realloc(w->entries, nc * sizeof *ne);
    if (!ne) {
      fail(w, CUCAP_ERR_NOMEM, "out of memory for the chunk index");
      return;
    }
    w->entries = ne;
    w->centries = nc;
  }
  chunk_entry *e = &w->entries[w->nentries++];
  e->offset = w->file_off;
  e->csize = cs;
  e->raw = c->len;
  e->kind = c->kind;
  e->records = c->records;
  e->first_seq = c->min_seq;
  e->last_seq = c->max_seq;
  w->file_off += total;
  STAT_ADD(w, st_file, total);
  STAT_ADD(w, st_chunks, 1);
  if (c->kind != CUCAP_FB_CHUNKKIND_INDEX)
    test_kill(w, TK_CHUNK_DONE, NULL, 0);
}

/* Seals chunks older than flush_interval_ms, without ever blocking. */
static void timer_seal(cucap_writer *w, uint64_t tick_ns) {
  /* Called every tick: seal what would be older than the interval by the
   * next tick, so no chunk stays open longer than flush_interval_ms. */
  uint64_t now = now_ns() + tick_ns;
  uint64_t iv = (uint64_t)w->o.flush_interval_ms * 1000000ull;
  if (pthread_mutex_trylock(&w->blob_mu) == 0) {
    if (w->blob_cur && w->blob_cur->len && now - w->blob_cur->opened_ns >= iv)
      seal_locked(w, &w->blob_cur, 0);
    pthread_mutex_unlock(&w->blob_mu);
  }
  if (pthread_mutex_trylock(&w->rec_mu) == 0) {
    if (w->rec_cur && w->rec_cur->len && now - w->rec_cur->opened_ns >= iv)
      seal_locked(w, &w->rec_cur, 0);
    pthread_mutex_unlock(&w->rec_mu);
  }
}

/* CPU time of the calling thread (ns). */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fresh record-chunk buffers are faulted in here, on this thread, so that
 * the first appends into them (on the program's threads, inside a traced
 * training step) do not take the page faults: `n` buffers go to the free
 * list before the first chunk is sealed. */
static void prefault_record_buffers(cucap_writer *w, int n) {
  for (int i = 0; i < n; i++) {
    wchunk *c = wchunk_get(w, CUCAP_FB_CHUNKKIND_RECORDS, 0);
    if (!c)
      return;
    memset(c->buf, 0, c->cap);
    pthread_mutex_lock(&w->q_mu);
    c->next = w->free_rec;
    w->free_rec = c;
    pthread_mutex_unlock(&w->q_mu);
  }
}

static void *bg_main(void *arg) {
  cucap_writer *w = arg;
  prefault_record_buffers(w, 2);
  unsigned tick_ms = w->o.flush_interval_ms / 4;
  if (tick_ms == 0)
    tick_ms = 1;
  pthread_mutex_lock(&w->q_mu);
  for (;;) {
    while (!w->q_head && !w->stop) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)tick_ms * 1000000ull;
      ts.tv_sec += (time_t)(ns / 1000000000ull);
      ts.tv_nsec = (long)(ns % 1000000000ull);
      int rc = pthread_cond_timedwait(&w->q_nonempty, &w->q_mu, &ts);
      if (rc == ETIMEDOUT && !w->q_head && !w->stop) {
        pthread_mutex_unlock(&w->q_mu);
        timer_seal(w, (uint64_t)tick_ms * 1000000ull);
        pthread_mutex_lock(&w->q_mu);
      }
    }
    if (!w->q_head)
      break; /* stop requested and queue drained */
    wchunk *c = w->q_head;
    w->q_head = c->next;
    if (!w->q_head)
      w->q_tail = NULL;
    w->q_len--;
    pthread_cond_broadcast(&w->q_space);
    pthread_mutex_unlock(&w->q_mu);

    uint64_t cpu0 = thread_cpu_ns();
    write_chunk(w, c);
    uint64_t cpu = thread_cpu_ns() - cpu0;
    if (c->kind == CUCAP_FB_CHUNKKIND_RECORDS) {
      STAT_ADD(w, st_cpu_rec, cpu);
      STAT_ADD(w, st_raw_rec, c->len);
      STAT_ADD(w, st_chunks_rec, 1);
    } else {
      STAT_ADD(w, st_cpu_blob, cpu);
    }
    if (c->kind == CUCAP_FB_CHUNKKIND_BLOBS && pthread_mutex_trylock(&w->rec_mu) == 0) {
      /* The records that refer to these blobs follow them to disk now
       * instead of waiting for the flush interval: a killed program then
       * rarely leaves blobs without the calls that used them. */
      seal_locked(w, &w->rec_cur, 0);
      pthread_mutex_unlock(&w->rec_mu);
    }

    pthread_mutex_lock(&w->q_mu);
    w->done++;
    size_t std = c->kind == CUCAP_FB_CHUNKKIND_BLOBS ? w->blob_cap : w->rec_cap;
    if (c->cap == std) {
      wchunk **fl =
          c->kind == CUCAP_FB_CHUNKKIND_BLOBS ? &w->free_blob : &w->free_rec;
      c->next = *fl;
      *fl = c;
    } else {
      wchunk_free(c); /* oversize buffers are not kept */
    }
    pthread_cond_broadcast(&w->q_done);
  }
  pthread_mutex_unlock(&w->q_mu);
  return NULL;
}

/* ---------------------------------------------------------------- create */

/* The teardown that cucap_writer_create's failure path and
 * cucap_writer_destroy share: the compressors, the locks, the writer. */
static void writer_free(cucap_writer *w) {
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

  size_t wsize = (sizeof(cucap_writer) + 63) & ~(size_t)63;
  cucap_writer *w = aligned_alloc(64, wsize);
  CUCAP_RETURN_IF(!w, CUCAP_ERR_NOMEM);
  memset(w, 0, wsize);
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
  w->fd = -1;
  pthread_mutex_init(&w->rec_mu, NULL);
  pthread_mutex_init(&w->blob_mu, NULL);
  pthread_mutex_init(&w->q_mu, NULL);
  pthread_cond_init(&w->q_nonempty, NULL);
  pthread_cond_init(&w->q_space, NULL);
  pthread_cond_init(&w->q_done, NULL);

  cucap_status st = CUCAP_OK;
  w->cctx = ZSTD_createCCtx();
  if (!w->cctx) {
    st = CUCAP_ERR_NOMEM;
    goto fail;
  }
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
    if (!w->rec_cctx) {
      st = CUCAP_ERR_NOMEM;
      goto fail;
    }
    int lv = w->o.record_level;
    if (lv < ZSTD_minCLevel())
      lv = ZSTD_minCLevel();
    ZSTD_CCtx_setParameter(w->rec_cctx, ZSTD_c_compressionLevel, lv);
    ZSTD_CCtx_setParameter(w->rec_cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(w->rec_cctx, ZSTD_c_contentSizeFlag, 1);
  }

  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    CUCAP_ERROR("cannot create capture file %s: %s", path, strerror(errno));
    st = CUCAP_ERR_IO;
    goto fail;
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
  if (write_all(w->fd, &pre, sizeof pre) || write_all(w->fd, header, header_size) ||
      write_all(w->fd, zeros, pad)) {
    CUCAP_ERROR("cannot create capture file %s: writing its header failed: %s",
                path, strerror(errno));
    st = CUCAP_ERR_IO;
    /* nothing readable: do not leave a stub (O_TRUNC already emptied it) -
     * a regular file only (never a device such as /dev/full) */
    struct stat sb;
    if (fstat(w->fd, &sb) == 0 && S_ISREG(sb.st_mode))
      unlink(path);
    goto fail;
  }
  w->file_off = sizeof pre + header_size + pad;
  w->st_file = w->file_off;
  test_kill_init(w);
  test_kill(w, TK_HEADER, NULL, 0);
  /* The writer's thread takes none of the program's signals (a signal
   * handler that closes the capture must not run on the thread that writes
   * it): it starts with every signal blocked. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int prc = pthread_create(&w->thr, NULL, bg_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (prc != 0) {
    st = CUCAP_ERR_INTERNAL;
    goto fail;
  }
  w->thr_started = 1;
  *out = w;
  return CUCAP_OK;
fail:
  if (w->fd >= 0)
    close(w->fd);
  writer_free(w);
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
  cucap_status e = get_err(w);
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
        seal_locked(w, &w->blob_cur, 1);
        pthread_mutex_unlock(&w->blob_mu);
      }
      if (c->len)
        seal_locked(w, &w->rec_cur, 1);
      else
        wchunk_free(c);
    }
    c = w->rec_cur = wchunk_get(w, CUCAP_FB_CHUNKKIND_RECORDS, need);
    if (!c) {
      /* sticky: a capture missing records must not end with an index */
      fail(w, CUCAP_ERR_NOMEM, "out of memory for a %zu-byte record chunk", need);
      pthread_mutex_unlock(&w->rec_mu);
      return CUCAP_ERR_NOMEM;
    }
  }
  if (c->len == 0)
    c->opened_ns = now_ns();
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
  uint64_t p = w->rec_count++;
  __atomic_store_n(&w->st_records, w->rec_count, __ATOMIC_RELAXED);
  if (c->len >= w->rec_chunk_size)
    seal_locked(w, &w->rec_cur, 1);
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
  cucap_status st = get_err(w);
  if (st != CUCAP_OK || w->closed) {
    pthread_mutex_unlock(&w->blob_mu);
    return st != CUCAP_OK ? st : CUCAP_ERR_STATE;
  }
  if (bset_find(w, hash) >= 0) {
    pthread_mutex_unlock(&w->blob_mu);
    STAT_ADD(w, st_dedup, 1);
    return CUCAP_OK;
  }
  if (w->nblobs == w->cblobs) {
    size_t nc = w->cblobs ? w->cblobs * 2 : 256;
    blob_entry *nb = realloc(w->blobs, nc * sizeof *nb);
    if (!nb) {
      pthread_mutex_unlock(&w->blob_mu);
      return CUCAP_ERR_NOMEM;
    }
    w->blobs = nb;
    w->cblobs = nc;
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
        seal_locked(w, &w->blob_cur, 1);
      else
        wchunk_free(c);
      c = w->blob_cur = wchunk_get(w, CUCAP_FB_CHUNKKIND_BLOBS, need);
      if (!c) {
        st = CUCAP_ERR_NOMEM;
        /* the blob table now names a blob that is missing */
        fail(w, st, "out of memory for a blob chunk");
        break;
      }
    }
    if (off == 0) {
      if (c->nstarts == c->cstarts) {
        size_t nc = c->cstarts ? c->cstarts * 2 : 16;
        uint32_t *ns = realloc(c->blob_starts, nc * sizeof *ns);
        if (!ns) {
          st = CUCAP_ERR_NOMEM;
          fail(w, st, "out of memory for a blob chunk");
          break;
        }
        c->blob_starts = ns;
        c->cstarts = nc;
      }
      c->blob_starts[c->nstarts++] = idx;
    }
    if (c->len == 0)
      c->opened_ns = now_ns();
    uint8_t *dst = c->buf + c->len;
    cucap_blob_piece_header(dst, hash, size, off, (uint32_t)n);
    if (n)
      memcpy(dst + CUCAP_BLOB_PIECE_HDR, src + off, n);
    memset(dst + CUCAP_BLOB_PIECE_HDR + n, 0, need - CUCAP_BLOB_PIECE_HDR - n);
    c->len += need;
    c->records++;
    off += n;
    if (c->len >= w->o.blob_chunk_size)
      seal_locked(w, &w->blob_cur, 1);
  } while (off < size);
  pthread_mutex_unlock(&w->blob_mu);
  if (st == CUCAP_OK)
    STAT_ADD(w, st_blobs, 1);
  return st;
}

/* ---------------------------------------------------------------- flush/close */

cucap_status cucap_writer_flush(cucap_writer *w) {
  CUCAP_RETURN_IF(!w, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(w->closed, CUCAP_ERR_STATE);
  pthread_mutex_lock(&w->rec_mu);
  pthread_mutex_lock(&w->blob_mu);
  seal_locked(w, &w->blob_cur, 1);
  pthread_mutex_unlock(&w->blob_mu);
  seal_locked(w, &w->rec_cur, 1);
  pthread_mutex_unlock(&w->rec_mu);
  pthread_mutex_lock(&w->q_mu);
  uint64_t target = w->sealed;
  while (w->done < target)
    pthread_cond_wait(&w->q_done, &w->q_mu);
  pthread_mutex_unlock(&w->q_mu);
  return get_err(w);
}

/* Builds the ChunkIndex, writes it as an Index chunk, then the trailer.
 * Runs on the closing thread after the background thread has exited. */
static cucap_status write_index(cucap_writer *w) {
  cucap_fbb *b = cucap_fbb_create(4096 + w->nentries * 80 + w->nblobs * 64);
  CUCAP_RETURN_IF(!b, CUCAP_ERR_NOMEM);
  cucap_status st = CUCAP_OK;
  cucap_fb_ref *refs = NULL;
  size_t nrefs = w->nentries > w->nblobs ? w->nentries : w->nblobs;
  refs = malloc((nrefs ? nrefs : 1) * sizeof *refs);
  if (!refs) {
    cucap_fbb_destroy(b);
    return CUCAP_ERR_NOMEM;
  }
  for (size_t i = 0; i < w->nentries; i++) {
    const chunk_entry *e = &w->entries[i];
    cucap_fb_chunk_entry_start(b);
    cucap_fb_chunk_entry_add_offset(b, e->offset);
    cucap_fb_chunk_entry_add_compressed_size(b, e->csize);
    cucap_fb_chunk_entry_add_raw_size(b, e->raw);
    cucap_fb_chunk_entry_add_kind(b, e->kind);
    cucap_fb_chunk_entry_add_records(b, e->records);
    cucap_fb_chunk_entry_add_first_seq(b, e->first_seq);
    cucap_fb_chunk_entry_add_last_seq(b, e->last_seq);
    refs[i] = cucap_fb_chunk_entry_end(b);
  }
  cucap_fb_ref chunks = cucap_fbb_vector_refs(b, refs, w->nentries);
  for (size_t i = 0; i < w->nblobs; i++) {
    const blob_entry *e = &w->blobs[i];
    cucap_fb_hash128 fh;
    fh.lo = e->hash.lo;
    fh.hi = e->hash.hi;
    cucap_fb_blob_entry_start(b);
    cucap_fb_blob_entry_add_hash(b, &fh);
    cucap_fb_blob_entry_add_size(b, e->size);
    cucap_fb_blob_entry_add_chunk(b, e->chunk);
    cucap_fb_blob_entry_add_pieces(b, e->pieces);
    refs[i] = cucap_fb_blob_entry_end(b);
  }
  cucap_fb_ref blobs = cucap_fbb_vector_refs(b, refs, w->nblobs);
  cucap_fb_chunk_index_start(b);
  cucap_fb_chunk_index_add_chunks(b, chunks);
  cucap_fb_chunk_index_add_blobs(b, blobs);
  cucap_fb_chunk_index_add_records(b, w->rec_count);
  cucap_fb_chunk_index_add_end_mono_ns(b, w->o.end_mono_ns ? w->o.end_mono_ns : now_ns());
  cucap_fb_chunk_index_add_complete(b, 1);
  cucap_fb_ref root = cucap_fb_chunk_index_end(b);
  size_t isz = 0;
  const uint8_t *ibuf = cucap_fbb_finish(b, root, 1, &isz);
  free(refs);
  if (!ibuf) {
    cucap_fbb_destroy(b);
    return CUCAP_ERR_NOMEM;
  }
  wchunk c;
  memset(&c, 0, sizeof c);
  c.buf = (uint8_t *)ibuf;
  c.len = isz;
  c.cap = isz;
  c.kind = CUCAP_FB_CHUNKKIND_INDEX;
  c.records = 1;
  uint64_t index_off = w->file_off;
  size_t nent = w->nentries;
  write_chunk(w, &c);
  cucap_fbb_destroy(b);
  st = get_err(w);
  if (st != CUCAP_OK)
    return st;
  w->nentries = nent; /* the index chunk is not one of its own entries */
  STAT_ADD(w, st_chunks, (uint64_t)-1);
  cucap_trailer t;
  memset(&t, 0, sizeof t);
  t.index_offset = index_off;
  t.index_size = w->file_off - index_off;
  t.file_size = w->file_off + sizeof t;
  t.check = cucap_check32(&t, 24); /* the 24 bytes before `check` */
  t.magic = CUCAP_TRAILER_MAGIC;
  test_kill(w, TK_TRAILER, NULL, 0);
  test_kill(w, TK_TRAILER_WRITE, &t, sizeof t);
  if (write_all(w->fd, &t, sizeof t) != 0) {
    fail(w, CUCAP_ERR_IO, "writing the trailer failed: %s", strerror(errno));
    return CUCAP_ERR_IO;
  }
  w->file_off += sizeof t;
  STAT_ADD(w, st_file, sizeof t);
  return CUCAP_OK;
}

cucap_status cucap_writer_close(cucap_writer *w) {
  CUCAP_RETURN_IF(!w, CUCAP_ERR_INVALID_ARG);
  if (w->closed)
    return w->close_status;
  cucap_status st = cucap_writer_flush(w);
  pthread_mutex_lock(&w->rec_mu);
  pthread_mutex_lock(&w->blob_mu);
  w->closed = 1; /* appends from now on fail with CUCAP_ERR_STATE */
  pthread_mutex_unlock(&w->blob_mu);
  pthread_mutex_unlock(&w->rec_mu);
  if (w->thr_started) {
    pthread_mutex_lock(&w->q_mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->q_nonempty);
    pthread_mutex_unlock(&w->q_mu);
    pthread_join(w->thr, NULL);
    w->thr_started = 0;
  }
  if (st == CUCAP_OK)
    st = get_err(w);
  if (st == CUCAP_OK)
    st = write_index(w);
  if (st == CUCAP_OK && w->o.sync_writes && fdatasync(w->fd) != 0) {
    fail(w, CUCAP_ERR_IO, "fdatasync failed: %s", strerror(errno));
    st = CUCAP_ERR_IO;
  }
  if (close(w->fd) != 0 && st == CUCAP_OK) {
    fail(w, CUCAP_ERR_IO, "close failed: %s", strerror(errno));
    st = CUCAP_ERR_IO;
  }
  w->fd = -1;
  w->close_status = st;
  return st;
}

void cucap_writer_destroy(cucap_writer *w) {
  if (!w)
    return;
  if (!w->closed) {
    cucap_status st = cucap_writer_close(w);
    if (st != CUCAP_OK && !w->o.quiet_errors)
      CUCAP_ERROR("writer: close on destroy failed: %s", cucap_status_str(st));
  }
  wchunk_free(w->rec_cur);
  wchunk_free(w->blob_cur);
  for (wchunk *c = w->free_rec, *n; c; c = n) {
    n = c->next;
    wchunk_free(c);
  }
  for (wchunk *c = w->free_blob, *n; c; c = n) {
    n = c->next;
    wchunk_free(c);
  }
  free(w->cbuf);
  free(w->entries);
  free(w->blobs);
  free(w->bset);
  writer_free(w);
}

void cucap_writer_get_stats(cucap_writer *w, cucap_writer_stats *st) {
  if (!st)
    return;
  memset(st, 0, sizeof *st);
  if (!w)
    return;
  st->records = __atomic_load_n(&w->st_records, __ATOMIC_RELAXED);
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
