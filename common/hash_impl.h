/* hash_impl.h - included by hash_sse2.c and hash_avx2.c with different
 * XXH_VECTOR settings; defines the per-ISA functions named by HASH_SUFFIX. */
#define XXH_INLINE_ALL
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "cucap_hash.h"

#define HASH_CAT2(a, b) a##b
#define HASH_CAT(a, b) HASH_CAT2(a, b)

cucap_hash128 HASH_CAT(cucap_hash128_, HASH_SUFFIX)(const void *d, size_t n);
uint64_t HASH_CAT(cucap_hash64_, HASH_SUFFIX)(const void *d, size_t n);
void HASH_CAT(cucap_hash_update_, HASH_SUFFIX)(void *st, const void *d, size_t n);
cucap_hash128 HASH_CAT(cucap_hash_digest_, HASH_SUFFIX)(const void *st);

cucap_hash128 HASH_CAT(cucap_hash128_, HASH_SUFFIX)(const void *d, size_t n) {
  XXH128_hash_t h = XXH3_128bits(d, n);
  cucap_hash128 r = {h.low64, h.high64};
  return r;
}
uint64_t HASH_CAT(cucap_hash64_, HASH_SUFFIX)(const void *d, size_t n) {
  return XXH3_64bits(d, n);
}
void HASH_CAT(cucap_hash_update_, HASH_SUFFIX)(void *st, const void *d, size_t n) {
  XXH3_128bits_update((XXH3_state_t *)st, d, n);
}
cucap_hash128 HASH_CAT(cucap_hash_digest_, HASH_SUFFIX)(const void *st) {
  XXH128_hash_t h = XXH3_128bits_digest((const XXH3_state_t *)st);
  cucap_hash128 r = {h.low64, h.high64};
  return r;
}
