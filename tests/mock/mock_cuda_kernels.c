/* Host implementations of the kernels the mock can "run", looked up by the
 * kernel's (mangled or extern "C") name. Each is called once per CUDA thread
 * with pointers to its parameter values; they mirror tests/apps/drv_kernels.cu
 * (keep in sync). Kernels without an entry here launch as no-ops (or fail
 * with CUDA_ERROR_NOT_SUPPORTED when CUCAP_MOCK_STRICT=1). */
#include "mock_cuda_internal.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* copy_struct(s): one struct parameter {const float *src; float *dst;
 * int n} - pointers inside a by-value struct, as in CUTLASS/cuBLAS Params */
typedef struct mock_copy_args {
  const float *src;
  float *dst;
  int n;
} mock_copy_args;
static void k_copy_struct(const mock_thread *t, void **args) {
  const mock_copy_args *a = (const mock_copy_args *)args[0];
  long long i = GID(t);
  if (i < a->n) a->dst[i] = a->src[i];
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

/* stamp: like a GPU clock, a value that differs in every run and in every
 * replay of the same work (nanoseconds of the monotonic clock) */
static void k_stamp(const mock_thread *t, void **args) {
  unsigned *out = ARG(unsigned *, 0);
  long long i = GID(t);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned long long ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
  if (i < ARG(int, 1)) out[i] = (unsigned)ns ^ (unsigned)i;
}

/* ---- scheduling (verify's perturbed passes, drv_sched) ----
 * cucap_perturb_spin is the spin kernel verify/verify_perturb.c launches
 * before a program's kernel in a perturbed pass: on a GPU it only occupies
 * SMs. sched_probe stands for a result that depends on scheduling (an
 * atomicCAS chain): on a GPU it changes with what else runs; here it is the
 * same in every run of one process (the process id stands for the state a
 * GPU's scheduler is in) unless a spin kernel ran just before it, whose
 * grid then changes it - a replay that is not perturbed agrees with itself
 * and differs from the recording, as on the H100. */
static unsigned spin_blocks_recent; /* grid of the spin kernels since the last probe */
static unsigned spin_blocks_pop;    /* the same for stack_pop (not reset by sched_probe) */

static void k_perturb_spin(const mock_thread *t, void **args) {
  (void)args;
  if (!t->threadIdx.x && !t->blockIdx.x) {
    __atomic_add_fetch(&spin_blocks_recent, t->gridDim.x, __ATOMIC_RELAXED);
    __atomic_add_fetch(&spin_blocks_pop, t->gridDim.x, __ATOMIC_RELAXED);
  }
}

static void k_sched_probe(const mock_thread *t, void **args) {
  int *out = ARG(int *, 0);
  if (!t->threadIdx.x && !t->blockIdx.x) {
    unsigned spun = __atomic_exchange_n(&spin_blocks_recent, 0, __ATOMIC_RELAXED);
    out[0] = (int)(getpid() % 100000) + 100000 * (int)(spun % 1000);
  }
  out[1] += 1; /* a count of threads: deterministic */
}

/* stack_push/stack_pop: newdelete's shared stack (drv_sched). On a GPU the
 * atomics decide which threads pop a value; here thread (0,0) of the pop
 * does every pop, handing value k to the thread at (seed + k * stride) mod
 * the grid size (a power of two, the stride odd: distinct threads), the seed
 * standing for the scheduler's state as in sched_probe: the process id, and
 * the spin kernels run since the last probe. Other threads get -1. */
static void k_stack_push(const mock_thread *t, void **args) {
  if (t->threadIdx.x)
    return;
  int *stack = ARG(int *, 0), *top = ARG(int *, 1);
  int i = __atomic_fetch_add(top, 1, __ATOMIC_RELAXED);
  stack[i] = (int)t->blockIdx.x;
}

static void k_stack_pop(const mock_thread *t, void **args) {
  if (t->threadIdx.x || t->blockIdx.x)
    return;
  int *stack = ARG(int *, 0), *top = ARG(int *, 1), *out = ARG(int *, 2);
  unsigned long long n = (unsigned long long)t->gridDim.x * t->blockDim.x;
  unsigned spun = __atomic_exchange_n(&spin_blocks_pop, 0, __ATOMIC_RELAXED);
  unsigned long long seed = (unsigned long long)getpid() * 7919ull + spun * 104729ull;
  for (unsigned long long i = 0; i < n; i++)
    out[i] = -1;
  int k = 0;
  while (*top > 0 && (unsigned long long)k < n) {
    int v = stack[--*top];
    out[(seed + (unsigned long long)k * 2654435761ull) % n] = v;
    k++;
  }
  *top -= (int)(n - (unsigned long long)k); /* every other thread's pop, as on a GPU */
}

/* heap_ptrs: what device malloc returns, stored for the host. The mock's
 * "device heap" is placed per process (as the driver places it where it
 * likes): the same addresses in every replay of one process, others in the
 * recording - the relocated pointers verify must recognise. */
static void k_heap_ptrs(const mock_thread *t, void **args) {
  unsigned long long base = 0x7e8000000000ull + (unsigned long long)(getpid() % 4096) * 0x200000ull;
  ARG(unsigned long long *, 0)[GID(t)] = base + 64ull * (unsigned long long)GID(t);
}

/* ---- attributes and limits (drv_attrs) ---- */

#define GID2(t) ((long long)(t)->blockIdx.y * (t)->blockDim.y + (t)->threadIdx.y)

static void k_smem_big(const mock_thread *t, void **args) {
  float *out = ARG(float *, 0);
  int per = ARG(int, 1);
  long long tid = t->threadIdx.x;
  float acc = 0.f;
  for (int j = per - 1; j >= 0; j--)
    acc = acc * 0.5f + (float)(t->blockIdx.x * 1000 + tid * per + j);
  out[GID(t)] = acc;
}

static void k_cluster_info(const mock_thread *t, void **args) {
  int *out = ARG(int *, 0);
  const mock_dim3 *c = &t->clusterDim, *b = &t->blockIdx, *g = &t->gridDim;
  if (t->threadIdx.x) return;
  int rank = (int)((b->x % c->x) + (b->y % c->y) * c->x + (b->z % c->z) * c->x * c->y);
  out[b->x + g->x * (b->y + g->y * b->z)] = rank + 100 * (int)(c->x * c->y * c->z);
}

static void k_heap_probe(const mock_thread *t, void **args) {
  if (t->threadIdx.x || t->blockIdx.x) return;
  mock_heap_touch();
  *ARG(int *, 0) = ARG(unsigned long long, 1) <= mock_ctx_limit(CU_LIMIT_MALLOC_HEAP_SIZE);
}

static void k_attr_probe(const mock_thread *t, void **args) {
  if (t->threadIdx.x || t->blockIdx.x) return;
  const struct CUfunc_st *f = t->func;
  int ok = mock_func_cache_config(f) == ARG(int, 1) &&
           mock_func_attr(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) == ARG(int, 2) &&
           mock_func_attr(f, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) == ARG(int, 3) &&
           mock_func_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH) == ARG(int, 4) &&
           (int)t->clusterDim.x == ARG(int, 4) && f->shmem_config == ARG(int, 5) &&
           mock_ctx_cache_config() == ARG(int, 6) && mock_ctx_shmem_config() == ARG(int, 7);
  *ARG(int *, 0) = ok;
}

static void k_limit_probe(const mock_thread *t, void **args) {
  if (t->threadIdx.x || t->blockIdx.x) return;
  *ARG(int *, 0) = mock_ctx_limit(CU_LIMIT_STACK_SIZE) >= ARG(unsigned long long, 1) &&
                   mock_ctx_limit(CU_LIMIT_PRINTF_FIFO_SIZE) >= ARG(unsigned long long, 2) &&
                   mock_ctx_limit(CU_LIMIT_MALLOC_HEAP_SIZE) >= ARG(unsigned long long, 3) &&
                   mock_ctx_limit(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT) >= ARG(unsigned long long, 4);
}

/* ---- arrays, textures, surfaces (drv_texture) ---- */

static float fetchf(unsigned long long tex, float x, float y, float z, float lod) {
  float v = 0.f;
  mock_tex_fetch(tex, x, y, z, lod, &v, sizeof v);
  return v;
}

static void k_tex1d_read(const mock_thread *t, void **args) {
  long long i = GID(t);
  if (i < ARG(int, 2)) ARG(float *, 1)[i] = fetchf(ARG(unsigned long long, 0), (float)i + 0.5f, 0, 0, 0);
}

static void k_tex1d_fetch(const mock_thread *t, void **args) {
  long long i = GID(t);
  if (i < ARG(int, 2)) ARG(float *, 1)[i] = fetchf(ARG(unsigned long long, 0), (float)i, 0, 0, 0);
}

static void k_tex2d_read(const mock_thread *t, void **args) {
  long long x = GID(t), y = GID2(t);
  int w = ARG(int, 2), h = ARG(int, 3);
  if (x < w && y < h)
    ARG(float *, 1)[y * w + x] = fetchf(ARG(unsigned long long, 0), (float)x + 0.5f, (float)y + ARG(float, 4), 0, 0);
}

static void k_tex3d_read(const mock_thread *t, void **args) {
  long long i = GID(t);
  int w = ARG(int, 2), h = ARG(int, 3), d = ARG(int, 4);
  if (i < (long long)w * h * d) {
    long long x = i % w, y = (i / w) % h, z = i / ((long long)w * h);
    ARG(float *, 1)[i] = fetchf(ARG(unsigned long long, 0), (float)x + 0.5f, (float)y + 0.5f, (float)z + 0.5f, 0);
  }
}

static void k_tex_lod_read(const mock_thread *t, void **args) {
  long long x = GID(t), y = GID2(t);
  int w = ARG(int, 2), h = ARG(int, 3);
  if (x < w && y < h)
    ARG(float *, 1)[y * w + x] = fetchf(ARG(unsigned long long, 0), ((float)x + 0.5f) / (float)w,
                                        ((float)y + 0.5f) / (float)h, 0, ARG(float, 4));
}

static void k_surf2d_write(const mock_thread *t, void **args) {
  long long x = GID(t), y = GID2(t);
  if (x < ARG(int, 1) && y < ARG(int, 2)) {
    float v = ARG(float, 3) + (float)x + 1000.f * (float)y;
    mock_surf_write(ARG(unsigned long long, 0), &v, sizeof v, (int)x * 4, (int)y, 0);
  }
}

static void k_tex_bindless(const mock_thread *t, void **args) {
  long long i = GID(t);
  const unsigned long long *texs = ARG(const unsigned long long *, 0);
  if (i < ARG(int, 3)) {
    float s = 0.f;
    for (int k = 0; k < ARG(int, 1); k++) s += (float)(k + 1) * fetchf(texs[k], (float)i + 0.5f, 0, 0, 0);
    ARG(float *, 2)[i] = s;
  }
}

static void k_tex_atlas(const mock_thread *t, void **args) {
  long long i = GID(t);
  if (i < ARG(int, 3)) {
    float s = 0.f;
    for (int k = 0; k < ARG(int, 1); k++) {
      uint32_t c[2] = {0, 0};
      mock_tex_fetch(ARG(unsigned long long, 0), (float)k + 0.5f, 0.5f, 0, 0, c, sizeof c);
      unsigned long long h = (unsigned long long)c[0] | ((unsigned long long)c[1] << 32);
      s += (float)(k + 1) * fetchf(h, (float)i + 0.5f, 0, 0, 0);
    }
    ARG(float *, 2)[i] = s;
  }
}

/* drv_kernels_share.cu: struct_axpy(share_params p, float s); the struct's
 * layout: x @0, y @8, n @16, host @24, beta @32, tag @40, scratch @48. */
static void k_struct_axpy(const mock_thread *t, void **args) {
  const unsigned char *p = args[0];
  float *x;
  const float *y;
  int n;
  float beta;
  memcpy(&x, p, 8);
  memcpy(&y, p + 8, 8);
  memcpy(&n, p + 16, 4);
  memcpy(&beta, p + 32, 4);
  long long i = GID(t);
  if (i < n) x[i] = x[i] * ARG(float, 1) + beta * y[i];
}

static const struct {
  const char *name;
  mock_host_kernel fn;
} table[] = {
  {"struct_axpy", k_struct_axpy},
  {"vec_add", k_vec_add}, {"scale", k_scale}, {"fill", k_fill}, {"saxpy", k_saxpy},
  {"increment", k_increment}, {"poly", k_poly}, {"add_rc2d", k_add_rc2d}, {"empty_kernel", k_empty},
  {"gather_ptr", k_gather_ptr}, {"copy_struct", k_copy_struct}, {"cond_set", k_cond_set}, {"cond_loop", k_cond_loop},
  {"stamp", k_stamp}, {"cucap_perturb_spin", k_perturb_spin}, {"sched_probe", k_sched_probe}, {"stack_push", k_stack_push}, {"stack_pop", k_stack_pop},
  {"heap_ptrs", k_heap_ptrs},
  {"smem_big", k_smem_big}, {"cluster_info", k_cluster_info}, {"heap_probe", k_heap_probe},
  {"attr_probe", k_attr_probe}, {"limit_probe", k_limit_probe},
  {"tex1d_read", k_tex1d_read}, {"tex1d_fetch", k_tex1d_fetch}, {"tex2d_read", k_tex2d_read},
  {"tex3d_read", k_tex3d_read}, {"tex_lod_read", k_tex_lod_read}, {"surf2d_write", k_surf2d_write},
  {"tex_bindless", k_tex_bindless}, {"tex_atlas", k_tex_atlas},
};

mock_host_kernel mock_kernel_lookup(const char *name) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, name) == 0) return table[i].fn;
  return NULL;
}
