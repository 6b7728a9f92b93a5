/* verify_order.c - "differs only in order" (verify_internal.h): a copy whose
 * bytes vary between replays may also hold bytes that agreed in every pass
 * and still differ from the recording, because the values that vary are
 * handed out by atomics to whichever thread gets there first.
 *
 * Why. newdelete pops 128 values from a shared stack with 16384 threads:
 * which threads get a value (and which value) is decided by atomics. In the
 * H100 replays, with perturbed passes, 3280 of its 65536 result bytes varied
 * between passes, but ~140 did not: the threads that won in the recording
 * won in none of 7 (or 17) replays, so their result was -1 in every pass -
 * "the same in all passes", a mismatch by the per-byte rule. Stream
 * compaction with atomicAdd indices and work queues behave the same way: a
 * rare winner of the recording is rarely a winner again.
 *
 * Rule. For a check that showed nondeterminism itself (some byte varied
 * between passes), take the aligned 4-byte words that differ from the
 * recording in the first compared pass or hold a varying byte (words with a
 * relocated pointer are left out: judged by verify_reloc.c). When the
 * recording's words there are a permutation of that pass's words (the same
 * values, as many times each), the differences are an ordering: the same
 * values landed in other places. They are reported as nondeterministic
 * ("differ only in order"), not as a mismatch. Words outside that set are
 * equal in both, so this is the same as the whole copy being a permutation of
 * the recording's at word granularity; elements of 8 or 16 bytes moved as a
 * whole keep it a permutation of words too.
 *
 * What it cannot hide. A value the replay got wrong is not in the
 * recording's multiset (or is there once too often), so a flipped byte,
 * a lost write or a stale value still fails; a check with no varying byte
 * never gets here (a deterministic program's copy is judged byte by byte).
 * What it does accept is a replay that put the right values in the wrong
 * places of a copy that is itself order-nondeterministic - indistinguishable
 * from the program's own reordering. CUCAP_REPLAY_VERIFY_ORDER=0 turns the
 * rule off.
 *
 * Not applied: 2D/3D copies (packed rows), checks whose start is not 4-byte
 * aligned or whose size is not a multiple of 4, and sets over 16 M words. */
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_sort.h"
#include "verify_internal.h"

#define VO_ORDER_MAX_WORDS (16u << 20)

static int vo_u32_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int vo_word_flagged(const uint8_t *map, uint64_t i) {
  return map && (map[i >> 3] >> (i & 7) & 0xf) != 0; /* i % 4 == 0: one nibble */
}

/* Word i (a multiple of 4) takes part: it differs or varies, and holds no
 * relocated pointer. */
static int vo_order_word(const vo_check *c, const uint8_t *got, const uint8_t *want,
                         uint64_t i) {
  return !vo_word_flagged(c->rl, i) &&
         (memcmp(got + i, want + i, 4) || vo_word_flagged(c->nd, i));
}

int vo_order_only(const vo_check *c, const uint8_t *got, const uint8_t *want,
                  uint64_t *words) {
  *words = 0;
  if (!cucap_knob_flag(CUCAP_KNOB(CUCAP_REPLAY_VERIFY_ORDER)) || !c->nd || !c->nd_count ||
      c->geom || (c->align & 3) ||
      (c->size & 3) || !c->size)
    return 0;
  uint64_t n = 0;
  for (uint64_t i = 0; i < c->size; i += 4)
    n += vo_order_word(c, got, want, i);
  if (!n || n > VO_ORDER_MAX_WORDS)
    return 0;
  uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  if (!a || !b) {
    free(a);
    free(b);
    return 0;
  }
  uint64_t k = 0;
  for (uint64_t i = 0; i < c->size; i += 4)
    if (vo_order_word(c, got, want, i)) {
      memcpy(&a[k], got + i, 4);
      memcpy(&b[k], want + i, 4);
      k++;
    }
  cucap_sort(a, n, sizeof *a, vo_u32_cmp);
  cucap_sort(b, n, sizeof *b, vo_u32_cmp);
  int same = !memcmp(a, b, n * sizeof *a);
  free(a);
  free(b);
  if (same)
    *words = n;
  return same;
}
