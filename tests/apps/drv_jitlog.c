/* drv_jitlog: everything the driver hands back through JIT options and
 * out-parameters, printed byte for byte, so that a run under `cucap record`
 * can be compared with a native one (issue: ptxjit's CU_JIT_INFO_LOG_BUFFER
 * came back empty under record).
 *
 *  1. cuLinkCreate with wall time, info and error log buffers (+ sizes),
 *     verbose log; cuLinkAddData(PTX); cuLinkComplete; the logs, the size
 *     values the driver wrote back, whether the wall time slot holds a
 *     plausible float.
 *  2. cuModuleLoadDataEx(PTX) with the same options + an optimization level.
 *  3. cuModuleLoadDataEx of a broken image: the return code and error log.
 *  4. cuLibraryLoadData(fatbin) with log options.
 *  5. Out-parameters of queries: cuModuleGetFunction on a missing name,
 *     cuFuncGetAttribute, cuModuleGetGlobal of a missing name, cuMemGetInfo
 *     total, cuCtxGetApiVersion, cuDeviceGetName.
 * Log texts are printed with non-printable bytes escaped; the wall time
 * (which varies) only as "plausible". */
#include "drv_common.h"

#define LOGSZ 8192

static void print_text(const char *label, const char *s, size_t cap) {
  size_t n = strnlen(s, cap);
  printf("%s (%zu bytes): \"", label, n);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') printf("\\n");
    else if (c < 32 || c > 126 || c == '"' || c == '\\') printf("\\x%02x", c);
    else putchar(c);
  }
  printf("\"\n");
}

static void print_wall(const char *label, void *slot) {
  float ms;
  memcpy(&ms, &slot, sizeof ms);
  printf("%s wall time plausible: %s\n", label, ms >= 0.0f && ms < 600000.0f ? "yes" : "no");
}

typedef struct jit_opts {
  CUjit_option o[8];
  void *v[8];
  unsigned n;
  char info[LOGSZ], err[LOGSZ];
} jit_opts;

static void jit_opts_init(jit_opts *j, int with_opt_level) {
  memset(j->info, 0x5a, sizeof j->info); /* not pre-zeroed: what the driver writes shows */
  memset(j->err, 0x5a, sizeof j->err);
  j->info[0] = j->err[0] = 0;
  unsigned n = 0;
  j->o[n] = CU_JIT_WALL_TIME; j->v[n++] = NULL;
  j->o[n] = CU_JIT_INFO_LOG_BUFFER; j->v[n++] = j->info;
  j->o[n] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES; j->v[n++] = (void *)(uintptr_t)LOGSZ;
  j->o[n] = CU_JIT_ERROR_LOG_BUFFER; j->v[n++] = j->err;
  j->o[n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES; j->v[n++] = (void *)(uintptr_t)LOGSZ;
  j->o[n] = CU_JIT_LOG_VERBOSE; j->v[n++] = (void *)(uintptr_t)1;
  if (with_opt_level) { j->o[n] = CU_JIT_OPTIMIZATION_LEVEL; j->v[n++] = (void *)(uintptr_t)3; }
  j->n = n;
}

static void jit_opts_print(const char *what, const jit_opts *j) {
  print_wall(what, j->v[0]);
  print_text("  info log", j->info, LOGSZ);
  printf("  info log size value: %zu\n", (size_t)(uintptr_t)j->v[2]);
  print_text("  error log", j->err, LOGSZ);
  printf("  error log size value: %zu\n", (size_t)(uintptr_t)j->v[4]);
  printf("  verbose value: %zu\n", (size_t)(uintptr_t)j->v[5]);
  if (j->n > 6) printf("  optimization level value: %zu\n", (size_t)(uintptr_t)j->v[6]);
}

int main(void) {
  CUcontext ctx = drv_setup();
  static jit_opts j;

  /* 1. the linker */
  jit_opts_init(&j, 0);
  CUlinkState link;
  CK(cuLinkCreate(j.n, j.o, j.v, &link));
  CUresult r = cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)drv_ptx, strlen((const char *)drv_ptx) + 1,
                             "drv_kernels.ptx", 0, NULL, NULL);
  printf("cuLinkAddData: %d\n", (int)r);
  void *cubin = NULL;
  size_t cubin_size = 0;
  r = cuLinkComplete(link, &cubin, &cubin_size);
  printf("cuLinkComplete: %d, image returned: %s\n", (int)r, cubin && cubin_size ? "yes" : "no");
  jit_opts_print("link", &j);
  CUmodule linked;
  CK(cuModuleLoadData(&linked, cubin));
  CK(cuLinkDestroy(link));

  /* 2. cuModuleLoadDataEx with options */
  jit_opts_init(&j, 1);
  CUmodule mod;
  r = cuModuleLoadDataEx(&mod, drv_ptx, j.n, j.o, j.v);
  printf("cuModuleLoadDataEx(PTX): %d\n", (int)r);
  jit_opts_print("load", &j);

  /* 3. a broken image */
  static const char bad[] = "this is neither PTX nor a cubin nor a fatbin";
  jit_opts_init(&j, 0);
  CUmodule badmod = NULL;
  r = cuModuleLoadDataEx(&badmod, bad, j.n, j.o, j.v);
  printf("cuModuleLoadDataEx(broken): %s\n", r == CUDA_SUCCESS ? "accepted" : "refused");
  print_text("  error log present", j.err[0] ? "yes" : "no", 4);

  /* 4. a library with log options */
  jit_opts_init(&j, 0);
  CUlibrary lib;
  r = cuLibraryLoadData(&lib, drv_fatbin, j.o + 1, j.v + 1, 4, NULL, NULL, 0);
  printf("cuLibraryLoadData: %d\n", (int)r);
  print_text("  info log", j.info, LOGSZ);
  printf("  info log size value: %zu\n", (size_t)(uintptr_t)j.v[2]);
  print_text("  error log", j.err, LOGSZ);

  /* 5. out-parameters and return codes of queries */
  CUfunction f = (CUfunction)(uintptr_t)0x1234;
  r = cuModuleGetFunction(&f, mod, "no_such_kernel");
  printf("cuModuleGetFunction(missing): %d, out-param untouched: %s\n", (int)r,
         f == (CUfunction)(uintptr_t)0x1234 ? "yes" : "no");
  CK(cuModuleGetFunction(&f, mod, "saxpy"));
  int nregs = -1, maxthr = -1;
  r = cuFuncGetAttribute(&maxthr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
  printf("cuFuncGetAttribute(max threads): %d, value positive: %s\n", (int)r, maxthr > 0 ? "yes" : "no");
  r = cuFuncGetAttribute(&nregs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
  printf("cuFuncGetAttribute(regs): %d, value non-negative: %s\n", (int)r, nregs >= 0 ? "yes" : "no");
  CUdeviceptr gp = 77;
  size_t gsz = 88;
  r = cuModuleGetGlobal(&gp, &gsz, mod, "no_such_global");
  printf("cuModuleGetGlobal(missing): %d, out-params untouched: %s\n", (int)r,
         gp == 77 && gsz == 88 ? "yes" : "no");
  size_t fr = 0, total = 0;
  CK(cuMemGetInfo(&fr, &total));
  printf("cuMemGetInfo: total nonzero %s, free <= total %s\n", total ? "yes" : "no", fr <= total ? "yes" : "no");
  unsigned api = 0;
  CK(cuCtxGetApiVersion(ctx, &api));
  printf("cuCtxGetApiVersion: %u\n", api);
  char name[256];
  memset(name, 0x5a, sizeof name);
  CK(cuDeviceGetName(name, (int)sizeof name, 0));
  printf("cuDeviceGetName terminated: %s\n", memchr(name, 0, sizeof name) ? "yes" : "no");

  CK(cuLibraryUnload(lib));
  CK(cuModuleUnload(mod));
  CK(cuModuleUnload(linked));
  CK(cuCtxDestroy(ctx));
  printf("drv_jitlog ok\n");
  return 0;
}
