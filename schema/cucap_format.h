/* cucap_format.h - byte layout of a capture file around the FlatBuffers.
 *
 * schema/cucap.fbs defines every record; this header defines the framing:
 *
 *   [preamble 32 B][FileHeader: size-prefixed FlatBuffer][pad to 8]
 *   [chunk]*  where chunk = [chunk header 40 B][zstd frame][pad to 8]
 *   [index chunk (kind Index, one size-prefixed ChunkIndex)][trailer 32 B]
 *
 * A record chunk's zstd frame decompresses to concatenated size-prefixed
 * `Record` FlatBuffers, each padded to 8 bytes. A blob chunk holds `Record`s
 * whose body is a BlobPiece. A file cut short (the app was killed) has no
 * index/trailer: readers scan chunks from the start and stop at the first
 * incomplete or corrupt one.
 *
 * All integers are little-endian. Readers refuse a major they do not know
 * (CUCAP_ERR_VERSION) and accept any minor (unknown fields are skipped by
 * FlatBuffers' design). */
#ifndef CUCAP_FORMAT_H
#define CUCAP_FORMAT_H

#include <stdint.h>

#include "cucap_hash.h" /* cucap_hash128: blob names */

#define CUCAP_FORMAT_MAJOR 1
#define CUCAP_FORMAT_MINOR 6
#define CUCAP_VERSION_STRING "0.1.0"

/* "\x89CUCAP\r\n": the high byte catches 7-bit transfers, CRLF catches
 * newline translation (PNG's trick). */
#define CUCAP_MAGIC "\x89" "CUCAP\r\n"
#define CUCAP_MAGIC_LEN 8

#define CUCAP_FB_FILE_IDENTIFIER "CCAP"

/* GraphNode.dependency_edges (format 1.6): one CUgraphEdgeData per
 * dependency, packed as from_port | to_port << 8 | type << 16 (cucap.fbs);
 * 0 is a default edge. The recorder packs, the replay unpacks. */
static inline uint32_t cucap_edge_pack(unsigned char from_port,
                                       unsigned char to_port,
                                       unsigned char type) {
  return (uint32_t)from_port | (uint32_t)to_port << 8 | (uint32_t)type << 16;
}
static inline void cucap_edge_unpack(uint32_t e, unsigned char *from_port,
                                     unsigned char *to_port,
                                     unsigned char *type) {
  *from_port = (unsigned char)(e & 0xff);
  *to_port = (unsigned char)(e >> 8 & 0xff);
  *type = (unsigned char)(e >> 16 & 0xff);
}

typedef struct cucap_preamble {
  char magic[8];
  uint16_t major;
  uint16_t minor;
  uint32_t flags;          /* reserved, 0 */
  uint32_t header_size;    /* bytes of the size-prefixed FileHeader that follows */
  uint32_t header_check;   /* low 32 bits of XXH3-64 over those bytes */
  uint64_t reserved;
} cucap_preamble;          /* 32 bytes */

#define CUCAP_CHUNK_MAGIC 0x4B4E4843u /* "CHNK" */
#define CUCAP_CODEC_NONE 0
#define CUCAP_CODEC_ZSTD 1

typedef struct cucap_chunk_header {
  uint32_t magic;          /* CUCAP_CHUNK_MAGIC */
  uint8_t kind;            /* cucap.fb.ChunkKind */
  uint8_t codec;           /* CUCAP_CODEC_* */
  uint16_t flags;          /* reserved, 0 */
  uint32_t records;        /* size-prefixed records in the payload */
  uint32_t reserved;
  uint64_t compressed_size;/* payload bytes following this header */
  uint64_t raw_size;       /* payload bytes after decompression */
  uint32_t payload_check;  /* low 32 bits of XXH3-64 of the compressed payload */
  uint32_t header_check;   /* low 32 bits of XXH3-64 of the 36 bytes before */
} cucap_chunk_header;      /* 40 bytes */

#define CUCAP_TRAILER_MAGIC 0x444E4543u /* "CEND" */

typedef struct cucap_trailer {
  uint64_t index_offset;   /* file offset of the index chunk header */
  uint64_t index_size;     /* header + payload + padding of the index chunk */
  uint64_t file_size;      /* total file size including this trailer */
  uint32_t check;          /* low 32 bits of XXH3-64 of the 24 bytes before */
  uint32_t magic;          /* CUCAP_TRAILER_MAGIC */
} cucap_trailer;           /* 32 bytes */

/* Sanity limits: a reader rejects anything larger as corrupt. */
#define CUCAP_MAX_HEADER_SIZE (16u << 20)
#define CUCAP_MAX_CHUNK_RAW ((uint64_t)1 << 30)
#define CUCAP_MAX_RECORD_SIZE ((uint64_t)256 << 20)
#define CUCAP_BLOB_PIECE_SIZE ((uint64_t)4 << 20)


#endif
