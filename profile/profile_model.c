/* profile_model.c - the profile data model of cucap_profile.h: storage and
 * filling (thread-safe, one mutex). Finalize and queries are in
 * profile_finalize.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_demangle.h"
#include "cucap_hash.h"
#include "cucap_reader.h"
#include "profile_internal.h"

#define LOCK(p) pthread_mutex_lock(&(p)->mu)
#define UNLOCK(p) pthread_mutex_unlock(&(p)->mu)

uint64_t pf_mix3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull;
  h ^= b + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
  h ^= c + 0x85EBCA77C2B2AE63ull + (h << 6) + (h >> 2);
  return h | 1;
}

uint32_t pf_str(cucap_profile *p, const char *s) { return cucap_strs_intern(&p->strs, s); }

const char *pf_s(const cucap_profile *p, uint32_t id) {
  return id < p->strs.n ? p->strs.s[id] : "";
}

/* ------------------------------------------------------------ lifecycle */

cucap_status cucap_profile_create(cucap_profile **out) {
  *out = NULL;
  cucap_profile *p = calloc(1, sizeof *p);
  if (!p)
    return CUCAP_ERR_NOMEM;
  pthread_mutex_init(&p->mu, NULL);
  pf_str(p, ""); /* id 0 */
  p->info.loops = 1;
  snprintf(p->info.backend, sizeof p->info.backend, "none");
  *out = p;
  return CUCAP_OK;
}

static void rows_free(pf_rows *t) {
  free(t->r);
  cucap_map_free(&t->idx);
  memset(t, 0, sizeof *t);
}

void cucap_profile_destroy(cucap_profile *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->nl; i++) {
    free(p->L[i].t);
    free(p->L[i].mid);
    free(p->L[i].mval);
  }
  free(p->L);
  cucap_map_free(&p->key_idx);
  free(p->act);
  free(p->pcs);
  cucap_map_free(&p->pc_idx);
  rows_free(&p->samples);
  rows_free(&p->sass);
  free(p->F);
  for (size_t i = 0; i < p->nstk; i++) {
    for (size_t k = 0; k < p->stk[i].n; k++)
      free(p->stk[i].frames[k]);
    free(p->stk[i].frames);
  }
  free(p->stk);
  cucap_map_free(&p->stk_idx);
  free(p->K);
  cucap_map_free(&p->dem);
  cucap_strs_free(&p->strs);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

cucap_status cucap_profile_set_info(cucap_profile *p, const cucap_profile_info *info) {
  LOCK(p);
  p->info = *info;
  p->info.capture_path[sizeof p->info.capture_path - 1] = 0;
  UNLOCK(p);
  return CUCAP_OK;
}

const cucap_profile_info *cucap_profile_info_get(const cucap_profile *p) { return &p->info; }

void cucap_profile_capture_id(cucap_reader *r, uint8_t out[16]) {
  size_t n = 0;
  const void *h = cucap_reader_header_buffer(r, &n);
  cucap_hash128 id = cucap_hash128_of(h, h ? n : 0);
  memcpy(out, &id.lo, 8);
  memcpy(out + 8, &id.hi, 8);
}

int cucap_profile_same_capture(const cucap_profile *a, const cucap_profile *b) {
  static const uint8_t zero[16];
  return memcmp(a->info.capture_id, zero, 16) != 0 &&
         memcmp(a->info.capture_id, b->info.capture_id, 16) == 0;
}

const char *cucap_profile_section_name(cucap_profile_section s) {
  static const char *const n[] = {"timeline", "metrics", "pc_sampling", "analysis"};
  return (unsigned)s < CUCAP_PROFILE_NSECTIONS ? n[s] : "?";
}

const char *cucap_profile_state_name(cucap_profile_state s) {
  static const char *const n[] = {"not_requested", "ok", "partial", "unavailable"};
  return (unsigned)s <= CUCAP_PROFILE_UNAVAILABLE ? n[s] : "?";
}

cucap_status cucap_profile_set_section(cucap_profile *p, cucap_profile_section s,
                                       cucap_profile_state state, const char *source,
                                       const char *fmt, ...) {
  if ((unsigned)s >= CUCAP_PROFILE_NSECTIONS)
    return CUCAP_ERR_INVALID_ARG;
  LOCK(p);
  pf_section *x = &p->sec[s];
  x->state = state;
  snprintf(x->source, sizeof x->source, "%s", source ? source : "");
  x->message[0] = 0;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->message, sizeof x->message, fmt, ap);
    va_end(ap);
  }
  UNLOCK(p);
  return CUCAP_OK;
}

void cucap_profile_get_section(const cucap_profile *p, cucap_profile_section s,
                               cucap_profile_state *state, const char **source,
                               const char **message) {
  static const pf_section none = {CUCAP_PROFILE_NOT_REQUESTED, "", ""};
  const pf_section *x = (unsigned)s < CUCAP_PROFILE_NSECTIONS ? &p->sec[s] : &none;
  if (state)
    *state = x->state;
  if (source)
    *source = x->source;
  if (message)
    *message = x->message;
}

/* ------------------------------------------------------------ launches */

pf_launch *pf_launch_get(cucap_profile *p, uint64_t key) {
  uint64_t v = 0;
  return cucap_map_get(&p->key_idx, key, &v) && v ? &p->L[v - 1] : NULL;
}

cucap_status pf_launch_add(cucap_profile *p, const cucap_profile_launch_desc *d) {
  if (pf_launch_get(p, d->key))
    return CUCAP_OK;
  if (!cucap_vec_reserve(&p->L, &p->capl, p->nl + 1, sizeof *p->L, 16))
    return CUCAP_ERR_NOMEM;
  pf_launch *L = &p->L[p->nl];
  memset(L, 0, sizeof *L);
  L->pub.key = d->key;
  L->pub.seq = d->seq;
  L->kernel_id = pf_str(p, d->kernel);
  memcpy(L->pub.grid, d->grid, sizeof L->pub.grid);
  memcpy(L->pub.block, d->block, sizeof L->pub.block);
  L->pub.shared_mem = d->shared_mem;
  L->pub.stream = d->stream;
  L->pub.callstack = d->callstack;
  if (!cucap_map_put(&p->key_idx, d->key, p->nl + 1))
    return CUCAP_ERR_NOMEM;
  p->nl++;
  p->dirty = 1;
  return CUCAP_OK;
}

cucap_status cucap_profile_add_launch(cucap_profile *p, const cucap_profile_launch_desc *d) {
  LOCK(p);
  cucap_status st = pf_launch_add(p, d);
  UNLOCK(p);
  return st;
}

cucap_status pf_stack_set(cucap_profile *p, uint32_t id, const char *const *frames, size_t n,
                          size_t first_app) {
  uint64_t v = 0;
  pf_stack *s;
  if (cucap_map_get(&p->stk_idx, id, &v) && v) {
    s = &p->stk[v - 1];
    for (size_t k = 0; k < s->n; k++)
      free(s->frames[k]);
    free(s->frames);
  } else {
    if (!cucap_vec_reserve(&p->stk, &p->capstk, p->nstk + 1, sizeof *p->stk, 16))
      return CUCAP_ERR_NOMEM;
    if (!cucap_map_put(&p->stk_idx, id, p->nstk + 1))
      return CUCAP_ERR_NOMEM;
    s = &p->stk[p->nstk++];
  }
  memset(s, 0, sizeof *s);
  s->id = id;
  s->frames = calloc(n ? n : 1, sizeof *s->frames);
  if (!s->frames)
    return CUCAP_ERR_NOMEM;
  for (size_t k = 0; k < n; k++) {
    s->frames[k] = strdup(frames[k] ? frames[k] : "");
    if (!s->frames[k])
      return CUCAP_ERR_NOMEM;
    s->n = k + 1;
  }
  s->first_app = first_app < n ? (uint32_t)first_app : 0;
  return CUCAP_OK;
}

cucap_status cucap_profile_set_stack(cucap_profile *p, uint32_t id, const char *const *frames,
                                     size_t n, size_t first_app) {
  LOCK(p);
  cucap_status st = pf_stack_set(p, id, frames, n, first_app);
  UNLOCK(p);
  return st;
}

const char *const *cucap_profile_stack(const cucap_profile *p, uint32_t id, size_t *n,
                                       size_t *first_app) {
  uint64_t v = 0;
  if (n)
    *n = 0;
  if (!cucap_map_get(&p->stk_idx, id, &v) || !v)
    return NULL;
  const pf_stack *s = &p->stk[v - 1];
  if (n)
    *n = s->n;
  if (first_app)
    *first_app = s->first_app;
  return (const char *const *)s->frames;
}

cucap_status cucap_profile_add_analysis(cucap_profile *p, cucap_analysis *a) {
  cucap_status st = CUCAP_OK;
  size_t nl = cucap_analysis_launch_count(a);
  LOCK(p);
  for (size_t i = 0; i < nl && st == CUCAP_OK; i++) {
    cucap_analysis_launch al;
    if (cucap_analysis_launch_get(a, i, &al) != CUCAP_OK)
      continue;
    cucap_profile_launch_desc d = {al.launch_index, al.seq, al.kernel, {0}, {0}, al.shared_mem,
                                   al.stream, al.stack};
    memcpy(d.grid, al.grid, sizeof d.grid);
    memcpy(d.block, al.block, sizeof d.block);
    st = pf_launch_add(p, &d);
    uint64_t v;
    if (st == CUCAP_OK && al.stack && !cucap_map_get(&p->stk_idx, al.stack, &v)) {
      size_t n = 0, first = 0;
      const char *const *fr = cucap_analysis_stack(a, al.stack, &n, &first);
      if (fr)
        st = pf_stack_set(p, al.stack, fr, n, first);
    }
  }
  for (size_t i = 0; i < cucap_analysis_finding_count(a) && st == CUCAP_OK; i++) {
    const cucap_finding *f = cucap_analysis_finding(a, i);
    if (!cucap_vec_reserve(&p->F, &p->capf, p->nf + 1, sizeof *p->F, 16)) {
      st = CUCAP_ERR_NOMEM;
      break;
    }
    p->F[p->nf++] = *f;
    for (unsigned k = 0; k < f->nsites && st == CUCAP_OK; k++) {
      uint64_t v;
      uint32_t id = f->sites[k].stack;
      if (!id || cucap_map_get(&p->stk_idx, id, &v))
        continue;
      size_t n = 0, first = 0;
      const char *const *fr = cucap_analysis_stack(a, id, &n, &first);
      if (fr)
        st = pf_stack_set(p, id, fr, n, first);
    }
  }
  const cucap_analysis_summary *sm = cucap_analysis_summary_get(a);
  pf_section *x = &p->sec[CUCAP_PROFILE_ANALYSIS];
  x->state = sm->read_status == CUCAP_OK ? CUCAP_PROFILE_OK : CUCAP_PROFILE_PARTIAL;
  snprintf(x->source, sizeof x->source, "capture");
  snprintf(x->message, sizeof x->message, "%s%s%s", sm->window_reason,
           sm->read_status == CUCAP_OK ? "" : "; ", sm->read_status == CUCAP_OK ? "" : sm->problem);
  p->dirty = 1;
  UNLOCK(p);
  return st;
}

cucap_status cucap_profile_add_finding(cucap_profile *p, const cucap_finding *f) {
  LOCK(p);
  cucap_status st = CUCAP_ERR_NOMEM;
  if (cucap_vec_reserve(&p->F, &p->capf, p->nf + 1, sizeof *p->F, 16)) {
    p->F[p->nf++] = *f;
    st = CUCAP_OK;
  }
  UNLOCK(p);
  return st;
}

void cucap_profile_clear_findings(cucap_profile *p) {
  LOCK(p);
  p->nf = 0;
  UNLOCK(p);
}

/* ------------------------------------------------------------ measurements */

cucap_status cucap_profile_add_kernel_timing(cucap_profile *p, uint64_t key, unsigned pass,
                                             uint64_t start_ns, uint64_t end_ns) {
  LOCK(p);
  cucap_status st = CUCAP_ERR_NOT_FOUND;
  pf_launch *L = pf_launch_get(p, key);
  if (L) {
    st = CUCAP_ERR_NOMEM;
    if (cucap_vec_reserve(&L->t, &L->capt, L->pub.ntimings + 1, sizeof *L->t, 16)) {
      L->t[L->pub.ntimings++] =
          (cucap_profile_timing){pass, start_ns, end_ns >= start_ns ? end_ns : start_ns};
      p->dirty = 1;
      st = CUCAP_OK;
    }
  }
  UNLOCK(p);
  return st;
}

cucap_status cucap_profile_add_activity(cucap_profile *p, const cucap_profile_activity *a) {
  LOCK(p);
  cucap_status st = CUCAP_ERR_NOMEM;
  if (cucap_vec_reserve(&p->act, &p->capact, p->nact + 1, sizeof *p->act, 16)) {
    p->act[p->nact++] = *a;
    p->dirty = 1;
    st = CUCAP_OK;
  }
  UNLOCK(p);
  return st;
}

cucap_status cucap_profile_add_metric(cucap_profile *p, uint64_t key, const char *name,
                                      double value) {
  if (!name || !*name)
    return CUCAP_ERR_INVALID_ARG;
  LOCK(p);
  cucap_status st = CUCAP_ERR_NOT_FOUND;
  pf_launch *L = pf_launch_get(p, key);
  if (L) {
    uint32_t id = pf_str(p, name);
    size_t i = 0;
    while (i < L->pub.nmetrics && L->mid[i] != id)
      i++;
    st = CUCAP_OK;
    if (i == L->pub.nmetrics) {
      size_t c1 = L->capm, c2 = L->capm;
      if (!cucap_vec_reserve(&L->mid, &c1, i + 1, sizeof *L->mid, 16) ||
          !cucap_vec_reserve(&L->mval, &c2, i + 1, sizeof *L->mval, 16))
        st = CUCAP_ERR_NOMEM;
      else
        L->capm = c1 < c2 ? c1 : c2;
      if (st == CUCAP_OK) {
        L->mid[i] = id;
        L->pub.nmetrics++;
      }
    }
    if (st == CUCAP_OK) {
      L->mval[i] = value;
      p->dirty = 1;
    }
  }
  UNLOCK(p);
  return st;
}

pf_pc *pf_pc_get(cucap_profile *p, const cucap_profile_pc *pc) {
  uint32_t fn = pf_str(p, pc->function);
  uint64_t h = pf_mix3(fn, pc->module_id, pc->pc_offset), v;
  for (; cucap_map_get(&p->pc_idx, h, &v); h = h * 31 + 7) {
    pf_pc *x = &p->pcs[v];
    if (x->function == fn && x->view.module_id == pc->module_id &&
        x->view.pc_offset == pc->pc_offset) {
      if (!x->sass && pc->sass && *pc->sass) { /* fill what was unknown */
        x->sass = pf_str(p, pc->sass);
        x->view.sass = pf_s(p, x->sass);
      }
      if (!x->file && pc->file && *pc->file) {
        x->file = pf_str(p, pc->file);
        x->view.file = pf_s(p, x->file);
        x->view.line = pc->line;
      }
      if (!x->inlined && pc->inlined && *pc->inlined) {
        x->inlined = pf_str(p, pc->inlined);
        x->view.inlined = pf_s(p, x->inlined);
      }
      return x;
    }
  }
  if (!cucap_vec_reserve(&p->pcs, &p->cappc, p->npc + 1, sizeof *p->pcs, 16))
    return NULL;
  if (!cucap_map_put(&p->pc_idx, h, p->npc))
    return NULL;
  pf_pc *x = &p->pcs[p->npc++];
  memset(x, 0, sizeof *x);
  x->function = fn;
  x->sass = pf_str(p, pc->sass);
  x->file = pf_str(p, pc->file);
  x->inlined = pf_str(p, pc->inlined);
  x->view.function = pf_s(p, fn);
  x->view.module_id = pc->module_id;
  x->view.pc_offset = pc->pc_offset;
  x->view.sass = x->sass ? pf_s(p, x->sass) : NULL;
  x->view.file = x->file ? pf_s(p, x->file) : NULL;
  x->view.line = x->file ? pc->line : 0;
  x->view.inlined = x->inlined ? pf_s(p, x->inlined) : NULL;
  return x;
}

cucap_status pf_row_add(pf_rows *t, uint64_t key, uint32_t pc, uint32_t what, uint64_t count,
                        double value) {
  uint64_t h = pf_mix3(key, pc, what), v;
  for (; cucap_map_get(&t->idx, h, &v); h = h * 31 + 7) {
    pf_row *r = &t->r[v];
    if (r->key == key && r->pc == pc && r->what == what) {
      r->count += count;
      r->value += value;
      return CUCAP_OK;
    }
  }
  if (!cucap_vec_reserve(&t->r, &t->cap, t->n + 1, sizeof *t->r, 16) || !cucap_map_put(&t->idx, h, t->n))
    return CUCAP_ERR_NOMEM;
  t->r[t->n++] = (pf_row){key, pc, what, count, value};
  return CUCAP_OK;
}

static cucap_status add_row(cucap_profile *p, pf_rows *t, uint64_t key,
                            const cucap_profile_pc *pc, const char *what, uint64_t count,
                            double value) {
  if (!pc)
    return CUCAP_ERR_INVALID_ARG;
  LOCK(p);
  cucap_status st = CUCAP_ERR_NOT_FOUND;
  if (pf_launch_get(p, key)) {
    pf_pc *x = pf_pc_get(p, pc);
    st = x ? pf_row_add(t, key, (uint32_t)(x - p->pcs), pf_str(p, what), count, value)
           : CUCAP_ERR_NOMEM;
    p->dirty = 1;
  }
  UNLOCK(p);
  return st;
}

cucap_status cucap_profile_add_pc_sample(cucap_profile *p, uint64_t key,
                                         const cucap_profile_pc *pc, const char *stall,
                                         uint64_t samples) {
  return add_row(p, &p->samples, key, pc, stall && *stall ? stall : "none", samples, 0);
}

cucap_status cucap_profile_add_sass_metric(cucap_profile *p, uint64_t key,
                                           const cucap_profile_pc *pc, const char *name,
                                           double value) {
  if (!name || !*name)
    return CUCAP_ERR_INVALID_ARG;
  return add_row(p, &p->sass, key, pc, name, 0, value);
}
