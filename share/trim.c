/* trim.c - `cucap trim`: a range of a capture as a capture of its own
 * (cucap_derive.h).
 *
 * Locating the range (one pass): its first record S and last record E,
 *   launch:A-B   S = the Launch with launch_index A, E = the record before
 *                the Launch of B+1 (so copies reading B's results are kept)
 *   nvtx:NAME@K  S = the K-th Push/RangeStart with message NAME, E = its
 *                Pop (same thread, domain and level) / RangeEnd (same id)
 *   profiler@K   S = the K-th cuProfilerStart, E = the next cuProfilerStop
 *   time:T0-T1   S = first record starting at or after T0, E = last record
 *                starting at or before T1
 * (a range that never ends runs to the end of the capture), and the record
 * Q whose Snapshot gives the memory at the start: the BeforeLaunch snapshot
 * of launch A; for NVTX and profiler ranges the RangeStart snapshot the
 * recorder wrote on the same thread just before S (snapshot=range:NAME);
 * for a time window the first BeforeLaunch/RangeStart/Manual snapshot
 * inside it. With a recorded snapshot the cut is Q and the kept records are
 * (Q, E]; with --replay the cut is S and the kept records are [S, E]. */
#include <cupti_driver_cbid.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive_internal.h"

void cucap_derive_options_init(cucap_derive_options *o) { memset(o, 0, sizeof *o); }

typedef struct tr_find {
  uint64_t start, end, snap;
  /* matching the end */
  uint32_t tid;
  uint64_t domain, range_id;
  int level, is_push;
  uint64_t seen; /* occurrences so far */
  cucap_map pend;   /* tid -> RangeStart snapshot position + 1 not yet claimed */
} tr_find;

static int is_profiler(const cucap_fb_record *rec, int stop) {
  uint32_t c = cucap_fb_record_call(rec);
  return cucap_fb_record_result(rec) == 0 &&
         (stop ? c == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop
               : c == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
}

/* The snapshot the recorder took for a range starting at record i on tid. */
static uint64_t claim(tr_find *f, uint32_t tid) {
  uint64_t q1 = 0;
  cucap_map_del(&f->pend, (uint64_t)tid + 1, &q1);
  return q1 ? q1 - 1 : DV_NONE;
}

static void locate_one(tr_find *f, const cucap_range_spec *r, const cucap_fb_record *rec,
                       uint64_t i) {
  int bt = cucap_fb_record_body_type(rec);
  uint32_t tid = cucap_fb_record_tid(rec);
  if (bt == CUCAP_FB_BODY_SNAPSHOT) {
    const cucap_fb_snapshot *s = cucap_fb_record_body_as_snapshot(rec);
    int reason = cucap_fb_snapshot_reason(s);
    if (reason == CUCAP_FB_SNAPSHOTREASON_RANGESTART)
      (void)sh_map_put(&f->pend, (uint64_t)tid + 1, i + 1);
    if (r->kind == CUCAP_RANGE_LAUNCH && reason == CUCAP_FB_SNAPSHOTREASON_BEFORELAUNCH &&
        cucap_fb_snapshot_launch_index(s) == r->first && f->start == DV_NONE)
      f->snap = i;
    if (r->kind == CUCAP_RANGE_TIME && f->start != DV_NONE && f->snap == DV_NONE &&
        cucap_fb_record_t_enter(rec) <= r->last &&
        (reason == CUCAP_FB_SNAPSHOTREASON_BEFORELAUNCH ||
         reason == CUCAP_FB_SNAPSHOTREASON_RANGESTART || reason == CUCAP_FB_SNAPSHOTREASON_MANUAL))
      f->snap = i;
    return;
  }
  /* range-start events claim the snapshot of their thread */
  const cucap_fb_nvtx *nv = bt == CUCAP_FB_BODY_NVTX ? cucap_fb_record_body_as_nvtx(rec) : NULL;
  int op = nv ? cucap_fb_nvtx_op(nv) : -1;
  int starts = op == CUCAP_FB_NVTXOP_PUSH || op == CUCAP_FB_NVTXOP_RANGESTART ||
               is_profiler(rec, 0);
  uint64_t attached = starts ? claim(f, tid) : DV_NONE;

  switch (r->kind) {
  case CUCAP_RANGE_LAUNCH:
    if (bt == CUCAP_FB_BODY_LAUNCH && cucap_fb_record_result(rec) == 0) {
      const cucap_fb_launch *l = cucap_fb_record_body_as_launch(rec);
      uint64_t li = cucap_fb_launch_launch_index(l);
      if (cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_HOSTFUNC)
        break;
      if (li == r->first && f->start == DV_NONE)
        f->start = i;
      else if (f->start != DV_NONE && f->end == DV_NONE && li > r->last)
        f->end = i - 1;
    }
    break;
  case CUCAP_RANGE_NVTX:
    if (f->start == DV_NONE && starts && nv) {
      const char *m = cucap_fb_nvtx_message(nv);
      if (!m || strcmp(m, r->name) != 0)
        break;
      if (f->seen++ != r->nth)
        break;
      f->start = i;
      f->snap = attached;
      f->tid = tid;
      f->domain = cucap_fb_nvtx_domain(nv);
      f->is_push = op == CUCAP_FB_NVTXOP_PUSH;
      f->level = cucap_fb_nvtx_level(nv);
      f->range_id = cucap_fb_nvtx_range_id(nv);
    } else if (f->start != DV_NONE && f->end == DV_NONE && nv) {
      if (f->is_push && op == CUCAP_FB_NVTXOP_POP && tid == f->tid &&
          cucap_fb_nvtx_domain(nv) == f->domain && cucap_fb_nvtx_level(nv) == f->level)
        f->end = i;
      else if (!f->is_push && op == CUCAP_FB_NVTXOP_RANGEEND &&
               cucap_fb_nvtx_range_id(nv) == f->range_id)
        f->end = i;
    }
    break;
  case CUCAP_RANGE_PROFILER:
    if (f->start == DV_NONE && is_profiler(rec, 0)) {
      if (f->seen++ == r->nth) {
        f->start = i;
        f->snap = attached;
      }
    } else if (f->start != DV_NONE && f->end == DV_NONE && is_profiler(rec, 1)) {
      f->end = i;
    }
    break;
  case CUCAP_RANGE_TIME: {
    uint64_t t = cucap_fb_record_t_enter(rec);
    if (f->start == DV_NONE && t >= r->first && t <= r->last)
      f->start = i;
    if (f->start != DV_NONE && t <= r->last)
      f->end = i;
    break;
  }
  }
}

static cucap_status locate(dv_plan *p, const cucap_range_spec *r, tr_find *f) {
  memset(f, 0, sizeof *f);
  f->start = f->end = f->snap = DV_NONE;
  CUCAP_FORWARD(cucap_reader_rewind(p->r));
  const cucap_fb_record *rec;
  const void *buf;
  size_t size;
  cucap_status st = CUCAP_OK;
  for (uint64_t i = 0; i < p->nrecords; i++) {
    if ((st = dv_next(p, &rec, &buf, &size)) != CUCAP_OK)
      break;
    locate_one(f, r, rec, i);
    if (r->kind != CUCAP_RANGE_TIME && f->end != DV_NONE)
      break;
  }
  cucap_map_free(&f->pend);
  if (st == CUCAP_END)
    st = CUCAP_ERR_TRUNCATED;
  if (st == CUCAP_OK && f->start != DV_NONE && f->end == DV_NONE)
    f->end = p->nrecords - 1; /* never closed: to the end */
  if (f->snap != DV_NONE && f->start != DV_NONE && f->snap > f->start &&
      r->kind != CUCAP_RANGE_TIME)
    f->snap = DV_NONE;
  return st;
}

static cucap_status damaged(cucap_derive_report *rep, cucap_reader *r, cucap_status st) {
  cucap_reader_recovery rv;
  cucap_reader_recovery_get(r, &rv);
  rv.problem[sizeof rv.problem - 1] = 0;
  if (st == CUCAP_ERR_NOMEM)
    return dv_fail(rep, st, CUCAP_ERR_NOMEM, "out of memory");
  if (st == CUCAP_ERR_IO)
    return dv_fail(rep, st, CUCAP_ERR_IO, "read error");
  return dv_fail(rep, st, CUCAP_ERR_CORRUPT, "the capture is damaged or truncated (%s): %s",
                 rv.problem[0] ? rv.problem : "no valid end",
                 "trim and extract need a complete capture");
}

/* One trim: what its phases share. */
typedef struct tr_job {
  cucap_reader *src;
  const cucap_range_spec *range;
  const cucap_derive_options *o;
  cucap_derive_report *rep;
  const char *out_path;
  char sel[256];
  dv_plan p;
  sh_rec_copy snap;
  cucap_writer *w;
} tr_job;

/* The range's records, and where memory at its start comes from (the
 * recorded snapshot or the replay). */
static cucap_status find_range(tr_job *j) {
  dv_plan *p = &j->p;
  cucap_derive_report *rep = j->rep;
  const cucap_range_spec *range = j->range;
  cucap_status st = dv_count(p);
  tr_find f;
  if (st != CUCAP_OK)
    return damaged(rep, j->src, st);
  rep->source_records = p->nrecords;
  if ((st = locate(p, range, &f)) != CUCAP_OK)
    return damaged(rep, j->src, st);
  if (f.start == DV_NONE || f.end < f.start)
    return dv_fail(rep, CUCAP_ERR_NOT_FOUND, CUCAP_ERR_INVALID_ARG, "range %s is not in the capture", j->sel);
  if (j->o->replay) {
    p->cut = p->first = f.start;
    rep->state = CUCAP_FB_STATESOURCE_REPLAY;
  } else if (f.snap != DV_NONE) {
    p->snap_rec = p->cut = f.snap;
    p->first = f.snap + 1;
    rep->state = CUCAP_FB_STATESOURCE_RECORDEDSNAPSHOT;
  } else {
    return dv_fail(rep, CUCAP_ERR_NOT_FOUND, CUCAP_ERR_INVALID_ARG,
                   "no snapshot of device memory was recorded at the start of %s: record "
                   "with --snapshot=%s, or use trim --replay (replays up to the range on a GPU)",
                   j->sel,
                   range->kind == CUCAP_RANGE_LAUNCH ? "launch:N (N = the first launch)"
                   : range->kind == CUCAP_RANGE_NVTX ? "range:NAME@K"
                   : range->kind == CUCAP_RANGE_PROFILER ? "range:cuProfilerStart@K"
                                                         : "launch:N or range:NAME");
  }
  p->last = f.end;
  return CUCAP_OK;
}

/* The kept range and the state prefix it uses. */
static cucap_status plan_state(tr_job *j) {
  dv_plan *p = &j->p;
  cucap_status st;
  for (uint64_t i = p->first; i <= p->last; i++)
    p->keep[i] = DV_RANGE;
  p->all_streams = 1;
  dv_images_setup(p, j->o->keep_all_archs);
  if ((st = dv_scan_state(p)) != CUCAP_OK)
    return damaged(j->rep, j->src, st);
  if (p->capturing)
    return dv_fail(j->rep, CUCAP_ERR_UNSUPPORTED, CUCAP_ERR_INVALID_ARG,
                   "range %s starts while a stream is being captured into a graph: choose a "
                   "range that starts outside stream capture", j->sel);
  if ((st = dv_scan_uses(p)) != CUCAP_OK)
    return damaged(j->rep, j->src, st);
  dv_mark_state(p);
  if ((st = dv_mark_stacks(p)) != CUCAP_OK)
    return damaged(j->rep, j->src, st);
  return CUCAP_OK;
}

/* The regions memory at the range's start is written into. */
static cucap_status collect_regions(tr_job *j) {
  dv_plan *p = &j->p;
  cucap_status st;
  if (p->snap_rec != DV_NONE) {
    if ((st = dv_read_at(p, p->snap_rec, &j->snap)) != CUCAP_OK)
      return damaged(j->rep, j->src, st);
    st = dv_regions_from_snapshot(p, cucap_fb_record_body_as_snapshot(j->snap.rec), &p->regions,
                                  &p->region_ctx, 0);
  } else {
    st = dv_regions_from_allocs(p, &p->regions, &p->region_ctx, 0);
  }
  if (st != CUCAP_OK)
    return dv_fail(j->rep, st, CUCAP_ERR_NOMEM, "out of memory");
  return CUCAP_OK;
}

static cucap_status write_output(tr_job *j) {
  dv_plan *p = &j->p;
  const cucap_derive_options *o = j->o;
  cucap_derive_report *rep = j->rep;
  cucap_status st;
  dv_origin org = {"trim", o->source_path, o->selection ? o->selection : j->sel, rep->state,
                   dv_state_count(p), p->seq_first == UINT64_MAX ? 0 : p->seq_first,
                   p->seq_last, p->launches ? p->launch_first : 0, p->launch_last, p->cut};
  CUCAP_FORWARD(dv_output_open(p, o, j->out_path, &org, rep, &j->w));
  if (o->replay) {
    char msg[512] = "";
    st = dv_replay_read(o, j->w, p->cut, p->regions.data, p->regions.n, NULL, 0, NULL, msg,
                        sizeof msg);
    if (st != CUCAP_OK)
      return dv_fail(rep, st, dv_as_replay(st),
                     "replaying up to record %" PRIu64 ": %s", p->cut, msg);
  }
  if ((st = dv_write(p, j->w, &rep->records_written)) != CUCAP_OK) {
    if (st == CUCAP_ERR_NOMEM || st == CUCAP_ERR_IO)
      return dv_fail(rep, st, dv_as_write(st), "writing %s: %s", j->out_path, cucap_status_str(st));
    return damaged(rep, j->src, st);
  }
  CUCAP_FORWARD(dv_output_close(p, j->w, j->out_path, &org, rep));
  rep->launches = p->launches;
  rep->launch_first = org.launch_first;
  rep->launch_last = org.launch_last;
  return CUCAP_OK;
}

/* The phases in order; the first that fails ends the trim. */
static cucap_status trim(tr_job *j) {
  CUCAP_FORWARD(find_range(j));
  CUCAP_FORWARD(plan_state(j));
  CUCAP_FORWARD(collect_regions(j));
  return write_output(j);
}

cucap_status cucap_trim(cucap_reader *src, const cucap_range_spec *range,
                        const char *out_path, const cucap_derive_options *o,
                        cucap_derive_report *rep) {
  memset(rep, 0, sizeof *rep);
  cucap_derive_options defo;
  if (!o) {
    cucap_derive_options_init(&defo);
    o = &defo;
  }
  tr_job j;
  memset(&j, 0, sizeof j);
  j.src = src;
  j.range = range;
  j.o = o;
  j.rep = rep;
  j.out_path = out_path;
  cucap_range_format(range, j.sel, sizeof j.sel);
  dv_plan_init(&j.p, src);
  cucap_status st = trim(&j);
  cucap_writer_destroy(j.w);
  if (j.w && st != CUCAP_OK)
    remove(out_path); /* no half-written capture is left behind */
  free(j.snap.buf);
  dv_plan_free(&j.p);
  return st;
}
