/* map.c - cucap_map (cucap_map.h): open addressing, keys 0 and 1 out of band. */
#include <stdlib.h>
#include <string.h>

#include "cucap_map.h"

/* ---- hash map: open addressing, key 0 is stored out of band ---------- */
static size_t map_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}

#define MAP_EMPTY 0
#define MAP_TOMB 1 /* keys 0 and 1 go to the side slots */

static int map_grow(cucap_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  /* slot ncap holds the side values for keys 0/1 */
  uint64_t *nk = calloc(ncap + 2, sizeof *nk), *nv = calloc(ncap + 2, sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return 0;
  }
  size_t live = 0;
  if (m->cap) {
    for (size_t i = 0; i < m->cap; i++) {
      uint64_t k = m->keys[i];
      if (k == MAP_EMPTY || k == MAP_TOMB)
        continue;
      size_t j = map_hash(k) & (ncap - 1);
      while (nk[j] != MAP_EMPTY)
        j = (j + 1) & (ncap - 1);
      nk[j] = k;
      nv[j] = m->vals[i];
      live++;
    }
    live += (m->keys[m->cap] & 1) + ((m->keys[m->cap] >> 1) & 1);
    /* side slots: keys[cap] = flags, vals[cap], vals[cap+1] */
    nk[ncap] = m->keys[m->cap];
    nv[ncap] = m->vals[m->cap];
    nv[ncap + 1] = m->vals[m->cap + 1];
  }
  free(m->keys);
  free(m->vals);
  m->keys = nk;
  m->vals = nv;
  m->cap = ncap;
  m->count = live; /* count = live entries + tombstones (reset here) */
  return 1;
}

int cucap_map_put(cucap_map *m, uint64_t k, uint64_t v) {
  if ((m->count + 1) * 2 > m->cap && !map_grow(m))
    return 0;
  if (k <= 1) {
    if (!(m->keys[m->cap] & (1u << k)))
      m->count++;
    m->keys[m->cap] |= 1u << k;
    m->vals[m->cap + k] = v;
    return 1;
  }
  size_t j = map_hash(k) & (m->cap - 1), tomb = (size_t)-1;
  while (m->keys[j] != MAP_EMPTY) {
    if (m->keys[j] == k) {
      m->vals[j] = v;
      return 1;
    }
    if (m->keys[j] == MAP_TOMB && tomb == (size_t)-1)
      tomb = j;
    j = (j + 1) & (m->cap - 1);
  }
  if (tomb != (size_t)-1) {
    j = tomb;
    m->count--; /* reusing a counted tombstone */
  }
  m->keys[j] = k;
  m->vals[j] = v;
  m->count++;
  return 1;
}

static size_t map_find(const cucap_map *m, uint64_t k) {
  if (!m->cap)
    return (size_t)-1;
  size_t j = map_hash(k) & (m->cap - 1);
  for (size_t n = 0; n < m->cap && m->keys[j] != MAP_EMPTY; n++) {
    if (m->keys[j] == k)
      return j;
    j = (j + 1) & (m->cap - 1);
  }
  return (size_t)-1;
}

int cucap_map_get(const cucap_map *m, uint64_t k, uint64_t *v) {
  if (!m->cap)
    return 0;
  if (k <= 1) {
    if (!(m->keys[m->cap] & (1u << k)))
      return 0;
    if (v)
      *v = m->vals[m->cap + k];
    return 1;
  }
  size_t j = map_find(m, k);
  if (j == (size_t)-1)
    return 0;
  if (v)
    *v = m->vals[j];
  return 1;
}

int cucap_map_del(cucap_map *m, uint64_t k, uint64_t *old) {
  if (!m->cap)
    return 0;
  if (k <= 1) {
    if (!(m->keys[m->cap] & (1u << k)))
      return 0;
    m->keys[m->cap] &= ~(uint64_t)(1u << k);
    if (old)
      *old = m->vals[m->cap + k];
    m->count--;
    return 1;
  }
  size_t j = map_find(m, k);
  if (j == (size_t)-1)
    return 0;
  if (old)
    *old = m->vals[j];
  m->keys[j] = MAP_TOMB; /* stays counted until the next grow */
  return 1;
}

int cucap_map_next(const cucap_map *m, size_t *pos, uint64_t *k, uint64_t *v) {
  if (!m->cap || !m->keys)
    return 0;
  for (size_t i = *pos; i < m->cap + 2; i++) {
    uint64_t key;
    if (i < m->cap) {
      key = m->keys[i];
      if (key == MAP_EMPTY || key == MAP_TOMB)
        continue;
    } else { /* side slots: keys 0 and 1 */
      key = i - m->cap;
      if (!(m->keys[m->cap] & (1u << key)))
        continue;
    }
    *pos = i + 1;
    if (k)
      *k = key;
    if (v)
      *v = m->vals[i];
    return 1;
  }
  *pos = m->cap + 2;
  return 0;
}

void cucap_map_free(cucap_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

uint64_t *cucap_map_slot(cucap_map *m, uint64_t k, int create) {
  if (!cucap_map_get(m, k, NULL)) {
    if (!create || !cucap_map_put(m, k, 0))
      return NULL;
  }
  if (k <= 1)
    return &m->vals[m->cap + k];
  return &m->vals[map_find(m, k)];
}

size_t cucap_map_size(const cucap_map *m) {
  size_t n = 0, pos = 0;
  while (cucap_map_next(m, &pos, NULL, NULL))
    n++;
  return n;
}
