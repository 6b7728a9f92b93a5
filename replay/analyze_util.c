/* analyze_util.c - the small containers the analysis and the profile model
 * share (analyze_internal.h): a u64 -> u64 open-addressing map and string
 * interning. */
#include <stdlib.h>
#include <string.h>

#include "analyze_internal.h"

/* ------------------------------------------------------------ u64 map */

static size_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k;
}

static int map_grow(az_map *m) {
  size_t nc = m->cap ? m->cap * 2 : 64;
  uint64_t *nk = calloc(nc, 8), *nv = calloc(nc, 8);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return 0;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->k[i])
      continue;
    size_t j = mix(m->k[i]) & (nc - 1);
    while (nk[j])
      j = (j + 1) & (nc - 1);
    nk[j] = m->k[i];
    nv[j] = m->v[i];
  }
  free(m->k);
  free(m->v);
  m->k = nk;
  m->v = nv;
  m->cap = nc;
  return 1;
}

int az_map_put(az_map *m, uint64_t k, uint64_t v) {
  if (!k) {
    m->has0 = 1;
    m->v0 = v;
    return 1;
  }
  if ((m->n + 1) * 2 > m->cap && !map_grow(m))
    return 0;
  size_t j = mix(k) & (m->cap - 1);
  while (m->k[j] && m->k[j] != k)
    j = (j + 1) & (m->cap - 1);
  if (!m->k[j])
    m->n++;
  m->k[j] = k;
  m->v[j] = v;
  return 1;
}

int az_map_get(const az_map *m, uint64_t k, uint64_t *v) {
  if (!k) {
    if (m->has0 && v)
      *v = m->v0;
    return m->has0;
  }
  if (!m->cap)
    return 0;
  size_t j = mix(k) & (m->cap - 1);
  while (m->k[j]) {
    if (m->k[j] == k) {
      if (v)
        *v = m->v[j];
      return 1;
    }
    j = (j + 1) & (m->cap - 1);
  }
  return 0;
}

int az_map_del(az_map *m, uint64_t k) {
  if (!k) {
    int had = m->has0;
    m->has0 = 0;
    return had;
  }
  if (!m->cap)
    return 0;
  size_t j = mix(k) & (m->cap - 1);
  while (m->k[j] && m->k[j] != k)
    j = (j + 1) & (m->cap - 1);
  if (!m->k[j])
    return 0;
  m->k[j] = 0;
  m->n--;
  /* re-insert the rest of the cluster (linear probing deletion) */
  for (size_t i = (j + 1) & (m->cap - 1); m->k[i]; i = (i + 1) & (m->cap - 1)) {
    uint64_t kk = m->k[i], vv = m->v[i];
    m->k[i] = 0;
    m->n--;
    az_map_put(m, kk, vv);
  }
  return 1;
}

void az_map_free(az_map *m) {
  free(m->k);
  free(m->v);
  memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ strings */

static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h | 1;
}

/* Interned id of s (0 on OOM: the empty name). id 0 is always "". */
uint32_t az_intern(az_strs *t, const char *s) {
  if (!s)
    s = "";
  if (!t->n) { /* id 0 = "" */
    t->s = calloc(16, sizeof *t->s);
    if (!t->s)
      return 0;
    t->cap = 16;
    t->s[0] = strdup("");
    if (!t->s[0])
      return 0;
    t->n = 1;
  }
  if (!*s)
    return 0;
  uint64_t h = str_hash(s), v;
  for (uint64_t probe = h; az_map_get(&t->index, probe, &v); probe = probe * 31 + 7)
    if (!strcmp(t->s[v], s))
      return (uint32_t)v;
    else if (probe == 0)
      break;
  if (t->n == t->cap) {
    char **ns = realloc(t->s, t->cap * 2 * sizeof *ns);
    if (!ns)
      return 0;
    t->s = ns;
    t->cap *= 2;
  }
  char *d = strdup(s);
  if (!d)
    return 0;
  uint64_t probe = h;
  while (az_map_get(&t->index, probe, NULL))
    probe = probe * 31 + 7;
  if (!az_map_put(&t->index, probe, t->n)) {
    free(d);
    return 0;
  }
  t->s[t->n] = d;
  return (uint32_t)t->n++;
}

uint32_t az_lookup(const az_strs *t, const char *s) {
  if (!s || !*s || !t->n)
    return 0;
  uint64_t v;
  for (uint64_t probe = str_hash(s); az_map_get(&t->index, probe, &v); probe = probe * 31 + 7)
    if (!strcmp(t->s[v], s))
      return (uint32_t)v;
  return 0;
}

void az_strs_free(az_strs *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->s[i]);
  free(t->s);
  az_map_free(&t->index);
  memset(t, 0, sizeof *t);
}

const char *az_name(const cucap_analysis *a, uint32_t id) {
  return id < a->names.n ? a->names.s[id] : "";
}
