/* writer_internal.h - layout helpers shared by capture/writer.c and its unit
 * tests. Not a public header.
 *
 * BlobPiece records are laid out by hand (not through cucap_fbb) so that a
 * 4 MiB piece is copied exactly once, from the caller's buffer straight into
 * the chunk buffer. The layout is a valid size-prefixed FlatBuffer with the
 * "CCAP" identifier; tests/unit/test_writer.c checks it with the generated
 * verifier and accessors.
 *
 *   +0   u32 size prefix (bytes after it)
 *   +4   u32 root offset -> Record table at +40
 *   +8   "CCAP"
 *   +12  Record vtable (26 B): slots 0..8 absent, 9 body_type@8, 10 body@4
 *   +40  Record table: soffset 28, +44 body uoffset (-> +68), +48 body_type
 *   +52  BlobPiece vtable (12 B): hash@4 total_size@20 offset@28 data@36
 *   +68  BlobPiece table: soffset 16, +72 Hash128, +88 total_size,
 *        +96 offset, +104 data uoffset (-> +108)
 *   +108 u32 data length, +112 data bytes, zero padding to a multiple of 8 */
#ifndef CUCAP_WRITER_INTERNAL_H
#define CUCAP_WRITER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cucap_format.h"

#define CUCAP_BLOB_PIECE_HDR 112u
#define CUCAP_BODY_TYPE_BLOBPIECE 21u /* union Body: BlobPiece is member 21 */

static inline size_t cucap_align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Writes the piece record header at dst (CUCAP_BLOB_PIECE_HDR bytes); the
 * caller copies n data bytes to dst + CUCAP_BLOB_PIECE_HDR and zero-pads to
 * cucap_align8(CUCAP_BLOB_PIECE_HDR + n). */
static inline void cucap_blob_piece_header(uint8_t *dst, cucap_hash128 h,
                                           uint64_t total, uint64_t offset,
                                           uint32_t n) {
  size_t padded = cucap_align8(CUCAP_BLOB_PIECE_HDR + (size_t)n);
  uint32_t u32;
  uint16_t u16;
  int32_t s32;
  memset(dst, 0, CUCAP_BLOB_PIECE_HDR);
  u32 = (uint32_t)(padded - 4);
  memcpy(dst + 0, &u32, 4);
  u32 = 36; /* root: 40 - 4 */
  memcpy(dst + 4, &u32, 4);
  memcpy(dst + 8, CUCAP_FB_FILE_IDENTIFIER, 4);
  /* Record vtable at 12 */
  u16 = 26;
  memcpy(dst + 12, &u16, 2);
  u16 = 12;
  memcpy(dst + 14, &u16, 2);
  u16 = 8; /* slot 9: body_type */
  memcpy(dst + 12 + 4 + 9 * 2, &u16, 2);
  u16 = 4; /* slot 10: body */
  memcpy(dst + 12 + 4 + 10 * 2, &u16, 2);
  /* Record table at 40 */
  s32 = 40 - 12;
  memcpy(dst + 40, &s32, 4);
  u32 = 68 - 44;
  memcpy(dst + 44, &u32, 4);
  dst[48] = CUCAP_BODY_TYPE_BLOBPIECE;
  /* BlobPiece vtable at 52 */
  u16 = 12;
  memcpy(dst + 52, &u16, 2);
  u16 = 40;
  memcpy(dst + 54, &u16, 2);
  u16 = 4;
  memcpy(dst + 56, &u16, 2);
  u16 = 20;
  memcpy(dst + 58, &u16, 2);
  u16 = 28;
  memcpy(dst + 60, &u16, 2);
  u16 = 36;
  memcpy(dst + 62, &u16, 2);
  /* BlobPiece table at 68 */
  s32 = 68 - 52;
  memcpy(dst + 68, &s32, 4);
  memcpy(dst + 72, &h.lo, 8);
  memcpy(dst + 80, &h.hi, 8);
  memcpy(dst + 88, &total, 8);
  memcpy(dst + 96, &offset, 8);
  u32 = 108 - 104;
  memcpy(dst + 104, &u32, 4);
  memcpy(dst + 108, &n, 4);
}

#endif
