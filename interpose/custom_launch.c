/* custom_launch.c - kernel launch hooks.
 *
 * Hot path: per launch a tracker lookup (lock-free), the callstack id
 * (frame-pointer walk + thread-local cache), the argument block assembled on
 * the stack and the Launch body built straight into c->b. No malloc, no lock,
 * no syscall unless the function or the stack is new, the block exceeds
 * 4 KiB, or snapshots/launch hashes are on. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_knobs.h"
#include "custom_internal.h"

/* Snapshots and launch hashes synchronise the device: never while a
 * capture is active (custom_capture.c); managed memory the host wrote is
 * stored before the kernel can change it (custom_managed.c). */
/* The launch index is taken in the pre hook (so snapshot=launch:N runs
 * before the real launch) and recorded by the post hook (c->launch_index). */
static void launch_pre(cucap_call *c, CUfunction f, CUstream s, void **kp, void **extra) {
  c->launch_index = cucap_rec_next_launch_index();
  if (__builtin_expect(cucap_rec_opts()->snapshot == CUCAP_REC_SNAPSHOT_LAUNCH, 0) &&
      !cx_capture_any())
    cx_snapshot_before_launch(c->launch_index);
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
  const CUlaunchAttribute *attrs; /* cuLaunchKernelEx: config->attrs */
  unsigned nattrs;                /* at most CX_MAX_LAUNCH_ATTRS */
  uint64_t host_fn;
} launch_desc;

#define CX_MAX_LAUNCH_ATTRS 64

/* ---- hand-laid Launch record ----
 *
 * The common launch (kernel/cooperative/KernelEx with or without launch
 * attributes, an inline argument block, no launch hashes) is written front
 * to back as one size-prefixed Record with its Launch body, instead of
 * through the generic builder (hooks.c does the same for body-less records), then appended here;
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
 *       +56 shared_mem | +60 args uoff | +64 attrs uoff | +68 pad
 *   LT + 72: args: u32 len | bytes, pad to 8
 *   launch attributes (cuLaunchKernelEx), A = after the args:
 *       u32 count | u32 uoff[count] (-> each table), pad to 8 |
 *       LaunchAttr vtable: u16 8 | u16 12 | u16 id@4 | u16 value@8 |
 *       per attribute, 80 bytes: i32 soffset | i32 id | u32 value uoff (-> +12) |
 *       u32 len (sizeof CUlaunchAttributeValue = 64) | the value bytes */
enum {
  LR_RT = 40, LR_RTSIZE = 64, LR_RVEC = 108, LR_RELEMS = 112,
  LR_LVSIZE = 4 + 2 * 13, LR_LTSIZE = 72,
  LR_AVAL = (int)sizeof(CUlaunchAttributeValue), LR_AREC = 16 + LR_AVAL,
  LR_MAX = LR_RELEMS + 8 * CUCAP_MAX_ARGS + 32 + LR_LTSIZE + 4 + CX_INLINE_ARGS_MAX + 8 +
           8 + 4 * CX_MAX_LAUNCH_ATTRS + 8 + LR_AREC * CX_MAX_LAUNCH_ATTRS
};
_Static_assert(sizeof(CUlaunchAttributeValue) % 8 == 0, "attribute records stay 8-aligned");

/* CUCAP_SLOW_RECORDS=1, read once; relaxed atomics: threads may launch
 * first at once (every one computes the same value) */
static int g_slow_launch = -1;

static int slow_launch(void) {
  int v = __atomic_load_n(&g_slow_launch, __ATOMIC_RELAXED);
  if (__builtin_expect(v < 0, 0)) {
    v = cucap_knob_flag(CUCAP_KNOB(CUCAP_SLOW_RECORDS));
    __atomic_store_n(&g_slow_launch, v, __ATOMIC_RELAXED);
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
    const void *src = kp[i];
    if (!src || p->offset > total || p->size > total - p->offset)
      continue;
    /* pointers and scalars: one load and store, not a call to memcpy */
    if (p->size == 8)
      memcpy(out + p->offset, src, 8);
    else if (p->size == 4)
      memcpy(out + p->offset, src, 4);
    else
      memcpy(out + p->offset, src, p->size);
  }
  return (long)total;
}

/* The constant bytes of a launch record with n Record.args, [0, LT + 72):
 * Record vtable with every field present, the args vector's length, the
 * Launch vtable (args, attrs and from_extra present) and the Launch table's
 * soffset; launch_fast copies it and patches what differs per launch. Built
 * once per n under a lock, published with a release store. */
enum { LR_TPL = LR_RELEMS + 8 * CUCAP_MAX_ARGS + 32 + LR_LTSIZE };
static uint8_t g_tpl[CUCAP_MAX_ARGS + 1][LR_TPL];
static atomic_int g_tpl_ok[CUCAP_MAX_ARGS + 1];
static pthread_mutex_t g_tpl_mu = PTHREAD_MUTEX_INITIALIZER;

static const uint8_t *launch_template(uint32_t n) {
  if (__builtin_expect(atomic_load_explicit(&g_tpl_ok[n], memory_order_acquire), 1))
    return g_tpl[n];
  pthread_mutex_lock(&g_tpl_mu);
  if (!atomic_load_explicit(&g_tpl_ok[n], memory_order_relaxed)) {
    uint8_t *t = g_tpl[n];
    size_t lv = LR_RELEMS + 8 * (size_t)n, lt = lv + 32;
    memset(t, 0, LR_TPL);
    put32(t + 4, LR_RT - 4);
    uint16_t rvt[14] = {28, LR_RTSIZE,
                        /* seq */ 48 - LR_RT, /* tid */ 44 - LR_RT,
                        /* t_enter */ 56 - LR_RT, /* t_exit */ 64 - LR_RT,
                        /* call */ 80 - LR_RT, /* variant */ 96 - LR_RT,
                        /* result */ 84 - LR_RT, /* args */ 88 - LR_RT,
                        /* stack */ 92 - LR_RT, /* body_type */ 97 - LR_RT,
                        /* body */ 100 - LR_RT, /* context */ 72 - LR_RT};
    memcpy(t + 8, rvt, sizeof rvt);
    put32(t + LR_RT, LR_RT - 8);
    put32(t + 88, LR_RVEC - 88);
    put32(t + LR_RVEC, n);
    t[97] = CUCAP_FB_BODY_LAUNCH;
    put32(t + 100, (uint32_t)(lt - 100));
    uint16_t lvt[15] = {LR_LVSIZE, LR_LTSIZE,
                        /* kind */ 4, /* function */ 8, /* grid */ 32, /* block */ 44,
                        /* shared_mem */ 56, /* stream */ 16,
                        /* args */ 60, /* args_blob */ 0,
                        /* has_args_blob */ 0, /* attrs */ 64, /* host_fn */ 0,
                        /* launch_index */ 24, /* from_extra */ 5};
    memcpy(t + lv, lvt, LR_LVSIZE);
    put32(t + lt, (uint32_t)(lt - lv));
    atomic_store_explicit(&g_tpl_ok[n], 1, memory_order_release);
  }
  pthread_mutex_unlock(&g_tpl_mu);
  return g_tpl[n];
}

static inline void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* Builds and appends the whole Record; 0 when this launch needs the generic
 * path (nothing was appended then). */
static int launch_fast(cucap_call *c, CUresult r, const launch_desc *d,
                       const cucap_tracked_fn *fn) {
  _Alignas(8) uint8_t buf[LR_MAX];
  uint32_t n = c->nargs > CUCAP_MAX_ARGS ? CUCAP_MAX_ARGS : c->nargs;
  if (!n)
    return 0;
  size_t lv = LR_RELEMS + 8 * (size_t)n, lt = lv + 32;
  int from_extra;
  long na = launch_arg_bytes(fn, d->params, d->extra, buf + lt + LR_LTSIZE + 4, &from_extra);
  if (na == -2)
    return 0;
  size_t end = lt + LR_LTSIZE;
  if (na >= 0)
    end += (4 + (size_t)na + 7) & ~(size_t)7;
  size_t attrs_at = end; /* the attribute vector, when there are attributes */
  if (d->nattrs)
    end += ((4 + 4 * (size_t)d->nattrs + 7) & ~(size_t)7) + 8 + LR_AREC * (size_t)d->nattrs;
  /* Record.context as cucap_call_exit takes it (not counted by --audit) */
  uint64_t t_exit = cucap_rec_now();
  CUcontext ctx = NULL;
  c->th->audit_expect = 0;
  if (cucap_real.cuCtxGetCurrent)
    cucap_real.cuCtxGetCurrent(&ctx);
  uint64_t ctx64 = CX_U64(ctx);

  memcpy(buf, launch_template(n), lt + LR_LTSIZE);
  put32(buf, (uint32_t)(end - 4));
  /* absent fields: vtable slot 0 (Record slots 5 variant, 8 stack, 11 context) */
  if (!c->variant)
    put16(buf + 8 + 4 + 2 * 5, 0);
  if (!c->stack)
    put16(buf + 8 + 4 + 2 * 8, 0);
  if (!ctx64)
    put16(buf + 8 + 4 + 2 * 11, 0);
  memcpy(buf + 44, &c->th->tid, 4);
  /* seq (48) stays 0: patched by cucap_rec_append_call_at */
  memcpy(buf + 56, &c->t_enter, 8);
  memcpy(buf + 64, &t_exit, 8);
  memcpy(buf + 72, &ctx64, 8);
  memcpy(buf + 80, &c->cbid, 4);
  put32(buf + 84, (uint32_t)(int32_t)r);
  memcpy(buf + LR_RELEMS, c->args, 8 * (size_t)n);
  memcpy(buf + 92, &c->stack, 4);
  buf[96] = c->variant;
  /* Launch vtable slots 6 args, 9 attrs, 12 from_extra */
  if (na < 0)
    put16(buf + lv + 4 + 2 * 6, 0);
  if (!d->nattrs)
    put16(buf + lv + 4 + 2 * 9, 0);
  if (!from_extra)
    put16(buf + lv + 4 + 2 * 12, 0);
  uint8_t *L = buf + lt;
  L[4] = d->kind;
  L[5] = (uint8_t)from_extra;
  memcpy(L + 8, &d->function, 8);
  memcpy(L + 16, &d->stream, 8);
  memcpy(L + 24, &c->launch_index, 8);
  memcpy(L + 32, &d->grid, 12);
  memcpy(L + 44, &d->block, 12);
  memcpy(L + 56, &d->shared, 4);
  if (na >= 0) {
    put32(L + 60, LR_LTSIZE - 60);
    put32(L + LR_LTSIZE, (uint32_t)na);
    size_t aend = lt + LR_LTSIZE + 4 + (size_t)na;
    memset(buf + aend, 0, ((aend + 7) & ~(size_t)7) - aend);
  }
  if (d->nattrs) {
    size_t vt = (attrs_at + 4 + 4 * (size_t)d->nattrs + 7) & ~(size_t)7;
    size_t t0 = vt + 8;
    memset(buf + attrs_at, 0, vt - attrs_at);
    put32(L + 64, (uint32_t)(attrs_at - (lt + 64)));
    put32(buf + attrs_at, d->nattrs);
    uint16_t avt[4] = {8, 12, 4, 8};
    memcpy(buf + vt, avt, sizeof avt);
    for (unsigned i = 0; i < d->nattrs; i++) {
      size_t ti = t0 + LR_AREC * (size_t)i, slot = attrs_at + 4 + 4 * (size_t)i;
      put32(buf + slot, (uint32_t)(ti - slot));
      put32(buf + ti, (uint32_t)(int32_t)(ti - vt));
      put32(buf + ti + 4, (uint32_t)(int32_t)d->attrs[i].id);
      put32(buf + ti + 8, 4);
      put32(buf + ti + 12, LR_AVAL);
      memcpy(buf + ti + 16, &d->attrs[i].value, LR_AVAL);
    }
  }
  cucap_status st = cucap_rec_append_call_at(buf, end, 48, c->cbid, NULL);
  if (st != CUCAP_OK && st != CUCAP_ERR_STATE)
    CUCAP_DEBUG("recording a launch failed: %s", cucap_status_str(st));
  c->drop = 1; /* appended (or the recorder is closing): not again */
  return 1;
}

static void launch_post(cucap_call *c, CUresult r, const launch_desc *d) {
  cucap_fbb *b = c->b;
  const cucap_rec_options *o = cucap_rec_opts();
  if (__builtin_expect(o->snapshot == CUCAP_REC_SNAPSHOT_LAUNCH, 0) && r == CUDA_SUCCESS &&
      d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    cx_snapshot_after_launch(c->launch_index);
  c->stack = cucap_rec_stack_id();
  if (d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC && !o->hash_launches && !slow_launch()) {
    const cucap_tracked_fn *fn = cx_function_for_launch(d->function);
    if (launch_fast(c, r, d, fn))
      return;
  }
  cucap_fb_ref attrs = 0;
  if (d->nattrs) {
    cucap_fb_ref refs[CX_MAX_LAUNCH_ATTRS];
    for (unsigned i = 0; i < d->nattrs; i++) {
      const CUlaunchAttribute *at = &d->attrs[i];
      cucap_fb_ref v = cucap_fb_launch_attr_create_value(
          b, (const uint8_t *)&at->value, sizeof at->value);
      cucap_fb_launch_attr_start(b);
      cucap_fb_launch_attr_add_id(b, (int32_t)at->id);
      cucap_fb_launch_attr_add_value(b, v);
      refs[i] = cucap_fb_launch_attr_end(b);
    }
    attrs = cucap_fbb_vector_refs(b, refs, d->nattrs);
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
  if (attrs)
    cucap_fb_launch_add_attrs(b, attrs);
  if (d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    cucap_fb_launch_add_launch_index(b, c->launch_index);
  if (a.from_extra)
    cucap_fb_launch_add_from_extra(b, 1);
  c->body = cucap_fb_launch_end(b);
  c->body_type = CUCAP_FB_BODY_LAUNCH;
  if (r == CUDA_SUCCESS && cucap_rec_opts()->hash_launches &&
      d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC && !cx_capture_any())
    cx_launch_hash(c->launch_index);
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
                   shm, CX_U64(s), kp, extra, NULL, 0, 0};
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
                   shm, CX_U64(s), kp, NULL, NULL, 0, 0};
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
                     0, 0, kp, extra, NULL, 0, 0};
    launch_post(c, r, &d);
    return;
  }
  unsigned na = config->attrs ? config->numAttrs : 0;
  if (na > CX_MAX_LAUNCH_ATTRS)
    na = CX_MAX_LAUNCH_ATTRS;
  launch_desc d = {CUCAP_FB_LAUNCHKIND_KERNELEX, CX_U64(f),
                   {config->gridDimX, config->gridDimY, config->gridDimZ},
                   {config->blockDimX, config->blockDimY, config->blockDimZ},
                   config->sharedMemBytes, CX_U64(config->hStream), kp, extra,
                   na ? config->attrs : NULL, na, 0};
  launch_post(c, r, &d);
}

/* ---- cuLaunchHostFunc(+_ptsz): recorded, not replayable (no code) ---- */

void custom_launch_host_func(cucap_call *c, CUresult r, CUstream s, CUhostFn fn,
                             void *user) {
  (void)user;
  launch_desc d = {CUCAP_FB_LAUNCHKIND_HOSTFUNC, 0, {0, 0, 0}, {0, 0, 0},
                   0, CX_U64(s), NULL, NULL, NULL, 0, CX_U64(fn)};
  launch_post(c, r, &d);
}
