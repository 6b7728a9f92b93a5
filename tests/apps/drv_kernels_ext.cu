// Kernels of the graph-feature and relocation test programs (drv_graph_cond,
// drv_graph_mem, drv_reloc), built into their own sm_90 fatbin so that the
// image of drv_kernels.cu (and the golden dumps that name its hash) stays
// unchanged. The mock libcuda (tests/mock/mock_cuda_kernels.c) carries a host
// implementation of each: keep the two in sync.
#include <cuda_runtime.h>

// Follows pointers stored in device memory (a linked structure): out[i] = *ptrs[i].
extern "C" __global__ void gather_ptr(const float *const *ptrs, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = *ptrs[i];
}
// Sets a graph's conditional from device memory: cudaGraphSetConditional(h, *v).
extern "C" __global__ void cond_set(cudaGraphConditionalHandle h, const int *v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, (unsigned)*v);
}
// A WHILE body: x[i] += 1; thread 0 counts *counter down and keeps the loop
// going while it is positive.
extern "C" __global__ void cond_loop(int *counter, float *x, cudaGraphConditionalHandle h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
  if (i == 0) {
    *counter -= 1;
    cudaGraphSetConditional(h, *counter > 0);
  }
}
// Module variables (drv_globals): a kernel updates them, so a replay that
// keeps the module loaded between passes must give back their load-time
// contents at each pass start.
__device__ int ext_counter = 7;
__device__ float ext_table[4];
__constant__ int ext_coef[2] = {3, 5};
extern "C" __global__ void bump_globals(int *out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    ext_counter += ext_coef[0];
    ext_table[1] += (float)ext_coef[1];
    out[0] = ext_counter;
    out[1] = (int)ext_table[1];
  }
}
