/* drv_share: a kernel with one struct parameter (device pointers, a host
 * stack address, an address in the program image, a heap address, the
 * stale upper half of a heap pointer in its padding), loaded with
 * cuLibraryLoadData from a fatbin with SASS for sm_75/80/90 and PTX for
 * compute_80/90 (drv_kernels_share.cu). For `cucap trim`/`extract` (the
 * image is reduced to the recorded GPU's code and must still load) and
 * `cucap diff` (two runs differ in every host address, not in what the
 * pointers designate). Results are exact (small binary fractions), the same
 * on the mock and on a GPU.
 * Usage: drv_share [STEPS] (default 6).
 * DRV_SHARE_SHIFT=1: reserve 64 GiB of address space and 32 KiB of stack
 *   first, so that heap and stack addresses differ from a run without it,
 *   with or without ASLR (the kernel also moves the first stack pointer down
 *   from the stack's top by a random 0..8 KiB in every run: a shift smaller
 *   than that, 512 bytes, was cancelled by it in one CI run, and the stack
 *   word then sat at the same offset from the top in both runs), and map
 *   the scratch buffer at 0x200000100000, so that the upper half of its
 *   address (the stale half in the padding) differs too: with ASLR, the
 *   64 GiB shift alone gave the same upper half as a run without it in
 *   about 1 pair of runs in 150 (mmap's base moves over 256 upper halves),
 *   which made test_share's diff check fail. The buffer starts 1 MiB into
 *   its 4 GiB window so that the padding word (stale half : n) is no
 *   address of this run: at 0x200000000000 it pointed into the buffer, and
 *   when the other run's padding word happened to fall into an anonymous
 *   mapping there too (ASLR, another CI flake) cucap diff rightly counted
 *   both as anonymous memory instead of stale halves;
 * DRV_SHARE_SCALE=F: the scalar parameter s (default 0.5);
 * DRV_SHARE_BETA=F: the struct member beta (default 0.25);
 * DRV_SHARE_JUNK=N: the padding after beta holds N (default 0), bytes the
 *   kernel never reads, as stale stack bytes in unused slots of PyTorch's
 *   TensorListMetadata do (cucap diff with launch hashes: without effect). */
#include <alloca.h>
#include <sys/mman.h>

#include "drv_common.h"

#ifndef SHARE_FATBIN_PATH
#error "SHARE_FATBIN_PATH must name the fatbin built from drv_kernels_share.cu"
#endif
__asm__(".section .rodata\n"
        ".balign 16\n"
        "share_fatbin:\n"
        ".incbin \"" SHARE_FATBIN_PATH "\"\n"
        ".previous\n");
extern const unsigned char share_fatbin[];

static const char k_tag[] = "drv_share tag";

typedef struct share_params { /* drv_kernels_share.cu */
  CUdeviceptr x, y;
  int n;
  uint32_t pad0;
  const float *host;
  float beta;
  uint32_t pad1;
  const char *tag;
  const void *scratch;
} share_params;

static float getf(const char *name, float dflt) {
  const char *s = getenv(name);
  return s && *s ? (float)atof(s) : dflt;
}

/* Never inlined: host_scalar must live in a frame of its own, below main's
 * alloca (DRV_SHARE_SHIFT). Inlined into main (gcc -O2), it sat in main's
 * fixed frame above the alloca, the 32 KiB moved nothing, and its offset
 * from the stack's top was equal in both runs whenever the kernel's random
 * shift made up for the other environment (12 pairs of runs in 3,000
 * beside a CI run, 1 in 127 beside 12 busy loops; none in 3,000 since):
 * test_share's diff then counted no stack word. */
__attribute__((noinline)) static void run(CUfunction f, int steps, const void *scratch) {
  enum { N = 4096, T = 256 };
  float host_scalar = 1.0f; /* its address goes into the parameters */
  float *h = malloc(N * sizeof *h);
  if (!h)
    exit(1);
  CUdeviceptr x, y;
  CK(cuMemAlloc(&x, N * sizeof(float)));
  CK(cuMemAlloc(&y, N * sizeof(float)));
  for (int i = 0; i < N; i++)
    h[i] = (float)(i % 13);
  CK(cuMemcpyHtoD(x, h, N * sizeof(float)));
  for (int i = 0; i < N; i++)
    h[i] = (float)(i % 5) - 2.0f;
  CK(cuMemcpyHtoD(y, h, N * sizeof(float)));
  float s = getf("DRV_SHARE_SCALE", 0.5f);
  uint32_t stale = (uint32_t)((uintptr_t)scratch >> 32); /* what padding often holds */
  for (int step = 0; step < steps; step++) {
    /* the padding after beta stays 0: a changed beta must be named (next to
     * a stale upper half it could read as a host address, cucap_diff.h) */
    const char *junk = getenv("DRV_SHARE_JUNK");
    share_params p = {x + (CUdeviceptr)(step % 2) * 64 * sizeof(float), y, N - 64, stale,
                      &host_scalar, getf("DRV_SHARE_BETA", 0.25f),
                      junk ? (uint32_t)strtoul(junk, NULL, 10) : 0, k_tag, scratch};
    void *args[] = {&p, &s};
    CK(cuLaunchKernel(f, (N - 64 + T - 1) / T, 1, 1, T, 1, 1, 0, NULL, args, NULL));
    CK(cuMemcpyDtoH(h, x, N * sizeof(float)));
    printf("step %d: sum=%.6f hash=%016llx\n", step, drv_sum(h, N),
           (unsigned long long)drv_hash(h, N * sizeof(float)));
  }
  CK(cuMemFree(x));
  CK(cuMemFree(y));
  free(h);
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 6;
  if (steps < 1 || steps > 1000)
    steps = 6;
  int shift = getenv("DRV_SHARE_SHIFT") && atoi(getenv("DRV_SHARE_SHIFT"));
  if (shift && mmap(NULL, (size_t)64 << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0) == MAP_FAILED)
    return 1;
  void *scratch = NULL; /* anonymous memory either way */
  int scratch_mapped = 0;
  if (shift) {
    scratch = mmap((void *)(uintptr_t)0x200000100000ull, 1 << 20, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    scratch_mapped = scratch != MAP_FAILED;
    if (!scratch_mapped)
      scratch = NULL;
  }
  if (!scratch)
    scratch = malloc(1 << 20); /* mmap'ed by malloc: below the reservation */
  if (!scratch)
    return 1;
  CUcontext ctx = drv_setup();
  CUlibrary lib;
  CUkernel k;
  CUfunction f;
  CK(cuLibraryLoadData(&lib, share_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&k, lib, "struct_axpy"));
  CK(cuKernelGetFunction(&f, k));
  volatile char *deeper = alloca(shift ? 32768 : 16); /* moves host_scalar's frame */
  deeper[0] = 0;
  run(f, steps, scratch);
  CK(cuLibraryUnload(lib));
  CK(cuCtxDestroy(ctx));
  if (scratch_mapped)
    munmap(scratch, 1 << 20);
  else
    free(scratch);
  return 0;
}
