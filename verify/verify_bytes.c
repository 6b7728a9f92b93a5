/* verify_bytes.c - the byte-level loops of --verify (verify_internal.h):
 * finding and counting differences between a replayed and a recorded copy,
 * and marking the 4-byte words that vary between passes. They run over
 * whole copies (up to GiBs) once per pass, so they are written for speed and
 * are not coverage-instrumented under libFuzzer (fuzz_replay spent over half
 * its time in their compares, each a traced comparison). verify_observer.c
 * calls them when it compares a pass, verify_judge.c at the verdict. */
#include <string.h>

#include "verify_internal.h"

/* Data loops of verify that are not worth coverage instrumentation (under
 * libFuzzer each compare in them is a traced comparison). */
#if defined(__clang__)
#define VO_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define VO_NO_COVERAGE
#endif

/* The byte comparator under every verify check. (memcmp would be
 * intercepted and traced under libFuzzer like the compares it replaces.) */
VO_NO_COVERAGE
uint64_t vo_first_diff(const uint8_t *a, const uint8_t *b, uint64_t n) {
  uint64_t i = 0;
  while (i + 32 <= n) { /* four words a step: the compiler vectorises it */
    uint64_t x[4], y[4];
    memcpy(x, a + i, 32);
    memcpy(y, b + i, 32);
    if (((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) != 0)
      break;
    i += 32;
  }
  while (i < n && a[i] == b[i])
    i++;
  return i;
}

/* Counts the bytes where a and b differ whose bit is clear in both bitmaps
 * rl and nd (either may be NULL); returned, the first at *first (n if none).
 * Those with their rl bit set are counted at *in_rl. */
VO_NO_COVERAGE
uint64_t vo_count_diff(const uint8_t *a, const uint8_t *b, uint64_t n, const uint8_t *rl,
                       const uint8_t *nd, uint64_t *in_rl, uint64_t *first) {
  uint64_t det = 0, r = 0, f = n;
  for (uint64_t i = vo_first_diff(a, b, n); i < n;) {
    uint8_t bit = (uint8_t)(1u << (i & 7));
    if (rl && (rl[i >> 3] & bit))
      r++;
    else if (!(nd && (nd[i >> 3] & bit)) && det++ == 0)
      f = i;
    i++;
    if (i < n && a[i] == b[i])
      i += vo_first_diff(a + i, b + i, n - i);
  }
  if (in_rl)
    *in_rl = r;
  if (first)
    *first = f;
  return det;
}

int vo_nd_get(const vo_check *c, uint64_t i) {
  return c->nd && (c->nd[i >> 3] >> (i & 7)) & 1;
}

/* Marks byte i nondeterministic, with its aligned 4-byte word, and when
 * that word is the low half of an aligned 8-byte word, the high half too:
 * a value that varies from run to run varies in its low bytes every time and
 * in its high bytes only sometimes (a 32-bit clock's top byte every 2^24
 * cycles; a clock64 value carries into its high half every 2^32 cycles, ~2 s
 * on an H100: between the recording and the replays, not between replays
 * milliseconds apart). Little-endian: the low half is at the lower address.
 * Word boundaries follow the device address (c->align = address % 8). */
VO_NO_COVERAGE static void vo_nd_word(vo_check *c, uint64_t i) {
  uint64_t p = i + c->align, w8 = p & ~(uint64_t)7;
  uint64_t from = (p - w8) < 4 ? w8 : w8 + 4, to = w8 + 8;
  for (uint64_t q = from; q < to; q++) {
    if (q < c->align || q - c->align >= c->size)
      continue;
    uint64_t j = q - c->align;
    uint8_t m = (uint8_t)(1u << (j & 7));
    if (!(c->nd[j >> 3] & m)) {
      c->nd[j >> 3] |= m;
      c->nd_count++;
    }
  }
}

/* The first byte after the 4-byte word holding byte i. */
VO_NO_COVERAGE static uint64_t vo_next_word(const vo_check *c, uint64_t i) {
  uint64_t n = ((i + c->align) & ~(uint64_t)3) + 4;
  return n - c->align;
}

/* Marks every 4-byte word (see vo_nd_word) where got and base differ, from
 * byte `from` (their first difference) on. Uninstrumented, like the
 * comparators: a fuzzed copy differs in every word. */
VO_NO_COVERAGE void vo_nd_mark(vo_check *c, const uint8_t *got, const uint8_t *base,
                                      uint64_t size, uint64_t from) {
  for (uint64_t i = from; i < size;) {
    vo_nd_word(c, i);
    i = vo_next_word(c, i);
    if (i < size)
      i += vo_first_diff(got + i, base + i, size - i);
  }
}
