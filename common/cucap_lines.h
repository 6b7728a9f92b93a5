/* cucap_lines.h - zeroed memory on cache lines of its own.
 *
 * For state one thread writes often while others touch neighbouring heap
 * memory (per-thread recorder state, the writer's append fields): the
 * block starts on a 64-byte line and its size is rounded up to whole
 * lines, so no other allocation shares a line with it. Header-only: every
 * module may use it (schema/ depends on nothing). The caller owns the
 * block and frees it with free(); NULL when out of memory. */
#ifndef CUCAP_LINES_H
#define CUCAP_LINES_H

#include <stdlib.h>
#include <string.h>

#define CUCAP_LINE 64

static inline void *cucap_lines_alloc(size_t size) {
  size_t n = (size + CUCAP_LINE - 1) & ~(size_t)(CUCAP_LINE - 1);
  if (!n)
    n = CUCAP_LINE;
  void *p = aligned_alloc(CUCAP_LINE, n);
  if (p)
    memset(p, 0, n);
  return p;
}

#endif /* CUCAP_LINES_H */
