/* Mock driver: controls for tests of cucap's own robustness (see
 * mock_cuda.md, "Test controls"). All inert unless their variable is set.
 *
 *  CUCAP_MOCK_LEAK_CHECK=1   at exit, report every driver object still alive
 *                            (contexts created or retained, allocations,
 *                            reservations, mappings, physical handles,
 *                            streams, events, modules, libraries, link
 *                            states, graphs, graph execs) on stderr and exit
 *                            with status 66 if there is one; "leak check:
 *                            clean" otherwise. cuMockLiveObjects() gives the
 *                            same count at any time.
 *  CUCAP_MOCK_FAIL=NAME[:N[+][:CODE]]  the N-th call (1-based, default 1; N+
 *                            = that one and every later one) of the entry
 *                            point NAME, as fetched through cuGetProcAddress
 *                            without the per-thread flag, returns CODE (a
 *                            CUDA_ERROR_* name or a number; default
 *                            CUDA_ERROR_UNKNOWN) without running. Announced
 *                            on stderr when it fires.
 *  CUCAP_MOCK_MEM_LIMIT=BYTES device memory (default 80 GiB).
 *  CUCAP_MOCK_NO_KERNELS=1   launches are validated but run no host kernel. */
#include "mock_cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long mock_live[MOCK_LIVE_KINDS];

static size_t g_mem_limit = 80ull << 30;
static int g_no_kernels;

size_t mock_total_mem(void) { return g_mem_limit; }
int mock_no_kernels(void) { return g_no_kernels; }

/* Describes what is alive into buf (may be NULL); returns the count. */
static unsigned long long live_objects(char *buf, size_t cap) {
  long dev, host, hreg, res, map, streams, prim;
  mock_core_live(&dev, &host, &hreg, &res, &map, &streams, &prim);
  struct { const char *what; long n; } k[] = {
      {"primary context retain", prim},
      {"created context", __atomic_load_n(&mock_live[MOCK_LIVE_CTX], __ATOMIC_RELAXED)},
      {"device allocation", dev},
      {"page-locked host allocation", host},
      {"registered host range", hreg},
      {"VA reservation", res},
      {"VMM mapping", map},
      {"physical allocation handle", __atomic_load_n(&mock_live[MOCK_LIVE_PHYS], __ATOMIC_RELAXED)},
      {"stream", streams},
      {"event", __atomic_load_n(&mock_live[MOCK_LIVE_EVENT], __ATOMIC_RELAXED)},
      {"module", __atomic_load_n(&mock_live[MOCK_LIVE_MODULE], __ATOMIC_RELAXED)},
      {"library", __atomic_load_n(&mock_live[MOCK_LIVE_LIBRARY], __ATOMIC_RELAXED)},
      {"link state", __atomic_load_n(&mock_live[MOCK_LIVE_LINK], __ATOMIC_RELAXED)},
      {"graph", __atomic_load_n(&mock_live[MOCK_LIVE_GRAPH], __ATOMIC_RELAXED)},
      {"graph exec", __atomic_load_n(&mock_live[MOCK_LIVE_GEXEC], __ATOMIC_RELAXED)},
  };
  unsigned long long total = 0;
  size_t used = 0;
  if (buf && cap) buf[0] = 0;
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    if (k[i].n == 0) continue;
    total += (unsigned long long)(k[i].n > 0 ? k[i].n : -k[i].n);
    if (buf && used < cap) {
      int w = snprintf(buf + used, cap - used, "%s%ld %s%s", used ? ", " : "", k[i].n, k[i].what,
                       k[i].n == 1 ? "" : "(s)");
      if (w > 0) used += (size_t)w;
    }
  }
  return total;
}

/* Test-only entry point (not a CUDA API): the number of live driver objects
 * and, in desc, what they are. Used by fuzz_replay after every replay. */
CUresult CUDAAPI cuMockLiveObjects(unsigned long long *count, char *desc, size_t desc_size);
CUresult CUDAAPI cuMockLiveObjects(unsigned long long *count, char *desc, size_t desc_size) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = live_objects(desc, desc_size);
  return CUDA_SUCCESS;
}

static void leak_report(void) {
  char d[1024];
  unsigned long long n = live_objects(d, sizeof d);
  if (!n) {
    fprintf(stderr, "mock libcuda: leak check: clean\n");
    return;
  }
  fprintf(stderr, "mock libcuda: leak check: %llu driver object(s) alive at exit: %s\n", n, d);
  fflush(stderr);
  _exit(66);
}

/* ---- error injection -------------------------------------------------- */
static char g_fail_name[128];
static unsigned long g_fail_nth = 1;
static int g_fail_after; /* N+: every call from the N-th on */
static int g_fail_code = CUDA_ERROR_UNKNOWN;
static unsigned long g_fail_calls;

/* Used by the trampoline (hidden: called without the PLT). */
__attribute__((visibility("hidden"))) void *mock_fail_real;
__attribute__((visibility("hidden"))) int mock_fail_check(void);
__attribute__((visibility("hidden"))) int mock_fail_check(void) {
  unsigned long n = __atomic_add_fetch(&g_fail_calls, 1, __ATOMIC_RELAXED);
  if (n == g_fail_nth || (g_fail_after && n > g_fail_nth)) {
    const char *s = NULL;
    cuGetErrorName((CUresult)g_fail_code, &s);
    fprintf(stderr, "mock libcuda: injecting %s into call %lu of %s\n", s ? s : "error", n,
            g_fail_name);
    return g_fail_code;
  }
  return 0;
}

#if defined(__x86_64__)
/* Saves the integer argument registers, asks mock_fail_check, then either
 * returns its CUresult or tail-jumps to the real entry point with every
 * argument (registers and stack) untouched. No driver entry point takes
 * floating-point arguments, so the vector registers need no saving. */
__asm__(".text\n"
        ".p2align 4\n"
        ".hidden mock_fail_tramp\n"
        "mock_fail_tramp:\n"
        "  push %rdi\n  push %rsi\n  push %rdx\n  push %rcx\n  push %r8\n  push %r9\n"
        "  sub $8, %rsp\n"
        "  call mock_fail_check\n"
        "  add $8, %rsp\n"
        "  pop %r9\n  pop %r8\n  pop %rcx\n  pop %rdx\n  pop %rsi\n  pop %rdi\n"
        "  test %eax, %eax\n"
        "  jnz 1f\n"
        "  jmp *mock_fail_real(%rip)\n"
        "1:\n"
        "  ret\n");
__attribute__((visibility("hidden"))) void mock_fail_tramp(void);
#endif

void *mock_fail_wrap(const char *name, void *fn) {
  mock_test_init(); /* entry points are fetched before cuInit */
#if defined(__x86_64__)
  if (g_fail_name[0] && fn && !strcmp(name, g_fail_name)) {
    mock_fail_real = fn;
    return (void *)mock_fail_tramp;
  }
#else
  (void)name;
#endif
  return fn;
}

static void parse_fail(const char *spec) {
  const char *c1 = strchr(spec, ':');
  size_t nl = c1 ? (size_t)(c1 - spec) : strlen(spec);
  if (!nl || nl >= sizeof g_fail_name) return;
  memcpy(g_fail_name, spec, nl);
  g_fail_name[nl] = 0;
  if (!c1) return;
  char *end = NULL;
  unsigned long n = strtoul(c1 + 1, &end, 10);
  if (n) g_fail_nth = n;
  if (end && *end == '+') {
    g_fail_after = 1;
    end++;
  }
  if (end && *end == ':') {
    int code = mock_error_code(end + 1);
    g_fail_code = code >= 0 ? code : atoi(end + 1);
    if (!g_fail_code) g_fail_code = CUDA_ERROR_UNKNOWN;
  }
}

void mock_test_init(void) {
  static int done;
  if (__atomic_exchange_n(&done, 1, __ATOMIC_SEQ_CST)) return;
  const char *e = getenv("CUCAP_MOCK_MEM_LIMIT");
  if (e && *e) {
    unsigned long long v = strtoull(e, NULL, 0);
    if (v) g_mem_limit = (size_t)v;
  }
  e = getenv("CUCAP_MOCK_NO_KERNELS");
  g_no_kernels = e && *e == '1';
  e = getenv("CUCAP_MOCK_FAIL");
  if (e && *e) parse_fail(e);
  e = getenv("CUCAP_MOCK_LEAK_CHECK");
  if (e && *e == '1') atexit(leak_report);
}
