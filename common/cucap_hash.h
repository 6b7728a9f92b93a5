/* cucap_hash.h - XXH3 hashing used for blob names and checksums.
 * Header-only XXH3 is compiled twice (SSE2 and AVX2) and picked at run time,
 * so the same binary runs on any x86-64 and is fast where AVX2 exists. */
#ifndef CUCAP_HASH_H
#define CUCAP_HASH_H

#include <stddef.h>
#include <stdint.h>


#ifdef __cplusplus
extern "C" {
#endif

/* XXH3-128 content hash, the name of a blob. */
typedef struct cucap_hash128 {
  uint64_t lo;
  uint64_t hi;
} cucap_hash128;

cucap_hash128 cucap_hash128_of(const void *data, size_t size);
uint64_t cucap_hash64_of(const void *data, size_t size);
/* Low 32 bits of XXH3-64: the checksum used in chunk headers and trailer. */
static inline uint32_t cucap_check32(const void *data, size_t size) {
  return (uint32_t)cucap_hash64_of(data, size);
}

/* Streaming 128-bit hash for data arriving in pieces (snapshots).
 * The state is opaque storage; create/destroy pair, destroy accepts NULL. */
typedef struct cucap_hash_state cucap_hash_state;
cucap_hash_state *cucap_hash_state_create(void);
void cucap_hash_state_destroy(cucap_hash_state *s);
void cucap_hash_state_update(cucap_hash_state *s, const void *data, size_t size);
cucap_hash128 cucap_hash_state_digest(const cucap_hash_state *s);

/* 32 lowercase hex chars (hi then lo) + NUL into out[33]. */
void cucap_hash128_hex(cucap_hash128 h, char out[33]);
static inline int cucap_hash128_eq(cucap_hash128 a, cucap_hash128 b) {
  return a.lo == b.lo && a.hi == b.hi;
}

#ifdef __cplusplus
}
#endif
#endif
