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

/* Builds a Function body for f with b (_as: with another kind and module). */
cucap_fb_ref cx_function_body(cucap_fbb *b, const cucap_tracked_fn *f);
cucap_fb_ref cx_function_body_as(cucap_fbb *b, const cucap_tracked_fn *f, uint8_t kind,
                                 uint64_t module);

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

/* Tracker entry for a CUkernel; one the recorder did not see being looked up
 * (cuLibraryEnumerateKernels, cudart's own lookups) is learned as if by
 * cuLibraryGetKernel of its library (cuKernelGetLibrary, cuKernelGetName)
 * and its Function body recorded as an extra record, so that a replay finds
 * it by name in its own copy of the library. NULL if k is no CUkernel or on
 * OOM. The entry stays valid until its library is forgotten. */
const cucap_tracked_fn *cx_kernel_learn(uint64_t k);

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
/* After each successful launch (post hook): snapshot=launch:N. */
void cx_snapshot_after_launch(uint64_t launch_index);
/* At the start of every NVTX range (its message) and at cuProfilerStart
 * ("cuProfilerStart"): snapshot=range:NAME[@K]. */
void cx_snapshot_range_start(const char *name);
/* Registers the at-exit snapshot once (idempotent, cheap). */
void cx_snapshot_init(void);

/* Runs fn (an exit handler of ours, called outside any wrapper) with this
 * thread's re-entrancy guard held, so that its driver calls are neither
 * recorded nor counted by --audit as the app's (custom_common.c). */
void cx_guarded(void (*fn)(void));

/* ---- stream capture (custom_capture.c) ----
 * The recorder's own driver calls must never break a program's capture: run
 * them between cx_relax_begin/end (RELAXED interaction mode, swapped in with
 * the real cuThreadExchangeStreamCaptureMode and restored), and never
 * synchronise, query or enqueue into a stream for which cx_stream_capturing
 * is 1. */
typedef struct cx_relaxed {
  int swapped;
  CUstreamCaptureMode old;
} cx_relaxed;
void cx_relax_begin(cx_relaxed *r);
void cx_relax_end(cx_relaxed *r);
/* 1 while any capture sequence is active in the process (one atomic load). */
int cx_capture_any(void);
/* 1 while a capture in GLOBAL mode is active. */
int cx_capture_global_any(void);
/* 1 if stream s (as the app named it, with the call's variant) is capturing
 * or its state cannot be asked safely; 0 when no capture is active. */
int cx_stream_capturing(CUstream s, int variant);
/* The calling thread's interaction mode as the app set it
 * (cuThreadExchangeStreamCaptureMode; GLOBAL by default). */
int cx_thread_capture_mode(void);
void cx_capture_begin(CUstream s, int mode);
/* After cuStreamEndCapture / cuStreamDestroy: forgets s once the driver
 * says it no longer captures. */
void cx_capture_end(CUstream s, int variant);

/* ---- asynchronous host-side results (custom_deferred.c) ----
 * Host memory written by an asynchronous copy: rows of `width` bytes, `height`
 * rows `pitch` apart per slice, `depth` slices `slice` apart (1D: height =
 * depth = 1). */
/* 1 if p is device (or managed) memory: a tracked allocation, else what
 * cuPointerGetAttribute says (RELAXED capture mode); 0 for host memory,
 * pinned or pageable (custom_memory.c). */
int cx_ptr_is_device(uint64_t p);
typedef struct cx_rows {
  const uint8_t *base;
  size_t width, height, depth, pitch, slice;
} cx_rows;
/* An asynchronous copy into host memory (DtoH, AtoH, 2D/3D with a host
 * destination) on stream s returned CUDA_SUCCESS in the call c. Returns 1
 * when its bytes may be read now (the copy has completed: pageable
 * destinations, whose copies the driver completes before returning); 0 when
 * they are read later - at the program's own next synchronisation that
 * covers the copy, from a recorder event recorded after it (never by
 * synchronising), and written as a Snapshot{CopyResult, copy_seq} - or never
 * (a capturing stream: the copy runs when the graph runs, see
 * cx_deferred_graph_launch). */
int cx_deferred_copy(cucap_call *c, CUstream s, const cx_rows *rows);
/* The program is about to enqueue work on stream s (with c's variant) that
 * writes host memory `w` (a copy to the host, synchronous or not; the pre
 * hooks of custom_hostwrite.c). A pending copy result overlapping it is
 * read now if its copy has completed, else by a host function enqueued on
 * s before the new work (custom_deferred.c: the ordering argument). One
 * atomic load when nothing is pending. */
void cx_deferred_before_host_write(cucap_call *c, CUstream s, const cx_rows *w);
/* Before a launch of exec on s: the same for the host destinations of the
 * copies captured into its graph. */
void cx_deferred_graph_before_launch(cucap_call *c, uint64_t exec, CUstream s);
/* Reads the deferred copies known complete (recorder events that have
 * fired, host functions that have run), without waiting. Called after the program's synchronisations
 * (stream/event/context sync, successful stream/event queries, synchronous
 * copies); cheap when nothing is pending. */
void cx_deferred_poll(void);
/* Context ctx is about to be destroyed or reset: waits for its pending
 * reads (the destroy waits for the context's work anyway) and forgets its
 * events. ctx 0: every context. */
void cx_deferred_context_loss(uint64_t ctx);
/* Host memory [p, p+size) is about to be freed/unregistered: reads what has
 * completed there; copies still in flight into it are dropped (unverified). */
void cx_deferred_host_free(uint64_t p, uint64_t size);
/* Graph bookkeeping for DtoH copies captured into graphs: at the end of a
 * capture (graph g), at instantiation (g -> exec) and at launch of exec on
 * a stream that is not capturing (reads the host results once the launch
 * has completed, as CopyResult snapshots naming the captured copies). */
void cx_deferred_graph_end_capture(uint64_t stream, uint64_t graph /* 0: failed */);
/* At instantiation (and exec update) in call c: also registers the copy
 * nodes to host memory of a graph the program built with the graph API
 * (or cloned), whose results are read after each launch like captured
 * copies, with c's seq as their copy_seq. */
void cx_deferred_graph_instantiate(cucap_call *c, uint64_t graph, uint64_t exec);
void cx_deferred_graph_launch(cucap_call *c, uint64_t exec, CUstream s);
/* cuGraphDestroy(graph) (exec 0) / cuGraphExecDestroy(exec) (graph 0). */
void cx_deferred_graph_forget(uint64_t graph, uint64_t exec);
/* Between custom_deferred.c and custom_deferred_graph.c: a copy to the host
 * enqueued on a capturing stream (remembered with its graph); a pending
 * result for the copy copy_seq whose bytes land when the work just
 * enqueued on s completes (an event after it; NULL on failure), its graph
 * launch's seq unknown until cx_deferred_pend_launch_seq. */
void cx_deferred_note_capture(cucap_call *c, CUstream s, const cx_rows *rows);
void *cx_deferred_pend_after(cucap_call *c, CUstream s, uint64_t ctx, const cx_rows *rows,
                             uint64_t copy_seq);
void cx_deferred_pend_launch_seq(void *const *pends, int n, uint64_t launch_seq);
/* 1 when any copy result is pending (one atomic load). */
int cx_deferred_pending(void);

/* The program synchronised (cuCtxSynchronize, cuStreamSynchronize,
 * cuEventSynchronize, successful queries): reads deferred copies and
 * snapshots managed memory that the synchronisation covers. kind:
 * CX_SYNC_*; handle: the stream or event (0 for the context). */
enum { CX_SYNC_CTX = 0, CX_SYNC_STREAM = 1, CX_SYNC_EVENT = 2 };
void cx_sync_point(int kind, uint64_t handle, int variant);

/* ---- managed memory (custom_managed.c) ---- */
void cx_managed_add(uint64_t addr, uint64_t size);
void cx_managed_remove(uint64_t addr);
/* 1 when managed allocations exist (one atomic load). */
int cx_managed_any(void);
/* Before a launch of f on stream s with its parameters: uploads (HostWrite
 * snapshots) managed ranges the host changed since the program last
 * synchronised with them, then marks the ranges the launch references as
 * written by stream s. */
void cx_managed_before_launch(uint64_t f, CUstream s, int variant, void **params,
                              void **extra);
/* Before a graph launch / other GPU work whose managed accesses are unknown. */
void cx_managed_before_unknown(CUstream s, int variant);
/* A recorded copy/memset wrote [dst, dst+size) (async: enqueued on s). */
void cx_managed_written(uint64_t dst, uint64_t size, CUstream s, int async);
void cx_managed_event_record(uint64_t event, CUstream s);
void cx_managed_sync(int kind, uint64_t handle);
/* At exit: final SyncPoint snapshot of every managed range. */
void cx_managed_exit(void);

#endif
