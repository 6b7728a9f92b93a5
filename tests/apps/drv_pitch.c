/* drv_pitch: cuMemAllocPitch, cuMemsetD2D32, cuMemcpy2D (HtoD into a
 * sub-rectangle, DtoD, DtoH) and a 2D kernel over the pitched rows. */
#include "drv_common.h"

int main(void) {
  enum { W = 100, H = 37 };
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CUfunction add_rc2d;
  CK(cuModuleLoadData(&mod, drv_fatbin));
  CK(cuModuleGetFunction(&add_rc2d, mod, "add_rc2d"));
  CUdeviceptr d1, d2;
  size_t p1, p2;
  CK(cuMemAllocPitch(&d1, &p1, W * sizeof(float), H, 4));
  CK(cuMemAllocPitch(&d2, &p2, W * sizeof(float), H, 4));
  printf("pitch is a multiple of 128 and >= row: %d\n", p1 % 128 == 0 && p1 >= W * sizeof(float));
  CK(cuMemsetD2D32(d1, p1, 0x40000000u, W, H)); /* 2.0f everywhere */
  float *h = malloc(W * H * sizeof *h);
  if (!h) return 1;
  for (int i = 0; i < W * H; i++) h[i] = (float)(i % 9);
  /* copy a 50x20 block of the host matrix to (x=10, y=5) of d1 */
  CUDA_MEMCPY2D c = {0};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = h;
  c.srcPitch = W * sizeof(float);
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = d1;
  c.dstPitch = p1;
  c.dstXInBytes = 10 * sizeof(float);
  c.dstY = 5;
  c.WidthInBytes = 50 * sizeof(float);
  c.Height = 20;
  CK(cuMemcpy2D(&c));
  int w = W, hh = H;
  unsigned long long pitch = p1;
  void *args[] = {&d1, &pitch, &w, &hh};
  CK(cuLaunchKernel(add_rc2d, (W + 15) / 16, (H + 15) / 16, 1, 16, 16, 1, 0, NULL, args, NULL));
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = d1;
  c.srcPitch = p1;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = d2;
  c.dstPitch = p2;
  c.WidthInBytes = W * sizeof(float);
  c.Height = H;
  CK(cuMemcpy2D(&c));
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = d2;
  c.srcPitch = p2;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = h;
  c.dstPitch = W * sizeof(float);
  c.WidthInBytes = W * sizeof(float);
  c.Height = H;
  CK(cuMemcpy2D(&c));
  drv_print("pitched", h, W * H);
  CK(cuMemFree(d1));
  CK(cuMemFree(d2));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(h);
  printf("drv_pitch ok\n");
  return 0;
}
