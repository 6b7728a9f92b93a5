/* verify_capture.c - the verify observer's checks of DtoH copies captured
 * into graphs (verify_observer.c calls them; verify_internal.h): the
 * replayed bytes arrive whenever the graph runs, and the recorder read the
 * program's bytes after the graph launch as a CopyResult snapshot naming
 * the captured copy - checked at that record (format 1.2: it directly
 * follows the launch), or right after the launch it names (format 1.3
 * launch_seq: the record may follow later launches of the graph). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify_internal.h"

/* A DtoH copy captured into a graph (format 1.2 recorder): its bytes arrive
 * in op->host_data whenever the graph runs; the recorder read the program's
 * bytes after the graph launch and wrote them as a CopyResult snapshot
 * naming the copy's seq, which follows the launch: compared there. */
void vo_captured_copy(vo_verifier *v, const cucap_replay_op *op,
                             const cucap_fb_memcpy *m) {
  if (v->ncap == v->capcap) {
    size_t nc = v->capcap ? v->capcap * 2 : 16;
    vo_capcopy *n = realloc(v->cap, nc * sizeof *n);
    if (!n)
      return;
    v->cap = n;
    v->capcap = nc;
  }
  vo_capcopy *c = &v->cap[v->ncap];
  c->buf = op->host_data;
  c->size = op->host_size;
  c->src = cucap_fb_memcpy_src(m);
  c->stream = cucap_fb_memcpy_stream(m);
  c->checked = 0;
  if (rp_map_put(&v->captured, op->seq, v->ncap + 1))
    v->ncap++;
}

/* Compares a captured copy's replayed bytes with its recorded result: at
 * the CopyResult record (format 1.2: it follows the launch that ran the
 * copy), or right after the graph launch it names (format 1.3 launch_seq;
 * sub: which of that launch's results). */
static void vo_captured_result(vo_verifier *v, const cucap_replay_op *op, uint64_t copy_seq,
                               cucap_hash128 h, uint64_t size, uint32_t sub) {
  uint64_t ix = 0;
  if (!rp_map_get(&v->captured, copy_seq, &ix) || !ix)
    return; /* a copy that ran at its record was checked there */
  vo_capcopy *c = &v->cap[ix - 1];
  c->checked = 1;
  int first = !rp_map_get(&v->seen, vo_key(op->rec_index, sub), NULL);
  if (op->capturing || size != c->size || !vo_reads_blob(v, h, c->size)) {
    if (v->pass == 0)
      v->rep->copies_unverifiable++;
    return;
  }
  if (v->ctx_sync)
    v->ctx_sync(); /* the graph launch that fills the buffer has completed */
  char what[160];
  snprintf(what, sizeof what, "DtoH copy captured into a graph (seq %" PRIu64
           "), result after its graph launch (record %" PRIu64 ")",
           copy_seq, op->rec_index);
  vo_info in = {op->rec_index, sub, VO_COPY, what, c->src, c->size, NULL, h,
                vo_ring_of(v, c->stream, 0)};
  if (!in.near)
    in.near = &v->any;
  if (first)
    v->rep->copies_checked++;
  vo_compare(v, &in, c->buf);
}

void vo_copy_result(vo_verifier *v, const cucap_replay_op *op,
                           const cucap_fb_snapshot *sn) {
  if (cucap_fb_snapshot_regions_len(sn) != 1 || cucap_fb_snapshot_launch_seq(sn))
    return; /* launch_seq: checked after that launch (vo_graph_launch) */
  const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(sn, 0);
  if (!cucap_fb_mem_region_data(g)) {
    uint64_t ix = 0;
    if (rp_map_get(&v->captured, cucap_fb_snapshot_copy_seq(sn), &ix) && ix) {
      v->cap[ix - 1].checked = 1;
      if (v->pass == 0)
        v->rep->copies_unverifiable++;
    }
    return;
  }
  vo_captured_result(v, op, cucap_fb_snapshot_copy_seq(sn),
                     vo_h(cucap_fb_mem_region_data(g)), cucap_fb_mem_region_size(g), 0);
}

/* After a graph launch: the results the recorder read for this launch
 * (format 1.3), wherever their records are. */
void vo_graph_launch(vo_verifier *v, cucap_replay_session *s,
                            const cucap_replay_op *op) {
  uint64_t cs, size;
  cucap_hash128 h;
  for (uint32_t k = 0;
       cucap_replay_session_graph_copy_result(s, op->seq, k, &cs, &h, &size); k++)
    vo_captured_result(v, op, cs, h, size, k + 1);
}

