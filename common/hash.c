/* hash.c - run-time choice between the SSE2 and AVX2 XXH3 builds. */
#include "cucap_hash.h"
#include "cucap_lines.h"

#include <stdlib.h>
/* Only the state type and reset (scalar code) are used here; inlined so no
 * libxxhash symbol is needed at link time. */
#define XXH_INLINE_ALL
#include <xxhash.h>

cucap_hash128 cucap_hash128_sse2(const void *d, size_t n);
uint64_t cucap_hash64_sse2(const void *d, size_t n);
void cucap_hash_update_sse2(void *st, const void *d, size_t n);
cucap_hash128 cucap_hash_digest_sse2(const void *st);
cucap_hash128 cucap_hash128_avx2(const void *d, size_t n);
uint64_t cucap_hash64_avx2(const void *d, size_t n);
void cucap_hash_update_avx2(void *st, const void *d, size_t n);
cucap_hash128 cucap_hash_digest_avx2(const void *st);

static int have_avx2(void) {
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") ? 1 : 0;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
}

cucap_hash128 cucap_hash128_of(const void *data, size_t size) {
  return have_avx2() ? cucap_hash128_avx2(data, size)
                     : cucap_hash128_sse2(data, size);
}

uint64_t cucap_hash64_of(const void *data, size_t size) {
  return have_avx2() ? cucap_hash64_avx2(data, size)
                     : cucap_hash64_sse2(data, size);
}

struct cucap_hash_state {
  XXH3_state_t st; /* needs 64-byte alignment: allocated with cucap_lines_alloc */
};

cucap_hash_state *cucap_hash_state_create(void) {
  cucap_hash_state *s = cucap_lines_alloc(sizeof *s);
  if (!s)
    return NULL;
  XXH3_INITSTATE(&s->st);
  XXH3_128bits_reset(&s->st);
  return s;
}

void cucap_hash_state_destroy(cucap_hash_state *s) { free(s); }

void cucap_hash_state_update(cucap_hash_state *s, const void *data,
                             size_t size) {
  if (have_avx2())
    cucap_hash_update_avx2(&s->st, data, size);
  else
    cucap_hash_update_sse2(&s->st, data, size);
}

cucap_hash128 cucap_hash_state_digest(const cucap_hash_state *s) {
  return have_avx2() ? cucap_hash_digest_avx2(&s->st)
                     : cucap_hash_digest_sse2(&s->st);
}

void cucap_hash128_hex(cucap_hash128 h, char out[33]) {
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++)
    out[i] = hx[(h.hi >> (60 - 4 * i)) & 15];
  for (int i = 0; i < 16; i++)
    out[16 + i] = hx[(h.lo >> (60 - 4 * i)) & 15];
  out[32] = 0;
}
