// Kernels of drv_attrs and drv_texture (tests/apps/drv_attrs.c,
// drv_texture.c), built into their own sm_90 fatbin (drv_obj_fatbin, see
// drv_embed_objects.c) so that the images of the other programs, and the
// golden dumps that name them, stay as they are. extern "C" so names are not
// mangled. The mock libcuda (tests/mock/mock_cuda_kernels.c) carries a host
// implementation of each: keep the two in sync.

// ---- attributes and limits (drv_attrs) ------------------------------------
#include <cooperative_groups.h>

// Dynamic shared memory beyond 48 KiB (per_thread floats per thread): needs
// MAX_DYNAMIC_SHARED_SIZE_BYTES set on the function or its CUkernel. Each
// thread only reads back its own slots (no __syncthreads: the mock runs
// threads one after the other).
extern "C" __global__ void smem_big(float *out, int per_thread) {
  extern __shared__ float s[];
  int t = threadIdx.x;
  for (int j = 0; j < per_thread; j++) s[t * per_thread + j] = (float)(blockIdx.x * 1000 + t * per_thread + j);
  float acc = 0.f;
  for (int j = per_thread - 1; j >= 0; j--) acc = acc * 0.5f + s[t * per_thread + j];
  out[blockIdx.x * blockDim.x + t] = acc;
}
// Each block writes its rank in its cluster + 100 * the cluster's size.
extern "C" __global__ void cluster_info(int *out) {
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  if (threadIdx.x == 0)
    out[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] =
        (int)cl.block_rank() + 100 * (int)cl.num_blocks();
}
// Device malloc of n bytes: needs a heap of at least n (CU_LIMIT_MALLOC_HEAP_SIZE).
extern "C" __global__ void heap_probe(int *ok, unsigned long long n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    char *p = (char *)malloc(n);
    *ok = p != 0;
    if (p) {
      p[0] = 1;
      p[n - 1] = 2;
      free(p);
    }
  }
}
// Attribute and limit probes: a GPU cannot observe cache configurations,
// carveouts, scheduling policies or limits from device code, so these write
// 1; the mock's host versions check that the values given are in effect
// (the function's own, the context's), so a replay that drops one of those
// calls reads back 0 there.
extern "C" __global__ void attr_probe(int *ok, int cache_cfg, int carveout, int sched, int req_w,
                                      int shmem_cfg, int ctx_cache, int ctx_shmem) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *ok = 1;
}
extern "C" __global__ void limit_probe(int *ok, unsigned long long stack, unsigned long long fifo,
                                       unsigned long long heap, unsigned long long pending) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *ok = 1;
}

// ---- arrays, textures, surfaces (drv_texture) -----------------------------
// Point-sampled reads at texel centres: exact on a GPU and on the mock.
extern "C" __global__ void tex1d_read(unsigned long long tex, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1D<float>(tex, i + 0.5f);
}
extern "C" __global__ void tex1d_fetch(unsigned long long tex, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(tex, i);
}
extern "C" __global__ void tex2d_read(unsigned long long tex, float *out, int w, int h, float dy) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + dy);
}
extern "C" __global__ void tex3d_read(unsigned long long tex, float *out, int w, int h, int d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < w * h * d) {
    int x = i % w, y = (i / w) % h, z = i / (w * h);
    out[i] = tex3D<float>(tex, x + 0.5f, y + 0.5f, z + 0.5f);
  }
}
extern "C" __global__ void tex_lod_read(unsigned long long tex, float *out, int w, int h, float lod) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2DLod<float>(tex, (x + 0.5f) / w, (y + 0.5f) / h, lod);
}
extern "C" __global__ void surf2d_write(unsigned long long surf, int w, int h, float base) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) surf2Dwrite(base + x + 1000.f * y, surf, x * 4, y);
}
// Bindless: texture handles read from device memory ...
extern "C" __global__ void tex_bindless(const unsigned long long *texs, int ntex, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.f;
    for (int t = 0; t < ntex; t++) s += (t + 1) * tex1D<float>(texs[t], i + 0.5f);
    out[i] = s;
  }
}
// ... and from a 2-channel 32-bit array read through a texture (the
// bindlessTexture sample's atlas).
extern "C" __global__ void tex_atlas(unsigned long long atlas, int ntex, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.f;
    for (int t = 0; t < ntex; t++) {
      uint2 c = tex2D<uint2>(atlas, t + 0.5f, 0.5f);
      unsigned long long h = (unsigned long long)c.x | ((unsigned long long)c.y << 32);
      s += (t + 1) * tex1D<float>(h, i + 0.5f);
    }
    out[i] = s;
  }
}
