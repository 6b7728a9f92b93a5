/* replay_attr.c - function, kernel and context attributes, and the launch
 * attributes of cuLaunchKernelEx, on the live driver; owns rp_state's
 * limits part (rp_limits, replay_state.h), touched here alone.
 *
 * cuFuncSetAttribute, cuKernelSetAttribute, cuFuncSetCacheConfig,
 * cuFuncSetSharedMemConfig, cuKernelSetCacheConfig, cuCtxSetLimit,
 * cuCtxSetCacheConfig and cuCtxSetSharedMemConfig are recorded without a
 * body: their scalar arguments (Record.args, in parameter order) are all a
 * replay needs. Without them a kernel with more than 48 KiB of dynamic shared
 * memory (CUTLASS, cuDNN, attention, cuFFT) fails to launch, a cluster launch
 * above 8 blocks is refused, and device malloc/printf/recursion lose their
 * heap, FIFO or stack.
 *
 * A function attribute goes to the live handle of the same kind the program
 * used (a CUfunction from cuModuleGetFunction or cuKernelGetFunction, or a
 * CUkernel passed as such), so the driver applies it exactly as it did when
 * recording; cuKernelSetAttribute applies to the kernel's functions in every
 * context, on the replay device. The recorder learns a handle it did not see
 * created before recording the call (interpose/custom_attr.c); for captures
 * where the Function record comes later, the call waits here and is applied
 * just before the first launch of that handle. */
#include <cupti_driver_cbid.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"

#define CB(fn) CUPTI_DRIVER_TRACE_CBID_##fn

typedef struct rp_attr_wait { /* a call whose function was not known yet */
  uint64_t handle;            /* recorded CUfunction / CUkernel */
  uint32_t call;              /* cbid */
  uint64_t a[4];              /* Record.args */
} rp_attr_wait;

struct rp_attrs {
  rp_attr_wait *w;
  size_t n, cap;
};

static const char *call_name(uint32_t call) {
  switch (call) {
  case CB(cuFuncSetAttribute): return "cuFuncSetAttribute";
  case CB(cuFuncSetCacheConfig): return "cuFuncSetCacheConfig";
  case CB(cuFuncSetSharedMemConfig): return "cuFuncSetSharedMemConfig";
  case CB(cuKernelSetAttribute): return "cuKernelSetAttribute";
  case CB(cuKernelSetCacheConfig): return "cuKernelSetCacheConfig";
  case CB(cuCtxSetLimit): return "cuCtxSetLimit";
  case CB(cuCtxSetCacheConfig): return "cuCtxSetCacheConfig";
  case CB(cuCtxSetSharedMemConfig): return "cuCtxSetSharedMemConfig";
  default: return NULL;
  }
}

/* Number of Record.args the call has; 0 for calls not handled here. */
static size_t call_nargs(uint32_t call) {
  switch (call) {
  case CB(cuFuncSetAttribute): return 3;
  case CB(cuFuncSetCacheConfig): return 2;
  case CB(cuFuncSetSharedMemConfig): return 2;
  case CB(cuKernelSetAttribute): return 4;
  case CB(cuKernelSetCacheConfig): return 3;
  case CB(cuCtxSetLimit): return 2;
  case CB(cuCtxSetCacheConfig): return 1;
  case CB(cuCtxSetSharedMemConfig): return 1;
  default: return 0;
  }
}

/* The recorded function/kernel handle of a function-targeted call (0: the
 * call targets the current context). */
static uint64_t call_handle(uint32_t call, const uint64_t *a) {
  switch (call) {
  case CB(cuFuncSetAttribute):
  case CB(cuFuncSetCacheConfig):
  case CB(cuFuncSetSharedMemConfig):
  case CB(cuKernelSetCacheConfig):
    return a[0];
  case CB(cuKernelSetAttribute):
    return a[2];
  default:
    return 0;
  }
}

/* A driver refusal: the recorded call succeeded, so this replay differs
 * (another GPU or driver); named and counted, the replay goes on (a launch
 * that needed it then fails with its own error). */
static void refused(rp_state *R, uint32_t call, const uint64_t *a, CUresult r) {
  CUCAP_WARN("replay: record %" PRIu64 " (seq %" PRIu64 "): %s(0x%" PRIx64
             ", %" PRId64 ") refused by the driver: %s",
             R->rec_index, R->cur_seq, call_name(call), a[0], (int64_t)a[1],
             rp_cu_err(&R->d, r));
  char what[48];
  snprintf(what, sizeof what, "%s (refused)", call_name(call));
  rp_skip(R, what);
}

/* cuCtxSetLimit. The driver refuses to change the device malloc heap size
 * once a kernel used the heap, even to the size it has (H100, driver 580),
 * and a verify replays the capture several times in one process: from the
 * second pass on, the primary context already has the size the first pass
 * set. So the limit is queried first: when the context already has it -
 * the requested value, or what the driver reported after the same request
 * in an earlier pass (it may round) - there is nothing to do and nothing to
 * warn about; every pass runs with the same limit. Only a real refusal is
 * reported. */
static CUresult set_limit(rp_state *R, const uint64_t *a) {
  const rp_fns *d = &R->d.df;
  CUlimit lim = (CUlimit)a[0];
  size_t cur = 0;
  unsigned li = (unsigned)a[0];
  int known = li < 16 && (R->lim.limit_known >> li & 1) && R->lim.limit_req[li] == a[1];
  if (d->CtxGetLimit && d->CtxGetLimit(&cur, lim) == CUDA_SUCCESS &&
      (cur == a[1] || (known && cur == R->lim.limit_got[li]))) {
    CUCAP_DEBUG("replay: cuCtxSetLimit(0x%x, %" PRIu64 "): the context has it "
                "already (%zu)", (unsigned)lim, a[1], cur);
    return CUDA_SUCCESS;
  }
  if (!d->CtxSetLimit)
    return CUDA_ERROR_NOT_FOUND;
  CUresult r = d->CtxSetLimit(lim, (size_t)a[1]);
  if (r == CUDA_SUCCESS && li < 16 && d->CtxGetLimit &&
      d->CtxGetLimit(&cur, lim) == CUDA_SUCCESS) {
    R->lim.limit_req[li] = a[1];
    R->lim.limit_got[li] = cur;
    R->lim.limit_known |= (uint16_t)(1u << li);
  }
  return r;
}

/* Applies a function-targeted call to the live handle of fi. */
static CUresult apply_fn(rp_state *R, uint32_t call, const uint64_t *a,
                         const rp_func *fi) {
  const rp_fns *d = &R->d.df;
  void *h = (void *)(uintptr_t)fi->live; /* same kind as the program passed */
  switch (call) {
  case CB(cuFuncSetAttribute):
    return d->FuncSetAttribute
               ? d->FuncSetAttribute(h, (CUfunction_attribute)a[1], (int)a[2])
               : CUDA_ERROR_NOT_FOUND;
  case CB(cuFuncSetCacheConfig):
    return d->FuncSetCacheConfig ? d->FuncSetCacheConfig(h, (CUfunc_cache)a[1])
                                 : CUDA_ERROR_NOT_FOUND;
  case CB(cuFuncSetSharedMemConfig):
    return d->FuncSetSharedMemConfig
               ? d->FuncSetSharedMemConfig(h, (CUsharedconfig)a[1])
               : CUDA_ERROR_NOT_FOUND;
  case CB(cuKernelSetAttribute): /* the recorded device is this replay's */
    return d->KernelSetAttribute
               ? d->KernelSetAttribute((CUfunction_attribute)a[0], (int)a[1], h, R->dev)
               : CUDA_ERROR_NOT_FOUND;
  case CB(cuKernelSetCacheConfig):
    return d->KernelSetCacheConfig
               ? d->KernelSetCacheConfig(h, (CUfunc_cache)a[1], R->dev)
               : CUDA_ERROR_NOT_FOUND;
  default:
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

static int wait_add(rp_state *R, uint64_t handle, uint32_t call, const uint64_t *a,
                    size_t n) {
  if (!R->attr && !(R->attr = calloc(1, sizeof *R->attr)))
    return 0;
  struct rp_attrs *A = R->attr;
  if (!CUCAP_VEC_RESERVE(A->w, A->cap, A->n + 1, 8))
    return 0;
  rp_attr_wait *w = &A->w[A->n++];
  memset(w, 0, sizeof *w);
  w->handle = handle;
  w->call = call;
  memcpy(w->a, a, n * sizeof *a);
  return 1;
}

int rp_attr_execute(rp_state *R, const cucap_fb_record *rec) {
  uint32_t call = cucap_fb_record_call(rec);
  size_t need = call_nargs(call), n = 0;
  if (!need)
    return 0;
  const uint64_t *a = cucap_fb_record_args(rec, &n);
  if (!a || n < need) {
    char what[48];
    snprintf(what, sizeof what, "%s (arguments missing)", call_name(call));
    rp_skip(R, what);
    return 1;
  }
  uint64_t h = call_handle(call, a);
  if (h) {
    uint64_t idx;
    if (!cucap_map_get(&R->code.func, h, &idx)) {
      /* not created by a record seen so far: applied before its first launch */
      if (!wait_add(R, h, call, a, need))
        rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      CUCAP_DEBUG("replay: %s on function 0x%" PRIx64 " not known yet; applied "
                  "at its first launch", call_name(call), h);
      return 1;
    }
    if (!R->code.funcs[idx].live) { /* its module went with its context */
      char what[64];
      snprintf(what, sizeof what, "%s (module unloaded)", call_name(call));
      rp_skip(R, what);
      return 1;
    }
    CUresult r = apply_fn(R, call, a, &R->code.funcs[idx]);
    if (r != CUDA_SUCCESS) {
      refused(R, call, a, r);
      return 1;
    }
    R->rep->executed++;
    return 1;
  }
  /* context state: the record's context */
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return 1;
  const rp_fns *d = &R->d.df;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  switch (call) {
  case CB(cuCtxSetLimit):
    r = set_limit(R, a);
    break;
  case CB(cuCtxSetCacheConfig):
    if (d->CtxSetCacheConfig)
      r = d->CtxSetCacheConfig((CUfunc_cache)a[0]);
    break;
  case CB(cuCtxSetSharedMemConfig):
    if (d->CtxSetSharedMemConfig)
      r = d->CtxSetSharedMemConfig((CUsharedconfig)a[0]);
    break;
  default:
    break;
  }
  if (r != CUDA_SUCCESS) {
    refused(R, call, a, r);
    return 1;
  }
  R->rep->executed++;
  return 1;
}

void rp_attr_before_launch(rp_state *R, const rp_func *fi) {
  struct rp_attrs *A = R->attr;
  if (!A)
    return;
  size_t k = 0;
  for (size_t i = 0; i < A->n; i++) { /* in recorded order: the last set wins */
    rp_attr_wait *w = &A->w[i];
    if (w->handle != fi->handle) {
      A->w[k++] = *w;
      continue;
    }
    CUresult r = apply_fn(R, w->call, w->a, fi);
    if (r != CUDA_SUCCESS)
      refused(R, w->call, w->a, r);
    else
      R->rep->executed++;
  }
  A->n = k;
}

void rp_attr_reset(rp_state *R) {
  if (!R->attr)
    return;
  if (R->attr->n)
    CUCAP_WARN("replay: %zu attribute call(s) named functions that were never "
               "launched or created; not applied", R->attr->n);
  free(R->attr->w);
  free(R->attr);
  R->attr = NULL;
}

/* ---------------------------------------------------------------- launches */

unsigned rp_attr_launch_attrs(rp_state *R, const cucap_fb_launch *l,
                              CUlaunchAttribute *at, unsigned max) {
  unsigned na = 0;
  for (size_t i = 0; i < cucap_fb_launch_attrs_len(l) && na < max; i++) {
    const cucap_fb_launch_attr *a = cucap_fb_launch_attrs_at(l, i);
    CUlaunchAttribute *o = &at[na];
    memset(o, 0, sizeof *o);
    o->id = (CUlaunchAttributeID)cucap_fb_launch_attr_id(a);
    size_t vl = 0;
    const uint8_t *v = cucap_fb_launch_attr_value(a, &vl);
    if (v)
      memcpy(&o->value, v, vl < sizeof o->value ? vl : sizeof o->value);
    switch (o->id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: /* a device address */
      o->value.accessPolicyWindow.base_ptr = (void *)(uintptr_t)rp_tr(
          R, (uint64_t)(uintptr_t)o->value.accessPolicyWindow.base_ptr);
      break;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: {
      /* the same CUevent field leads both values */
      uint64_t ev = (uint64_t)(uintptr_t)o->value.programmaticEvent.event, live = 0;
      if (!ev || !cucap_map_get(&R->cx.event, ev, &live)) {
        CUCAP_WARN("replay: record %" PRIu64 ": launch attribute %d names event "
                   "0x%" PRIx64 " that was not created by a recorded call; "
                   "attribute dropped", R->rec_index, (int)o->id, ev);
        rp_skip(R, "launch attribute with unknown event");
        continue;
      }
      o->value.programmaticEvent.event = (CUevent)(uintptr_t)live;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      o->value.deviceUpdatableKernelNode.devNode = NULL; /* an output */
      break;
    default: /* plain values: cluster dims, cooperative, priority, ... */
      break;
    }
    na++;
  }
  return na;
}

/* ---------------------------------------------------------------- legacy */

/* Texture and surface references (removed from CUDA C++ in 12.0, still
 * exported by the CUDA 13 driver for old binaries): bound state a module's
 * kernels read, not replayed. */
const char *rp_attr_unreplayable(const cucap_fb_record *rec) {
  if (cucap_fb_record_result(rec) != 0)
    return NULL;
  switch (cucap_fb_record_call(rec)) {
#define RP_LEGACY(fn) /* ## keeps cuda.h's renaming macros out */             \
  case CUPTI_DRIVER_TRACE_CBID_##fn:                                           \
    return #fn " (legacy texref)";
    RP_LEGACY(cuTexRefSetArray)
    RP_LEGACY(cuTexRefSetMipmappedArray)
    RP_LEGACY(cuTexRefSetAddress)
    RP_LEGACY(cuTexRefSetAddress_v2)
    RP_LEGACY(cuTexRefSetAddress2D)
    RP_LEGACY(cuTexRefSetAddress2D_v2)
    RP_LEGACY(cuTexRefSetAddress2D_v3)
    RP_LEGACY(cuTexRefSetFormat)
    RP_LEGACY(cuTexRefSetAddressMode)
    RP_LEGACY(cuTexRefSetFilterMode)
    RP_LEGACY(cuTexRefSetFlags)
    RP_LEGACY(cuTexRefSetBorderColor)
    RP_LEGACY(cuTexRefSetMaxAnisotropy)
    RP_LEGACY(cuTexRefSetMipmapFilterMode)
    RP_LEGACY(cuTexRefSetMipmapLevelBias)
    RP_LEGACY(cuTexRefSetMipmapLevelClamp)
    RP_LEGACY(cuSurfRefSetArray)
    RP_LEGACY(cuSurfRefSetFormat)
    RP_LEGACY(cuParamSetTexRef)
#undef RP_LEGACY
  default:
    return NULL;
  }
}
