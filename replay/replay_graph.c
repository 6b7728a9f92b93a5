/* replay_graph.c - rebuilds CUDA graphs that the program built with the
 * explicit graph API.
 *
 * The recorder writes the graph's topology into the Graph{Instantiate}
 * record (interpose/custom_graph.c). Captured graphs are rebuilt by replaying
 * the capture itself; for the others this file re-adds the nodes: kernel
 * (mapped function, recorded argument block, relocated pointers), memcpy
 * between device memory, memset and empty nodes. Other node types (host,
 * child graph, events, mem alloc/free, ...) or copies touching host memory,
 * whose bytes are not in the recording, make the graph skipped. The entry
 * points used here are fetched per rebuild with cuGetProcAddress_v2 (rebuilds
 * are rare), so the shared driver table stays untouched. */
#include "replay_graph.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct rg_fns {
  PFN_cuGraphCreate_v10000 Create;
  PFN_cuGraphAddKernelNode_v12000 AddKernel;
  PFN_cuGraphAddMemcpyNode_v10000 AddMemcpy;
  PFN_cuGraphAddMemsetNode_v10000 AddMemset;
  PFN_cuGraphAddEmptyNode_v10000 AddEmpty;
} rg_fns;

typedef CUresult (*rg_getproc_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

static void *rg_proc(void *lib, rg_getproc_fn gp, const char *name, int ver,
                     const char *exported) {
  void *p = NULL;
  CUdriverProcAddressQueryResult q;
  if (gp && gp(name, &p, ver, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS && p)
    return p;
  return lib ? dlsym(lib, exported) : NULL;
}

static int rg_load(rp_state *R, rg_fns *f) {
  void *lib = R->d.lib;
  rg_getproc_fn gp = lib ? (rg_getproc_fn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
  f->Create = (PFN_cuGraphCreate_v10000)rg_proc(lib, gp, "cuGraphCreate", 10000, "cuGraphCreate");
  f->AddKernel = (PFN_cuGraphAddKernelNode_v12000)rg_proc(
      lib, gp, "cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2");
  f->AddMemcpy = (PFN_cuGraphAddMemcpyNode_v10000)rg_proc(
      lib, gp, "cuGraphAddMemcpyNode", 10000, "cuGraphAddMemcpyNode");
  f->AddMemset = (PFN_cuGraphAddMemsetNode_v10000)rg_proc(
      lib, gp, "cuGraphAddMemsetNode", 10000, "cuGraphAddMemsetNode");
  f->AddEmpty = (PFN_cuGraphAddEmptyNode_v10000)rg_proc(
      lib, gp, "cuGraphAddEmptyNode", 10000, "cuGraphAddEmptyNode");
  return f->Create && f->AddKernel && f->AddMemcpy && f->AddMemset && f->AddEmpty;
}

/* Why node n cannot be rebuilt, or NULL. */
static const char *rg_node_unsupported(const cucap_fb_graph_node *n) {
  switch (cucap_fb_graph_node_type(n)) {
  case CUCAP_FB_GRAPHNODETYPE_KERNEL:
    return cucap_fb_graph_node_launch(n) ? NULL
                                         : "explicit graph: kernel node without parameters";
  case CUCAP_FB_GRAPHNODETYPE_MEMSET:
    return cucap_fb_graph_node_memset(n) ? NULL
                                         : "explicit graph: memset node without parameters";
  case CUCAP_FB_GRAPHNODETYPE_EMPTY:
    return NULL;
  case CUCAP_FB_GRAPHNODETYPE_MEMCPY: {
    const cucap_fb_memcpy *c = cucap_fb_graph_node_memcpy(n);
    const cucap_fb_copy_geometry *geo = c ? cucap_fb_memcpy_geometry(c) : NULL;
    if (!geo)
      return "explicit graph: memcpy node without geometry";
    if (cucap_fb_copy_geometry_src_memory_type(geo) != CU_MEMORYTYPE_DEVICE ||
        cucap_fb_copy_geometry_dst_memory_type(geo) != CU_MEMORYTYPE_DEVICE)
      return "explicit graph: memcpy node with host/array memory (not rebuilt)";
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_HOST:
    return "explicit graph: host node (not rebuilt)";
  case CUCAP_FB_GRAPHNODETYPE_GRAPH:
    return "explicit graph: child graph node (not rebuilt)";
  case CUCAP_FB_GRAPHNODETYPE_WAITEVENT:
  case CUCAP_FB_GRAPHNODETYPE_EVENTRECORD:
    return "explicit graph: event node (not rebuilt)";
  case CUCAP_FB_GRAPHNODETYPE_MEMALLOC:
  case CUCAP_FB_GRAPHNODETYPE_MEMFREE:
    return "explicit graph: mem alloc/free node (not rebuilt)";
  default:
    return "explicit graph: unknown node type (not rebuilt)";
  }
}

/* Kernel node: the recorded argument block, grown to the function's layout,
 * relocated, passed as kernelParams (or `extra` without a layout). */
static const char *rg_add_kernel(rp_state *R, const rg_fns *f, CUgraph gr,
                                 const cucap_fb_launch *l, const CUgraphNode *deps,
                                 size_t nd, CUgraphNode *out) {
  uint64_t idx;
  if (!rp_map_get(&R->func, cucap_fb_launch_function(l), &idx))
    return "explicit graph: kernel node of an unknown function";
  rp_func *fi = &R->funcs[idx];
  if (!fi->live_fn) {
    CUfunction fn = NULL;
    if (!R->d.df.KernelGetFunction)
      return "explicit graph: kernel node (no cuKernelGetFunction)";
    if (!rp_cu(R, R->d.df.KernelGetFunction(&fn, (CUkernel)(uintptr_t)fi->live),
               "cuKernelGetFunction"))
      return NULL;
    fi->live_fn = (uint64_t)(uintptr_t)fn;
  }
  rp_func_layout(R, fi);
  size_t n = 0;
  const uint8_t *inl = cucap_fb_launch_args(l, &n);
  uint64_t bsz = 0;
  cucap_hash128 bh = {0, 0};
  if (cucap_fb_launch_has_args_blob(l)) {
    bh = rp_h(cucap_fb_launch_args_blob(l));
    if (cucap_reader_blob_size(R->r, bh, &bsz) != CUCAP_OK)
      return "explicit graph: kernel argument blob missing";
    n = bsz;
  }
  size_t need = n > fi->layout_bytes ? n : fi->layout_bytes;
  uint8_t *args = calloc(1, need + 8);
  if (!args) {
    rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
    return NULL;
  }
  if (cucap_fb_launch_has_args_blob(l)) {
    if (cucap_reader_blob_read(R->r, bh, args, n) != CUCAP_OK) {
      free(args);
      return "explicit graph: kernel argument blob missing";
    }
  } else if (n) {
    memcpy(args, inl, n);
  }
  if (R->mem.nreloc) { /* as rp_op_launch: 8-byte parameters into moved ranges */
    for (size_t i = 0; i < (fi->nparams ? fi->nparams : (n / 8)); i++) {
      uint32_t off = fi->nparams ? fi->params[i].offset : (uint32_t)(i * 8);
      if (fi->nparams && (fi->params[i].size != 8 || off % 8))
        continue;
      if (off + 8 > n)
        continue;
      uint64_t v;
      int rel = 0;
      memcpy(&v, args + off, 8);
      uint64_t nv = rp_mem_translate(&R->mem, v, &rel);
      if (rel) {
        memcpy(args + off, &nv, 8);
        R->rep->patched_params++;
      }
    }
  }
  void **kp = NULL;
  size_t argsize = n;
  void *extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE,
                    &argsize, CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (fi->nparams) {
    kp = malloc(fi->nparams * sizeof *kp);
    if (!kp) {
      free(args);
      rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
      return NULL;
    }
    for (size_t i = 0; i < fi->nparams; i++) {
      uint32_t off = fi->params[i].offset;
      kp[i] = off < need ? args + off : args;
    }
    p.kernelParams = kp;
  } else if (n) {
    p.extra = extra;
  }
  const cucap_fb_dim3 *gd = cucap_fb_launch_grid(l), *bd = cucap_fb_launch_block(l);
  p.func = (CUfunction)(uintptr_t)fi->live_fn;
  p.gridDimX = gd ? gd->x : 1, p.gridDimY = gd ? gd->y : 1, p.gridDimZ = gd ? gd->z : 1;
  p.blockDimX = bd ? bd->x : 1, p.blockDimY = bd ? bd->y : 1, p.blockDimZ = bd ? bd->z : 1;
  p.sharedMemBytes = cucap_fb_launch_shared_mem(l);
  /* the driver copies the parameters into the node */
  CUresult r = f->AddKernel(out, gr, deps, nd, &p);
  free(kp);
  free(args);
  if (r != CUDA_SUCCESS) {
    char what[200];
    snprintf(what, sizeof what, "cuGraphAddKernelNode (%s)", fi->name);
    rp_cu(R, r, what);
  }
  return NULL;
}

/* Adds one node; returns a skip reason, or NULL (success or driver error:
 * R->failed tells). */
static const char *rg_add(rp_state *R, const rg_fns *f, CUgraph gr, CUcontext ctx,
                          const cucap_fb_graph_node *n, const CUgraphNode *deps,
                          size_t nd, CUgraphNode *out) {
  switch (cucap_fb_graph_node_type(n)) {
  case CUCAP_FB_GRAPHNODETYPE_KERNEL:
    return rg_add_kernel(R, f, gr, cucap_fb_graph_node_launch(n), deps, nd, out);
  case CUCAP_FB_GRAPHNODETYPE_MEMSET: {
    const cucap_fb_memset *m = cucap_fb_graph_node_memset(n);
    CUDA_MEMSET_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.dst = (CUdeviceptr)rp_tr(R, cucap_fb_memset_dst(m));
    p.pitch = cucap_fb_memset_pitch(m);
    p.value = cucap_fb_memset_value(m);
    p.elementSize = cucap_fb_memset_elem_size(m);
    p.width = cucap_fb_memset_count(m);
    p.height = cucap_fb_memset_height(m) ? cucap_fb_memset_height(m) : 1;
    rp_cu(R, f->AddMemset(out, gr, deps, nd, &p, ctx), "cuGraphAddMemsetNode");
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_MEMCPY: {
    const cucap_fb_memcpy *c = cucap_fb_graph_node_memcpy(n);
    const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    rp_copy3d_src_dev(&p, g, rp_tr(R, cucap_fb_memcpy_src(c)));
    rp_copy3d_dst_dev(&p, g, rp_tr(R, cucap_fb_memcpy_dst(c)));
    p.WidthInBytes = cucap_fb_copy_geometry_width_bytes(g);
    p.Height = cucap_fb_copy_geometry_height(g) ? cucap_fb_copy_geometry_height(g) : 1;
    p.Depth = cucap_fb_copy_geometry_depth(g) ? cucap_fb_copy_geometry_depth(g) : 1;
    rp_cu(R, f->AddMemcpy(out, gr, deps, nd, &p, ctx), "cuGraphAddMemcpyNode");
    return NULL;
  }
  case CUCAP_FB_GRAPHNODETYPE_EMPTY:
    rp_cu(R, f->AddEmpty(out, gr, deps, nd), "cuGraphAddEmptyNode");
    return NULL;
  default:
    return rg_node_unsupported(n);
  }
}

const char *rp_graph_rebuild(rp_state *R, const cucap_fb_graph *g, CUgraph *out) {
  *out = NULL;
  size_t nn = cucap_fb_graph_nodes_len(g);
  /* no topology: the recorder could not walk the graph (or it was empty,
   * where skipping loses nothing) */
  if (nn == 0)
    return "explicit graph: topology not recorded (not rebuilt)";
  /* everything checked before any driver call */
  for (size_t i = 0; i < nn; i++) {
    const char *why = rg_node_unsupported(cucap_fb_graph_nodes_at(g, i));
    if (why)
      return why;
  }
  rg_fns f;
  if (!rg_load(R, &f))
    return "explicit graph: driver lacks the graph construction API";
  CUcontext ctx = NULL;
  if (R->d.df.CtxGetCurrent)
    (void)R->d.df.CtxGetCurrent(&ctx);
  CUgraph gr = NULL;
  if (!rp_cu(R, f.Create(&gr, 0), "cuGraphCreate"))
    return NULL;
  rp_map live = {0}; /* recorded node handle -> live CUgraphNode */
  unsigned char *done = calloc(nn ? nn : 1, 1);
  size_t maxd = 1;
  for (size_t i = 0; i < nn; i++) {
    size_t d = cucap_fb_graph_node_dependencies_len(cucap_fb_graph_nodes_at(g, i));
    if (d > maxd)
      maxd = d;
  }
  CUgraphNode *deps = malloc(maxd * sizeof *deps);
  const char *why = NULL;
  if (!done || !deps) {
    rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
    goto fail;
  }
  /* passes in recorded order; a node goes in once all its dependencies are
   * in (one pass when the driver listed the nodes topologically) */
  size_t added = 0;
  while (added < nn) {
    size_t before = added;
    for (size_t i = 0; i < nn; i++) {
      if (done[i])
        continue;
      const cucap_fb_graph_node *n = cucap_fb_graph_nodes_at(g, i);
      size_t nd = 0;
      const uint64_t *dv = cucap_fb_graph_node_dependencies(n, &nd);
      int ready = 1;
      for (size_t k = 0; k < nd && ready; k++) {
        uint64_t rec_dep, v;
        memcpy(&rec_dep, dv + k, sizeof rec_dep);
        if (rp_map_get(&live, rec_dep, &v))
          deps[k] = (CUgraphNode)(uintptr_t)v;
        else
          ready = 0;
      }
      if (!ready)
        continue;
      CUgraphNode node = NULL;
      why = rg_add(R, &f, gr, ctx, n, deps, nd, &node);
      if (why || R->failed)
        goto fail;
      if (!rp_map_put(&live, cucap_fb_graph_node_handle(n), (uint64_t)(uintptr_t)node)) {
        rp_set_error(R, CUCAP_ERR_NOMEM, CUCAP_REPLAY_EXIT_FAILED, "out of memory");
        goto fail;
      }
      done[i] = 1;
      added++;
    }
    if (added == before) { /* a dependency outside the graph, or a cycle */
      why = "explicit graph: dependencies not resolvable (not rebuilt)";
      goto fail;
    }
  }
  free(done);
  free(deps);
  rp_map_free(&live);
  *out = gr;
  return NULL;
fail:
  free(done);
  free(deps);
  rp_map_free(&live);
  if (gr && R->d.df.GraphDestroy)
    R->d.df.GraphDestroy(gr);
  return why;
}
