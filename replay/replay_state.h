/* replay_state.h - the replayer's run state, rp_state: a shared core and
 * parts owned by the files that use them (modules and functions, contexts
 * and lifetimes, staging, observer dispatch, run control, limits), and the
 * functions replay/'s files offer each other over it. Internal. */
#ifndef CUCAP_REPLAY_STATE_H
#define CUCAP_REPLAY_STATE_H

#include "cucap_replay_observer.h"
#include "cucap_schema.h"
#include "replay_internal.h"

typedef struct rp_func {
  uint64_t handle;      /* recorded */
  uint64_t live;        /* CUfunction / CUkernel */
  uint64_t live_fn;     /* CUfunction for a CUkernel (lazily) */
  uint64_t live_fn_ctx; /* the context live_fn was obtained in (CUkernel) */
  int kind;             /* cucap.fb.FunctionKind */
  char *name;           /* full (mangled) name, owned; freed with funcs[] */
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

typedef struct rp_image_ref { /* module image to check against this GPU */
  uint64_t rec_index, seq;
  cucap_hash128 image;
  /* set by rp_check_images: the mapped image (the reader's; NULL when its
   * blob is missing) and its format (CUCAP_IMAGE_UNKNOWN if not detected) */
  const void *data;
  uint64_t size;
  int format;
} rp_image_ref;

#define RP_STAGING_SLOTS 2

struct rp_objects; /* replay_object.c: arrays, mipmapped arrays, texture and
                      surface objects, recorded -> live handles */
struct rp_attrs;   /* replay_attr.c: attribute calls waiting for their function */

/* The state of rp_state comes in parts, each owned by the file named in its
 * comment: the owner keeps the part's invariants; other files read it or
 * call the owner's functions (replay_state.h lists them below). */

/* Modules, images and functions: owner replay_exec_kernel.c (Module,
 * Function and Launch ops), with replay_lookup.c (libmod and lookups by
 * name), replay_modkeep.c (mk, mk_fresh, mk_off, hold_unloads, held: only it,
 * replay_run.c's pass control and the Module op's test of mk touch them),
 * replay_plainelf.c (pe: it alone) and replay_image.c; images is filled by
 * replay_run.c's scan. */
typedef struct rp_code {
  cucap_map module, library, func;
  cucap_map libmod;              /* replay_lookup.c: library modules, never unloaded */
  rp_func *funcs;
  size_t nfuncs, capfuncs;
  /* one-entry cache of the per-launch function lookup (reset where funcs[]
   * changes); idx + 1, 0 = empty */
  uint64_t last_fn_handle, last_fn_idx;
  int warned_global, warned_layout;
  rp_image_ref *images;       /* module loads seen by the scan */
  size_t nimages, capimages;
  struct rp_plainelf *pe;     /* replay_plainelf.c: images as plain ELFs */
  struct rp_modkeep *mk;      /* replay_modkeep.c: modules kept across passes */
  int mk_fresh;               /* cucap_replay_session_fresh_modules: next pass */
  int mk_off;                 /* modules are no longer kept (after mk_fresh) */
  int hold_unloads;           /* cucap_replay_session_hold_unloads */
  struct rp_held *held;       /* replay_modkeep.c: unloads held to the end */
} rp_code;

/* Contexts, streams, events and lifetimes: owner replay_lifetime.c (what
 * dies with a context, buffers kept past their op), with replay_exec.c's
 * Context/Stream/Event ops and the per-record context and stream lookups;
 * replay_run.c creates and tears down the maps. */
typedef struct rp_ctxs {
  CUcontext primary, cur;
  int primary_retained;
  cucap_map ctx, ctx_created, stream, event, graph, gexec;
  /* keep_ctx (cucap_replay_session_keep_contexts): contexts the program
   * creates live for the whole run, recorded handle -> live context; they
   * are not in ctx_created (replay_lifetime.c) */
  int keep_ctx;
  cucap_map ctx_kept;
  cucap_map tid_ctx;             /* recording tid -> live current context */
  cucap_map owner;               /* live object -> live context it was made in */
#define RP_CTX_STACK 64
  uint64_t ctx_stack[RP_CTX_STACK]; /* cuCtxPush/Pop */
  size_t nctx_stack;
  /* one-entry caches of the per-record lookups (reset where maps change) */
  uint64_t last_stream_rec, last_stream_live; /* rec 0 = empty */
  uint64_t last_ctx_rec, last_ctx_live;       /* rec 0 = empty */
  int warned_ctx, warned_stream;
  /* buffers that must outlive the op (graph capture, PTX copies); only
   * replay_lifetime.c touches nkeep and capkeep */
  void **keep;
  unsigned char *keep_pinned; /* 1: page-locked (rp_host_buf_free) */
  size_t nkeep, capkeep;
} rp_ctxs;

/* Payload cache, staging and host buffers: owner replay_exec_copy.c (the
 * staging slots stage* are touched by it alone), with
 * replay_paycache.c (pc); scratch and expect are lent to the ops that read
 * bytes back (observers, arrays, launches' argument blocks, deferred
 * snapshots). */
typedef struct rp_staging {
  struct rp_paycache *pc;     /* replay_paycache.c: copy payloads kept */
  /* HtoD staging: pinned ping-pong buffers, each guarded by an event */
  void *stage[RP_STAGING_SLOTS];
  size_t stage_cap[RP_STAGING_SLOTS];
  int stage_pinned[RP_STAGING_SLOTS];
  CUevent stage_ev[RP_STAGING_SLOTS];
  CUcontext stage_ev_ctx[RP_STAGING_SLOTS]; /* where each event lives */
  int stage_used[RP_STAGING_SLOTS];
  unsigned stage_next;
  /* DtoH scratch (pinned) and a second buffer for expected bytes */
  void *scratch;
  size_t scratch_cap;
  int scratch_pinned;
  void *expect;
  size_t expect_cap;
  int expect_pinned;
  int warned_reloc_ptr;
  int skip_host_reads;        /* cucap_replay_session_skip_host_reads: this pass */
  int device_uploads;         /* cucap_replay_session_device_uploads: this pass */
  uint64_t host_reads_skipped;
} rp_staging;

/* Observer dispatch: owner replay_observer.c; the ops fill in what only
 * they know (a launch's kernel and stream, a copy's host bytes). */
typedef struct rp_obs_state {
  cucap_replay_op op;         /* the record being executed */
  int op_announced;           /* op_before was called for it */
} rp_obs_state;

/* Run and pass control: owner replay_run.c. */
typedef struct rp_run_ctl {
  unsigned pass;              /* 0-based pass being executed */
  int stop;                   /* an observer ended the replay early */
  int end_pass;               /* an observer ended the pass early */
  /* the final teardown of an exit_after run (cucap_replay_options): no
   * module unload, no page-locked free, no primary context release - the
   * process exit releases them; everything else goes as usual */
  int leave_to_exit;
  rp_region *restore;         /* first Snapshot(BeforeLaunch) */
  size_t nrestore;
} rp_run_ctl;

/* cuCtxSetLimit across passes: owner replay_attr.c, the only file that
 * touches it. Per CUlimit, the value a replayed call asked for and the one
 * the driver reported after it. */
typedef struct rp_limits {
  uint64_t limit_req[16], limit_got[16];
  uint16_t limit_known;       /* bit l: limit_req/got[l] are set */
} rp_limits;

typedef struct rp_state {
  /* shared by every file: what the run was given, the driver and device,
   * and the record being executed */
  const cucap_replay_options *o;
  cucap_replay_report *rep;
  cucap_reader *r;
  rp_driver d;
  CUdevice dev;
  int cc;                     /* e.g. 90 */
  int rec_driver;             /* driver version noted by the recorder */
  uint64_t dev_mem;           /* this GPU's memory (0: unknown): no host
                                 buffer for one op is ever larger */
  uint64_t rec_index;         /* 0-based record position in the file */
  uint64_t cur_seq;
  int failed;                 /* a driver call failed: stop */
  int capturing;              /* streams currently in capture */
  /* the parts */
  rp_code code;               /* replay_exec_kernel.c */
  rp_ctxs cx;                 /* replay_lifetime.c */
  rp_staging buf;             /* replay_exec_copy.c */
  rp_obs_state obs;           /* replay_observer.c */
  rp_run_ctl run;             /* replay_run.c */
  rp_limits lim;              /* replay_attr.c */
  rp_mem mem;                 /* replay_memory.c */
  struct rp_graphs *gs;       /* graphs, execs, dry captures (replay_graph.h) */
  struct rp_deferred *deferred; /* replay_deferred.c (format 1.2 snapshots) */
  struct rp_objects *obj;     /* NULL until the first array/object (replay_object.c) */
  struct rp_attrs *attr;      /* NULL until an attribute waits (replay_attr.c) */
} rp_state;

/* replay_run.c: live objects of the handle maps (stream, event, module,
 * library, graph, gexec). rp_live_put maps recorded handle h to a new live
 * object; a handle still mapped (its destroy was not recorded, or the handle
 * was reused) has its old object destroyed first, so nothing the replay
 * created is lost; on out of memory the new object is destroyed, the replay
 * stops and CUCAP_ERR_NOMEM is returned. */
void rp_live_destroy(rp_state *R, const cucap_map *mp, uint64_t live);
cucap_status rp_live_put(rp_state *R, cucap_map *mp, uint64_t h, uint64_t live);

/* replay_image.c: cuModuleLoadData & co. take no size, the driver finds
 * the end of an image by parsing it. Returns img when it is a fatbin/cubin
 * whose parsed extent lies inside its isz bytes (or PTX with its NUL);
 * otherwise a NUL-terminated, zero-padded copy in *copy (malloc'ed: the
 * caller keeps it as long as the module and frees it). NULL with *why for an
 * image that must not be loaded (a damaged fatbin/cubin, a fatbinary
 * wrapper); NULL with *why NULL when out of memory. */
const void *rp_image_for_driver(const void *img, uint64_t isz, void **copy,
                                const char **why);

/* replay_plainelf.c: a compressed fatbin goes to the driver as the one ELF
 * this GPU runs (cucap_fatbin_device_elf), decompressed once per run by a
 * thread of its own that works through the scan's images in record order
 * while the replay starts. start: after rp_check_images mapped the images
 * (the reader keeps them mapped); nothing when R->code.images is empty or
 * CUCAP_REPLAY_PLAIN_ELF=0. get: the ELF for the mapped image img (waits
 * for the thread to reach it), NULL to load img as it is; owned by R->code.pe
 * until rp_plainelf_free, which runs after every module is unloaded (a
 * lazily loading driver may read the image until then). */
void rp_plainelf_start(rp_state *R);
const void *rp_plainelf_get(rp_state *R, const void *img);
void rp_plainelf_free(rp_state *R);

/* replay_params.c: makes fi's parameter layout the driver's own when the
 * driver can tell (cuFuncGetParamInfo) and it differs from the recorded
 * one - the driver reads kernelParams by its layout, so a recorded layout
 * with fewer or smaller parameters would make it read past the argument
 * block. Once per function, when its CUfunction (live_fn) is known. */
#define RP_MAX_PARAMS 1024
void rp_func_layout(rp_state *R, rp_func *fi);

/* replay_exec.c, replay_exec_kernel.c, replay_exec_copy.c */
void rp_set_error(rp_state *R, cucap_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int rp_cu(rp_state *R, CUresult r, const char *call); /* 0 + error if failed */
cucap_hash128 rp_h(const cucap_fb_hash128 *h);
const char *rp_unreplayable(const cucap_fb_record *rec); /* NULL: replayable */
/* replay_skips.c; with --strict the first one stops the replay
 * (CUCAP_ERR_UNSUPPORTED) */
void rp_skip(rp_state *R, const char *name);       /* counted by name */
void rp_substitute(rp_state *R, const char *name); /* replayed with a stand-in */
/* Relocation of pointers inside an HtoD payload (host copy hb of `size`
 * bytes going to recorded address dst, with its 2D/3D geometry or NULL);
 * counted in patched_pointers. */
void rp_patch_payload(rp_state *R, void *hb, uint64_t size, uint64_t dst,
                      const cucap_fb_copy_geometry *g);
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
/* The ops rp_execute dispatches to, by record body: replay_exec_kernel.c
 * (code) and replay_exec_copy.c (memory). */
void rp_op_module(rp_state *R, const cucap_fb_record *rec, const cucap_fb_module *m);
void rp_op_global(rp_state *R, const cucap_fb_record *rec, const cucap_fb_global *g);
void rp_op_function(rp_state *R, const cucap_fb_record *rec, const cucap_fb_function *f);
void rp_op_launch(rp_state *R, const cucap_fb_record *rec, const cucap_fb_launch *l);
void rp_op_alloc(rp_state *R, const cucap_fb_record *rec, const cucap_fb_alloc *a);
void rp_op_free(rp_state *R, const cucap_fb_record *rec, const cucap_fb_free *f);
void rp_op_memcpy(rp_state *R, const cucap_fb_record *rec, const cucap_fb_memcpy *c);
void rp_op_memset(rp_state *R, const cucap_fb_record *rec, const cucap_fb_memset *m);
/* Helpers of the executor shared with the files of its subsystems
 * (replay_array.c, replay_object.c, replay_attr.c, replay_graph*.c). */
/* The record's context made current; CUCAP_ERR_CUDA (reported into the run
 * by rp_cu) if the driver refused. */
cucap_status rp_ctx_rec(rp_state *R, const cucap_fb_record *rec);
CUstream rp_stream(rp_state *R, uint64_t recorded);
const rp_fns *rp_fn(rp_state *R, const cucap_fb_record *rec); /* variant table */
/* The payload of an HtoD-like copy in a staging slot (or, while capturing, a
 * buffer kept to the end of the replay: *kept = 1); NULL if missing. After
 * issuing the copy from a slot, rp_stage_done(slot) guards it with an event. */
void *rp_payload(rp_state *R, const cucap_fb_memcpy *c, uint64_t size,
                 unsigned *slot, int *kept);
void rp_stage_done(rp_state *R, unsigned slot, CUstream st, const rp_fns *fn);
/* The slots' events in context live go before it does (rp_ctx_dying);
 * rp_stage_free: the slots' events and buffers (teardown). */
void rp_stage_ctx_gone(rp_state *R, CUcontext live);
void rp_stage_free(rp_state *R);

/* replay_attr.c: cuFuncSetAttribute, cuKernelSetAttribute, cache/shared
 * memory configs and cuCtxSetLimit, replayed from Record.args. */
int rp_attr_execute(rp_state *R, const cucap_fb_record *rec); /* 1: handled */
const char *rp_attr_unreplayable(const cucap_fb_record *rec); /* legacy texrefs */
/* Before a launch of fi: attributes recorded before fi's handle was known. */
void rp_attr_before_launch(rp_state *R, const rp_func *fi);
/* The launch attributes of a KernelEx launch, handles (events) and pointers
 * (access policy window) mapped to live ones; returns the count (<= max). */
unsigned rp_attr_launch_attrs(rp_state *R, const cucap_fb_launch *l,
                              CUlaunchAttribute *at, unsigned max);
void rp_attr_reset(rp_state *R); /* between loops and at the end */

/* replay_array.c: CUDA arrays (Alloc/Free kind Array) and copies to and from
 * them (1D cuMemcpy*A*, 2D/3D with srcArray/dstArray). */
void rp_array_alloc(rp_state *R, const cucap_fb_record *rec, const cucap_fb_alloc *a);
void rp_array_free(rp_state *R, const cucap_fb_record *rec, const cucap_fb_free *f);
int rp_array_is_copy(const cucap_fb_memcpy *c); /* a copy with an array side */
void rp_array_memcpy(rp_state *R, const cucap_fb_record *rec, const cucap_fb_memcpy *c);

/* replay_object.c: the one recorded -> live map of arrays, mipmapped arrays
 * and texture/surface objects, and the rewriting of recorded texture/surface
 * handles where a program passes or stores them. */
void rp_object_execute(rp_state *R, const cucap_fb_record *rec, const cucap_fb_object *o);
/* Live CUarray / CUmipmappedArray of a recorded one (0 if unknown). */
uint64_t rp_object_array(rp_state *R, uint64_t recorded);
uint64_t rp_object_mipmap(rp_state *R, uint64_t recorded);
/* Array bookkeeping for replay_array.c (owned = destroyed with the replay). */
cucap_status rp_object_array_put(rp_state *R, uint64_t recorded, uint64_t live,
                                 int owned); /* CUCAP_ERR_NOMEM: reported */
uint64_t rp_object_array_del(rp_state *R, uint64_t recorded); /* live if owned */
/* 8-byte, 8-aligned parameters of fi that hold a recorded texture/surface
 * handle whose live value differs: rewritten (counted in patched_params). */
void rp_object_patch_params(rp_state *R, const rp_func *fi, uint8_t *args, size_t n);
/* The same for 8-aligned words of host data uploaded to device memory or an
 * array (first_addr: where buf[0] lands; row: bytes per packed row or 0). */
void rp_object_patch_upload(rp_state *R, void *buf, uint64_t size,
                            uint64_t first_addr, uint64_t row);
/* Before comparing `want` (recorded bytes read back at addr) with `got`:
 * 8-aligned words where want holds a recorded handle and got its live value
 * are made equal in want. */
void rp_object_fix_expected(rp_state *R, const void *got, void *want,
                            uint64_t size, uint64_t addr);
/* The program destroys live context ctx (called by rp_ctx_dying): its
 * arrays/objects are forgotten (the driver frees them). Returns how many. */
size_t rp_object_context_gone(rp_state *R, uint64_t ctx);
/* Destroys every live array/object and frees the maps (loops, end). */
void rp_object_destroy_live(rp_state *R);

/* replay_exec_copy.c: 1 if a copy's geometry (width x height x depth) fits the
 * `size` bytes of its packed host side (a damaged capture may say more). */
int rp_geometry_fits(const cucap_fb_copy_geometry *g, uint64_t size);

/* replay_lookup.c: library modules (LibraryModule records) and functions
 * found by name where the capture never defined their module. */
void rp_op_library_module(rp_state *R, const cucap_fb_record *rec,
                          const cucap_fb_module *m);
/* Live module of recorded module handle h: a loaded one or a library's. */
int rp_module_live(const rp_state *R, uint64_t h, uint64_t *live);
/* The one kernel named `name` among the live libraries and modules:
 * 1 = a CUkernel (*live), 2 = a CUfunction (*live) of live module *module,
 * 0 = none, or several (ambiguous). */
int rp_func_by_name(rp_state *R, const char *name, uint64_t *live, uint64_t *module);

/* replay_lifetime.c: objects that die with their context */
void rp_owned(rp_state *R, uint64_t live);       /* made in R->cx.cur */
CUcontext rp_owner_of(rp_state *R, uint64_t live); /* NULL: unknown */
/* Before cuCtxDestroy(live): our staging events in it are destroyed, the
 * program's streams/events/modules/execs/relocated allocations and its
 * arrays/texture objects (rp_object_context_gone) are forgotten (the driver
 * frees them), functions of its modules marked dead. */
void rp_ctx_dying(rp_state *R, CUcontext live);
/* Whatever refers to live context `live` (the current context, recording
 * threads, the push stack) falls back to the primary context. */
void rp_ctx_unref(rp_state *R, uint64_t live);
void rp_ctx_set_tid(rp_state *R, const cucap_fb_record *rec, CUcontext live);
/* Kept contexts (R->cx.keep_ctx): a recorded cuCtxCreate of handle h that a
 * kept context already answers makes it current again (returns 1); a
 * recorded cuCtxDestroy only waits for its work and drops the program's
 * references; rp_ctx_kept_sync waits for all of them (end of a pass). */
int rp_ctx_kept_reuse(rp_state *R, const cucap_fb_record *rec, uint64_t h);
void rp_ctx_kept_release(rp_state *R, uint64_t h);
void rp_ctx_kept_sync(rp_state *R);
/* Destroys every live context of m (recorded handle -> live context:
 * R->cx.ctx_created between passes, R->cx.ctx_kept at the end of the run),
 * what the replay knew of them first (rp_ctx_dying), and empties m. */
void rp_ctx_destroy_all(rp_state *R, cucap_map *m);
/* Modules kept loaded across passes (replay_modkeep.c). rp_modkeep_get: the
 * live module (or library) the load record at rec_index got in an earlier
 * pass in the current context, 0 if none (load it). rp_modkeep_add: after a
 * fresh load, keeps it if a multi-pass run wants it and its variables can
 * be restored (img/isz: what the driver loaded; read during the call only).
 * rp_modkeep_has: live is kept (its unload is the run's, not the pass's).
 * rp_modkeep_restore: variables back to load-time contents (pass start).
 * rp_modkeep_ctx_gone: ctx is being destroyed (the driver frees them).
 * rp_modkeep_release: unloads all kept modules, frees the table (end). */
/* A run of several passes (loops, an observer that keeps contexts, a pass
 * after the first): what kept modules and cached payloads pay off for. */
int rp_multipass(const rp_state *R);
int rp_modkeep_wanted(const rp_state *R);
uint64_t rp_modkeep_get(rp_state *R, uint64_t rec_index, int library);
void rp_modkeep_add(rp_state *R, uint64_t rec_index, int library, uint64_t live,
                    const void *img, size_t isz);
int rp_modkeep_has(const rp_state *R, uint64_t live);
void rp_modkeep_restore(rp_state *R);
void rp_modkeep_ctx_gone(rp_state *R, CUcontext ctx);
void rp_modkeep_release(rp_state *R);
/* rp_modkeep_release for cucap_replay_session_fresh_modules (pass start,
 * after rp_destroy_live): this and every later pass load their modules. */
void rp_modkeep_drop(rp_state *R);
/* Unloads a module or library the replay loaded, unless the session holds
 * unloads (cucap_replay_session_hold_unloads): then it stays loaded until
 * rp_held_release at the end of the run, or until its context is destroyed
 * (rp_modkeep_ctx_gone forgets it). */
void rp_unload(rp_state *R, uint64_t live, int library);
/* At the end of the run, before the contexts go: unloads what was held. */
void rp_held_release(rp_state *R);
/* Copy payloads kept across passes (replay_paycache.c). rp_paycache_get: the
 * page-locked, relocated payload of the HtoD copy being replayed (copy size
 * bytes to dst, geometry g or NULL), valid until rp_paycache_free; NULL when
 * it is not cached (take the staging path: small, capturing, texture
 * handles, single pass, over budget). rp_paycache_free: end of the run. */
void *rp_paycache_get(rp_state *R, const cucap_fb_memcpy *c, uint64_t size,
                      uint64_t dst, const cucap_fb_copy_geometry *g);
/* For a pass with cucap_replay_session_device_uploads: a device-resident
 * copy of the payload rp_paycache_get just returned (hb), made on first use
 * within the device budget; 0 when there is none (use hb). Owned by the
 * cache, freed by rp_paycache_free. */
CUdeviceptr rp_paycache_device(rp_state *R, const void *hb);
/* Frees the device copies (teardown, before kept contexts are destroyed). */
void rp_paycache_free_device(rp_state *R);
void rp_paycache_free(rp_state *R);
/* The CUfunction to launch fi with in the current context (a CUkernel's is
 * per context); NULL if its module died (or a driver error, R->failed). */
CUfunction rp_func_fn(rp_state *R, rp_func *fi);
/* Our own page-locked buffers: allocated portable in the primary context
 * (which lives for the whole run); NULL if not possible (use malloc). */
void *rp_host_buf_alloc(rp_state *R, size_t size); /* NULL while capturing */
void rp_host_buf_free(rp_state *R, void *p);
/* The page-locked host buffer a copy to the host captured into a graph
 * writes into (allocated in relaxed capture mode, primary context), kept
 * until the end of the pass; malloc'ed when it cannot be. NULL: OOM. */
void *rp_capture_host_buffer(rp_state *R, size_t size);
/* Buffers that must outlive their op (graph capture, PTX copies, rebuilt
 * graph nodes): freed by rp_keep_free between passes and at the end. */
/* CUCAP_ERR_NOMEM when the list cannot grow (p is then the caller's) */
cucap_status rp_keep(rp_state *R, void *p);                /* malloc'ed */
cucap_status rp_keep_as(rp_state *R, void *p, int pinned); /* pinned: rp_host_buf_alloc'ed */
void rp_keep_free(rp_state *R);
/* 1 if a recorded cuLibraryLoadData option may be passed again. */
int rp_lib_option_safe(int opt);

/* replay_observer.c: dispatch to cucap_replay_options.observers */
cucap_status rp_obs_attach(rp_state *R);
cucap_status rp_obs_begin(rp_state *R);
void rp_obs_pass_begin(rp_state *R);
int rp_obs_pass_end(rp_state *R);     /* 1: an observer wants another pass */
void rp_obs_end(rp_state *R);
/* 1 if an observer reads the bytes of copies to the host
 * (cucap_replay_observer.reads_host_data): none may be left out. */
int rp_obs_reads_host_data(const rp_state *R);
/* Fills R->obs.op for rec and announces it (launches announce themselves in
 * rp_op_launch, exactly around the driver call). */
void rp_obs_op_start(rp_state *R, const cucap_fb_record *rec);
void rp_obs_op_before(rp_state *R);   /* R->obs.op describes the op */
void rp_obs_op_after(rp_state *R, int status);
/* A record captured into a graph that is rebuilt from its recorded
 * topology instead (replay_capture.c): observers see it as captured
 * (op->capturing, status 0), before and after at once; host_data: for a
 * copy to the host, the buffer the rebuilt graph's node writes (or NULL). */
void rp_obs_captured_dry(rp_state *R, const cucap_fb_record *rec, void *host_data);

/* replay_observer.c: device bytes at a live address -> R->buf.scratch */
cucap_status rp_read_device(rp_state *R, uint64_t live, uint64_t size,
                            void **out);
/* replay_exec.c: grows a host buffer, pinned when possible;
 * CUCAP_ERR_TOO_LARGE for a size no op moves (more than the GPU holds),
 * CUCAP_ERR_NOMEM when out of memory (the caller reports either) */
cucap_status rp_grow(void **buf, size_t *cap, size_t need, int *pinned, rp_state *R);

/* replay_deferred.c: Snapshot{CopyResult, HostWrite} of a recorder that
 * never synchronises the program (format 1.2). */
cucap_status rp_deferred_scan(rp_state *R, const cucap_fb_snapshot *s); /* CUCAP_ERR_NOMEM */
/* The recorded result of the copy to the host with seq copy_seq, read by
 * the recorder after the call; 0 if there is none. */
int rp_deferred_copy_result(const rp_state *R, uint64_t copy_seq,
                            cucap_hash128 *h, uint64_t *size);
/* The k-th (0-based) CopyResult naming graph launch launch_seq (format
 * 1.3): the captured copy's seq (for a copy node of a graph the program
 * built, the seq of the instantiation that made the exec), the recorded
 * bytes and the host address they were read from; 0 past the last. Any
 * out-parameter may be NULL. */
int rp_deferred_graph_copy_result(const rp_state *R, uint64_t launch_seq, size_t k,
                                  uint64_t *copy_seq, cucap_hash128 *h, uint64_t *size,
                                  uint64_t *addr);
void rp_host_write(rp_state *R, const cucap_fb_snapshot *s); /* uploads */
void rp_deferred_free(rp_state *R);

#endif
