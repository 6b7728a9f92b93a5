/* Host implementations of the kernels the mock can "run", looked up by the
 * kernel's (mangled or extern "C") name. Each is called once per CUDA thread
 * with pointers to its parameter values; they mirror tests/apps/drv_kernels.cu
 * (keep in sync). Kernels without an entry here launch as no-ops (or fail
 * with CUDA_ERROR_NOT_SUPPORTED when CUCAP_MOCK_STRICT=1). */
#include "mock_cuda_internal.h"

#include <string.h>

#define GID(t) ((long long)(t)->blockIdx.x * (t)->blockDim.x + (t)->threadIdx.x)
#define ARG(type, i) (*(type *)args[i])

static void k_vec_add(const mock_thread *t, void **args) {
  const float *a = ARG(const float *, 0), *b = ARG(const float *, 1);
  float *c = ARG(float *, 2);
  long long i = GID(t);
  if (i < ARG(int, 3)) c[i] = a[i] + b[i];
}

static void k_scale(const mock_thread *t, void **args) {
  float *x = ARG(float *, 0);
  long long i = GID(t);
  if (i < ARG(int, 2)) x[i] = x[i] * ARG(float, 1);
}

static void k_fill(const mock_thread *t, void **args) {
  float *x = ARG(float *, 0);
  long long i = GID(t);
  if (i < ARG(int, 2)) x[i] = ARG(float, 1);
}

static void k_saxpy(const mock_thread *t, void **args) {
  const float *x = ARG(const float *, 1);
  float *y = ARG(float *, 2);
  long long i = GID(t);
  if (i < ARG(int, 3)) y[i] = ARG(float, 0) * x[i] + y[i];
}

static void k_increment(const mock_thread *t, void **args) {
  int *x = ARG(int *, 0);
  long long i = GID(t);
  if (i < ARG(int, 1)) x[i] += 1;
}

static void k_poly(const mock_thread *t, void **args) {
  char tag = ARG(char, 0);
  float c[3];
  memcpy(c, args[1], sizeof c);
  float *x = ARG(float *, 2);
  long long i = GID(t);
  if (i < ARG(int, 3)) x[i] = (c[0] * x[i] + c[1]) * x[i] + c[2] + (float)tag;
}

static void k_add_rc2d(const mock_thread *t, void **args) {
  char *p = ARG(char *, 0);
  unsigned long long pitch = ARG(unsigned long long, 1);
  int w = ARG(int, 2), h = ARG(int, 3);
  long long x = GID(t), y = (long long)t->blockIdx.y * t->blockDim.y + t->threadIdx.y;
  if (x < w && y < h) ((float *)(p + y * pitch))[x] += (float)(x + y);
}

/* out[i] = *ptrs[i]: follows pointers stored in device memory */
static void k_gather_ptr(const mock_thread *t, void **args) {
  const float *const *ptrs = ARG(const float *const *, 0);
  float *out = ARG(float *, 1);
  long long i = GID(t);
  if (i < ARG(int, 2)) out[i] = *ptrs[i];
}

/* cudaGraphSetConditional(h, *v) from thread 0 */
static void k_cond_set(const mock_thread *t, void **args) {
  if (GID(t) == 0) mock_cond_set(ARG(unsigned long long, 0), (unsigned)*ARG(const int *, 1));
}

/* a WHILE body: x[i] += 1; thread 0 counts *counter down and keeps the loop
 * going while it is positive */
static void k_cond_loop(const mock_thread *t, void **args) {
  int *counter = ARG(int *, 0);
  float *x = ARG(float *, 1);
  long long i = GID(t);
  if (i < ARG(int, 3)) x[i] += 1.0f;
  if (i == 0) {
    *counter -= 1;
    mock_cond_set(ARG(unsigned long long, 2), *counter > 0);
  }
}

static void k_empty(const mock_thread *t, void **args) {
  (void)t;
  (void)args;
}

static const struct {
  const char *name;
  mock_host_kernel fn;
} table[] = {
  {"vec_add", k_vec_add}, {"scale", k_scale}, {"fill", k_fill}, {"saxpy", k_saxpy},
  {"increment", k_increment}, {"poly", k_poly}, {"add_rc2d", k_add_rc2d}, {"empty_kernel", k_empty},
  {"gather_ptr", k_gather_ptr}, {"cond_set", k_cond_set}, {"cond_loop", k_cond_loop},
};

mock_host_kernel mock_kernel_lookup(const char *name) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, name) == 0) return table[i].fn;
  return NULL;
}
