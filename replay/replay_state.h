/* replay_state.h - the replayer's run state, shared by replay_exec.c and
 * replay_verify.c. Internal. */
#ifndef CUCAP_REPLAY_STATE_H
#define CUCAP_REPLAY_STATE_H

#include "cucap_schema.h"
#include "replay_internal.h"

typedef struct rp_func {
  uint64_t handle;      /* recorded */
  uint64_t live;        /* CUfunction / CUkernel */
  uint64_t live_fn;     /* CUfunction for a CUkernel (lazily) */
  int kind;             /* cucap.fb.FunctionKind */
  char name[128];
  cucap_fb_param_info *params;
  size_t nparams;
  uint32_t param_bytes;
  size_t layout_bytes;  /* max(param_bytes, end of the last parameter) */
  int layout_checked;   /* rp_func_layout ran */
} rp_func;

typedef struct rp_region {   /* a snapshot region kept beyond its record */
  uint64_t addr, size;
  cucap_hash128 data;
} rp_region;

typedef struct rp_pending_hash { /* LaunchHash seen before its launch ran */
  uint64_t launch_index, seq, rec_index;
  rp_region *regions;        /* data = the content hash */
  size_t n;
} rp_pending_hash;

typedef struct rp_image_ref { /* module image to check against this GPU */
  uint64_t rec_index, seq;
  cucap_hash128 image;
} rp_image_ref;

#define RP_STAGING_SLOTS 2

typedef struct rp_state {
  const cucap_replay_options *o;
  cucap_replay_report *rep;
  cucap_reader *r;
  rp_driver d;
  CUdevice dev;
  int cc;                     /* e.g. 90 */
  int rec_driver;             /* driver version noted by the recorder */
  CUcontext primary, cur;
  int primary_retained;
  rp_map ctx, ctx_created, stream, event, module, library, func, graph, gexec;
  rp_map tid_ctx;             /* recording tid -> live current context */
#define RP_CTX_STACK 64
  uint64_t ctx_stack[RP_CTX_STACK]; /* cuCtxPush/Pop */
  size_t nctx_stack;
  rp_map launch_fn;           /* launch_index -> func index + 1 */
  rp_func *funcs;
  size_t nfuncs, capfuncs;
  rp_mem mem;
  /* HtoD staging: pinned ping-pong buffers, each guarded by an event */
  void *stage[RP_STAGING_SLOTS];
  size_t stage_cap[RP_STAGING_SLOTS];
  int stage_pinned[RP_STAGING_SLOTS];
  CUevent stage_ev[RP_STAGING_SLOTS];
  int stage_used[RP_STAGING_SLOTS];
  unsigned stage_next;
  /* DtoH scratch (pinned) and a second buffer for expected bytes */
  void *scratch;
  size_t scratch_cap;
  int scratch_pinned;
  void *expect;
  size_t expect_cap;
  int expect_pinned;
  /* buffers that must outlive the op (graph capture, PTX copies) */
  void **keep;
  size_t nkeep, capkeep;
  int capturing;              /* streams currently in capture */
  rp_pending_hash *pending;   /* --verify=launch */
  size_t npending, cappending;
  rp_image_ref *images;       /* module loads seen by the scan */
  size_t nimages, capimages;
  rp_region *restore;         /* first Snapshot(BeforeLaunch) */
  size_t nrestore;
  uint64_t rec_index;         /* 0-based record position in the file */
  uint64_t cur_seq;
  int warned_ctx, warned_stream, warned_reloc_ptr, warned_global, warned_layout;
  /* one-entry caches of the per-launch lookups (reset where maps change) */
  uint64_t last_fn_handle, last_fn_idx;       /* idx + 1; 0 = empty */
  uint64_t last_stream_rec, last_stream_live; /* rec 0 = empty */
  uint64_t last_ctx_rec, last_ctx_live;       /* rec 0 = empty */
  int failed;                 /* a driver call failed: stop */
  uint64_t dev_mem;           /* this GPU's memory (0: unknown): no host
                                 buffer for one op is ever larger */
} rp_state;

/* replay_run.c: live objects of the handle maps (stream, event, module,
 * library, graph, gexec). rp_live_put maps recorded handle h to a new live
 * object; a handle still mapped (its destroy was not recorded, or the handle
 * was reused) has its old object destroyed first, so nothing the replay
 * created is lost; on out of memory the new object is destroyed, the replay
 * stops and 0 is returned. */
void rp_live_destroy(rp_state *R, const rp_map *mp, uint64_t live);
int rp_live_put(rp_state *R, rp_map *mp, uint64_t h, uint64_t live);

/* replay_image.c: cuModuleLoadData & co. take no size, the driver finds
 * the end of an image by parsing it. Returns img when it is a fatbin/cubin
 * whose parsed extent lies inside its isz bytes (or PTX with its NUL);
 * otherwise a NUL-terminated, zero-padded copy in *copy (malloc'ed: the
 * caller keeps it as long as the module and frees it). NULL with *why for an
 * image that must not be loaded (a damaged fatbin/cubin, a fatbinary
 * wrapper); NULL with *why NULL when out of memory. */
const void *rp_image_for_driver(const void *img, uint64_t isz, void **copy,
                                const char **why);

/* replay_params.c: makes fi's parameter layout the driver's own when the
 * driver can tell (cuFuncGetParamInfo) and it differs from the recorded
 * one - the driver reads kernelParams by its layout, so a recorded layout
 * with fewer or smaller parameters would make it read past the argument
 * block. Once per function, when its CUfunction (live_fn) is known. */
#define RP_MAX_PARAMS 1024
void rp_func_layout(rp_state *R, rp_func *fi);

/* replay_exec.c */
void rp_set_error(rp_state *R, cucap_status st, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int rp_cu(rp_state *R, CUresult r, const char *call); /* 0 + error if failed */
cucap_hash128 rp_h(const cucap_fb_hash128 *h);
const char *rp_unreplayable(const cucap_fb_record *rec); /* NULL: replayable */
int rp_alloc_is_device(int kind);
uint64_t rp_alloc_size(const cucap_fb_alloc *a);
uint64_t rp_tr(rp_state *R, uint64_t addr);
/* The device side of a recorded 2D/3D copy: memory type, address (already
 * translated) and the offsets/pitches from its geometry. */
void rp_copy2d_src_dev(CUDA_MEMCPY2D *p, const cucap_fb_copy_geometry *g, uint64_t dev);
void rp_copy2d_dst_dev(CUDA_MEMCPY2D *p, const cucap_fb_copy_geometry *g, uint64_t dev);
void rp_copy3d_src_dev(CUDA_MEMCPY3D *p, const cucap_fb_copy_geometry *g, uint64_t dev);
void rp_copy3d_dst_dev(CUDA_MEMCPY3D *p, const cucap_fb_copy_geometry *g, uint64_t dev);
void rp_execute(rp_state *R, const cucap_fb_record *rec);

/* replay_verify.c */
void rp_verify_bytes(rp_state *R, const char *what, const void *got,
                     const void *want, uint64_t size, uint64_t addr);
cucap_status rp_read_device(rp_state *R, uint64_t live, uint64_t size,
                            void **out);
void rp_verify_snapshot(rp_state *R, const cucap_fb_snapshot *s);
void rp_verify_launch_hash(rp_state *R, const cucap_fb_launch_hash *h);
/* After launch `li` executed: checks LaunchHash records that came first. */
void rp_verify_launch_done(rp_state *R, uint64_t li);
void rp_verify_pending_free(rp_state *R);
int rp_grow(void **buf, size_t *cap, size_t need, int *pinned, rp_state *R);

#endif
