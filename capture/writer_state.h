/* writer_state.h - the stream writer's state, shared by its two files:
 * writer.c (create, record appends, blobs, stats) and writer_io.c (the
 * background thread that compresses and writes chunks; flush, the index,
 * close, destroy; the kill-test hook). Not a public header: the API is
 * cucap_writer.h; the locks and their order are described in writer.c. */
#ifndef CUCAP_WRITER_STATE_H
#define CUCAP_WRITER_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <zstd.h>

#include "cucap_writer.h"

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
   * 64-byte aligned): the lock, the open chunk and the count in the first
   * line, which every append writes; the sticky error and the closed flag
   * in the second, which appends only read, so that line stays shared in
   * every appending thread's cache (two lines, instead of five spread over
   * the struct: a training step's own work evicts them between launches). */
  pthread_mutex_t rec_mu;
  wchunk *rec_cur;
  uint64_t rec_count; /* written under rec_mu; __atomic (stats read it) */
  size_t rec_chunk_size; /* o.chunk_size */
  int err; /* cucap_status, sticky; __atomic access */
  int closed;

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

#define STAT_ADD(w, f, n) __atomic_fetch_add(&(w)->f, (n), __ATOMIC_RELAXED)

static inline cucap_status wr_get_err(cucap_writer *w) {
  return (cucap_status)__atomic_load_n(&w->err, __ATOMIC_ACQUIRE);
}
/* writer.c */
/* Records the first error with its message (logged unless quiet_errors):
 * the thread that claims errmsg writes it, then publishes the status. Any
 * thread may call it. */
void wr_fail(cucap_writer *w, cucap_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void wr_wchunk_free(wchunk *c); /* accepts NULL */
/* A free buffer of kind (or a new one) with room for need bytes; NULL when
 * out of memory. */
wchunk *wr_wchunk_get(cucap_writer *w, uint8_t kind, size_t need);
/* Queues *curp for the background thread (its lock held; may_wait: block
 * for queue space); 0 when the writer failed. */
int wr_seal_locked(cucap_writer *w, wchunk **curp, int may_wait);
void wr_writer_free(cucap_writer *w);

/* writer_io.c */
int wr_write_all(int fd, const void *p, size_t n); /* 0, or -1 with errno */
void *wr_bg_main(void *arg); /* the background thread (arg: the writer) */
uint64_t wr_thread_cpu_ns(void); /* the calling thread's CPU time */
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
void wr_test_kill_init(cucap_writer *w);
void wr_write_half_and_die(int fd, const void *buf, size_t n);
static inline void wr_test_kill(cucap_writer *w, int point, const void *buf,
                                size_t n) {
  if (__builtin_expect(w->tk_point != point, 1) ||
      __atomic_add_fetch(&w->tk_count, 1, __ATOMIC_RELAXED) != w->tk_nth)
    return;
  wr_write_half_and_die(w->fd, buf, n);
}

#endif
