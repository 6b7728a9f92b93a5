/* Internal header of the mock libcuda.so.1 (tests/mock). Owned by tests/mock;
 * nothing outside this directory includes it.
 *
 * The mock runs the CUDA driver API on host memory so that driver-API programs
 * and cucap's interposer/replayer can be exercised in CI without a GPU.
 * Every operation executes synchronously on the calling thread (streams and
 * events exist as handles only); see mock_cuda.md for the full contract.
 *
 * Exported names: mock_cuda_core.c, mock_cuda_memory.c and mock_cuda_module.c are compiled with the
 * ordinary cuda.h renaming macros, so defining `cuMemAlloc` emits the exported
 * symbol `cuMemAlloc_v2` exactly as applications link to it.
 * Graphs (capture nodes, explicit construction, instantiate, launch) live in
 * mock_cuda_graph.c.
 * mock_cuda_stream_api.c is compiled twice, once plainly and once with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, which yields the `_ptds` / `_ptsz`
 * variants from the same source. */
#ifndef MOCK_CUDA_INTERNAL_H
#define MOCK_CUDA_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- handles ---------------------------------------------------------- */
#define MOCK_MAGIC_CTX 0x6d437478u
#define MOCK_MAGIC_STREAM 0x6d537472u
#define MOCK_MAGIC_EVENT 0x6d457674u
#define MOCK_MAGIC_MODULE 0x6d4d6f64u
#define MOCK_MAGIC_FUNC 0x6d46756eu
#define MOCK_MAGIC_LIBRARY 0x6d4c6962u
#define MOCK_MAGIC_LINK 0x6d4c6e6bu
#define MOCK_MAGIC_GRAPH 0x6d477270u
#define MOCK_MAGIC_GEXEC 0x6d476578u
/* An object its context took with it (cuCtxDestroy frees the context's
 * streams, events, modules and memory on the real driver). The struct is kept
 * so that a later use is caught deterministically: mock_dead_use aborts. */
#define MOCK_MAGIC_DEAD 0x6d446564u

struct CUctx_st {
  uint32_t magic;
  CUdevice dev;
  unsigned int flags;
  int primary;
  int refcount; /* primary context only */
};

struct mock_graph;
struct mock_queue;

struct CUstream_st {
  uint32_t magic;
  unsigned int flags;
  int priority;
  unsigned long long id;
  struct mock_graph *capture; /* non-NULL while capturing into this graph */
  int capture_origin;         /* 1 on the stream that began the capture */
  struct CUstream_st *next;   /* global list, under mock_lock */
  CUcontext owner;            /* context current at creation */
  struct mock_queue *q;       /* CUCAP_MOCK_ASYNC=1: work not run yet (mock_cuda_capture.c) */
};

struct CUevent_st {
  uint32_t magic;
  unsigned int flags;
  double time_ms;            /* CLOCK_MONOTONIC when last recorded */
  int recorded;
  struct mock_graph *capture; /* recorded inside a capture */
  CUcontext owner;            /* context current at creation */
  struct CUevent_st *next;    /* global list, under mock_lock */
  /* CUCAP_MOCK_ASYNC=1: the event has fired when done_gen == rec_gen */
  unsigned long rec_gen, done_gen;
  struct CUstream_st *rec_stream;
};

/* Parameter layout of a kernel, from EIATTR_KPARAM_INFO or the PTX .entry. */
typedef struct mock_param {
  uint32_t offset;
  uint32_t size;
} mock_param;

/* Per-thread view handed to a host kernel implementation. */
typedef struct mock_dim3 {
  unsigned x, y, z;
} mock_dim3;
typedef struct mock_thread {
  mock_dim3 blockIdx, threadIdx, blockDim, gridDim;
  mock_dim3 clusterDim;          /* 1,1,1 unless launched in clusters */
  const struct CUfunc_st *func;  /* the kernel (attribute probes read it) */
} mock_thread;

/* Host implementation of a kernel, called once per CUDA thread. args[i]
 * points at the value of parameter i (like kernelParams). */
typedef void (*mock_host_kernel)(const mock_thread *t, void **args);

/* Looks a kernel up in the built-in table (mock_cuda_kernels.c); NULL if the
 * mock has no host implementation for it. */
mock_host_kernel mock_kernel_lookup(const char *name);

struct CUfunc_st {
  uint32_t magic;
  struct CUmod_st *mod;
  char *name;        /* owned */
  int nparams;       /* -1 when the image gave no layout */
  mock_param *params; /* owned, nparams entries */
  uint32_t param_bytes;
  mock_host_kernel impl; /* NULL: launches are no-ops */
  struct CUfunc_st *next;
  /* attributes (mock_cuda_attr.c): set through cuFuncSetAttribute (attr,
   * bit i of attr_set) or cuKernelSetAttribute (kattr, kattr_set); the
   * function's own setting wins, as with the real driver */
  int attr[CU_FUNC_ATTRIBUTE_MAX], kattr[CU_FUNC_ATTRIBUTE_MAX];
  unsigned attr_set, kattr_set;
  int cache_config, kcache_config, kcache_set, shmem_config;
};

/* Effective value of a function attribute (mock_cuda_attr.c). */
int mock_func_attr(const struct CUfunc_st *f, CUfunction_attribute a);
int mock_func_cache_config(const struct CUfunc_st *f);
int mock_ctx_cache_config(void);
int mock_ctx_shmem_config(void);
size_t mock_ctx_limit(CUlimit l); /* mock_cuda_core.c */
void mock_heap_touch(void);        /* a kernel used the device heap: its size is fixed */
/* Cluster dims of a launch: `want` from CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
 * (0,0,0: none given), checked against the grid and the function's
 * REQUIRED_CLUSTER_* / NON_PORTABLE_CLUSTER_SIZE_ALLOWED attributes. */
CUresult mock_cluster_dims(const struct CUfunc_st *f, mock_dim3 grid, mock_dim3 want,
                           mock_dim3 *out);

/* One global variable of a loaded module (backed by mock device memory). */
typedef struct mock_global {
  char *name;
  CUdeviceptr ptr;
  size_t size;
} mock_global;

struct CUmod_st {
  uint32_t magic;
  uint8_t *image; /* owned copy of the selected cubin or PTX text */
  size_t image_size;
  int is_ptx;
  struct CUfunc_st *funcs; /* every kernel of the image, created at load */
  mock_global *globals;
  size_t nglobals;
  CUcontext owner;         /* context current at load; NULL for a library's */
  struct CUlib_st *lib;    /* the library whose module this is, or NULL */
  struct CUmod_st *next;   /* global list of loaded modules (mock_cuda_module.c) */
};

/* ---- image parsing (mock_cuda_image.c) ---------------------------------- */
typedef struct mock_kernel_info {
  char *name; /* malloc'd */
  int nparams;
  mock_param *params; /* malloc'd */
  uint32_t param_bytes;
} mock_kernel_info;

typedef struct mock_image_info {
  const uint8_t *code; /* points into the caller's image: cubin or PTX */
  size_t code_size;
  int is_ptx;
  mock_kernel_info *kernels;
  size_t nkernels;
  /* globals: name, size and initial bytes (NULL = zero) */
  struct {
    char *name;
    size_t size;
    const uint8_t *init;
  } * globals;
  size_t nglobals;
} mock_image_info;

/* Parses a fatbin, fatbin wrapper, ELF cubin or NUL-terminated PTX image.
 * `size` may be 0 when unknown (cuModuleLoadData). Returns CUDA_SUCCESS,
 * CUDA_ERROR_INVALID_IMAGE or CUDA_ERROR_NO_BINARY_FOR_GPU. Free with
 * mock_image_free. */
CUresult mock_image_parse(const void *image, size_t size, mock_image_info *out);
void mock_image_free(mock_image_info *info);
/* Size of a known image (fatbin from its header, ELF from its section
 * headers, PTX via strlen); 0 if not recognised. */
size_t mock_image_size(const void *image);

/* ---- test controls (mock_cuda_test.c) ----------------------------------- */
/* Live objects per kind, for the leak check (CUCAP_MOCK_LEAK_CHECK=1) and
 * cuMockLiveObjects. Memory (device/host/VMM) is counted from the registry
 * and streams from their list instead. */
typedef enum mock_live_kind {
  MOCK_LIVE_CTX, MOCK_LIVE_PHYS, MOCK_LIVE_EVENT, MOCK_LIVE_MODULE, MOCK_LIVE_LIBRARY,
  MOCK_LIVE_LINK, MOCK_LIVE_GRAPH, MOCK_LIVE_GEXEC, MOCK_LIVE_KINDS
} mock_live_kind;
extern long mock_live[MOCK_LIVE_KINDS];
#define MOCK_LIVE(kind, delta) __atomic_add_fetch(&mock_live[kind], (delta), __ATOMIC_RELAXED)
/* Called by cuInit: reads the CUCAP_MOCK_* controls, arms the leak check. */
void mock_test_init(void);
/* CUCAP_MOCK_MEM_LIMIT (bytes) or 80 GiB: device memory, as reported and
 * enforced. */
size_t mock_total_mem(void);
/* CUCAP_MOCK_NO_KERNELS=1: launches do not run the host kernels (a fuzzed
 * capture may pass any pointer to them); everything else is unchanged. */
int mock_no_kernels(void);
/* cuGetProcAddress hook for CUCAP_MOCK_FAIL (error injection): returns fn,
 * or a trampoline that fails the chosen call of `name`. */
void *mock_fail_wrap(const char *name, void *fn);
/* Error code by name (CUDA_ERROR_*), -1 if unknown (mock_cuda_proc.c). */
int mock_error_code(const char *name);
/* Live memory by kind from the registry (mock_cuda_core.c, mock_cuda_memory.c): device, host
 * (cuMemAllocHost), registered host, VA reservations, mappings, streams,
 * primary context retains. */
void mock_core_live(long *device, long *host, long *host_reg, long *reserve, long *mapped,
                    long *streams, long *primary_refs);
/* mock_cuda_memory.c, mock_lock held: unmaps a destroyed context's device and
 * page-locked host allocations; counts the registry's entries by kind. */
void mock_mem_release_ctx_locked(CUcontext c);
void mock_mem_live_locked(long *device, long *host, long *host_reg, long *reserve, long *mapped);
/* The primary context (mock_cuda_core.c). */
CUcontext mock_primary_ctx(void);

/* ---- shared state and helpers (mock_cuda_core.c) ----------------------- */
extern pthread_mutex_t mock_lock;
extern int mock_initialized;

CUresult mock_need_ctx(void); /* CUDA_ERROR_NOT_INITIALIZED / INVALID_CONTEXT */
CUcontext mock_current_ctx(void);
/* A handle whose context was destroyed was passed to the driver: on the real
 * driver that is a use after free. Prints what and aborts. */
void mock_dead_use(const char *what, const void *handle) __attribute__((noreturn));
/* cuCtxDestroy: modules loaded in c die with it (mock_cuda_module.c), so do
 * its arrays, mipmapped arrays and texture/surface objects
 * (mock_cuda_array.c). */
void mock_modules_ctx_destroyed(CUcontext c);
void mock_arrays_ctx_destroyed(CUcontext c);
void mock_graphs_ctx_destroyed(CUcontext c); /* its graph execs (mock_cuda_graph.c) */
/* Resolves NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD; checks magic. */
CUresult mock_check_stream(CUstream s);
double mock_now_ms(void);

/* Memory type of [p, p+n): CU_MEMORYTYPE_DEVICE for mock device memory,
 * CU_MEMORYTYPE_HOST otherwise (0 if the range straddles an allocation). */
unsigned mock_mem_type(const void *p);
int mock_dev_range_ok(CUdeviceptr p, size_t n);
/* Memset of [p, p+n) to byte b (MOCK_OP_SET). Zeroing whole pages of one
 * device allocation or mapping gives them back to the kernel (MADV_DONTNEED
 * / MADV_REMOVE: they read as zeros again) instead of writing them: a
 * replay zeroes every allocation and fixed range it makes, and writing
 * hundreds of MiB per replay (faulting in every page) was most of what
 * fuzz_replay spent. Anything else is a plain memset. */
void mock_fill(void *p, int b, size_t n);

/* Operations that a capturing stream records instead of executing. */
typedef enum mock_op_kind {
  MOCK_OP_KERNEL, MOCK_OP_COPY, MOCK_OP_SET, MOCK_OP_HOST, MOCK_OP_EMPTY,
  MOCK_OP_COND,   /* conditional node: runs subs[] by the handle's value */
  MOCK_OP_CHILD,  /* child graph node: runs subs[0] */
  MOCK_OP_EVENT,  /* event record node */
  MOCK_OP_MARK    /* CUCAP_MOCK_ASYNC: an event fires (queues only) */
} mock_op_kind;
typedef struct mock_op {
  mock_op_kind kind;
  /* kernel */
  struct CUfunc_st *func;
  mock_dim3 grid, block, cluster;
  unsigned shmem;
  uint8_t *argbuf; /* owned, func->param_bytes */
  /* copy (2D: width bytes x height rows; 3D: depth slices of dslice/sslice
   * bytes, depth 0 = 1) / set */
  void *dst;
  const void *src;
  size_t width, height, dpitch, spitch;
  size_t depth, dslice, sslice;
  uint32_t value;
  unsigned elem; /* memset element size */
  /* host function */
  CUhostFn fn;
  void *user;
  /* graph-only ops (mock_cuda_graph_ext.c) */
  unsigned long long cond;      /* COND: the conditional handle */
  int cond_type;                /* COND: CUgraphConditionalNodeType */
  struct mock_graph **subs;     /* exec op: COND bodies / CHILD graph, as execs (owned) */
  unsigned nsubs;
  CUevent event;                /* EVENT; MARK: the event that fires */
  int disabled;                 /* exec op: cuGraphNodeSetEnabled(0) */
  const struct mock_node *node; /* exec op: the graph node it was made from */
  unsigned long gen;            /* MARK: the event's record generation */
} mock_op;

/* Checks a 2D copy and fills *op for it (pointers resolved, device and
 * array ranges checked); *empty = 1 for a zero-width/height copy (op not
 * filled). Shared by cuMemcpy2D* and graph memcpy nodes. */
CUresult mock_copy2d_op(const CUDA_MEMCPY2D *c, mock_op *op, int *empty);
/* The same for a 3D copy (mock_cuda_array.c). */
CUresult mock_copy3d_op(const CUDA_MEMCPY3D *c, mock_op *op, int *empty);

/* ---- CUDA arrays, texture and surface objects (mock_cuda_array.c) -------
 * Arrays are host memory: elements of width x max(height,1) x max(depth,1),
 * rows packed (pitch = width * element size). Texture/surface handles come
 * from a counter starting at CUCAP_MOCK_OBJ_BASE (default 0x100), so a
 * replay can be given other numbers than the recording saw. */
#define MOCK_MAGIC_ARRAY 0x6d417272u
#define MOCK_MAGIC_MIPMAP 0x6d4d6970u
/* Address of byte x of row y, slice z of array a, checking that a box of
 * width bytes x height x depth starting there fits; NULL if not. *pitch and
 * *slice receive the array's row and slice strides. */
uint8_t *mock_array_at(CUarray a, size_t x, size_t y, size_t z, size_t width, size_t height,
                       size_t depth, size_t *pitch, size_t *slice);
/* 1D array copies (offset in bytes into the array's data). */
CUresult mock_array_copy1d(void *dst, CUarray da, size_t doff, const void *src, CUarray sa,
                           size_t soff, size_t n, int dst_dev, int src_dev, CUstream s);
/* Point-sampled texture read (host kernels): element bytes of the texel at
 * (x, y, z) (unnormalized unless the texture says so) and mipmap level lod
 * into out (up to out_size bytes); 0 and zeros for an invalid handle. */
int mock_tex_fetch(unsigned long long tex, float x, float y, float z, float lod, void *out,
                   size_t out_size);
/* Surface store of `size` bytes at byte x, row y, slice z. */
int mock_surf_write(unsigned long long surf, const void *val, size_t size, int x, int y, int z);

#define MOCK_MAGIC_NODE 0x6d4e6f64u

/* One node of a CUgraph (mock_cuda_graph.c). Node handles are pointers to
 * these, stable for the graph's lifetime; the graph owns them. */
struct mock_node {
  uint32_t magic;
  CUgraphNodeType type;
  mock_op op;                 /* what the node does (argbuf owned) */
  struct mock_node **deps;    /* owned array, pointers not owned */
  CUgraphEdgeData *edges;     /* owned, parallel to deps (edge data kept, the
                                 mock runs every edge as a full dependency) */
  size_t ndeps, capdeps;
  void **kparams;             /* owned: kernelParams view into op.argbuf */
  CUDA_MEMCPY3D copy;         /* memcpy nodes: as given (or synthesized) */
  CUDA_MEMSET_NODE_PARAMS set; /* memset nodes */
  size_t idx;                 /* position in graph->nodes */
  struct mock_graph *graph;
  /* mock_cuda_graph_ext.c */
  struct mock_graph **bodies; /* conditional: body graphs; child: [0] = the copy (owned) */
  unsigned nbodies;
  CUDA_MEM_ALLOC_NODE_PARAMS alloc; /* mem alloc node (dptr: its memory, owned) */
  CUdeviceptr free_ptr;       /* mem free node */
  CUDA_HOST_NODE_PARAMS host; /* host node */
  const struct mock_node *cloned_from; /* cuGraphClone: the original */
};

/* A CUgraph (MOCK_MAGIC_GRAPH: nodes) or a CUgraphExec (MOCK_MAGIC_GEXEC:
 * ops, a private copy in topological order). */
struct mock_graph {
  uint32_t magic;
  /* while capturing into it (mock_cuda_capture.c) */
  int cap_mode;               /* CUstreamCaptureMode of cuStreamBeginCapture */
  int invalidated;            /* a prohibited call happened: EndCapture fails */
  struct mock_graph *dead_next; /* kept on mock_dead_graphs once ended invalidated */
  pthread_t owner;            /* thread that began the capture */
  unsigned long long cap_id;
  mock_op *ops;
  size_t nops, cap;
  struct mock_node **nodes;
  size_t nnodes, capnodes;
  struct mock_node *cap_tail; /* while captured into: what the next captured node depends on */
  /* an exec made by cuGraphInstantiate*: the context it was made in (it dies
   * with it: MOCK_MAGIC_DEAD, a later use aborts) and the list of them */
  CUcontext exec_owner;
  struct mock_graph *next_exec;
};

/* Appends a captured op to graph g as a node that depends on the node
 * captured before it (the mock executes in order anyway). Takes the op's
 * argbuf on success. */
CUresult mock_graph_append(struct mock_graph *g, const mock_op *op);
/* Adds a node running *op after deps (argbuf taken on success); the node's
 * type follows the op (MOCK_OP_EMPTY: `type` is used, for alloc/free/wait
 * nodes). mock_cuda_graph.c. */
CUresult mock_graph_add(struct mock_graph *g, const mock_op *op, CUgraphNodeType type,
                        const CUgraphNode *deps, size_t nd, struct mock_node **out);
struct mock_graph *mock_graph_new(void);
void mock_graph_free(struct mock_graph *g); /* graph or exec, recursively */
/* Instantiates g into a new exec (NULL: out of memory / cycle). */
CUresult mock_graph_instantiate(struct mock_graph *g, struct mock_graph **out);
/* Runs an exec's ops in order (no stream checks; conditionals recurse). */
CUresult mock_graph_run(const struct mock_graph *x);
/* Deep copy of a graph (nodes, edges, bodies); NULL on out of memory. */
struct mock_graph *mock_graph_clone(const struct mock_graph *g);
struct mock_graph *mock_graph_of(void *h); /* a CUgraph handle, or NULL */
struct mock_graph *mock_exec_of(void *h);  /* a CUgraphExec handle, or NULL */
struct mock_node *mock_node_of(CUgraphNode h);
/* Conditional handles (mock_cuda_graph_ext.c): the value kernels set with
 * cudaGraphSetConditional (mock kernels call mock_cond_set). */
void mock_cond_set(unsigned long long h, unsigned value);
unsigned mock_cond_get(unsigned long long h);
/* Before a launch: handles with CU_GRAPH_COND_ASSIGN_DEFAULT get their
 * default back (every conditional op of the exec, recursively). */
void mock_cond_reset(const struct mock_graph *x);
/* Builds a kernel op (validating like cuLaunchKernel); op->argbuf is
 * malloc'd and owned by the caller on success. */
CUresult mock_kernel_op(CUfunction f, mock_dim3 grid, mock_dim3 block, unsigned shmem, void **params,
                        void **extra, mock_op *op);

/* Executes an op now, or appends it to the stream's capture graph. The op's
 * argbuf ownership passes to this function. */
CUresult mock_submit(CUstream s, mock_op *op);
CUresult mock_run_op(const mock_op *op);
/* Test-tool hook (mock_tool.h): SUBMIT / MODULE events, and mock_run_op
 * with a RUN event around it. */
void mock_tool_submit(CUstream s, int capturing);
void mock_tool_call(void);  /* a driver call a tool sees (MOCK_TOOL_CALL) */
extern int mock_tool_graph; /* a graph launch is running its ops */
void mock_tool_module(const void *image, size_t size);
CUresult mock_run_op_traced(const mock_op *op, CUstream s);

/* Launch path shared by cuLaunchKernel/Ex/Cooperative. */
CUresult mock_launch(CUfunction f, mock_dim3 grid, mock_dim3 block, unsigned shmem,
                     CUstream s, void **params, void **extra);
/* cuLaunchKernelEx: checks every launch attribute (mock_cuda_attr.c). */
CUresult mock_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra);

/* Stream-variant entry points: name, minimal version, pointer. */
typedef struct mock_proc {
  const char *name;
  int min_version;
  void *fn;
} mock_proc;
extern const mock_proc mock_procs_legacy[];
extern const mock_proc mock_procs_pt[];
extern const mock_proc mock_procs_module[];
extern const mock_proc mock_procs_graph[]; /* mock_cuda_graph.c */
extern const mock_proc mock_procs_graph_ext[]; /* mock_cuda_graph_ext.c */
extern const mock_proc mock_procs_attr[];  /* mock_cuda_attr.c */
extern const mock_proc mock_procs_array[]; /* mock_cuda_array.c */
extern const mock_proc mock_procs_green[]; /* mock_cuda_green.c */
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice d);

CUresult mock_alloc_device(CUdeviceptr *out, size_t size);
CUresult mock_free_device(CUdeviceptr p);
CUresult mock_graph_launch(CUgraphExec g, CUstream s);
CUresult mock_begin_capture(CUstream s, CUstreamCaptureMode mode);
/* cuStreamBeginCaptureToGraph: capture into the existing graph g (appended
 * after deps, or after its last node when nd = 0). */
CUresult mock_begin_capture_to(CUstream s, struct mock_graph *g, CUstreamCaptureMode mode);
/* cuStreamUpdateCaptureDependencies_v2 (cuStreamGetCaptureInfo reports
 * the same tail: mock_cuda_stream_api.c). */
CUresult mock_capture_set_deps(CUstream s, CUgraphNode *deps, size_t nd, unsigned flags);
/* The graph s is capturing into, or NULL. */
struct mock_graph *mock_stream_capture_graph(CUstream s);
CUresult mock_end_capture(CUstream s, CUgraph *out);
CUresult mock_event_record(CUevent e, CUstream s);
CUresult mock_stream_wait_event(CUstream s, CUevent e);

/* ---- capture rules, asynchronous execution, sync counts ------------------
 * (mock_cuda_capture.c; see mock_cuda.md "Capture rules" / "Asynchronous
 * mode"). */
int mock_async(void); /* CUCAP_MOCK_ASYNC=1 */
extern struct CUstream_st *mock_all_streams; /* mock_cuda_core.c, under mock_lock */
/* A potentially unsafe call (allocation, synchronisation, query, ...):
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that
 * prohibit it, when the calling thread's interaction mode and the active
 * captures forbid it (cuThreadExchangeStreamCaptureMode rules). */
CUresult mock_unsafe(void);
/* Work on the legacy stream (s NULL in the legacy build, or
 * CU_STREAM_LEGACY) while a blocking stream captures:
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, invalidating those captures. */
CUresult mock_legacy_check(CUstream s, int per_thread_build);
/* 1 when some capture is active; 1 when g is an active capture. */
int mock_capture_any(void);
int mock_capture_active(const struct mock_graph *g);
void mock_capture_register(struct mock_graph *g, CUstream s, CUstreamCaptureMode mode);
void mock_capture_unregister(const struct mock_graph *g);
/* Invalidates g (or every active capture when g is NULL). */
void mock_capture_invalidate(struct mock_graph *g);
/* Asynchronous mode: queue op on s (argbuf ownership passes). */
CUresult mock_enqueue(CUstream s, mock_op *op);
void mock_drain_stream(CUstream s);
int mock_stream_pending(CUstream s); /* work queued on s */
/* Runs e's stream up to its latest record; 1 if that had not run yet. */
int mock_drain_event(CUevent e);
void mock_drain_all(int blocking_only);
void mock_stream_gone(CUstream s); /* drains and frees the queue */
/* The queues' lock, taken before mock_lock around every unlink from
 * mock_all_streams: mock_drain_all walks that list holding only it (another
 * thread's cuStreamDestroy raced with a cuMemFree's drain before). */
void mock_queue_lock(void);
void mock_queue_unlock(void);
/* CUCAP_MOCK_SYNC_LOG=file: calls of cuCtx/cuStream/cuEventSynchronize are
 * counted and appended to file at exit. */
enum { MOCK_SYNC_CTX, MOCK_SYNC_STREAM, MOCK_SYNC_EVENT };
void mock_count_sync(int kind);

/* Returns CUDA_ERROR_NOT_INITIALIZED before cuInit. */
#define NEED_INIT() \
  do { if (!__atomic_load_n(&mock_initialized, __ATOMIC_SEQ_CST)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define MOCK_TRY(expr)                 \
  do {                                 \
    CUresult mock_r_ = (expr);         \
    if (mock_r_ != CUDA_SUCCESS)       \
      return mock_r_;                  \
  } while (0)

#endif
