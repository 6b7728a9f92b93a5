/* Shared helpers of the driver-API test programs (tests/apps/drv_*.c).
 * Header-only; each program includes it once. The fatbin and PTX built from
 * drv_kernels.cu are embedded by drv_embed.c (symbols below, owned by the
 * program image, valid for its lifetime). */
#ifndef DRV_COMMON_H
#define DRV_COMMON_H
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const unsigned char drv_fatbin[]; /* nvcc -fatbin, sm_90 + compute_90 */
extern const unsigned char drv_ptx[];    /* nvcc -ptx, NUL-terminated */
/* drv_attrs, drv_texture only (drv_embed_objects.c): drv_kernels_objects.cu */
extern const unsigned char drv_obj_fatbin[];

/* Checks a CUresult; on failure prints the call and the error name, exits 1. */
#define CK(call)                                                                  \
  do {                                                                            \
    CUresult ck_r_ = (call);                                                      \
    if (ck_r_ != CUDA_SUCCESS) {                                                  \
      const char *ck_n_ = NULL;                                                   \
      cuGetErrorName(ck_r_, &ck_n_);                                              \
      fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,   \
              ck_n_ ? ck_n_ : "?", (int)ck_r_);                                   \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

/* FNV-1a over bytes: identical on the mock and on a GPU when results are
 * exact (the programs use small integers so float math is exact). */
static inline uint64_t drv_hash(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static inline double drv_sum(const float *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
}

static inline void drv_print(const char *label, const float *x, size_t n) {
  printf("%s: sum=%.3f hash=%016llx\n", label, drv_sum(x, n), (unsigned long long)drv_hash(x, n * sizeof *x));
}

/* cuInit + device 0 + a new context, made current. */
/* The device's primary context, retained and made current (as cudart does);
 * release it with cuDevicePrimaryCtxRelease(*dev). */
static inline CUcontext drv_setup_primary(CUdevice *dev) {
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, *dev));
  CK(cuCtxSetCurrent(ctx));
  return ctx;
}

static inline CUcontext drv_setup(void) {
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuCtxCreate(&ctx, NULL, 0, dev));
  return ctx;
}
#endif
