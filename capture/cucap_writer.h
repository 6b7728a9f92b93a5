/* cucap_writer.h - writes a capture file (see docs/design.md, cucap_format.h).
 *
 * Thread-safe: any number of threads may append records and blobs. Appending
 * only copies into an in-memory chunk; a background thread compresses and
 * writes sealed chunks. The queue between them is bounded: when it is full,
 * appenders wait (back-pressure) - nothing is ever dropped.
 *
 * Ownership: the writer copies everything it is given; callers keep their
 * buffers. Nothing returned by the writer needs freeing except the writer
 * itself (cucap_writer_destroy). */
#ifndef CUCAP_WRITER_H
#define CUCAP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_format.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_writer cucap_writer;

typedef struct cucap_writer_options {
  int level;                  /* zstd level; 0 = default (1) */
  int nb_workers;             /* zstd worker threads; 0 = single-threaded */
  size_t chunk_size;          /* raw bytes per record chunk; 0 = 1 MiB */
  size_t blob_chunk_size;     /* raw bytes per blob chunk; 0 = 4 MiB */
  size_t queue_depth;         /* sealed chunks in flight; 0 = 8 */
  unsigned flush_interval_ms; /* seal a non-empty chunk at least this often; 0 = 500 */
  int sync_writes;            /* fdatasync after each chunk (slow; tests) */
  int record_level;           /* zstd level for record chunks (negative =
                                 zstd's fast levels); 0 = auto: -1 while
                                 level is the default 1 (same size on launch
                                 records, less CPU), else the same as level.
                                 Blob and index chunks always use level. */
  uint64_t end_mono_ns;       /* ChunkIndex.end_mono_ns written at close;
                                 0 = CLOCK_MONOTONIC then. Files derived
                                 from another capture (trim, extract) give
                                 the end of what they kept, on the source's
                                 clock. */
  int quiet_errors;           /* 1: I/O, memory and compression errors after
                                 create are not logged: the caller reports
                                 them (cucap_writer_last_error). Failures of
                                 create itself are always logged. */
} cucap_writer_options;

/* Fills defaults. */
void cucap_writer_options_init(cucap_writer_options *o);

/* Creates `path` (truncating) and writes the preamble and `header`, a
 * finished size-prefixed FileHeader FlatBuffer (verified here). opts may be
 * NULL. On failure *out is NULL, nothing is left open, the reason is logged
 * and a file whose header could not be written is removed. */
cucap_status cucap_writer_create(const char *path,
                                 const cucap_writer_options *opts,
                                 const void *header, size_t header_size,
                                 cucap_writer **out);

/* Appends one finished size-prefixed Record FlatBuffer (as produced by
 * cucap_fbb_finish(..., 1, ...)). Records appear in the file in append order.
 * Returns the record's 0-based position in the file (if pos != NULL). */
cucap_status cucap_writer_append(cucap_writer *w, const void *record,
                                 size_t size, uint64_t *pos);

/* Like cucap_writer_append, but numbers the record under the writer's own
 * lock: the writer takes seq = ++*counter and stores it (8 bytes, little-
 * endian as FlatBuffers) at byte `seq_offset` of its copy of the record -
 * normally the Record.seq field of a record built with seq present (e.g.
 * cucap_fb_record_add_seq(b, 0)); the caller's buffer is not modified. So
 * callers sharing one counter through one writer need no lock of their own
 * and seq order equals file order. `counter` is caller-owned, only ever
 * touched under the writer's record lock (don't read it concurrently without
 * your own synchronisation); seq_offset must lie in [8, size - 8].
 * *seq_out (may be NULL) receives the number given (unchanged on error). */
cucap_status cucap_writer_append_seq(cucap_writer *w, const void *record,
                                     size_t size, size_t seq_offset,
                                     uint64_t *counter, uint64_t *seq_out);

/* Stores `size` bytes as a content-addressed blob and returns its hash. If a
 * blob with the same hash was stored before, nothing is written again. */
cucap_status cucap_writer_put_blob(cucap_writer *w, const void *data,
                                   size_t size, cucap_hash128 *hash_out);

/* Stores a blob whose hash the caller already computed (avoids hashing
 * twice). The caller guarantees hash == XXH3-128(data). */
cucap_status cucap_writer_put_blob_hashed(cucap_writer *w, const void *data,
                                          size_t size, cucap_hash128 hash);

/* 1 if a blob with this hash is already stored (or queued). */
int cucap_writer_has_blob(cucap_writer *w, cucap_hash128 hash);

/* Seals the current chunks and waits until everything appended so far is
 * written to the file (not necessarily fsync'ed). */
cucap_status cucap_writer_flush(cucap_writer *w);

/* Flushes, writes the index chunk and trailer, closes the file. After close
 * only destroy is valid. Returns the first error the background thread hit,
 * if any. */
cucap_status cucap_writer_close(cucap_writer *w);

/* What the first (sticky) error was, e.g. "writing a 4096-byte chunk at
 * offset 8192: No space left on device"; "" if none. Owned by the writer,
 * valid until destroy; safe to call from any thread once an append or close
 * has returned that error. */
const char *cucap_writer_last_error(const cucap_writer *w);

/* Closes if still open (errors logged), joins the thread, frees. NULL ok. */
void cucap_writer_destroy(cucap_writer *w);

typedef struct cucap_writer_stats {
  uint64_t records;
  uint64_t chunks;
  uint64_t blobs;             /* unique blobs stored */
  uint64_t blob_dedup_hits;   /* put_blob calls that found the blob stored */
  uint64_t raw_bytes;         /* uncompressed payload bytes */
  uint64_t file_bytes;        /* bytes written to the file so far */
  uint64_t producer_waits;    /* times an appender waited on a full queue */
  /* The background thread's CPU time: compressing and writing record
   * chunks, and blob/index chunks (CLOCK_THREAD_CPUTIME_ID around each),
   * and its whole CPU time so far (0 once it has exited: after close). */
  uint64_t record_chunks, record_raw_bytes, record_cpu_ns, blob_cpu_ns;
  uint64_t thread_cpu_ns;
} cucap_writer_stats;

void cucap_writer_get_stats(cucap_writer *w, cucap_writer_stats *st);

#ifdef __cplusplus
}
#endif
#endif
