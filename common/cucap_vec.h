/* cucap_vec.h - the one growable array of cucap: room for more elements
 * in a caller's own (items pointer, capacity) pair, grown by doubling.
 *
 * The caller owns the array: it lives in the caller's struct (T *items;
 * size_t n, cap;), starts as NULL/0 and is released with free(items). The
 * helper only reallocates it; it keeps no state, takes no lock and is safe
 * wherever realloc is (the recorder calls it under its own locks). Header-
 * only, so the recorder and the interposer need no link dependency. */
#ifndef CUCAP_VEC_H
#define CUCAP_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Makes *cap at least `need` elements of `elem` bytes in the array whose
 * pointer is at `items` (a T **, passed as void *): when it is short, the
 * capacity becomes *cap * 2 (`first` when 0), doubled until it holds
 * `need`, and the array is realloc'ed, its old elements kept, the new ones
 * not initialized. Returns 1; 0 on out of memory or size overflow, with
 * the array and *cap unchanged (still valid, still the caller's). Moves
 * the array: pointers into it are stale after a grow. */
static inline int cucap_vec_reserve(void *items, size_t *cap, size_t need, size_t elem,
                                    size_t first) {
  if (need <= *cap)
    return 1;
  size_t nc = *cap ? *cap : (first ? first : 1);
  if (*cap && nc <= SIZE_MAX / 2)
    nc *= 2;
  while (nc < need && nc <= SIZE_MAX / 2)
    nc *= 2;
  if (nc < need || (elem && nc > SIZE_MAX / elem))
    return 0;
  void *p;
  memcpy(&p, items, sizeof p);
  p = realloc(p, nc * elem);
  if (!p)
    return 0;
  memcpy(items, &p, sizeof p);
  *cap = nc;
  return 1;
}

/* cucap_vec_reserve for a typed array: CUCAP_VEC_RESERVE(v->items,
 * v->cap, v->n + 1, 16). */
#define CUCAP_VEC_RESERVE(items, cap, need, first) \
  cucap_vec_reserve(&(items), &(cap), (need), sizeof *(items), (first))

#endif
