/* profile_file.c - the profile file: write and read (cucap_profile.h).
 *
 * Layout (little-endian):
 *   0  magic "\x89CUPRF\r\n"            8 bytes
 *   8  u16 format major, u16 minor      (CUCAP_PROFILE_FORMAT_*)
 *  12  u32 flags                         bit 0: payload is one zstd frame
 *  16  u64 raw size                      bytes of the FlatBuffer
 *  24  u64 XXH3-64 of those raw bytes
 *  32  payload: a size-prefixed ProfileFile FlatBuffer (schema/cucap.fbs),
 *      zstd-compressed when flag 0 is set.
 * Readers refuse another major, accept any minor (fields are only
 * appended), check the hash, verify the FlatBuffer, and bound every index
 * and length before use: a damaged file gives an error, never a crash. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "cucap_hash.h"
#include "cucap_schema.h"
#include "cucap_fb_builder.h"
#include "cucap_vec.h"
#include "profile_internal.h"

#define PF_PREAMBLE 32
#define PF_FLAG_ZSTD 1u
#define PF_MAX_RAW ((uint64_t)2 << 30) /* FlatBuffers' own limit */

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* ------------------------------------------------------------ write */

static cucap_fb_ref build_finding(cucap_fbb *b, const cucap_finding *f) {
  cucap_fb_ref nn[CUCAP_FINDING_MAX_NUMBERS], nu[CUCAP_FINDING_MAX_NUMBERS];
  double nv[CUCAP_FINDING_MAX_NUMBERS];
  uint32_t ss[CUCAP_FINDING_MAX_SITES];
  uint64_t sc[CUCAP_FINDING_MAX_SITES], st[CUCAP_FINDING_MAX_SITES];
  unsigned n = f->nnumbers < CUCAP_FINDING_MAX_NUMBERS ? f->nnumbers : CUCAP_FINDING_MAX_NUMBERS;
  unsigned m = f->nsites < CUCAP_FINDING_MAX_SITES ? f->nsites : CUCAP_FINDING_MAX_SITES;
  for (unsigned i = 0; i < n; i++) {
    nn[i] = cucap_fbb_string(b, f->numbers[i].name, strlen(f->numbers[i].name));
    nu[i] = cucap_fbb_string(b, f->numbers[i].unit, strlen(f->numbers[i].unit));
    nv[i] = f->numbers[i].value;
  }
  for (unsigned i = 0; i < m; i++) {
    ss[i] = f->sites[i].stack;
    sc[i] = f->sites[i].count;
    st[i] = f->sites[i].time_ns;
  }
  cucap_fb_ref r_names = cucap_fbb_vector_refs(b, nn, n), r_units = cucap_fbb_vector_refs(b, nu, n);
  cucap_fb_ref r_vals = cucap_fb_profile_finding_create_number_values(b, nv, n);
  cucap_fb_ref r_ss = cucap_fb_profile_finding_create_site_stacks(b, ss, m);
  cucap_fb_ref r_sc = cucap_fb_profile_finding_create_site_counts(b, sc, m);
  cucap_fb_ref r_st = cucap_fb_profile_finding_create_site_times(b, st, m);
  cucap_fb_ref id = cucap_fbb_string(b, f->id, strlen(f->id));
  cucap_fb_ref ti = cucap_fbb_string(b, f->title, strlen(f->title));
  cucap_fb_ref es = cucap_fbb_string(b, f->estimate, strlen(f->estimate));
  cucap_fb_ref ad = cucap_fbb_string(b, f->advice, strlen(f->advice));
  cucap_fb_profile_finding_start(b);
  cucap_fb_profile_finding_add_id(b, id);
  cucap_fb_profile_finding_add_title(b, ti);
  cucap_fb_profile_finding_add_severity(b, (uint8_t)f->severity);
  cucap_fb_profile_finding_add_estimated(b, f->estimated ? 1 : 0);
  cucap_fb_profile_finding_add_recoverable_ns(b, f->recoverable_ns);
  cucap_fb_profile_finding_add_recoverable_pct(b, f->recoverable_pct);
  cucap_fb_profile_finding_add_estimate(b, es);
  cucap_fb_profile_finding_add_advice(b, ad);
  cucap_fb_profile_finding_add_number_names(b, r_names);
  cucap_fb_profile_finding_add_number_units(b, r_units);
  cucap_fb_profile_finding_add_number_values(b, r_vals);
  cucap_fb_profile_finding_add_site_stacks(b, r_ss);
  cucap_fb_profile_finding_add_site_counts(b, r_sc);
  cucap_fb_profile_finding_add_site_times(b, r_st);
  return cucap_fb_profile_finding_end(b);
}

static cucap_fb_ref build_rows(cucap_fbb *b, const pf_rows *t) {
  size_t n = t->n;
  uint64_t *key = malloc((n ? n : 1) * 8), *cnt = malloc((n ? n : 1) * 8);
  uint32_t *pc = malloc((n ? n : 1) * 4), *what = malloc((n ? n : 1) * 4);
  double *val = malloc((n ? n : 1) * 8);
  cucap_fb_ref r = 0;
  if (key && cnt && pc && what && val) {
    for (size_t i = 0; i < n; i++) {
      key[i] = t->r[i].key;
      pc[i] = t->r[i].pc;
      what[i] = t->r[i].what;
      cnt[i] = t->r[i].count;
      val[i] = t->r[i].value;
    }
    cucap_fb_ref a = cucap_fb_profile_rows_create_key(b, key, n);
    cucap_fb_ref c = cucap_fb_profile_rows_create_pc(b, pc, n);
    cucap_fb_ref d = cucap_fb_profile_rows_create_what(b, what, n);
    cucap_fb_ref e = cucap_fb_profile_rows_create_count(b, cnt, n);
    cucap_fb_ref f = cucap_fb_profile_rows_create_value(b, val, n);
    cucap_fb_profile_rows_start(b);
    cucap_fb_profile_rows_add_key(b, a);
    cucap_fb_profile_rows_add_pc(b, c);
    cucap_fb_profile_rows_add_what(b, d);
    cucap_fb_profile_rows_add_count(b, e);
    cucap_fb_profile_rows_add_value(b, f);
    r = cucap_fb_profile_rows_end(b);
  }
  free(key);
  free(cnt);
  free(pc);
  free(what);
  free(val);
  return r;
}

static cucap_fb_ref build_launch(cucap_fbb *b, const pf_launch *L) {
  size_t n = L->pub.ntimings;
  uint32_t *pass = malloc((n ? n : 1) * 4);
  uint64_t *s = malloc((n ? n : 1) * 8), *e = malloc((n ? n : 1) * 8);
  cucap_fb_ref r = 0;
  if (pass && s && e) {
    for (size_t i = 0; i < n; i++) {
      pass[i] = L->t[i].pass;
      s[i] = L->t[i].start_ns;
      e[i] = L->t[i].end_ns;
    }
    cucap_fb_ref rp = cucap_fb_profile_launch_create_pass(b, pass, n);
    cucap_fb_ref rs = cucap_fb_profile_launch_create_start_ns(b, s, n);
    cucap_fb_ref re = cucap_fb_profile_launch_create_end_ns(b, e, n);
    cucap_fb_ref rm = cucap_fb_profile_launch_create_metric(b, L->mid, L->pub.nmetrics);
    cucap_fb_ref rv = cucap_fb_profile_launch_create_value(b, L->mval, L->pub.nmetrics);
    cucap_fb_dim3 g = {L->pub.grid[0], L->pub.grid[1], L->pub.grid[2]};
    cucap_fb_dim3 bl = {L->pub.block[0], L->pub.block[1], L->pub.block[2]};
    cucap_fb_profile_launch_start(b);
    cucap_fb_profile_launch_add_key(b, L->pub.key);
    cucap_fb_profile_launch_add_seq(b, L->pub.seq);
    cucap_fb_profile_launch_add_kernel(b, L->kernel_id);
    cucap_fb_profile_launch_add_grid(b, &g);
    cucap_fb_profile_launch_add_block(b, &bl);
    cucap_fb_profile_launch_add_shared_mem(b, L->pub.shared_mem);
    cucap_fb_profile_launch_add_stream(b, L->pub.stream);
    cucap_fb_profile_launch_add_callstack(b, L->pub.callstack);
    cucap_fb_profile_launch_add_pass(b, rp);
    cucap_fb_profile_launch_add_start_ns(b, rs);
    cucap_fb_profile_launch_add_end_ns(b, re);
    cucap_fb_profile_launch_add_metric(b, rm);
    cucap_fb_profile_launch_add_value(b, rv);
    r = cucap_fb_profile_launch_end(b);
  }
  free(pass);
  free(s);
  free(e);
  return r;
}

static cucap_fb_ref str_ref(cucap_fbb *b, const char *s) {
  return cucap_fbb_string(b, s, strlen(s));
}

/* build: the vector of the sections' states (refs: scratch room). */
static cucap_fb_ref build_sections(const cucap_profile *p, cucap_fbb *b,
                                   cucap_fb_ref *refs) {
  for (int s = 0; s < CUCAP_PROFILE_NSECTIONS; s++) {
    cucap_fb_ref src = str_ref(b, p->sec[s].source), msg = str_ref(b, p->sec[s].message);
    cucap_fb_profile_section_start(b);
    cucap_fb_profile_section_add_section(b, (uint8_t)s);
    cucap_fb_profile_section_add_state(b, (uint8_t)p->sec[s].state);
    cucap_fb_profile_section_add_source(b, src);
    cucap_fb_profile_section_add_message(b, msg);
    refs[s] = cucap_fb_profile_section_end(b);
  }
  return cucap_fbb_vector_refs(b, refs, CUCAP_PROFILE_NSECTIONS);
}

/* build: the vector of the host callstacks, frames as string indices fid. */
static cucap_fb_ref build_stacks(const cucap_profile *p, cucap_fbb *b,
                                 cucap_fb_ref *refs, uint32_t *const *fid) {
  for (size_t i = 0; i < p->nstk; i++) {
    cucap_fb_ref fr = cucap_fb_profile_stack_create_frames(b, fid[i], p->stk[i].n);
    cucap_fb_profile_stack_start(b);
    cucap_fb_profile_stack_add_id(b, p->stk[i].id);
    cucap_fb_profile_stack_add_first_app(b, p->stk[i].first_app);
    cucap_fb_profile_stack_add_frames(b, fr);
    refs[i] = cucap_fb_profile_stack_end(b);
  }
  return cucap_fbb_vector_refs(b, refs, p->nstk);
}

/* build: the vector of the activities. */
static cucap_fb_ref build_activities(const cucap_profile *p, cucap_fbb *b,
                                     cucap_fb_ref *refs) {
  for (size_t i = 0; i < p->nact; i++) {
    const cucap_profile_activity *a = &p->act[i];
    cucap_fb_profile_activity_start(b);
    cucap_fb_profile_activity_add_kind(b, (uint8_t)a->kind);
    cucap_fb_profile_activity_add_seq(b, a->seq);
    cucap_fb_profile_activity_add_rec_index(b, a->rec_index);
    cucap_fb_profile_activity_add_pass(b, a->pass);
    cucap_fb_profile_activity_add_start_ns(b, a->start_ns);
    cucap_fb_profile_activity_add_end_ns(b, a->end_ns);
    cucap_fb_profile_activity_add_bytes(b, a->bytes);
    cucap_fb_profile_activity_add_copy_kind(b, a->copy_kind);
    cucap_fb_profile_activity_add_stream(b, a->stream);
    refs[i] = cucap_fb_profile_activity_end(b);
  }
  return cucap_fbb_vector_refs(b, refs, p->nact);
}

/* build: the vector of the sampled instructions. */
static cucap_fb_ref build_pcs(const cucap_profile *p, cucap_fbb *b,
                              cucap_fb_ref *refs) {
  for (size_t i = 0; i < p->npc; i++) {
    const pf_pc *x = &p->pcs[i];
    cucap_fb_profile_pc_start(b);
    cucap_fb_profile_pc_add_function(b, x->function);
    cucap_fb_profile_pc_add_module_id(b, x->view.module_id);
    cucap_fb_profile_pc_add_pc_offset(b, x->view.pc_offset);
    cucap_fb_profile_pc_add_sass(b, x->sass);
    cucap_fb_profile_pc_add_file(b, x->file);
    cucap_fb_profile_pc_add_line(b, x->view.line);
    cucap_fb_profile_pc_add_inlined(b, x->inlined);
    refs[i] = cucap_fb_profile_pc_end(b);
  }
  return cucap_fbb_vector_refs(b, refs, p->npc);
}

static cucap_status build(cucap_profile *p, cucap_fbb *b, cucap_fb_ref *root) {
  /* frames are kept as text; the file refers to them by string index */
  uint32_t **fid = calloc(p->nstk ? p->nstk : 1, sizeof *fid);
  if (!fid)
    return CUCAP_ERR_NOMEM;
  cucap_status st = CUCAP_OK;
  for (size_t i = 0; i < p->nstk && st == CUCAP_OK; i++) {
    fid[i] = malloc((p->stk[i].n ? p->stk[i].n : 1) * sizeof **fid);
    if (!fid[i])
      st = CUCAP_ERR_NOMEM;
    for (size_t k = 0; fid[i] && k < p->stk[i].n; k++)
      fid[i][k] = pf_str(p, p->stk[i].frames[k]);
  }
  size_t ns = p->strs.n, big = ns;
  if (p->nl > big)
    big = p->nl;
  if (p->nact > big)
    big = p->nact;
  if (p->npc > big)
    big = p->npc;
  if (p->nf > big)
    big = p->nf;
  if (p->nstk > big)
    big = p->nstk;
  cucap_fb_ref *refs = malloc((big ? big : 1) * sizeof *refs);
  if (!refs)
    st = CUCAP_ERR_NOMEM;
  if (st != CUCAP_OK)
    goto out;
  for (size_t i = 0; i < ns; i++)
    refs[i] = str_ref(b, p->strs.s[i]);
  cucap_fb_ref r_strings = cucap_fbb_vector_refs(b, refs, ns);
  cucap_fb_ref r_sections = build_sections(p, b, refs);
  cucap_fb_ref r_stacks = build_stacks(p, b, refs, fid);
  for (size_t i = 0; i < p->nl; i++)
    refs[i] = build_launch(b, &p->L[i]);
  cucap_fb_ref r_launches = cucap_fbb_vector_refs(b, refs, p->nl);
  cucap_fb_ref r_acts = build_activities(p, b, refs);
  cucap_fb_ref r_pcs = build_pcs(p, b, refs);
  cucap_fb_ref r_samples = build_rows(b, &p->samples), r_sass = build_rows(b, &p->sass);
  for (size_t i = 0; i < p->nf; i++)
    refs[i] = build_finding(b, &p->F[i]);
  cucap_fb_ref r_find = cucap_fbb_vector_refs(b, refs, p->nf);
  const cucap_profile_info *in = &p->info;
  cucap_fb_ref r_ver = str_ref(b, CUCAP_VERSION_STRING);
  cucap_fb_ref r_path = str_ref(b, in->capture_path), r_dev = str_ref(b, in->device);
  cucap_fb_ref r_be = str_ref(b, in->backend), r_ms = str_ref(b, in->metric_set);
  cucap_fb_ref r_cm = str_ref(b, in->cache_mode), r_rg = str_ref(b, in->range);
  cucap_fb_hash128 cid;
  memcpy(&cid.lo, in->capture_id, 8);
  memcpy(&cid.hi, in->capture_id + 8, 8);
  cucap_fb_profile_file_start(b);
  cucap_fb_profile_file_add_format_major(b, CUCAP_PROFILE_FORMAT_MAJOR);
  cucap_fb_profile_file_add_format_minor(b, CUCAP_PROFILE_FORMAT_MINOR);
  cucap_fb_profile_file_add_cucap_version(b, r_ver);
  cucap_fb_profile_file_add_capture_path(b, r_path);
  cucap_fb_profile_file_add_capture_id(b, &cid);
  cucap_fb_profile_file_add_capture_records(b, in->capture_records);
  cucap_fb_profile_file_add_capture_launches(b, in->capture_launches);
  cucap_fb_profile_file_add_device(b, r_dev);
  cucap_fb_profile_file_add_cc_major(b, in->cc_major);
  cucap_fb_profile_file_add_cc_minor(b, in->cc_minor);
  cucap_fb_profile_file_add_sm_count(b, in->sm_count);
  cucap_fb_profile_file_add_driver_version(b, in->driver_version);
  cucap_fb_profile_file_add_backend(b, r_be);
  cucap_fb_profile_file_add_cupti_version(b, in->cupti_version);
  cucap_fb_profile_file_add_metric_set(b, r_ms);
  cucap_fb_profile_file_add_cache_mode(b, r_cm);
  cucap_fb_profile_file_add_range(b, r_rg);
  cucap_fb_profile_file_add_loops(b, in->loops);
  cucap_fb_profile_file_add_passes(b, in->passes);
  cucap_fb_profile_file_add_created_ns(b, in->created_ns);
  cucap_fb_profile_file_add_strings(b, r_strings);
  cucap_fb_profile_file_add_sections(b, r_sections);
  cucap_fb_profile_file_add_stacks(b, r_stacks);
  cucap_fb_profile_file_add_launches(b, r_launches);
  cucap_fb_profile_file_add_activities(b, r_acts);
  cucap_fb_profile_file_add_pcs(b, r_pcs);
  cucap_fb_profile_file_add_samples(b, r_samples);
  cucap_fb_profile_file_add_sass(b, r_sass);
  cucap_fb_profile_file_add_findings(b, r_find);
  *root = cucap_fb_profile_file_end(b);
  if (cucap_fbb_failed(b))
    st = CUCAP_ERR_NOMEM;
out:
  for (size_t i = 0; i < p->nstk; i++)
    free(fid[i]);
  free(fid);
  free(refs);
  return st;
}

cucap_status cucap_profile_save(cucap_profile *p, const char *path) {
  CUCAP_FORWARD(cucap_profile_finalize(p));
  cucap_fbb *b = cucap_fbb_create(1 << 16);
  if (!b)
    return CUCAP_ERR_NOMEM;
  cucap_fb_ref root = 0;
  cucap_status st = build(p, b, &root);
  size_t raw_n = 0;
  const uint8_t *raw = st == CUCAP_OK ? cucap_fbb_finish(b, root, 1, &raw_n) : NULL;
  if (st == CUCAP_OK && (!raw || raw_n > PF_MAX_RAW))
    st = raw ? CUCAP_ERR_TOO_LARGE : CUCAP_ERR_NOMEM;
  uint8_t *z = NULL;
  size_t zn = 0;
  if (st == CUCAP_OK) {
    size_t bound = ZSTD_compressBound(raw_n);
    z = malloc(PF_PREAMBLE + bound);
    if (!z)
      st = CUCAP_ERR_NOMEM;
    else {
      zn = ZSTD_compress(z + PF_PREAMBLE, bound, raw, raw_n, 3);
      if (ZSTD_isError(zn))
        st = CUCAP_ERR_COMPRESS;
    }
  }
  if (st == CUCAP_OK) {
    memcpy(z, CUCAP_PROFILE_MAGIC, 8);
    put16(z + 8, CUCAP_PROFILE_FORMAT_MAJOR);
    put16(z + 10, CUCAP_PROFILE_FORMAT_MINOR);
    put32(z + 12, PF_FLAG_ZSTD);
    put64(z + 16, raw_n);
    put64(z + 24, cucap_hash64_of(raw, raw_n));
    /* write next to the target, then rename: a reader never sees half a file */
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) {
      st = CUCAP_ERR_NOMEM;
    } else {
      snprintf(tmp, pl + 16, "%s.tmp", path);
      FILE *f = fopen(tmp, "wb");
      if (!f ||
          fwrite(z, 1, PF_PREAMBLE + zn, f) != PF_PREAMBLE + zn || fclose(f) != 0) {
        if (f && ferror(f))
          fclose(f);
        remove(tmp);
        st = CUCAP_ERR_IO;
      } else if (rename(tmp, path) != 0) {
        remove(tmp);
        st = CUCAP_ERR_IO;
      }
      free(tmp);
    }
  }
  free(z);
  cucap_fbb_destroy(b);
  return st;
}

/* ------------------------------------------------------------ read */

typedef struct ld {
  cucap_profile *p;
  uint32_t *sid; /* file string index -> model id */
  size_t ns;
  char *msg;
  size_t msg_size;
} ld;

static cucap_status bad(ld *L, const char *what) {
  if (L->msg && L->msg_size)
    snprintf(L->msg, L->msg_size, "corrupt profile: %s", what);
  return CUCAP_ERR_CORRUPT;
}

static int sref(ld *L, uint32_t i, uint32_t *out) {
  if (i >= L->ns)
    return 0;
  *out = L->sid[i];
  return 1;
}

static const char *sget(ld *L, uint32_t i) {
  uint32_t id;
  return sref(L, i, &id) ? pf_s(L->p, id) : NULL;
}

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

static cucap_status load_launches(ld *L, const cucap_fb_profile_file *f) {
  cucap_profile *p = L->p;
  size_t n = cucap_fb_profile_file_launches_len(f);
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_profile_launch *x = cucap_fb_profile_file_launches_at(f, i);
    if (!x)
      return bad(L, "launch");
    const char *kernel = sget(L, cucap_fb_profile_launch_kernel(x));
    if (!kernel)
      return bad(L, "launch kernel name index");
    cucap_profile_launch_desc d = {cucap_fb_profile_launch_key(x), cucap_fb_profile_launch_seq(x),
                                   kernel, {0}, {0}, cucap_fb_profile_launch_shared_mem(x),
                                   cucap_fb_profile_launch_stream(x),
                                   cucap_fb_profile_launch_callstack(x)};
    const cucap_fb_dim3 *g = cucap_fb_profile_launch_grid(x), *b = cucap_fb_profile_launch_block(x);
    if (g) {
      d.grid[0] = g->x;
      d.grid[1] = g->y;
      d.grid[2] = g->z;
    }
    if (b) {
      d.block[0] = b->x;
      d.block[1] = b->y;
      d.block[2] = b->z;
    }
    CUCAP_FORWARD(pf_launch_add(p, &d));
    size_t np = 0, nst = 0, nen = 0, nm = 0, nv = 0;
    const uint32_t *pass = cucap_fb_profile_launch_pass(x, &np);
    const uint64_t *s = cucap_fb_profile_launch_start_ns(x, &nst);
    const uint64_t *e = cucap_fb_profile_launch_end_ns(x, &nen);
    const uint32_t *mid = cucap_fb_profile_launch_metric(x, &nm);
    const double *mv = cucap_fb_profile_launch_value(x, &nv);
    if ((pass ? np : 0) != (s ? nst : 0) || (s ? nst : 0) != (e ? nen : 0) ||
        (mid ? nm : 0) != (mv ? nv : 0))
      return bad(L, "launch vectors of different lengths");
    for (size_t k = 0; pass && k < np; k++)
      CUCAP_FORWARD(cucap_profile_add_kernel_timing(p, d.key, pass[k], s[k], e[k]));
    for (size_t k = 0; mid && k < nm; k++) {
      const char *name = sget(L, mid[k]);
      if (!name || !*name)
        return bad(L, "metric name index");
      CUCAP_FORWARD(cucap_profile_add_metric(p, d.key, name, mv[k]));
    }
  }
  return CUCAP_OK;
}

static cucap_status load_rows(ld *L, const cucap_fb_profile_rows *r, int sass,
                              const uint32_t *pcmap, size_t npc) {
  if (!r)
    return CUCAP_OK;
  size_t nk = 0, np = 0, nw = 0, nc = 0, nv = 0;
  const uint64_t *key = cucap_fb_profile_rows_key(r, &nk);
  const uint32_t *pc = cucap_fb_profile_rows_pc(r, &np);
  const uint32_t *what = cucap_fb_profile_rows_what(r, &nw);
  const uint64_t *cnt = cucap_fb_profile_rows_count(r, &nc);
  const double *val = cucap_fb_profile_rows_value(r, &nv);
  if (!key)
    return CUCAP_OK;
  if (!pc || !what || !cnt || !val || np != nk || nw != nk || nc != nk || nv != nk)
    return bad(L, "sample rows of different lengths");
  cucap_profile *p = L->p;
  for (size_t i = 0; i < nk; i++) {
    uint32_t w;
    if (pc[i] >= npc || !sref(L, what[i], &w))
      return bad(L, "sample row index");
    if (!pf_launch_get(p, key[i]))
      return bad(L, "sample row of an unknown launch");
    CUCAP_FORWARD(pf_row_add(sass ? &p->sass : &p->samples, key[i], pcmap[pc[i]], w, cnt[i],
                             val[i]));
  }
  return CUCAP_OK;
}

static cucap_status load_finding(ld *L, const cucap_fb_profile_finding *x) {
  cucap_finding f;
  memset(&f, 0, sizeof f);
  copy_str(f.id, sizeof f.id, cucap_fb_profile_finding_id(x));
  copy_str(f.title, sizeof f.title, cucap_fb_profile_finding_title(x));
  uint8_t sv = cucap_fb_profile_finding_severity(x);
  f.severity = sv <= CUCAP_SEVERITY_HIGH ? (cucap_severity)sv : CUCAP_SEVERITY_INFO;
  f.estimated = cucap_fb_profile_finding_estimated(x);
  f.recoverable_ns = cucap_fb_profile_finding_recoverable_ns(x);
  f.recoverable_pct = cucap_fb_profile_finding_recoverable_pct(x);
  copy_str(f.estimate, sizeof f.estimate, cucap_fb_profile_finding_estimate(x));
  copy_str(f.advice, sizeof f.advice, cucap_fb_profile_finding_advice(x));
  size_t nn = cucap_fb_profile_finding_number_names_len(x), nv = 0;
  const double *v = cucap_fb_profile_finding_number_values(x, &nv);
  if (!v)
    nv = 0;
  if (nn != nv || cucap_fb_profile_finding_number_units_len(x) != nn)
    return bad(L, "finding numbers of different lengths");
  for (size_t i = 0; i < nn && f.nnumbers < CUCAP_FINDING_MAX_NUMBERS; i++) {
    cucap_finding_number *n = &f.numbers[f.nnumbers++];
    copy_str(n->name, sizeof n->name, cucap_fb_profile_finding_number_names_at(x, i));
    copy_str(n->unit, sizeof n->unit, cucap_fb_profile_finding_number_units_at(x, i));
    n->value = v[i];
  }
  size_t a = 0, b = 0, c = 0;
  const uint32_t *ss = cucap_fb_profile_finding_site_stacks(x, &a);
  const uint64_t *sc = cucap_fb_profile_finding_site_counts(x, &b);
  const uint64_t *st = cucap_fb_profile_finding_site_times(x, &c);
  if (!ss || !sc || !st)
    a = b = c = 0;
  if (a != b || b != c)
    return bad(L, "finding sites of different lengths");
  for (size_t i = 0; i < a && f.nsites < CUCAP_FINDING_MAX_SITES; i++)
    f.sites[f.nsites++] = (cucap_finding_site){ss[i], sc[i], st[i]};
  cucap_profile *p = L->p;
  if (!CUCAP_VEC_RESERVE(p->F, p->capf, p->nf + 1, 8))
    return CUCAP_ERR_NOMEM;
  p->F[p->nf++] = f;
  return CUCAP_OK;
}

/* load_body: the file's info table. */
static void load_info(cucap_profile_info *in, const cucap_fb_profile_file *f) {
  copy_str(in->capture_path, sizeof in->capture_path, cucap_fb_profile_file_capture_path(f));
  const cucap_fb_hash128 *cid = cucap_fb_profile_file_capture_id(f);
  if (cid) {
    memcpy(in->capture_id, &cid->lo, 8);
    memcpy(in->capture_id + 8, &cid->hi, 8);
  }
  in->capture_records = cucap_fb_profile_file_capture_records(f);
  in->capture_launches = cucap_fb_profile_file_capture_launches(f);
  copy_str(in->device, sizeof in->device, cucap_fb_profile_file_device(f));
  in->cc_major = cucap_fb_profile_file_cc_major(f);
  in->cc_minor = cucap_fb_profile_file_cc_minor(f);
  in->sm_count = cucap_fb_profile_file_sm_count(f);
  in->driver_version = cucap_fb_profile_file_driver_version(f);
  copy_str(in->backend, sizeof in->backend, cucap_fb_profile_file_backend(f));
  in->cupti_version = cucap_fb_profile_file_cupti_version(f);
  copy_str(in->metric_set, sizeof in->metric_set, cucap_fb_profile_file_metric_set(f));
  copy_str(in->cache_mode, sizeof in->cache_mode, cucap_fb_profile_file_cache_mode(f));
  copy_str(in->range, sizeof in->range, cucap_fb_profile_file_range(f));
  in->loops = cucap_fb_profile_file_loops(f);
  in->passes = cucap_fb_profile_file_passes(f);
  in->created_ns = cucap_fb_profile_file_created_ns(f);
}

/* load_body: the host callstacks, frames resolved through the strings. */
static cucap_status load_stacks(ld *L, const cucap_fb_profile_file *f) {
  cucap_profile *p = L->p;
  for (size_t i = 0; i < cucap_fb_profile_file_stacks_len(f); i++) {
    const cucap_fb_profile_stack *x = cucap_fb_profile_file_stacks_at(f, i);
    size_t n = 0;
    const uint32_t *fr = x ? cucap_fb_profile_stack_frames(x, &n) : NULL;
    if (!fr)
      n = 0;
    const char **txt = malloc((n ? n : 1) * sizeof *txt);
    if (!txt)
      return CUCAP_ERR_NOMEM;
    for (size_t k = 0; k < n; k++)
      if (!(txt[k] = sget(L, fr[k]))) {
        free(txt);
        return bad(L, "stack frame index");
      }
    cucap_status st = x ? pf_stack_set(p, cucap_fb_profile_stack_id(x), txt, n,
                                       cucap_fb_profile_stack_first_app(x))
                        : CUCAP_OK;
    free(txt);
    CUCAP_FORWARD(st);
  }
  return CUCAP_OK;
}

/* load_body: the activities. */
static cucap_status load_activities(ld *L, const cucap_fb_profile_file *f) {
  cucap_profile *p = L->p;
  for (size_t i = 0; i < cucap_fb_profile_file_activities_len(f); i++) {
    const cucap_fb_profile_activity *x = cucap_fb_profile_file_activities_at(f, i);
    if (!x)
      return bad(L, "activity");
    cucap_profile_activity a = {(cucap_profile_activity_kind)cucap_fb_profile_activity_kind(x),
                                cucap_fb_profile_activity_seq(x),
                                cucap_fb_profile_activity_rec_index(x),
                                cucap_fb_profile_activity_pass(x),
                                cucap_fb_profile_activity_start_ns(x),
                                cucap_fb_profile_activity_end_ns(x),
                                cucap_fb_profile_activity_bytes(x),
                                cucap_fb_profile_activity_copy_kind(x),
                                cucap_fb_profile_activity_stream(x)};
    CUCAP_FORWARD(cucap_profile_add_activity(p, &a));
  }
  return CUCAP_OK;
}

static cucap_status load_body(ld *L, const cucap_fb_profile_file *f) {
  cucap_profile *p = L->p;
  load_info(&p->info, f);
  L->ns = cucap_fb_profile_file_strings_len(f);
  L->sid = malloc((L->ns ? L->ns : 1) * sizeof *L->sid);
  if (!L->sid)
    return CUCAP_ERR_NOMEM;
  for (size_t i = 0; i < L->ns; i++) {
    const char *s = cucap_fb_profile_file_strings_at(f, i);
    L->sid[i] = pf_str(p, s ? s : "");
    if (s && *s && !L->sid[i])
      return CUCAP_ERR_NOMEM;
  }
  for (size_t i = 0; i < cucap_fb_profile_file_sections_len(f); i++) {
    const cucap_fb_profile_section *x = cucap_fb_profile_file_sections_at(f, i);
    unsigned s = x ? cucap_fb_profile_section_section(x) : 99;
    unsigned stt = x ? cucap_fb_profile_section_state(x) : 99;
    if (s >= CUCAP_PROFILE_NSECTIONS || stt > CUCAP_PROFILE_UNAVAILABLE)
      continue; /* a section of a newer minor: not ours to show */
    p->sec[s].state = (cucap_profile_state)stt;
    copy_str(p->sec[s].source, sizeof p->sec[s].source, cucap_fb_profile_section_source(x));
    copy_str(p->sec[s].message, sizeof p->sec[s].message, cucap_fb_profile_section_message(x));
  }
  CUCAP_FORWARD(load_stacks(L, f));
  CUCAP_FORWARD(load_launches(L, f));
  CUCAP_FORWARD(load_activities(L, f));
  size_t npc = cucap_fb_profile_file_pcs_len(f);
  uint32_t *pcmap = malloc((npc ? npc : 1) * sizeof *pcmap);
  if (!pcmap)
    return CUCAP_ERR_NOMEM;
  cucap_status st = CUCAP_OK;
  for (size_t i = 0; i < npc && st == CUCAP_OK; i++) {
    const cucap_fb_profile_pc *x = cucap_fb_profile_file_pcs_at(f, i);
    const char *fn = x ? sget(L, cucap_fb_profile_pc_function(x)) : NULL;
    const char *sass = x ? sget(L, cucap_fb_profile_pc_sass(x)) : NULL;
    const char *file = x ? sget(L, cucap_fb_profile_pc_file(x)) : NULL;
    const char *inl = x ? sget(L, cucap_fb_profile_pc_inlined(x)) : NULL;
    if (!fn || !sass || !file || !inl) {
      st = bad(L, "instruction string index");
      break;
    }
    cucap_profile_pc pc = {fn, cucap_fb_profile_pc_module_id(x), cucap_fb_profile_pc_pc_offset(x),
                           *sass ? sass : NULL, *file ? file : NULL, cucap_fb_profile_pc_line(x),
                           *inl ? inl : NULL};
    pf_pc *q = pf_pc_get(p, &pc);
    if (!q)
      st = CUCAP_ERR_NOMEM;
    else
      pcmap[i] = (uint32_t)(q - p->pcs);
  }
  if (st == CUCAP_OK)
    st = load_rows(L, cucap_fb_profile_file_samples(f), 0, pcmap, npc);
  if (st == CUCAP_OK)
    st = load_rows(L, cucap_fb_profile_file_sass(f), 1, pcmap, npc);
  free(pcmap);
  for (size_t i = 0; st == CUCAP_OK && i < cucap_fb_profile_file_findings_len(f); i++) {
    const cucap_fb_profile_finding *x = cucap_fb_profile_file_findings_at(f, i);
    st = x ? load_finding(L, x) : bad(L, "finding");
  }
  p->dirty = 1;
  return st;
}

cucap_status cucap_profile_load_memory(const void *data, size_t size, cucap_profile **out,
                                       char *msg, size_t msg_size) {
  *out = NULL;
  if (msg && msg_size)
    msg[0] = 0;
  const uint8_t *d = data;
  ld L = {NULL, NULL, 0, msg, msg_size};
  if (size < 8 || memcmp(d, CUCAP_PROFILE_MAGIC, 8) != 0) {
    if (msg && msg_size)
      snprintf(msg, msg_size, "not a cucap profile (bad magic)");
    return CUCAP_ERR_BAD_MAGIC;
  }
  if (size < PF_PREAMBLE) {
    if (msg && msg_size)
      snprintf(msg, msg_size, "truncated profile (%zu bytes)", size);
    return CUCAP_ERR_TRUNCATED;
  }
  uint16_t major, minor;
  uint32_t flags;
  uint64_t raw_n, check;
  memcpy(&major, d + 8, 2);
  memcpy(&minor, d + 10, 2);
  memcpy(&flags, d + 12, 4);
  memcpy(&raw_n, d + 16, 8);
  memcpy(&check, d + 24, 8);
  if (major != CUCAP_PROFILE_FORMAT_MAJOR) {
    if (msg && msg_size)
      snprintf(msg, msg_size, "unsupported profile format %u.%u (this cucap reads %d.x)", major,
               minor, CUCAP_PROFILE_FORMAT_MAJOR);
    return CUCAP_ERR_VERSION;
  }
  if (raw_n < 8 || raw_n > PF_MAX_RAW)
    return bad(&L, "payload size");
  const uint8_t *payload = d + PF_PREAMBLE;
  size_t pn = size - PF_PREAMBLE;
  uint8_t *raw = NULL;
  if (flags & PF_FLAG_ZSTD) {
    unsigned long long fcs = ZSTD_getFrameContentSize(payload, pn);
    /* the writer always stores the content size; a frame without it, or one
     * claiming more than 4096x its compressed bytes, is not ours (found by
     * fuzz_profile: a 2 GiB allocation for a few bytes) */
    if (fcs == ZSTD_CONTENTSIZE_ERROR || fcs == ZSTD_CONTENTSIZE_UNKNOWN ||
        fcs != raw_n || raw_n / 4096 > pn)
      return bad(&L, "compressed payload");
    raw = malloc(raw_n);
    if (!raw)
      return CUCAP_ERR_NOMEM;
    size_t got = ZSTD_decompress(raw, raw_n, payload, pn);
    if (ZSTD_isError(got) || got != raw_n) {
      free(raw);
      if (msg && msg_size)
        snprintf(msg, msg_size, "corrupt or truncated profile: %s",
                 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short payload");
      return CUCAP_ERR_DECOMPRESS;
    }
  } else {
    if (pn < raw_n)
      return bad(&L, "payload shorter than its size");
    raw = malloc(raw_n);
    if (!raw)
      return CUCAP_ERR_NOMEM;
    memcpy(raw, payload, raw_n);
  }
  cucap_status st = CUCAP_OK;
  if (cucap_hash64_of(raw, raw_n) != check)
    st = bad(&L, "checksum mismatch");
  else if (cucap_fb_profile_file_verify(raw, raw_n, 1) != CUCAP_OK) {
    st = CUCAP_ERR_VERIFY;
    if (msg && msg_size)
      snprintf(msg, msg_size, "corrupt profile: the FlatBuffer fails verification");
  }
  if (st == CUCAP_OK)
    st = cucap_profile_create(&L.p);
  if (st == CUCAP_OK)
    st = load_body(&L, cucap_fb_profile_file_root_sp(raw));
  if (st == CUCAP_OK)
    st = cucap_profile_finalize(L.p);
  free(L.sid);
  free(raw);
  if (st != CUCAP_OK) {
    if (msg && msg_size && !msg[0])
      snprintf(msg, msg_size, "%s", cucap_status_str(st));
    cucap_profile_destroy(L.p);
    return st;
  }
  *out = L.p;
  return CUCAP_OK;
}

cucap_status cucap_profile_load(const char *path, cucap_profile **out, char *msg,
                                size_t msg_size) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (msg && msg_size)
      snprintf(msg, msg_size, "cannot open: %s", strerror(errno));
    return CUCAP_ERR_IO;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  cucap_status st = buf ? CUCAP_OK : CUCAP_ERR_NOMEM;
  while (st == CUCAP_OK) {
    if (n == cap) {
      if (cap >= ((size_t)4 << 30)) {
        st = CUCAP_ERR_TOO_LARGE;
        break;
      }
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        st = CUCAP_ERR_NOMEM;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) {
      if (ferror(f))
        st = CUCAP_ERR_IO;
      break;
    }
  }
  fclose(f);
  if (st == CUCAP_OK)
    st = cucap_profile_load_memory(buf, n, out, msg, msg_size);
  else if (msg && msg_size)
    snprintf(msg, msg_size, "%s", cucap_status_str(st));
  free(buf);
  return st;
}
