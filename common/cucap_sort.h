/* cucap_sort.h - qsort for arrays that may be empty.
 *
 * qsort's base must not be NULL even when the count is 0 (C11 7.22.5:
 * UBSan reports it), and an empty or one-element vector here often has a
 * NULL data pointer. cucap_sort sorts nothing in those cases. Header-only:
 * every module may use it (schema/ depends on nothing). */
#ifndef CUCAP_SORT_H
#define CUCAP_SORT_H

#include <stdlib.h>

static inline void cucap_sort(void *base, size_t n, size_t size,
                              int (*cmp)(const void *, const void *)) {
  if (n > 1 && base)
    qsort(base, n, size, cmp);
}

#endif /* CUCAP_SORT_H */
