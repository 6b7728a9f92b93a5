// Kernel of tests/apps/drv_nondet.c, in an image of its own (the shared
// drv_kernels.cu image is hashed into the golden dumps). Nondeterministic on
// purpose: a clock value per element, different in every run, like the
// clock()/atomics samples. The mock (tests/mock/mock_cuda_kernels.c) writes a
// monotonic-clock counter instead.
extern "C" __global__ void stamp(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (unsigned)clock64() ^ (unsigned)i;
}
// drv_sched: an atomicCAS chain like simpleAtomicIntrinsics': how far it
// gets depends on the order in which the GPU runs the threads (out[0]);
// out[1] counts them (deterministic). The mock's sched_probe stands for it.
extern "C" __global__ void sched_probe(int *out) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  atomicCAS(&out[0], tid - 1, tid);
  atomicAdd(&out[1], 1);
}
// drv_sched: pointers device malloc returns, copied back to the host; the
// heap is where the driver puts it, another place in a replay.
extern "C" __global__ void heap_ptrs(unsigned long long *out) {
  void *p = malloc(64);
  out[blockIdx.x * blockDim.x + threadIdx.x] = (unsigned long long)p;
  free(p);
}
// drv_sched: newdelete's shared stack. Thread 0 of every block pushes its
// block index (stack_push); then every thread of a grid pops once
// (stack_pop): which threads get a value, and which value, is decided by the
// atomics - the recording and a replay hand the same values to other
// threads. The host sorts what it copies back, as newdelete does.
extern "C" __global__ void stack_push(int *stack, int *top) {
  if (threadIdx.x == 0) {
    int i = atomicAdd(top, 1);
    stack[i] = blockIdx.x;
  }
}
extern "C" __global__ void stack_pop(int *stack, int *top, int *out) {
  int i = atomicSub(top, 1) - 1;
  out[blockIdx.x * blockDim.x + threadIdx.x] = i >= 0 ? stack[i] : -1;
}
