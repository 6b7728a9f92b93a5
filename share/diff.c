/* diff.c - `cucap diff`: compares the models of two captures
 * (diff_internal.h) and writes the findings (cucap_diff.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_units.h"
#include "diff_internal.h"

typedef struct dd {
  dm_model a, b;
  FILE *out;
  const cucap_diff_options *o;
  cucap_diff_report *rep;
  size_t max;
} dd;

static const char *call_name(dd *d, unsigned cbid, char *buf, size_t n) {
  const char *s = d->o->call_name ? d->o->call_name(cbid) : NULL;
  if (s)
    return s;
  snprintf(buf, n, "cbid %u", cbid);
  return buf;
}

static const char *kname(dd *d, const dm_model *m, uint32_t id, char *buf, size_t n) {
  const char *s = dm_s(m, id);
  return d->o->kernel_name ? d->o->kernel_name(s, buf, n) : s;
}

/* ---------------------------------------------------------------- calls */

static void describe(dd *d, const dm_model *m, const dm_call *c, char *buf, size_t n) {
  char nb[32];
  snprintf(buf, n, "%s%s%s%s (seq %" PRIu64 ", result %d)", call_name(d, c->cbid, nb, sizeof nb),
           c->what ? " " : "", c->what ? dm_s(m, c->what) : "", "", c->seq, (int)c->result);
}

static void compare_calls(dd *d) {
  size_t na = d->a.threads.n, nb = d->b.threads.n, n = na > nb ? na : nb;
  uint64_t best_seq = UINT64_MAX;
  char first[2200] = "";
  size_t diverged = 0;
  for (size_t t = 0; t < n; t++) {
    const dm_thread *ta = t < na ? sh_vec_at(&d->a.threads, t) : NULL;
    const dm_thread *tb = t < nb ? sh_vec_at(&d->b.threads, t) : NULL;
    char line[2200], da[1000], db[1000];
    uint64_t seq;
    if (!ta || !tb) {
      const dm_thread *only = ta ? ta : tb;
      const dm_call *c0 = only->calls.n ? sh_vec_at(&only->calls, 0) : NULL;
      seq = c0 ? c0->seq : 0;
      snprintf(line, sizeof line, "thread #%zu (%zu calls) is only in %s", t, only->calls.n,
               ta ? "A" : "B");
    } else {
      size_t k = 0, ka = ta->calls.n, kb = tb->calls.n;
      while (k < ka && k < kb &&
             ((dm_call *)sh_vec_at(&ta->calls, k))->key == ((dm_call *)sh_vec_at(&tb->calls, k))->key)
        k++;
      if (k == ka && k == kb)
        continue;
      if (k < ka && k < kb) {
        const dm_call *ca = sh_vec_at(&ta->calls, k), *cb = sh_vec_at(&tb->calls, k);
        describe(d, &d->a, ca, da, sizeof da);
        describe(d, &d->b, cb, db, sizeof db);
        /* same call, same short description: what differs is in what the
         * description leaves out, say so rather than show two equal lines */
        if (!strcmp(da, db) && strlen(db) + 40 < sizeof db)
          strcat(db, " (same call, other arguments)");
        seq = ca->seq;
        snprintf(line, sizeof line, "thread #%zu (tid %u / %u), call %zu: A %s; B %s", t,
                 ta->tid, tb->tid, k, da, db);
      } else {
        const dm_thread *lon = k < ka ? ta : tb;
        const dm_call *c = sh_vec_at(&lon->calls, k);
        describe(d, lon == ta ? &d->a : &d->b, c, da, sizeof da);
        seq = c->seq;
        snprintf(line, sizeof line, "thread #%zu: %s has %zu more calls, from call %zu: %s", t,
                 lon == ta ? "A" : "B", (lon == ta ? ka : kb) - k, k, da);
      }
    }
    diverged++;
    if (seq < best_seq || !first[0]) {
      best_seq = seq;
      snprintf(first, sizeof first, "%s", line);
    }
  }
  if (diverged) {
    d->rep->api_diverged = 1;
    fprintf(d->out, "API sequence: first divergence: %s\n", first);
    if (diverged > 1)
      fprintf(d->out, "API sequence: %zu threads diverge\n", diverged);
  }
}

/* ---------------------------------------------------------------- launches */

static const char *cls_name(uint32_t cls) {
  return cls == DM_PINNED ? "pinned allocation #" : cls == DM_GLOBAL ? "global " : "allocation #";
}

/* Host address classes counted apart (diff report). */
enum { HK_STACK, HK_HEAP, HK_ANON, HK_FILE, HK_DEVICE, HK_OTHER, HK_HALF, HK_N };
static const char *const hk_names[HK_N] = {"stack",  "heap",         "anonymous memory",
                                           "mapped files", "driver-placed device memory",
                                           "other", "stale pointer halves"};

static int hk_of(uint8_t kind) {
  switch (kind) {
  case CUCAP_FB_ADDRESSKIND_STACK: return HK_STACK;
  case CUCAP_FB_ADDRESSKIND_HEAP: return HK_HEAP;
  case CUCAP_FB_ADDRESSKIND_ANON: return HK_ANON;
  case CUCAP_FB_ADDRESSKIND_FILE: return HK_FILE;
  case CUCAP_FB_ADDRESSKIND_DEVICE: return HK_DEVICE;
  default: return HK_OTHER;
  }
}

/* Host addresses. Below 4 GiB a word is a value (a float with a zero upper
 * half, a count, a size), except an 8-aligned word in the brk heap, which a
 * program that is not position-independent (the usual python3) has there
 * and whose stale pointers fill struct padding (a float of 0.05 is not
 * 8-aligned; 0.5 is: the limit of this rule). Stale upper halves only count
 * from 2^44 up (x86-64 mappings of PIE programs, libraries, stacks: 0x55..,
 * 0x7f..). */
#define HOST_MIN ((uint64_t)1 << 32)
#define HALF_MIN 0x1000u

static int host_ok(uint64_t v, const dm_space *r) {
  return r && (v >= HOST_MIN || (r->kind == CUCAP_FB_ADDRESSKIND_HEAP && v % 8 == 0));
}

/* Two differing words va (in A) and vb (in B) at the same place: -1 when
 * they are not host addresses of the same kind of region (a difference),
 * else the class (HK_*) they are counted under; *same is set when their
 * offsets inside their regions agree (the same place in both runs). */
static int host_rule(const dd *d, uint64_t va, uint64_t vb, int *same) {
  *same = 0;
  const dm_space *ra = dm_space_at(&d->a, va), *rb = dm_space_at(&d->b, vb);
  if (host_ok(va, ra) && host_ok(vb, rb) && ra->kind == rb->kind && ra->name == rb->name) {
    /* the stack grows down: offsets from its top */
    uint64_t oa = ra->kind == CUCAP_FB_ADDRESSKIND_STACK ? ra->end - va : va - ra->start;
    uint64_t ob = rb->kind == CUCAP_FB_ADDRESSKIND_STACK ? rb->end - vb : vb - rb->start;
    *same = oa == ob;
    return hk_of(ra->kind);
  }
  /* the upper half of a stale pointer left in struct padding, the lower
   * half overwritten by a member: equal lower halves, upper halves that are
   * those of mapped addresses in each run */
  uint32_t la = (uint32_t)va, lb = (uint32_t)vb, ha = (uint32_t)(va >> 32), hb = (uint32_t)(vb >> 32);
  if (la == lb && ha != hb && ha >= HALF_MIN && hb >= HALF_MIN &&
      dm_space_overlaps(&d->a, (uint64_t)ha << 32, ((uint64_t)ha + 1) << 32) &&
      dm_space_overlaps(&d->b, (uint64_t)hb << 32, ((uint64_t)hb + 1) << 32))
    return HK_HALF;
  return -1;
}

/* Compares the argument blocks of x (A) and y (B): 1 and a description in
 * what when they differ. Words that differ only as host addresses are
 * counted into host[] (not a difference). */
static int args_differ(dd *d, const dm_launch *x, const dm_launch *y, char *what, size_t n,
                       uint64_t host[HK_N], int *pointer) {
  *pointer = 0;
  const dm_model *ma = &d->a;
  if (x->nargs != y->nargs) {
    snprintf(what, n, "argument block of %u vs %u bytes", x->nargs, y->nargs);
    return 1;
  }
  /* words pointing into recorded regions: by (class, ordinal, offset) */
  for (uint32_t i = 0, j = 0; i < x->nptrs || j < y->nptrs;) {
    const dm_ptr *p = i < x->nptrs ? &x->ptrs[i] : NULL, *q = j < y->nptrs ? &y->ptrs[j] : NULL;
    if (p && q && p->offset == q->offset) {
      if (p->cls != q->cls || p->alloc != q->alloc || p->delta != q->delta) {
        char ga[40], gb[40];
        snprintf(ga, sizeof ga, "%s%" PRIu64 "+%" PRIu64, cls_name(p->cls),
                 p->cls == DM_GLOBAL ? (uint64_t)0 : p->alloc, p->delta);
        snprintf(gb, sizeof gb, "%s%" PRIu64 "+%" PRIu64, cls_name(q->cls),
                 q->cls == DM_GLOBAL ? (uint64_t)0 : q->alloc, q->delta);
        snprintf(what, n, "pointer at argument offset %u: A %s, B %s", p->offset, ga, gb);
        *pointer = 1;
        return 1;
      }
      i++, j++;
      continue;
    }
    /* a recorded pointer in one capture only */
    int in_a = p && (!q || p->offset < q->offset);
    const dm_ptr *r = in_a ? p : q;
    const dm_launch *other = in_a ? y : x;
    uint64_t v = 0;
    memcpy(&v, other->args + r->offset, 8);
    snprintf(what, n, "pointer at argument offset %u: %s %s%" PRIu64 "+%" PRIu64 ", %s 0x%" PRIx64
             " (not in a recorded allocation)", r->offset, in_a ? "A" : "B", cls_name(r->cls),
             r->cls == DM_GLOBAL ? (uint64_t)0 : r->alloc, r->delta, in_a ? "B" : "A", v);
    *pointer = 1;
    return 1;
  }
  const dm_layout *lay = x->layout ? sh_vec_at(&ma->layouts, x->layout - 1) : NULL;
  uint64_t found[HK_N] = {0};
  for (uint32_t i = 0; i < x->nargs; i++) {
    if (x->args[i] == y->args[i])
      continue;
    uint32_t w = i & ~7u;
    if (dm_word_in_param(lay, x->nargs, w)) {
      uint64_t va, vb;
      memcpy(&va, x->args + w, 8);
      memcpy(&vb, y->args + w, 8);
      int same = 0, k = host_rule(d, va, vb, &same);
      if (k >= 0) {
        if (!same)
          found[k]++;
        i = w + 7; /* the rest of the word */
        continue;
      }
    }
    /* the parameter holding byte i, when the layout is known */
    for (uint32_t p = 0; lay && p < lay->n; p++) {
      uint32_t po = lay->off[p], ps = lay->size[p];
      if (i < po || i - po >= ps || po + ps > x->nargs)
        continue;
      char ha[40] = "", hb[40] = "";
      /* up to 16 bytes around the difference (a struct parameter is long) */
      uint32_t from = ps > 16 && i - po >= 8 ? ((i - po) & ~7u) - 8 + po : po;
      uint32_t shown = po + ps - from > 16 ? 16 : po + ps - from;
      for (uint32_t k = 0; k < shown; k++) { /* little-endian: most significant first */
        snprintf(ha + 2 * k, 3, "%02x", x->args[from + shown - 1 - k]);
        snprintf(hb + 2 * k, 3, "%02x", y->args[from + shown - 1 - k]);
      }
      if (from == po && shown == ps)
        snprintf(what, n, "parameter %u (offset %u, %u bytes): A 0x%s, B 0x%s", p, po, ps, ha, hb);
      else
        snprintf(what, n, "parameter %u (offset %u, %u bytes), bytes %u..%u: A 0x%s, B 0x%s", p,
                 po, ps, from - po, from - po + shown - 1, ha, hb);
      return 1;
    }
    uint32_t o = i & ~7u, m = x->nargs - o < 8 ? x->nargs - o : 8;
    char ha[20] = "", hb[20] = "";
    for (uint32_t k = 0; k < m; k++) {
      snprintf(ha + 2 * k, 3, "%02x", x->args[o + k]);
      snprintf(hb + 2 * k, 3, "%02x", y->args[o + k]);
    }
    snprintf(what, n, "argument bytes at offset %u: A %s, B %s", i, ha, hb);
    return 1;
  }
  for (int k = 0; k < HK_N; k++)
    host[k] += found[k];
  return 0;
}

static void compare_launches(dd *d) {
  cucap_map idx = {0}; /* hash(group, nth) -> B index + 1 */
  d->rep->launches_a = d->a.launches.n;
  d->rep->launches_b = d->b.launches.n;
  for (size_t i = 0; i < d->b.launches.n; i++) {
    dm_launch *l = sh_vec_at(&d->b.launches, i);
    (void)sh_map_put(&idx, sh_fnv1a(l->group, &l->nth, 8) | 1, i + 1);
  }
  size_t shown = 0;
  char ka[1024], what[256];
  uint64_t host[HK_N] = {0};
  for (size_t i = 0; i < d->a.launches.n; i++) {
    dm_launch *x = sh_vec_at(&d->a.launches, i);
    uint64_t j1;
    if (!cucap_map_get(&idx, sh_fnv1a(x->group, &x->nth, 8) | 1, &j1))
      continue;
    dm_launch *y = sh_vec_at(&d->b.launches, j1 - 1);
    x->matched = y->matched = 1;
    d->rep->launches_matched++;
    int cfg = memcmp(x->grid, y->grid, sizeof x->grid) || memcmp(x->block, y->block, sizeof x->block) ||
              x->smem != y->smem;
    if (cfg)
      snprintf(what, sizeof what, "configuration grid=(%u,%u,%u) block=(%u,%u,%u) smem=%u vs "
               "grid=(%u,%u,%u) block=(%u,%u,%u) smem=%u", x->grid[0], x->grid[1], x->grid[2],
               x->block[0], x->block[1], x->block[2], x->smem, y->grid[0], y->grid[1], y->grid[2],
               y->block[0], y->block[1], y->block[2], y->smem);
    uint64_t before = 0, after = 0;
    for (int k = 0; k < HK_N; k++)
      before += host[k];
    int pointer = 0;
    if (!cfg && !args_differ(d, x, y, what, sizeof what, host, &pointer)) {
      for (int k = 0; k < HK_N; k++)
        after += host[k];
      d->rep->host_launches += after > before;
      continue;
    }
    /* Bytes that differ without a pointer into recorded memory among them,
     * while the memory after the launch is the same in both captures: the
     * kernel never read them (stale stack bytes in unused slots of a struct
     * parameter, such as PyTorch's TensorListMetadata) or they made no
     * difference to what it wrote. Needs launch hashes in both captures. */
    if (!cfg && !pointer && x->has_effect && y->has_effect && x->effect == y->effect) {
      d->rep->noeffect_launches++;
      continue;
    }
    d->rep->launches_differ++;
    if (shown++ < d->max)
      fprintf(d->out, "launch %" PRIu64 " (B: %" PRIu64 ") %s, occurrence %" PRIu64
              " at its call site: %s\n", x->launch_index, y->launch_index,
              kname(d, &d->a, x->name, ka, sizeof ka), x->nth, what);
  }
  if (shown > d->max)
    fprintf(d->out, "... %zu more launches differ\n", shown - d->max);
  if (d->rep->noeffect_launches)
    fprintf(d->out, "without effect: %" PRIu64 " launches' argument bytes differ (no pointer "
            "into recorded memory among them) while the memory after each launch is the "
            "same in both captures (launch hashes): not a difference\n",
            d->rep->noeffect_launches);
  for (int k = 0; k < HK_N; k++)
    d->rep->host_words += host[k];
  if (d->rep->host_words) {
    fprintf(d->out, "host addresses: %" PRIu64 " argument words of %" PRIu64
            " otherwise equal launches differ only as host addresses (", d->rep->host_words,
            d->rep->host_launches);
    for (int k = 0, first = 1; k < HK_N; k++)
      if (host[k]) {
        fprintf(d->out, "%s%s %" PRIu64, first ? "" : ", ", hk_names[k], host[k]);
        first = 0;
      }
    fprintf(d->out, "): they change from run to run, not compared\n");
  }
  shown = 0;
  for (int side = 0; side < 2; side++) {
    const dm_model *m = side ? &d->b : &d->a;
    for (size_t i = 0; i < m->launches.n; i++) {
      const dm_launch *l = sh_vec_at(&m->launches, i);
      if (l->matched)
        continue;
      d->rep->launches_unmatched++;
      if (shown++ < d->max)
        fprintf(d->out, "launch %" PRIu64 " %s (occurrence %" PRIu64 " at its call site) is only in %s\n",
                l->launch_index, kname(d, m, l->name, ka, sizeof ka), l->nth, side ? "B" : "A");
    }
  }
  if (shown > d->max)
    fprintf(d->out, "... %zu more launches only in one capture\n", shown - d->max);
  cucap_map_free(&idx);
}

/* ---------------------------------------------------------------- memory */

/* First offset where two blobs differ (UINT64_MAX if unknown). */
static uint64_t first_diff(dd *d, cucap_hash128 ha, cucap_hash128 hb, uint64_t size) {
  if (size > ((uint64_t)256 << 20))
    return UINT64_MAX;
  uint8_t *x = malloc(size ? size : 1), *y = malloc(size ? size : 1);
  uint64_t off = UINT64_MAX;
  if (x && y && cucap_reader_blob_read(d->a.r, ha, x, size) == CUCAP_OK &&
      cucap_reader_blob_read(d->b.r, hb, y, size) == CUCAP_OK)
    for (off = 0; off < size && x[off] == y[off]; off++)
      ;
  free(x);
  free(y);
  return off;
}

static void compare_copies(dd *d) {
  cucap_map idx = {0};
  for (size_t i = 0; i < d->b.copies.n; i++) {
    const dm_copy *c = sh_vec_at(&d->b.copies, i);
    (void)sh_map_put(&idx, ((uint64_t)c->thread << 40 | c->nth) + 1, i + 1);
  }
  size_t shown = 0;
  for (size_t i = 0; i < d->a.copies.n; i++) {
    const dm_copy *x = sh_vec_at(&d->a.copies, i);
    uint64_t j1;
    if (!cucap_map_get(&idx, ((uint64_t)x->thread << 40 | x->nth) + 1, &j1))
      continue;
    const dm_copy *y = sh_vec_at(&d->b.copies, j1 - 1);
    if (!x->has_payload || !y->has_payload)
      continue; /* bytes not recorded (no_dtoh_payload, or a copy never read) */
    d->rep->copies_compared++;
    if (x->size == y->size && !memcmp(&x->payload, &y->payload, sizeof x->payload))
      continue;
    d->rep->copies_differ++;
    if (shown++ >= d->max)
      continue;
    char ha[48], hb[48];
    cucap_bytes_exact(x->size, ha, sizeof ha);
    if (x->size != y->size) {
      fprintf(d->out, "DtoH copy %" PRIu64 " of thread #%u (seq %" PRIu64 " / %" PRIu64
              "): %s vs %s\n", x->nth, x->thread, x->seq, y->seq, ha,
              cucap_bytes_exact(y->size, hb, sizeof hb));
      continue;
    }
    uint64_t off = first_diff(d, x->payload, y->payload, x->size);
    if (off == UINT64_MAX)
      fprintf(d->out, "DtoH copy %" PRIu64 " of thread #%u (seq %" PRIu64 " / %" PRIu64
              "): the %s differ\n", x->nth, x->thread, x->seq, y->seq, ha);
    else
      fprintf(d->out, "DtoH copy %" PRIu64 " of thread #%u (seq %" PRIu64 " / %" PRIu64
              "): %s, first difference at offset %" PRIu64 "\n", x->nth,
              x->thread, x->seq, y->seq, ha, off);
  }
  if (shown > d->max)
    fprintf(d->out, "... %zu more copies differ\n", shown - d->max);
  cucap_map_free(&idx);
}

static uint64_t region_key(const dm_region *r) {
  uint64_t v[5] = {(uint64_t)r->reason, r->launch_index, r->snap, r->alloc, r->delta};
  return sh_fnv1a(SH_FNV_INIT, v, sizeof v) | 1;
}

static void compare_regions(dd *d) {
  cucap_map idx = {0};
  for (size_t i = 0; i < d->b.regions.n; i++)
    (void)sh_map_put(&idx, region_key(sh_vec_at(&d->b.regions, i)), i + 1);
  size_t shown = 0;
  for (size_t i = 0; i < d->a.regions.n; i++) {
    const dm_region *x = sh_vec_at(&d->a.regions, i);
    uint64_t j1;
    if (!cucap_map_get(&idx, region_key(x), &j1))
      continue;
    const dm_region *y = sh_vec_at(&d->b.regions, j1 - 1);
    d->rep->regions_compared++;
    if (x->size == y->size && !memcmp(&x->data, &y->data, sizeof x->data))
      continue;
    d->rep->regions_differ++;
    if (shown++ >= d->max)
      continue;
    uint64_t off = x->size == y->size ? first_diff(d, x->data, y->data, x->size) : UINT64_MAX;
    char ha[48], hb[48];
    fprintf(d->out, "snapshot (%s, launch %" PRIu64 ") region of allocation #%" PRIu64 "+%" PRIu64
            ": %s vs %s",
            cucap_fb_snapshot_reason_name(x->reason) ? cucap_fb_snapshot_reason_name(x->reason) : "?",
            x->launch_index, x->alloc, x->delta, cucap_bytes_exact(x->size, ha, sizeof ha),
            cucap_bytes_exact(y->size, hb, sizeof hb));
    if (off != UINT64_MAX)
      fprintf(d->out, ", first difference at offset %" PRIu64, off);
    fputc('\n', d->out);
  }
  if (shown > d->max)
    fprintf(d->out, "... %zu more snapshot regions differ\n", shown - d->max);
  cucap_map_free(&idx);
}

/* ---------------------------------------------------------------- profiles */

typedef struct kstat {
  uint32_t name_a;        /* string id in A (or B when only there) */
  int side;               /* where name_a lives */
  double t[2];            /* total ns in A, B */
  uint64_t n[2];
  double *msum[2];        /* per metric sums (metrics matched by name) */
} kstat;

static int kstat_cmp(const void *p, const void *q) {
  const kstat *x = p, *y = q;
  double dx = fabs(x->t[1] - x->t[0]), dy = fabs(y->t[1] - y->t[0]);
  return dx > dy ? -1 : dx < dy;
}

static void compare_profiles(dd *d) {
  const cucap_profile_table *pa = d->o->profile_a, *pb = d->o->profile_b;
  if (!pa || !pb)
    return;
  size_t nm = cucap_profile_table_metric_count(pa);
  cucap_map by = {0}; /* hash(kernel name) -> index + 1 */
  sh_vec ks;
  sh_vec_init(&ks, sizeof(kstat));
  for (int side = 0; side < 2; side++) {
    const dm_model *m = side ? &d->b : &d->a;
    const cucap_profile_table *p = side ? pb : pa;
    for (size_t i = 0; i < m->launches.n; i++) {
      const dm_launch *l = sh_vec_at(&m->launches, i);
      const cucap_profile_row *r = cucap_profile_table_find(p, l->launch_index);
      if (!r)
        continue;
      const char *nm_s = dm_s(m, l->name);
      uint64_t h = sh_fnv1a(SH_FNV_INIT, nm_s, strlen(nm_s)) | 1, k1;
      kstat *k;
      if (cucap_map_get(&by, h, &k1)) {
        k = sh_vec_at(&ks, k1 - 1);
      } else {
        k = sh_vec_push(&ks);
        if (!k || !sh_map_put(&by, h, ks.n))
          goto out;
        k->name_a = l->name;
        k->side = side;
        k->msum[0] = calloc(nm + 1, sizeof(double));
        k->msum[1] = calloc(nm + 1, sizeof(double));
        if (!k->msum[0] || !k->msum[1])
          goto out;
      }
      k->t[side] += (double)(r->end_ns - r->start_ns);
      k->n[side]++;
      for (size_t j = 0; j < nm; j++) {
        /* metrics of B matched to A's by name */
        const char *mname = cucap_profile_table_metric_name(pa, j);
        double v = NAN;
        if (!side) {
          v = r->metrics[j];
        } else {
          for (size_t q = 0; q < cucap_profile_table_metric_count(pb); q++)
            if (!strcmp(cucap_profile_table_metric_name(pb, q), mname))
              v = r->metrics[q];
        }
        if (!isnan(v))
          k->msum[side][j] += v;
      }
    }
  }
  cucap_sort(ks.data, ks.n, sizeof(kstat), kstat_cmp);
  d->rep->kernels_profiled = ks.n;
  fprintf(d->out, "GPU time per kernel (A -> B, largest change first):\n");
  for (size_t i = 0; i < ks.n && i < d->max; i++) {
    kstat *k = sh_vec_at(&ks, i);
    char kb[1024];
    double ta = k->t[0] / 1e3, tb = k->t[1] / 1e3;
    fprintf(d->out, "  %s: %.3f us (%" PRIu64 " launches) -> %.3f us (%" PRIu64 ")",
            kname(d, k->side ? &d->b : &d->a, k->name_a, kb, sizeof kb), ta, k->n[0], tb, k->n[1]);
    if (ta > 0)
      fprintf(d->out, " %+.1f%%", (tb - ta) / ta * 100.0);
    for (size_t j = 0; j < nm && k->n[0] && k->n[1]; j++)
      fprintf(d->out, "; %s %.4g -> %.4g", cucap_profile_table_metric_name(pa, j),
              k->msum[0][j] / (double)k->n[0], k->msum[1][j] / (double)k->n[1]);
    fputc('\n', d->out);
  }
out:
  for (size_t i = 0; i < ks.n; i++) {
    kstat *k = sh_vec_at(&ks, i);
    free(k->msum[0]);
    free(k->msum[1]);
  }
  sh_vec_free(&ks);
  cucap_map_free(&by);
}

cucap_status cucap_diff(cucap_reader *a, cucap_reader *b, FILE *out,
                        const cucap_diff_options *o, cucap_diff_report *rep) {
  memset(rep, 0, sizeof *rep);
  dd d;
  memset(&d, 0, sizeof d);
  d.out = out;
  d.o = o;
  d.rep = rep;
  d.max = o->max_items ? o->max_items : 10;
  cucap_status st = dm_build(&d.a, a, o);
  if (st != CUCAP_OK) {
    snprintf(rep->error, sizeof rep->error, "A: %s", cucap_status_str(st));
    goto out;
  }
  st = dm_build(&d.b, b, o);
  if (st != CUCAP_OK) {
    snprintf(rep->error, sizeof rep->error, "B: %s", cucap_status_str(st));
    goto out;
  }
  rep->calls_a = d.a.ncalls;
  rep->calls_b = d.b.ncalls;
  compare_calls(&d);
  compare_launches(&d);
  compare_copies(&d);
  compare_regions(&d);
  rep->same = !rep->api_diverged && !rep->launches_differ && !rep->launches_unmatched &&
              !rep->copies_differ && !rep->regions_differ;
  compare_profiles(&d);
  char hosts[64] = "";
  if (rep->host_words)
    snprintf(hosts, sizeof hosts, "; %" PRIu64 " host addresses differ (not compared)",
             rep->host_words);
  fprintf(out, "%s: %" PRIu64 " / %" PRIu64 " calls, %" PRIu64 " launches matched (%" PRIu64
          " differ, %" PRIu64 " unmatched), %" PRIu64 " DtoH copies compared (%" PRIu64
          " differ), %" PRIu64 " snapshot regions compared (%" PRIu64 " differ)%s\n",
          rep->same ? "same" : "differ", rep->calls_a, rep->calls_b, rep->launches_matched,
          rep->launches_differ, rep->launches_unmatched, rep->copies_compared, rep->copies_differ,
          rep->regions_compared, rep->regions_differ, hosts);
  if (fflush(out) != 0 || ferror(out))
    st = CUCAP_ERR_IO;
out:
  dm_free(&d.a);
  dm_free(&d.b);
  return st;
}
