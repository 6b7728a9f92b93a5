/* replay_capture.c - stream captures in replay.
 *
 * A capture is re-done on the driver when that reproduces the recorded
 * graph. It cannot when the program changed the graph by hand while
 * capturing (cuGraphAddNode / cuGraphConditionalHandleCreate on the
 * capturing graph, cuStreamUpdateCaptureDependencies - the recorded
 * topology then holds nodes no stream operation made), when the captured
 * graph holds conditional or memory nodes, or when the capture goes into an
 * existing graph (cuStreamBeginCaptureToGraph, e.g. a conditional body). The
 * scan (rp_capture_scan) finds those captures by their BeginCapture record;
 * they are replayed dry: nothing captured is executed, the streams that
 * join the capture (by waiting on an event recorded in it) are followed, and
 * the graph is rebuilt from its recorded topology when it is instantiated
 * (replay_graph_exec.c). HtoD payloads captured dry are kept for the
 * rebuilt graph's copy nodes.
 *
 * Captures the program never ended (a capture file cut short) are ended at
 * the end of each pass: the final synchronisation is illegal while a stream
 * captures. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_graph.h"

/* ---- the scan ----------------------------------------------------------------- */

/* Node types that a re-capture does not reproduce. */
static int cap_needs_rebuild(const cucap_fb_graph *g) {
  for (size_t i = 0; i < cucap_fb_graph_nodes_len(g); i++) {
    int t = cucap_fb_graph_node_type(cucap_fb_graph_nodes_at(g, i));
    if (t == CUCAP_FB_GRAPHNODETYPE_CONDITIONAL || t == CUCAP_FB_GRAPHNODETYPE_MEMALLOC ||
        t == CUCAP_FB_GRAPHNODETYPE_MEMFREE)
      return 1;
  }
  return 0;
}

/* Graph allocations become recorded device ranges: placed at their
 * addresses like cuMemAlloc'ed ones (a rebuilt alloc node is then empty). */
static void cap_note_allocs(rp_state *R, const cucap_fb_graph *g) {
  for (size_t i = 0; i < cucap_fb_graph_nodes_len(g); i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    if (cucap_fb_graph_node_type(n) != CUCAP_FB_GRAPHNODETYPE_MEMALLOC)
      continue;
    const cucap_fb_alloc *a = cucap_fb_graph_node_alloc(n);
    if (a && cucap_fb_alloc_address(a))
      rp_mem_add_recorded(&R->mem, cucap_fb_alloc_address(a), cucap_fb_alloc_size(a));
  }
}

void rp_capture_scan(rp_state *R, const cucap_fb_record *rec, uint64_t idx) {
  int body = cucap_fb_record_body_type(rec);
  if (body != CUCAP_FB_BODY_STREAM && body != CUCAP_FB_BODY_GRAPH)
    return;
  rp_graphs *gs = rp_graphs_get(R);
  if (!gs)
    return;
  uint64_t v = 0;
  if (body == CUCAP_FB_BODY_GRAPH) {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    int op = cucap_fb_graph_op(g);
    cap_note_allocs(R, g);
    if (op == CUCAP_FB_GRAPHOP_LAUNCH && cucap_fb_graph_payloads_len(g))
      cucap_map_put(&gs->exec_payloads, cucap_fb_graph_exec(g), 1);
    if (cucap_fb_record_seq(rec) == 0) /* the topology of the capture being ended */
      cucap_map_put(&gs->scan_rebuild, cucap_fb_record_tid(rec) + 2, cap_needs_rebuild(g));
    else if (op == CUCAP_FB_GRAPHOP_ADDNODE || op == CUCAP_FB_GRAPHOP_CONDHANDLE)
      cucap_map_put(&gs->scan_added, cucap_fb_graph_graph(g), idx + 1);
    return;
  }
  const cucap_fb_stream *s = cucap_fb_record_body_as_stream(rec);
  uint64_t h = cucap_fb_stream_handle(s);
  switch (cucap_fb_stream_op(s)) {
  case CUCAP_FB_STREAMOP_BEGINCAPTURE:
    cucap_map_put(&gs->scan_open, h, idx + 1);
    if (cucap_fb_stream_graph(s)) /* into an existing graph: always dry */
      cucap_map_put(&gs->dry_begin, idx, 1);
    break;
  case CUCAP_FB_STREAMOP_ENDCAPTURE: {
    uint64_t b = 0, added = 0, rebuild = 0;
    if (!cucap_map_get(&gs->scan_open, h, &b) || !b)
      break;
    cucap_map_del(&gs->scan_open, h, NULL);
    uint64_t tid = cucap_fb_record_tid(rec) + 2;
    cucap_map_get(&gs->scan_rebuild, tid, &rebuild);
    cucap_map_del(&gs->scan_rebuild, tid, NULL);
    if (rebuild || (cucap_map_get(&gs->scan_added, cucap_fb_stream_graph(s), &added) && added > b))
      cucap_map_put(&gs->dry_begin, b - 1, 1);
    break;
  }
  default:
    (void)v;
    break;
  }
}

/* ---- dry captures -------------------------------------------------------------- */

int rp_capture_begin_dry(rp_state *R, const cucap_fb_record *rec, const cucap_fb_stream *s) {
  (void)rec;
  rp_graphs *gs = R->gs;
  uint64_t v = 0;
  if (!gs || !cucap_map_get(&gs->dry_begin, R->rec_index, &v))
    return 0;
  uint64_t h = cucap_fb_stream_handle(s);
  cucap_map_put(&gs->dry, h, h); /* the origin of its own capture */
  CUCAP_DEBUG("replay: capture on stream 0x%" PRIx64 " (record %" PRIu64 ") replayed dry; "
              "its graph is rebuilt from the recorded topology", h, R->rec_index);
  return 1;
}

static void cap_drop_origin(cucap_map *m, uint64_t origin) {
  size_t pos = 0;
  uint64_t k = 0, v = 0;
  while (cucap_map_next(m, &pos, &k, &v))
    if (v == origin)
      cucap_map_del(m, k, NULL);
}

int rp_capture_end_dry(rp_state *R, const cucap_fb_stream *s) {
  rp_graphs *gs = R->gs;
  uint64_t origin = 0, live = 0;
  if (!gs || !gs->dry.count || !cucap_map_get(&gs->dry, cucap_fb_stream_handle(s), &origin)) {
    if (gs && !cucap_map_get(&gs->capturing, cucap_fb_stream_handle(s), &live)) {
      /* no capture of ours is open there: its beginning was not recorded
       * (cuStreamBeginCaptureToGraph under an older cucap) */
      rp_skip(R, "cuStreamEndCapture without its BeginCapture");
      return 2;
    }
    return 0;
  }
  cap_drop_origin(&gs->dry, origin);
  cap_drop_origin(&gs->dry_events, origin);
  /* the recorded graph stays unmapped: its instantiation rebuilds it */
  return 1;
}

void rp_capture_open(rp_state *R, uint64_t rec_stream, CUstream live) {
  rp_graphs *gs = rp_graphs_get(R);
  if (gs)
    cucap_map_put(&gs->capturing, rec_stream, (uint64_t)(uintptr_t)live);
}

void rp_capture_closed(rp_state *R, uint64_t rec_stream) {
  if (R->gs)
    cucap_map_del(&R->gs->capturing, rec_stream, NULL);
}

static rp_stash *cap_stash_new(rp_graphs *gs) {
  if (!CUCAP_VEC_RESERVE(gs->stash, gs->capstash, gs->nstash + 1, 16))
    return NULL;
  rp_stash *e = &gs->stash[gs->nstash++];
  memset(e, 0, sizeof *e);
  return e;
}

static void cap_stash(rp_state *R, const cucap_fb_memcpy *c) {
  if (!cucap_fb_memcpy_has_payload(c))
    return;
  rp_stash *e = cap_stash_new(R->gs);
  if (!e)
    return;
  e->src = cucap_fb_memcpy_src(c);
  e->size = cucap_fb_memcpy_size(c);
  e->data = rp_h(cucap_fb_memcpy_payload(c));
}

/* A copy to the host: a 1D one gets the page-locked buffer (kept to the end
 * of the pass) that the rebuilt graph's node will write; returned for the
 * observers. Copies with a geometry are only noted (the node's layout is
 * not matched: not verified). */
static void *cap_stash_dtoh(rp_state *R, const cucap_fb_memcpy *c) {
  rp_stash *e = cap_stash_new(R->gs);
  if (!e)
    return NULL;
  e->dtoh = 1;
  e->src = cucap_fb_memcpy_src(c);
  e->dst = cucap_fb_memcpy_dst(c);
  e->size = cucap_fb_memcpy_size(c);
  /* no copy from the device is larger than its memory (a recorded size
   * beyond it is not replayable: no buffer, the copy is not verified) */
  if (!cucap_fb_memcpy_geometry(c) && e->size && e->size <= ((uint64_t)1 << 34) &&
      (!R->dev_mem || e->size <= R->dev_mem))
    e->host = rp_capture_host_buffer(R, e->size);
  return e->host;
}

const rp_stash *rp_capture_stash_find(rp_state *R, uint64_t src, uint64_t size) {
  rp_graphs *gs = R->gs;
  for (size_t i = gs ? gs->nstash : 0; i-- > 0;) /* the latest copy from there */
    if (!gs->stash[i].dtoh && gs->stash[i].src == src && gs->stash[i].size >= size)
      return &gs->stash[i];
  return NULL;
}

const rp_stash *rp_capture_dtoh_find(rp_state *R, uint64_t src, uint64_t dst, uint64_t size) {
  rp_graphs *gs = R->gs;
  for (size_t i = gs ? gs->nstash : 0; i-- > 0;)
    if (gs->stash[i].dtoh && gs->stash[i].src == src && gs->stash[i].dst == dst &&
        gs->stash[i].size == size)
      return &gs->stash[i];
  return NULL;
}

static int cap_swallow(rp_state *R, const cucap_fb_record *rec, void **host);

int rp_capture_swallow(rp_state *R, const cucap_fb_record *rec) {
  void *host = NULL;
  if (!cap_swallow(R, rec, &host))
    return 0;
  rp_obs_captured_dry(R, rec, host);
  return 1;
}

static int cap_swallow(rp_state *R, const cucap_fb_record *rec, void **host) {
  rp_graphs *gs = R->gs;
  if (!gs || !gs->dry.count || cucap_fb_record_result(rec) != 0)
    return 0;
  uint64_t st = 0, origin = 0;
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_LAUNCH:
    st = cucap_fb_launch_stream(cucap_fb_record_body_as_launch(rec));
    break;
  case CUCAP_FB_BODY_MEMCPY: {
    const cucap_fb_memcpy *c = cucap_fb_record_body_as_memcpy(rec);
    st = cucap_fb_memcpy_stream(c);
    if (!cucap_map_get(&gs->dry, st, &origin))
      return 0;
    if (cucap_fb_memcpy_kind(c) == CUCAP_FB_MEMCPYKIND_DTOH)
      *host = cap_stash_dtoh(R, c); /* runs inside the rebuilt graph */
    else
      cap_stash(R, c);
    return 1;
  }
  case CUCAP_FB_BODY_MEMSET:
    st = cucap_fb_memset_stream(cucap_fb_record_body_as_memset(rec));
    break;
  case CUCAP_FB_BODY_ALLOC:
    st = cucap_fb_alloc_stream(cucap_fb_record_body_as_alloc(rec));
    break;
  case CUCAP_FB_BODY_FREE:
    st = cucap_fb_free_stream(cucap_fb_record_body_as_free(rec));
    break;
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    if (cucap_fb_graph_op(g) != CUCAP_FB_GRAPHOP_LAUNCH)
      return 0;
    st = cucap_fb_graph_stream(g);
    break;
  }
  case CUCAP_FB_BODY_EVENT: {
    const cucap_fb_event *e = cucap_fb_record_body_as_event(rec);
    if (cucap_fb_event_op(e) != CUCAP_FB_EVENTOP_RECORD ||
        !cucap_map_get(&gs->dry, cucap_fb_event_stream(e), &origin))
      return 0;
    cucap_map_put(&gs->dry_events, cucap_fb_event_handle(e), origin); /* a fork point */
    return 1;
  }
  case CUCAP_FB_BODY_STREAM: {
    const cucap_fb_stream *s = cucap_fb_record_body_as_stream(rec);
    int op = cucap_fb_stream_op(s);
    uint64_t h = cucap_fb_stream_handle(s);
    if (op == CUCAP_FB_STREAMOP_WAITEVENT &&
        cucap_map_get(&gs->dry_events, cucap_fb_stream_event(s), &origin)) {
      cucap_map_put(&gs->dry, h, origin); /* joins the capture */
      return 1;
    }
    if (op == CUCAP_FB_STREAMOP_ENDCAPTURE || op == CUCAP_FB_STREAMOP_BEGINCAPTURE ||
        op == CUCAP_FB_STREAMOP_CREATE || op == CUCAP_FB_STREAMOP_DESTROY)
      return 0;
    st = h;
    break;
  }
  default:
    return 0;
  }
  return cucap_map_get(&gs->dry, st, &origin);
}

int rp_capture_any(const rp_state *R) {
  return R->capturing || (R->gs && R->gs->dry.count);
}

int rp_capture_end_drop(rp_state *R, CUstream s) {
  CUgraph g = NULL;
  if (!R->d.df.StreamEndCapture || R->d.df.StreamEndCapture(s, &g) != CUDA_SUCCESS)
    return 0;
  if (g && R->d.df.GraphDestroy)
    R->d.df.GraphDestroy(g);
  return 1;
}

size_t rp_captures_close_ctx(rp_state *R, CUcontext ctx) {
  rp_graphs *gs = R->gs;
  if (!gs || !gs->capturing.count || !ctx)
    return 0;
  /* in batches: entries are deleted after the walk, not during it */
  uint64_t recs[64];
  size_t total = 0, n;
  do {
    size_t pos = 0;
    uint64_t k = 0, lv = 0;
    n = 0;
    while (n < sizeof recs / sizeof recs[0] && cucap_map_next(&gs->capturing, &pos, &k, &lv)) {
      if (rp_owner_of(R, lv) != ctx)
        continue;
      rp_capture_end_drop(R, (CUstream)(uintptr_t)lv);
      recs[n++] = k;
    }
    for (size_t i = 0; i < n; i++)
      cucap_map_del(&gs->capturing, recs[i], NULL);
    total += n;
  } while (n == sizeof recs / sizeof recs[0]);
  R->capturing = R->capturing > (int)total ? R->capturing - (int)total : 0;
  return total;
}

size_t rp_captures_close(rp_state *R) {
  rp_graphs *gs = R->gs;
  size_t n = 0;
  if (!gs)
    return 0;
  size_t pos = 0;
  uint64_t lv = 0;
  while (cucap_map_next(&gs->capturing, &pos, NULL, &lv)) {
    rp_capture_end_drop(R, (CUstream)(uintptr_t)lv);
    n++;
  }
  cucap_map_free(&gs->capturing);
  cucap_map_free(&gs->dry);
  cucap_map_free(&gs->dry_events);
  if (n)
    CUCAP_WARN("replay: %zu stream capture(s) still open at the end of the capture file "
               "(the program was cut short while capturing?); ended, their graphs dropped", n);
  R->capturing = 0;
  return n;
}
