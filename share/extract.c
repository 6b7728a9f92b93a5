/* extract.c - `cucap extract`: one kernel launch as a standalone capture
 * (cucap_derive.h).
 *
 * The launch L is found by launch index or as the nth launch of a kernel.
 * Memory before it: the recorded Snapshot(BeforeLaunch, L) (record with
 * --snapshot=launch:N) or, with --replay, read by replaying up to L; the
 * expected result: the recorded Snapshot(AfterLaunch, L) or what the replay
 * reads after L, written as an Exit snapshot after the launch so that
 * `cucap replay --verify` compares every result region. Kept: the state
 * prefix (the function, its module and globals, the live allocations - with
 * --minimal only those the launch's 8-byte parameters point into -, the
 * launch's stream; no contexts: the replayer runs it in the primary
 * context), the Function/Callstack/ModuleMap records
 * between the cut and L, and L itself. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive_internal.h"

typedef struct ex_find {
  uint64_t launch, li, function, fn_rec;
  uint64_t seen;
  cucap_map fn_rec_of;     /* function handle -> Function record + 1 */
  cucap_map fn_name;       /* function handle -> index + 1 into names */
  sh_vec names;         /* char *, owned */
  cucap_map before, after; /* launch index + 1 -> snapshot record + 1 */
  char kernel[256];
} ex_find;

static const char *name_of(ex_find *f, uint64_t h) {
  uint64_t k;
  if (!cucap_map_get(&f->fn_name, h, &k))
    return NULL;
  char **s = sh_vec_at(&f->names, k - 1);
  return s ? *s : NULL;
}

static int remember_fn(ex_find *f, const cucap_fb_function *fn, uint64_t i) {
  uint64_t h = cucap_fb_function_handle(fn);
  const char *nm = cucap_fb_function_name(fn);
  if (!nm) /* a CUfunction of a CUkernel: the kernel's name */
    nm = name_of(f, cucap_fb_function_module(fn));
  if (!sh_map_put(&f->fn_rec_of, h, i + 1))
    return 0;
  if (!nm)
    return 1;
  char **slot = sh_vec_push(&f->names);
  if (!slot || !(*slot = strdup(nm)))
    return 0;
  return sh_map_put(&f->fn_name, h, f->names.n);
}

static int default_match(void *u, const char *mangled, const char *pattern) {
  (void)u;
  return strcmp(mangled, pattern) == 0;
}

static cucap_status locate(dv_plan *p, const cucap_launch_select *sel, ex_find *f) {
  f->launch = DV_NONE;
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  cucap_status st = CUCAP_OK;
  int (*match)(void *, const char *, const char *) = sel->match ? sel->match : default_match;
  for (uint64_t i = 0; i < p->nrecords; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) != CUCAP_OK)
      break;
    switch (cucap_fb_record_body_type(rec)) {
    case CUCAP_FB_BODY_FUNCTION:
      if (!remember_fn(f, cucap_fb_record_body_as_function(rec), i))
        return CUCAP_ERR_NOMEM;
      break;
    case CUCAP_FB_BODY_SNAPSHOT: {
      const cucap_fb_snapshot *s = cucap_fb_record_body_as_snapshot(rec);
      uint64_t li = cucap_fb_snapshot_launch_index(s) + 1;
      if (cucap_fb_snapshot_reason(s) == CUCAP_FB_SNAPSHOTREASON_BEFORELAUNCH &&
          !cucap_map_get(&f->before, li, NULL) && !sh_map_put(&f->before, li, i + 1))
        return CUCAP_ERR_NOMEM;
      if (cucap_fb_snapshot_reason(s) == CUCAP_FB_SNAPSHOTREASON_AFTERLAUNCH &&
          !cucap_map_get(&f->after, li, NULL) && !sh_map_put(&f->after, li, i + 1))
        return CUCAP_ERR_NOMEM;
      break;
    }
    case CUCAP_FB_BODY_LAUNCH: {
      const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
      if (f->launch != DV_NONE || cucap_fb_record_result(rec) != 0 ||
          cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_HOSTFUNC)
        break;
      uint64_t li = cucap_fb_launch_launch_index(l), fh = cucap_fb_launch_function(l);
      const char *nm = name_of(f, fh);
      if (sel->kernel ? !(nm && match(sel->match_user, nm, sel->kernel) && f->seen++ == sel->nth)
                      : li != sel->launch_index)
        break;
      f->launch = i;
      f->li = li;
      f->function = fh;
      uint64_t fr1 = 0;
      cucap_map_get(&f->fn_rec_of, fh, &fr1);
      f->fn_rec = fr1 ? fr1 - 1 : DV_NONE;
      snprintf(f->kernel, sizeof f->kernel, "%s", nm ? nm : "?");
      break;
    }
    default:
      break;
    }
  }
  if (st == CUCAP_END)
    st = CUCAP_OK;
  return st;
}

static void find_free(ex_find *f) {
  for (size_t i = 0; i < f->names.n; i++)
    free(*(char **)sh_vec_at(&f->names, i));
  sh_vec_free(&f->names);
  cucap_map_free(&f->fn_rec_of);
  cucap_map_free(&f->fn_name);
  cucap_map_free(&f->before);
  cucap_map_free(&f->after);
}

/* --minimal: the allocations the launch's 8-byte parameters point into
 * (every 8-aligned word when the layout is unknown). */
static cucap_status mark_pointed(dv_plan *p, const cucap_fb_record *launch_rec,
                                 const cucap_fb_record *fn_rec) {
  const cucap_fb_launch *l = cucap_fb_record_body_as_launch(launch_rec);
  uint64_t n = 0;
  if (cucap_reader_launch_args_size(p->r, l, &n) != CUCAP_OK || n > (1u << 20))
    return CUCAP_ERR_CORRUPT;
  uint8_t *args = malloc(n ? n : 1);
  if (!args)
    return CUCAP_ERR_NOMEM;
  if (cucap_reader_launch_args_read(p->r, l, args, n) != CUCAP_OK) {
    free(args);
    return CUCAP_ERR_CORRUPT;
  }
  const cucap_fb_function *fn = fn_rec ? cucap_fb_record_body_as_function(fn_rec) : NULL;
  size_t np = 0;
  const cucap_fb_param_info *pi = fn ? cucap_fb_function_params(fn, &np) : NULL;
  for (size_t off = 0, k = 0;;) {
    uint64_t o, sz;
    if (pi && np) {
      if (k >= np)
        break;
      o = pi[k].offset;
      sz = pi[k].size;
      k++;
    } else {
      o = off;
      sz = 8;
      off += 8;
    }
    if (o + 8 > n) {
      if (!(pi && np))
        break;
      continue;
    }
    if (sz != 8 || o % 8)
      continue;
    uint64_t v;
    memcpy(&v, args + o, 8);
    dv_alloc *a = dv_alloc_find(p, v);
    if (a)
      a->keep = 1;
  }
  free(args);
  return CUCAP_OK;
}

static cucap_status checksum_blobs(dv_plan *p, const sh_vec *g, uint64_t *out) {
  uint64_t h = SH_FNV_INIT;
  void *buf = NULL;
  uint64_t cap = 0;
  cucap_status st = CUCAP_OK;
  for (size_t i = 0; i < g->n && st == CUCAP_OK; i++) {
    const cucap_state_region *r = sh_vec_at(g, i);
    /* the region's recorded size must be its blob's (found by fuzz_share:
     * a size of 2^46 from a damaged capture sized the buffer) */
    uint64_t bsz = 0;
    if (cucap_reader_blob_size(p->r, r->data, &bsz) != CUCAP_OK || bsz != r->size) {
      st = CUCAP_ERR_CORRUPT;
      break;
    }
    if (r->size > cap) {
      void *nb = r->size <= SIZE_MAX ? realloc(buf, (size_t)r->size) : NULL;
      if (!nb) {
        st = CUCAP_ERR_NOMEM;
        break;
      }
      buf = nb;
      cap = r->size;
    }
    st = cucap_reader_blob_read(p->r, r->data, buf, r->size);
    if (st == CUCAP_OK)
      h = sh_fnv1a(h, buf, (size_t)r->size);
  }
  free(buf);
  *out = h;
  return st;
}

/* One extract: what its phases share. */
typedef struct ex_job {
  cucap_reader *src;
  const cucap_derive_options *o;
  cucap_derive_report *rep;
  const char *out_path;
  char selection[300];
  dv_plan p;
  ex_find f;
  sh_rec_copy lrec, frec, before, after;
  sh_vec expect; /* cucap_state_region: the expected result */
  cucap_writer *w;
} ex_job;

/* The selected launch, in a complete capture. */
static cucap_status find_launch(ex_job *j, const cucap_launch_select *sel) {
  cucap_derive_report *rep = j->rep;
  cucap_status st = dv_count(&j->p);
  if (st != CUCAP_OK || (st = locate(&j->p, sel, &j->f)) != CUCAP_OK) {
    cucap_reader_recovery rv;
    cucap_reader_recovery_get(j->src, &rv);
    return dv_fail(rep, st, st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_CORRUPT,
                   "the capture is damaged or truncated (%s): extract needs a complete capture",
                   rv.problem[0] ? rv.problem : cucap_status_str(st));
  }
  rep->source_records = j->p.nrecords;
  if (j->f.launch == DV_NONE)
    return dv_fail(rep, CUCAP_ERR_NOT_FOUND, CUCAP_ERR_INVALID_ARG, "%s: no such launch in the capture", j->selection);
  rep->launch_index = j->f.li;
  snprintf(rep->kernel, sizeof rep->kernel, "%s", j->f.kernel);
  return CUCAP_OK;
}

/* Where memory before the launch comes from (the recorded snapshot or the
 * replay), and copies of the records the later phases read. */
static cucap_status choose_state(ex_job *j) {
  dv_plan *p = &j->p;
  const ex_find *f = &j->f;
  cucap_derive_report *rep = j->rep;
  cucap_status st;
  uint64_t q1 = 0, a1 = 0;
  cucap_map_get(&f->before, f->li + 1, &q1);
  cucap_map_get(&f->after, f->li + 1, &a1);
  if (q1 && q1 - 1 > f->launch)
    q1 = 0;
  if (j->o->replay) {
    p->cut = p->first = f->launch;
    rep->state = CUCAP_FB_STATESOURCE_REPLAY;
  } else if (q1) {
    p->snap_rec = p->cut = q1 - 1;
    p->first = p->cut + 1;
    rep->state = CUCAP_FB_STATESOURCE_RECORDEDSNAPSHOT;
  } else {
    return dv_fail(rep, CUCAP_ERR_NOT_FOUND, CUCAP_ERR_INVALID_ARG,
                   "no snapshot of device memory was recorded before launch %" PRIu64
                   ": record with --snapshot=launch:%" PRIu64 ", or use extract --replay "
                   "(replays up to the launch on a GPU)", f->li, f->li);
  }
  p->last = f->launch;
  if ((st = dv_read_at(p, f->launch, &j->lrec)) != CUCAP_OK ||
      (f->fn_rec != DV_NONE && (st = dv_read_at(p, f->fn_rec, &j->frec)) != CUCAP_OK) ||
      (q1 && (st = dv_read_at(p, q1 - 1, &j->before)) != CUCAP_OK) ||
      (a1 && !j->o->replay && (st = dv_read_at(p, a1 - 1, &j->after)) != CUCAP_OK))
    return dv_fail(rep, st, st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_CORRUPT, "reading the capture: %s",
                   cucap_status_str(st));
  return CUCAP_OK;
}

static cucap_status mark_range(ex_job *j) {
  dv_plan *p = &j->p;
  /* kept range: the launch and, between the cut and it, what describes it */
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  CUCAP_FORWARD(cucap_reader_rewind(j->src));
  for (uint64_t i = 0; i <= j->f.launch; i++) {
    CUCAP_FORWARD(dv_next(p, &rec, &buf, &size));
    if (i < p->first)
      continue;
    int bt = cucap_fb_record_body_type(rec);
    if (i == j->f.launch || bt == CUCAP_FB_BODY_CALLSTACK || bt == CUCAP_FB_BODY_MODULEMAP ||
        (bt == CUCAP_FB_BODY_FUNCTION &&
         cucap_fb_function_handle(cucap_fb_record_body_as_function(rec)) == j->f.function))
      p->keep[i] = DV_RANGE;
  }
  return CUCAP_OK;
}

/* The state prefix: what the launch and the kept range use. */
static cucap_status plan_state(ex_job *j) {
  dv_plan *p = &j->p;
  const cucap_derive_options *o = j->o;
  cucap_status st;
  CUCAP_FORWARD(dv_scan_state(p));
  if (p->capturing)
    return dv_fail(j->rep, CUCAP_ERR_UNSUPPORTED, CUCAP_ERR_INVALID_ARG,
                   "launch %" PRIu64 " is part of a stream capture (a graph node): it cannot "
                   "be extracted as a launch", j->f.li);
  p->minimal = o->minimal;
  dv_images_setup(p, o->keep_all_archs);
  p->primary_only = 1; /* one launch needs no context of its own: loops cleanly */
  if (o->minimal && (st = mark_pointed(p, j->lrec.rec, j->frec.rec)) != CUCAP_OK)
    return dv_fail(j->rep, st, CUCAP_ERR_CORRUPT, "reading the launch's arguments: %s", cucap_status_str(st));
  CUCAP_FORWARD(dv_scan_uses(p));
  dv_mark_state(p);
  CUCAP_FORWARD(dv_mark_stacks(p));
  return CUCAP_OK;
}

/* The regions memory before the launch is written into, and the expected
 * result's. */
static cucap_status collect_regions(ex_job *j) {
  dv_plan *p = &j->p;
  const cucap_derive_options *o = j->o;
  cucap_status st;
  if (j->before.rec)
    st = dv_regions_from_snapshot(p, cucap_fb_record_body_as_snapshot(j->before.rec), &p->regions,
                                  &p->region_ctx, o->minimal);
  else
    st = dv_regions_from_allocs(p, &p->regions, &p->region_ctx, o->minimal);
  if (st == CUCAP_OK && j->after.rec)
    st = dv_regions_from_snapshot(p, cucap_fb_record_body_as_snapshot(j->after.rec), &j->expect,
                                  NULL, o->minimal);
  if (st == CUCAP_OK && o->replay) /* the same regions, read again after the launch */
    for (size_t i = 0; i < p->regions.n && st == CUCAP_OK; i++) {
      cucap_state_region *e = sh_vec_push(&j->expect);
      if (!e)
        st = CUCAP_ERR_NOMEM;
      else
        *e = *(cucap_state_region *)sh_vec_at(&p->regions, i);
    }
  if (st != CUCAP_OK)
    return dv_fail(j->rep, st, CUCAP_ERR_NOMEM, "out of memory");
  j->rep->have_expected = j->expect.n > 0;
  return CUCAP_OK;
}

/* The expected result's checksum: read by the replay, or of the recorded
 * blobs. */
static cucap_status expected_result(ex_job *j) {
  const cucap_derive_options *o = j->o;
  sh_vec *expect = &j->expect;
  cucap_derive_report *rep = j->rep;
  cucap_status st;
  if (o->replay) {
    char msg[512] = "";
    st = dv_replay_read(o, j->w, j->f.launch, j->p.regions.data, j->p.regions.n, expect->data,
                        expect->n, &rep->expected_checksum, msg, sizeof msg);
    if (st != CUCAP_OK)
      return dv_fail(rep, st, dv_as_replay(st),
                     "replaying up to launch %" PRIu64 ": %s", j->f.li, msg);
  } else if (expect->n && (st = checksum_blobs(&j->p, expect, &rep->expected_checksum)) != CUCAP_OK) {
    return dv_fail(rep, st, CUCAP_ERR_CORRUPT, "reading the recorded result: %s", cucap_status_str(st));
  }
  return CUCAP_OK;
}

/* The expected result's blobs the output lacks, then the Exit snapshot
 * after the launch. */
static cucap_status write_expected(ex_job *j) {
  const sh_vec *expect = &j->expect;
  cucap_status st = CUCAP_OK;
  for (size_t i = 0; i < expect->n && st == CUCAP_OK; i++) {
    cucap_state_region *e = sh_vec_at(expect, i);
    if (!j->o->replay && !cucap_writer_has_blob(j->w, e->data)) {
      uint64_t bs = 0;
      void *b = NULL;
      st = cucap_reader_blob_size(j->src, e->data, &bs);
      if (st == CUCAP_OK && !(b = malloc(bs ? bs : 1)))
        st = CUCAP_ERR_NOMEM;
      if (st == CUCAP_OK)
        st = cucap_reader_blob_read(j->src, e->data, b, bs);
      if (st == CUCAP_OK)
        st = cucap_writer_put_blob_hashed(j->w, b, (size_t)bs, e->data);
      free(b);
    }
  }
  if (st == CUCAP_OK)
    st = dv_write_exit_snapshot(j->w, expect->data, expect->n, j->f.li,
                                cucap_fb_record_t_exit(j->lrec.rec));
  if (st != CUCAP_OK)
    return dv_fail(j->rep, st, dv_as_write(st), "writing %s: %s", j->out_path, cucap_status_str(st));
  j->rep->records_written++;
  return CUCAP_OK;
}

static cucap_status write_output(ex_job *j) {
  dv_plan *p = &j->p;
  const cucap_derive_options *o = j->o;
  cucap_derive_report *rep = j->rep;
  cucap_status st;
  dv_origin org = {"extract", o->source_path, o->selection ? o->selection : j->selection,
                   rep->state, dv_state_count(p), cucap_fb_record_seq(j->lrec.rec),
                   cucap_fb_record_seq(j->lrec.rec), j->f.li, j->f.li, p->cut};
  CUCAP_FORWARD(dv_output_open(p, o, j->out_path, &org, rep, &j->w));
  CUCAP_FORWARD(expected_result(j));
  if ((st = dv_write(p, j->w, &rep->records_written)) != CUCAP_OK)
    return dv_fail(rep, st, dv_as_damage(st), "writing %s: %s",
                   j->out_path, cucap_status_str(st));
  if (j->expect.n)
    CUCAP_FORWARD(write_expected(j));
  CUCAP_FORWARD(dv_output_close(p, j->w, j->out_path, &org, rep));
  rep->expected_regions = j->expect.n;
  rep->launches = 1;
  rep->launch_first = rep->launch_last = j->f.li;
  return CUCAP_OK;
}

/* The phases in order; the first that fails ends the extract. */
static cucap_status extract(ex_job *j, const cucap_launch_select *sel) {
  CUCAP_FORWARD(find_launch(j, sel));
  CUCAP_FORWARD(choose_state(j));
  CUCAP_FORWARD(mark_range(j));
  CUCAP_FORWARD(plan_state(j));
  CUCAP_FORWARD(collect_regions(j));
  return write_output(j);
}

cucap_status cucap_extract(cucap_reader *src, const cucap_launch_select *sel,
                           const char *out_path, const cucap_derive_options *o,
                           cucap_derive_report *rep) {
  memset(rep, 0, sizeof *rep);
  cucap_derive_options defo;
  if (!o) {
    cucap_derive_options_init(&defo);
    o = &defo;
  }
  ex_job j;
  memset(&j, 0, sizeof j);
  j.src = src;
  j.o = o;
  j.rep = rep;
  j.out_path = out_path;
  if (sel->kernel)
    snprintf(j.selection, sizeof j.selection, "kernel:%s@%" PRIu64, sel->kernel, sel->nth);
  else
    snprintf(j.selection, sizeof j.selection, "launch:%" PRIu64, sel->launch_index);
  dv_plan_init(&j.p, src);
  sh_vec_init(&j.f.names, sizeof(char *));
  sh_vec_init(&j.expect, sizeof(cucap_state_region));
  cucap_status st = extract(&j, sel);
  if (st != CUCAP_OK && !rep->error[0])
    dv_fail(rep, st, dv_as_damage(st), "%s",
            cucap_status_str(st));
  cucap_writer_destroy(j.w);
  if (j.w && st != CUCAP_OK)
    remove(out_path);
  free(j.lrec.buf);
  free(j.frec.buf);
  free(j.before.buf);
  free(j.after.buf);
  sh_vec_free(&j.expect);
  find_free(&j.f);
  dv_plan_free(&j.p);
  return st;
}
