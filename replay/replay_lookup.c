/* replay_lookup.c - modules and functions a capture names without a load or
 * a lookup by name of its own.
 *
 * A library's per-context module (cuLibraryGetModule) is defined by a
 * LibraryModule record (format 1.5): the replay asks its own copy of the
 * library for it and keeps it in R->code.libmod, apart from R->code.module, because
 * the module belongs to the library: it is never unloaded by the replay,
 * and it dies with its context or its library.
 *
 * A function whose module the capture never defined (captures before 1.5:
 * a CUkernel that cudart or cuLibraryEnumerateKernels handed out, learned at
 * launch through cuFuncGetModule, which names the library's module) is
 * found by name: in the live libraries first (cuLibraryGetKernel), then in
 * the live modules. Only a name found exactly once is taken; two kernels of
 * one name in different modules cannot be told apart, and the lookup is
 * skipped as before. */
#include <string.h>

#include "cucap_log.h"
#include "replay_state.h"

void rp_op_library_module(rp_state *R, const cucap_fb_record *rec,
                          const cucap_fb_module *m) {
  uint64_t h = cucap_fb_module_handle(m), lib = 0;
  CUmodule mod = NULL;
  if (!cucap_map_get(&R->code.library, cucap_fb_module_library(m), &lib) ||
      !R->d.df.LibraryGetModule) {
    rp_skip(R, "cuLibraryGetModule (library not loaded)");
    return;
  }
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  if (!rp_cu(R, R->d.df.LibraryGetModule(&mod, (CUlibrary)(uintptr_t)lib),
             "cuLibraryGetModule"))
    return;
  if (!cucap_map_put(&R->code.libmod, h, (uint64_t)(uintptr_t)mod)) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return;
  }
  rp_owned(R, (uint64_t)(uintptr_t)mod);
  R->rep->executed++;
}

int rp_module_live(const rp_state *R, uint64_t h, uint64_t *live) {
  return cucap_map_get(&R->code.module, h, live) || cucap_map_get(&R->code.libmod, h, live);
}

int rp_func_by_name(rp_state *R, const char *name, uint64_t *live, uint64_t *module) {
  size_t pos = 0, found = 0;
  uint64_t v = 0;
  *live = *module = 0;
  if (!name)
    return 0;
  while (R->d.df.LibraryGetKernel && cucap_map_next(&R->code.library, &pos, NULL, &v)) {
    CUkernel k = NULL;
    if (R->d.df.LibraryGetKernel(&k, (CUlibrary)(uintptr_t)v, name) == CUDA_SUCCESS && k) {
      found++;
      *live = (uint64_t)(uintptr_t)k;
    }
  }
  size_t nkernels = found;
  pos = 0;
  while (cucap_map_next(&R->code.module, &pos, NULL, &v)) {
    CUfunction f = NULL;
    if (R->d.df.ModuleGetFunction(&f, (CUmodule)(uintptr_t)v, name) == CUDA_SUCCESS && f) {
      found++;
      *live = (uint64_t)(uintptr_t)f;
      *module = v;
    }
  }
  if (found != 1) {
    *live = *module = 0;
    if (found > 1)
      CUCAP_INFO("replay: kernel %s is in %zu loaded modules/libraries: not taken "
                 "by name", name, found);
    return 0;
  }
  return nkernels ? 1 : 2;
}
