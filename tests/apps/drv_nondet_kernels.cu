// Kernel of tests/apps/drv_nondet.c, in an image of its own (the shared
// drv_kernels.cu image is hashed into the golden dumps). Nondeterministic on
// purpose: a clock value per element, different in every run, like the
// clock()/atomics samples. The mock (tests/mock/mock_cuda_kernels.c) writes a
// monotonic-clock counter instead.
extern "C" __global__ void stamp(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (unsigned)clock64() ^ (unsigned)i;
}
