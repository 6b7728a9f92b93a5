/* reader_internal.h - what the stream reader's files share (reader.c:
 * chunks, blob table, record iteration, info; reader_open.c: open, index,
 * scan; reader_blob.c: blob reads and read-ahead). Not installed: the API
 * is cucap_reader.h. Every pointer here belongs to the cucap_reader it came
 * from and lives until cucap_reader_destroy unless a comment says less. */
#ifndef CUCAP_READER_INTERNAL_H
#define CUCAP_READER_INTERNAL_H

#include <stdint.h>
#include <string.h>

/* Buffer-less streaming API (ZSTD_decompressContinue): zstd is linked
 * statically (CMakeLists.txt: libzstd.a), so the experimental section's ABI
 * is the one these files were compiled against. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "cucap_hash.h"
#include "cucap_reader.h"
#include "cucap_schema.h"

/* Read-ahead (reader_blob.c); cap on decode_threads. */
#define RA_MAX_THREADS 64
struct ra_state;

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


/* rd_chunk_header_at results */
enum { CH_OK = 0, CH_TRUNC = 1, CH_BAD = 2 };

/* r->msg, printf-style (the text cucap_reader_last_error returns). */
void rd_set_msg(cucap_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline uint64_t align8u(uint64_t n) { return (n + 7) & ~(uint64_t)7; }
static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* ---- reader.c: chunks */
/* Reads and validates the chunk header at off (CH_*); why gets the reason. */
int rd_chunk_header_at(const cucap_reader *r, uint64_t off, cucap_chunk_header *h,
                       char *why, size_t whysz);
/* Chunk c's payload checksum holds (checked once, then remembered). */
int rd_payload_ok(const cucap_reader *r, const rchunk *c);
/* A decompression context: r's own, or NULL when out of memory. */
ZSTD_DCtx *rd_get_dctx(cucap_reader *r);
void rd_put_dctx(ZSTD_DCtx *d);
/* Decodes one chunk into *buf (grown as needed, owned by the caller);
 * thread-safe: touches only data and its arguments (read-ahead workers). */
cucap_status rd_decode_chunk(const uint8_t *data, size_t ci, uint64_t off, uint64_t csize,
                             uint64_t raw, int *checked, ZSTD_DCtx *dctx, uint8_t **buf,
                             size_t *cap, size_t *len, char *msg, size_t msgsz);
cucap_status rd_load_chunk(cucap_reader *r, size_t ci, uint8_t **buf, size_t *cap,
                           size_t *len);
/* Appends a chunk to r's table; 0 when out of memory. */
int rd_chunk_add(cucap_reader *r, uint64_t off, const cucap_chunk_header *h, int checked);

/* ---- reader.c: blob table */
/* The blob with hash h, or NULL. */
rblob *rd_blob_find(const cucap_reader *r, cucap_hash128 h);
int rd_blob_rehash(cucap_reader *r);  /* 0 when out of memory */
rblob *rd_blob_add(cucap_reader *r);  /* a zeroed entry, or NULL */
/* Visits the BlobPiece records of blob chunk ci (verified); fn returns
 * nonzero to stop. */
typedef int (*piece_fn)(cucap_reader *r, size_t ci, const cucap_fb_blob_piece *bp,
                        void *user);
cucap_status rd_walk_pieces(cucap_reader *r, size_t ci, piece_fn fn, void *user);
cucap_hash128 rd_piece_hash(const cucap_fb_blob_piece *bp);
/* Scan mode: learns blobs from their pieces (a piece_fn; user: int *oom). */
int rd_scan_piece(cucap_reader *r, size_t ci, const cucap_fb_blob_piece *bp, void *user);

/* ---- reader_blob.c */
void rd_ra_destroy(struct ra_state *ra); /* accepts NULL */

#endif
