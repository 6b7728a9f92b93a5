/* writer_io.c - the stream writer's output side (see writer.c for its
 * threads and locks): the background thread that pops sealed chunks,
 * compresses them and writes header + frame + padding, sealing chunks left
 * open past the flush interval; flush, the index and trailer at close,
 * destroy; and the CUCAP_TEST_KILL_AT hook of the kill tests. */
#include "cucap_vec.h"
#include "cucap_writer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "cucap_clock.h"
#include "cucap_hash.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "writer_internal.h"
#include "writer_state.h"

int wr_write_all(int fd, const void *p, size_t n) {
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

/* ---------------------------------------------------------------- test hook (see writer_state.h) */

void wr_test_kill_init(cucap_writer *w) {
  static const char *const names[] = {"", "header", "seal", "chunk_write",
                                      "blob_write", "chunk_done", "index_write",
                                      "trailer", "trailer_write"};
  const char *e = cucap_knob_str(CUCAP_KNOB(CUCAP_TEST_KILL_AT));
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

void wr_write_half_and_die(int fd, const void *buf, size_t n) {
  if (buf && n / 2)
    wr_write_all(fd, buf, n / 2);
  raise(SIGKILL);
}

/* ---------------------------------------------------------------- background */

static void write_chunk(cucap_writer *w, wchunk *c) {
  if (wr_get_err(w) != CUCAP_OK)
    return; /* discard: the error is already sticky */
  size_t bound = ZSTD_compressBound(c->len);
  size_t need = sizeof(cucap_chunk_header) + bound + 8;
  if (need > w->cbuf_cap) {
    uint8_t *nb = realloc(w->cbuf, need);
    if (!nb) {
      wr_fail(w, CUCAP_ERR_NOMEM, "out of memory for a %zu-byte compression buffer",
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
    wr_fail(w, CUCAP_ERR_COMPRESS, "zstd compression failed: %s",
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
  wr_test_kill(w, c->kind == CUCAP_FB_CHUNKKIND_BLOBS   ? TK_BLOB_WRITE
               : c->kind == CUCAP_FB_CHUNKKIND_INDEX ? TK_INDEX_WRITE
               : TK_CHUNK_WRITE,
               w->cbuf, total);
  if (wr_write_all(w->fd, w->cbuf, total) != 0) {
    wr_fail(w, CUCAP_ERR_IO, "writing a %zu-byte chunk at offset %llu failed: %s",
            total, (unsigned long long)w->file_off, strerror(errno));
    return;
  }
  if (w->o.sync_writes && fdatasync(w->fd) != 0) {
    wr_fail(w, CUCAP_ERR_IO, "fdatasync failed: %s", strerror(errno));
    return;
  }
  if (!CUCAP_VEC_RESERVE(w->entries, w->centries, w->nentries + 1, 256)) {
    wr_fail(w, CUCAP_ERR_NOMEM, "out of memory for the chunk index");
    return;
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
    wr_test_kill(w, TK_CHUNK_DONE, NULL, 0);
}

/* Seals chunks older than flush_interval_ms, without ever blocking. */
static void timer_seal(cucap_writer *w, uint64_t tick_ns) {
  /* Called every tick: seal what would be older than the interval by the
   * next tick, so no chunk stays open longer than flush_interval_ms. */
  uint64_t now = cucap_clock_now_ns() + tick_ns;
  uint64_t iv = (uint64_t)w->o.flush_interval_ms * 1000000ull;
  if (pthread_mutex_trylock(&w->blob_mu) == 0) {
    if (w->blob_cur && w->blob_cur->len && now - w->blob_cur->opened_ns >= iv)
      wr_seal_locked(w, &w->blob_cur, 0);
    pthread_mutex_unlock(&w->blob_mu);
  }
  if (pthread_mutex_trylock(&w->rec_mu) == 0) {
    if (w->rec_cur && w->rec_cur->len && now - w->rec_cur->opened_ns >= iv)
      wr_seal_locked(w, &w->rec_cur, 0);
    pthread_mutex_unlock(&w->rec_mu);
  }
}

/* CPU time of the calling thread (ns). */
uint64_t wr_thread_cpu_ns(void) {
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
    wchunk *c = wr_wchunk_get(w, CUCAP_FB_CHUNKKIND_RECORDS, 0);
    if (!c)
      return;
    memset(c->buf, 0, c->cap);
    pthread_mutex_lock(&w->q_mu);
    c->next = w->free_rec;
    w->free_rec = c;
    pthread_mutex_unlock(&w->q_mu);
  }
}

void *wr_bg_main(void *arg) {
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

    uint64_t cpu0 = wr_thread_cpu_ns();
    write_chunk(w, c);
    uint64_t cpu = wr_thread_cpu_ns() - cpu0;
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
      wr_seal_locked(w, &w->rec_cur, 0);
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
      wr_wchunk_free(c); /* oversize buffers are not kept */
    }
    pthread_cond_broadcast(&w->q_done);
  }
  pthread_mutex_unlock(&w->q_mu);
  return NULL;
}

/* ---------------------------------------------------------------- flush/close */

cucap_status cucap_writer_flush(cucap_writer *w) {
  CUCAP_RETURN_IF(!w, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(w->closed, CUCAP_ERR_STATE);
  pthread_mutex_lock(&w->rec_mu);
  pthread_mutex_lock(&w->blob_mu);
  wr_seal_locked(w, &w->blob_cur, 1);
  pthread_mutex_unlock(&w->blob_mu);
  wr_seal_locked(w, &w->rec_cur, 1);
  pthread_mutex_unlock(&w->rec_mu);
  pthread_mutex_lock(&w->q_mu);
  uint64_t target = w->sealed;
  while (w->done < target)
    pthread_cond_wait(&w->q_done, &w->q_mu);
  pthread_mutex_unlock(&w->q_mu);
  return wr_get_err(w);
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
  cucap_fb_chunk_index_add_end_mono_ns(b, w->o.end_mono_ns ? w->o.end_mono_ns : cucap_clock_now_ns());
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
  st = wr_get_err(w);
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
  wr_test_kill(w, TK_TRAILER, NULL, 0);
  wr_test_kill(w, TK_TRAILER_WRITE, &t, sizeof t);
  if (wr_write_all(w->fd, &t, sizeof t) != 0) {
    wr_fail(w, CUCAP_ERR_IO, "writing the trailer failed: %s", strerror(errno));
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
    st = wr_get_err(w);
  if (st == CUCAP_OK)
    st = write_index(w);
  if (st == CUCAP_OK && w->o.sync_writes && fdatasync(w->fd) != 0) {
    wr_fail(w, CUCAP_ERR_IO, "fdatasync failed: %s", strerror(errno));
    st = CUCAP_ERR_IO;
  }
  if (close(w->fd) != 0 && st == CUCAP_OK) {
    wr_fail(w, CUCAP_ERR_IO, "close failed: %s", strerror(errno));
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
  wr_wchunk_free(w->rec_cur);
  wr_wchunk_free(w->blob_cur);
  for (wchunk *c = w->free_rec, *n; c; c = n) {
    n = c->next;
    wr_wchunk_free(c);
  }
  for (wchunk *c = w->free_blob, *n; c; c = n) {
    n = c->next;
    wr_wchunk_free(c);
  }
  free(w->cbuf);
  free(w->entries);
  free(w->blobs);
  free(w->bset);
  wr_writer_free(w);
}
