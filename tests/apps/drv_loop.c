/* drv_loop: a long-running driver-API program for the crash, kill and
 * disk-full tests (tests/integration/test_record_kill.sh, test_record_diskfull.sh).
 *
 *   drv_loop [ITERS [BYTES [ACTION@K]]]      defaults: 6 iterations, 64 KiB
 *
 * Each iteration uploads BYTES of new data (a distinct blob every time),
 * scales it on the GPU (kernel `scale`), adds a memset, downloads it and
 * folds it into a running hash; it prints "iter I hash H" (flushed, so a
 * killed run leaves its progress on stdout) and, at the end, "drv_loop ok".
 * ACTION at the start of iteration K (0-based):
 *   kill       raise(SIGKILL)              term   raise(SIGTERM)
 *   int        raise(SIGINT)               segv   write to address 16 (a fault)
 *   exit3      exit(3)                     sleepkill  sleep 1.5 s, then SIGKILL
 *   pause      sleep 1.5 s and go on       (idle time: the recorder's timer
 *                                          must seal what was recorded) */
#include <signal.h>
#include <unistd.h>

#include "drv_common.h"

static void act(const char *a) {
  fflush(stdout);
  if (!strcmp(a, "kill")) raise(SIGKILL);
  else if (!strcmp(a, "term")) raise(SIGTERM);
  else if (!strcmp(a, "int")) raise(SIGINT);
  else if (!strcmp(a, "segv")) { /* a real fault; not NULL, which UBSan would stop first */
    volatile int *volatile bad = (volatile int *)(uintptr_t)16;
    *bad = 1;
  }
  else if (!strcmp(a, "exit3")) exit(3);
  else if (!strcmp(a, "sleepkill")) { usleep(1500000); raise(SIGKILL); }
  else if (!strcmp(a, "pause")) usleep(1500000);
  else { fprintf(stderr, "drv_loop: unknown action %s\n", a); exit(2); }
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 6;
  size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 65536;
  const char *action = NULL;
  long at = -1;
  if (argc > 3) {
    static char a[32];
    const char *s = strchr(argv[3], '@');
    if (!s || (size_t)(s - argv[3]) >= sizeof a) { fprintf(stderr, "drv_loop: ACTION@K\n"); return 2; }
    memcpy(a, argv[3], (size_t)(s - argv[3]));
    action = a;
    at = atol(s + 1);
  }
  size_t n = bytes / sizeof(float);
  if (n < 256) n = 256;
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction scale;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  float *h = malloc(n * sizeof *h);
  if (!h) return 1;
  CUdeviceptr d;
  CK(cuMemAlloc(&d, n * sizeof(float)));
  uint64_t acc = 0;
  for (long it = 0; it < iters; it++) {
    if (it == at) act(action);
    for (size_t i = 0; i < n; i++) h[i] = (float)((i + (size_t)it * 7) % 251);
    CK(cuMemcpyHtoD(d, h, n * sizeof(float)));
    float s = 2.0f;
    int ni = (int)n;
    void *args[] = {&d, &s, &ni};
    CK(cuLaunchKernel(scale, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CK(cuMemsetD8(d, (unsigned char)it, 16));
    CK(cuMemcpyDtoH(h, d, n * sizeof(float)));
    acc = (acc ^ drv_hash(h, n * sizeof(float))) * 1099511628211ull;
    printf("iter %ld hash %016llx\n", it, (unsigned long long)acc);
    fflush(stdout);
  }
  if (at == iters) act(action);
  CK(cuMemFree(d));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(h);
  printf("drv_loop ok\n");
  return 0;
}
