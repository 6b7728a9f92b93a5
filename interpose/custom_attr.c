/* custom_attr.c - function and kernel attribute calls.
 *
 * cuFuncSetAttribute, cuFuncSetCacheConfig, cuFuncSetSharedMemConfig,
 * cuKernelSetAttribute and cuKernelSetCacheConfig stay records without a
 * body: their scalar arguments (Record.args) are what the replayer
 * (replay/replay_attr.c) needs. What these hooks add: the handle is learned
 * first. cudart and PyTorch set attributes (the dynamic shared memory limit
 * of CUTLASS/cuDNN kernels) once, before the first launch, on handles cucap
 * may not have seen created (CUkernels from export tables, enumerate APIs);
 * cx_function_for_launch records their Function body now, ahead of this
 * call's record, so a replay maps the handle when it meets the call.
 * cuCtxSetLimit / cuCtxSetCacheConfig / cuCtxSetSharedMemConfig need nothing
 * (Record.context names the context). */
#include "custom_internal.h"

static void learn(cucap_call *c, CUresult r, uint64_t handle) {
  c->stack = cucap_rec_stack_id();
  if (r == CUDA_SUCCESS && handle)
    (void)cx_function_for_launch(handle);
}

void custom_func_set_attribute(cucap_call *c, CUresult r, CUfunction f,
                               CUfunction_attribute attrib, int value) {
  (void)attrib, (void)value;
  learn(c, r, CX_U64(f));
}

void custom_func_set_cache_config(cucap_call *c, CUresult r, CUfunction f, CUfunc_cache cfg) {
  (void)cfg;
  learn(c, r, CX_U64(f));
}

void custom_func_set_shmem_config(cucap_call *c, CUresult r, CUfunction f,
                                  CUsharedconfig cfg) {
  (void)cfg;
  learn(c, r, CX_U64(f));
}

void custom_kernel_set_attribute(cucap_call *c, CUresult r, CUfunction_attribute attrib,
                                 int val, CUkernel k, CUdevice dev) {
  (void)attrib, (void)val, (void)dev;
  learn(c, r, CX_U64(k));
}

void custom_kernel_set_cache_config(cucap_call *c, CUresult r, CUkernel k, CUfunc_cache cfg,
                                    CUdevice dev) {
  (void)cfg, (void)dev;
  learn(c, r, CX_U64(k));
}
