// The kernel of drv_share (tests of `cucap trim`/`extract` on a
// multi-architecture image and of `cucap diff` on pointers inside a struct
// parameter). Built for several architectures like a framework's fatbin
// (tests/apps/CMakeLists.txt: SASS sm_75/sm_80/sm_90, PTX compute_80/90).
// The mock libcuda (tests/mock/mock_cuda_kernels.c) carries a host
// implementation: keep the two in sync.

// One struct parameter with device pointers, a host address, an address in
// the program's image and padding, like CUTLASS/cuBLAS Params blocks.
struct share_params {
  float *x;            // 0   updated
  const float *y;      // 8   read
  int n;               // 16  (20..23 padding: the program leaves a stale
                       //     pointer half there)
  const float *host;   // 24  a host stack address (like a cuBLAS scalar in
                       //     host pointer mode): never read here
  float beta;          // 32  (36..39 padding)
  const char *tag;     // 40  an address in the program's image: never read
  const void *scratch; // 48  a heap address: never read
};                     // 56 bytes

extern "C" __global__ void struct_axpy(share_params p, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.x[i] = p.x[i] * s + p.beta * p.y[i];
}
