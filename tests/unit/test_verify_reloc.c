/* test_verify_reloc.c - verify/verify_reloc.c, the relocated-pointer rule of
 * --verify (a word pointing into driver-placed memory the replay has at
 * another address, all words of a segment off by the same distance), on
 * buffers - no driver needed.
 *  - newdelete's real payload (the 4096 bytes placementNew copied back on
 *    the H100: popped ints, whose pairs the old hint called "addresses
 *    outside the capture's allocations") against another order of the same
 *    values, as a replay whose threads won the atomics in another order
 *    gives: no word passes as a pointer, the differences stay differences;
 *  - device-heap pointers a replay has 2 MiB away: accepted as one segment;
 *    two segments with their own offsets;
 *  - a flipped recorded byte in such a word (low byte: the offset is no
 *    multiple of 64 KiB any more; high byte: an offset no other word has)
 *    stays a mismatch; nondeterministic bytes are never candidates; a lone
 *    pointer-like word is no evidence; values inside the capture's own
 *    allocations, or far from all of them, are not driver-placed pointers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "verify_internal.h"

#include "newdelete_payload.inc"

static int checks;

/* newdelete's allocations on the H100 */
static const vo_range allocs[] = {{0x7f9bf5e00000ull, 8}, {0x7f9bf5e00200ull, 65536},
                                  {0x7f9bda800000ull, 4096}};
static const size_t na = 3;

static void newdelete_payload(void) {
  enum { W = 1024 };
  int got[W], pos[W], nv = 0;
  for (int i = 0; i < W; i++)
    if (newdelete_placement[i] >= 0)
      pos[nv++] = i;
  memcpy(got, newdelete_placement, sizeof got);
  for (int k = 0; k < nv; k++) /* another order of the same values */
    got[pos[(k + 1) % nv]] = newdelete_placement[pos[k]];
  for (int i = 0; i + 1 < W; i += 7) /* and other slots left empty */
    if (got[i] >= 0 && got[i + 1] < 0) {
      got[i + 1] = got[i];
      got[i] = -1;
    }
  vo_rl_cand c[W];
  size_t n = vo_rl_candidates((const uint8_t *)got, (const uint8_t *)newdelete_placement, NULL,
                              sizeof got, 0, allocs, na, 0, c, W);
  uint64_t differ = 0;
  for (int i = 0; i < W; i += 2)
    differ += memcmp(got + i, newdelete_placement + i, 8) != 0;
  checks++;
  TU_CHECK(differ > 100 && n == 0);
  int like = 0;
  for (int i = 0; i + 1 < W; i++) { /* at every 4-byte alignment */
    uint64_t x;
    memcpy(&x, newdelete_placement + i, 8);
    like += vo_ptr_like(x, allocs, na);
  }
  checks++;
  TU_CHECK(like == 0);
}

/* The H100's device heap (drv_sched on the GPU): pointers near 8 GiB, the
 * program's allocations at 0x7f..., 140 TB away; the replay's heap 12 MiB
 * lower. Aligned heap pointers are candidates however far they are. */
static void far_heap(void) {
  uint64_t want[32], got[32];
  vo_rl_cand c[32];
  vo_rl_result res;
  for (int k = 0; k < 32; k++) {
    want[k] = 0x2067ff920ull + 16ull * (uint64_t)k;
    got[k] = want[k] - 0xC00000;
  }
  size_t n = vo_rl_candidates((const uint8_t *)got, (const uint8_t *)want, NULL, sizeof got, 0,
                              allocs, na, 0, c, 32);
  vo_rl_choose(c, n, &res);
  checks++;
  TU_CHECK(n == 32 && res.noffsets == 1 && res.total_words == 32 &&
           res.offset[0] == -(int64_t)0xC00000);
  checks++;
  TU_CHECK(!vo_ptr_like(want[0], allocs, na)); /* the hint stays distance-based */
}

static void heap_pointers(void) {
  uint64_t want[64], got[64];
  vo_rl_cand c[64];
  vo_rl_result res;
  for (int k = 0; k < 32; k++) { /* 32 device-heap pointers, then data that matched */
    want[k] = 0x7f9c00000000ull + 48ull * (uint64_t)k;
    got[k] = want[k] + 0x200000;
    want[32 + k] = got[32 + k] = (uint64_t)k * 3;
  }
  size_t n = vo_rl_candidates((const uint8_t *)got, (const uint8_t *)want, NULL, sizeof got, 0,
                              allocs, na, 0, c, 64);
  vo_rl_choose(c, n, &res);
  checks++;
  TU_CHECK(n == 32 && res.noffsets == 1 && res.offset[0] == 0x200000 && res.total_words == 32);
  for (int k = 16; k < 32; k++) /* a second segment */
    got[k] = want[k] - 0x4000000;
  n = vo_rl_candidates((const uint8_t *)got, (const uint8_t *)want, NULL, sizeof got, 0, allocs,
                       na, 0, c, 64);
  vo_rl_choose(c, n, &res);
  checks++;
  TU_CHECK(n == 32 && res.noffsets == 2 && res.total_words == 32);
  for (int k = 16; k < 32; k++)
    got[k] = want[k] + 0x200000;
  ((uint8_t *)&want[5])[0] ^= 0x10; /* flipped recorded bytes */
  ((uint8_t *)&want[9])[4] ^= 0x01;
  n = vo_rl_candidates((const uint8_t *)got, (const uint8_t *)want, NULL, sizeof got, 0, allocs,
                       na, 0, c, 64);
  vo_rl_choose(c, n, &res);
  int took5 = 0, took9 = 0;
  for (size_t i = 0; i < n; i++) {
    took5 |= c[i].off == 5 * 8 && c[i].ok;
    took9 |= c[i].off == 9 * 8 && c[i].ok;
  }
  checks++;
  TU_CHECK(res.noffsets == 1 && res.total_words == 30 && !took5 && !took9);
  uint8_t nd[64] = {0};
  nd[0] = 0xff; /* word 0's bytes vary between passes */
  n = vo_rl_candidates((const uint8_t *)got, (const uint8_t *)want, nd, sizeof got, 0, allocs, na,
                       0, c, 64);
  checks++;
  TU_CHECK(n == 30);
  /* words follow the device address: a buffer at address % 8 == 4 */
  uint8_t g4[68], w4[68];
  memset(g4, 0, sizeof g4);
  memset(w4, 0, sizeof w4);
  memcpy(g4 + 4, got, 64);
  memcpy(w4 + 4, want, 64);
  n = vo_rl_candidates(g4, w4, NULL, sizeof g4, 4, allocs, na, 0, c, 64);
  checks++;
  TU_CHECK(n == 7 && c[0].off == 4);
}

static void no_evidence(void) {
  vo_rl_cand c[4];
  vo_rl_result res;
  uint64_t w1[4] = {0x7f9c00001000ull, 1, 2, 3}, g1[4] = {0x7f9c00201000ull, 1, 2, 3};
  size_t n = vo_rl_candidates((const uint8_t *)g1, (const uint8_t *)w1, NULL, sizeof g1, 0, allocs,
                              na, 0, c, 4);
  vo_rl_choose(c, n, &res);
  checks++;
  TU_CHECK(n == 1 && res.total_words == 0); /* one word: no placement shown */
  uint64_t w2[2] = {0x7f9bf5e00300ull, 0x7f9bf5e00400ull};
  uint64_t g2[2] = {0x7f9bf5e00300ull + 0x10000, 0x7f9bf5e00400ull + 0x10000};
  n = vo_rl_candidates((const uint8_t *)g2, (const uint8_t *)w2, NULL, sizeof g2, 0, allocs, na, 0,
                       c, 2);
  checks++;
  TU_CHECK(n == 0); /* inside the capture's allocations: the replay places those */
  checks++;
  TU_CHECK(!vo_ptr_like(0x0000400000005b2eull, allocs, na) && /* two ints */
           !vo_ptr_like(0x00000100ffffffffull, allocs, na) && /* far from the device window */
           !vo_ptr_like(0x7f9bf5e00004ull, allocs, na) &&      /* an allocation's own */
           vo_ptr_like(0x7f9c12345678ull, allocs, na));
}

int main(void) {
  newdelete_payload();
  heap_pointers();
  far_heap();
  no_evidence();
  return tu_finish("test_verify_reloc", checks);
}
