/* diff_model.c - reads one capture into what `cucap diff` compares
 * (diff_internal.h): per-thread call sequences, launches with normalized
 * arguments and call sites, DtoH payloads, snapshot regions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_sort.h"
#include "cucap_units.h"
#include "diff_internal.h"

uint32_t dm_str(dm_model *m, const char *s) {
  return (uint32_t)sh_strings_add(&m->strings, &m->nstr, &m->capstr, s);
}

const char *dm_s(const dm_model *m, uint32_t id) {
  return id && id <= m->nstr ? m->strings + id - 1 : "?";
}

static uint64_t mix(uint64_t h, const void *p, size_t n) { return sh_fnv1a(h, p, n); }
static uint64_t mix64(uint64_t h, uint64_t v) { return sh_fnv1a(h, &v, 8); }
static uint64_t mixs(uint64_t h, const char *s) { return s ? sh_fnv1a(h, s, strlen(s) + 1) : mix64(h, 0); }

void dm_free(dm_model *m) {
  for (size_t i = 0; i < m->threads.n; i++)
    sh_vec_free(&((dm_thread *)sh_vec_at(&m->threads, i))->calls);
  for (size_t i = 0; i < m->launches.n; i++) {
    dm_launch *l = sh_vec_at(&m->launches, i);
    free(l->args);
    free(l->ptrs);
  }
  for (size_t i = 0; i < m->layouts.n; i++) {
    dm_layout *l = sh_vec_at(&m->layouts, i);
    free(l->off);
    free(l->size);
  }
  sh_vec *vs[] = {&m->threads, &m->launches, &m->copies, &m->regions, &m->layouts,
                  &m->allocs, &m->objects, &m->space};
  for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
    sh_vec_free(vs[i]);
  cucap_map *ms[] = {&m->thread_of, &m->group_count, &m->effects, &m->names, &m->params, &m->stacks,
                  &m->snap_count, &m->copy_by_seq};
  for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
    cucap_map_free(ms[i]);
  free(m->strings);
  m->strings = NULL;
  free(m->slice);
  m->slice = NULL;
}

static dm_thread *thread_for(dm_model *m, uint32_t tid, uint32_t *ord) {
  uint64_t t1;
  if (!cucap_map_get(&m->thread_of, (uint64_t)tid + 1, &t1)) {
    dm_thread *t = sh_vec_push(&m->threads);
    if (!t)
      return NULL;
    t->tid = tid;
    sh_vec_init(&t->calls, sizeof(dm_call));
    t1 = m->threads.n;
    if (!sh_map_put(&m->thread_of, (uint64_t)tid + 1, t1))
      return NULL;
  }
  *ord = (uint32_t)t1 - 1;
  return sh_vec_at(&m->threads, t1 - 1);
}

static const char *readable(dm_model *m, const char *mangled, char *buf, size_t n) {
  return m->o->kernel_name && mangled ? m->o->kernel_name(mangled, buf, n) : mangled;
}

/* Index of the last allocation starting at or below v (allocs is sorted by
 * address), or SIZE_MAX. */
static size_t alloc_floor(const dm_model *m, uint64_t v) {
  size_t lo = 0, hi = m->allocs.n;
  const dm_alloc *a = m->allocs.data;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a[mid].addr <= v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? lo - 1 : SIZE_MAX;
}

static const dm_alloc *alloc_at(dm_model *m, uint64_t v) {
  const dm_alloc *a = m->allocs.data;
  /* live allocations do not overlap; a few steps back cover an empty one */
  for (size_t i = alloc_floor(m, v), k = 0; i != SIZE_MAX && k < 4; i--, k++) {
    if (v - a[i].addr < (a[i].size ? a[i].size : 1))
      return &a[i];
    if (i == 0)
      break;
  }
  return NULL;
}

static int space_add(dm_model *m, uint64_t start, uint64_t end, uint8_t kind, uint64_t name,
                     uint32_t map) {
  if (end <= start)
    return 1;
  dm_space *r = sh_vec_push(&m->space);
  if (!r)
    return 0;
  *r = (dm_space){start, end, 0, name, map, kind};
  return 1;
}

/* A live allocation (or global) in address order; also a range of the
 * address space (a stale pointer to it is still a device address). */
static int alloc_add(dm_model *m, uint64_t addr, uint64_t size, uint64_t ordinal, uint32_t cls) {
  if (!sh_vec_push(&m->allocs))
    return 0;
  dm_alloc *a = m->allocs.data;
  size_t at = alloc_floor(m, addr);
  at = at == SIZE_MAX ? 0 : at + 1;
  if (at > m->allocs.n - 1)
    at = m->allocs.n - 1;
  memmove(&a[at + 1], &a[at], (m->allocs.n - 1 - at) * sizeof *a);
  a[at] = (dm_alloc){addr, size, ordinal, cls};
  return space_add(m, addr, addr + (size ? size : 1), CUCAP_FB_ADDRESSKIND_DEVICE, 0, 0);
}

static void alloc_remove(dm_model *m, uint64_t ordinal) {
  dm_alloc *a = m->allocs.data;
  size_t w = 0;
  for (size_t i = 0; i < m->allocs.n; i++)
    if (a[i].ordinal != ordinal || a[i].cls == DM_GLOBAL)
      a[w++] = a[i];
  m->allocs.n = w;
}

static int space_cmp(const void *p, const void *q) {
  const dm_space *x = p, *y = q;
  if (x->map != y->map)
    return x->map < y->map ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts the ranges by (map, start): one slice per ModuleMap (its ranges do
 * not overlap) and slice 0 for allocations (which may, after reuse), each
 * with its running largest end. */
static int space_finish(dm_model *m) {
  dm_space *r = m->space.data;
  if (m->space.n)
    cucap_sort(r, m->space.n, sizeof *r, space_cmp);
  m->slice = calloc((size_t)m->nmaps + 2, sizeof *m->slice);
  if (!m->slice)
    return 0;
  uint64_t mx = 0;
  for (size_t i = 0; i < m->space.n; i++) {
    if (i == 0 || r[i].map != r[i - 1].map)
      mx = 0;
    if (r[i].end > mx)
      mx = r[i].end;
    r[i].maxend = mx;
    m->slice[r[i].map + 1] = i + 1; /* end of slice map */
  }
  for (uint32_t k = 1; k <= m->nmaps + 1; k++) /* empty slices */
    if (m->slice[k] < m->slice[k - 1])
      m->slice[k] = m->slice[k - 1];
  return 1;
}

/* Last range of slice [b, e) starting at or below v, or SIZE_MAX. */
static size_t space_floor(const dm_space *r, size_t b, size_t e, uint64_t v) {
  size_t lo = b, hi = e;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r[mid].start <= v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > b ? lo - 1 : SIZE_MAX;
}

const dm_space *dm_space_at(const dm_model *m, uint64_t v) {
  const dm_space *r = m->space.data;
  if (!m->slice)
    return NULL;
  for (uint32_t mp = m->nmaps + 1; mp-- > 0;) { /* the latest map first */
    size_t b = m->slice[mp], e = m->slice[mp + 1];
    for (size_t i = space_floor(r, b, e, v); i != SIZE_MAX && r[i].maxend > v; i--) {
      if (v < r[i].end)
        return &r[i];
      if (i == b)
        break;
    }
  }
  return NULL;
}

int dm_space_overlaps(const dm_model *m, uint64_t lo, uint64_t hi) {
  const dm_space *r = m->space.data;
  if (!m->slice || !hi)
    return 0;
  for (uint32_t mp = 0; mp <= m->nmaps; mp++) {
    size_t i = space_floor(r, m->slice[mp], m->slice[mp + 1], hi - 1);
    if (i != SIZE_MAX && r[i].maxend > lo)
      return 1;
  }
  return 0;
}

int dm_word_in_param(const dm_layout *lay, uint32_t n, uint32_t o) {
  if (o % 8 || (uint64_t)o + 8 > n)
    return 0;
  if (!lay)
    return 1;
  for (uint32_t p = 0; p < lay->n; p++)
    if (lay->off[p] <= o && (uint64_t)o + 8 <= (uint64_t)lay->off[p] + lay->size[p])
      return 1;
  return 0;
}

/* ---------------------------------------------------------------- records */

static int on_function(dm_model *m, const cucap_fb_function *f) {
  uint64_t h = cucap_fb_function_handle(f), id = 0;
  const char *nm = cucap_fb_function_name(f);
  if (nm)
    id = dm_str(m, nm);
  else
    cucap_map_get(&m->names, cucap_fb_function_module(f), &id); /* CUkernel's name */
  if (id && !sh_map_put(&m->names, h, id))
    return 0;
  size_t np = 0;
  const cucap_fb_param_info *pi = cucap_fb_function_params(f, &np);
  if (!pi || !np) {
    uint64_t k;
    if (!nm && cucap_map_get(&m->params, cucap_fb_function_module(f), &k))
      return sh_map_put(&m->params, h, k);
    return 1;
  }
  dm_layout *l = sh_vec_push(&m->layouts);
  if (!l)
    return 0;
  l->n = (uint32_t)np;
  l->off = malloc(np * sizeof *l->off);
  l->size = malloc(np * sizeof *l->size);
  if (!l->off || !l->size)
    return 0;
  for (size_t i = 0; i < np; i++) {
    l->off[i] = pi[i].offset;
    l->size[i] = pi[i].size;
  }
  return sh_map_put(&m->params, h, m->layouts.n);
}

static uint64_t basename_hash(const char *path) {
  const char *s = path ? strrchr(path, '/') : NULL;
  return mixs(SH_FNV_INIT, s ? s + 1 : path ? path : "?");
}

static int on_module_map(dm_model *m, const cucap_fb_module_map *mm) {
  m->objects.n = 0;
  uint32_t map = ++m->nmaps;
  size_t n = cucap_fb_module_map_objects_len(mm), nr = cucap_fb_module_map_ranges_len(mm);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_loaded_object *o = cucap_fb_module_map_objects_at(mm, i);
    dm_object *d = o ? sh_vec_push(&m->objects) : NULL;
    if (!d)
      continue;
    d->start = cucap_fb_loaded_object_start_get(o);
    d->end = cucap_fb_loaded_object_end_get(o);
    d->base = cucap_fb_loaded_object_base(o);
    d->name = basename_hash(cucap_fb_loaded_object_path(o));
    /* before format 1.4 (no ranges) the objects are the known host ranges */
    if (!nr && !space_add(m, d->start, d->end, CUCAP_FB_ADDRESSKIND_FILE, d->name, map))
      return 0;
  }
  for (size_t i = 0; i < nr; i++) {
    const cucap_fb_address_range *r = cucap_fb_module_map_ranges_at(mm, i);
    if (!r)
      continue;
    uint8_t k = cucap_fb_address_range_kind(r);
    const char *path = cucap_fb_address_range_path(r);
    /* files by name; device memory is device memory whichever node maps it */
    uint64_t name = path && k == CUCAP_FB_ADDRESSKIND_FILE ? basename_hash(path) : 0;
    if (!space_add(m, cucap_fb_address_range_start_get(r), cucap_fb_address_range_end_get(r), k,
                   name, map))
      return 0;
  }
  return 1;
}

/* A call site: the frames as (object, offset), which reruns keep. */
static int on_callstack(dm_model *m, const cucap_fb_callstack *cs) {
  size_t n = 0;
  const uint64_t *fr = cucap_fb_callstack_frames(cs, &n);
  uint64_t h = SH_FNV_INIT;
  for (size_t i = 0; fr && i < n && i < 16; i++) {
    const dm_object *o = NULL;
    for (size_t k = 0; k < m->objects.n && !o; k++) {
      const dm_object *c = sh_vec_at(&m->objects, k);
      if (fr[i] >= c->start && fr[i] < c->end)
        o = c;
    }
    h = o ? mix64(mix64(h, o->name), fr[i] - o->base) : mix64(h, 0x3f);
  }
  return sh_map_put(&m->stacks, cucap_fb_callstack_id(cs), h | 1);
}

/* The memory after a launch (--hash-launches). The recorder writes the
 * LaunchHash while it records the launch, before the Launch record itself:
 * kept by launch index until that launch comes. Regions are combined
 * without their addresses or order: the two captures place memory
 * independently. */
static int on_launch_hash(dm_model *m, const cucap_fb_launch_hash *h) {
  uint64_t li = cucap_fb_launch_hash_launch_index(h), e = 0;
  size_t n = cucap_fb_launch_hash_regions_len(h);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_mem_region *r = cucap_fb_launch_hash_regions_at(h, i);
    const cucap_fb_hash128 *c = cucap_fb_mem_region_hash(r);
    e += mix64(mix64(mix64(SH_FNV_INIT, cucap_fb_mem_region_size(r)), c ? c->lo : 0),
               c ? c->hi : 0);
  }
  return sh_map_put(&m->effects, li + 1, mix64(e, n));
}

static int on_launch(dm_model *m, const cucap_fb_record *rec, const cucap_fb_launch *l,
                     uint64_t *key, char *what, size_t wn) {
  uint64_t fh = cucap_fb_launch_function(l), nid = 0, site = 0;
  cucap_map_get(&m->names, fh, &nid);
  cucap_map_get(&m->stacks, cucap_fb_record_stack(rec), &site);
  dm_launch *d = sh_vec_push(&m->launches);
  if (!d)
    return 0;
  d->launch_index = cucap_fb_launch_launch_index(l);
  d->has_effect = cucap_map_get(&m->effects, d->launch_index + 1, &d->effect);
  d->seq = cucap_fb_record_seq(rec);
  d->name = (uint32_t)nid;
  d->site = site;
  d->group = mix64(mixs(SH_FNV_INIT, nid ? dm_s(m, (uint32_t)nid) : "?"), site);
  uint64_t cnt = 0;
  cucap_map_get(&m->group_count, d->group, &cnt);
  d->nth = cnt;
  if (!sh_map_put(&m->group_count, d->group, cnt + 1))
    return 0;
  const cucap_fb_dim3 *g = cucap_fb_launch_grid(l), *b = cucap_fb_launch_block(l);
  d->grid[0] = g ? g->x : 0, d->grid[1] = g ? g->y : 0, d->grid[2] = g ? g->z : 0;
  d->block[0] = b ? b->x : 0, d->block[1] = b ? b->y : 0, d->block[2] = b ? b->z : 0;
  d->smem = cucap_fb_launch_shared_mem(l);
  uint64_t n = 0; /* a block whose blob is missing or over 1 MiB: compared as empty */
  if (cucap_reader_launch_args_size(m->r, l, &n) != CUCAP_OK || n > (1u << 20))
    n = 0;
  d->args = malloc(n ? n : 1);
  if (!d->args || (n && cucap_reader_launch_args_read(m->r, l, d->args, n) != CUCAP_OK))
    return 0;
  d->nargs = (uint32_t)n;
  /* Every 8-aligned word inside one parameter (pointer parameters and the
   * pointers inside struct parameters: CUTLASS Params, TensorIterator
   * offsets...) that points into a live device or pinned allocation or a
   * module global becomes (class, ordinal, offset); the bytes are zeroed. */
  uint64_t li1 = 0;
  const dm_layout *lay = cucap_map_get(&m->params, fh, &li1) ? sh_vec_at(&m->layouts, li1 - 1) : NULL;
  d->layout = lay ? li1 : 0;
  d->ptrs = calloc(n / 8 ? n / 8 : 1, sizeof *d->ptrs);
  if (!d->ptrs)
    return 0;
  for (uint32_t off = 0; (size_t)off + 8 <= n; off += 8) {
    if (!dm_word_in_param(lay, (uint32_t)n, off))
      continue;
    uint64_t v;
    memcpy(&v, d->args + off, 8);
    const dm_alloc *a = v ? alloc_at(m, v) : NULL;
    if (!a)
      continue;
    d->ptrs[d->nptrs++] = (dm_ptr){off, a->cls, a->ordinal, v - a->addr};
    memset(d->args + off, 0, 8);
  }
  char buf[1024];
  const char *nm = readable(m, nid ? dm_s(m, (uint32_t)nid) : "?", buf, sizeof buf);
  snprintf(what, wn, "%s grid=(%u,%u,%u) block=(%u,%u,%u)", nm, d->grid[0], d->grid[1],
           d->grid[2], d->block[0], d->block[1], d->block[2]);
  *key = mix(mix(mixs(*key, dm_s(m, d->name)), d->grid, sizeof d->grid), d->block, sizeof d->block);
  *key = mix64(*key, d->smem);
  return 1;
}

static int on_snapshot(dm_model *m, const cucap_fb_snapshot *s) {
  int reason = cucap_fb_snapshot_reason(s);
  if (reason == CUCAP_FB_SNAPSHOTREASON_COPYRESULT) {
    /* the host bytes of an asynchronous DtoH copy, read after it completed:
     * they belong to that copy, not to memory */
    uint64_t c1;
    const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_len(s)
                                       ? cucap_fb_snapshot_regions_at(s, 0) : NULL;
    if (g && cucap_fb_mem_region_data(g) &&
        cucap_map_get(&m->copy_by_seq, cucap_fb_snapshot_copy_seq(s), &c1)) {
      dm_copy *d = sh_vec_at(&m->copies, c1 - 1);
      d->payload = sh_h(cucap_fb_mem_region_data(g));
      d->size = cucap_fb_mem_region_size(g);
      d->has_payload = 1;
    }
    return 1;
  }
  uint64_t li = cucap_fb_snapshot_launch_index(s);
  uint64_t k = mix64(mix64(SH_FNV_INIT, (uint64_t)reason), li) | 1, cnt = 0;
  cucap_map_get(&m->snap_count, k, &cnt);
  if (!sh_map_put(&m->snap_count, k, cnt + 1))
    return 0;
  size_t n = cucap_fb_snapshot_regions_len(s);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
    if (!g || !cucap_fb_mem_region_data(g))
      continue;
    uint64_t addr = cucap_fb_mem_region_address(g);
    const dm_alloc *a = alloc_at(m, addr);
    dm_region *r = sh_vec_push(&m->regions);
    if (!r)
      return 0;
    r->snap = (uint32_t)cnt;
    r->reason = reason;
    r->launch_index = li;
    r->alloc = a ? a->ordinal : 0;
    r->delta = a ? addr - a->addr : addr;
    r->size = cucap_fb_mem_region_size(g);
    r->data = sh_h(cucap_fb_mem_region_data(g));
  }
  return 1;
}

/* An allocation: its key and text, and the device or page-locked memory it
 * adds to the model. */
static cucap_status on_alloc(dm_model *m, const cucap_fb_alloc *a, int ok, uint64_t *key,
                             char *what, size_t wn) {
  *key = mix64(mix64(*key, cucap_fb_alloc_kind(a)), cucap_fb_alloc_size(a));
  char hb[48];
  snprintf(what, wn, "%s", cucap_bytes_exact(cucap_fb_alloc_size(a), hb, sizeof hb));
  int k = cucap_fb_alloc_kind(a);
  if (ok && sh_alloc_is_device(k)) {
    CUCAP_RETURN_IF(
        !alloc_add(m, cucap_fb_alloc_address(a), sh_alloc_size(a), ++m->nalloc, DM_DEVICE),
        CUCAP_ERR_NOMEM);
  } else if (ok && (k == CUCAP_FB_ALLOCKIND_HOST || k == CUCAP_FB_ALLOCKIND_HOSTALLOC ||
                    k == CUCAP_FB_ALLOCKIND_HOSTREGISTER)) {
    /* page-locked host memory: at its host address and, when the driver
     * gave another, at its device alias */
    uint64_t ha = cucap_fb_alloc_host_address(a), da = cucap_fb_alloc_address(a);
    uint64_t ord = ++m->nalloc, sz = cucap_fb_alloc_size(a);
    if (!ha)
      ha = da;
    CUCAP_RETURN_IF((ha && !alloc_add(m, ha, sz, ord, DM_PINNED)) ||
                        (da && da != ha && !alloc_add(m, da, sz, ord, DM_PINNED)),
                    CUCAP_ERR_NOMEM);
  }
  return CUCAP_OK;
}

/* A copy: its key and text; a copy to the host is remembered per thread so
 * that its bytes can be compared. */
static cucap_status on_memcpy(dm_model *m, const cucap_fb_record *rec, int ok, uint64_t *key,
                              char *what, size_t wn) {
  const cucap_fb_memcpy *c = cucap_fb_record_body_as_memcpy(rec);
  int k = cucap_fb_memcpy_kind(c);
  *key = mix64(mix64(*key, (uint64_t)k), cucap_fb_memcpy_size(c));
  const char *kn = cucap_fb_memcpy_kind_name(k);
  char hb[48];
  snprintf(what, wn, "%s %s", kn ? kn : "?", cucap_bytes_exact(cucap_fb_memcpy_size(c), hb, sizeof hb));
  if (ok && (k == CUCAP_FB_MEMCPYKIND_DTOH || k == CUCAP_FB_MEMCPYKIND_UNIFIED)) {
    uint32_t ord;
    dm_thread *t = thread_for(m, cucap_fb_record_tid(rec), &ord);
    dm_copy *d = t ? sh_vec_push(&m->copies) : NULL;
    CUCAP_RETURN_IF(!d, CUCAP_ERR_NOMEM);
    d->thread = ord;
    d->nth = t->copies++;
    d->seq = cucap_fb_record_seq(rec);
    d->size = cucap_fb_memcpy_size(c);
    d->has_payload = cucap_fb_memcpy_has_payload(c) && cucap_fb_memcpy_payload(c);
    if (d->has_payload)
      d->payload = sh_h(cucap_fb_memcpy_payload(c));
    CUCAP_RETURN_IF(d->seq && !sh_map_put(&m->copy_by_seq, d->seq, m->copies.n),
                    CUCAP_ERR_NOMEM);
  }
  return CUCAP_OK;
}

/* A driver call in its thread's sequence, under the key the record's body
 * gave it. */
static cucap_status add_call(dm_model *m, const cucap_fb_record *rec, uint64_t key,
                             const char *what) {
  uint32_t ord;
  dm_thread *t = thread_for(m, cucap_fb_record_tid(rec), &ord);
  dm_call *c = t ? sh_vec_push(&t->calls) : NULL;
  CUCAP_RETURN_IF(!c, CUCAP_ERR_NOMEM);
  c->cbid = cucap_fb_record_call(rec);
  c->result = cucap_fb_record_result(rec);
  c->key = mix64(key, (uint64_t)(int64_t)c->result);
  c->seq = cucap_fb_record_seq(rec);
  c->what = what[0] ? dm_str(m, what) : 0;
  m->ncalls++;
  return CUCAP_OK;
}

static int on_record(dm_model *m, const cucap_fb_record *rec) {
  int bt = cucap_fb_record_body_type(rec);
  int ok = cucap_fb_record_result(rec) == 0;
  uint64_t key = mix64(mix64(SH_FNV_INIT, cucap_fb_record_call(rec)), (uint64_t)bt);
  char what[1200] = "";
  switch (bt) {
  case CUCAP_FB_BODY_FUNCTION:
    if (!on_function(m, cucap_fb_record_body_as_function(rec)))
      return 0;
    key = mixs(key, cucap_fb_function_name(cucap_fb_record_body_as_function(rec)));
    /* the name is what tells two such calls apart in a divergence */
    snprintf(what, sizeof what, "%s",
             cucap_fb_function_name(cucap_fb_record_body_as_function(rec))
                 ? cucap_fb_function_name(cucap_fb_record_body_as_function(rec))
                 : "?");
    break;
  case CUCAP_FB_BODY_MODULEMAP:
    return on_module_map(m, cucap_fb_record_body_as_module_map(rec));
  case CUCAP_FB_BODY_GLOBAL: {
    const cucap_fb_global *g = cucap_fb_record_body_as_global(rec);
    const char *gn = cucap_fb_global_name(g);
    if (ok && cucap_fb_global_address(g) &&
        !alloc_add(m, cucap_fb_global_address(g), cucap_fb_global_size(g),
                   mixs(SH_FNV_INIT, gn ? gn : "?") | 1, DM_GLOBAL))
      return 0;
    key = mixs(key, gn);
    snprintf(what, sizeof what, "%s", gn ? gn : "?");
    break;
  }
  case CUCAP_FB_BODY_CALLSTACK:
    return on_callstack(m, cucap_fb_record_body_as_callstack(rec));
  case CUCAP_FB_BODY_SNAPSHOT:
    return on_snapshot(m, cucap_fb_record_body_as_snapshot(rec));
  case CUCAP_FB_BODY_LAUNCHHASH:
    return on_launch_hash(m, cucap_fb_record_body_as_launch_hash(rec));
  case CUCAP_FB_BODY_LAUNCH: {
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    if (ok && cucap_fb_launch_kind(l) != CUCAP_FB_LAUNCHKIND_HOSTFUNC &&
        !on_launch(m, rec, l, &key, what, sizeof what))
      return 0;
    break;
  }
  case CUCAP_FB_BODY_ALLOC:
    if (on_alloc(m, cucap_fb_record_body_as_alloc(rec), ok, &key, what, sizeof what) != CUCAP_OK)
      return 0;
    break;
  case CUCAP_FB_BODY_FREE: {
    uint64_t addr = cucap_fb_free_address(cucap_fb_record_body_as_free(rec));
    const dm_alloc *a = ok && addr ? alloc_at(m, addr) : NULL;
    if (a && a->addr == addr && a->cls != DM_GLOBAL)
      alloc_remove(m, a->ordinal);
    break;
  }
  case CUCAP_FB_BODY_MEMCPY:
    if (on_memcpy(m, rec, ok, &key, what, sizeof what) != CUCAP_OK)
      return 0;
    break;
  case CUCAP_FB_BODY_MEMSET: {
    const cucap_fb_memset *s = cucap_fb_record_body_as_memset(rec);
    key = mix64(mix64(mix64(key, cucap_fb_memset_elem_size(s)), cucap_fb_memset_count(s)),
                cucap_fb_memset_value(s));
    break;
  }
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *mo = cucap_fb_record_body_as_module(rec);
    key = mix64(key, cucap_fb_module_op(mo));
    if (cucap_fb_module_image(mo)) {
      cucap_hash128 h = sh_h(cucap_fb_module_image(mo));
      key = mix(key, &h, sizeof h);
    }
    break;
  }
  case CUCAP_FB_BODY_NOTE: {
    const cucap_fb_note *no = cucap_fb_record_body_as_note(rec);
    key = mixs(mixs(key, cucap_fb_note_kind(no)), cucap_fb_note_text(no));
    if (cucap_fb_note_text(no))
      snprintf(what, sizeof what, "%s", cucap_fb_note_text(no));
    break;
  }
  case CUCAP_FB_BODY_CONTEXT:
    key = mix64(key, cucap_fb_context_op(cucap_fb_record_body_as_context(rec)));
    break;
  case CUCAP_FB_BODY_STREAM:
    key = mix64(key, cucap_fb_stream_op(cucap_fb_record_body_as_stream(rec)));
    break;
  case CUCAP_FB_BODY_EVENT:
    key = mix64(key, cucap_fb_event_op(cucap_fb_record_body_as_event(rec)));
    break;
  case CUCAP_FB_BODY_GRAPH:
    key = mix64(key, cucap_fb_graph_op(cucap_fb_record_body_as_graph(rec)));
    break;
  default:
    break;
  }
  if (!cucap_fb_record_call(rec) || !cucap_fb_record_seq(rec))
    return 1; /* not a driver call */
  return add_call(m, rec, key, what) == CUCAP_OK;
}

cucap_status dm_build(dm_model *m, cucap_reader *r, const cucap_diff_options *o) {
  memset(m, 0, sizeof *m);
  m->r = r;
  m->o = o;
  sh_vec_init(&m->threads, sizeof(dm_thread));
  sh_vec_init(&m->launches, sizeof(dm_launch));
  sh_vec_init(&m->copies, sizeof(dm_copy));
  sh_vec_init(&m->regions, sizeof(dm_region));
  sh_vec_init(&m->layouts, sizeof(dm_layout));
  sh_vec_init(&m->allocs, sizeof(dm_alloc));
  sh_vec_init(&m->objects, sizeof(dm_object));
  sh_vec_init(&m->space, sizeof(dm_space));
  cucap_status st = cucap_reader_rewind(r);
  const void *rv, *buf;
  size_t size;
  while (st == CUCAP_OK && (st = cucap_reader_next(r, &rv, &buf, &size)) == CUCAP_OK)
    if (!on_record(m, rv))
      st = CUCAP_ERR_NOMEM;
  if (st == CUCAP_END) {
    cucap_reader_recovery rv2;
    cucap_reader_recovery_get(r, &rv2);
    st = rv2.complete ? CUCAP_OK : CUCAP_ERR_TRUNCATED;
  }
  if (st == CUCAP_OK && !space_finish(m))
    st = CUCAP_ERR_NOMEM;
  return st;
}
