/* record_fork_app.c - helper program of test_record_fork.sh: a CUDA app (driver API through dlopen, like
 * record_gpa_app.c; plain cc, no toolkit libraries) that makes child
 * processes while it is being recorded.
 *   record_fork_app fork N     cuInit; fork three children: one exits
 *                              normally (atexit/destructors run), one calls
 *                              the driver first, one dies of SIGTERM; then N
 *                              cuDeviceGet calls in the parent
 *   record_fork_app spawn N    cuInit; system("sh -c true"); run itself as
 *                              `child` (fork+exec, a second CUDA process);
 *                              then N cuDeviceGet calls
 *   record_fork_app child      cuInit + cuDriverGetVersion, prints its pid
 * Prints "child pid P" for each exec'd CUDA child and "parent done". */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*ver_fn)(int *);
typedef int (*devget_fn)(int *, int);

static init_fn cu_init;
static ver_fn cu_ver;
static devget_fn cu_devget;

static int load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
    return -1;
  }
  cu_init = (init_fn)dlsym(h, "cuInit");
  cu_ver = (ver_fn)dlsym(h, "cuDriverGetVersion");
  cu_devget = (devget_fn)dlsym(h, "cuDeviceGet");
  return cu_init && cu_ver && cu_devget ? 0 : -1;
}

static int wait_child(pid_t p) {
  int st = 0;
  if (waitpid(p, &st, 0) != p)
    return -1;
  return st;
}

static void tail_calls(long n) {
  int dev = -1;
  for (long i = 0; i < n; i++)
    cu_devget(&dev, 0);
}

int main(int argc, char **argv) {
  if (argc < 2 || load() != 0)
    return 2;
  if (strcmp(argv[1], "child") == 0) {
    int v = 0;
    if (cu_init(0) != 0 || cu_ver(&v) != 0)
      return 3;
    printf("child pid %ld\n", (long)getpid());
    return 0;
  }
  long n = argc > 2 ? atol(argv[2]) : 100;
  if (cu_init(0) != 0)
    return 3;
  int v = 0;
  cu_ver(&v);
  fflush(stdout);
  if (strcmp(argv[1], "fork") == 0) {
    pid_t a = fork();
    if (a == 0)
      exit(0); /* atexit handlers + destructors run in the child */
    pid_t b = fork();
    if (b == 0) {
      int w = 0;
      cu_ver(&w); /* passes through, unrecorded */
      exit(0);
    }
    pid_t c = fork();
    if (c == 0) {
      raise(SIGTERM);
      _exit(9);
    }
    int sa = wait_child(a), sb = wait_child(b), sc = wait_child(c);
    if (!WIFEXITED(sa) || WEXITSTATUS(sa) != 0 || !WIFEXITED(sb) ||
        WEXITSTATUS(sb) != 0 || !WIFSIGNALED(sc) || WTERMSIG(sc) != SIGTERM) {
      fprintf(stderr, "children: %x %x %x\n", sa, sb, sc);
      return 4;
    }
  } else if (strcmp(argv[1], "spawn") == 0) {
    if (system("sh -c true") != 0)
      return 5;
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
      execl("/proc/self/exe", argv[0], "child", (char *)NULL);
      _exit(127);
    }
    int st = wait_child(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "CUDA child failed: %x\n", st);
      return 6;
    }
  } else {
    return 2;
  }
  tail_calls(n);
  printf("parent done\n");
  return 0;
}
