/* verify_reloc.c - relocated pointers: values a kernel computed from memory
 * the driver placed (device malloc/new heap, driver-internal buffers) and
 * stored where the program reads them back. The replay gets that memory at
 * another address than the recording, so every such pointer differs from
 * the recording by the distance between the two placements - the same
 * distance for all pointers into one heap segment - while each is the same
 * in every pass (a program that frees what it allocates gets the same heap
 * addresses again): a mismatch "same in all passes", yet the program did
 * the same thing.
 *
 * The rule (vo_judge applies it before anything else is judged): an
 * aligned 8-byte word of a copy or snapshot region whose replayed value g
 * and recorded value r
 *   - both look like device pointers into driver-placed memory: between
 *     4 GiB and 256 TiB, inside none of the capture's allocations, and
 *     either within 1 TiB of them (vo_ptr_like, also what the "addresses"
 *     hint uses) or 16-byte aligned (what device malloc and new return).
 *     On the H100 the device heap lies near 8 GiB (0x2067ff920) while
 *     cuMemAlloc memory is at 0x7f..., 140 TB away, so distance alone
 *     cannot tell; two small ints side by side, like newdelete's popped
 *     values 0x7e00000026, are neither near nor aligned, and aligned ones
 *     still need the shared 64 KiB-multiple offset below;
 *   - differ by a multiple of 64 KiB (memory is placed with at least that
 *     granularity), and none of its bytes is nondeterministic;
 * is a *candidate*. Candidates whose difference g - r is shared by at least
 * VO_RL_MIN_WORDS words of the run form a segment; the VO_RL_SEGMENTS
 * largest segments are accepted and their words reported as relocated
 * pointers (count and offset), not as mismatches. A flipped byte inside
 * such a word breaks its offset (bytes 0-1: no longer a multiple of 64 KiB;
 * higher bytes: an offset no other word shares) and stays a mismatch, as
 * does a lone pointer-like word: one word is no evidence of a placement.
 * The recorded values are not rewritten: a relocated pointer is accepted
 * only through the run's own evidence, and said so. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_log.h"
#include "cucap_vec.h"
#include "verify_internal.h"

#define VO_RL_MIN_WORDS 2
#define VO_RL_SEGMENTS 4
#define VO_RL_GRAIN ((uint64_t)1 << 16)
#define VO_RL_WINDOW ((uint64_t)1 << 40)
#define VO_RL_MAX_CANDS ((size_t)1 << 20)

/* x is in the device pointer window (4 GiB to 256 TiB) and inside none of
 * the capture's allocations (placed by the replay); *near: within
 * VO_RL_WINDOW of one of them. */
static int vo_outside_allocs(uint64_t x, const vo_range *allocs, size_t nallocs, int *near) {
  *near = 0;
  if (x < ((uint64_t)1 << 32) || x >= ((uint64_t)1 << 48))
    return 0;
  for (size_t i = 0; i < nallocs; i++) {
    const vo_range *a = &allocs[i];
    if (x - a->addr < a->size)
      return 0;
    uint64_t d = x > a->addr ? x - a->addr : a->addr - x;
    *near |= d < VO_RL_WINDOW;
  }
  return 1;
}

int vo_ptr_like(uint64_t x, const vo_range *allocs, size_t nallocs) {
  int near;
  return vo_outside_allocs(x, allocs, nallocs, &near) && near;
}

/* vo_ptr_like, or a 16-byte aligned value in the same bounds (a device
 * heap pointer far from the capture's allocations). */
static int vo_rl_like(uint64_t x, const vo_range *allocs, size_t nallocs) {
  int near;
  return vo_outside_allocs(x, allocs, nallocs, &near) && (near || (x & 15) == 0);
}

size_t vo_rl_candidates(const uint8_t *got, const uint8_t *want, const uint8_t *nd,
                        uint64_t size, unsigned align, const vo_range *allocs, size_t nallocs,
                        size_t check, vo_rl_cand *out, size_t max) {
  size_t n = 0;
  /* the first aligned word: device address % 8 == 0 */
  uint64_t first = align ? 8 - align : 0;
  for (uint64_t o = first; o + 8 <= size && n < max; o += 8) {
    uint64_t g, r;
    memcpy(&g, got + o, 8);
    memcpy(&r, want + o, 8);
    if (g == r)
      continue;
    int varies = 0;
    for (uint64_t k = o; nd && k < o + 8 && !varies; k++)
      varies = (nd[k >> 3] >> (k & 7)) & 1;
    if (varies || (g - r) % VO_RL_GRAIN || !vo_rl_like(g, allocs, nallocs) ||
        !vo_rl_like(r, allocs, nallocs))
      continue;
    out[n].check = check;
    out[n].off = o;
    out[n].delta = (int64_t)(g - r);
    out[n].ok = 0;
    n++;
  }
  return n;
}

static int vo_rl_cmp(const void *a, const void *b) {
  const vo_rl_cand *x = a, *y = b;
  if (x->delta != y->delta)
    return x->delta < y->delta ? -1 : 1;
  if (x->check != y->check)
    return x->check < y->check ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

void vo_rl_choose(vo_rl_cand *c, size_t n, vo_rl_result *res) {
  memset(res, 0, sizeof *res);
  /* c is NULL when no check had candidates, and qsort's base must not be */
  if (n > 1)
    cucap_sort(c, n, sizeof *c, vo_rl_cmp);
  /* the largest groups of one offset, each of at least VO_RL_MIN_WORDS */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && c[j].delta == c[i].delta)
      j++;
    uint64_t cnt = j - i;
    if (cnt >= VO_RL_MIN_WORDS) {
      unsigned slot = res->noffsets;
      if (slot == VO_RL_SEGMENTS) { /* replace the smallest if larger */
        slot = 0;
        for (unsigned k = 1; k < VO_RL_SEGMENTS; k++)
          if (res->words[k] < res->words[slot])
            slot = k;
        if (res->words[slot] >= cnt)
          slot = VO_RL_SEGMENTS;
      } else {
        res->noffsets++;
      }
      if (slot < VO_RL_SEGMENTS) {
        res->offset[slot] = c[i].delta;
        res->words[slot] = cnt;
      }
    }
    i = j;
  }
  for (size_t i = 0; i < n; i++)
    for (unsigned k = 0; k < res->noffsets && !c[i].ok; k++)
      if (c[i].delta == res->offset[k]) {
        c[i].ok = 1;
        res->total_words++;
      }
}

/* Marks c->rl for the accepted words and writes the report (verify_judge.c
 * calls it first; v->want is clobbered). */
void vo_reloc_apply(vo_verifier *v) {
  size_t cap = 0, n = 0;
  vo_rl_cand *c = NULL;
  int capped = 0;
  for (size_t k = 0; k < v->nchk && !capped; k++) {
    vo_check *x = &v->chk[k];
    if (x->kind == VO_HASH || x->unkept || x->dead || x->geom || !x->ref || x->size < 8)
      continue;
    if (!vo_reads_blob(v, x->blob, x->size))
      continue;
    size_t room = x->size / 8;
    if (n + room > VO_RL_MAX_CANDS) {
      room = VO_RL_MAX_CANDS - n;
      capped = 1;
    }
    if (!CUCAP_VEC_RESERVE(c, cap, n + room, 1024))
      break;
    n += vo_rl_candidates(x->ref, v->want, x->nd, x->size, x->align, v->allocs, v->nallocs, k,
                          c + n, room);
  }
  vo_rl_result res;
  vo_rl_choose(c, n, &res);
  cucap_verify_report *rep = v->rep;
  for (size_t i = 0; i < n; i++) {
    if (!c[i].ok)
      continue;
    vo_check *x = &v->chk[c[i].check];
    if (!x->rl && !(x->rl = calloc(x->size / 8 + 1, 1)))
      continue;
    for (uint64_t b = c[i].off; b < c[i].off + 8; b++)
      x->rl[b >> 3] |= (uint8_t)(1u << (b & 7));
    x->rl_words++;
  }
  free(c);
  rep->reloc_ptr_words = res.total_words;
  if (!res.total_words)
    return;
  size_t o = 0;
  for (unsigned k = 0; k < res.noffsets && o < sizeof rep->reloc_ptr_offsets; k++)
    o += (size_t)snprintf(rep->reloc_ptr_offsets + o, sizeof rep->reloc_ptr_offsets - o,
                          "%s%c0x%" PRIx64 " (%" PRIu64 " words)", k ? ", " : "",
                          res.offset[k] < 0 ? '-' : '+',
                          res.offset[k] < 0 ? (uint64_t)-res.offset[k] : (uint64_t)res.offset[k],
                          res.words[k]);
  CUCAP_INFO("replay: verify: %" PRIu64 " relocated pointers (driver-placed memory at "
             "another address): %s%s", res.total_words, rep->reloc_ptr_offsets,
             capped ? " (more candidates than examined)" : "");
}
