/* drv_nondet: a program whose results are partly nondeterministic, like the
 * clock()/atomics samples: `stamp` writes a clock value into each element
 * of one half of a buffer, fill + scale compute the other half, and one DtoH
 * copy brings both halves back (then a copy of the deterministic half
 * alone). It prints only what is deterministic, so its output is the same in
 * every run; `cucap replay --verify` must pass and report the stamped half
 * as nondeterministic bytes written by `stamp`, while a flipped recorded byte
 * in the deterministic half must still fail (tests/integration/
 * test_replay_nondet.sh). */
#include "drv_common.h"

#ifndef NONDET_FATBIN_PATH
#error "NONDET_FATBIN_PATH must name the fatbin built from drv_nondet_kernels.cu"
#endif
__asm__(".section .rodata\n"
        ".balign 16\n"
        "nondet_fatbin:\n"
        ".incbin \"" NONDET_FATBIN_PATH "\"\n"
        ".previous\n");
extern const unsigned char nondet_fatbin[];

int main(void) {
  enum { N = 1 << 12 };
  CUcontext ctx = drv_setup();
  CUmodule mod, nmod;
  CUfunction fill, scale, stamp;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleLoadData(&nmod, nondet_fatbin));
  CK(cuModuleGetFunction(&fill, mod, "fill"));
  CK(cuModuleGetFunction(&scale, mod, "scale"));
  CK(cuModuleGetFunction(&stamp, nmod, "stamp"));

  CUdeviceptr d;
  CK(cuMemAlloc(&d, 2 * N * sizeof(float)));
  CUdeviceptr stamps = d + N * sizeof(float);
  float v = 2.0f, s = 1.5f;
  int n = N;
  void *fargs[] = {&d, &v, &n};
  CK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fargs, NULL));
  void *sargs[] = {&d, &s, &n};
  CK(cuLaunchKernel(scale, N / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
  void *targs[] = {&stamps, &n};
  CK(cuLaunchKernel(stamp, N / 256, 1, 1, 256, 1, 1, 0, NULL, targs, NULL));
  CK(cuCtxSynchronize());

  float *out = malloc(2 * N * sizeof *out), *half = malloc(N * sizeof *half);
  if (!out || !half) return 1;
  CK(cuMemcpyDtoH(out, d, 2 * N * sizeof(float)));
  CK(cuMemcpyDtoH(half, d, N * sizeof(float)));
  drv_print("deterministic half", out, N);
  printf("halves equal: %d\n", memcmp(out, half, N * sizeof(float)) == 0);

  CK(cuMemFree(d));
  CK(cuModuleUnload(nmod));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(out);
  free(half);
  printf("drv_nondet ok\n");
  return 0;
}
