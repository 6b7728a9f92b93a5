/* test_verify_order.c - verify/verify_order.c, the "differs only in order"
 * rule of --verify, on buffers - no driver needed.
 *  - newdelete's real payload (placementNew's 4096 bytes from the H100)
 *    against a replay that handed the same values to other threads, some
 *    words marked varying: accepted, the number of words said;
 *  - the same with one value changed, one value lost (-1 in its place), or
 *    one value twice: refused;
 *  - no varying byte in the check (a deterministic program): refused, the
 *    per-byte rule decides;
 *  - 2D copies, a start that is not 4-byte aligned, a size that is not a
 *    multiple of 4, CUCAP_REPLAY_VERIFY_ORDER=0: not applied;
 *  - words holding an accepted relocated pointer are left out of both sides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "testutil.h"
#include "verify_internal.h"

#include "newdelete_payload.inc"

enum { W = 1024 };
static int checks;

static void mark(uint8_t *map, unsigned word) {
  for (unsigned b = 0; b < 4; b++)
    map[(word * 4 + b) >> 3] |= (uint8_t)(1u << ((word * 4 + b) & 7));
}

/* a replay of placementNew whose pops went to other threads */
static void reordered(int *got, uint8_t *nd, vo_check *c) {
  int pos[W], nv = 0;
  memcpy(got, newdelete_placement, W * sizeof *got);
  for (int i = 0; i < W; i++)
    if (newdelete_placement[i] >= 0)
      pos[nv++] = i;
  for (int k = 0; k < nv; k++) /* the values rotated by one winner */
    got[pos[k]] = newdelete_placement[pos[(k + 1) % nv]];
  for (int i = 0; i < W; i++) /* and one winner moved to a loser's place */
    if (newdelete_placement[i] < 0) {
      got[i] = got[pos[0]];
      got[pos[0]] = -1;
      break;
    }
  memset(nd, 0, W / 2);
  for (int k = 0; k < nv; k += 3) /* a third of the winners seen to vary */
    mark(nd, (unsigned)pos[k]);
  memset(c, 0, sizeof *c);
  c->size = W * 4;
  c->nd = nd;
  c->nd_count = 1;
}

int main(void) {
  int got[W];
  uint8_t nd[W / 2], rl[W / 2];
  vo_check c;
  uint64_t words = 0;
  const uint8_t *want = (const uint8_t *)newdelete_placement;

  reordered(got, nd, &c);
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 1);
  TU_CHECK(words > 0 && words < W);
  checks++;

  reordered(got, nd, &c); /* one value changed */
  for (int i = 0; i < W; i++)
    if (got[i] >= 0) {
      got[i] ^= 0x100;
      break;
    }
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  TU_CHECK(words == 0);
  checks++;

  reordered(got, nd, &c); /* one value lost */
  for (int i = 0; i < W; i++)
    if (got[i] >= 0) {
      got[i] = -1;
      break;
    }
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  checks++;

  reordered(got, nd, &c); /* one value twice, a -1 fewer */
  for (int i = 0, v = -1; i < W; i++) {
    if (got[i] >= 0 && v < 0)
      v = got[i];
    else if (got[i] < 0 && v >= 0) {
      got[i] = v;
      break;
    }
  }
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  checks++;

  reordered(got, nd, &c); /* nothing varied between passes */
  c.nd_count = 0;
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  c.nd = NULL;
  c.nd_count = 1;
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  checks++;

  reordered(got, nd, &c); /* where the rule does not apply */
  c.geom = 1;
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  c.geom = 0;
  c.align = 2;
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  c.align = 4; /* 4-byte aligned, not 8: applies */
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 1);
  c.align = 0;
  c.size = W * 4 - 2;
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  c.size = W * 4;
  setenv("CUCAP_REPLAY_VERIFY_ORDER", "0", 1);
  cucap_knobs_reload(); /* knobs are read once per process */
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  unsetenv("CUCAP_REPLAY_VERIFY_ORDER");
  cucap_knobs_reload();
  checks++;

  reordered(got, nd, &c); /* a relocated pointer word is left out */
  int p = -1;
  for (int i = W - 1; i >= 0 && p < 0; i--)
    if (newdelete_placement[i] < 0 && got[i] < 0)
      p = i; /* a loser in both: the word stands for a pointer the replay moved */
  TU_CHECK(p >= 0);
  if (p < 0)
    p = 0;
  got[p] = 0x20000;
  memset(rl, 0, sizeof rl);
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 0);
  mark(rl, (unsigned)p);
  c.rl = rl;
  TU_CHECK(vo_order_only(&c, (const uint8_t *)got, want, &words) == 1);
  checks++;

  printf("test_verify_order: %d groups, %d failures\n", checks, tu_failures);
  return tu_failures != 0;
}
