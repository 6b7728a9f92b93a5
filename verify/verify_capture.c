/* verify_capture.c - the verify observer's checks of copies to the host
 * that run inside graphs (verify_observer.c calls them; verify_internal.h):
 * the replayed bytes arrive whenever the graph runs, and the recorder read
 * the program's bytes after the graph launch as a CopyResult snapshot -
 * naming the captured copy (format 1.2: it directly follows the launch), or
 * the launch itself (format 1.3 launch_seq: the record may follow later
 * launches of the graph), with the host address it read. Copy nodes of
 * graphs the program built with the graph API (and clones) have results of
 * that kind too (the recorder registers them at instantiation); the
 * replay's buffer for them is the rebuilt exec's
 * (cucap_replay_session_graph_host_buffer), for a re-captured copy the one
 * given with its captured Memcpy record.
 *
 * Host nodes. The recorder reads a result once the whole launch has
 * completed, so a host node of the graph that may run after the copy (one
 * that is not an ancestor of the copy node) and can reach its destination
 * (its userData, or a pointer among the first 64 bytes userData points to,
 * lies in it: format 1.4 host_refs; without them, any host node may) may
 * have changed the bytes - simpleCudaGraphs' callback prints the copied sum
 * and zeroes it - and a replay runs no host code. Such a copy is still
 * compared; where it differs in every pass, the bytes are reported as
 * written by the program's host code (not reproducible by a replay), not as
 * a mismatch; --strict makes them mismatches. A host node that reaches the
 * destination only through globals is not seen: its copy's difference is a
 * mismatch. The topology comes from the Instantiate / ExecUpdate records
 * (vo_graph_topology). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_reader.h"
#include "cucap_vec.h"
#include "verify_internal.h"

/* A DtoH copy captured into a graph (format 1.2 recorder): its bytes arrive
 * in op->host_data whenever the graph runs; the recorder read the program's
 * bytes after the graph launch and wrote them as a CopyResult snapshot
 * naming the copy's seq, which follows the launch: compared there. */
void vo_captured_copy(vo_verifier *v, const cucap_replay_op *op,
                             const cucap_fb_memcpy *m) {
  if (!CUCAP_VEC_RESERVE(v->cap, v->capcap, v->ncap + 1, 16))
    return;
  vo_capcopy *c = &v->cap[v->ncap];
  c->buf = op->host_data;
  c->size = op->host_size;
  c->src = cucap_fb_memcpy_src(m);
  c->stream = cucap_fb_memcpy_stream(m);
  c->checked = 0;
  if (cucap_map_put(&v->captured, op->seq, v->ncap + 1))
    v->ncap++;
}

/* Compares a graph copy's replayed bytes (buf) with its recorded result:
 * at the CopyResult record (format 1.2: it follows the launch that ran the
 * copy), or right after the graph launch it names (format 1.3 launch_seq;
 * sub: which of that launch's results). */
static void vo_graph_result(vo_verifier *v, const cucap_replay_op *op, const void *buf,
                            uint64_t src, uint64_t stream, uint64_t copy_seq, uint64_t addr,
                            cucap_hash128 h, uint64_t size, uint32_t sub,
                            const char *hostw) {
  int first = !cucap_map_get(&v->seen, vo_key(op->rec_index, sub), NULL);
  if (op->capturing || !buf || !vo_reads_blob(v, h, size)) {
    if (v->pass == 0)
      v->rep->copies_unverifiable++;
    return;
  }
  if (v->ctx_sync)
    v->ctx_sync(); /* the graph launch that fills the buffer has completed */
  char what[160];
  if (!addr)
    snprintf(what, sizeof what, "DtoH copy captured into a graph (seq %" PRIu64
             "), result after its graph launch (record %" PRIu64 ")",
             copy_seq, op->rec_index);
  else
    snprintf(what, sizeof what, "graph copy node to host 0x%" PRIx64 ", result "
             "after its graph launch (record %" PRIu64 ")", addr, op->rec_index);
  vo_info in = {op->rec_index, sub, VO_COPY, what, src, size, NULL, h,
                vo_ring_of(v, stream, 0), hostw};
  if (!in.near)
    in.near = &v->any;
  if (first)
    v->rep->copies_checked++;
  vo_compare(v, &in, buf);
}

/* A captured copy's result (its buffer given with its Memcpy record). */
static void vo_captured_result(vo_verifier *v, const cucap_replay_op *op, uint64_t copy_seq,
                               cucap_hash128 h, uint64_t size, uint32_t sub,
                               const char *hostw) {
  uint64_t ix = 0;
  if (!cucap_map_get(&v->captured, copy_seq, &ix) || !ix)
    return; /* a copy that ran at its record was checked there */
  vo_capcopy *c = &v->cap[ix - 1];
  c->checked = 1;
  if (size != c->size) {
    if (v->pass == 0)
      v->rep->copies_unverifiable++;
    return;
  }
  vo_graph_result(v, op, c->buf, c->src, c->stream, copy_seq, 0, h, size, sub, hostw);
}

void vo_copy_result(vo_verifier *v, const cucap_replay_op *op,
                           const cucap_fb_snapshot *sn) {
  if (cucap_fb_snapshot_regions_len(sn) != 1 || cucap_fb_snapshot_launch_seq(sn))
    return; /* launch_seq: checked after that launch (vo_graph_launch) */
  const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(sn, 0);
  if (!cucap_fb_mem_region_data(g)) {
    uint64_t ix = 0;
    if (cucap_map_get(&v->captured, cucap_fb_snapshot_copy_seq(sn), &ix) && ix) {
      v->cap[ix - 1].checked = 1;
      if (v->pass == 0)
        v->rep->copies_unverifiable++;
    }
    return;
  }
  vo_captured_result(v, op, cucap_fb_snapshot_copy_seq(sn),
                     vo_h(cucap_fb_mem_region_data(g)), cucap_fb_mem_region_size(g), 0, NULL);
}

/* ---------------------------------------------------------------- topology */

/* May host node n write host memory [lo, hi)? Its recorded reach (format
 * 1.4 host_refs: userData and the words it points to) must point there;
 * without a record of it (older captures) it may. */
static int vo_host_reaches(const cucap_fb_graph_node *n, uint64_t lo, uint64_t hi) {
  if (!cucap_fb_graph_node_host_refs_is_present(n))
    return 1;
  size_t nr = 0;
  const uint64_t *r = cucap_fb_graph_node_host_refs(n, &nr);
  for (size_t i = 0; r && i < nr; i++) {
    uint64_t x;
    memcpy(&x, r + i, sizeof x);
    if (x - lo < hi - lo)
      return 1;
  }
  return 0;
}

static int vo_nested_host(const cucap_fb_graph *g, uint64_t lo, uint64_t hi, int depth) {
  if (!g || depth > 16)
    return 0;
  for (size_t i = 0; i < cucap_fb_graph_nodes_len(g); i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    if (cucap_fb_graph_node_type(n) == CUCAP_FB_GRAPHNODETYPE_HOST && vo_host_reaches(n, lo, hi))
      return 1;
    for (size_t k = 0; k < cucap_fb_graph_node_bodies_len(n); k++)
      if (vo_nested_host(cucap_fb_graph_node_bodies_at(n, k), lo, hi, depth + 1))
        return 1;
  }
  return 0;
}

/* 1 if a host node of g that can reach [lo, hi) (the host memory node c
 * writes) may run after c: it is not one of c's ancestors, or it is nested
 * in a child/conditional graph. */
static int vo_host_after(const cucap_fb_graph *g, size_t c, uint64_t lo, uint64_t hi) {
  size_t nn = cucap_fb_graph_nodes_len(g);
  int any = 0;
  for (size_t i = 0; i < nn; i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    for (size_t k = 0; k < cucap_fb_graph_node_bodies_len(n); k++)
      if (vo_nested_host(cucap_fb_graph_node_bodies_at(n, k), lo, hi, 1))
        return 1;
    any |= cucap_fb_graph_node_type(n) == CUCAP_FB_GRAPHNODETYPE_HOST &&
           vo_host_reaches(n, lo, hi);
  }
  if (!any)
    return 0;
  /* c's ancestors: a walk up the dependency edges */
  unsigned char *anc = calloc(nn ? nn : 1, 1);
  size_t *stack = malloc((nn ? nn : 1) * sizeof *stack);
  cucap_map ix = {0};
  int after = 1; /* without memory: assume the worst */
  if (anc && stack) {
    for (size_t i = 0; i < nn; i++)
      cucap_map_put(&ix, cucap_fb_graph_node_handle(cucap_fb_graph_nodes_at(g, i)), i + 1);
    size_t top = 0;
    stack[top++] = c;
    while (top) {
      const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, stack[--top]);
      size_t nd = 0;
      const uint64_t *dv = cucap_fb_graph_node_dependencies(n, &nd);
      for (size_t k = 0; k < nd; k++) {
        uint64_t h, j = 0;
        memcpy(&h, dv + k, sizeof h);
        if (cucap_map_get(&ix, h, &j) && j && !anc[j - 1]) {
          anc[j - 1] = 1;
          stack[top++] = (size_t)j - 1;
        }
      }
    }
    after = 0;
    for (size_t i = 0; i < nn && !after; i++) {
      const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
      after = i != c && !anc[i] && cucap_fb_graph_node_type(n) == CUCAP_FB_GRAPHNODETYPE_HOST &&
              vo_host_reaches(n, lo, hi);
    }
  }
  cucap_map_free(&ix);
  free(anc);
  free(stack);
  return after;
}

/* Instantiate / ExecUpdate (every pass): the exec's copy nodes to host
 * memory, top level, and whether a host node may run after each. */
void vo_graph_topology(vo_verifier *v, const cucap_fb_graph *g) {
  uint64_t exec = cucap_fb_graph_exec(g);
  size_t nn = cucap_fb_graph_nodes_len(g);
  if (!exec || !nn)
    return;
  size_t k = 0; /* the exec's earlier nodes go */
  for (size_t i = 0; i < v->ngn; i++)
    if (v->gn[i].exec != exec)
      v->gn[k++] = v->gn[i];
  v->ngn = k;
  for (size_t i = 0; i < nn; i++) {
    const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
    const cucap_fb_memcpy *m = cucap_fb_graph_node_memcpy(n);
    const cucap_fb_copy_geometry *geo = m ? cucap_fb_memcpy_geometry(m) : NULL;
    if (cucap_fb_graph_node_type(n) != CUCAP_FB_GRAPHNODETYPE_MEMCPY || !geo ||
        !cucap_memcpy_side_host(m, 1))
      continue;
    if (!CUCAP_VEC_RESERVE(v->gn, v->capgn, v->ngn + 1, 16))
      return;
    uint64_t h = cucap_fb_copy_geometry_height(geo) ? cucap_fb_copy_geometry_height(geo) : 1;
    uint64_t d = cucap_fb_copy_geometry_depth(geo) ? cucap_fb_copy_geometry_depth(geo) : 1;
    uint64_t w = cucap_fb_copy_geometry_width_bytes(geo);
    uint64_t pitch = cucap_fb_copy_geometry_dst_pitch(geo) ? cucap_fb_copy_geometry_dst_pitch(geo) : w;
    uint64_t hh = cucap_fb_copy_geometry_dst_height(geo) ? cucap_fb_copy_geometry_dst_height(geo) : h;
    vo_gnode *e = &v->gn[v->ngn++];
    e->exec = exec;
    e->addr = cucap_memcpy_side_addr(m, 1);
    e->size = w * h * d;
    /* the host bytes it writes: rows of its pitch */
    e->host_after = vo_host_after(g, i, e->addr, e->addr + (d - 1) * pitch * hh + (h - 1) * pitch + w);
    /* a device source read as one range: the check's device address (for
     * the writers of nondeterministic bytes) */
    e->src = !cucap_memcpy_side_host(m, 0) && cucap_fb_copy_geometry_src_memory_type(geo) !=
                                         CU_MEMORYTYPE_ARRAY && h == 1 && d == 1
                 ? cucap_memcpy_side_addr(m, 0) : 0;
    e->seen = 0;
  }
}

static vo_gnode *vo_gnode_of(vo_verifier *v, uint64_t exec, uint64_t addr, uint64_t size) {
  for (size_t i = 0; i < v->ngn; i++)
    if (v->gn[i].exec == exec && v->gn[i].addr == addr && v->gn[i].size == size)
      return &v->gn[i];
  return NULL;
}

#define VO_HOSTNODE_WHY "a host node of its graph may run after the copy and " \
                        "change them before the launch completes (the recorder " \
                        "reads the result then); a replay runs no host code"

/* After a graph launch: the results the recorder read for this launch
 * (format 1.3), wherever their records are; copy nodes to host memory
 * without a result are unverifiable. */
void vo_graph_launch(vo_verifier *v, cucap_replay_session *s,
                     const cucap_replay_op *op) {
  const cucap_fb_graph *g = cucap_fb_record_body_as_graph(op->record);
  uint64_t exec = g ? cucap_fb_graph_exec(g) : 0;
  uint64_t cs, size, addr = 0;
  cucap_hash128 h;
  for (size_t i = 0; i < v->ngn; i++)
    if (v->gn[i].exec == exec)
      v->gn[i].seen = 0;
  for (uint32_t k = 0;
       cucap_replay_session_graph_copy_result(s, op->seq, k, &cs, &h, &size); k++) {
    cucap_replay_session_graph_copy_dst(s, op->seq, k, &addr);
    vo_gnode *gn = vo_gnode_of(v, exec, addr, size);
    if (gn)
      gn->seen = 1;
    const char *why = gn && gn->host_after ? VO_HOSTNODE_WHY : NULL;
    const void *buf = cucap_replay_session_graph_host_buffer(s, exec, addr, size);
    uint64_t cix = 0;
    vo_capcopy *cc = cucap_map_get(&v->captured, cs, &cix) && cix ? &v->cap[cix - 1] : NULL;
    if (buf && cc) { /* a captured copy in a graph rebuilt here (dry capture) */
      cc->checked = 1;
      vo_graph_result(v, op, buf, cc->src, cc->stream, cs, 0, h, size, k + 1, why);
    } else if (buf) { /* a copy node of the rebuilt exec */
      vo_graph_result(v, op, buf, gn ? gn->src : 0, cucap_fb_graph_stream(g), cs, addr, h,
                      size, k + 1, why);
    } else if (cc) {
      vo_captured_result(v, op, cs, h, size, k + 1, why);
    } else if (v->pass == 0) {
      v->rep->copies_unverifiable++;
    }
  }
  if (v->pass == 0) /* copy nodes whose result the recorder did not read */
    for (size_t i = 0; i < v->ngn; i++)
      if (v->gn[i].exec == exec && !v->gn[i].seen)
        v->rep->copies_unverifiable++;
}
