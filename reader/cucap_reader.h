/* cucap_reader.h - reads a capture file (see docs/design.md, cucap_format.h).
 *
 * Every record handed out has passed the FlatBuffers verifier. A file without
 * a valid trailer (killed app) or with a damaged chunk is read up to the last
 * good chunk; cucap_reader_recovery() tells how much was recovered. A reader
 * is used by one thread at a time. */
#ifndef CUCAP_READER_H
#define CUCAP_READER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_format.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_reader cucap_reader;

typedef struct cucap_reader_options {
  int strict;        /* 1: any damage is an error (no recovery) */
  /* 0 (default): blobs are decoded by the calling thread only. N > 0: the
   * reader also owns N worker threads (started by the first blob read,
   * joined by cucap_reader_destroy; N is capped at 64) that decode and
   * checksum-check, in file order, the 2*N blob chunks following the one
   * blob_read/blob_map last visited, so a caller reading blobs in file order
   * overlaps their decompression. Results and errors are the same as with
   * 0: a damaged chunk is reported, with the same status, when a read
   * reaches it. Memory: up to 2*N decoded blob chunks besides the one the
   * reader always keeps (4 MiB each for the writer's usual blob chunks,
   * CUCAP_MAX_CHUNK_RAW at most). The reader is still used by one thread
   * at a time. If threads cannot be started it decodes synchronously. */
  int decode_threads;
} cucap_reader_options;

/* Opens and validates preamble + header, loads the index (or scans the file
 * when the index is missing/damaged). opts may be NULL. On error *out is NULL
 * and, if msg != NULL, a static or reader-independent message buffer of
 * msg_size bytes receives a human-readable explanation. */
cucap_status cucap_reader_open(const char *path,
                               const cucap_reader_options *opts,
                               cucap_reader **out, char *msg, size_t msg_size);

/* Same as cucap_reader_open, for a capture held in memory (fuzzing, tests):
 * the reader copies the size bytes at data; the caller keeps its buffer. */
cucap_status cucap_reader_open_memory(const void *data, size_t size,
                                      const cucap_reader_options *opts,
                                      cucap_reader **out, char *msg,
                                      size_t msg_size);

void cucap_reader_destroy(cucap_reader *r); /* NULL ok */

/* Human-readable explanation of the last error returned by next/blob_* ("" if
 * none). Owned by the reader; valid until the next call on it or destroy. */
const char *cucap_reader_last_error(const cucap_reader *r);

/* Format version found in the file. */
void cucap_reader_version(const cucap_reader *r, unsigned *major,
                          unsigned *minor);

/* The verified FileHeader table (cast to const cucap_fb_file_header *) and
 * its buffer. Valid until destroy. */
const void *cucap_reader_header(const cucap_reader *r);
const void *cucap_reader_header_buffer(const cucap_reader *r, size_t *size);

/* Iterates records of record chunks in file order (blob chunks are skipped).
 * *record receives the verified Record table (const cucap_fb_record *) and
 * *buf and *size the size-prefixed buffer it lives in; both are valid until the
 * next call to next/rewind/destroy. Returns CUCAP_OK, CUCAP_END at the end, or
 * an error (after which iteration stops; what was returned stays valid). */
cucap_status cucap_reader_next(cucap_reader *r, const void **record,
                               const void **buf, size_t *size);
cucap_status cucap_reader_rewind(cucap_reader *r);

/* Blobs. size: total bytes. read: copies into dst (cap >= size). map returns
 * a pointer to the whole blob owned by the reader (cached; valid until
 * destroy) - convenient for module images; avoid for huge blobs. */
cucap_status cucap_reader_blob_size(cucap_reader *r, cucap_hash128 h,
                                    uint64_t *size);
cucap_status cucap_reader_blob_read(cucap_reader *r, cucap_hash128 h,
                                    void *dst, uint64_t cap);
cucap_status cucap_reader_blob_map(cucap_reader *r, cucap_hash128 h,
                                   const void **data, uint64_t *size);

/* Largest kernel argument block a capture may describe (the driver's limit
 * is 32,764 bytes): recorded layouts and argument blobs past it are not used. */
#define CUCAP_READER_MAX_PARAM_BYTES ((size_t)1 << 20)

/* A Launch body's argument block, stored inline in its record or, when
 * large, as a blob. launch: a verified Launch table (const cucap_fb_launch *)
 * of a record this reader returned. size: its bytes. read: copies it into
 * dst (cap >= size; CUCAP_ERR_INVALID_ARG otherwise). A blob that is
 * missing gives CUCAP_ERR_NOT_FOUND, a damaged one the read's error. */
cucap_status cucap_reader_launch_args_size(cucap_reader *r, const void *launch,
                                           uint64_t *size);
cucap_status cucap_reader_launch_args_read(cucap_reader *r, const void *launch,
                                           void *dst, uint64_t cap);

typedef struct cucap_reader_recovery {
  int complete;              /* 1: trailer + index valid, nothing damaged */
  int used_index;            /* 1: chunks located via the index */
  uint64_t file_size;
  uint64_t good_bytes;       /* bytes up to the end of the last good chunk */
  uint64_t chunks;           /* good chunks found */
  uint64_t record_chunks;
  uint64_t blob_chunks;
  uint64_t records;          /* records in good record chunks (known after a full pass or from the index) */
  uint64_t blobs;
  uint64_t raw_bytes;        /* uncompressed payload bytes of good chunks */
  uint64_t compressed_bytes; /* compressed payload bytes of good chunks */
  uint64_t end_mono_ns;      /* from the index, 0 if unknown */
  char problem[256];         /* why reading stopped early ("" if complete) */
} cucap_reader_recovery;

void cucap_reader_recovery_get(const cucap_reader *r,
                               cucap_reader_recovery *out);

/* Chunk-level access for `cucap info`/`compress`: number of good chunks and
 * each chunk's kind/sizes/record count. */
typedef struct cucap_reader_chunk {
  uint64_t offset;
  uint64_t compressed_size;
  uint64_t raw_size;
  uint32_t records;
  uint8_t kind;              /* cucap.fb.ChunkKind */
} cucap_reader_chunk;
size_t cucap_reader_chunk_count(const cucap_reader *r);
cucap_status cucap_reader_chunk_get(const cucap_reader *r, size_t i,
                                    cucap_reader_chunk *out);

/* Blob table (known blobs, in file order). */
size_t cucap_reader_blob_count(const cucap_reader *r);
cucap_status cucap_reader_blob_get(const cucap_reader *r, size_t i,
                                   cucap_hash128 *hash, uint64_t *size);
/* Where blob i is stored: the chunk of its first piece (an index for
 * cucap_reader_chunk_get) and its number of pieces (one per blob chunk,
 * in file order from there). */
cucap_status cucap_reader_blob_place(const cucap_reader *r, size_t i,
                                     uint32_t *chunk, uint32_t *pieces);

/* ---- recorded copies (record_copy.c) ---------------------------------- */
/* Is side dst (0: source) of a recorded Memcpy host memory (HOST, or UNIFIED
 * naming host memory by the recorded kind)? */
typedef struct cucap_fb_memcpy cucap_fb_memcpy;
int cucap_memcpy_side_host(const cucap_fb_memcpy *c, int dst);
/* Recorded address of the first byte of that side, its offsets applied
 * (what the recorder stores payloads and results under). */
uint64_t cucap_memcpy_side_addr(const cucap_fb_memcpy *c, int dst);

#ifdef __cplusplus
}
#endif
#endif
