/* drv_globals: module variables read and written by the host and by a
 * kernel. Each replay pass must start from their load-time contents (7, 0,
 * {3, 5}), whether the replayer loads the module again or keeps it loaded
 * across passes (replay/replay_modkeep.c): `replay --loop 3 --verify` fails
 * on the first copy of pass 2 otherwise. It works in the primary context,
 * as cudart programs do (modules of a context the program creates go with
 * that context at the end of each pass). On the mock the kernel is a no-op. */
#include "drv_common.h"

extern const unsigned char drv_ext_fatbin[];

int main(void) {
  CUdevice dev;
  drv_setup_primary(&dev);
  CUmodule ext;
  CUfunction bump;
  CK(cuModuleLoadData(&ext, drv_ext_fatbin));
  CK(cuModuleGetFunction(&bump, ext, "bump_globals"));
  CUdeviceptr counter, table, coef, out;
  size_t sz;
  CK(cuModuleGetGlobal(&counter, &sz, ext, "ext_counter"));
  CK(cuModuleGetGlobal(&table, &sz, ext, "ext_table"));
  CK(cuModuleGetGlobal(&coef, &sz, ext, "ext_coef"));
  CK(cuMemAlloc(&out, 2 * sizeof(int)));
  CK(cuMemsetD32(out, 0, 2));
  int c = 0, k[2] = {0, 0}, o[2] = {0, 0};
  float t[4];
  CK(cuMemcpyDtoH(&c, counter, sizeof c));
  CK(cuMemcpyDtoH(t, table, sizeof t));
  CK(cuMemcpyDtoH(k, coef, sizeof k));
  printf("load-time: counter=%d table[1]=%.0f coef={%d,%d}\n", c, t[1], k[0], k[1]);
  /* the host writes them, then the kernel updates them */
  c = 40;
  k[0] = 2;
  CK(cuMemcpyHtoD(counter, &c, sizeof c));
  CK(cuMemcpyHtoD(coef, k, sizeof k));
  void *args[] = {&out};
  for (int i = 0; i < 2; i++)
    CK(cuLaunchKernel(bump, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
  CK(cuMemcpyDtoH(o, out, sizeof o));
  CK(cuMemcpyDtoH(&c, counter, sizeof c));
  CK(cuMemcpyDtoH(t, table, sizeof t));
  printf("after: counter=%d table[1]=%.0f out={%d,%d}\n", c, t[1], o[0], o[1]);
  CK(cuMemFree(out));
  CK(cuModuleUnload(ext));
  CK(cuDevicePrimaryCtxRelease(dev));
  printf("drv_globals ok\n");
  return 0;
}
