/* verify_judge.c - the verdict of --verify once every pass ran: which bytes
 * are mismatches (differ from the recording, same in every pass), which are
 * nondeterministic (differ between passes), the messages and report fields,
 * hints for mismatches that may still be nondeterminism, and the diagnostic
 * pass that names the kernels writing nondeterministic bytes.
 *
 * Diagnostic pass (only when nondeterministic bytes were found, after the
 * comparing passes): the device ranges holding them are watched; after every
 * op that may write device memory (launch, graph launch, copy, memset) the
 * context is synchronised and each watched range still ahead of its check
 * is hashed; an op after which the hash changed wrote it. This serialises the
 * pass like --sync. Uploads (HtoD copies, memsets) are not named: they write
 * recorded bytes. Without that pass (nothing watchable) a check names the
 * last launches on its stream before it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_log.h"
#include "cucap_schema.h"
#include "cucap_vec.h"
#include "verify_internal.h"

#define VO_WATCH_MAX 256                     /* watched ranges in all */
#define VO_WATCH_PER_CHECK 16
#define VO_WATCH_BYTES ((uint64_t)1 << 20)   /* per range (its start) */
#define VO_WATCH_TOTAL ((uint64_t)64 << 20)
#define VO_DETAIL_LINES 6

/* ---------------------------------------------------------------- names */

static void vo_append(char *out, size_t cap, size_t *o, const char *s, size_t n) {
  if (*o + n + 1 > cap)
    n = *o + 1 < cap ? cap - *o - 1 : 0;
  memcpy(out + *o, s, n);
  *o += n;
  out[*o] = 0;
}

/* A readable short form of a (possibly Itanium-mangled) kernel name for
 * summaries: "_Z14timedReductionPKfPfPl" -> "timedReduction",
 * "_ZN7cutlass6KernelI...E..." -> "cutlass::Kernel". Unmangled names
 * (extern "C", Triton) are kept, cut at 64 characters. */
void vo_short_name(const char *n, char *out, size_t cap) {
  if (!cap)
    return;
  out[0] = 0;
  if (!n)
    n = "?";
  size_t o = 0;
  if (n[0] == '_' && n[1] == 'Z') {
    const char *p = n + 2;
    int nested = *p == 'N';
    if (nested)
      for (p++; *p == 'K' || *p == 'V' || *p == 'r'; p++)
        ;
    for (;;) {
      if (p[0] == 'S' && p[1] == 't') { /* ::std:: */
        vo_append(out, cap, &o, o ? "::std" : "std", o ? 5 : 3);
        p += 2;
        continue;
      }
      if (*p < '1' || *p > '9')
        break;
      unsigned long len = strtoul(p, (char **)&p, 10);
      if (len > strlen(p))
        break;
      if (o)
        vo_append(out, cap, &o, "::", 2);
      vo_append(out, cap, &o, p, len);
      p += len;
      if (!nested)
        break;
    }
    if (o)
      return;
  }
  size_t len = strlen(n);
  if (len > 64 && cap > 64) {
    vo_append(out, cap, &o, n, 61);
    vo_append(out, cap, &o, "...", 3);
  } else {
    vo_append(out, cap, &o, n, len);
  }
}

static void vo_add_writer(vo_check *c, uint32_t id) {
  unsigned k = 0;
  while (k < c->nwriters && c->writers[k] != id)
    k++;
  if (k == c->nwriters && c->nwriters < VO_WRITERS)
    c->nwriters++;
  if (k == VO_WRITERS)
    k = VO_WRITERS - 1;
  memmove(c->writers + 1, c->writers, k * sizeof c->writers[0]);
  c->writers[0] = id;
}

/* "a, b, c" from name ids (short names). */
static void vo_names_str(const vo_verifier *v, const uint32_t *ids, unsigned n,
                         char *out, size_t cap) {
  size_t o = 0;
  out[0] = 0;
  for (unsigned i = 0; i < n; i++) {
    if (ids[i] >= v->nnames)
      continue;
    char sn[72];
    vo_short_name(v->names[ids[i]].s, sn, sizeof sn);
    if (o)
      vo_append(out, cap, &o, ", ", 2);
    vo_append(out, cap, &o, sn, strlen(sn));
  }
}

/* ---------------------------------------------------------------- diagnosis */

int vo_diag_plan(vo_verifier *v) {
  free(v->watch);
  v->watch = NULL;
  v->nwatch = 0;
  size_t cap = 0;
  uint64_t total = 0;
  for (size_t k = 0; k < v->nchk; k++) {
    vo_check *c = &v->chk[k];
    if (c->kind == VO_HASH || !c->addr || !c->nd || !c->nd_count)
      continue;
    unsigned per = 0;
    for (uint64_t i = 0; i < c->size && per < VO_WATCH_PER_CHECK;) {
      while (i < c->size && !vo_nd_get(c, i))
        i++;
      if (i >= c->size)
        break;
      uint64_t j = i, last = i;
      /* a run of nondeterministic bytes, gaps under 64 bytes merged, within
       * one row of a 2D copy */
      while (j < c->size && j - last < 64 && j - i < VO_WATCH_BYTES &&
             (!c->geom || !c->g_width || j / c->g_width == i / c->g_width)) {
        if (vo_nd_get(c, j))
          last = j;
        j++;
      }
      if (v->nwatch == VO_WATCH_MAX || total >= VO_WATCH_TOTAL)
        return v->nwatch > 0;
      if (!CUCAP_VEC_RESERVE(v->watch, cap, v->nwatch + 1, 32))
        return v->nwatch > 0;
      vo_watch *w = &v->watch[v->nwatch++];
      memset(w, 0, sizeof *w);
      w->check = k;
      w->until = c->rec_index;
      w->addr = vo_dev_addr(c, i);
      w->size = last - i + 1;
      total += w->size;
      per++;
      i = last + 1;
    }
  }
  return v->nwatch > 0;
}

static int vo_watch_read(vo_verifier *v, vo_watch *w, cucap_hash128 *h) {
  if (!vo_grow(&v->got, &v->got_cap, w->size) ||
      cucap_replay_session_read(v->s, w->addr, v->got, w->size) != CUCAP_OK)
    return 0;
  *h = cucap_hash128_of(v->got, w->size);
  return 1;
}

void vo_diag_begin(vo_verifier *v) {
  for (size_t i = 0; i < v->nwatch; i++) {
    vo_watch *w = &v->watch[i];
    w->have_last = vo_watch_read(v, w, &w->last);
  }
}

void vo_diag_op(vo_verifier *v, const cucap_replay_op *op) {
  if (op->capturing || !v->nwatch)
    return;
  uint32_t id = VO_NO_NAME;
  const cucap_fb_record *rec = op->record;
  switch (op->body_type) {
  case CUCAP_FB_BODY_LAUNCH:
    if (op->launch_index == CUCAP_REPLAY_NO_LAUNCH)
      return;
    id = vo_intern(v, op->kernel, 1);
    break;
  case CUCAP_FB_BODY_GRAPH:
    if (cucap_fb_graph_op(cucap_fb_record_body_as_graph(rec)) != CUCAP_FB_GRAPHOP_LAUNCH)
      return;
    id = vo_intern(v, "cuGraphLaunch", 1);
    break;
  case CUCAP_FB_BODY_MEMCPY: {
    int k = cucap_fb_memcpy_kind(cucap_fb_record_body_as_memcpy(rec));
    if (k == CUCAP_FB_MEMCPYKIND_DTOH || k == CUCAP_FB_MEMCPYKIND_HTOH ||
        k == CUCAP_FB_MEMCPYKIND_ATOH || k == CUCAP_FB_MEMCPYKIND_PREFETCH)
      return;
    if (k == CUCAP_FB_MEMCPYKIND_DTOD || k == CUCAP_FB_MEMCPYKIND_PEER)
      id = vo_intern(v, "cuMemcpyDtoD", 0);
    else if (k == CUCAP_FB_MEMCPYKIND_ATOD)
      id = vo_intern(v, "cuMemcpyAtoD", 0);
    break; /* HtoD, Unified: uploads of recorded bytes */
  }
  case CUCAP_FB_BODY_MEMSET:
    break;
  default:
    return;
  }
  int active = 0;
  for (size_t i = 0; i < v->nwatch && !active; i++)
    active = v->watch[i].until > op->rec_index;
  if (!active)
    return;
  if (v->ctx_sync)
    v->ctx_sync();
  for (size_t i = 0; i < v->nwatch; i++) {
    vo_watch *w = &v->watch[i];
    cucap_hash128 h;
    if (w->until <= op->rec_index || !vo_watch_read(v, w, &h))
      continue;
    if (w->have_last && !cucap_hash128_eq(h, w->last) && id != VO_NO_NAME)
      vo_add_writer(&v->chk[w->check], id);
    w->last = h;
    w->have_last = 1;
  }
}

/* ---------------------------------------------------------------- verdict */

static int vo_in_allocs(const vo_verifier *v, uint64_t x) {
  for (size_t i = 0; i < v->nallocs; i++)
    if (x - v->allocs[i].addr < v->allocs[i].size)
      return 1;
  return 0;
}

static int vo_addr_like(const vo_verifier *v, uint64_t x) {
  /* two small 32-bit integers side by side are not an address (newdelete's
   * popped values 0x7e00000026 got this hint and misled) */
  return x >= ((uint64_t)1 << 32) && x < ((uint64_t)1 << 48) && !vo_in_allocs(v, x) &&
         !((x >> 32) < 0x10000 && (x & 0xffffffffu) < 0x10000);
}

/* Why a mismatching byte may still be nondeterminism: appended to its
 * message ("" when there is no reason to think so). */
static void vo_hints(const vo_verifier *v, const vo_check *c, uint64_t off,
                     const uint8_t *got, const uint8_t *want, char *out,
                     size_t cap) {
  size_t o = 0;
  char b[360];
  out[0] = 0;
  int n = 0;
#define VO_HINT(...)                                                          \
  do {                                                                        \
    const char *pre_ = n++ ? "; " : "; may still be nondeterminism: ";        \
    snprintf(b, sizeof b, __VA_ARGS__);                                       \
    vo_append(out, cap, &o, pre_, strlen(pre_));                              \
    vo_append(out, cap, &o, b, strlen(b));                                    \
  } while (0)
  if (c->nd_count)
    VO_HINT("%s holds %" PRIu64 " nondeterministic bytes too",
            c->kind == VO_COPY ? "the copy" : "the region", c->nd_count);
  uint64_t a = c->addr ? vo_dev_addr(c, off) : 0;
  for (size_t k = 0; a && k < v->nchk; k++) {
    const vo_check *x = &v->chk[k];
    if (x == c || !x->nd_count || x->geom || !x->addr || a - x->addr >= x->size ||
        !vo_nd_get(x, a - x->addr))
      continue;
    VO_HINT("address 0x%" PRIx64 " was nondeterministic in %s", a, x->what);
    break;
  }
  unsigned al8 = c->geom ? 0 : (unsigned)(c->addr & 7);
  uint64_t o8 = ((off + al8) & ~(uint64_t)7);
  if (o8 >= al8 && o8 - al8 + 8 <= c->size) {
    uint64_t g, r;
    memcpy(&g, got + o8 - al8, 8);
    memcpy(&r, want + o8 - al8, 8);
    if (vo_addr_like(v, g) && vo_addr_like(v, r))
      VO_HINT("the values look like addresses outside the capture's "
              "allocations or clock64 timestamps (0x%" PRIx64 ", recorded 0x%"
              PRIx64 "; device heap, driver-placed memory or a clock: a "
              "replay does not reproduce those)", g, r);
  }
  /* a float that differs in its last digits is what floating-point atomics
   * give, but also what a flipped low bit gives: said only when this run
   * showed nondeterminism somewhere */
  int nd_seen = 0;
  for (size_t k = 0; k < v->nchk && !nd_seen; k++)
    nd_seen = v->chk[k].nd_count || v->chk[k].hash_nd || v->chk[k].uk_nd;
  unsigned al4 = c->geom ? 0 : (unsigned)(c->addr & 3);
  uint64_t o4 = ((off + al4) & ~(uint64_t)3);
  if (nd_seen && o4 >= al4 && o4 - al4 + 4 <= c->size) {
    float fg, fr;
    memcpy(&fg, got + o4 - al4, 4);
    memcpy(&fr, want + o4 - al4, 4);
    float ag = fg < 0 ? -fg : fg, ar = fr < 0 ? -fr : fr;
    float mx = ag > ar ? ag : ar, d = fg - fr;
    if (d < 0)
      d = -d;
    if (fg == fg && fr == fr && mx > 1e-30f && mx < 1e30f && d > 0 &&
        d <= 1e-3f * mx)
      VO_HINT("the values differ like floating-point rounding (%.9g, recorded "
              "%.9g: accumulation order, e.g. floating-point atomics)",
              (double)fg, (double)fr);
  }
#undef VO_HINT
}

static void vo_mismatch(vo_verifier *v, const char *log, const char *first) {
  cucap_verify_report *rep = v->rep;
  rep->mismatches++;
  /* info, not error: the report carries the first mismatch and its caller
   * reports it (cucap replay: once); the log keeps every one for debugging */
  CUCAP_INFO("replay: %s", log);
  if (!rep->first_mismatch[0])
    snprintf(rep->first_mismatch, sizeof rep->first_mismatch, "%s", first);
}

static void vo_passes_note(const vo_verifier *v, char *out, size_t cap) {
  if (v->passes > 1)
    snprintf(out, cap, "; same in all %u passes", v->passes);
  else
    out[0] = 0;
}

/* The message of a byte mismatch, as before nondeterminism was told apart,
 * then `besides` (nondeterministic bytes of the same check), the passes that
 * agreed, and `hints`. */
static void vo_byte_mismatch(vo_verifier *v, const vo_check *c, uint64_t off,
                             uint8_t g, uint8_t r, uint64_t count,
                             const char *besides, const char *hints) {
  char log[900], first[512], pn[48];
  vo_passes_note(v, pn, sizeof pn);
  uint64_t a = c->addr ? vo_dev_addr(c, off) : 0;
  snprintf(log, sizeof log, "%s differs at offset %" PRIu64 " (address 0x%"
           PRIx64 "): got 0x%02x, recorded 0x%02x; %" PRIu64 " of %" PRIu64
           " bytes differ%s%s%s", c->what, off, a, g, r, count, c->size,
           besides, pn, hints);
  snprintf(first, sizeof first, "%s: first differing offset %" PRIu64
           " (address 0x%" PRIx64 ", got 0x%02x, recorded 0x%02x), %" PRIu64
           " of %" PRIu64 " bytes differ%s%s%s", c->what, off, a, g, r, count,
           c->size, besides, pn, hints);
  vo_mismatch(v, log, first);
}

/* Bytes of a check whose recording may hold what the program's host code
 * wrote (c->hostw says why) that differ in every pass: reported apart,
 * never matched, never silently passed. */
static void vo_host_written(vo_verifier *v, const vo_check *c, uint64_t off,
                            uint8_t g, uint8_t r, uint64_t count) {
  cucap_verify_report *rep = v->rep;
  rep->host_written_bytes += count;
  rep->host_written_checks++;
  char line[640], at[48] = "";
  if (c->addr)
    snprintf(at, sizeof at, "address 0x%" PRIx64 ", ", vo_dev_addr(c, off));
  snprintf(line, sizeof line, "  host-written: %s: %" PRIu64 " of %" PRIu64
           " bytes differ from offset %" PRIu64 " (%sgot 0x%02x, recorded 0x%02x) "
           "in every pass: %s\n", c->what, count, c->size, off, at, g, r, c->hostw);
  CUCAP_INFO("replay: verify: %.*s", (int)strlen(line) - 3, line + 2);
  size_t o = strlen(rep->host_written_detail), ll = strlen(line);
  if (v->hw_listed < 2 && o + ll < sizeof rep->host_written_detail - 80) {
    memcpy(rep->host_written_detail + o, line, ll + 1);
    v->hw_listed++;
  }
}

/* The summary of host-written checks past the ones listed. */
static void vo_host_written_end(vo_verifier *v) {
  cucap_verify_report *rep = v->rep;
  if (!rep->host_written_checks)
    return;
  CUCAP_WARN("replay: verify: %" PRIu64 " bytes in %" PRIu64 " copies/regions differ "
             "from the recording where the program's host code may have written them "
             "(a replay runs no host code): not verified, not mismatches (--strict: "
             "mismatches)", rep->host_written_bytes, rep->host_written_checks);
  size_t o = strlen(rep->host_written_detail);
  if (rep->host_written_checks > v->hw_listed)
    snprintf(rep->host_written_detail + o, sizeof rep->host_written_detail - o,
             "  host-written: ... and %" PRIu64 " more (CUCAP_LOG_LEVEL=info lists them)\n",
             rep->host_written_checks - v->hw_listed);
}

typedef struct vo_ord {
  uint64_t rec_index;
  uint32_t region;
  size_t ix;
} vo_ord;

static int vo_ord_cmp(const void *a, const void *b) {
  const vo_ord *x = a, *y = b;
  if (x->rec_index != y->rec_index)
    return x->rec_index < y->rec_index ? -1 : 1;
  return x->region < y->region ? -1 : x->region > y->region;
}

typedef struct vo_sum {      /* the nondeterminism summary being built */
  uint32_t ids[64];
  unsigned nids, more;
  unsigned lines, extra_lines;
  size_t detail_len;
} vo_sum;

static void vo_sum_ids(vo_sum *sm, const uint32_t *ids, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    unsigned k = 0;
    while (k < sm->nids && sm->ids[k] != ids[i])
      k++;
    if (k < sm->nids)
      continue;
    if (sm->nids < sizeof sm->ids / sizeof sm->ids[0])
      sm->ids[sm->nids++] = ids[i];
    else
      sm->more++;
  }
}

static void vo_nondet(vo_verifier *v, vo_sum *sm, const vo_check *c,
                      uint64_t bytes, const char *where) {
  cucap_verify_report *rep = v->rep;
  rep->nondet_bytes += bytes;
  if (c->kind == VO_COPY)
    rep->nondet_copies++;
  else
    rep->nondet_regions++;
  const uint32_t *ids = c->nwriters ? c->writers : c->near;
  unsigned nids = c->nwriters ? c->nwriters : c->nnear;
  vo_sum_ids(sm, ids, nids);
  char who[200];
  vo_names_str(v, ids, nids, who, sizeof who);
  char line[640];
  snprintf(line, sizeof line, "  nondeterministic: %s: %" PRIu64 " of %" PRIu64
           " bytes%s%s%s\n", c->what, bytes, c->size, where,
           !who[0] ? "" : c->nwriters ? ", written by " : ", last launches before it: ",
           who);
  /* the log line names the full (mangled) writers */
  CUCAP_INFO("replay: verify: %.*s", (int)strlen(line) - 3, line + 2);
  for (unsigned i = 0; i < nids; i++)
    if (ids[i] < v->nnames)
      CUCAP_DEBUG("replay: verify:   writer: %s", v->names[ids[i]].s);
  size_t ll = strlen(line);
  if (sm->lines < VO_DETAIL_LINES && sm->detail_len + ll < sizeof rep->nondet_detail - 48) {
    memcpy(rep->nondet_detail + sm->detail_len, line, ll + 1);
    sm->detail_len += ll;
    sm->lines++;
  } else {
    sm->extra_lines++;
  }
}

/* A LaunchHash check: content that differs between replays, or a launch
 * whose region's hash differs from the recording's. */
static void vo_judge_hash(vo_verifier *v, vo_sum *sm, const vo_check *c) {
  char pn[48], where[320];
  if (c->hash_nd) {
    snprintf(where, sizeof where, " at 0x%" PRIx64 " (content differs "
             "between replays)", c->addr);
    vo_nondet(v, sm, c, c->size, where);
  } else if (c->ref_set && !cucap_hash128_eq(c->ref_hash, c->want_hash)) {
    const char *fname = c->nwriters && c->writers[0] < v->nnames
                            ? v->names[c->writers[0]].s : "?";
    char log[640], first[512];
    vo_passes_note(v, pn, sizeof pn);
    snprintf(log, sizeof log, "launch %" PRIu64 " (%s): region %u at 0x%"
             PRIx64 "+%" PRIu64 " differs after the launch%s",
             c->launch_index, fname, c->region, c->addr, c->size, pn);
    snprintf(first, sizeof first, "first divergent kernel: launch %" PRIu64
             " (%s), region %u, address 0x%" PRIx64 ", %" PRIu64
             " bytes (LaunchHash record %" PRIu64 ", launch seq %" PRIu64 ")%s",
             c->launch_index, fname, c->region, c->addr, c->size,
             c->rec_index, c->launch_seq, pn);
    vo_mismatch(v, log, first);
  }
}

/* A check with too many differences to keep: judged on the one pass that
 * counted them. */
static void vo_judge_unkept(vo_verifier *v, vo_sum *sm, const vo_check *c) {
  cucap_verify_report *rep = v->rep;
  rep->bytes_matched -= c->uk_count <= rep->bytes_matched ? c->uk_count : 0;
  if (c->uk_nd)
    vo_nondet(v, sm, c, c->uk_count, " (too many to keep: not located)");
  else if (c->hostw[0] && !v->o->strict)
    vo_host_written(v, c, c->uk_off, c->uk_got, c->uk_rec, c->uk_count);
  else
    vo_byte_mismatch(v, c, c->uk_off, c->uk_got, c->uk_rec, c->uk_count,
                     " (judged on one pass: too many differences to keep)", "");
}

/* A check compared byte by byte with the recording: deterministic
 * differences (reordered, host-written or a mismatch) and nondeterministic
 * ranges. */
static void vo_judge_bytes(vo_verifier *v, vo_sum *sm, vo_check *c) {
  cucap_verify_report *rep = v->rep;
  char where[320];
  if (!vo_reads_blob(v, c->blob, c->size)) {
    CUCAP_WARN("replay: verify: %s: recorded bytes unreadable at the verdict",
               c->what);
    return;
  }
  const uint8_t *want = v->want, *base = c->ref ? c->ref : want;
  uint64_t det = 0, off = c->size, nruns = 0, first_nd = c->size;
  uint64_t rlb = 0; /* bytes of accepted relocated pointers */
  det = vo_count_diff(base, want, c->size, c->rl, c->nd, &rlb, &off);
  for (uint64_t i = 0; c->nd && i < c->size; i++) {
    if (!(i & 7) && !c->nd[i >> 3]) { /* a clear bitmap byte: 8 bytes at once */
      i += 7;
      continue;
    }
    if (vo_nd_get(c, i) && (i == 0 || !vo_nd_get(c, i - 1))) {
      nruns++;
      if (first_nd == c->size)
        first_nd = i;
    }
  }
  uint64_t lost = det + c->nd_count + rlb;
  rep->bytes_matched -= lost <= rep->bytes_matched ? lost : rep->bytes_matched;
  uint64_t ow = 0, reordered = 0; /* verify_order.c */
  if (det && !(c->hostw[0] && !v->o->strict) && vo_order_only(c, base, want, &ow)) {
    reordered = det;
    rep->reordered_bytes += det;
    det = 0;
  }
  if (det && c->hostw[0] && !v->o->strict) {
    vo_host_written(v, c, off, base[off], want[off], det);
  } else if (det) {
    char besides[64] = "", hints[440];
    if (c->nd_count)
      snprintf(besides, sizeof besides, " (besides %" PRIu64
               " nondeterministic)", c->nd_count);
    vo_hints(v, c, off, base, want, hints, sizeof hints);
    if (c->hostw[0]) { /* --strict */
      size_t hl = strlen(hints);
      snprintf(hints + hl, sizeof hints - hl, "; the program's host code may have "
               "written them (--strict)");
    }
    vo_byte_mismatch(v, c, off, base[off], want[off], det, besides, hints);
  }
  if (c->nd_count) {
    char ord_note[160] = "";
    if (reordered)
      snprintf(ord_note, sizeof ord_note, "; %" PRIu64 " more differ from the recording "
               "only in order (its 4-byte values in the %" PRIu64 " words that vary or "
               "differ are a permutation of the replay's)", reordered, ow);
    snprintf(where, sizeof where, " in %" PRIu64 " range(s) from 0x%" PRIx64 "%s",
             nruns, c->addr ? vo_dev_addr(c, first_nd) : first_nd, ord_note);
    vo_nondet(v, sm, c, c->nd_count + reordered, where);
  }
}

/* The nondeterminism summary: the lines left out and the kernels named. */
static void vo_sum_finish(vo_verifier *v, const vo_sum *sm) {
  cucap_verify_report *rep = v->rep;
  if (sm->extra_lines) {
    size_t o = sm->detail_len;
    snprintf(rep->nondet_detail + o, sizeof rep->nondet_detail - o,
             "  nondeterministic: ... and %u more (CUCAP_LOG_LEVEL=info lists them)\n",
             sm->extra_lines);
  }
  vo_names_str(v, sm->ids, sm->nids, rep->nondet_kernels, sizeof rep->nondet_kernels);
  if (sm->more) {
    size_t o = strlen(rep->nondet_kernels);
    snprintf(rep->nondet_kernels + o, sizeof rep->nondet_kernels - o,
             " and %u more", sm->more);
  }
}

void vo_judge(vo_verifier *v) {
  cucap_verify_report *rep = v->rep;
  rep->verify_passes = v->passes;
  vo_sum sm;
  memset(&sm, 0, sizeof sm);
  vo_ord *ord = malloc((v->nchk ? v->nchk : 1) * sizeof *ord);
  if (!ord)
    return;
  for (size_t i = 0; i < v->nchk; i++) {
    ord[i].rec_index = v->chk[i].rec_index;
    ord[i].region = v->chk[i].region;
    ord[i].ix = i;
  }
  if (v->nchk)
    cucap_sort(ord, v->nchk, sizeof *ord, vo_ord_cmp);
  vo_reloc_apply(v); /* before v->want holds a check's recorded bytes */
  for (size_t k = 0; k < v->nchk; k++) {
    vo_check *c = &v->chk[ord[k].ix];
    if (c->kind == VO_HASH)
      vo_judge_hash(v, &sm, c);
    else if (c->unkept)
      vo_judge_unkept(v, &sm, c);
    else
      vo_judge_bytes(v, &sm, c);
  }
  free(ord);
  vo_host_written_end(v);
  vo_sum_finish(v, &sm);
}
