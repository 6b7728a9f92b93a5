/* custom_launch.c - kernel launch hooks.
 *
 * Hot path: per launch a tracker lookup (lock-free), the callstack id
 * (frame-pointer walk + thread-local cache), the argument block assembled on
 * the stack and the Launch body built straight into c->b. No malloc, no lock,
 * no syscall unless the function or the stack is new, the block exceeds
 * 4 KiB, or snapshots/launch hashes are on. */
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

/* Launch index taken in the pre hook (so snapshot=launch:N runs before the
 * real launch), consumed by the post hook of the same call on this thread. */
static __thread uint64_t t_launch_index;

/* Snapshots and launch hashes synchronise the device: never while a
 * capture is active (custom_capture.c); managed memory the host wrote is
 * stored before the kernel can change it (custom_managed.c). */
static void launch_pre(cucap_call *c, CUfunction f, CUstream s, void **kp, void **extra) {
  t_launch_index = cucap_rec_next_launch_index();
  if (!cx_capture_any())
    cx_snapshot_before_launch(t_launch_index);
  if (cx_managed_any())
    cx_managed_before_launch(CX_U64(f), s, c->variant, kp, extra);
}

typedef struct launch_desc {
  uint8_t kind;
  uint64_t function;
  cucap_fb_dim3 grid, block;
  uint32_t shared;
  uint64_t stream;
  void **params;
  void **extra;
  cucap_fb_ref attrs;
  uint64_t host_fn;
} launch_desc;

/* ---- hand-laid Launch record ----
 *
 * The common launch (kernel/cooperative/KernelEx without attributes, an
 * inline argument block, no launch hashes) is written front to back as one
 * size-prefixed Record with its Launch body, instead of through the generic
 * builder (hooks.c does the same for body-less records), then appended here;
 * c->drop keeps cucap_call_exit from recording it a second time. The fields
 * present are exactly those the generic path adds (cucap dump --json of both
 * is identical; CUCAP_SLOW_RECORDS=1 forces the generic path). Layout
 * (offsets from the size prefix; 8-byte fields 8-aligned):
 *     0 u32 size-4 | 4 u32 root (-> 40) | 8 Record vtable (28 bytes) | 36 pad
 *    40 Record: i32 soffset | 44 tid | 48 seq | 56 t_enter | 64 t_exit |
 *       72 context | 80 call | 84 result | 88 args uoff | 92 stack |
 *       96 variant | 97 body_type | 98 pad | 100 body uoff
 *   104 pad | 108 u32 nargs | 112 args[nargs] (u64)
 *   LV = 112 + 8*nargs: Launch vtable (4 + 2*13 bytes), pad to 8
 *   LT = LV + 32: Launch: i32 soffset | +4 kind | +5 from_extra | +6..7 pad |
 *       +8 function | +16 stream | +24 launch_index | +32 grid | +44 block |
 *       +56 shared_mem | +60 args uoff | +64 u32 len | +68 bytes, pad to 8 */
enum {
  LR_RT = 40, LR_RTSIZE = 64, LR_RVEC = 108, LR_RELEMS = 112,
  LR_LVSIZE = 4 + 2 * 13, LR_LTSIZE = 64,
  LR_MAX = LR_RELEMS + 8 * CUCAP_MAX_ARGS + 32 + LR_LTSIZE + 4 + CX_INLINE_ARGS_MAX + 8
};

static int g_slow_launch = -1; /* CUCAP_SLOW_RECORDS=1 (read once, benign race) */

static int slow_launch(void) {
  int v = g_slow_launch;
  if (__builtin_expect(v < 0, 0)) {
    const char *e = getenv("CUCAP_SLOW_RECORDS");
    v = e && *e == '1';
    g_slow_launch = v;
  }
  return v;
}

static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Writes the argument block the generic path would (cx_launch_args) into
 * out; returns its size, or -1 when there is none (no args vector), or -2
 * when it is not inline (blob path: left to the generic builder). */
static long launch_arg_bytes(const cucap_tracked_fn *f, void **kp, void **extra,
                             uint8_t *out, int *from_extra) {
  *from_extra = 0;
  if (!kp && extra) {
    const void *ptr;
    size_t size;
    int have_size = cx_extra_buffer(extra, &ptr, &size);
    *from_extra = 1;
    if (!(ptr && have_size && size <= CX_MAX_PARAM_BYTES))
      return -1;
    if (size > CX_INLINE_ARGS_MAX)
      return -2;
    memcpy(out, ptr, size);
    return (long)size;
  }
  if (!kp || !f || !f->nparams)
    return -1;
  size_t total = f->param_bytes;
  if (total > CX_INLINE_ARGS_MAX)
    return -2;
  memset(out, 0, total);
  for (uint32_t i = 0; i < f->nparams; i++) {
    const cucap_param_layout *p = &f->params[i];
    if (kp[i] && p->offset <= total && p->size <= total - p->offset)
      memcpy(out + p->offset, kp[i], p->size);
  }
  return (long)total;
}

/* Builds and appends the whole Record; 0 when this launch needs the generic
 * path (nothing was appended then). */
static int launch_fast(cucap_call *c, CUresult r, const launch_desc *d,
                       const cucap_tracked_fn *fn) {
  _Alignas(8) uint8_t buf[LR_MAX];
  uint32_t n = c->nargs > CUCAP_MAX_ARGS ? CUCAP_MAX_ARGS : c->nargs;
  size_t lv = LR_RELEMS + 8 * (size_t)n, lt = lv + 32;
  int from_extra;
  long na = launch_arg_bytes(fn, d->params, d->extra, buf + lt + LR_LTSIZE + 4, &from_extra);
  if (na == -2)
    return 0;
  size_t end = lt + LR_LTSIZE;
  if (na >= 0)
    end += (4 + (size_t)na + 7) & ~(size_t)7;
  /* Record.context as cucap_call_exit takes it (not counted by --audit) */
  uint64_t t_exit = cucap_rec_now();
  CUcontext ctx = NULL;
  c->th->audit_expect = 0;
  if (cucap_real.cuCtxGetCurrent)
    cucap_real.cuCtxGetCurrent(&ctx);
  uint64_t ctx64 = CX_U64(ctx);

  memset(buf, 0, LR_RELEMS);
  memset(buf + lv, 0, lt + LR_LTSIZE - lv);
  put32(buf, (uint32_t)(end - 4));
  put32(buf + 4, LR_RT - 4);
  uint16_t rvt[14] = {28, LR_RTSIZE,
                      /* seq */ 48 - LR_RT, /* tid */ 44 - LR_RT,
                      /* t_enter */ 56 - LR_RT, /* t_exit */ 64 - LR_RT,
                      /* call */ 80 - LR_RT, /* variant */ c->variant ? 96 - LR_RT : 0,
                      /* result */ 84 - LR_RT, /* args */ n ? 88 - LR_RT : 0,
                      /* stack */ c->stack ? 92 - LR_RT : 0,
                      /* body_type */ 97 - LR_RT, /* body */ 100 - LR_RT,
                      /* context */ ctx64 ? 72 - LR_RT : 0};
  memcpy(buf + 8, rvt, sizeof rvt);
  put32(buf + LR_RT, LR_RT - 8);
  memcpy(buf + 44, &c->th->tid, 4);
  /* seq (48) stays 0: patched by cucap_rec_append_call */
  memcpy(buf + 56, &c->t_enter, 8);
  memcpy(buf + 64, &t_exit, 8);
  memcpy(buf + 72, &ctx64, 8);
  memcpy(buf + 80, &c->cbid, 4);
  put32(buf + 84, (uint32_t)(int32_t)r);
  if (n) {
    put32(buf + 88, LR_RVEC - 88);
    put32(buf + LR_RVEC, n);
    memcpy(buf + LR_RELEMS, c->args, 8 * (size_t)n);
  }
  memcpy(buf + 92, &c->stack, 4);
  buf[96] = c->variant;
  buf[97] = CUCAP_FB_BODY_LAUNCH;
  put32(buf + 100, (uint32_t)(lt - 100));

  uint16_t lvt[15] = {LR_LVSIZE, LR_LTSIZE,
                      /* kind */ 4, /* function */ 8, /* grid */ 32, /* block */ 44,
                      /* shared_mem */ 56, /* stream */ 16,
                      /* args */ na >= 0 ? 60 : 0, /* args_blob */ 0,
                      /* has_args_blob */ 0, /* attrs */ 0, /* host_fn */ 0,
                      /* launch_index */ 24, /* from_extra */ from_extra ? 5 : 0};
  memcpy(buf + lv, lvt, LR_LVSIZE);
  put32(buf + lt, (uint32_t)(lt - lv));
  uint8_t *L = buf + lt;
  L[4] = d->kind;
  L[5] = (uint8_t)from_extra;
  memcpy(L + 8, &d->function, 8);
  memcpy(L + 16, &d->stream, 8);
  memcpy(L + 24, &t_launch_index, 8);
  memcpy(L + 32, &d->grid, 12);
  memcpy(L + 44, &d->block, 12);
  memcpy(L + 56, &d->shared, 4);
  if (na >= 0) {
    put32(L + 60, 4);
    put32(L + 64, (uint32_t)na);
    size_t pad = end - (lt + LR_LTSIZE + 4 + (size_t)na);
    memset(buf + end - pad, 0, pad);
  }
  cucap_status st = cucap_rec_append_call(buf, end, c->cbid, NULL);
  if (st != CUCAP_OK && st != CUCAP_ERR_STATE)
    CUCAP_DEBUG("recording a launch failed: %s", cucap_status_str(st));
  c->drop = 1; /* appended (or the recorder is closing): not again */
  return 1;
}

static void launch_post(cucap_call *c, CUresult r, const launch_desc *d) {
  cucap_fbb *b = c->b;
  if (r == CUDA_SUCCESS && d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    cx_snapshot_after_launch(t_launch_index);
  c->stack = cucap_rec_stack_id();
  if (d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC && !d->attrs &&
      !cucap_rec_opts()->hash_launches && !slow_launch()) {
    const cucap_tracked_fn *fn = cx_function_for_launch(d->function);
    if (launch_fast(c, r, d, fn))
      return;
  }
  cx_args a = {0};
  if (d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC) {
    const cucap_tracked_fn *fn = cx_function_for_launch(d->function);
    cx_launch_args(b, fn, d->params, d->extra, &a);
  }
  cucap_fb_launch_start(b);
  cucap_fb_launch_add_kind(b, d->kind);
  if (d->kind == CUCAP_FB_LAUNCHKIND_HOSTFUNC) {
    cucap_fb_launch_add_host_fn(b, d->host_fn);
  } else {
    cucap_fb_launch_add_function(b, d->function);
    cucap_fb_launch_add_grid(b, &d->grid);
    cucap_fb_launch_add_block(b, &d->block);
    cucap_fb_launch_add_shared_mem(b, d->shared);
  }
  cucap_fb_launch_add_stream(b, d->stream);
  if (a.vec)
    cucap_fb_launch_add_args(b, a.vec);
  if (a.has_blob) {
    cucap_fb_launch_add_args_blob(b, &a.blob);
    cucap_fb_launch_add_has_args_blob(b, 1);
  }
  if (d->attrs)
    cucap_fb_launch_add_attrs(b, d->attrs);
  if (d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    cucap_fb_launch_add_launch_index(b, t_launch_index);
  if (a.from_extra)
    cucap_fb_launch_add_from_extra(b, 1);
  c->body = cucap_fb_launch_end(b);
  c->body_type = CUCAP_FB_BODY_LAUNCH;
  if (r == CUDA_SUCCESS && cucap_rec_opts()->hash_launches &&
      d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC && !cx_capture_any())
    cx_launch_hash(t_launch_index);
}

/* ---- cuLaunchKernel, cuLaunchKernel_ptsz ---- */

void custom_launch_kernel_pre(cucap_call *c, CUfunction f, unsigned int gx,
                              unsigned int gy, unsigned int gz, unsigned int bx,
                              unsigned int by, unsigned int bz, unsigned int shm,
                              CUstream s, void **kp, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shm;
  launch_pre(c, f, s, kp, extra);
}

void custom_launch_kernel(cucap_call *c, CUresult r, CUfunction f, unsigned int gx,
                          unsigned int gy, unsigned int gz, unsigned int bx,
                          unsigned int by, unsigned int bz, unsigned int shm,
                          CUstream s, void **kp, void **extra) {
  launch_desc d = {CUCAP_FB_LAUNCHKIND_KERNEL, CX_U64(f), {gx, gy, gz}, {bx, by, bz},
                   shm, CX_U64(s), kp, extra, 0, 0};
  launch_post(c, r, &d);
}

/* ---- cuLaunchCooperativeKernel(+_ptsz) ---- */

void custom_launch_coop_pre(cucap_call *c, CUfunction f, unsigned int gx,
                            unsigned int gy, unsigned int gz, unsigned int bx,
                            unsigned int by, unsigned int bz, unsigned int shm,
                            CUstream s, void **kp) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shm;
  launch_pre(c, f, s, kp, NULL);
}

void custom_launch_coop(cucap_call *c, CUresult r, CUfunction f, unsigned int gx,
                        unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shm,
                        CUstream s, void **kp) {
  launch_desc d = {CUCAP_FB_LAUNCHKIND_COOPERATIVE, CX_U64(f), {gx, gy, gz}, {bx, by, bz},
                   shm, CX_U64(s), kp, NULL, 0, 0};
  launch_post(c, r, &d);
}

/* ---- cuLaunchKernelEx(+_ptsz) ---- */

void custom_launch_ex_pre(cucap_call *c, const CUlaunchConfig *config, CUfunction f,
                          void **kp, void **extra) {
  launch_pre(c, f, config ? config->hStream : NULL, kp, extra);
}

void custom_launch_ex(cucap_call *c, CUresult r, const CUlaunchConfig *config,
                      CUfunction f, void **kp, void **extra) {
  if (!config) {
    launch_desc d = {CUCAP_FB_LAUNCHKIND_KERNELEX, CX_U64(f), {0, 0, 0}, {0, 0, 0},
                     0, 0, kp, extra, 0, 0};
    launch_post(c, r, &d);
    return;
  }
  cucap_fb_ref attrs = 0;
  unsigned na = config->numAttrs;
  if (na && config->attrs) {
    if (na > 64)
      na = 64;
    cucap_fb_ref refs[64];
    for (unsigned i = 0; i < na; i++) {
      const CUlaunchAttribute *at = &config->attrs[i];
      cucap_fb_ref v = cucap_fb_launch_attr_create_value(
          c->b, (const uint8_t *)&at->value, sizeof at->value);
      cucap_fb_launch_attr_start(c->b);
      cucap_fb_launch_attr_add_id(c->b, (int32_t)at->id);
      cucap_fb_launch_attr_add_value(c->b, v);
      refs[i] = cucap_fb_launch_attr_end(c->b);
    }
    attrs = cucap_fbb_vector_refs(c->b, refs, na);
  }
  launch_desc d = {CUCAP_FB_LAUNCHKIND_KERNELEX, CX_U64(f),
                   {config->gridDimX, config->gridDimY, config->gridDimZ},
                   {config->blockDimX, config->blockDimY, config->blockDimZ},
                   config->sharedMemBytes, CX_U64(config->hStream), kp, extra, attrs, 0};
  launch_post(c, r, &d);
}

/* ---- cuLaunchHostFunc(+_ptsz): recorded, not replayable (no code) ---- */

void custom_launch_host_func(cucap_call *c, CUresult r, CUstream s, CUhostFn fn,
                             void *user) {
  (void)user;
  launch_desc d = {CUCAP_FB_LAUNCHKIND_HOSTFUNC, 0, {0, 0, 0}, {0, 0, 0},
                   0, CX_U64(s), NULL, NULL, 0, CX_U64(fn)};
  launch_post(c, r, &d);
}
