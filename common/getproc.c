/* getproc.c - cucap_getproc (cucap_getproc.h): cuGetProcAddress_v2, then dlsym. */
#include <dlfcn.h>
#include <stdio.h>

#include <cuda.h>

#include "cucap_getproc.h"

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);

void *cucap_getproc(void *lib, const char *name, int cuda_version, const char *exported,
                    int per_thread) {
  if (!lib || !name)
    return NULL;
  void *p = NULL;
  getproc_fn gp = (getproc_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (gp) {
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
    cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                  : CU_GET_PROC_ADDRESS_DEFAULT;
    if (gp(name, &p, cuda_version, flags, &q) != CUDA_SUCCESS ||
        q != CU_GET_PROC_ADDRESS_SUCCESS)
      p = NULL;
  }
  if (!p && exported) {
    if (per_thread) {
      char buf[128];
      snprintf(buf, sizeof buf, "%s_ptsz", exported);
      p = dlsym(lib, buf);
    }
    if (!p)
      p = dlsym(lib, exported);
  }
  return p;
}
