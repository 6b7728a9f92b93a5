/* custom_context.c - context hooks.
 *
 * snapshot=exit also snapshots device memory right before a context goes
 * away (cuCtxDestroy, the last primary-context release, a primary reset):
 * after that the contents are gone. Allocations of the dead context are then
 * forgotten. Primary-context references are counted per device here (every
 * retain/release of the process goes through these hooks). */
#include <stdatomic.h>

#include "custom_internal.h"

#define CX_MAX_DEVICES 64
static atomic_int g_primary_refs[CX_MAX_DEVICES];

static void ctx_emit(cucap_call *c, uint8_t op, uint64_t handle, int device, int has_dev,
                     uint32_t flags, int has_flags) {
  c->stack = cucap_rec_stack_id();
  cucap_fbb *b = c->b;
  cucap_fb_context_start(b);
  cucap_fb_context_add_op(b, op);
  if (handle)
    cucap_fb_context_add_handle(b, handle);
  if (has_dev)
    cucap_fb_context_add_device(b, device);
  if (has_flags)
    cucap_fb_context_add_flags(b, flags);
  c->body = cucap_fb_context_end(b);
  c->body_type = CUCAP_FB_BODY_CONTEXT;
}

static uint64_t primary_ctx_of(CUdevice dev) {
  /* the primary context handle without retaining it: it is current or the
   * app holds it; ask the driver only through the retain/release pair. */
  CUcontext ctx = NULL;
  unsigned int flags = 0;
  int active = 0;
  uint64_t out = 0;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  /* never create a primary context just to learn its handle */
  if (cucap_real.cuDevicePrimaryCtxGetState &&
      cucap_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active &&
      cucap_real.cuDevicePrimaryCtxRetain &&
      cucap_real.cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS) {
    if (cucap_real.cuDevicePrimaryCtxRelease_v2)
      (void)cucap_real.cuDevicePrimaryCtxRelease_v2(dev);
    out = CX_U64(ctx);
  }
  cx_relax_end(&rx);
  return out;
}

static void snapshot_before_context_loss(uint64_t ctx) {
  cx_deferred_context_loss(ctx);
  if (cucap_rec_opts()->snapshot == CUCAP_REC_SNAPSHOT_EXIT)
    cx_snapshot_context_loss(ctx);
  if (ctx)
    (void)cucap_tracker_alloc_remove_context(cx_tracker(), ctx);
}

/* ---- create ---- */

void custom_ctx_create(cucap_call *c, CUresult r, CUcontext *pctx, unsigned int flags,
                       CUdevice dev) {
  ctx_emit(c, CUCAP_FB_CONTEXTOP_CREATE, r == CUDA_SUCCESS && pctx ? CX_U64(*pctx) : 0,
           dev, 1, flags, 1);
}

void custom_ctx_create_v3(cucap_call *c, CUresult r, CUcontext *pctx,
                          CUexecAffinityParam *params, int n, unsigned int flags,
                          CUdevice dev) {
  (void)params, (void)n;
  custom_ctx_create(c, r, pctx, flags, dev);
}

void custom_ctx_create_v4(cucap_call *c, CUresult r, CUcontext *pctx,
                          CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
  (void)params;
  custom_ctx_create(c, r, pctx, flags, dev);
}

/* ---- destroy ---- */

void custom_ctx_destroy_pre(cucap_call *c, CUcontext ctx) {
  (void)c;
  snapshot_before_context_loss(CX_U64(ctx));
}

void custom_ctx_destroy(cucap_call *c, CUresult r, CUcontext ctx) {
  (void)r;
  ctx_emit(c, CUCAP_FB_CONTEXTOP_DESTROY, CX_U64(ctx), 0, 0, 0, 0);
}

/* ---- primary context ---- */

void custom_primary_retain(cucap_call *c, CUresult r, CUcontext *pctx, CUdevice dev) {
  if (r == CUDA_SUCCESS && dev >= 0 && dev < CX_MAX_DEVICES)
    atomic_fetch_add(&g_primary_refs[dev], 1);
  ctx_emit(c, CUCAP_FB_CONTEXTOP_PRIMARYRETAIN,
           r == CUDA_SUCCESS && pctx ? CX_U64(*pctx) : 0, dev, 1, 0, 0);
}

void custom_primary_release_pre(cucap_call *c, CUdevice dev) {
  (void)c;
  if (dev >= 0 && dev < CX_MAX_DEVICES && atomic_load(&g_primary_refs[dev]) == 1)
    snapshot_before_context_loss(primary_ctx_of(dev));
}

void custom_primary_release(cucap_call *c, CUresult r, CUdevice dev) {
  if (r == CUDA_SUCCESS && dev >= 0 && dev < CX_MAX_DEVICES &&
      atomic_load(&g_primary_refs[dev]) > 0)
    atomic_fetch_sub(&g_primary_refs[dev], 1);
  ctx_emit(c, CUCAP_FB_CONTEXTOP_PRIMARYRELEASE, 0, dev, 1, 0, 0);
}

void custom_primary_reset_pre(cucap_call *c, CUdevice dev) {
  (void)c;
  snapshot_before_context_loss(primary_ctx_of(dev));
}

void custom_primary_reset(cucap_call *c, CUresult r, CUdevice dev) {
  if (r == CUDA_SUCCESS && dev >= 0 && dev < CX_MAX_DEVICES)
    atomic_store(&g_primary_refs[dev], 0);
  ctx_emit(c, CUCAP_FB_CONTEXTOP_PRIMARYRESET, 0, dev, 1, 0, 0);
}

void custom_primary_set_flags(cucap_call *c, CUresult r, CUdevice dev, unsigned int flags) {
  (void)r;
  ctx_emit(c, CUCAP_FB_CONTEXTOP_PRIMARYSETFLAGS, 0, dev, 1, flags, 1);
}

/* ---- current ---- */

void custom_ctx_set_current(cucap_call *c, CUresult r, CUcontext ctx) {
  (void)r;
  ctx_emit(c, CUCAP_FB_CONTEXTOP_SETCURRENT, CX_U64(ctx), 0, 0, 0, 0);
}

void custom_ctx_push(cucap_call *c, CUresult r, CUcontext ctx) {
  (void)r;
  ctx_emit(c, CUCAP_FB_CONTEXTOP_PUSH, CX_U64(ctx), 0, 0, 0, 0);
}

void custom_ctx_pop(cucap_call *c, CUresult r, CUcontext *pctx) {
  ctx_emit(c, CUCAP_FB_CONTEXTOP_POP, r == CUDA_SUCCESS && pctx ? CX_U64(*pctx) : 0, 0, 0,
           0, 0);
}

void custom_ctx_synchronize(cucap_call *c, CUresult r) {
  if (r == CUDA_SUCCESS)
    cx_sync_point(CX_SYNC_CTX, 0, c->variant);
  ctx_emit(c, CUCAP_FB_CONTEXTOP_SYNCHRONIZE, 0, 0, 0, 0, 0);
}

void custom_ctx_synchronize_v2(cucap_call *c, CUresult r, CUcontext ctx) {
  if (r == CUDA_SUCCESS)
    cx_sync_point(CX_SYNC_CTX, 0, c->variant);
  ctx_emit(c, CUCAP_FB_CONTEXTOP_SYNCHRONIZE, CX_U64(ctx), 0, 0, 0, 0);
}
