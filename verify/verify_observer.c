/* verify_observer.c - --verify as a replay observer (cucap_replay_observer.h):
 * the checks of every pass and the planning of passes. The verdict, the
 * messages and the diagnostic pass live in verify_judge.c; the model is
 * described in verify_internal.h and docs/design.md ("Verify").
 *
 * What is checked, at its point in the record stream:
 *  - every copy to the host (op->host_data after a DtoH/AtoH copy) against
 *    the payload the recorder stored;
 *  - every Snapshot record except BeforeLaunch (the state --loop restores),
 *    whatever its reason (Exit, Sync, ...): the context is synchronised and
 *    each region read back; an AfterLaunch snapshot whose launch has not run
 *    yet waits for it;
 *  - with --verify=launch, every LaunchHash region, hashed like the recorder
 *    does, after the launch it names (which may come later in the file). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cucap_vec.h"
#include "verify_internal.h"

/* Bytes of first-pass copies and masks kept for checks that differ; past
 * this a check is judged on one pass, and says so. */
#define VO_KEEP_MAX ((uint64_t)1 << 30)
/* snapshot regions are read back in pieces of this size */
#define VO_READ_CHUNK ((uint64_t)64 << 20)

cucap_hash128 vo_h(const cucap_fb_hash128 *h) {
  cucap_hash128 x = {0, 0};
  if (h) {
    x.lo = h->lo;
    x.hi = h->hi;
  }
  return x;
}

uint64_t vo_key(uint64_t rec_index, uint32_t region) {
  return (rec_index << 24) ^ region ^ ((uint64_t)region << 52);
}

int vo_grow(uint8_t **buf, size_t *cap, uint64_t need) {
  if (need <= *cap && *buf)
    return 1;
  if (need > ((uint64_t)1 << 40))
    return 0;
  size_t nc = *cap ? *cap : (size_t)1 << 16;
  while (nc < need)
    nc *= 2;
  uint8_t *p = realloc(*buf, nc);
  if (!p)
    return 0;
  *buf = p;
  *cap = nc;
  return 1;
}

/* Device address of byte `off` of a check (2D/3D copies are packed). */
uint64_t vo_dev_addr(const vo_check *c, uint64_t off) {
  if (!c->geom || !c->g_width)
    return c->addr + off;
  uint64_t row = off / c->g_width, col = off % c->g_width;
  uint64_t rows = c->g_rows ? c->g_rows : 1;
  return c->addr + (row / rows) * c->g_slice + (row % rows) * c->g_pitch + col;
}


uint32_t vo_intern(vo_verifier *v, const char *name, int kernel) {
  if (!name)
    name = "?";
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++)
    h = (h ^ (uint8_t)*p) * 1099511628211ull;
  h ^= (uint64_t)kernel;
  for (;;) {
    uint64_t ix = 0;
    if (!cucap_map_get(&v->name_ix, h, &ix))
      break;
    if (!strcmp(v->names[ix - 1].s, name))
      return (uint32_t)(ix - 1);
    h = h * 31 + 7; /* another name with this hash: probe on */
  }
  if (!CUCAP_VEC_RESERVE(v->names, v->capnames, v->nnames + 1, 64))
    return VO_NO_NAME;
  char *s = strdup(name);
  if (!s || !cucap_map_put(&v->name_ix, h, v->nnames + 1)) {
    free(s);
    return VO_NO_NAME;
  }
  v->names[v->nnames].s = s;
  v->names[v->nnames].kernel = kernel;
  return (uint32_t)v->nnames++;
}

int vo_reads_blob(vo_verifier *v, cucap_hash128 h, uint64_t size) {
  uint64_t bsz = 0;
  return cucap_reader_blob_size(v->r, h, &bsz) == CUCAP_OK && bsz == size &&
         vo_grow(&v->want, &v->want_cap, size ? size : 1) &&
         cucap_reader_blob_read(v->r, h, v->want, size) == CUCAP_OK;
}

vo_ring *vo_ring_of(vo_verifier *v, uint64_t stream, int make) {
  uint64_t ix = 0;
  if (cucap_map_get(&v->stream_ring, stream, &ix))
    return &v->rings[ix - 1];
  if (!make)
    return NULL;
  if (!CUCAP_VEC_RESERVE(v->rings, v->caprings, v->nrings + 1, 16))
    return NULL;
  if (!cucap_map_put(&v->stream_ring, stream, v->nrings + 1))
    return NULL;
  memset(&v->rings[v->nrings], 0, sizeof v->rings[0]);
  return &v->rings[v->nrings++];
}

static void vo_ring_push(vo_ring *g, uint32_t id) {
  if (!g || id == VO_NO_NAME || (g->n && g->id[0] == id))
    return;
  memmove(g->id + 1, g->id, (VO_NEAR - 1) * sizeof g->id[0]);
  g->id[0] = id;
  if (g->n < VO_NEAR)
    g->n++;
}

/* ---------------------------------------------------------------- checks */


static vo_check *vo_check_new(vo_verifier *v, const vo_info *in, uint64_t key) {
  if (!CUCAP_VEC_RESERVE(v->chk, v->capchk, v->nchk + 1, 16))
    return NULL;
  vo_check *c = &v->chk[v->nchk];
  memset(c, 0, sizeof *c);
  c->rec_index = in->rec_index;
  c->region = in->region;
  c->kind = in->kind;
  snprintf(c->what, sizeof c->what, "%s", in->what);
  c->addr = in->addr;
  c->size = in->size;
  c->blob = in->blob;
  c->launch_index = CUCAP_REPLAY_NO_LAUNCH;
  if (in->hostw)
    snprintf(c->hostw, sizeof c->hostw, "%s", in->hostw);
  if (in->g && in->addr) {
    const cucap_fb_copy_geometry *g = in->g;
    c->geom = 1;
    c->g_width = cucap_fb_copy_geometry_width_bytes(g);
    c->g_rows = cucap_fb_copy_geometry_height(g);
    c->g_pitch = cucap_fb_copy_geometry_src_pitch(g);
    uint64_t sh = cucap_fb_copy_geometry_src_height(g);
    c->g_slice = c->g_pitch * (sh ? sh : c->g_rows);
    c->addr += cucap_fb_copy_geometry_src_x_bytes(g) +
               cucap_fb_copy_geometry_src_y(g) * c->g_pitch +
               cucap_fb_copy_geometry_src_z(g) * c->g_slice;
  }
  c->align = c->geom ? 0 : (unsigned)(c->addr & 7);
  if (in->near) {
    c->nnear = in->near->n;
    memcpy(c->near, in->near->id, sizeof c->near);
  }
  if (!cucap_map_put(&v->seen, key, v->nchk + 1))
    return NULL;
  v->nchk++;
  return c;
}

/* Compares `got` (all bytes of the check, this pass) with the recording
 * (v->want) and with the first pass that compared the check; a check gets
 * state (v->chk) the first time it differs from the recording. */
void vo_compare(vo_verifier *v, const vo_info *in, const uint8_t *got) {
  uint64_t key = vo_key(in->rec_index, in->region), ix = 0;
  int known = cucap_map_get(&v->seen, key, &ix);
  const uint8_t *want = v->want;
  uint64_t size = in->size;
  cucap_verify_report *rep = v->rep;
  if (!known) { /* first time this check is compared: count it once */
    rep->bytes_checked += size;
    rep->bytes_matched += size; /* less its differences, at the verdict */
  }
  vo_check *c = ix ? &v->chk[ix - 1] : NULL;
  if (c && (c->dead || c->unkept))
    return;
  /* texture/surface handles renumbered by the replay are not differences */
  cucap_replay_session_fix_expected(v->s, got, v->want, size, in->addr);
  uint64_t d = vo_first_diff(got, want, size);
  if (!c) {
    if (d == size) {
      if (!known)
        cucap_map_put(&v->seen, key, 0);
      return;
    }
    c = vo_check_new(v, in, key);
    if (!c)
      return;
    uint64_t need = (known ? 0 : size) + size / 8 + 1;
    if (v->kept + need > VO_KEEP_MAX ||
        !(c->nd = calloc(size / 8 + 1, 1)) ||
        (!known && !(c->ref = malloc(size ? size : 1)))) {
      free(c->nd);
      c->nd = NULL;
      uint64_t n = 0;
      for (uint64_t i = d; i < size; i++)
        n += got[i] != want[i];
      c->unkept = 1;
      c->uk_nd = known; /* earlier passes matched: these bytes vary */
      c->uk_off = d;
      c->uk_count = n;
      c->uk_got = got[d];
      c->uk_rec = want[d];
      CUCAP_WARN("replay: verify: %s: %" PRIu64 " bytes differ, too many to "
                 "compare across passes; judged on this pass alone",
                 c->what, n);
      return;
    }
    v->kept += need;
    if (!known) { /* the first pass that compares it: keep its bytes */
      memcpy(c->ref, got, size);
    } else {      /* earlier passes matched the recording */
      vo_nd_mark(c, got, want, size, d);
    }
  } else { /* compare with the first pass */
    const uint8_t *base = c->ref ? c->ref : want;
    vo_nd_mark(c, got, base, size, vo_first_diff(got, base, size));
  }
  /* undecided: differs from the recording, agreed so far */
  c->undecided = c->ref ? vo_count_diff(c->ref, want, size, NULL, c->nd, NULL, NULL) : 0;
}

static int vo_kind_is_dtoh(vo_verifier *v, const cucap_fb_memcpy *m) {
  int k = cucap_fb_memcpy_kind(m);
  if (k == CUCAP_FB_MEMCPYKIND_DTOH || k == CUCAP_FB_MEMCPYKIND_ATOH)
    return 1;
  if (k != CUCAP_FB_MEMCPYKIND_UNIFIED)
    return 0;
  int sd = 0, dd = 0;
  uint64_t src = cucap_fb_memcpy_src(m), dst = cucap_fb_memcpy_dst(m);
  for (size_t i = 0; i < v->nallocs; i++) {
    sd |= src - v->allocs[i].addr < v->allocs[i].size;
    dd |= dst - v->allocs[i].addr < v->allocs[i].size;
  }
  return sd && !dd;
}

static void vo_copy(vo_verifier *v, const cucap_replay_op *op,
                    const cucap_fb_memcpy *m) {
  cucap_verify_report *rep = v->rep;
  int first = !cucap_map_get(&v->seen, vo_key(op->rec_index, 0), NULL);
  /* the recorded bytes: in the record, or read by the recorder after the
   * call (CopyResult, format 1.2) */
  cucap_hash128 want = vo_h(cucap_fb_memcpy_payload(m));
  uint64_t wsize = op->host_size;
  int have = cucap_fb_memcpy_has_payload(m) && cucap_fb_memcpy_payload(m);
  if (!have)
    have = cucap_replay_session_copy_result(v->s, op->seq, &want, &wsize) &&
           wsize == op->host_size;
  if (!have || !vo_reads_blob(v, want, op->host_size)) {
    if (v->pass == 0)
      rep->copies_unverifiable++;
    return;
  }
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(m);
  int array = cucap_fb_memcpy_kind(m) == CUCAP_FB_MEMCPYKIND_ATOH ||
              (g && cucap_fb_copy_geometry_src_memory_type(g) == CU_MEMORYTYPE_ARRAY);
  char what[96];
  snprintf(what, sizeof what, "%s copy (record %" PRIu64 ", seq %" PRIu64 ")",
           array ? "AtoH" : "DtoH", op->rec_index, op->seq);
  vo_info in = {op->rec_index, 0, VO_COPY, what,
                array ? 0 : cucap_fb_memcpy_src(m), op->host_size,
                array ? NULL : g, want,
                vo_ring_of(v, cucap_fb_memcpy_stream(m), 0), NULL};
  if (!in.near)
    in.near = &v->any;
  if (first)
    rep->copies_checked++;
  vo_compare(v, &in, op->host_data);
}

/* Reads region bytes back (in pieces) into v->got. */
static cucap_status vo_read_region(vo_verifier *v, uint64_t addr, uint64_t size) {
  if (!vo_grow(&v->got, &v->got_cap, size ? size : 1))
    return CUCAP_ERR_NOMEM;
  for (uint64_t off = 0; off < size; off += VO_READ_CHUNK) {
    uint64_t n = size - off < VO_READ_CHUNK ? size - off : VO_READ_CHUNK;
    cucap_status st = cucap_replay_session_read(v->s, addr + off, v->got + off, n);
    if (st != CUCAP_OK)
      return st;
  }
  return CUCAP_OK;
}

/* Hash of the region's bytes, read back a piece (VO_READ_CHUNK) at a time:
 * a launch hash names a size but carries no data, and reading it whole
 * into one buffer let a recorded 4 GiB region allocate 4 GiB (fuzz_replay,
 * libFuzzer's malloc limit) before the device read could fail. */
static cucap_status vo_hash_region(vo_verifier *v, uint64_t addr, uint64_t size,
                                   cucap_hash128 *out) {
  if (size <= VO_READ_CHUNK) {
    cucap_status st = vo_read_region(v, addr, size);
    if (st == CUCAP_OK)
      *out = cucap_hash128_of(v->got, (size_t)size);
    return st;
  }
  if (!vo_grow(&v->got, &v->got_cap, VO_READ_CHUNK))
    return CUCAP_ERR_NOMEM;
  cucap_hash_state *hs = cucap_hash_state_create();
  if (!hs)
    return CUCAP_ERR_NOMEM;
  cucap_status st = CUCAP_OK;
  for (uint64_t off = 0; off < size && st == CUCAP_OK; off += VO_READ_CHUNK) {
    uint64_t n = size - off < VO_READ_CHUNK ? size - off : VO_READ_CHUNK;
    st = cucap_replay_session_read(v->s, addr + off, v->got, n);
    if (st == CUCAP_OK)
      cucap_hash_state_update(hs, v->got, (size_t)n);
  }
  if (st == CUCAP_OK)
    *out = cucap_hash_state_digest(hs);
  cucap_hash_state_destroy(hs);
  return st;
}

/* "exit", "after-launch", "manual"; reasons appended to the schema later
 * (e.g. sync points of managed memory) by their schema name, lower-cased */
static void vo_reason_name(int reason, char *out, size_t cap) {
  const char *n = reason == CUCAP_FB_SNAPSHOTREASON_AFTERLAUNCH ? "after-launch"
                  : cucap_fb_snapshot_reason_name(reason);
  if (!n || !*n || *n == '?') {
    snprintf(out, cap, "reason-%d", reason);
    return;
  }
  size_t i = 0;
  for (; n[i] && i + 1 < cap; i++)
    out[i] = (char)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] - 'A' + 'a' : n[i]);
  out[i] = 0;
}

static void vo_snapshot(vo_verifier *v, const cucap_replay_op *op,
                        uint64_t rec_index, int reason, const vo_region *g,
                        size_t n) {
  cucap_verify_report *rep = v->rep;
  if (op->capturing) { /* reading device memory would invalidate the capture */
    if (v->pass == 0)
      rep->copies_unverifiable += n;
    return;
  }
  if (v->ctx_sync)
    v->ctx_sync();
  for (size_t i = 0; i < n; i++) {
    uint64_t key = vo_key(rec_index, (uint32_t)i);
    int first = !cucap_map_get(&v->seen, key, NULL);
    if (!g[i].has || !vo_reads_blob(v, g[i].h, g[i].size)) {
      if (v->pass == 0)
        rep->copies_unverifiable++;
      continue;
    }
    if (vo_read_region(v, g[i].addr, g[i].size) != CUCAP_OK) {
      CUCAP_WARN("replay: cannot read snapshot region 0x%" PRIx64 "+%" PRIu64,
                 g[i].addr, g[i].size);
      if (v->pass == 0)
        rep->copies_unverifiable++;
      uint64_t ix = 0;
      if (cucap_map_get(&v->seen, key, &ix) && ix) /* not comparable any more */
        v->chk[ix - 1].dead = 1;
      continue;
    }
    char what[160], rn[32];
    vo_reason_name(reason, rn, sizeof rn);
    snprintf(what, sizeof what, "%s snapshot region %zu (0x%" PRIx64 "+%" PRIu64
             ", record %" PRIu64 ")", rn, i, g[i].addr, g[i].size, rec_index);
    const char *hostw = NULL; /* SyncPoint: verify_managed.c sets it after the sync */
    vo_info in = {rec_index, (uint32_t)i, VO_SNAP, what, g[i].addr, g[i].size,
                  NULL, g[i].h, &v->any, hostw};
    if (first)
      rep->snapshot_regions_checked++;
    vo_compare(v, &in, v->got);
  }
}

static void vo_hashes(vo_verifier *v, const cucap_replay_op *op,
                      const vo_pending *p) {
  cucap_verify_report *rep = v->rep;
  if (op->capturing) {
    if (v->pass == 0)
      rep->copies_unverifiable += p->n;
    return;
  }
  if (v->ctx_sync)
    v->ctx_sync();
  uint64_t nid = 0;
  uint32_t wid = cucap_map_get(&v->launch_name, p->launch_index, &nid) && nid
                     ? (uint32_t)(nid - 1) : VO_NO_NAME;
  for (size_t i = 0; i < p->n; i++) {
    const vo_region *g = &p->regions[i];
    if (!g->has)
      continue;
    cucap_hash128 h;
    if (vo_hash_region(v, g->addr, g->size, &h) != CUCAP_OK) {
      if (v->pass == 0)
        rep->copies_unverifiable++;
      continue;
    }
    uint64_t key = vo_key(p->rec_index, (uint32_t)i), ix = 0;
    int known = cucap_map_get(&v->seen, key, &ix);
    if (!known)
      rep->launch_hashes_checked++;
    vo_check *c = ix ? &v->chk[ix - 1] : NULL;
    if (!c) {
      if (cucap_hash128_eq(h, g->h)) {
        if (!known)
          cucap_map_put(&v->seen, key, 0);
        continue;
      }
      char what[96];
      snprintf(what, sizeof what, "launch hash region %zu of launch %" PRIu64,
               i, p->launch_index);
      vo_info in = {p->rec_index, (uint32_t)i, VO_HASH, what, g->addr, g->size,
                    NULL, g->h, NULL, NULL};
      if (!(c = vo_check_new(v, &in, key)))
        continue;
      c->want_hash = g->h;
      c->launch_index = p->launch_index;
      c->launch_seq = p->seq;
      if (wid != VO_NO_NAME) {
        c->writers[0] = wid;
        c->nwriters = 1;
      }
      if (!known) {
        c->ref_hash = h;
        c->ref_set = 1;
      } else {
        c->hash_nd = 1; /* earlier passes matched the recording */
      }
    } else if (!cucap_hash128_eq(h, c->ref_set ? c->ref_hash : c->want_hash)) {
      c->hash_nd = 1;
    }
    c->undecided = !c->hash_nd && c->ref_set;
  }
}

static int vo_launch_ran(vo_verifier *v, uint64_t li) {
  return cucap_map_get(&v->launch_name, li, NULL);
}

/* Runs now if its launch ran (this pass), else keeps it for that launch. */
static void vo_defer(vo_verifier *v, const cucap_replay_op *op, int kind,
                     int reason, uint64_t li, uint64_t seq,
                     const cucap_fb_mem_region *(*at)(const void *, size_t),
                     const void *tbl, size_t n) {
  vo_region *g = calloc(n ? n : 1, sizeof *g);
  if (!g)
    return;
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_mem_region *m = at(tbl, i);
    const cucap_fb_hash128 *h = kind == VO_HASH ? cucap_fb_mem_region_hash(m)
                                                : cucap_fb_mem_region_data(m);
    g[i].addr = cucap_fb_mem_region_address(m);
    g[i].size = cucap_fb_mem_region_size(m);
    g[i].has = h != NULL;
    g[i].h = vo_h(h);
  }
  vo_pending p = {li, seq, op->rec_index, kind, reason, g, n};
  if (kind == VO_SNAP && (reason != CUCAP_FB_SNAPSHOTREASON_AFTERLAUNCH ||
                          vo_launch_ran(v, li))) {
    vo_snapshot(v, op, op->rec_index, reason, g, n);
    free(g);
    return;
  }
  if (kind == VO_HASH && vo_launch_ran(v, li)) {
    vo_hashes(v, op, &p);
    free(g);
    return;
  }
  if (!CUCAP_VEC_RESERVE(v->pend, v->cappend, v->npend + 1, 8)) {
    free(g);
    return;
  }
  v->pend[v->npend++] = p;
}

static void vo_pending_run(vo_verifier *v, const cucap_replay_op *op, uint64_t li) {
  for (size_t i = 0; i < v->npend;) {
    vo_pending *p = &v->pend[i];
    if (p->launch_index != li) {
      i++;
      continue;
    }
    if (p->kind == VO_HASH)
      vo_hashes(v, op, p);
    else
      vo_snapshot(v, op, p->rec_index, p->reason, p->regions, p->n);
    free(p->regions);
    v->pend[i] = v->pend[--v->npend];
  }
}

static void vo_pending_free(vo_verifier *v) {
  for (size_t i = 0; i < v->npend; i++)
    free(v->pend[i].regions);
  if (v->npend)
    CUCAP_WARN("replay: %zu launch hash / snapshot record(s) name launches "
               "that never ran", v->npend);
  v->npend = 0;
}

static const cucap_fb_mem_region *vo_snap_at(const void *t, size_t i) {
  return cucap_fb_snapshot_regions_at(t, i);
}
static const cucap_fb_mem_region *vo_hash_at(const void *t, size_t i) {
  return cucap_fb_launch_hash_regions_at(t, i);
}

/* ---------------------------------------------------------------- callbacks */

static cucap_status vo_begin(void *u, cucap_replay_session *s) {
  vo_verifier *v = u;
  v->s = s;
  v->r = cucap_replay_session_reader(s);
  v->ctx_sync = (CUresult(*)(void))cucap_replay_session_proc(s, "cuCtxSynchronize", 2000);
  return CUCAP_OK;
}

static void vo_pass_begin(void *u, cucap_replay_session *s, unsigned pass) {
  vo_verifier *v = u;
  (void)s;
  v->pass = pass;
  cucap_map_free(&v->launch_name);
  cucap_map_free(&v->stream_ring);
  cucap_map_free(&v->captured); /* their buffers belong to the last pass */
  v->ncap = 0;
  v->ngn = 0;
  v->nrings = 0;
  memset(&v->any, 0, sizeof v->any);
  vo_pending_free(v);
  v->in_diag = v->diag_at == pass;
  if (v->in_diag)
    vo_diag_begin(v);
  vo_perturb_pass_begin(v, pass);
}

static void vo_op_before(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  (void)s;
  vo_perturb_op(u, op);
}

static void vo_op_after(void *u, cucap_replay_session *s, const cucap_replay_op *op) {
  vo_verifier *v = u;
  const cucap_fb_record *rec = op->record;
  if (!op->capturing)
    vo_managed_op(v, op); /* also for skipped ops: it reads the record only */
  if (op->status != 0)
    return;
  switch (op->body_type) {
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *gr = cucap_fb_record_body_as_graph(rec);
    int gop = gr ? cucap_fb_graph_op(gr) : -1;
    if (gop == CUCAP_FB_GRAPHOP_LAUNCH && op->seq)
      vo_graph_launch(v, s, op);
    else if (gop == CUCAP_FB_GRAPHOP_INSTANTIATE || gop == CUCAP_FB_GRAPHOP_EXECUPDATE)
      vo_graph_topology(v, gr);
    break;
  }
  case CUCAP_FB_BODY_LAUNCH:
    if (op->launch_index != CUCAP_REPLAY_NO_LAUNCH) {
      uint32_t id = vo_intern(v, op->kernel, 1);
      if (id != VO_NO_NAME)
        cucap_map_put(&v->launch_name, op->launch_index, (uint64_t)id + 1);
      const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
      vo_ring_push(vo_ring_of(v, l ? cucap_fb_launch_stream(l) : 0, 1), id);
      vo_ring_push(&v->any, id);
      if (v->npend)
        vo_pending_run(v, op, op->launch_index);
    }
    break;
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    if (op->host_data && op->capturing)
      vo_captured_copy(v, op, m); /* checked at its CopyResult */
    else if (op->host_data)
      vo_copy(v, op, m);
    else if (op->capturing && vo_kind_is_dtoh(v, m) && v->pass == 0)
      v->rep->copies_unverifiable++;
    break;
  }
  case CUCAP_FB_BODY_ALLOC:
    if (v->pass == 0) {
      const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
      int k = cucap_fb_alloc_kind(a);
      if (k == CUCAP_FB_ALLOCKIND_DEVICE || k == CUCAP_FB_ALLOCKIND_PITCH ||
          k == CUCAP_FB_ALLOCKIND_MANAGED || k == CUCAP_FB_ALLOCKIND_ASYNC ||
          k == CUCAP_FB_ALLOCKIND_FROMPOOL || k == CUCAP_FB_ALLOCKIND_VMMMAP) {
        if (!CUCAP_VEC_RESERVE(v->allocs, v->capallocs, v->nallocs + 1, 64))
          break;
        uint64_t sz = cucap_fb_alloc_size(a);
        if (k == CUCAP_FB_ALLOCKIND_PITCH &&
            cucap_fb_alloc_pitch(a) * cucap_fb_alloc_height(a) > sz)
          sz = cucap_fb_alloc_pitch(a) * cucap_fb_alloc_height(a);
        v->allocs[v->nallocs].addr = cucap_fb_alloc_address(a);
        v->allocs[v->nallocs++].size = sz;
      }
    }
    break;
  case CUCAP_FB_BODY_SNAPSHOT: {
    const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
    int reason = cucap_fb_snapshot_reason(sn);
    if (reason == CUCAP_FB_SNAPSHOTREASON_COPYRESULT)
      vo_copy_result(v, op, sn); /* a captured copy's result, after its graph ran */
    else if (reason != CUCAP_FB_SNAPSHOTREASON_BEFORELAUNCH && /* loop restore state */
             reason != CUCAP_FB_SNAPSHOTREASON_HOSTWRITE)      /* replay input */
      vo_defer(v, op, VO_SNAP, reason, cucap_fb_snapshot_launch_index(sn),
               op->seq, vo_snap_at, sn, cucap_fb_snapshot_regions_len(sn));
    break;
  }
  case CUCAP_FB_BODY_LAUNCHHASH:
    if (v->o->mode == CUCAP_VERIFY_LAUNCH) {
      const cucap_fb_launch_hash *lh = cucap_fb_record_body_as_launch_hash(rec);
      vo_defer(v, op, VO_HASH, 0, cucap_fb_launch_hash_launch_index(lh),
               cucap_fb_launch_hash_launch_seq(lh), vo_hash_at, lh,
               cucap_fb_launch_hash_regions_len(lh));
    }
    break;
  default:
    break;
  }
  if (v->in_diag)
    vo_diag_op(v, op);
}

static int vo_pass_end(void *u, cucap_replay_session *s, unsigned pass) {
  vo_verifier *v = u;
  (void)s;
  if (pass == 0) /* captured copies whose result the recorder never read */
    for (size_t i = 0; i < v->ncap; i++)
      v->rep->copies_unverifiable += !v->cap[i].checked;
  vo_pending_free(v);
  vo_managed_pass_end(v);
  v->passes = pass + 1;
  if (v->in_diag) {
    v->in_diag = 0;
    v->diag_done = 1;
    return 0;
  }
  unsigned want = v->o->passes;
  if (want == 1)
    return 0;
  uint64_t undecided = 0;
  int nd = 0;
  for (size_t i = 0; i < v->nchk; i++) {
    /* bytes the program's host code may have written are not mismatches
     * whatever more passes show: no pass is run for them */
    int hw = v->chk[i].hostw[0] && !v->o->strict;
    undecided += v->chk[i].dead || hw ? 0 : v->chk[i].undecided;
    nd |= v->chk[i].nd_count > 0 || v->chk[i].hash_nd;
  }
  /* planned: 2 when something differed (1 is enough when nothing did: a
   * later pass cannot turn a match into a mismatch), N when asked */
  unsigned planned = want ? want : v->nchk ? 2 : 1;
  if (v->passes < planned)
    return 1;
  if (undecided && v->passes < planned + CUCAP_VERIFY_MAX_EXTRA)
    return 1; /* each pass may still show those bytes varying */
  if (nd && !v->diag_done && vo_diag_plan(v)) {
    v->diag_at = v->passes;
    return 1;
  }
  return 0;
}

static void vo_end(void *u, cucap_replay_session *s, cucap_replay_report *rep) {
  vo_verifier *v = u;
  (void)s;
  /* copies the replay ran where no observer sees their bytes */
  v->rep->copies_unverifiable += rep ? rep->captured_host_reads : 0;
  vo_pending_free(v);
  vo_perturb_destroy(v);
  if (v->r)
    vo_judge(v);
}

void cucap_verify_options_init(cucap_verify_options *o) { memset(o, 0, sizeof *o); }

cucap_verify *cucap_verify_create(const cucap_verify_options *o) {
  vo_verifier *v = calloc(1, sizeof *v);
  if (!v)
    return NULL;
  v->opts = *o;
  v->o = &v->opts;
  v->rep = &v->report;
  v->report.mode = o->mode;
  v->diag_at = UINT32_MAX;
  v->ob.name = "verify";
  v->ob.user = v;
  v->ob.begin = vo_begin;
  v->ob.pass_begin = vo_pass_begin;
  v->ob.op_before = vo_op_before;
  v->ob.op_after = vo_op_after;
  v->ob.pass_end = vo_pass_end;
  v->ob.end = vo_end;
  v->ob.reads_host_data = 1; /* compares every copy to the host */
  return v;
}

const cucap_replay_observer *cucap_verify_observer(cucap_verify *v) { return &v->ob; }

const cucap_verify_report *cucap_verify_get_report(const cucap_verify *v) {
  return &v->report;
}

cucap_status cucap_verify_status(const cucap_verify_report *vr) {
  return vr->mismatches ? CUCAP_ERR_MISMATCH : CUCAP_OK;
}

void cucap_verify_destroy(cucap_verify *v) {
  if (!v)
    return;
  for (size_t i = 0; i < v->nchk; i++) {
    free(v->chk[i].ref);
    free(v->chk[i].nd);
    free(v->chk[i].rl);
  }
  free(v->chk);
  for (size_t i = 0; i < v->nnames; i++)
    free(v->names[i].s);
  free(v->names);
  cucap_map_free(&v->seen);
  cucap_map_free(&v->name_ix);
  cucap_map_free(&v->launch_name);
  cucap_map_free(&v->stream_ring);
  cucap_map_free(&v->captured);
  free(v->cap);
  free(v->rings);
  for (size_t i = 0; i < v->npend; i++)
    free(v->pend[i].regions);
  free(v->pend);
  free(v->allocs);
  free(v->want);
  free(v->got);
  free(v->watch);
  free(v->gn);
  free(v->pt); /* its driver objects went in vo_end */
  vo_managed_free(v);
  free(v);
}

cucap_status cucap_verify_replay_run(const char *path, const cucap_replay_options *ro,
                                     const cucap_verify_options *vo,
                                     cucap_replay_report *rep, cucap_verify_report *vrep) {
  cucap_verify_report none;
  if (!vrep)
    vrep = &none;
  memset(vrep, 0, sizeof *vrep);
  if (!vo || vo->mode == CUCAP_VERIFY_NONE)
    return cucap_replay_run(path, ro, rep);
  cucap_replay_options defo, eff;
  if (!ro) {
    cucap_replay_options_init(&defo);
    ro = &defo;
  }
  eff = *ro;
  cucap_verify_options vopt = *vo;
  vopt.strict = vo->strict || ro->strict; /* --strict is one flag of the command */
  vopt.loops = ro->loops;
  vopt.shared = ro->nobservers > 0;
  cucap_verify *v = cucap_verify_create(&vopt);
  const cucap_replay_observer **obs = calloc(ro->nobservers + 1, sizeof *obs);
  if (!v || !obs) {
    cucap_verify_destroy(v);
    free(obs);
    memset(rep, 0, sizeof *rep);
    rep->gpu_time_s = -1;
    vrep->mode = vo->mode;
    rep->status = CUCAP_ERR_NOMEM;
    snprintf(rep->error, sizeof rep->error, "out of memory");
    return rep->status;
  }
  obs[0] = cucap_verify_observer(v);
  for (size_t i = 0; i < ro->nobservers; i++)
    obs[i + 1] = ro->observers[i];
  eff.observers = obs;
  eff.nobservers = ro->nobservers + 1;
  cucap_status st = cucap_replay_run(path, &eff, rep);
  *vrep = *cucap_verify_get_report(v);
  cucap_verify_destroy(v);
  free(obs);
  return rep->error[0] ? st : cucap_verify_status(vrep);
}
