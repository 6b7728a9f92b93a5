// Kernels of the driver-API test programs (tests/apps/drv_*.c), built into an
// sm_90 fatbin (and PTX for drv_jit). extern "C" so names are not mangled.
// The mock libcuda (tests/mock/mock_cuda_kernels.c) carries a host
// implementation of each: keep the two in sync.
struct coef { float a, b, c; };

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void scale(float *x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * s;
}
extern "C" __global__ void fill(float *x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void increment(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
// Non-trivial parameter layout: char at 0, 12-byte struct at 4, pointer at 16, int at 24.
extern "C" __global__ void poly(char tag, struct coef c, float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (c.a * x[i] + c.b) * x[i] + c.c + (float)tag;
}
// 2D kernel over a pitched allocation: adds (row + col) to every element.
extern "C" __global__ void add_rc2d(float *p, unsigned long long pitch, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    float *row = (float *)((char *)p + y * pitch);
    row[x] += (float)(x + y);
  }
}
extern "C" __global__ void empty_kernel(void) {}
