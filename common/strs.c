/* strs.c - string interning (cucap_strs.h). */
#include <stdlib.h>
#include <string.h>

#include "cucap_strs.h"
#include "cucap_vec.h"


static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h | 1;
}

/* Interned id of s (0 on OOM: the empty name). id 0 is always "". */
uint32_t cucap_strs_intern(cucap_strs *t, const char *s) {
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
  for (uint64_t probe = h; cucap_map_get(&t->index, probe, &v); probe = probe * 31 + 7)
    if (!strcmp(t->s[v], s))
      return (uint32_t)v;
    else if (probe == 0)
      break;
  if (!CUCAP_VEC_RESERVE(t->s, t->cap, t->n + 1, 16))
    return 0;
  char *d = strdup(s);
  if (!d)
    return 0;
  uint64_t probe = h;
  while (cucap_map_get(&t->index, probe, NULL))
    probe = probe * 31 + 7;
  if (!cucap_map_put(&t->index, probe, t->n)) {
    free(d);
    return 0;
  }
  t->s[t->n] = d;
  return (uint32_t)t->n++;
}

uint32_t cucap_strs_lookup(const cucap_strs *t, const char *s) {
  if (!s || !*s || !t->n)
    return 0;
  uint64_t v;
  for (uint64_t probe = str_hash(s); cucap_map_get(&t->index, probe, &v); probe = probe * 31 + 7)
    if (!strcmp(t->s[v], s))
      return (uint32_t)v;
  return 0;
}

void cucap_strs_free(cucap_strs *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->s[i]);
  free(t->s);
  cucap_map_free(&t->index);
  memset(t, 0, sizeof *t);
}

