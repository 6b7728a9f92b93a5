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

cucap_status cucap_extract(cucap_reader *src, const cucap_launch_select *sel,
                           const char *out_path, const cucap_derive_options *o,
                           cucap_derive_report *rep) {
  memset(rep, 0, sizeof *rep);
  cucap_derive_options defo;
  if (!o) {
    cucap_derive_options_init(&defo);
    o = &defo;
  }
  char selection[300];
  if (sel->kernel)
    snprintf(selection, sizeof selection, "kernel:%s@%" PRIu64, sel->kernel, sel->nth);
  else
    snprintf(selection, sizeof selection, "launch:%" PRIu64, sel->launch_index);
  dv_plan p;
  dv_plan_init(&p, src);
  ex_find f;
  memset(&f, 0, sizeof f);
  sh_vec_init(&f.names, sizeof(char *));
  sh_rec_copy lrec = {0}, frec = {0}, before = {0}, after = {0};
  sh_vec expect;
  sh_vec_init(&expect, sizeof(cucap_state_region));
  cucap_writer *w = NULL;
  cucap_status st = dv_count(&p);
  if (st != CUCAP_OK || (st = locate(&p, sel, &f)) != CUCAP_OK) {
    cucap_reader_recovery rv;
    cucap_reader_recovery_get(src, &rv);
    dv_fail(rep, st, st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_CORRUPT,
            "the capture is damaged or truncated (%s): extract needs a complete capture",
            rv.problem[0] ? rv.problem : cucap_status_str(st));
    goto out;
  }
  rep->source_records = p.nrecords;
  if (f.launch == DV_NONE) {
    st = dv_fail(rep, CUCAP_ERR_NOT_FOUND, CUCAP_ERR_INVALID_ARG, "%s: no such launch in the capture", selection);
    goto out;
  }
  rep->launch_index = f.li;
  snprintf(rep->kernel, sizeof rep->kernel, "%s", f.kernel);
  uint64_t q1 = 0, a1 = 0;
  cucap_map_get(&f.before, f.li + 1, &q1);
  cucap_map_get(&f.after, f.li + 1, &a1);
  if (q1 && q1 - 1 > f.launch)
    q1 = 0;
  if (o->replay) {
    p.cut = p.first = f.launch;
    rep->state = CUCAP_FB_STATESOURCE_REPLAY;
  } else if (q1) {
    p.snap_rec = p.cut = q1 - 1;
    p.first = p.cut + 1;
    rep->state = CUCAP_FB_STATESOURCE_RECORDEDSNAPSHOT;
  } else {
    st = dv_fail(rep, CUCAP_ERR_NOT_FOUND, CUCAP_ERR_INVALID_ARG,
                 "no snapshot of device memory was recorded before launch %" PRIu64
                 ": record with --snapshot=launch:%" PRIu64 ", or use extract --replay "
                 "(replays up to the launch on a GPU)", f.li, f.li);
    goto out;
  }
  p.last = f.launch;
  if ((st = dv_read_at(&p, f.launch, &lrec)) != CUCAP_OK ||
      (f.fn_rec != DV_NONE && (st = dv_read_at(&p, f.fn_rec, &frec)) != CUCAP_OK) ||
      (q1 && (st = dv_read_at(&p, q1 - 1, &before)) != CUCAP_OK) ||
      (a1 && !o->replay && (st = dv_read_at(&p, a1 - 1, &after)) != CUCAP_OK)) {
    dv_fail(rep, st, st == CUCAP_ERR_NOMEM ? st : CUCAP_ERR_CORRUPT, "reading the capture: %s",
            cucap_status_str(st));
    goto out;
  }
  /* kept range: the launch and, between the cut and it, what describes it */
  {
    const cucap_fb_record *rec;
    const void *buf;
    size_t size;
    if ((st = cucap_reader_rewind(src)) != CUCAP_OK)
      goto out;
    for (uint64_t i = 0; i <= f.launch; i++) {
      if ((st = dv_next(&p, &rec, &buf, &size)) != CUCAP_OK)
        goto out;
      if (i < p.first)
        continue;
      int bt = cucap_fb_record_body_type(rec);
      if (i == f.launch || bt == CUCAP_FB_BODY_CALLSTACK || bt == CUCAP_FB_BODY_MODULEMAP ||
          (bt == CUCAP_FB_BODY_FUNCTION &&
           cucap_fb_function_handle(cucap_fb_record_body_as_function(rec)) == f.function))
        p.keep[i] = DV_RANGE;
    }
  }
  if ((st = dv_scan_state(&p)) != CUCAP_OK)
    goto out;
  if (p.capturing) {
    st = dv_fail(rep, CUCAP_ERR_UNSUPPORTED, CUCAP_ERR_INVALID_ARG,
                 "launch %" PRIu64 " is part of a stream capture (a graph node): it cannot "
                 "be extracted as a launch", f.li);
    goto out;
  }
  p.minimal = o->minimal;
  dv_images_setup(&p, o->keep_all_archs);
  p.primary_only = 1; /* one launch needs no context of its own: loops cleanly */
  if (o->minimal && (st = mark_pointed(&p, lrec.rec, frec.rec)) != CUCAP_OK) {
    dv_fail(rep, st, CUCAP_ERR_CORRUPT, "reading the launch's arguments: %s", cucap_status_str(st));
    goto out;
  }
  if ((st = dv_scan_uses(&p)) != CUCAP_OK)
    goto out;
  dv_mark_state(&p);
  if ((st = dv_mark_stacks(&p)) != CUCAP_OK)
    goto out;
  if (before.rec)
    st = dv_regions_from_snapshot(&p, cucap_fb_record_body_as_snapshot(before.rec), &p.regions,
                                  &p.region_ctx, o->minimal);
  else
    st = dv_regions_from_allocs(&p, &p.regions, &p.region_ctx, o->minimal);
  if (st == CUCAP_OK && after.rec)
    st = dv_regions_from_snapshot(&p, cucap_fb_record_body_as_snapshot(after.rec), &expect,
                                  NULL, o->minimal);
  if (st == CUCAP_OK && o->replay) /* the same regions, read again after the launch */
    for (size_t i = 0; i < p.regions.n && st == CUCAP_OK; i++) {
      cucap_state_region *e = sh_vec_push(&expect);
      if (!e)
        st = CUCAP_ERR_NOMEM;
      else
        *e = *(cucap_state_region *)sh_vec_at(&p.regions, i);
    }
  if (st != CUCAP_OK) {
    dv_fail(rep, st, CUCAP_ERR_NOMEM, "out of memory");
    goto out;
  }
  rep->have_expected = expect.n > 0;
  dv_origin org = {"extract", o->source_path, o->selection ? o->selection : selection,
                   rep->state, dv_state_count(&p), cucap_fb_record_seq(lrec.rec),
                   cucap_fb_record_seq(lrec.rec), f.li, f.li, p.cut};
  if ((st = dv_output_open(&p, o, out_path, &org, rep, &w)) != CUCAP_OK)
    goto out;
  if (o->replay) {
    char msg[512] = "";
    st = dv_replay_read(o, w, f.launch, p.regions.data, p.regions.n, expect.data, expect.n,
                        &rep->expected_checksum, msg, sizeof msg);
    if (st != CUCAP_OK) {
      dv_fail(rep, st, dv_as_replay(st),
              "replaying up to launch %" PRIu64 ": %s", f.li, msg);
      goto out;
    }
  } else if (expect.n && (st = checksum_blobs(&p, &expect, &rep->expected_checksum)) != CUCAP_OK) {
    dv_fail(rep, st, CUCAP_ERR_CORRUPT, "reading the recorded result: %s", cucap_status_str(st));
    goto out;
  }
  if ((st = dv_write(&p, w, &rep->records_written)) != CUCAP_OK) {
    dv_fail(rep, st, dv_as_damage(st), "writing %s: %s",
            out_path, cucap_status_str(st));
    goto out;
  }
  if (expect.n) {
    for (size_t i = 0; i < expect.n && st == CUCAP_OK; i++) {
      cucap_state_region *e = sh_vec_at(&expect, i);
      if (!o->replay && !cucap_writer_has_blob(w, e->data)) {
        uint64_t bs = 0;
        void *b = NULL;
        st = cucap_reader_blob_size(src, e->data, &bs);
        if (st == CUCAP_OK && !(b = malloc(bs ? bs : 1)))
          st = CUCAP_ERR_NOMEM;
        if (st == CUCAP_OK)
          st = cucap_reader_blob_read(src, e->data, b, bs);
        if (st == CUCAP_OK)
          st = cucap_writer_put_blob_hashed(w, b, (size_t)bs, e->data);
        free(b);
      }
    }
    if (st == CUCAP_OK)
      st = dv_write_exit_snapshot(w, expect.data, expect.n, f.li,
                                  cucap_fb_record_t_exit(lrec.rec));
    if (st != CUCAP_OK) {
      dv_fail(rep, st, dv_as_write(st), "writing %s: %s", out_path, cucap_status_str(st));
      goto out;
    }
    rep->records_written++;
  }
  if ((st = dv_output_close(&p, w, out_path, &org, rep)) != CUCAP_OK)
    goto out;
  rep->expected_regions = expect.n;
  rep->launches = 1;
  rep->launch_first = rep->launch_last = f.li;
out:
  if (st != CUCAP_OK && !rep->error[0])
    dv_fail(rep, st, dv_as_damage(st), "%s",
            cucap_status_str(st));
  cucap_writer_destroy(w);
  if (w && st != CUCAP_OK)
    remove(out_path);
  free(lrec.buf);
  free(frec.buf);
  free(before.buf);
  free(after.buf);
  sh_vec_free(&expect);
  find_free(&f);
  dv_plan_free(&p);
  return st;
}
