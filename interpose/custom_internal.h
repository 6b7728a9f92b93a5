/* custom_internal.h - helpers shared by the semantic hooks interpose/custom_*.c. Internal to libcucap.so.
 *
 * Every hook runs inside a wrapper with the re-entrancy guard held (see
 * interpose_internal.h): driver calls made here go to cucap_real.* directly
 * and are not recorded. Hooks never change the CUresult the app sees. */
#ifndef CUCAP_CUSTOM_INTERNAL_H
#define CUCAP_CUSTOM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_callstack.h"
#include "cucap_fatbin.h"
#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_tracker.h"
#include "interpose_internal.h"

#define CX_U64(p) ((uint64_t)(uintptr_t)(p))

/* Largest parameter block the driver accepts (CUDA 12.1+: 32764 bytes). */
#define CX_MAX_PARAM_BYTES 32768
/* Argument blocks above this go to a blob (Launch.has_args_blob). */
#define CX_INLINE_ARGS_MAX 4096

static inline cucap_tracker *cx_tracker(void) { return cucap_tracker_global(); }

static inline cucap_fb_hash128 cx_fbh(cucap_hash128 h) {
  cucap_fb_hash128 r = {h.lo, h.hi};
  return r;
}

/* Stores data as a blob; 1 and *out on success (errors are logged once). */
int cx_blob(const void *data, size_t size, cucap_fb_hash128 *out);

/* Vector of JitOption tables built with b (0 if n == 0). Pointer-valued
 * options (log buffers, symbol tables) are stored with value 0. */
cucap_fb_ref cx_jit_options(cucap_fbb *b, unsigned n, const int *opts,
                            void *const *vals, int is_library_opt);

/* Current CUcontext (0 if none), via the real driver. */
uint64_t cx_current_ctx(void);

/* Reads a whole file into a malloc'ed buffer (caller frees); NULL on error. */
void *cx_read_file(const char *path, size_t *size);

/* Parameter layout of a function/kernel via the driver
 * (cuFuncGetParamInfo / cuKernelGetParamInfo), falling back to the module's
 * .nv.info. Adds the function to the tracker and returns its entry (NULL on
 * OOM). kind: cucap.fb.FunctionKind; module: owning module/library/kernel. */
const cucap_tracked_fn *cx_function_learn(uint64_t handle, uint64_t module,
                                          uint8_t kind, const char *name);

/* Builds a Function body for f with b. */
cucap_fb_ref cx_function_body(cucap_fbb *b, const cucap_tracked_fn *f);

/* Argument block of a launch, prepared before the Launch table is started
 * (vectors cannot be created while a table is open): an inline vector when
 * <= CX_INLINE_ARGS_MAX bytes, else a blob. Built from kernelParams with f's
 * layout (each param memcpy'd to its offset, padding zero) or from extra's
 * CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE. */
typedef struct cx_args {
  cucap_fb_ref vec;       /* inline args vector or 0 */
  cucap_fb_hash128 blob;  /* when has_blob */
  int has_blob;
  int from_extra;
} cx_args;
/* Finds CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE in a launch's `extra` array;
 * returns 1 if a size was given. *ptr points into the app's memory (valid
 * for the duration of the call). */
int cx_extra_buffer(void **extra, const void **ptr, size_t *size);
void cx_launch_args(cucap_fbb *b, const cucap_tracked_fn *f,
                    void **kernelParams, void **extra, cx_args *out);

/* Tracker entry for a function handle seen at launch; learns unknown ones
 * (CUkernel handles passed by cudart, functions from enumerate APIs) and
 * records their Function body as an extra record. */
const cucap_tracked_fn *cx_function_for_launch(uint64_t handle);

/* Memcpy body (geometry, kind, no payload) of a graph memcpy node. */
cucap_fb_ref cx_memcpy3d_node_body(cucap_fbb *b, const CUDA_MEMCPY3D *p);

/* Graph walk (custom_graph.c): a GraphNode of node (in graph g) / the
 * vector of GraphNode tables of g, built with b (0 on failure). depth: body
 * and child graphs nest (bounded). Kernel/memset bodies from parameters. */
cucap_fb_ref cx_graph_node(cucap_fbb *b, CUgraph g, CUgraphNode node, int depth);
cucap_fb_ref cx_graph_nodes(cucap_fbb *b, CUgraph g, int depth);
cucap_fb_ref cx_kernel_params_body(cucap_fbb *b, const CUDA_KERNEL_NODE_PARAMS *p);
cucap_fb_ref cx_memset_params_body(cucap_fbb *b, const CUDA_MEMSET_NODE_PARAMS *p);

/* What the walk adds to a GraphNode beyond its parameters
 * (custom_graph_nodes.c): conditional parameters remembered from
 * cuGraphAddNode / cuGraphConditionalHandleCreate (the driver has no query
 * for them), the body graphs of a conditional node and the child graph of a
 * child-graph node (walked, depth-bounded), a memory free node's address.
 * Built before the GraphNode table starts; added while it is open. */
typedef struct cx_node_ext {
  cucap_fb_ref bodies;     /* [Graph] */
  cucap_fb_ref alloc;      /* MemFree: Alloc{address} */
  int is_cond;
  uint64_t cond_handle;
  uint8_t cond_type;
  uint32_t cond_size, cond_default, cond_flags;
} cx_node_ext;
void cx_graph_node_ext(cucap_fbb *b, CUgraph g, CUgraphNode node, CUgraphNodeType type,
                       uint64_t child, int depth, cx_node_ext *out);
void cx_graph_node_ext_add(cucap_fbb *b, const cx_node_ext *e);
/* cuGraphDestroy(g) succeeded: drops what was remembered about g's nodes. */
void cx_graph_forget(uint64_t g);
/* Host memory read by an exec's copy nodes (host source): noted at
 * instantiation / update (walking g, bodies and child graphs included),
 * read at each cuGraphLaunch into a vector of MemRegion {address, size,
 * data blob} (0 if none), forgotten at cuGraphExecDestroy. */
void cx_graph_exec_sources(uint64_t exec, CUgraph g);
cucap_fb_ref cx_graph_launch_payloads(cucap_fbb *b, uint64_t exec);
void cx_graph_exec_forget(uint64_t exec);

/* Snapshots: capture/snapshot.c does the work through driver callbacks that
 * custom_snapshot.c fills from cucap_real (capture/ cannot see interpose/).
 * reason: cucap.fb.SnapshotReason. */
void cx_snapshot_take(uint8_t reason, uint64_t launch_index);
/* snapshot=exit before context ctx is destroyed (pushes it current). */
void cx_snapshot_context_loss(uint64_t ctx);
void cx_launch_hash(uint64_t launch_index);
/* Before each launch (pre hook): snapshot=launch:N. */
void cx_snapshot_before_launch(uint64_t launch_index);
/* Registers the at-exit snapshot once (idempotent, cheap). */
void cx_snapshot_init(void);

#endif
