/* derive_plan.c - which records of a source capture a derived capture
 * keeps: objects live at the cut, what the kept range uses, the device
 * regions to upload (derive_internal.h); and the output steps trim and
 * extract share (dv_output_open, dv_output_close). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cucap_sort.h"
#include "derive_internal.h"

void dv_plan_init(dv_plan *p, cucap_reader *r) {
  memset(p, 0, sizeof *p);
  p->r = r;
  p->snap_rec = DV_NONE;
  p->seq_first = UINT64_MAX;
  p->launch_first = UINT64_MAX;
  sh_vec_init(&p->allocs, sizeof(dv_alloc));
  sh_vec_init(&p->globals, sizeof(dv_global));
  sh_vec_init(&p->global_writes, sizeof(dv_gwrite));
  sh_vec_init(&p->graph_fns, sizeof(dv_gfn));
  sh_vec_init(&p->always, sizeof(uint64_t));
  sh_vec_init(&p->regions, sizeof(cucap_state_region));
  sh_vec_init(&p->region_ctx, sizeof(uint64_t));
  sh_vec_init(&p->images, sizeof(dv_image));
}

void dv_plan_free(dv_plan *p) {
  free(p->keep);
  cucap_map *maps[] = {&p->a_plain, &p->a_vmap, &p->a_vres, &p->a_vcreate, &p->a_pool,
                    &p->a_array, &p->a_access, &p->ctx_create, &p->ctx_primary, &p->mod,
                    &p->fn, &p->fn_mod, &p->fn_alias, &p->mod_lib, &p->stream, &p->event, &p->gexec, &p->use_fn,
                    &p->use_mod, &p->use_stream, &p->use_ctx, &p->stack_rec, &p->stack_map};
  for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
    cucap_map_free(maps[i]);
  sh_vec *vecs[] = {&p->allocs, &p->globals, &p->global_writes, &p->graph_fns, &p->always,
                    &p->regions, &p->region_ctx, &p->images};
  for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
    sh_vec_free(vecs[i]);
  p->keep = NULL;
}

cucap_status dv_as_damage(cucap_status st) {
  return st == CUCAP_ERR_NOMEM || st == CUCAP_ERR_IO ? st : CUCAP_ERR_CORRUPT;
}

cucap_status dv_as_write(cucap_status st) {
  return st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_IO;
}

cucap_status dv_as_replay(cucap_status st) {
  return st == CUCAP_ERR_ENV || st == CUCAP_ERR_UNSUPPORTED || st == CUCAP_ERR_NOMEM ||
                 st == CUCAP_ERR_IO
             ? st
             : CUCAP_ERR_CUDA;
}

cucap_status dv_fail(cucap_derive_report *rep, cucap_status st, cucap_status as,
                     const char *fmt, ...) {
  if (!rep->error[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->error, sizeof rep->error, fmt, ap);
    va_end(ap);
    rep->status = as;
  }
  return st;
}

cucap_status dv_output_open(dv_plan *p, const cucap_derive_options *o, const char *out_path,
                            const dv_origin *org, cucap_derive_report *rep, cucap_writer **w) {
  cucap_status st = dv_writer_open(p, out_path, o->level, org, w);
  if (st != CUCAP_OK)
    return dv_fail(rep, st, dv_as_write(st), "cannot create %s: %s", out_path, cucap_status_str(st));
  /* blobs first: a damaged one fails the command as bad input (exit 3),
     not as a failed replay or write */
  if ((st = dv_copy_kept_blobs(p, *w)) != CUCAP_OK)
    return dv_fail(rep, st, dv_as_damage(st),
                   "the capture is damaged (%s): a module image, payload or snapshot it "
                   "keeps cannot be read", cucap_status_str(st));
  if (o->replay && !o->source_path) /* the replay runs the source file itself */
    return dv_fail(rep, CUCAP_ERR_INVALID_ARG, CUCAP_ERR_INVALID_ARG, "--replay needs the capture's path");
  return CUCAP_OK;
}

cucap_status dv_output_close(dv_plan *p, cucap_writer *w, const char *out_path,
                             const dv_origin *org, cucap_derive_report *rep) {
  cucap_status st = cucap_writer_close(w);
  if (st != CUCAP_OK)
    return dv_fail(rep, st, dv_as_write(st), "writing %s: %s", out_path, cucap_status_str(st));
  struct stat sb;
  if (stat(out_path, &sb) == 0)
    rep->out_bytes = (uint64_t)sb.st_size;
  rep->cut = p->cut;
  rep->first_record = p->first;
  rep->last_record = p->last;
  rep->state_records = org->state_records;
  rep->regions = p->regions.n;
  for (size_t i = 0; i < p->regions.n; i++)
    rep->region_bytes += ((cucap_state_region *)sh_vec_at(&p->regions, i))->size;
  rep->modules_live = p->modules_live;
  rep->modules_kept = p->modules_kept;
  dv_images_report(p, rep);
  return CUCAP_OK;
}

cucap_status dv_next(dv_plan *p, const cucap_fb_record **rec, const void **buf, size_t *size) {
  const void *rv = NULL;
  cucap_status st = cucap_reader_next(p->r, &rv, buf, size);
  *rec = rv;
  return st;
}

cucap_status dv_count(dv_plan *p) {
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  cucap_status st;
  uint64_t n = 0;
  while ((st = dv_next(p, &rec, &buf, &size)) == CUCAP_OK)
    n++;
  if (st != CUCAP_END)
    return st;
  cucap_reader_recovery rv;
  cucap_reader_recovery_get(p->r, &rv);
  if (!rv.complete)
    return CUCAP_ERR_TRUNCATED;
  p->nrecords = n;
  p->keep = calloc(n ? n : 1, 1);
  return p->keep ? CUCAP_OK : CUCAP_ERR_NOMEM;
}

cucap_status dv_read_at(dv_plan *p, uint64_t idx, sh_rec_copy *out) {
  memset(out, 0, sizeof *out);
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  for (uint64_t i = 0; i <= idx; i++) {
    cucap_status st = dv_next(p, &rec, &buf, &size);
    if (st != CUCAP_OK)
      return st == CUCAP_END ? CUCAP_ERR_NOT_FOUND : st;
  }
  return sh_rec_copy_make(out, buf, size, rec) ? CUCAP_OK : CUCAP_ERR_NOMEM;
}

/* ------------------------------------------------------------ liveness */

static int push_u64(sh_vec *v, uint64_t x) {
  uint64_t *p = sh_vec_push(v);
  if (!p)
    return 0;
  *p = x;
  return 1;
}

static dv_alloc *alloc_at(dv_plan *p, uint64_t idx1) {
  return idx1 ? sh_vec_at(&p->allocs, idx1 - 1) : NULL;
}

/* Records a new allocation under key in map m (replacing a stale entry). */
static int alloc_add(dv_plan *p, cucap_map *m, uint64_t key, const cucap_fb_alloc *a,
                     uint64_t ctx, uint64_t rec) {
  uint64_t old;
  if (cucap_map_get(m, key, &old) && alloc_at(p, old))
    alloc_at(p, old)->live = 0;
  dv_alloc *d = sh_vec_push(&p->allocs);
  if (!d)
    return 0;
  d->addr = cucap_fb_alloc_address(a);
  d->size = sh_alloc_size(a);
  d->kind = cucap_fb_alloc_kind(a);
  d->handle = cucap_fb_alloc_handle(a);
  d->ctx = ctx;
  d->rec = rec;
  d->live = 1;
  return sh_map_put(m, key, p->allocs.n);
}

static void alloc_del(dv_plan *p, cucap_map *m, uint64_t key) {
  uint64_t old;
  if (cucap_map_del(m, key, &old) && alloc_at(p, old))
    alloc_at(p, old)->live = 0;
}

dv_alloc *dv_alloc_find(dv_plan *p, uint64_t addr) {
  for (size_t i = p->allocs.n; i-- > 0;) {
    dv_alloc *a = sh_vec_at(&p->allocs, i);
    if (a->live && sh_alloc_is_device(a->kind) && addr - a->addr < (a->size ? a->size : 1))
      return a;
  }
  return NULL;
}

static const dv_global *global_at(dv_plan *p, uint64_t addr) {
  for (size_t i = 0; i < p->globals.n; i++) {
    const dv_global *g = sh_vec_at(&p->globals, i);
    if (g->live && addr - g->addr < (g->size ? g->size : 1))
      return g;
  }
  return NULL;
}

static void module_gone(dv_plan *p, uint64_t h) {
  cucap_map_del(&p->mod, h, NULL);
  uint64_t k, v;
  size_t pos = 0;
  while (cucap_map_next(&p->mod_lib, &pos, &k, &v)) /* a library's modules go with it */
    if (v == h)
      cucap_map_del(&p->mod, k, NULL);
  for (pos = 0; cucap_map_next(&p->fn_mod, &pos, &k, &v);) {
    if (v != h)
      continue;
    cucap_map_del(&p->fn, k, NULL);
    /* fn_mod itself keeps the entry; a later Function record replaces it */
  }
  for (size_t i = 0; i < p->globals.n; i++) {
    dv_global *g = sh_vec_at(&p->globals, i);
    if (g->module == h)
      g->live = 0;
  }
}

static int scan_alloc(dv_plan *p, const cucap_fb_record *rec, uint64_t i) {
  const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
  uint64_t ctx = cucap_fb_record_context(rec);
  uint64_t addr = cucap_fb_alloc_address(a), h = cucap_fb_alloc_handle(a);
  switch (cucap_fb_alloc_kind(a)) {
  case CUCAP_FB_ALLOCKIND_VMMMAP: return alloc_add(p, &p->a_vmap, addr, a, ctx, i);
  case CUCAP_FB_ALLOCKIND_VMMRESERVE: return alloc_add(p, &p->a_vres, addr, a, ctx, i);
  case CUCAP_FB_ALLOCKIND_VMMCREATE: return alloc_add(p, &p->a_vcreate, h, a, ctx, i);
  case CUCAP_FB_ALLOCKIND_VMMSETACCESS: return alloc_add(p, &p->a_access, addr, a, ctx, i);
  case CUCAP_FB_ALLOCKIND_POOL: return alloc_add(p, &p->a_pool, h ? h : cucap_fb_alloc_pool(a), a, ctx, i);
  case CUCAP_FB_ALLOCKIND_ARRAY: return alloc_add(p, &p->a_array, h ? h : addr, a, ctx, i);
  default: return alloc_add(p, &p->a_plain, addr, a, ctx, i);
  }
}

static void scan_free(dv_plan *p, const cucap_fb_record *rec) {
  const cucap_fb_free *f = cucap_fb_record_body_as_free(rec);
  uint64_t addr = cucap_fb_free_address(f), h = cucap_fb_free_handle(f);
  switch (cucap_fb_free_kind(f)) {
  case CUCAP_FB_ALLOCKIND_VMMMAP:
    alloc_del(p, &p->a_vmap, addr);
    alloc_del(p, &p->a_access, addr);
    break;
  case CUCAP_FB_ALLOCKIND_VMMRESERVE: alloc_del(p, &p->a_vres, addr); break;
  case CUCAP_FB_ALLOCKIND_VMMCREATE: alloc_del(p, &p->a_vcreate, h); break;
  case CUCAP_FB_ALLOCKIND_POOL: alloc_del(p, &p->a_pool, h); break;
  case CUCAP_FB_ALLOCKIND_ARRAY: alloc_del(p, &p->a_array, h ? h : addr); break;
  default: alloc_del(p, &p->a_plain, addr); break;
  }
}

/* A copy or memset writing into a live module global (cudaMemcpyToSymbol):
 * kept when the module is. */
static int scan_global_write(dv_plan *p, uint64_t dst, uint64_t i) {
  const dv_global *g = global_at(p, dst);
  if (!g)
    return 1;
  dv_gwrite *w = sh_vec_push(&p->global_writes);
  if (!w)
    return 0;
  w->rec = i;
  w->module = g->module;
  return 1;
}

static int scan_graph(dv_plan *p, const cucap_fb_record *rec, uint64_t i) {
  const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
  int op = cucap_fb_graph_op(g);
  uint64_t ex = cucap_fb_graph_exec(g);
  if (cucap_fb_record_seq(rec) == 0)
    return 1; /* topology note */
  if (op == CUCAP_FB_GRAPHOP_EXECDESTROY) {
    cucap_map_del(&p->gexec, ex, NULL);
    return 1;
  }
  if (op != CUCAP_FB_GRAPHOP_INSTANTIATE || !ex)
    return 1;
  if (!sh_map_put(&p->gexec, ex, i + 1))
    return 0;
  size_t n = cucap_fb_graph_nodes_len(g);
  for (size_t k = 0; k < n; k++) {
    const cucap_fb_graph_node *nd = cucap_fb_graph_nodes_at(g, k);
    const cucap_fb_launch *l = nd ? cucap_fb_graph_node_launch(nd) : NULL;
    if (!l)
      continue;
    dv_gfn *gf = sh_vec_push(&p->graph_fns);
    if (!gf)
      return 0;
    gf->exec = ex;
    gf->fn = cucap_fb_launch_function(l);
  }
  return 1;
}

static int scan_one(dv_plan *p, const cucap_fb_record *rec, uint64_t i) {
  if (cucap_fb_record_result(rec) != 0)
    return 1; /* failed in the program: created nothing */
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_CONTEXT: {
    const cucap_fb_context *c = cucap_fb_record_body_as_context(rec);
    uint64_t h = cucap_fb_context_handle(c);
    switch (cucap_fb_context_op(c)) {
    case CUCAP_FB_CONTEXTOP_CREATE: return sh_map_put(&p->ctx_create, h, i + 1);
    case CUCAP_FB_CONTEXTOP_DESTROY: cucap_map_del(&p->ctx_create, h, NULL); return 1;
    case CUCAP_FB_CONTEXTOP_PRIMARYRETAIN:
      return cucap_map_get(&p->ctx_primary, h, NULL) || sh_map_put(&p->ctx_primary, h, i + 1);
    default: return 1;
    }
  }
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
    uint64_t h = cucap_fb_module_handle(m);
    if (cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_LOAD)
      return sh_map_put(&p->mod, h, i + 1);
    if (cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_LIBRARYMODULE) /* kept with its library */
      return sh_map_put(&p->mod, h, i + 1) &&
             sh_map_put(&p->mod_lib, h, cucap_fb_module_library(m));
    if (cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_UNLOAD)
      module_gone(p, h);
    return 1;
  }
  case CUCAP_FB_BODY_FUNCTION: {
    const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
    uint64_t h = cucap_fb_function_handle(f);
    if (h == cucap_fb_function_module(f)) /* a CUfunction equal to its CUkernel (the
                                             mock): the kernel's record stays */
      return sh_map_put(&p->fn_alias, h, i + 1);
    return sh_map_put(&p->fn, h, i + 1) &&
           sh_map_put(&p->fn_mod, h, cucap_fb_function_module(f));
  }
  case CUCAP_FB_BODY_GLOBAL: {
    const cucap_fb_global *g = cucap_fb_record_body_as_global(rec);
    dv_global *d = sh_vec_push(&p->globals);
    if (!d)
      return 0;
    d->module = cucap_fb_global_module(g);
    d->addr = cucap_fb_global_address(g);
    d->size = cucap_fb_global_size(g);
    d->rec = i;
    d->live = 1;
    return 1;
  }
  case CUCAP_FB_BODY_ALLOC:
    return scan_alloc(p, rec, i);
  case CUCAP_FB_BODY_FREE:
    scan_free(p, rec);
    return 1;
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
    int k = cucap_fb_memcpy_kind(m);
    if (k == CUCAP_FB_MEMCPYKIND_HTOD || k == CUCAP_FB_MEMCPYKIND_DTOD ||
        k == CUCAP_FB_MEMCPYKIND_UNIFIED || k == CUCAP_FB_MEMCPYKIND_PEER)
      return scan_global_write(p, cucap_fb_memcpy_dst(m), i);
    return 1;
  }
  case CUCAP_FB_BODY_MEMSET:
    return scan_global_write(p, cucap_fb_memset_dst(cucap_fb_record_body_as_memset(rec)), i);
  case CUCAP_FB_BODY_STREAM: {
    const cucap_fb_stream *s = cucap_fb_record_body_as_stream(rec);
    uint64_t h = cucap_fb_stream_handle(s);
    switch (cucap_fb_stream_op(s)) {
    case CUCAP_FB_STREAMOP_CREATE: return sh_map_put(&p->stream, h, i + 1);
    case CUCAP_FB_STREAMOP_DESTROY: cucap_map_del(&p->stream, h, NULL); return 1;
    case CUCAP_FB_STREAMOP_BEGINCAPTURE: p->capturing++; return 1;
    case CUCAP_FB_STREAMOP_ENDCAPTURE:
      if (p->capturing)
        p->capturing--;
      return 1;
    default: return 1;
    }
  }
  case CUCAP_FB_BODY_EVENT: {
    const cucap_fb_event *e = cucap_fb_record_body_as_event(rec);
    uint64_t h = cucap_fb_event_handle(e);
    if (cucap_fb_event_op(e) == CUCAP_FB_EVENTOP_CREATE)
      return sh_map_put(&p->event, h, i + 1);
    if (cucap_fb_event_op(e) == CUCAP_FB_EVENTOP_DESTROY)
      cucap_map_del(&p->event, h, NULL);
    return 1;
  }
  case CUCAP_FB_BODY_GRAPH:
    return scan_graph(p, rec, i);
  case CUCAP_FB_BODY_MODULEMAP: /* kept by dv_mark_stacks when a kept stack needs it */
    p->last_map = i + 1;
    return 1;
  case CUCAP_FB_BODY_CALLSTACK: /* kept by dv_mark_stacks when a kept record names it */
    return sh_map_put(&p->stack_rec,
                      (uint64_t)cucap_fb_callstack_id(cucap_fb_record_body_as_callstack(rec)) + 1,
                      i + 1) &&
           (!p->last_map || sh_map_put(&p->stack_map, i + 1, p->last_map));
  case CUCAP_FB_BODY_DEVICES:
  case CUCAP_FB_BODY_NVTX:
    if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_DEVICES)
      dv_images_add_devices(p, cucap_fb_record_body_as_devices(rec));
    if (cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_NVTX) {
      /* domain and thread names only: ranges before the cut are not kept */
      int op = cucap_fb_nvtx_op(cucap_fb_record_body_as_nvtx(rec));
      if (op != CUCAP_FB_NVTXOP_DOMAINCREATE && op != CUCAP_FB_NVTXOP_NAMETHREAD &&
          op != CUCAP_FB_NVTXOP_NAMECATEGORY)
        return 1;
    }
    return push_u64(&p->always, i);
  case CUCAP_FB_BODY_NOTE: {
    const char *k = cucap_fb_note_kind(cucap_fb_record_body_as_note(rec));
    if (k && !strcmp(k, "driver_version"))
      return push_u64(&p->always, i);
    return 1;
  }
  default:
    return 1;
  }
}

cucap_status dv_scan_state(dv_plan *p) {
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  cucap_status st = CUCAP_OK;
  for (uint64_t i = 0; i <= p->cut && i < p->nrecords; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) != CUCAP_OK)
      return st == CUCAP_END ? CUCAP_ERR_TRUNCATED : st;
    if (i == p->cut) {
      p->cut_time = cucap_fb_record_t_enter(rec);
      break;
    }
    if (!scan_one(p, rec, i))
      return CUCAP_ERR_NOMEM;
  }
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- uses */

static int use(cucap_map *m, uint64_t h) { return !h || sh_map_put(m, h, 1); }

static int uses_of(dv_plan *p, const cucap_fb_record *rec) {
  if (!use(&p->use_ctx, cucap_fb_record_context(rec)))
    return 0;
  if (cucap_fb_record_t_exit(rec) > p->t_end)
    p->t_end = cucap_fb_record_t_exit(rec);
  uint64_t seq = cucap_fb_record_seq(rec);
  if (seq) {
    if (seq < p->seq_first)
      p->seq_first = seq;
    if (seq > p->seq_last)
      p->seq_last = seq;
  }
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_LAUNCH: {
    const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
    if (cucap_fb_launch_kind(l) != CUCAP_FB_LAUNCHKIND_HOSTFUNC) {
      uint64_t li = cucap_fb_launch_launch_index(l);
      p->launches++;
      if (li < p->launch_first)
        p->launch_first = li;
      if (li > p->launch_last || p->launches == 1)
        p->launch_last = li;
    }
    return use(&p->use_fn, cucap_fb_launch_function(l)) &&
           use(&p->use_stream, cucap_fb_launch_stream(l));
  }
  case CUCAP_FB_BODY_FUNCTION: {
    const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
    /* a KernelFunction's module field is its CUkernel */
    return use(&p->use_mod, cucap_fb_function_module(f)) &&
           use(&p->use_fn, cucap_fb_function_module(f));
  }
  case CUCAP_FB_BODY_GLOBAL:
    return use(&p->use_mod, cucap_fb_global_module(cucap_fb_record_body_as_global(rec)));
  case CUCAP_FB_BODY_MODULE:
    return use(&p->use_mod, cucap_fb_module_handle(cucap_fb_record_body_as_module(rec)));
  case CUCAP_FB_BODY_MEMCPY:
    return use(&p->use_stream, cucap_fb_memcpy_stream(cucap_fb_record_body_as_memcpy(rec)));
  case CUCAP_FB_BODY_MEMSET:
    return use(&p->use_stream, cucap_fb_memset_stream(cucap_fb_record_body_as_memset(rec)));
  case CUCAP_FB_BODY_STREAM:
    return use(&p->use_stream, cucap_fb_stream_handle(cucap_fb_record_body_as_stream(rec)));
  case CUCAP_FB_BODY_EVENT:
    return use(&p->use_stream, cucap_fb_event_stream(cucap_fb_record_body_as_event(rec)));
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    size_t n = cucap_fb_graph_nodes_len(g);
    for (size_t k = 0; k < n; k++) {
      const cucap_fb_graph_node *nd = cucap_fb_graph_nodes_at(g, k);
      const cucap_fb_launch *l = nd ? cucap_fb_graph_node_launch(nd) : NULL;
      if (l && !use(&p->use_fn, cucap_fb_launch_function(l)))
        return 0;
    }
    return use(&p->use_stream, cucap_fb_graph_stream(g));
  }
  default:
    return 1;
  }
}

cucap_status dv_scan_uses(dv_plan *p) {
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  cucap_status st;
  for (uint64_t i = 0; i < p->nrecords; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) != CUCAP_OK)
      return st == CUCAP_END ? CUCAP_ERR_TRUNCATED : st;
    if (i > p->last)
      break;
    if (p->keep[i] == DV_RANGE && !uses_of(p, rec))
      return CUCAP_ERR_NOMEM;
  }
  return CUCAP_OK;
}

/* ---------------------------------------------------------------- marking */

static void mark(dv_plan *p, uint64_t rec1) {
  if (rec1 && rec1 - 1 < p->cut)
    p->keep[rec1 - 1] = DV_STATE;
}

static void mark_all(dv_plan *p, const cucap_map *m) {
  uint64_t v;
  for (size_t pos = 0; cucap_map_next(m, &pos, NULL, &v);)
    mark(p, v);
}

static void mark_allocs(dv_plan *p, const cucap_map *m, int only_kept) {
  uint64_t v;
  for (size_t pos = 0; cucap_map_next(m, &pos, NULL, &v);) {
    dv_alloc *a = alloc_at(p, v);
    if (a && a->live && (!only_kept || a->keep))
      mark(p, a->rec + 1);
  }
}

void dv_mark_state(dv_plan *p) {
  int only_kept = p->minimal; /* extract --minimal marked what it needs */
  for (size_t i = 0; i < p->always.n; i++)
    mark(p, *(uint64_t *)sh_vec_at(&p->always, i) + 1);
  if (!p->primary_only) {
    mark_all(p, &p->ctx_create);
    mark_all(p, &p->ctx_primary);
  }
  /* graphs instantiated before the cut: their kernels are used */
  if (p->all_streams) {
    mark_all(p, &p->gexec);
    mark_all(p, &p->stream);
    mark_all(p, &p->event);
    for (size_t i = 0; i < p->graph_fns.n; i++) {
      const dv_gfn *g = sh_vec_at(&p->graph_fns, i);
      if (cucap_map_get(&p->gexec, g->exec, NULL))
        (void)use(&p->use_fn, g->fn);
    }
  } else {
    uint64_t s, rec1;
    for (size_t pos = 0; cucap_map_next(&p->use_stream, &pos, &s, NULL);)
      if (cucap_map_get(&p->stream, s, &rec1))
        mark(p, rec1);
  }
  /* functions the range launches, their kernels, their modules */
  cucap_map kept_mod = {0};
  uint64_t f, val;
  for (size_t pos = 0; cucap_map_next(&p->use_fn, &pos, &f, NULL);) {
    uint64_t rec1, m, krec1;
    if (!cucap_map_get(&p->fn, f, &rec1))
      continue; /* made inside the range, or a handle that is no function */
    mark(p, rec1);
    if (cucap_map_get(&p->fn_alias, f, &krec1))
      mark(p, krec1);
    if (!cucap_map_get(&p->fn_mod, f, &m))
      continue;
    uint64_t km;
    if (m != f && cucap_map_get(&p->fn, m, &krec1)) { /* f is a CUfunction of a CUkernel */
      mark(p, krec1);
      if (cucap_map_get(&p->fn_mod, m, &km))
        m = km;
    }
    (void)sh_map_put(&kept_mod, m, 1);
  }
  for (size_t pos = 0; cucap_map_next(&p->use_mod, &pos, &f, NULL);)
    (void)sh_map_put(&kept_mod, f, 1);
  for (size_t pos = 0; cucap_map_next(&p->mod_lib, &pos, &f, &val);) /* a library's module needs the library */
    if (cucap_map_get(&kept_mod, f, NULL))
      (void)sh_map_put(&kept_mod, val, 1);
  p->modules_live = cucap_map_size(&p->mod);
  for (size_t pos = 0; cucap_map_next(&p->mod, &pos, &f, &val);) {
    if (!cucap_map_get(&kept_mod, f, NULL))
      continue;
    mark(p, val);
    p->modules_kept++;
  }
  for (size_t i = 0; i < p->globals.n; i++) {
    const dv_global *g = sh_vec_at(&p->globals, i);
    if (g->live && cucap_map_get(&kept_mod, g->module, NULL) && cucap_map_get(&p->mod, g->module, NULL))
      mark(p, g->rec + 1);
  }
  for (size_t i = 0; i < p->global_writes.n; i++) {
    const dv_gwrite *w = sh_vec_at(&p->global_writes, i);
    if (cucap_map_get(&kept_mod, w->module, NULL) && cucap_map_get(&p->mod, w->module, NULL))
      mark(p, w->rec + 1);
  }
  cucap_map_free(&kept_mod);
  /* memory: every live allocation (or what extract --minimal kept) */
  mark_allocs(p, &p->a_plain, only_kept);
  mark_allocs(p, &p->a_pool, 0);
  mark_allocs(p, &p->a_array, 0);
  if (!only_kept) {
    mark_allocs(p, &p->a_vmap, 0);
    mark_allocs(p, &p->a_vres, 0);
    mark_allocs(p, &p->a_vcreate, 0);
    mark_allocs(p, &p->a_access, 0);
    return;
  }
  /* minimal: the kept VMM mappings with their reservation, physical
   * allocation and access rights */
  uint64_t v1;
  for (size_t pos = 0; cucap_map_next(&p->a_vmap, &pos, NULL, &v1);) {
    dv_alloc *m = alloc_at(p, v1);
    if (!m || !m->live || !m->keep)
      continue;
    mark(p, m->rec + 1);
    uint64_t c1;
    if (cucap_map_get(&p->a_vcreate, m->handle, &c1) && alloc_at(p, c1))
      mark(p, alloc_at(p, c1)->rec + 1);
    if (cucap_map_get(&p->a_access, m->addr, &c1) && alloc_at(p, c1))
      mark(p, alloc_at(p, c1)->rec + 1);
    for (size_t k = 0; cucap_map_next(&p->a_vres, &k, NULL, &c1);) {
      dv_alloc *r = alloc_at(p, c1);
      if (r && r->live && m->addr - r->addr < r->size)
        mark(p, r->rec + 1);
    }
  }
}

/* ---------------------------------------------------------------- regions */

static int region_cmp(const void *a, const void *b) {
  const cucap_state_region *x = a, *y = b;
  return x->address < y->address ? -1 : x->address > y->address;
}

/* Sorts regions by address, moving the contexts along. */
static void sort_regions(sh_vec *g, sh_vec *ctx) {
  if (g->n < 2) /* nothing to sort; g->data may be NULL (qsort's must not) */
    return;
  if (!ctx) {
    cucap_sort(g->data, g->n, sizeof(cucap_state_region), region_cmp);
    return;
  }
  /* pair them up through the region's 'read' field as an index */
  cucap_state_region *r = g->data;
  uint64_t *c = ctx->data;
  for (size_t i = 0; i < g->n; i++)
    r[i].read = (int)i;
  cucap_sort(r, g->n, sizeof *r, region_cmp);
  uint64_t *nc = malloc((g->n ? g->n : 1) * sizeof *nc);
  if (nc) {
    for (size_t i = 0; i < g->n; i++)
      nc[i] = c[r[i].read];
    memcpy(c, nc, g->n * sizeof *nc);
    free(nc);
  }
  for (size_t i = 0; i < g->n; i++)
    r[i].read = 0;
}

static int add_region(sh_vec *out, sh_vec *ctx_out, uint64_t addr, uint64_t size,
                      cucap_hash128 data, int read, uint64_t ctx) {
  cucap_state_region *g = sh_vec_push(out);
  if (!g)
    return 0;
  g->address = addr;
  g->size = size;
  g->data = data;
  g->read = read;
  if (ctx_out) {
    uint64_t *c = sh_vec_push(ctx_out);
    if (!c)
      return 0;
    *c = ctx;
  }
  return 1;
}

cucap_status dv_regions_from_snapshot(dv_plan *p, const cucap_fb_snapshot *s, sh_vec *out,
                                      sh_vec *ctx_out, int only_kept) {
  size_t n = cucap_fb_snapshot_regions_len(s);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
    if (!g || !cucap_fb_mem_region_data(g))
      continue;
    uint64_t addr = cucap_fb_mem_region_address(g), size = cucap_fb_mem_region_size(g);
    dv_alloc *a = dv_alloc_find(p, addr);
    if (!a || (only_kept && !a->keep) || !size)
      continue;
    if (!add_region(out, ctx_out, addr, size, sh_h(cucap_fb_mem_region_data(g)), 1, a->ctx))
      return CUCAP_ERR_NOMEM;
  }
  sort_regions(out, ctx_out);
  return CUCAP_OK;
}

cucap_status dv_regions_from_allocs(dv_plan *p, sh_vec *out, sh_vec *ctx_out,
                                    int only_kept) {
  cucap_hash128 none = {0, 0};
  for (size_t i = 0; i < p->allocs.n; i++) {
    const dv_alloc *a = sh_vec_at(&p->allocs, i);
    if (!a->live || !sh_alloc_is_device(a->kind) || (only_kept && !a->keep) || !a->size)
      continue;
    for (uint64_t off = 0; off < a->size; off += DV_REGION_CHUNK) {
      uint64_t n = a->size - off < DV_REGION_CHUNK ? a->size - off : DV_REGION_CHUNK;
      if (!add_region(out, ctx_out, a->addr + off, n, none, 0, a->ctx))
        return CUCAP_ERR_NOMEM;
    }
  }
  sort_regions(out, ctx_out);
  return CUCAP_OK;
}

uint64_t dv_state_count(const dv_plan *p) {
  uint64_t n = p->regions.n;
  for (uint64_t i = 0; i < p->nrecords && i < p->cut; i++)
    n += p->keep[i] == DV_STATE;
  return n;
}

/* ---------------------------------------------------------------- stacks */

cucap_status dv_mark_stacks(dv_plan *p) {
  cucap_map used = {0};
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  cucap_status st = CUCAP_OK;
  for (uint64_t i = 0; i < p->nrecords && i <= p->last; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) != CUCAP_OK) {
      if (st == CUCAP_END)
        st = CUCAP_ERR_TRUNCATED;
      break;
    }
    uint32_t id = cucap_fb_record_stack(rec);
    if (p->keep[i] != DV_DROP && id && !sh_map_put(&used, (uint64_t)id + 1, 1)) {
      st = CUCAP_ERR_NOMEM;
      break;
    }
  }
  uint64_t id1;
  for (size_t pos = 0; st == CUCAP_OK && cucap_map_next(&used, &pos, &id1, NULL);) {
    uint64_t rec1, map1;
    if (!cucap_map_get(&p->stack_rec, id1, &rec1))
      continue; /* defined inside the kept range */
    mark(p, rec1);
    if (cucap_map_get(&p->stack_map, rec1, &map1))
      mark(p, map1);
  }
  /* the map current at the cut: what stacks defined in the range use */
  mark(p, p->last_map);
  cucap_map_free(&used);
  return st;
}
