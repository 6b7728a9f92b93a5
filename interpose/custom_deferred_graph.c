/* custom_deferred_graph.c - host results of DtoH copies captured into
 * graphs (custom_deferred.c owns the pending results and explains the
 * reads). A copy to host memory enqueued on a capturing stream does not run
 * now: it is remembered with the graph being captured; at instantiation the
 * graph is linked to its executable graph; before each launch of that
 * executable, pending results its copies would overwrite are read
 * (cx_deferred_before_host_write); after each launch on a stream that is not
 * capturing, one pending result per captured copy is registered, read once
 * the launch has completed: Snapshot{CopyResult, copy_seq = the captured
 * Memcpy record, launch_seq = that cuGraphLaunch record} (format 1.3).
 * Copy nodes to host memory of a graph the program built with the graph API
 * (cuGraphAddMemcpyNode, a clone of a captured graph, ...) have no Memcpy
 * record: at instantiation the graph's nodes are walked and each one not
 * captured is registered the same way, with the instantiation's seq as its
 * copy_seq (the result's region address, the node's host destination,
 * tells them apart).
 * This file owns the captured-copy list and the graph -> exec links (g_gmu). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

#define CX_MAX_CAPCOPIES 4096
#define CX_MAX_EXECS 4096
#define CX_MAX_LAUNCH_COPIES 64 /* host-bound copies read per graph launch */

typedef struct capcopy { /* a DtoH copy captured into a graph */
  struct capcopy *next;
  uint64_t graph;       /* the graph being captured into */
  uint64_t stream;      /* the stream it was enqueued on */
  int open;             /* capture not ended yet */
  int dead;             /* graph destroyed (instances may still run it) */
  uint64_t seq;
  int seq_state;
  uint64_t ctx;
  cx_rows rows;
  uint64_t batch;       /* a copy node registered at instantiation: its call */
} capcopy;

static pthread_mutex_t g_gmu = PTHREAD_MUTEX_INITIALIZER;
static capcopy *g_cap;
static int g_ncap;
static struct { uint64_t exec, graph; } g_exec[CX_MAX_EXECS];
static int g_nexec; /* under g_gmu; read unlocked only through nexec_hint */

/* A lock-free "is there any exec at all" for the launch paths (relaxed: an
 * exec instantiated concurrently on another thread may be missed, as with
 * any unordered calls of two threads). */
static int nexec_hint(void) { return __atomic_load_n(&g_nexec, __ATOMIC_RELAXED); }

/* The pending results of one graph launch, until its record's seq is known. */
typedef struct glaunch {
  int n;
  void *p[CX_MAX_LAUNCH_COPIES]; /* cx_deferred_pend_after's handles */
} glaunch;

static void glaunch_set_seq(void *arg, uint64_t seq) {
  glaunch *gl = arg;
  cx_deferred_pend_launch_seq(gl->p, gl->n, seq);
  free(gl);
}

static void capcopy_set_seq(void *arg, uint64_t seq) {
  capcopy *p = arg;
  pthread_mutex_lock(&g_gmu);
  p->seq = seq;
  p->seq_state = seq ? 1 : -1;
  pthread_mutex_unlock(&g_gmu);
}

void cx_deferred_note_capture(cucap_call *c, CUstream s, const cx_rows *rows) {
  CUgraph g = NULL;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (c->variant == CUCAP_FB_CALLVARIANT_PTSZ && cucap_real.cuStreamGetCaptureInfo_v3_ptsz)
    r = cucap_real.cuStreamGetCaptureInfo_v3_ptsz(s, &st, &id, &g, NULL, NULL, NULL);
  else if (cucap_real.cuStreamGetCaptureInfo_v3)
    r = cucap_real.cuStreamGetCaptureInfo_v3(s, &st, &id, &g, NULL, NULL, NULL);
  else if (cucap_real.cuStreamGetCaptureInfo_v2)
    r = cucap_real.cuStreamGetCaptureInfo_v2(s, &st, &id, &g, NULL, NULL);
  if (r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
    return;
  capcopy *p = calloc(1, sizeof *p);
  if (!p)
    return;
  p->graph = CX_U64(g);
  p->stream = CX_U64(s);
  p->open = 1;
  p->ctx = cx_current_ctx();
  p->rows = *rows;
  pthread_mutex_lock(&g_gmu);
  if (g_ncap >= CX_MAX_CAPCOPIES) {
    pthread_mutex_unlock(&g_gmu);
    free(p);
    return;
  }
  p->next = g_cap;
  g_cap = p;
  g_ncap++;
  pthread_mutex_unlock(&g_gmu);
  c->after_append = capcopy_set_seq;
  c->after_arg = p;
}


static int exec_of_graph_locked(uint64_t graph) {
  for (int i = 0; i < g_nexec; i++)
    if (g_exec[i].graph == graph)
      return 1;
  return 0;
}

/* Frees the entries matching (under g_gmu); never one whose record has not
 * been appended yet (its after_append still points at it). */
static void capcopy_remove_locked(int (*match)(const capcopy *, uint64_t), uint64_t key) {
  for (capcopy **pp = &g_cap; *pp;) {
    capcopy *p = *pp;
    if (p->seq_state != 0 && match(p, key)) {
      *pp = p->next;
      g_ncap--;
      free(p);
    } else {
      pp = &p->next;
    }
  }
}

static int m_open_stream(const capcopy *p, uint64_t s) { return p->open && p->stream == s; }
static int m_dead_graph(const capcopy *p, uint64_t g) { return p->dead && p->graph == g; }

void cx_deferred_graph_end_capture(uint64_t stream, uint64_t graph) {
  pthread_mutex_lock(&g_gmu);
  if (graph) {
    for (capcopy *p = g_cap; p; p = p->next)
      if (p->graph == graph)
        p->open = 0;
  } else { /* the capture failed: its graph is gone */
    capcopy_remove_locked(m_open_stream, stream);
  }
  pthread_mutex_unlock(&g_gmu);
}

/* ---- copy nodes of graphs the program built ---- */

#define CX_NODE_WALK_DEPTH 8

static _Atomic uint64_t g_batch;

static void batch_set_seq(void *arg, uint64_t seq) {
  uint64_t batch = (uint64_t)(uintptr_t)arg;
  pthread_mutex_lock(&g_gmu);
  for (capcopy *p = g_cap; p; p = p->next)
    if (p->batch == batch && p->seq_state == 0) {
      p->seq = seq;
      p->seq_state = seq ? 1 : -1;
    }
  pthread_mutex_unlock(&g_gmu);
}

/* The node's host destination as rows, 1 if it has one. */
static int node_dst_rows(const CUDA_MEMCPY3D *p, cx_rows *r) {
  uint64_t base;
  if (p->dstMemoryType == CU_MEMORYTYPE_HOST)
    base = CX_U64(p->dstHost);
  else if (p->dstMemoryType == CU_MEMORYTYPE_UNIFIED && !cx_ptr_is_device(p->dstDevice))
    base = p->dstDevice;
  else
    return 0;
  if (!base || !p->WidthInBytes)
    return 0;
  size_t h = p->Height ? p->Height : 1, d = p->Depth ? p->Depth : 1;
  size_t pitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
  size_t hh = p->dstHeight ? p->dstHeight : h;
  base += p->dstXInBytes + (p->dstZ * hh + p->dstY) * pitch;
  *r = (cx_rows){(const uint8_t *)(uintptr_t)base, p->WidthInBytes, h, d, pitch, pitch * hh};
  return 1;
}

/* Adds (under g_gmu) a node copy of graph unless a copy of it is known. */
static void node_copy_add_locked(uint64_t graph, uint64_t batch, uint64_t ctx,
                                 const cx_rows *r) {
  size_t n = r->width * r->height * r->depth;
  int count = 0;
  for (capcopy *p = g_cap; p; p = p->next) {
    if (p->graph != graph)
      continue;
    count++;
    if (p->rows.base == r->base && p->rows.width * p->rows.height * p->rows.depth == n)
      return; /* captured (or registered by an earlier instantiation) */
  }
  if (g_ncap >= CX_MAX_CAPCOPIES || count >= CX_MAX_LAUNCH_COPIES)
    return;
  capcopy *p = calloc(1, sizeof *p);
  if (!p)
    return;
  p->graph = graph;
  p->ctx = ctx;
  p->rows = *r;
  p->batch = batch;
  p->next = g_cap;
  g_cap = p;
  g_ncap++;
}

static void node_copies_walk(CUgraph g, uint64_t graph, uint64_t batch, uint64_t ctx,
                             int depth) {
  size_t n = 0;
  if (depth > CX_NODE_WALK_DEPTH || !g || !cucap_real.cuGraphGetNodes ||
      !cucap_real.cuGraphNodeGetType || !cucap_real.cuGraphMemcpyNodeGetParams ||
      cucap_real.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS || !n || n > (1u << 20))
    return;
  CUgraphNode *v = malloc(n * sizeof *v);
  if (!v || cucap_real.cuGraphGetNodes(g, v, &n) != CUDA_SUCCESS) {
    free(v);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType t = (CUgraphNodeType)255;
    (void)cucap_real.cuGraphNodeGetType(v[i], &t);
    if (t == CU_GRAPH_NODE_TYPE_MEMCPY) {
      CUDA_MEMCPY3D p;
      cx_rows r;
      memset(&p, 0, sizeof p);
      if (cucap_real.cuGraphMemcpyNodeGetParams(v[i], &p) == CUDA_SUCCESS &&
          node_dst_rows(&p, &r)) {
        pthread_mutex_lock(&g_gmu);
        node_copy_add_locked(graph, batch, ctx, &r);
        pthread_mutex_unlock(&g_gmu);
      }
    } else if (t == CU_GRAPH_NODE_TYPE_GRAPH && cucap_real.cuGraphChildGraphNodeGetGraph) {
      CUgraph cg = NULL; /* a child graph's copies run with the parent */
      if (cucap_real.cuGraphChildGraphNodeGetGraph(v[i], &cg) == CUDA_SUCCESS)
        node_copies_walk(cg, graph, batch, ctx, depth + 1);
    }
  }
  free(v);
}

void cx_deferred_graph_instantiate(cucap_call *c, uint64_t graph, uint64_t exec) {
  if (!graph || !exec)
    return;
  /* the graph's copies to host memory, queries only (RELAXED: other streams
   * may capture) */
  uint64_t batch = atomic_fetch_add(&g_batch, 1) + 1;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  node_copies_walk((CUgraph)(uintptr_t)graph, graph, batch, cx_current_ctx(), 0);
  cx_relax_end(&rx);
  pthread_mutex_lock(&g_gmu);
  int have = 0, fresh = 0;
  for (capcopy *p = g_cap; p; p = p->next) {
    have |= p->graph == graph;
    fresh |= p->batch == batch && p->seq_state == 0;
  }
  if (have) {
    int i;
    for (i = 0; i < g_nexec && g_exec[i].exec != exec; i++)
      ;
    if (i < CX_MAX_EXECS) {
      g_exec[i].exec = exec;
      g_exec[i].graph = graph;
      if (i == g_nexec)
        __atomic_store_n(&g_nexec, g_nexec + 1, __ATOMIC_RELAXED);
    }
  }
  pthread_mutex_unlock(&g_gmu);
  if (fresh && c && !c->after_append) { /* their copy_seq: this call's */
    c->after_append = batch_set_seq;
    c->after_arg = (void *)(uintptr_t)batch;
  } else if (fresh) {
    batch_set_seq((void *)(uintptr_t)batch, 0); /* no seq: never read */
  }
}

void cx_deferred_graph_launch(cucap_call *c, uint64_t exec, CUstream s) {
  if (!nexec_hint())
    return;
  uint64_t graph = 0;
  pthread_mutex_lock(&g_gmu);
  for (int i = 0; i < g_nexec; i++)
    if (g_exec[i].exec == exec)
      graph = g_exec[i].graph;
  pthread_mutex_unlock(&g_gmu);
  if (!graph)
    return;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cx_stream_capturing(s, c->variant)) { /* a graph launched into a capture */
    cx_relax_end(&rx);
    return;
  }
  uint64_t ctx = cx_current_ctx();
  pthread_mutex_lock(&g_gmu);
  size_t n = 0;
  for (capcopy *p = g_cap; p; p = p->next)
    n += p->graph == graph && p->seq_state > 0;
  pthread_mutex_unlock(&g_gmu);
  if (n > CX_MAX_LAUNCH_COPIES)
    n = CX_MAX_LAUNCH_COPIES;
  /* the launch's seq is known once its record is appended (after_append) */
  glaunch *gl = n ? calloc(1, sizeof *gl) : NULL;
  /* one event per copy (a graph holds few host-bound copies) */
  for (size_t k = 0; gl && k < n; k++) {
    capcopy snap;
    int found = 0;
    pthread_mutex_lock(&g_gmu);
    size_t j = 0;
    for (capcopy *p = g_cap; p && !found; p = p->next)
      if (p->graph == graph && p->seq_state > 0 && j++ == k) {
        snap = *p;
        found = 1;
      }
    pthread_mutex_unlock(&g_gmu);
    if (!found)
      break;
    void *q = cx_deferred_pend_after(c, s, ctx, &snap.rows, snap.seq);
    if (!q)
      break;
    gl->p[gl->n++] = q;
  }
  if (gl && gl->n) {
    c->after_append = glaunch_set_seq;
    c->after_arg = gl;
  } else {
    free(gl);
  }
  cx_relax_end(&rx);
}

void cx_deferred_graph_before_launch(cucap_call *c, uint64_t exec, CUstream s) {
  if (!nexec_hint() || !cx_deferred_pending())
    return;
  uint64_t graph = 0;
  pthread_mutex_lock(&g_gmu);
  for (int i = 0; i < g_nexec; i++)
    if (g_exec[i].exec == exec)
      graph = g_exec[i].graph;
  cx_rows rows[16];
  int n = 0;
  for (capcopy *p = g_cap; p && graph && n < 16; p = p->next)
    if (p->graph == graph)
      rows[n++] = p->rows;
  pthread_mutex_unlock(&g_gmu);
  for (int i = 0; i < n; i++)
    cx_deferred_before_host_write(c, s, &rows[i]);
}

void cx_deferred_graph_forget(uint64_t graph, uint64_t exec) {
  pthread_mutex_lock(&g_gmu);
  if (exec) {
    for (int i = 0; i < g_nexec; i++)
      if (g_exec[i].exec == exec) {
        graph = graph ? graph : g_exec[i].graph;
        g_exec[i] = g_exec[g_nexec - 1];
        __atomic_store_n(&g_nexec, g_nexec - 1, __ATOMIC_RELAXED);
        break;
      }
  }
  if (graph) {
    /* cuGraphDestroy marks; the copies go once no instance can run them */
    if (!exec)
      for (capcopy *p = g_cap; p; p = p->next)
        if (p->graph == graph)
          p->dead = 1;
    if (!exec_of_graph_locked(graph))
      capcopy_remove_locked(m_dead_graph, graph);
  }
  pthread_mutex_unlock(&g_gmu);
}
