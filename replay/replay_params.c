/* replay_params.c - the parameter layout a replayed launch is built with
 * (see rp_func_layout in replay_state.h). The layout in a capture comes from
 * the recorder (the driver's answer, or the cubin's .nv.info); a damaged or
 * hostile capture can carry one that disagrees with the kernel actually
 * loaded, and the driver copies every parameter of its own view of the
 * kernel from kernelParams: fewer recorded parameters made it read garbage
 * pointers (fuzz_replay, ASan SEGV inside cuLaunchKernel). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"

void rp_func_layout(rp_state *R, rp_func *fi) {
  if (fi->layout_checked || !fi->live_fn)
    return;
  fi->layout_checked = 1;
  if (!R->d.df.FuncGetParamInfo)
    return; /* a driver before 12.4: the recorded layout is all there is */
  cucap_fb_param_info *p = NULL;
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < RP_MAX_PARAMS; i++) {
    size_t off = 0, sz = 0;
    CUresult r = R->d.df.FuncGetParamInfo((CUfunction)(uintptr_t)fi->live_fn, i, &off, &sz);
    if (r == CUDA_ERROR_INVALID_VALUE)
      break; /* past the last parameter */
    if (r != CUDA_SUCCESS || off > UINT32_MAX || sz > UINT32_MAX) {
      free(p); /* the driver cannot tell: keep the recorded layout */
      return;
    }
    if (!CUCAP_VEC_RESERVE(p, cap, n + 1, 16)) {
      free(p);
      return;
    }
    p[n].offset = (uint32_t)off;
    p[n].size = (uint32_t)sz;
    n++;
  }
  if (n == fi->nparams && (!n || !memcmp(p, fi->params, n * sizeof *p))) {
    free(p);
    return; /* the usual case: they agree */
  }
  if (!R->code.warned_layout++)
    CUCAP_WARN("replay: kernel %s: the driver's parameter layout (%zu "
               "parameters) differs from the recorded one (%zu); launching "
               "with the driver's",
               fi->name, n, fi->nparams);
  free(fi->params);
  fi->params = p;
  fi->nparams = n;
  for (size_t i = 0; i < n; i++) {
    size_t end = (size_t)p[i].offset + p[i].size;
    if (end > fi->layout_bytes)
      fi->layout_bytes = end;
  }
}
