/* record_gpa_app.c - helper program of test_record_basic.sh: reaches the driver the way cudart 13 does - dlopen libcuda,
 * dlsym("cuGetProcAddress_v2"), ask cuGetProcAddress for itself (11030 and
 * 12000), then get every entry point through it - and calls them.
 *   record_gpa_app            functional run; prints what it did
 *   record_gpa_app bench N    N cuCtxGetCurrent calls, prints ns/call
 *   record_gpa_app threads T N  T threads x N (cuCtxSetCurrent + cuCtxGetCurrent)
 *                               calls (recorded one by one, and pure queries
 *                               counted per thread)
 * Built by the test script itself (plain cc, no CUDA toolkit libraries). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*gpa2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*gpa1_fn)(const char *, void **, int, unsigned long long);
typedef int (*init_fn)(unsigned);
typedef int (*devget_fn)(int *, int);
typedef int (*ver_fn)(int *);
typedef int (*ctxcur_fn)(void **);
typedef int (*ctxset_fn)(void *);
typedef int (*retain_fn)(void **, int);

static ctxcur_fn g_ctxcur;
static ctxset_fn g_ctxset;
static void *g_ctx;
static long g_n;
static void *thread_main(void *arg) {
  (void)arg;
  void *c = NULL;
  for (long i = 0; i < g_n; i++) {
    g_ctxset(g_ctx);
    g_ctxcur(&c);
  }
  return NULL;
}

int main(int argc, char **argv) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  gpa2_fn gpa0 = (gpa2_fn)dlsym(h, "cuGetProcAddress_v2");
  if (!gpa0) {
    fprintf(stderr, "no cuGetProcAddress_v2\n");
    return 2;
  }
  void *p = NULL;
  int st = 0;
  /* self-lookup, as cudart does */
  if (gpa0("cuGetProcAddress", &p, 11030, 0, &st) != 0 || !p)
    return 3;
  if (gpa0("cuGetProcAddress", &p, 12000, 0, &st) != 0 || !p)
    return 3;
  gpa2_fn gpa = (gpa2_fn)p;
#define GET(var, type, name, ver)                                              \
  type var;                                                                    \
  do {                                                                         \
    void *q_ = NULL;                                                           \
    if (gpa(name, &q_, ver, 0, &st) != 0 || !q_) {                             \
      fprintf(stderr, "cuGetProcAddress(%s) failed\n", name);                  \
      return 4;                                                                \
    }                                                                          \
    var = (type)q_;                                                            \
  } while (0)
  GET(init, init_fn, "cuInit", 2000);
  GET(drvver, ver_fn, "cuDriverGetVersion", 2020);
  GET(devget, devget_fn, "cuDeviceGet", 2000);
  GET(retain, retain_fn, "cuDevicePrimaryCtxRetain", 7000);
  GET(ctxset, ctxset_fn, "cuCtxSetCurrent", 4000);
  GET(ctxcur, ctxcur_fn, "cuCtxGetCurrent", 4000);
  if (init(0) != 0)
    return 5;
  int v = 0, dev = -1;
  drvver(&v);
  devget(&dev, 0);
  void *ctx = NULL;
  if (retain(&ctx, dev) != 0 || ctxset(ctx) != 0)
    return 6;
  if (argc >= 3 && strcmp(argv[1], "bench") == 0) {
    long n = atol(argv[2]);
    void *c = NULL;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
      ctxcur(&c);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("%.1f ns/call\n", ns);
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "threads") == 0) {
    int t = atoi(argv[2]);
    pthread_t th[64];
    g_ctxcur = ctxcur;
    g_ctxset = ctxset;
    g_ctx = ctx;
    g_n = atol(argv[3]);
    if (t < 1 || t > 64)
      return 7;
    for (int i = 0; i < t; i++)
      pthread_create(&th[i], NULL, thread_main, NULL);
    for (int i = 0; i < t; i++)
      pthread_join(th[i], NULL);
    printf("threads done\n");
    return 0;
  }
  void *cur = NULL;
  ctxcur(&cur);
  printf("driver ok, device %d, current context %s\n", dev, cur == ctx ? "matches" : "differs");
  return 0;
}
