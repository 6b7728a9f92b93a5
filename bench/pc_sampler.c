/* pc_sampler.c - a wall-clock sampling profiler for one process, preloaded
 * (LD_PRELOAD=libpc_sampler.so PCSAMP_OUT=prefix): issue 10's breakdown of
 * where a recorded training step spends its host time, on a GPU machine that
 * has no perf. Not part of cucap itself.
 *
 * A wall-clock timer (timer_create(CLOCK_MONOTONIC), SIGPROF, PCSAMP_HZ a
 * second, default 4000) interrupts the process's main thread (with
 * PCSAMP_THREADS=all every thread it starts as well), running or
 * blocked (a CPU-time timer would only fire at the scheduler's tick, 250 Hz
 * here, and would miss where the thread waits: in a training loop the time
 * it spends in a synchronisation is as much part of the step as the time it
 * computes); the handler stores the interrupted PC, the word at the stack
 * pointer (the return address when the PC is in a leaf such as memcpy) and
 * up to PCSAMP_FRAMES frame-pointer return addresses, each read only when
 * it lies inside the thread's stack, so that a bad frame pointer ends the
 * walk instead of faulting. PCSAMP_WINDOW=1 samples only between the
 * program's pcsamp_start() and pcsamp_stop(steps) (tests/apps StepTimer).
 * At exit the samples are written to PREFIX.PID as text:
 *   # pcsamp hz=H samples=N dropped=D steps=S exe=PATH
 *   M <module path> <load base> <lo> <hi>       one per executable segment
 *   T <tid> <name>                              one per thread sampled (its
 *                                               name at pcsamp_stop, else at exit)
 *   S <tid> <main 0|1> <addr hex> <addr hex>... one per sample (PC first)
 * bench/pc_report.py turns them into tables by thread, module and function,
 * reading the modules' ELF symbols itself. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_FRAMES 8
enum { SLOT = 2 + 2 + MAX_FRAMES }; /* tid, nframes, pc, [sp], fp chain */

static uint64_t *g_buf;
static size_t g_cap;
static atomic_size_t g_n;
static atomic_size_t g_dropped;
static int g_frames = 4;
static int g_hz = 4000;
static timer_t g_timer;
static int g_armed;
static int g_all_threads;
static atomic_int g_on = 1;
static long g_steps;
static pid_t g_pid;
static char g_exe[4096];

/* The sampled thread's stack [g_stk_lo, g_stk_hi): words inside it are read
 * directly; anything else (a frame pointer used as a general register) ends
 * the walk. */
static __thread uint64_t g_stk_lo, g_stk_hi;

/* Thread names noted at pcsamp_stop, while the threads of the timed steps
 * are alive (PyTorch's autograd threads are gone by exit). */
enum { MAX_NAMES = 256 };
static uint64_t g_name_tid[MAX_NAMES];
static char g_name[MAX_NAMES][32];
static size_t g_nnames;

/* The name of thread tid (comm, spaces as '_'), into buf; 0 if gone. */
static int thread_name(uint64_t tid, char *buf, size_t size) {
  char p[64];
  snprintf(p, sizeof p, "/proc/self/task/%llu/comm", (unsigned long long)tid);
  FILE *c = fopen(p, "r");
  if (!c)
    return 0;
  int ok = fgets(buf, (int)size, c) != NULL;
  fclose(c);
  if (!ok)
    return 0;
  buf[strcspn(buf, "\n")] = 0;
  for (char *q = buf; *q; q++)
    if (*q == ' ')
      *q = '_';
  return buf[0] != 0;
}

static void note_names(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) && g_nnames < MAX_NAMES) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    uint64_t tid = strtoull(e->d_name, NULL, 10);
    if (thread_name(tid, g_name[g_nnames], sizeof g_name[0]))
      g_name_tid[g_nnames++] = tid;
  }
  closedir(d);
}

static void stack_bounds(void) {
  pthread_attr_t at;
  if (pthread_getattr_np(pthread_self(), &at) == 0) {
    void *lo = NULL;
    size_t sz = 0;
    if (pthread_attr_getstack(&at, &lo, &sz) == 0) {
      g_stk_lo = (uint64_t)(uintptr_t)lo;
      g_stk_hi = g_stk_lo + sz;
    }
    pthread_attr_destroy(&at);
  }
}

static int read_self(uint64_t addr, uint64_t *out) {
  if (addr < g_stk_lo || addr + 8 > g_stk_hi || (addr & 7))
    return -1;
  *out = *(const volatile uint64_t *)(uintptr_t)addr;
  return 0;
}

static void on_prof(int sig, siginfo_t *si, void *uc_) {
  (void)sig, (void)si;
  if (!atomic_load_explicit(&g_on, memory_order_relaxed))
    return;
  int saved = errno;
  size_t i = atomic_fetch_add_explicit(&g_n, 1, memory_order_relaxed);
  if (i >= g_cap) {
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
    errno = saved;
    return;
  }
  uint64_t *s = g_buf + i * SLOT;
  ucontext_t *uc = uc_;
  uint64_t pc = 0, sp = 0, fp = 0;
#if defined(__x86_64__)
  pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
  sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
  fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
#elif defined(__aarch64__)
  pc = uc->uc_mcontext.pc;
  sp = uc->uc_mcontext.sp;
  fp = uc->uc_mcontext.regs[29];
#endif
  uint64_t n = 0;
  s[0] = (uint64_t)syscall(SYS_gettid);
  s[2 + n++] = pc;
  uint64_t w = 0;
  s[2 + n++] = read_self(sp, &w) == 0 ? w : 0;
  for (int k = 0; k < g_frames && fp; k++) {
    uint64_t next = 0, ret = 0;
    if (read_self(fp + 8, &ret) != 0 || read_self(fp, &next) != 0 || !ret)
      break;
    s[2 + n++] = ret;
    if (next <= fp)
      break;
    fp = next;
  }
  s[1] = n;
  errno = saved;
}

static int write_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  FILE *f = arg;
  const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "[main]";
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type == PT_LOAD && (p->p_flags & PF_X))
      fprintf(f, "M %s %llx %llx %llx\n", name, (unsigned long long)info->dlpi_addr,
              (unsigned long long)(info->dlpi_addr + p->p_vaddr),
              (unsigned long long)(info->dlpi_addr + p->p_vaddr + p->p_memsz));
  }
  return 0;
}

static void dump(void) {
  if (!g_armed)
    return;
  g_armed = 0;
  atomic_store(&g_on, 0);
  struct itimerspec off = {{0, 0}, {0, 0}};
  timer_settime(g_timer, 0, &off, NULL);
  timer_delete(g_timer);
  if (!atomic_load(&g_n))
    return; /* a child process that never reached its steady state */
  const char *prefix = getenv("PCSAMP_OUT");
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", prefix, (int)getpid());
  FILE *f = fopen(path, "w");
  if (!f)
    return;
  size_t n = atomic_load(&g_n);
  if (n > g_cap)
    n = g_cap;
  fprintf(f, "# pcsamp hz=%d samples=%zu dropped=%zu steps=%ld exe=%s\n", g_hz, n,
          atomic_load(&g_dropped), g_steps, g_exe);
  dl_iterate_phdr(write_module, f);
  /* names of the threads sampled (noted at pcsamp_stop, else at exit;
   * "?" for a thread gone by both) */
  uint64_t seen[256];
  size_t nseen = 0;
  for (size_t i = 0; i < n && nseen < 256; i++) {
    uint64_t tid = g_buf[i * SLOT];
    size_t k = 0;
    while (k < nseen && seen[k] != tid)
      k++;
    if (k < nseen)
      continue;
    seen[nseen++] = tid;
    const char *name = "?";
    char now[64];
    size_t j = 0;
    while (j < g_nnames && g_name_tid[j] != tid)
      j++;
    if (j < g_nnames)
      name = g_name[j];
    else if (thread_name(tid, now, sizeof now))
      name = now;
    fprintf(f, "T %llu %s\n", (unsigned long long)tid, name);
  }
  for (size_t i = 0; i < n; i++) {
    const uint64_t *s = g_buf + i * SLOT;
    fprintf(f, "S %llu %d", (unsigned long long)s[0], s[0] == (uint64_t)g_pid);
    for (uint64_t k = 0; k < s[1] && k < 2 + MAX_FRAMES; k++)
      fprintf(f, " %llx", (unsigned long long)s[2 + k]);
    fputc('\n', f);
  }
  fclose(f);
}

/* A wall-clock timer that interrupts the calling thread g_hz times a second. */
static int arm_this_thread(timer_t *t) {
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_signo = SIGPROF;
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_MONOTONIC, &sev, t) != 0)
    return -1;
  long ns = 1000000000L / g_hz;
  struct itimerspec it = {{ns / 1000000000L, ns % 1000000000L},
                          {ns / 1000000000L, ns % 1000000000L}};
  if (timer_settime(*t, 0, &it, NULL) != 0) {
    timer_delete(*t);
    return -1;
  }
  return 0;
}

/* PCSAMP_THREADS=all: every thread created after the sampler loaded runs
 * through pc_thread_start, which arms that thread's timer first. */
struct pc_start {
  void *(*fn)(void *);
  void *arg;
};

static void *pc_thread_start(void *p) {
  struct pc_start st = *(struct pc_start *)p;
  free(p);
  stack_bounds();
  timer_t t;
  int armed = g_armed && arm_this_thread(&t) == 0;
  void *r = st.fn(st.arg);
  if (armed)
    timer_delete(t);
  return r;
}

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                 void *);

__attribute__((visibility("default"))) int pthread_create(pthread_t *th,
                                                          const pthread_attr_t *attr,
                                                          void *(*fn)(void *), void *arg) {
  static pthread_create_fn real;
  if (!real)
    real = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
  if (!real)
    return EAGAIN;
  struct pc_start *st = g_all_threads && g_armed ? malloc(sizeof *st) : NULL;
  if (!st)
    return real(th, attr, fn, arg);
  st->fn = fn;
  st->arg = arg;
  int rc = real(th, attr, pc_thread_start, st);
  if (rc != 0)
    free(st);
  return rc;
}

/* The program's steady state starts / ends (PCSAMP_WINDOW=1) */
__attribute__((visibility("default"))) void pcsamp_start(void) {
  atomic_store(&g_n, 0);
  atomic_store(&g_on, 1);
}
__attribute__((visibility("default"))) void pcsamp_stop(long steps) {
  atomic_store(&g_on, 0);
  g_steps = steps;
  note_names();
}

__attribute__((constructor)) static void pcsamp_init(void) {
  const char *prefix = getenv("PCSAMP_OUT");
  if (!prefix || !*prefix)
    return;
  /* `cucap record` passes LD_PRELOAD on to the program it starts: sample
   * that program, not the launcher waiting for it */
  ssize_t el = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
  if (el > 0) {
    g_exe[el] = 0;
    const char *base = strrchr(g_exe, '/');
    if (strcmp(base ? base + 1 : g_exe, "cucap") == 0)
      return;
  }
  g_pid = getpid();
  const char *e = getenv("PCSAMP_WINDOW");
  if (e && *e == '1')
    atomic_store(&g_on, 0);
  e = getenv("PCSAMP_HZ");
  if (e && atoi(e) > 0)
    g_hz = atoi(e);
  e = getenv("PCSAMP_FRAMES");
  if (e && atoi(e) >= 0)
    g_frames = atoi(e) > MAX_FRAMES ? MAX_FRAMES : atoi(e);
  stack_bounds();
  e = getenv("PCSAMP_THREADS");
  g_all_threads = e && strcmp(e, "all") == 0;
  g_cap = 1u << 21;
  g_buf = mmap(NULL, g_cap * SLOT * 8, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_buf == MAP_FAILED)
    return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  if (arm_this_thread(&g_timer) != 0)
    return;
  g_armed = 1;
  atexit(dump);
}
