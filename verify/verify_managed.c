/* verify_managed.c - managed memory the program's host code may have
 * written while GPU work on it was in flight (verify_internal.h; the
 * verify observer calls it for every record).
 *
 * The recorder snapshots managed memory when the program synchronises
 * (Snapshot{SyncPoint}, interpose/custom_managed.c): what the program then
 * reads. On a device with concurrent managed access the host may update that
 * memory while a kernel does (systemWideAtomics: host atomics on the same
 * counters as the kernel's system-scope atomics), so the snapshot holds host
 * and GPU contributions, and a replay - which runs no host code - only the
 * GPU's. The recorder cannot tell a host write from a GPU write without
 * watching the program's memory (page protection or dirty bits would change
 * the program), so verify judges from what the record stream shows:
 *
 *   a SyncPoint region is *host-concurrent* when, between the return of the
 *   first launch whose parameters point into its managed allocation (or a
 *   graph launch, whose accesses are unknown) and the synchronisation that
 *   ends that GPU work (the program's next synchronising call on the
 *   snapshot's thread; the snapshot itself for one taken at exit), the
 *   program spent at least VO_HOST_WINDOW_NS outside CUDA calls: host code
 *   ran that long while the GPU worked on the memory.
 *
 * Bytes of such a region that differ from the recording in every pass are
 * reported as written by the program's host code (not reproducible by a
 * replay) with that evidence, counted apart from matched bytes and never as
 * a mismatch (--strict: mismatches). Everything else - a managed region the
 * program synchronised on right after its GPU work, the usual pattern - is
 * verified as before, so a GPU-side corruption there still fails. The rule
 * errs both ways at its edges, and says so: a program that computes on the
 * host for a millisecond or more between a launch and its synchronisation
 * gets that launch's managed results reported as host-written where they
 * differ, and one whose host code writes managed memory concurrently for
 * less than that gets a mismatch. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_reader.h"
#include "cucap_vec.h"
#include "verify_internal.h"

#define VO_HOST_WINDOW_NS 1000000ull /* 1 ms of host code while the GPU works */

typedef struct vo_mrange {     /* a managed allocation of this pass */
  uint64_t addr, size;
  uint64_t t_start;            /* t_exit of the first launch on it since the last sync (0: none) */
  uint64_t cuda_at_start;      /* v->mg_cuda_ns then */
  uint64_t launch_index;       /* that launch (CUCAP_REPLAY_NO_LAUNCH: a graph launch) */
  uint32_t name;               /* its kernel's name id (VO_NO_NAME: none) */
} vo_mrange;

typedef struct vo_mpend {      /* a SyncPoint region waiting for its sync call */
  uint64_t rec_index, t_snapshot;
  uint32_t region, tid;
  size_t range;
} vo_mpend;

struct vo_managed {
  vo_mrange *r;
  size_t n, cap;
  vo_mpend *p;
  size_t np, capp;
  uint64_t cuda_ns;            /* time the program spent inside CUDA calls, this pass */
};

static struct vo_managed *vo_mg(vo_verifier *v) {
  if (!v->mg)
    v->mg = calloc(1, sizeof *v->mg);
  return v->mg;
}

static long vo_mfind(const struct vo_managed *m, uint64_t a) {
  for (size_t i = 0; i < m->n; i++)
    if (a - m->r[i].addr < m->r[i].size)
      return (long)i;
  return -1;
}

static void vo_mstart(struct vo_managed *m, size_t i, uint64_t t_exit, uint64_t li,
                      uint32_t name) {
  vo_mrange *r = &m->r[i];
  if (r->t_start)
    return; /* GPU work on it already in flight: the window began then */
  r->t_start = t_exit ? t_exit : 1;
  r->cuda_at_start = m->cuda_ns;
  r->launch_index = li;
  r->name = name;
}

/* A pending region's window ends at t_end: its check (if the region
 * differed) gets the evidence when host code ran long enough in it. */
static void vo_mresolve_one(vo_verifier *v, const vo_mpend *p, uint64_t t_end) {
  struct vo_managed *m = v->mg;
  const vo_mrange *r = &m->r[p->range];
  uint64_t span = t_end > r->t_start ? t_end - r->t_start : 0;
  uint64_t in_cuda = m->cuda_ns - r->cuda_at_start;
  uint64_t host = span > in_cuda ? span - in_cuda : 0;
  uint64_t ix = 0;
  if (host < VO_HOST_WINDOW_NS || !cucap_map_get(&v->seen, vo_key(p->rec_index, p->region), &ix) ||
      !ix)
    return;
  char who[96] = "a graph launch";
  if (r->launch_index != CUCAP_REPLAY_NO_LAUNCH) {
    char sn[72] = "?";
    if (r->name < v->nnames)
      vo_short_name(v->names[r->name].s, sn, sizeof sn);
    snprintf(who, sizeof who, "launch %" PRIu64 " (%s)", r->launch_index, sn);
  }
  snprintf(v->chk[ix - 1].hostw, sizeof v->chk[ix - 1].hostw,
           "managed memory the program's host code may have written concurrently: "
           "%.1f ms of host code ran while %s worked on it (a replay runs none)",
           (double)host / 1e6, who);
}

/* The pending regions of thread tid end their window at t_end. */
static void vo_mresolve(vo_verifier *v, uint32_t tid, uint64_t t_end) {
  struct vo_managed *m = v->mg;
  size_t k = 0;
  for (size_t i = 0; i < m->np; i++) {
    if (m->p[i].tid != tid)
      m->p[k++] = m->p[i];
    else
      vo_mresolve_one(v, &m->p[i], t_end);
  }
  m->np = k;
}

/* Launch arguments: every aligned 8-byte word pointing into a managed
 * allocation starts that allocation's window. */
static void vo_mlaunch(vo_verifier *v, const cucap_replay_op *op, const cucap_fb_launch *l,
                       uint64_t t_exit) {
  struct vo_managed *m = v->mg;
  uint64_t n = 0;
  uint8_t *a = NULL;
  if (cucap_reader_launch_args_size(v->r, l, &n) == CUCAP_OK && n <= CUCAP_READER_MAX_PARAM_BYTES &&
      (a = malloc(n ? n : 1)) && cucap_reader_launch_args_read(v->r, l, a, n) != CUCAP_OK) {
    free(a);
    a = NULL;
  }
  uint32_t name = op->kernel ? vo_intern(v, op->kernel, 1) : VO_NO_NAME;
  for (size_t o = 0; a && o + 8 <= n; o += 8) {
    uint64_t x;
    memcpy(&x, a + o, 8);
    long i = vo_mfind(m, x);
    if (i >= 0)
      vo_mstart(m, (size_t)i, t_exit, op->launch_index, name);
  }
  free(a);
}

void vo_managed_op(vo_verifier *v, const cucap_replay_op *op) {
  struct vo_managed *m = vo_mg(v);
  if (!m)
    return;
  const cucap_fb_record *rec = op->record;
  uint64_t t_enter = cucap_fb_record_t_enter(rec), t_exit = cucap_fb_record_t_exit(rec);
  uint32_t tid = cucap_fb_record_tid(rec);
  int sync = 0;
  /* the program's own call: time inside CUDA, not host code. A launch's
   * time lies before the window it starts (at its t_exit): counted first,
   * else a launch that took a few ms (a loaded machine, ASan) ate the host
   * time of its own window and host writes were judged mismatches */
  uint64_t own = op->seq && t_exit > t_enter ? t_exit - t_enter : 0;
  int starts = op->body_type == CUCAP_FB_BODY_LAUNCH || op->body_type == CUCAP_FB_BODY_GRAPH;
  if (starts)
    m->cuda_ns += own;
  switch (op->body_type) {
  case CUCAP_FB_BODY_ALLOC: {
    const cucap_fb_alloc *a = cucap_fb_record_body_as_alloc(rec);
    if (cucap_fb_alloc_kind(a) != CUCAP_FB_ALLOCKIND_MANAGED || !cucap_fb_alloc_size(a))
      break;
    if (!CUCAP_VEC_RESERVE(m->r, m->cap, m->n + 1, 16))
      break;
    memset(&m->r[m->n], 0, sizeof m->r[0]);
    m->r[m->n].addr = cucap_fb_alloc_address(a);
    m->r[m->n++].size = cucap_fb_alloc_size(a);
    break;
  }
  case CUCAP_FB_BODY_LAUNCH:
    if (m->n && op->launch_index != CUCAP_REPLAY_NO_LAUNCH)
      vo_mlaunch(v, op, cucap_fb_record_body_as_launch(rec), t_exit);
    break;
  case CUCAP_FB_BODY_GRAPH: { /* a graph's managed accesses are unknown */
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    if (g && cucap_fb_graph_op(g) == CUCAP_FB_GRAPHOP_LAUNCH)
      for (size_t i = 0; i < m->n; i++)
        vo_mstart(m, i, t_exit, CUCAP_REPLAY_NO_LAUNCH, VO_NO_NAME);
    break;
  }
  case CUCAP_FB_BODY_CONTEXT:
    sync = cucap_fb_context_op(cucap_fb_record_body_as_context(rec)) ==
           CUCAP_FB_CONTEXTOP_SYNCHRONIZE;
    break;
  case CUCAP_FB_BODY_STREAM: {
    int so = cucap_fb_stream_op(cucap_fb_record_body_as_stream(rec));
    sync = so == CUCAP_FB_STREAMOP_SYNCHRONIZE || so == CUCAP_FB_STREAMOP_QUERY;
    break;
  }
  case CUCAP_FB_BODY_EVENT: {
    int eo = cucap_fb_event_op(cucap_fb_record_body_as_event(rec));
    sync = eo == CUCAP_FB_EVENTOP_SYNCHRONIZE || eo == CUCAP_FB_EVENTOP_QUERY;
    break;
  }
  case CUCAP_FB_BODY_SNAPSHOT: {
    const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
    if (cucap_fb_snapshot_reason(sn) != CUCAP_FB_SNAPSHOTREASON_SYNCPOINT)
      break;
    for (size_t i = 0; i < cucap_fb_snapshot_regions_len(sn); i++) {
      long r = vo_mfind(m, cucap_fb_mem_region_address(cucap_fb_snapshot_regions_at(sn, i)));
      if (r < 0 || !m->r[r].t_start)
        continue;
      if (!CUCAP_VEC_RESERVE(m->p, m->capp, m->np + 1, 16))
        break;
      m->p[m->np++] = (vo_mpend){op->rec_index, t_enter, (uint32_t)i, tid, (size_t)r};
    }
    break;
  }
  default:
    break;
  }
  if (sync) { /* the GPU work the snapshots before it waited for ends here */
    if (m->np)
      vo_mresolve(v, tid, t_enter);
    for (size_t i = 0; i < m->n; i++)
      m->r[i].t_start = 0;
  }
  if (!starts)
    m->cuda_ns += own;
}

void vo_managed_pass_end(vo_verifier *v) {
  struct vo_managed *m = v->mg;
  if (!m)
    return;
  /* snapshots with no synchronising call after them (taken at exit): the
   * snapshot's own time ends the window */
  for (size_t i = 0; i < m->np; i++)
    vo_mresolve_one(v, &m->p[i], m->p[i].t_snapshot);
  m->np = 0;
  m->n = 0;
  m->cuda_ns = 0;
}

void vo_managed_free(vo_verifier *v) {
  if (!v->mg)
    return;
  free(v->mg->r);
  free(v->mg->p);
  free(v->mg);
  v->mg = NULL;
}
