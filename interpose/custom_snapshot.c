/* custom_snapshot.c - wires capture/snapshot.c to the real driver: snapshot=exit (at exit and before a context dies, see
 * custom_context.c), snapshot=launch:N (before and after launch N),
 * snapshot=range:NAME[@K] (at the start of the K-th NVTX/profiler range
 * NAME, see custom_nvtx.c), hash_launches (after each launch: the device is
 * synchronized, which serialises the app's GPU work - timing changes,
 * results do not). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_snapshot.h"
#include "custom_internal.h"

static int op_alloc_host(void *u, void **p, size_t n) {
  (void)u;
  if (cucap_real.cuMemAllocHost_v2 && cucap_real.cuMemAllocHost_v2(p, n) == CUDA_SUCCESS)
    return 0;
  return -1;
}
static void op_free_host(void *u, void *p) {
  (void)u;
  if (cucap_real.cuMemFreeHost)
    (void)cucap_real.cuMemFreeHost(p);
}
static int op_copy_dtoh(void *u, void *dst, uint64_t src, size_t n) {
  (void)u;
  return cucap_real.cuMemcpyDtoH_v2 &&
                 cucap_real.cuMemcpyDtoH_v2(dst, (CUdeviceptr)src, n) == CUDA_SUCCESS
             ? 0
             : -1;
}
static int op_sync(void *u) {
  (void)u;
  return cucap_real.cuCtxSynchronize && cucap_real.cuCtxSynchronize() == CUDA_SUCCESS ? 0 : -1;
}

static const cucap_snapshot_ops g_ops = {NULL, op_alloc_host, op_free_host, op_copy_dtoh,
                                         op_sync};

static int g_exit_taken;

void cx_snapshot_take(uint8_t reason, uint64_t launch_index) {
  /* a snapshot synchronises the context and copies on the legacy stream:
   * both would break (invalidate) an active stream capture */
  if (cx_capture_any()) {
    CUCAP_WARN("snapshot skipped: a stream capture is active");
    return;
  }
  cx_relaxed rx;
  cx_relax_begin(&rx);
  cucap_status st = cucap_snapshot_take(cx_tracker(), &g_ops, reason, launch_index);
  cx_relax_end(&rx);
  if (st != CUCAP_OK)
    CUCAP_WARN("snapshot failed: %s", cucap_status_str(st));
  else if (reason == CUCAP_FB_SNAPSHOTREASON_EXIT)
    g_exit_taken = 1;
}

void cx_snapshot_context_loss(uint64_t ctx) {
  /* The dying context need not be current on this thread (cudart releases
   * the primary context from an exit handler): make it current for the
   * copies, and free the staging buffer it owns before it goes. */
  int pushed = ctx && cucap_real.cuCtxPushCurrent_v2 &&
               cucap_real.cuCtxPushCurrent_v2((CUcontext)(uintptr_t)ctx) == CUDA_SUCCESS;
  cx_snapshot_take(CUCAP_FB_SNAPSHOTREASON_EXIT, 0);
  cucap_snapshot_release_staging(&g_ops);
  if (pushed && cucap_real.cuCtxPopCurrent_v2) {
    CUcontext old;
    (void)cucap_real.cuCtxPopCurrent_v2(&old);
  }
}

void cx_launch_hash(uint64_t launch_index) {
  cx_relaxed rx;
  cx_relax_begin(&rx);
  cucap_status st = cucap_snapshot_hash_launch(cx_tracker(), &g_ops, launch_index);
  cx_relax_end(&rx);
  if (st != CUCAP_OK)
    CUCAP_DEBUG("launch hash failed: %s", cucap_status_str(st));
}

void cx_snapshot_before_launch(uint64_t launch_index) {
  const cucap_rec_options *o = cucap_rec_opts();
  if (o->snapshot == CUCAP_REC_SNAPSHOT_LAUNCH && o->snapshot_launch == launch_index)
    cx_snapshot_take(CUCAP_FB_SNAPSHOTREASON_BEFORELAUNCH, launch_index);
}

void cx_snapshot_after_launch(uint64_t launch_index) {
  const cucap_rec_options *o = cucap_rec_opts();
  if (o->snapshot == CUCAP_REC_SNAPSHOT_LAUNCH && o->snapshot_launch == launch_index)
    cx_snapshot_take(CUCAP_FB_SNAPSHOTREASON_AFTERLAUNCH, launch_index);
}

/* Makes an active primary context current when the thread has none (never
 * creating one); *dev and the return value tell primary_leave what to undo. */
static int primary_enter(CUdevice *dev) {
  CUcontext cur = NULL;
  int pushed = 0;
  *dev = 0;
  if (cucap_real.cuCtxGetCurrent && cucap_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS &&
      !cur && cucap_real.cuDevicePrimaryCtxGetState && cucap_real.cuDeviceGet &&
      cucap_real.cuDeviceGet(dev, 0) == CUDA_SUCCESS) {
    unsigned flags = 0;
    int active = 0;
    CUcontext pctx = NULL;
    if (cucap_real.cuDevicePrimaryCtxGetState(*dev, &flags, &active) == CUDA_SUCCESS &&
        active && cucap_real.cuDevicePrimaryCtxRetain &&
        cucap_real.cuDevicePrimaryCtxRetain(&pctx, *dev) == CUDA_SUCCESS) {
      pushed = cucap_real.cuCtxPushCurrent_v2 &&
               cucap_real.cuCtxPushCurrent_v2(pctx) == CUDA_SUCCESS;
      if (!pushed && cucap_real.cuDevicePrimaryCtxRelease_v2)
        (void)cucap_real.cuDevicePrimaryCtxRelease_v2(*dev);
    }
  }
  return pushed;
}

static void primary_leave(int pushed, CUdevice dev) {
  if (pushed) {
    CUcontext old;
    (void)cucap_real.cuCtxPopCurrent_v2(&old);
    if (cucap_real.cuDevicePrimaryCtxRelease_v2)
      (void)cucap_real.cuDevicePrimaryCtxRelease_v2(dev);
  }
}

static atomic_uint_fast64_t g_range_seen;

void cx_snapshot_range_start(const char *name) {
  const cucap_rec_options *o = cucap_rec_opts();
  if (o->snapshot != CUCAP_REC_SNAPSHOT_RANGE || !name || strcmp(name, o->snapshot_range) != 0)
    return;
  if (atomic_fetch_add(&g_range_seen, 1) != o->snapshot_nth)
    return;
  /* an NVTX range may start on a thread without a current context */
  CUdevice dev;
  int pushed = primary_enter(&dev);
  cx_snapshot_take(CUCAP_FB_SNAPSHOTREASON_RANGESTART, 0);
  primary_leave(pushed, dev);
}

static void at_exit_snapshot(void) {
  cucap_tracked_alloc *v = NULL;
  size_t n = 0;
  /* a context teardown already took it and nothing lives any more */
  if (cucap_tracker_alloc_list_device(cx_tracker(), &v, &n) == CUCAP_OK) {
    free(v);
    if (n == 0 && g_exit_taken)
      return;
  }
  /* At exit the main thread may have no current context any more (runtimes
   * unset it in their own exit handlers) although the primary context and its
   * memory still live: make an active primary context current for the copies,
   * never creating one. */
  CUdevice dev;
  int pushed = primary_enter(&dev);
  cx_snapshot_take(CUCAP_FB_SNAPSHOTREASON_EXIT, 0);
  primary_leave(pushed, dev);
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* Registered with atexit() here - at the first allocation or module load,
 * i.e. after cuInit - and not through cucap_rec_at_exit (whose handler was
 * registered when libcucap loaded): exit handlers run in reverse order of
 * registration, and the driver tears itself down in a handler it registers
 * during cuInit: a snapshot run from the early handler finds the driver
 * gone ("synchronize failed", every region unreadable). The
 * recorder's own close handler, registered at load, still runs after this. */
static void register_exit(void) {
  if (cucap_rec_opts()->snapshot == CUCAP_REC_SNAPSHOT_EXIT && atexit(at_exit_snapshot) != 0)
    cucap_rec_at_exit(at_exit_snapshot);
}

void cx_snapshot_init(void) { pthread_once(&g_once, register_exit); }
