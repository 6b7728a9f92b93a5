/* drv_texture: CUDA arrays, texture and surface objects and every copy that
 * fills or reads an array, as texture samples use them.
 *  - 1D array: cuMemcpyHtoA, AtoA, AtoD, DtoA, HtoAAsync/AtoHAsync, AtoH;
 *    read through a texture (tex1D);
 *  - linear (cuMemAlloc) and pitch-2D (cuMemAllocPitch) textures;
 *  - 2D array filled with cuMemcpy2D from pitched host rows, read through a
 *    texture (clamped rows), written through a surface object, read back
 *    with cuMemcpy2D into host memory (a sub-rectangle);
 *  - 3D array: cuMemcpy3D host->array, array->device and array->host
 *    (a sub-box), tex3D;
 *  - mipmapped array (cuMipmappedArrayCreate/GetLevel, one copy per level),
 *    tex2DLod at three levels;
 *  - bindless: texture handles stored in device memory (HtoD) and in a
 *    2-channel 32-bit array (cuMemcpy2D host->array, like the bindlessTexture
 *    sample's atlas), read by kernels; the handle buffer read back.
 * Prints checksums that must match natively, recorded and replayed. */
#include "drv_common.h"

enum { N1 = 256, W = 64, H = 48, W3 = 16, H3 = 8, D3 = 4, MW = 32, NT = 3 };

static CUfunction fn(CUmodule m, const char *name) {
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, name));
  return f;
}

static CUtexObject tex_on(const CUDA_RESOURCE_DESC *rd, int normalized, int as_int, float max_level) {
  CUDA_TEXTURE_DESC td;
  memset(&td, 0, sizeof td);
  td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = CU_TR_ADDRESS_MODE_CLAMP;
  td.filterMode = CU_TR_FILTER_MODE_POINT;
  td.mipmapFilterMode = CU_TR_FILTER_MODE_POINT;
  td.maxMipmapLevelClamp = max_level;
  td.flags = (normalized ? CU_TRSF_NORMALIZED_COORDINATES : 0) | (as_int ? CU_TRSF_READ_AS_INTEGER : 0);
  CUtexObject t;
  CK(cuTexObjectCreate(&t, rd, &td, NULL));
  return t;
}

static CUtexObject tex_array(CUarray a) {
  CUDA_RESOURCE_DESC rd;
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = a;
  return tex_on(&rd, 0, 0, 0);
}

static CUarray array3(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned flags) {
  CUDA_ARRAY3D_DESCRIPTOR ad = {w, h, d, f, ch, flags};
  CUarray a;
  CK(cuArray3DCreate(&a, &ad));
  return a;
}

static void run1d(CUfunction f, unsigned long long tex, CUdeviceptr out, int n) {
  void *args[] = {&tex, &out, &n};
  CK(cuLaunchKernel(f, (n + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
}

static void run2d(CUfunction f, unsigned long long tex, CUdeviceptr out, int w, int h, float p) {
  void *args[] = {&tex, &out, &w, &h, &p};
  CK(cuLaunchKernel(f, (w + 15) / 16, (h + 15) / 16, 1, 16, 16, 1, 0, NULL, args, NULL));
}

static void show(const char *label, CUdeviceptr d, size_t n, float *h) {
  CK(cuMemcpyDtoH(h, d, n * sizeof(float)));
  drv_print(label, h, n);
}

int main(void) {
  CUcontext ctx = drv_setup();
  CUmodule mod;
  CK(cuModuleLoadData(&mod, drv_obj_fatbin));
  CUfunction k1 = fn(mod, "tex1d_read"), kf = fn(mod, "tex1d_fetch"), k2 = fn(mod, "tex2d_read");
  CUfunction k3 = fn(mod, "tex3d_read"), kl = fn(mod, "tex_lod_read"), ks = fn(mod, "surf2d_write");
  CUfunction kb = fn(mod, "tex_bindless"), ka = fn(mod, "tex_atlas");
  float *h = calloc(W * H * 4, sizeof *h), *g = calloc(W * H * 4, sizeof *g);
  if (!h || !g) return 1;
  CUdeviceptr out;
  CK(cuMemAlloc(&out, W * H * sizeof(float)));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  /* ---- 1D arrays and the 1D copies */
  for (int i = 0; i < N1; i++) h[i] = (float)(i % 17);
  CUarray a1 = array3(N1, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0), a1b = array3(N1, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0);
  CK(cuMemcpyHtoA(a1, 0, h, N1 * sizeof(float)));
  CK(cuMemcpyAtoA(a1b, 0, a1, 0, N1 * sizeof(float)));
  CUdeviceptr d1;
  CK(cuMemAlloc(&d1, N1 * sizeof(float)));
  CK(cuMemcpyAtoD(d1, a1b, 16 * sizeof(float), 64 * sizeof(float))); /* elements 16..79 */
  CK(cuMemcpyDtoA(a1b, 128 * sizeof(float), d1, 64 * sizeof(float)));
  for (int i = 0; i < 32; i++) g[i] = 100.f + (float)i;
  CK(cuMemcpyHtoAAsync(a1b, 200 * sizeof(float), g, 32 * sizeof(float), s));
  CK(cuMemcpyAtoHAsync(h + N1, a1b, 0, N1 * sizeof(float), s));
  CK(cuStreamSynchronize(s));
  drv_print("1D array after AtoA/AtoD/DtoA/HtoA", h + N1, N1);
  CUtexObject t1 = tex_array(a1b);
  run1d(k1, t1, out, N1);
  show("tex1D on the 1D array", out, N1, g);
  CK(cuMemcpyAtoH(g, a1, 8 * sizeof(float), 16 * sizeof(float)));
  drv_print("cuMemcpyAtoH", g, 16);

  /* ---- linear and pitch-2D textures over device memory */
  CUdeviceptr dlin, dp;
  size_t pitch;
  CK(cuMemAlloc(&dlin, 2 << 20)); /* large: the base meets the texture alignment */
  CK(cuMemcpyHtoD(dlin, h, N1 * sizeof(float)));
  CUDA_RESOURCE_DESC rd;
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_LINEAR;
  rd.res.linear.devPtr = dlin;
  rd.res.linear.format = CU_AD_FORMAT_FLOAT;
  rd.res.linear.numChannels = 1;
  rd.res.linear.sizeInBytes = N1 * sizeof(float);
  CUtexObject tlin = tex_on(&rd, 0, 0, 0);
  run1d(kf, tlin, out, N1);
  show("tex1Dfetch on linear memory", out, N1, g);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) h[y * W + x] = (float)((x * 3 + y * 7) % 23);
  CK(cuMemAllocPitch(&dp, &pitch, W * sizeof(float), H, 4));
  CUDA_MEMCPY2D c2;
  memset(&c2, 0, sizeof c2);
  c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = h, c2.srcPitch = W * sizeof(float);
  c2.dstMemoryType = CU_MEMORYTYPE_DEVICE, c2.dstDevice = dp, c2.dstPitch = pitch;
  c2.WidthInBytes = W * sizeof(float), c2.Height = H;
  CK(cuMemcpy2D(&c2));
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_PITCH2D;
  rd.res.pitch2D.devPtr = dp;
  rd.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
  rd.res.pitch2D.numChannels = 1;
  rd.res.pitch2D.width = W, rd.res.pitch2D.height = H, rd.res.pitch2D.pitchInBytes = pitch;
  CUtexObject tp = tex_on(&rd, 0, 0, 0);
  run2d(k2, tp, out, W, H, 0.5f);
  show("tex2D on pitched memory", out, W * H, g);

  /* ---- 2D array: texture and surface */
  CUarray a2 = array3(W, H, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST);
  float *hp = calloc((W + 4) * H, sizeof *hp); /* host rows with padding */
  if (!hp) return 1;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) hp[y * (W + 4) + x] = h[y * W + x];
  memset(&c2, 0, sizeof c2);
  c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = hp, c2.srcPitch = (W + 4) * sizeof(float);
  c2.dstMemoryType = CU_MEMORYTYPE_ARRAY, c2.dstArray = a2;
  c2.WidthInBytes = W * sizeof(float), c2.Height = H;
  CK(cuMemcpy2D(&c2));
  CUtexObject t2 = tex_array(a2);
  run2d(k2, t2, out, W, H, 1.5f); /* one row down, the last row clamped */
  show("tex2D on the 2D array (rows shifted)", out, W * H, g);
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = a2;
  CUsurfObject sf;
  CK(cuSurfObjectCreate(&sf, &rd));
  int sw = W, sh = H / 2;
  float base = 5.f;
  void *sargs[] = {&sf, &sw, &sh, &base};
  CK(cuLaunchKernel(ks, (W + 15) / 16, (H / 2 + 15) / 16, 1, 16, 16, 1, 0, NULL, sargs, NULL));
  run2d(k2, t2, out, W, H, 0.5f);
  show("tex2D after the surface writes", out, W * H, g);
  memset(&c2, 0, sizeof c2);
  c2.srcMemoryType = CU_MEMORYTYPE_ARRAY, c2.srcArray = a2, c2.srcXInBytes = 2 * sizeof(float), c2.srcY = 20;
  c2.dstMemoryType = CU_MEMORYTYPE_HOST, c2.dstHost = g, c2.dstPitch = 40 * sizeof(float);
  c2.WidthInBytes = 40 * sizeof(float), c2.Height = 8;
  CK(cuMemcpy2D(&c2));
  drv_print("cuMemcpy2D array->host (sub-rectangle)", g, 40 * 8);

  /* ---- 3D array */
  for (int i = 0; i < W3 * H3 * D3; i++) h[i] = (float)((i * 5) % 31);
  CUarray a3 = array3(W3, H3, D3, CU_AD_FORMAT_FLOAT, 1, 0);
  CUDA_MEMCPY3D c3;
  memset(&c3, 0, sizeof c3);
  c3.srcMemoryType = CU_MEMORYTYPE_HOST, c3.srcHost = h, c3.srcPitch = W3 * sizeof(float), c3.srcHeight = H3;
  c3.dstMemoryType = CU_MEMORYTYPE_ARRAY, c3.dstArray = a3;
  c3.WidthInBytes = W3 * sizeof(float), c3.Height = H3, c3.Depth = D3;
  CK(cuMemcpy3D(&c3));
  CUtexObject t3 = tex_array(a3);
  int w3 = W3, h3 = H3, dd3 = D3;
  void *a3args[] = {&t3, &out, &w3, &h3, &dd3};
  CK(cuLaunchKernel(k3, (W3 * H3 * D3 + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, a3args, NULL));
  show("tex3D on the 3D array", out, W3 * H3 * D3, g);
  CUdeviceptr d3;
  CK(cuMemAlloc(&d3, W3 * H3 * D3 * sizeof(float)));
  memset(&c3, 0, sizeof c3);
  c3.srcMemoryType = CU_MEMORYTYPE_ARRAY, c3.srcArray = a3;
  c3.dstMemoryType = CU_MEMORYTYPE_DEVICE, c3.dstDevice = d3, c3.dstPitch = W3 * sizeof(float), c3.dstHeight = H3;
  c3.WidthInBytes = W3 * sizeof(float), c3.Height = H3, c3.Depth = D3;
  CK(cuMemcpy3DAsync(&c3, s));
  CK(cuStreamSynchronize(s));
  show("cuMemcpy3D array->device", d3, W3 * H3 * D3, g);
  memset(&c3, 0, sizeof c3);
  c3.srcMemoryType = CU_MEMORYTYPE_ARRAY, c3.srcArray = a3, c3.srcXInBytes = 4 * sizeof(float), c3.srcY = 2,
  c3.srcZ = 1;
  c3.dstMemoryType = CU_MEMORYTYPE_HOST, c3.dstHost = g, c3.dstPitch = 8 * sizeof(float), c3.dstHeight = 4;
  c3.WidthInBytes = 8 * sizeof(float), c3.Height = 4, c3.Depth = 2;
  CK(cuMemcpy3D(&c3));
  drv_print("cuMemcpy3D array->host (sub-box)", g, 8 * 4 * 2);

  /* ---- mipmapped array */
  CUDA_ARRAY3D_DESCRIPTOR md = {MW, MW, 0, CU_AD_FORMAT_FLOAT, 1, 0};
  CUmipmappedArray mm;
  CK(cuMipmappedArrayCreate(&mm, &md, 3));
  for (unsigned l = 0; l < 3; l++) {
    CUarray lv;
    CK(cuMipmappedArrayGetLevel(&lv, mm, l));
    int lw = MW >> l;
    for (int i = 0; i < lw * lw; i++) h[i] = (float)((l + 1) * 100 + (i % lw + i / lw) % 5);
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = h, c2.srcPitch = lw * sizeof(float);
    c2.dstMemoryType = CU_MEMORYTYPE_ARRAY, c2.dstArray = lv;
    c2.WidthInBytes = lw * sizeof(float), c2.Height = lw;
    CK(cuMemcpy2D(&c2));
  }
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  rd.res.mipmap.hMipmappedArray = mm;
  CUtexObject tm = tex_on(&rd, 1, 0, 2.f);
  for (int l = 0; l < 3; l++) {
    char label[64];
    snprintf(label, sizeof label, "tex2DLod level %d", l);
    run2d(kl, tm, out, MW, MW, (float)l);
    show(label, out, MW * MW, g);
  }

  /* ---- bindless: handles in device memory and in an array */
  CUarray ab[NT];
  CUtexObject tb[NT];
  for (int t = 0; t < NT; t++) {
    for (int i = 0; i < N1; i++) h[i] = (float)((t + 1) * 1000 + i % 13);
    ab[t] = array3(N1, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    CK(cuMemcpyHtoA(ab[t], 0, h, N1 * sizeof(float)));
    tb[t] = tex_array(ab[t]);
  }
  unsigned long long handles[NT], back[NT];
  for (int t = 0; t < NT; t++) handles[t] = tb[t];
  CUdeviceptr dh;
  CK(cuMemAlloc(&dh, sizeof handles));
  CK(cuMemcpyHtoD(dh, handles, sizeof handles));
  int nt = NT, n1 = N1;
  void *bargs[] = {&dh, &nt, &out, &n1};
  CK(cuLaunchKernel(kb, (N1 + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, bargs, NULL));
  show("bindless (handles in device memory)", out, N1, g);
  CK(cuMemcpyDtoH(back, dh, sizeof back));
  printf("handles read back unchanged: %d\n", !memcmp(back, handles, sizeof back));
  CUarray atlas = array3(NT, 1, 0, CU_AD_FORMAT_UNSIGNED_INT32, 2, 0);
  memset(&c2, 0, sizeof c2);
  c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = handles, c2.srcPitch = sizeof handles;
  c2.dstMemoryType = CU_MEMORYTYPE_ARRAY, c2.dstArray = atlas;
  c2.WidthInBytes = sizeof handles, c2.Height = 1;
  CK(cuMemcpy2D(&c2));
  memset(&rd, 0, sizeof rd);
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = atlas;
  CUtexObject tat = tex_on(&rd, 0, 1, 0);
  void *aargs[] = {&tat, &nt, &out, &n1};
  CK(cuLaunchKernel(ka, (N1 + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, aargs, NULL));
  show("bindless (handles in an array)", out, N1, g);

  /* ---- teardown (a texture may outlive its array, as in the samples) */
  CK(cuArrayDestroy(a1));
  CK(cuTexObjectDestroy(t1));
  CK(cuTexObjectDestroy(tlin));
  CK(cuTexObjectDestroy(tp));
  CK(cuTexObjectDestroy(t2));
  CK(cuSurfObjectDestroy(sf));
  CK(cuTexObjectDestroy(t3));
  CK(cuTexObjectDestroy(tm));
  CK(cuTexObjectDestroy(tat));
  for (int t = 0; t < NT; t++) {
    CK(cuTexObjectDestroy(tb[t]));
    CK(cuArrayDestroy(ab[t]));
  }
  CK(cuArrayDestroy(a1b));
  CK(cuArrayDestroy(a2));
  CK(cuArrayDestroy(a3));
  CK(cuArrayDestroy(atlas));
  CK(cuMipmappedArrayDestroy(mm));
  CK(cuMemFree(out));
  CK(cuMemFree(d1));
  CK(cuMemFree(dlin));
  CK(cuMemFree(dp));
  CK(cuMemFree(d3));
  CK(cuMemFree(dh));
  CK(cuStreamDestroy(s));
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  free(h);
  free(g);
  free(hp);
  printf("drv_texture ok\n");
  return 0;
}
