/* custom_launch.c - kernel launch hooks (owner: helper "semantics").
 *
 * Hot path: per launch a tracker lookup (lock-free), the callstack id
 * (frame-pointer walk + thread-local cache), the argument block assembled on
 * the stack and the Launch body built straight into c->b. No malloc, no lock,
 * no syscall unless the function or the stack is new, the block exceeds
 * 4 KiB, or snapshots/launch hashes are on. */
#include <string.h>

#include "custom_internal.h"

/* Launch index taken in the pre hook (so snapshot=launch:N runs before the
 * real launch), consumed by the post hook of the same call on this thread. */
static __thread uint64_t t_launch_index;

static void launch_pre(void) {
  t_launch_index = cucap_rec_next_launch_index();
  cx_snapshot_before_launch(t_launch_index);
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

static void launch_post(cucap_call *c, CUresult r, const launch_desc *d) {
  cucap_fbb *b = c->b;
  c->stack = cucap_rec_stack_id();
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
      d->kind != CUCAP_FB_LAUNCHKIND_HOSTFUNC)
    cx_launch_hash(t_launch_index);
}

/* ---- cuLaunchKernel, cuLaunchKernel_ptsz ---- */

void custom_launch_kernel_pre(cucap_call *c, CUfunction f, unsigned int gx,
                              unsigned int gy, unsigned int gz, unsigned int bx,
                              unsigned int by, unsigned int bz, unsigned int shm,
                              CUstream s, void **kp, void **extra) {
  (void)c, (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz;
  (void)shm, (void)s, (void)kp, (void)extra;
  launch_pre();
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
  (void)c, (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz;
  (void)shm, (void)s, (void)kp;
  launch_pre();
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
  (void)c, (void)config, (void)f, (void)kp, (void)extra;
  launch_pre();
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
