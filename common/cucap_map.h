/* cucap_map.h - the one u64 -> u64 hash map of cucap (handles recorded ->
 * live, addresses -> indices, name hashes -> ids).
 *
 * Open addressing with linear probing; every key is storable, 0 and 1
 * included (they live out of band in two side slots, so a recorded NULL
 * handle or a context created under handle 0 is found and iterated like any
 * other). A zeroed struct is an empty map; cucap_map_free releases it and
 * leaves it empty. Deleted keys leave tombstones until the next grow. Not
 * thread-safe. The map owns its arrays; values are plain integers, so
 * nothing a caller stored is freed by it. */
#ifndef CUCAP_MAP_H
#define CUCAP_MAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_map {
  uint64_t *keys, *vals;  /* cap slots + side slots (keys[cap]: flags of keys 0/1) */
  size_t cap, count;      /* count: live entries + tombstones */
} cucap_map;

int cucap_map_put(cucap_map *m, uint64_t k, uint64_t v); /* 1, or 0 on out of memory */
int cucap_map_get(const cucap_map *m, uint64_t k, uint64_t *v); /* 1: found (v may be NULL) */
int cucap_map_del(cucap_map *m, uint64_t k, uint64_t *old);     /* 1: was there */
/* The value slot of k, made (value 0) when absent and create is set; NULL
 * when absent and not created, or out of memory. Valid until the next put,
 * slot or free (a grow moves the arrays). */
uint64_t *cucap_map_slot(cucap_map *m, uint64_t k, int create);
/* Live entries (tombstones not counted). */
size_t cucap_map_size(const cucap_map *m);
/* Iteration over every entry, keys 0 and 1 included. Start with *pos = 0;
 * returns 0 at the end. The map must not grow meanwhile; deleting the entry
 * just returned is allowed. Order: slot order, then keys 0 and 1. */
int cucap_map_next(const cucap_map *m, size_t *pos, uint64_t *k, uint64_t *v);
void cucap_map_free(cucap_map *m);

#ifdef __cplusplus
}
#endif
#endif
