/* bench_record_mock.c - per-call cost of the driver calls the recorder sees
 * most, one class of entry point at a time. A driver-API program linked
 * -lcuda against the mock's directory without an rpath (like
 * tests/apps/drv_*), so it runs natively on the mock and under `cucap
 * record`; the difference of the two runs is the recording overhead per call.
 *   LD_LIBRARY_PATH=<build>/tests/mock ./bench/bench_record_mock [N] [CLASS...]
 *   LD_LIBRARY_PATH=<build>/tests/mock cucap record -o x.fb -- ./bench/bench_record_mock [N]
 * Prints "<class>: <ns> ns/call" per class. Classes (all but launch_cold and
 * launch_mt by default):
 *   query        cuCtxGetDevice (a pure query: Get/Query/Occupancy-style)
 *   query3       cuCtxGetDevice + cuDevicePrimaryCtxGetState + cuKernelGetAttribute
 *                (the mix cuDNN/PyTorch make thousands of times per step; per
 *                call, i.e. the loop time / 3)
 *   bodyless     cuFuncSetCacheConfig (recorded one by one, no body)
 *   launch       cuLaunchKernel (vec_add, 4 params, 1 block of 1 thread, n = 0:
 *                the mock does no work)
 *   launch_deep  the same launch called below 24 extra frames (a deep stack)
 *   launch_junk  the same launch called from a frame whose frame pointer
 *                register holds a stack address with a changing "return
 *                address" (what code built without frame pointers leaves;
 *                PyTorch's launches look like that)
 *   launch_ex    cuLaunchKernelEx with one launch attribute (priority)
 *   kernel_fn    cuKernelGetFunction on the same CUkernel
 *   memset       cuMemsetD8Async on a stream
 *   dtoh_sync    cuMemcpyDtoHAsync into pinned memory + cuStreamSynchronize
 *                (per pair)
 *   cnn_step     one step's driver calls of the torchvision CNN training
 *                loop (bf16 autocast, channels_last, cuDNN) as counted by
 *                `cucap record --stats` on a real GPU (per step; where
 *                the mix comes from: docs/bench-log.md, "CNN step call
 *                mix"): 286 cuLaunchKernel, 62 cuLaunchKernelEx, 3764
 *                cuCtxGetDevice, 1824 cuKernelGetAttribute, 1246
 *                cuDevicePrimaryCtxGetState, 123 cuKernelGetFunction, 56
 *                cuGetProcAddress, 35 cuDeviceGetAttribute, 12
 *                cuMemsetD8Async, 3 cuMemcpyDtoHAsync + cuStreamSynchronize
 *                (per step, i.e. per iteration)
 *   launch_mt    the launch of `launch` from BENCH_MT_THREADS threads at once
 *                (default 2), each on its own stream, N launches in all; ns
 *                per launch of the whole: what threads that launch at once
 *                cost each other (the append lock, shared cache lines)
 *   launch_cold  the launch of `launch` after reading a 16 MiB buffer (the
 *                program's own work between two launches evicts the data
 *                caches on a real machine): run under callgrind with
 *                --cache-sim=yes, recorded minus native D1/LL misses are the
 *                cache lines the recorder touches per launch (the eviction
 *                loop is the same in both runs)
 * Under valgrind --tool=callgrind --collect-atstart=no each class's loop is
 * collected and dumped separately (CALLGRIND_DUMP_STATS_AT(class)):
 * bench/record_cost_mock.sh turns the dumps into instructions per call. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#endif

#include "../tests/apps/drv_common.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static CUfunction g_f;
static CUdeviceptr g_a, g_b, g_c;
static int g_cnt; /* 0: no element is touched */
static void *g_args[] = {&g_a, &g_b, &g_c, &g_cnt};

static volatile uint64_t *g_evict;
enum { EVICT_BYTES = 16 << 20 };

/* reads every line of a buffer larger than the simulated last-level cache */
__attribute__((noinline)) static void evict(void) {
  uint64_t sum = 0;
  for (size_t i = 0; i < EVICT_BYTES / 8; i += 8)
    sum += g_evict[i];
  g_evict[0] = sum;
}

static void launch1(void) {
  CK(cuLaunchKernel(g_f, 1, 1, 1, 1, 1, 1, 0, NULL, g_args, NULL));
}

/* One CNN training step's driver calls (cnn_step above). */
static void cnn_step(CUkernel kern, const CUlaunchConfig *cfg, CUstream s, void *pinned) {
  CUdevice dev;
  unsigned flags;
  int active, v;
  CUfunction kf;
  void *fn;
  CUdriverProcAddressQueryResult q;
  for (int i = 0; i < 3764; i++)
    CK(cuCtxGetDevice(&dev));
  for (int i = 0; i < 1824; i++)
    CK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kern, dev));
  for (int i = 0; i < 1246; i++)
    CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  for (int i = 0; i < 123; i++)
    CK(cuKernelGetFunction(&kf, kern));
  for (int i = 0; i < 56; i++)
    CK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
  for (int i = 0; i < 35; i++)
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  for (int i = 0; i < 12; i++)
    CK(cuMemsetD8Async(g_a, 0, 256, s));
  for (int i = 0; i < 286; i++)
    launch1();
  for (int i = 0; i < 62; i++)
    CK(cuLaunchKernelEx(cfg, g_f, g_args, NULL));
  for (int i = 0; i < 3; i++) {
    CK(cuMemcpyDtoHAsync(pinned, g_a, 256, s));
    CK(cuStreamSynchronize(s));
  }
}

/* launch_mt: each thread launches `iters` times on a stream of its own,
 * all starting together */
typedef struct mt_arg {
  CUcontext ctx;
  long iters;
  pthread_barrier_t *go;
} mt_arg;

static void *mt_main(void *p) {
  mt_arg *a = p;
  CUstream st;
  CK(cuCtxSetCurrent(a->ctx));
  CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  pthread_barrier_wait(a->go);
  for (long i = 0; i < a->iters; i++)
    CK(cuLaunchKernel(g_f, 1, 1, 1, 1, 1, 1, 0, st, g_args, NULL));
  CK(cuStreamSynchronize(st));
  CK(cuStreamDestroy(st));
  return NULL;
}

/* Runs launch_mt's threads; returns once all have finished. */
static void launch_mt(CUcontext ctx, long iters) {
  const char *e = getenv("BENCH_MT_THREADS");
  int nt = e ? atoi(e) : 2;
  if (nt < 1 || nt > 64)
    nt = 2;
  pthread_t th[64];
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)nt);
  mt_arg a = {ctx, (iters + nt - 1) / nt, &go};
  for (int i = 0; i < nt; i++)
    if (pthread_create(&th[i], NULL, mt_main, &a) != 0) {
      fprintf(stderr, "launch_mt: pthread_create failed\n");
      exit(1);
    }
  for (int i = 0; i < nt; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
}

/* a chain of real frames (frame pointers kept: -fno-omit-frame-pointer) */
__attribute__((noinline)) static void deep(int n) {
  if (n == 0)
    launch1();
  else
    deep(n - 1);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

#if defined(__x86_64__)
/* Calls fn with %rbp pointing at fake[0] = {next frame, "return address"},
 * like code compiled without frame pointers that keeps a stack address in
 * %rbp: the recorder's frame-pointer walk finds a plausible frame there. */
extern void bench_call_with_rbp(void *rbp, void (*fn)(void));
__asm__(".text\n"
        ".globl bench_call_with_rbp\n"
        ".type bench_call_with_rbp, @function\n"
        "bench_call_with_rbp:\n"
        "  pushq %rbp\n"
        "  movq %rdi, %rbp\n"
        "  callq *%rsi\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size bench_call_with_rbp, .-bench_call_with_rbp\n");
#endif

typedef struct cls {
  const char *name;
  int calls_per_iter;
} cls;

static int wanted(int argc, char **argv, const char *name) {
  if (argc <= 2) /* all but launch_cold (slow) and launch_mt (threads: not
                    for callgrind's per-class counts); named explicitly */
    return strcmp(name, "launch_cold") != 0 && strcmp(name, "launch_mt") != 0;
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return 1;
  return 0;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  if (n <= 0) {
    fprintf(stderr, "usage: %s [N>0] [CLASS...]\n", argv[0]);
    return 2;
  }
  CUcontext ctx = drv_setup();
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  CUmodule mod;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&g_f, mod, "vec_add"));
  CUlibrary lib;
  CUkernel kern;
  CK(cuLibraryLoadData(&lib, drv_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&kern, lib, "scale"));
  CK(cuMemAlloc(&g_a, 256));
  CK(cuMemAlloc(&g_b, 256));
  CK(cuMemAlloc(&g_c, 256));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void *pinned;
  CK(cuMemAllocHost(&pinned, 256));
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attr.value.priority = 0;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  uint64_t fake[4];
  g_evict = calloc(EVICT_BYTES / 8, 8);
  if (!g_evict)
    return 1;

  static const char *const names[] = {"query", "query3", "bodyless", "launch",
                                      "launch_deep", "launch_junk", "launch_ex",
                                      "kernel_fn", "memset", "dtoh_sync", "launch_cold",
                                      "cnn_step", "launch_mt"};
  enum { NCLS = sizeof names / sizeof names[0] };
  for (int k = 0; k < NCLS; k++) {
    const char *name = names[k];
    if (!wanted(argc, argv, name))
      continue;
    int per = k == 1 ? 3 : 1;
    /* warm-up (thread state, function layout, callstacks), then timed */
    for (int pass = 0; pass < 2; pass++) {
      long iters = pass == 0 ? (k == 11 ? 2 : 100) : (k == 11 ? (n + 99) / 100 : n);
      if (k == 12) { /* one call runs all the threads */
        double m0 = now_ns();
        if (pass == 1)
          CALLGRIND_TOGGLE_COLLECT;
        launch_mt(ctx, iters);
        double m1 = now_ns();
        if (pass == 1) {
          CALLGRIND_TOGGLE_COLLECT;
          CALLGRIND_DUMP_STATS_AT(name);
          printf("%s: %.1f ns/call\n", name, (m1 - m0) / (double)iters);
        }
        continue;
      }
      if (pass == 1)
        CALLGRIND_TOGGLE_COLLECT;
      double t0 = now_ns();
      for (long i = 0; i < iters; i++) {
        switch (k) {
        case 0:
          CK(cuCtxGetDevice(&dev));
          break;
        case 1: {
          unsigned flags;
          int active, v;
          CK(cuCtxGetDevice(&dev));
          CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
          CK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kern, dev));
          break;
        }
        case 2:
          CK(cuFuncSetCacheConfig(g_f, CU_FUNC_CACHE_PREFER_NONE));
          break;
        case 3:
          launch1();
          break;
        case 4:
          deep(24);
          break;
        case 5:
#if defined(__x86_64__)
          fake[0] = (uint64_t)(uintptr_t)&fake[2];
          fake[1] = 0x100000 + (uint64_t)i * 64; /* a different "frame" each time */
          fake[2] = 0;
          fake[3] = 0;
          bench_call_with_rbp(fake, launch1);
#else
          launch1();
#endif
          break;
        case 6:
          CK(cuLaunchKernelEx(&cfg, g_f, g_args, NULL));
          break;
        case 7: {
          CUfunction kf;
          CK(cuKernelGetFunction(&kf, kern));
          break;
        }
        case 8:
          CK(cuMemsetD8Async(g_a, 0, 256, s));
          break;
        case 9:
          CK(cuMemcpyDtoHAsync(pinned, g_a, 256, s));
          CK(cuStreamSynchronize(s));
          break;
        case 10:
          evict();
          launch1();
          break;
        case 11:
          cnn_step(kern, &cfg, s, pinned);
          break;
        }
      }
      double t1 = now_ns();
      if (pass == 1) {
        CALLGRIND_TOGGLE_COLLECT;
        CALLGRIND_DUMP_STATS_AT(name);
        printf("%s: %.1f ns/call\n", name, (t1 - t0) / (double)iters / per);
      }
    }
  }
  CK(cuStreamSynchronize(s));
  CK(cuCtxSynchronize());
  CK(cuMemFreeHost(pinned));
  CK(cuStreamDestroy(s));
  CK(cuMemFree(g_a));
  CK(cuMemFree(g_b));
  CK(cuMemFree(g_c));
  CK(cuLibraryUnload(lib));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  return 0;
}
