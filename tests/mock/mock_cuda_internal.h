/* Internal header of the mock libcuda.so.1 (tests/mock). Owned by tests/mock;
 * nothing outside this directory includes it.
 *
 * The mock runs the CUDA driver API on host memory so that driver-API programs
 * and cucap's interposer/replayer can be exercised in CI without a GPU.
 * Every operation executes synchronously on the calling thread (streams and
 * events exist as handles only); see mock_cuda.md for the full contract.
 *
 * Exported names: mock_cuda_core.c and mock_cuda_module.c are compiled with the
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

struct CUctx_st {
  uint32_t magic;
  CUdevice dev;
  unsigned int flags;
  int primary;
  int refcount; /* primary context only */
};

struct mock_graph;

struct CUstream_st {
  uint32_t magic;
  unsigned int flags;
  int priority;
  unsigned long long id;
  struct mock_graph *capture; /* non-NULL while capturing into this graph */
  int capture_origin;         /* 1 on the stream that began the capture */
  struct CUstream_st *next;   /* global list, under mock_lock */
};

struct CUevent_st {
  uint32_t magic;
  unsigned int flags;
  double time_ms;            /* CLOCK_MONOTONIC when last recorded */
  int recorded;
  struct mock_graph *capture; /* recorded inside a capture */
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
};

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
/* Error code by name (CUDA_ERROR_*), -1 if unknown (mock_cuda_core.c). */
int mock_error_code(const char *name);
/* Live memory by kind from the registry (mock_cuda_core.c): device, host
 * (cuMemAllocHost), registered host, VA reservations, mappings, streams,
 * primary context retains. */
void mock_core_live(long *device, long *host, long *host_reg, long *reserve, long *mapped,
                    long *streams, long *primary_refs);

/* ---- shared state and helpers (mock_cuda_core.c) ----------------------- */
extern pthread_mutex_t mock_lock;
extern int mock_initialized;

CUresult mock_need_ctx(void); /* CUDA_ERROR_NOT_INITIALIZED / INVALID_CONTEXT */
/* Resolves NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD; checks magic. */
CUresult mock_check_stream(CUstream s);
double mock_now_ms(void);

/* Memory type of [p, p+n): CU_MEMORYTYPE_DEVICE for mock device memory,
 * CU_MEMORYTYPE_HOST otherwise (0 if the range straddles an allocation). */
unsigned mock_mem_type(const void *p);
int mock_dev_range_ok(CUdeviceptr p, size_t n);

/* Operations that a capturing stream records instead of executing. */
typedef enum mock_op_kind { MOCK_OP_KERNEL, MOCK_OP_COPY, MOCK_OP_SET, MOCK_OP_HOST, MOCK_OP_EMPTY } mock_op_kind;
typedef struct mock_op {
  mock_op_kind kind;
  /* kernel */
  struct CUfunc_st *func;
  mock_dim3 grid, block;
  unsigned shmem;
  uint8_t *argbuf; /* owned, func->param_bytes */
  /* copy (2D: width bytes x height rows) / set */
  void *dst;
  const void *src;
  size_t width, height, dpitch, spitch;
  uint32_t value;
  unsigned elem; /* memset element size */
  /* host function */
  CUhostFn fn;
  void *user;
} mock_op;

/* Checks a 2D copy and fills *op for it (pointers resolved, device ranges
 * checked); *empty = 1 for a zero-width/height copy (op not filled).
 * Shared by cuMemcpy2D* and graph memcpy nodes. */
CUresult mock_copy2d_op(const CUDA_MEMCPY2D *c, mock_op *op, int *empty);

#define MOCK_MAGIC_NODE 0x6d4e6f64u

/* One node of a CUgraph (mock_cuda_graph.c). Node handles are pointers to
 * these, stable for the graph's lifetime; the graph owns them. */
struct mock_node {
  uint32_t magic;
  CUgraphNodeType type;
  mock_op op;                 /* what the node does (argbuf owned) */
  struct mock_node **deps;    /* owned array, pointers not owned */
  size_t ndeps, capdeps;
  void **kparams;             /* owned: kernelParams view into op.argbuf */
  CUDA_MEMCPY3D copy;         /* memcpy nodes: as given (or synthesized) */
  CUDA_MEMSET_NODE_PARAMS set; /* memset nodes */
  size_t idx;                 /* position in graph->nodes */
  struct mock_graph *graph;
};

/* A CUgraph (MOCK_MAGIC_GRAPH: nodes) or a CUgraphExec (MOCK_MAGIC_GEXEC:
 * ops, a private copy in topological order). */
struct mock_graph {
  uint32_t magic;
  mock_op *ops;
  size_t nops, cap;
  struct mock_node **nodes;
  size_t nnodes, capnodes;
};

/* Appends a captured op to graph g as a node that depends on the node
 * captured before it (the mock executes in order anyway). Takes the op's
 * argbuf on success. */
CUresult mock_graph_append(struct mock_graph *g, const mock_op *op);
/* Builds a kernel op (validating like cuLaunchKernel); op->argbuf is
 * malloc'd and owned by the caller on success. */
CUresult mock_kernel_op(CUfunction f, mock_dim3 grid, mock_dim3 block, unsigned shmem, void **params,
                        void **extra, mock_op *op);

/* Executes an op now, or appends it to the stream's capture graph. The op's
 * argbuf ownership passes to this function. */
CUresult mock_submit(CUstream s, mock_op *op);
CUresult mock_run_op(const mock_op *op);

/* Launch path shared by cuLaunchKernel/Ex/Cooperative. */
CUresult mock_launch(CUfunction f, mock_dim3 grid, mock_dim3 block, unsigned shmem,
                     CUstream s, void **params, void **extra);

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

CUresult mock_alloc_device(CUdeviceptr *out, size_t size);
CUresult mock_free_device(CUdeviceptr p);
CUresult mock_graph_launch(CUgraphExec g, CUstream s);
CUresult mock_begin_capture(CUstream s, CUstreamCaptureMode mode);
CUresult mock_end_capture(CUstream s, CUgraph *out);
CUresult mock_event_record(CUevent e, CUstream s);
CUresult mock_stream_wait_event(CUstream s, CUevent e);

#define MOCK_TRY(expr)                 \
  do {                                 \
    CUresult mock_r_ = (expr);         \
    if (mock_r_ != CUDA_SUCCESS)       \
      return mock_r_;                  \
  } while (0)

#endif
