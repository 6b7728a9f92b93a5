/* custom_memory.c - memcpy and memset hooks (allocations and frees:
 * custom_alloc.c).
 *
 * Payloads: HtoD (and HtoH) copies store the source bytes as a blob; DtoH
 * copies store the bytes the app received (unless CUCAP_OPTIONS has
 * no_dtoh_payload). An async DtoH has not landed when the call returns and
 * the recorder never synchronises the program's stream for it: its bytes are
 * read once the copy has completed (custom_deferred.c) and stored in the
 * Memcpy record when that is already the case at return (pageable
 * destinations), else in a later Snapshot{CopyResult}. Nothing is read for
 * work enqueued into a capturing stream. 2D/3D payloads are packed row by
 * row (width_bytes per row, rows in y then z order). */
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

/* ---------------------------------------------------------------- memcpy */

/* 1 if p is device memory (tracked device allocation, or the driver says
 * so), 0 for host memory. */
int cx_ptr_is_device(uint64_t p) {
  cucap_tracked_alloc a;
  if (cucap_tracker_alloc_find(cx_tracker(), p, &a))
    return a.device_memory;
  unsigned int mt = 0;
  int dev = 0;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  if (cucap_real.cuPointerGetAttribute &&
      cucap_real.cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) ==
          CUDA_SUCCESS)
    dev = mt == CU_MEMORYTYPE_DEVICE || mt == CU_MEMORYTYPE_UNIFIED;
  cx_relax_end(&rx);
  return dev; /* 0: unknown to the driver, pageable host memory */
}

/* An asynchronous copy into host memory returned: 1 if its bytes may be
 * read now (see custom_deferred.c). */
static int dtoh_ready(cucap_call *c, CUstream s, const void *dst, size_t n) {
  cx_rows rows = {(const uint8_t *)dst, n, 1, 1, n, n};
  return cx_deferred_copy(c, s, &rows);
}

typedef struct copy_desc {
  uint8_t kind;
  uint64_t dst, src, size;
  int async;
  uint64_t stream;
  const void *payload; /* contiguous payload (1D) */
  size_t payload_size;
  int has_payload_hash;
  cucap_fb_hash128 payload_hash;
  uint64_t src_ctx, dst_ctx;
  cucap_fb_ref geometry;
} copy_desc;

static void memcpy_emit(cucap_call *c, copy_desc *d) {
  cucap_fbb *b = c->b;
  if (d->payload && d->payload_size && !d->has_payload_hash)
    d->has_payload_hash = cx_blob(d->payload, d->payload_size, &d->payload_hash);
  cucap_fb_memcpy_start(b);
  cucap_fb_memcpy_add_kind(b, d->kind);
  cucap_fb_memcpy_add_dst(b, d->dst);
  cucap_fb_memcpy_add_src(b, d->src);
  cucap_fb_memcpy_add_size(b, d->size);
  if (d->async) {
    cucap_fb_memcpy_add_async(b, 1);
    cucap_fb_memcpy_add_stream(b, d->stream);
  }
  if (d->has_payload_hash) {
    cucap_fb_memcpy_add_payload(b, &d->payload_hash);
    cucap_fb_memcpy_add_has_payload(b, 1);
  }
  if (d->geometry)
    cucap_fb_memcpy_add_geometry(b, d->geometry);
  if (d->src_ctx)
    cucap_fb_memcpy_add_src_context(b, d->src_ctx);
  if (d->dst_ctx)
    cucap_fb_memcpy_add_dst_context(b, d->dst_ctx);
  c->body = cucap_fb_memcpy_end(b);
  c->body_type = CUCAP_FB_BODY_MEMCPY;
}

static int want_dtoh(void) { return !cucap_rec_opts()->no_dtoh_payload; }

/* 1D copies with a fixed direction */
static void copy1d(cucap_call *c, CUresult r, uint8_t kind, uint64_t dst, uint64_t src,
                   size_t n, int async, CUstream s) {
  c->stack = cucap_rec_stack_id();
  copy_desc d = {.kind = kind, .dst = dst, .src = src, .size = n, .async = async,
                 .stream = CX_U64(s)};
  if (r == CUDA_SUCCESS && n) {
    if (kind == CUCAP_FB_MEMCPYKIND_HTOD || kind == CUCAP_FB_MEMCPYKIND_HTOH) {
      d.payload = (const void *)(uintptr_t)src;
      d.payload_size = n;
    } else if (kind == CUCAP_FB_MEMCPYKIND_DTOH && want_dtoh()) {
      if (!async || dtoh_ready(c, s, (const void *)(uintptr_t)dst, n)) {
        d.payload = (const void *)(uintptr_t)dst;
        d.payload_size = n;
      }
    }
  }
  memcpy_emit(c, &d);
  if (!async && r == CUDA_SUCCESS)
    cx_deferred_poll(); /* a synchronous copy: earlier work may have completed */
  if (r == CUDA_SUCCESS && cx_managed_any() &&
      (kind == CUCAP_FB_MEMCPYKIND_HTOD || kind == CUCAP_FB_MEMCPYKIND_DTOD))
    cx_managed_written(dst, n, async ? s : NULL, async);
}

void custom_memcpy_htod(cucap_call *c, CUresult r, CUdeviceptr dst, const void *src, size_t n) {
  copy1d(c, r, CUCAP_FB_MEMCPYKIND_HTOD, dst, CX_U64(src), n, 0, NULL);
}
void custom_memcpy_htod_async(cucap_call *c, CUresult r, CUdeviceptr dst, const void *src,
                              size_t n, CUstream s) {
  copy1d(c, r, CUCAP_FB_MEMCPYKIND_HTOD, dst, CX_U64(src), n, 1, s);
}
void custom_memcpy_dtoh(cucap_call *c, CUresult r, void *dst, CUdeviceptr src, size_t n) {
  copy1d(c, r, CUCAP_FB_MEMCPYKIND_DTOH, CX_U64(dst), src, n, 0, NULL);
}
void custom_memcpy_dtoh_async(cucap_call *c, CUresult r, void *dst, CUdeviceptr src,
                              size_t n, CUstream s) {
  copy1d(c, r, CUCAP_FB_MEMCPYKIND_DTOH, CX_U64(dst), src, n, 1, s);
}
void custom_memcpy_dtod(cucap_call *c, CUresult r, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  copy1d(c, r, CUCAP_FB_MEMCPYKIND_DTOD, dst, src, n, 0, NULL);
}
void custom_memcpy_dtod_async(cucap_call *c, CUresult r, CUdeviceptr dst, CUdeviceptr src,
                              size_t n, CUstream s) {
  copy1d(c, r, CUCAP_FB_MEMCPYKIND_DTOD, dst, src, n, 1, s);
}

/* cuMemcpy / cuMemcpyAsync (UVA): the direction is classified here and
 * recorded as the kind (HtoD/DtoH/DtoD/HtoH), which is what a replayer needs;
 * Record.call still names cuMemcpy. */
static uint8_t classify(uint64_t dst, uint64_t src) {
  int dd = cx_ptr_is_device(dst), sd = cx_ptr_is_device(src);
  if (sd && dd)
    return CUCAP_FB_MEMCPYKIND_DTOD;
  if (sd)
    return CUCAP_FB_MEMCPYKIND_DTOH;
  if (dd)
    return CUCAP_FB_MEMCPYKIND_HTOD;
  return CUCAP_FB_MEMCPYKIND_HTOH;
}

void custom_memcpy_unified(cucap_call *c, CUresult r, CUdeviceptr dst, CUdeviceptr src,
                           size_t n) {
  copy1d(c, r, classify(dst, src), dst, src, n, 0, NULL);
}
void custom_memcpy_unified_async(cucap_call *c, CUresult r, CUdeviceptr dst,
                                 CUdeviceptr src, size_t n, CUstream s) {
  copy1d(c, r, classify(dst, src), dst, src, n, 1, s);
}

void custom_memcpy_peer(cucap_call *c, CUresult r, CUdeviceptr dst, CUcontext dctx,
                        CUdeviceptr src, CUcontext sctx, size_t n) {
  c->stack = cucap_rec_stack_id();
  copy_desc d = {.kind = CUCAP_FB_MEMCPYKIND_PEER, .dst = dst, .src = src, .size = n,
                 .src_ctx = CX_U64(sctx), .dst_ctx = CX_U64(dctx)};
  (void)r;
  memcpy_emit(c, &d);
}
void custom_memcpy_peer_async(cucap_call *c, CUresult r, CUdeviceptr dst, CUcontext dctx,
                              CUdeviceptr src, CUcontext sctx, size_t n, CUstream s) {
  c->stack = cucap_rec_stack_id();
  copy_desc d = {.kind = CUCAP_FB_MEMCPYKIND_PEER, .dst = dst, .src = src, .size = n,
                 .async = 1, .stream = CX_U64(s), .src_ctx = CX_U64(sctx),
                 .dst_ctx = CX_U64(dctx)};
  (void)r;
  memcpy_emit(c, &d);
}

/* ---- 2D / 3D ---- */

typedef struct geom {
  size_t width, height, depth;
  size_t sx, sy, sz, spitch, sheight;
  size_t dx, dy, dz, dpitch, dheight;
  unsigned smt, dmt;           /* CUmemorytype */
  const void *shost;
  void *dhost;
  uint64_t sdev, ddev, sarr, darr;
} geom;

static int side_is_host(unsigned mt, uint64_t unified_ptr) {
  if (mt == CU_MEMORYTYPE_HOST)
    return 1;
  if (mt == CU_MEMORYTYPE_UNIFIED)
    return !cx_ptr_is_device(unified_ptr);
  return 0;
}

static uint8_t geom_kind(const geom *g, int *src_host, int *dst_host) {
  *src_host = side_is_host(g->smt, g->sdev);
  *dst_host = side_is_host(g->dmt, g->ddev);
  int sa = g->smt == CU_MEMORYTYPE_ARRAY, da = g->dmt == CU_MEMORYTYPE_ARRAY;
  if (sa && da) return CUCAP_FB_MEMCPYKIND_ATOA;
  if (sa) return *dst_host ? CUCAP_FB_MEMCPYKIND_ATOH : CUCAP_FB_MEMCPYKIND_ATOD;
  if (da) return *src_host ? CUCAP_FB_MEMCPYKIND_HTOA : CUCAP_FB_MEMCPYKIND_DTOA;
  if (*src_host) return *dst_host ? CUCAP_FB_MEMCPYKIND_HTOH : CUCAP_FB_MEMCPYKIND_HTOD;
  return *dst_host ? CUCAP_FB_MEMCPYKIND_DTOH : CUCAP_FB_MEMCPYKIND_DTOD;
}

/* Packs the host side rows into one buffer (malloc'ed; caller frees). */
static void *pack_rows(const uint8_t *base, size_t x, size_t y, size_t z, size_t pitch,
                       size_t height, const geom *g, size_t *out_size) {
  size_t rows = g->height * g->depth;
  if (!base || !g->width || !rows || rows > SIZE_MAX / g->width)
    return NULL;
  size_t pitch_eff = pitch ? pitch : g->width;
  size_t h_eff = height ? height : g->height;
  uint8_t *buf = malloc(g->width * rows);
  if (!buf)
    return NULL;
  size_t o = 0;
  for (size_t k = 0; k < g->depth; k++)
    for (size_t j = 0; j < g->height; j++) {
      const uint8_t *row = base + ((z + k) * h_eff + y + j) * pitch_eff + x;
      memcpy(buf + o, row, g->width);
      o += g->width;
    }
  *out_size = o;
  return buf;
}

static cucap_fb_ref geometry_ref(cucap_fbb *b, const geom *g, int is3d) {
  cucap_fb_copy_geometry_start(b);
  cucap_fb_copy_geometry_add_width_bytes(b, g->width);
  cucap_fb_copy_geometry_add_height(b, g->height);
  cucap_fb_copy_geometry_add_depth(b, g->depth);
  cucap_fb_copy_geometry_add_src_x_bytes(b, g->sx);
  cucap_fb_copy_geometry_add_src_y(b, g->sy);
  cucap_fb_copy_geometry_add_src_pitch(b, g->spitch);
  cucap_fb_copy_geometry_add_dst_x_bytes(b, g->dx);
  cucap_fb_copy_geometry_add_dst_y(b, g->dy);
  cucap_fb_copy_geometry_add_dst_pitch(b, g->dpitch);
  if (is3d) {
    cucap_fb_copy_geometry_add_src_z(b, g->sz);
    cucap_fb_copy_geometry_add_src_height(b, g->sheight);
    cucap_fb_copy_geometry_add_dst_z(b, g->dz);
    cucap_fb_copy_geometry_add_dst_height(b, g->dheight);
  }
  cucap_fb_copy_geometry_add_src_memory_type(b, g->smt);
  cucap_fb_copy_geometry_add_dst_memory_type(b, g->dmt);
  if (g->sarr)
    cucap_fb_copy_geometry_add_src_array(b, g->sarr);
  if (g->darr)
    cucap_fb_copy_geometry_add_dst_array(b, g->darr);
  return cucap_fb_copy_geometry_end(b);
}

static void copy_geom(cucap_call *c, CUresult r, const geom *g, int async, CUstream s,
                      int is3d) {
  c->stack = cucap_rec_stack_id();
  int sh, dh;
  uint8_t kind = geom_kind(g, &sh, &dh);
  copy_desc d = {.kind = kind, .size = g->width * g->height * g->depth, .async = async,
                 .stream = CX_U64(s)};
  d.src = sh ? CX_U64(g->shost ? g->shost : (const void *)(uintptr_t)g->sdev)
             : (g->smt == CU_MEMORYTYPE_ARRAY ? g->sarr : g->sdev);
  d.dst = dh ? CX_U64(g->dhost ? g->dhost : (void *)(uintptr_t)g->ddev)
             : (g->dmt == CU_MEMORYTYPE_ARRAY ? g->darr : g->ddev);
  void *packed = NULL;
  size_t psize = 0;
  if (r == CUDA_SUCCESS) {
    if (sh) {
      packed = pack_rows((const uint8_t *)(uintptr_t)d.src, g->sx, g->sy, g->sz, g->spitch,
                         g->sheight, g, &psize);
    } else if (dh && want_dtoh()) {
      size_t pitch = g->dpitch ? g->dpitch : g->width;
      size_t h_eff = g->dheight ? g->dheight : g->height;
      cx_rows rows = {(const uint8_t *)(uintptr_t)d.dst +
                          (g->dz * h_eff + g->dy) * pitch + g->dx,
                      g->width, g->height, g->depth, pitch, pitch * h_eff};
      if (!async || cx_deferred_copy(c, s, &rows))
        packed = pack_rows((const uint8_t *)(uintptr_t)d.dst, g->dx, g->dy, g->dz, g->dpitch,
                           g->dheight, g, &psize);
    }
  }
  if (!async && r == CUDA_SUCCESS)
    cx_deferred_poll();
  if (packed) {
    d.has_payload_hash = cx_blob(packed, psize, &d.payload_hash);
    free(packed);
  }
  d.geometry = geometry_ref(c->b, g, is3d);
  memcpy_emit(c, &d);
}

static void geom_from_2d(const CUDA_MEMCPY2D *p, geom *g) {
  memset(g, 0, sizeof *g);
  g->width = p->WidthInBytes;
  g->height = p->Height;
  g->depth = 1;
  g->sx = p->srcXInBytes; g->sy = p->srcY; g->spitch = p->srcPitch;
  g->dx = p->dstXInBytes; g->dy = p->dstY; g->dpitch = p->dstPitch;
  g->smt = p->srcMemoryType; g->dmt = p->dstMemoryType;
  g->shost = p->srcHost; g->dhost = p->dstHost;
  g->sdev = p->srcDevice; g->ddev = p->dstDevice;
  g->sarr = CX_U64(p->srcArray); g->darr = CX_U64(p->dstArray);
  if (g->smt == CU_MEMORYTYPE_UNIFIED)
    g->shost = NULL;
  if (g->dmt == CU_MEMORYTYPE_UNIFIED)
    g->dhost = NULL;
}

static void geom_from_3d(const CUDA_MEMCPY3D *p, geom *g) {
  memset(g, 0, sizeof *g);
  g->width = p->WidthInBytes;
  g->height = p->Height;
  g->depth = p->Depth ? p->Depth : 1;
  g->sx = p->srcXInBytes; g->sy = p->srcY; g->sz = p->srcZ;
  g->spitch = p->srcPitch; g->sheight = p->srcHeight;
  g->dx = p->dstXInBytes; g->dy = p->dstY; g->dz = p->dstZ;
  g->dpitch = p->dstPitch; g->dheight = p->dstHeight;
  g->smt = p->srcMemoryType; g->dmt = p->dstMemoryType;
  g->shost = p->srcHost; g->dhost = p->dstHost;
  g->sdev = p->srcDevice; g->ddev = p->dstDevice;
  g->sarr = CX_U64(p->srcArray); g->darr = CX_U64(p->dstArray);
  if (g->smt == CU_MEMORYTYPE_UNIFIED)
    g->shost = NULL;
  if (g->dmt == CU_MEMORYTYPE_UNIFIED)
    g->dhost = NULL;
}

void custom_memcpy_2d(cucap_call *c, CUresult r, const CUDA_MEMCPY2D *p) {
  if (!p)
    return;
  geom g;
  geom_from_2d(p, &g);
  copy_geom(c, r, &g, 0, NULL, 0);
}
void custom_memcpy_2d_async(cucap_call *c, CUresult r, const CUDA_MEMCPY2D *p, CUstream s) {
  if (!p)
    return;
  geom g;
  geom_from_2d(p, &g);
  copy_geom(c, r, &g, 1, s, 0);
}
void custom_memcpy_3d(cucap_call *c, CUresult r, const CUDA_MEMCPY3D *p) {
  if (!p)
    return;
  geom g;
  geom_from_3d(p, &g);
  copy_geom(c, r, &g, 0, NULL, 1);
}
void custom_memcpy_3d_async(cucap_call *c, CUresult r, const CUDA_MEMCPY3D *p, CUstream s) {
  if (!p)
    return;
  geom g;
  geom_from_3d(p, &g);
  copy_geom(c, r, &g, 1, s, 1);
}

/* ---------------------------------------------------------------- memset */

static void memset_post(cucap_call *c, uint64_t dst, uint32_t value, uint8_t elem,
                        size_t count, size_t height, size_t pitch, int async, CUstream s) {
  c->stack = cucap_rec_stack_id();
  if (cx_managed_any())
    cx_managed_written(dst, (height > 1 ? pitch * (height - 1) : 0) + count * elem,
                       async ? s : NULL, async);
  cucap_fbb *b = c->b;
  cucap_fb_memset_start(b);
  cucap_fb_memset_add_dst(b, dst);
  cucap_fb_memset_add_value(b, value);
  cucap_fb_memset_add_elem_size(b, elem);
  cucap_fb_memset_add_count(b, count);
  cucap_fb_memset_add_height(b, height);
  if (pitch)
    cucap_fb_memset_add_pitch(b, pitch);
  if (async) {
    cucap_fb_memset_add_async(b, 1);
    cucap_fb_memset_add_stream(b, CX_U64(s));
  }
  c->body = cucap_fb_memset_end(b);
  c->body_type = CUCAP_FB_BODY_MEMSET;
}

void custom_memset_d8(cucap_call *c, CUresult r, CUdeviceptr d, unsigned char v, size_t n) {
  (void)r; memset_post(c, d, v, 1, n, 1, 0, 0, NULL);
}
void custom_memset_d16(cucap_call *c, CUresult r, CUdeviceptr d, unsigned short v, size_t n) {
  (void)r; memset_post(c, d, v, 2, n, 1, 0, 0, NULL);
}
void custom_memset_d32(cucap_call *c, CUresult r, CUdeviceptr d, unsigned int v, size_t n) {
  (void)r; memset_post(c, d, v, 4, n, 1, 0, 0, NULL);
}
void custom_memset_d8_async(cucap_call *c, CUresult r, CUdeviceptr d, unsigned char v,
                            size_t n, CUstream s) {
  (void)r; memset_post(c, d, v, 1, n, 1, 0, 1, s);
}
void custom_memset_d16_async(cucap_call *c, CUresult r, CUdeviceptr d, unsigned short v,
                             size_t n, CUstream s) {
  (void)r; memset_post(c, d, v, 2, n, 1, 0, 1, s);
}
void custom_memset_d32_async(cucap_call *c, CUresult r, CUdeviceptr d, unsigned int v,
                             size_t n, CUstream s) {
  (void)r; memset_post(c, d, v, 4, n, 1, 0, 1, s);
}
void custom_memset_d2d8(cucap_call *c, CUresult r, CUdeviceptr d, size_t pitch,
                        unsigned char v, size_t w, size_t h) {
  (void)r; memset_post(c, d, v, 1, w, h, pitch, 0, NULL);
}
void custom_memset_d2d16(cucap_call *c, CUresult r, CUdeviceptr d, size_t pitch,
                         unsigned short v, size_t w, size_t h) {
  (void)r; memset_post(c, d, v, 2, w, h, pitch, 0, NULL);
}
void custom_memset_d2d32(cucap_call *c, CUresult r, CUdeviceptr d, size_t pitch,
                         unsigned int v, size_t w, size_t h) {
  (void)r; memset_post(c, d, v, 4, w, h, pitch, 0, NULL);
}
void custom_memset_d2d8_async(cucap_call *c, CUresult r, CUdeviceptr d, size_t pitch,
                              unsigned char v, size_t w, size_t h, CUstream s) {
  (void)r; memset_post(c, d, v, 1, w, h, pitch, 1, s);
}
void custom_memset_d2d16_async(cucap_call *c, CUresult r, CUdeviceptr d, size_t pitch,
                               unsigned short v, size_t w, size_t h, CUstream s) {
  (void)r; memset_post(c, d, v, 2, w, h, pitch, 1, s);
}
void custom_memset_d2d32_async(cucap_call *c, CUresult r, CUdeviceptr d, size_t pitch,
                               unsigned int v, size_t w, size_t h, CUstream s) {
  (void)r; memset_post(c, d, v, 4, w, h, pitch, 1, s);
}

/* ---- cuMemPrefetchAsync(_v2): no data for replay, recorded for order ---- */
void custom_mem_prefetch_v2(cucap_call *c, CUresult r, CUdeviceptr p, size_t n,
                            CUmemLocation loc, unsigned int flags, CUstream s) {
  (void)r, (void)flags;
  c->stack = cucap_rec_stack_id();
  copy_desc d = {.kind = CUCAP_FB_MEMCPYKIND_PREFETCH, .dst = (uint64_t)loc.id, .src = p,
                 .size = n, .async = 1, .stream = CX_U64(s)};
  memcpy_emit(c, &d);
}

/* Memcpy body of a graph memcpy node (no payload: host data is read when the
 * graph is launched, not when it is built). */
cucap_fb_ref cx_memcpy3d_node_body(cucap_fbb *b, const CUDA_MEMCPY3D *p) {
  geom g;
  geom_from_3d(p, &g);
  int sh, dh;
  copy_desc d = {.kind = geom_kind(&g, &sh, &dh), .size = g.width * g.height * g.depth};
  d.src = sh ? CX_U64(g.shost ? g.shost : (const void *)(uintptr_t)g.sdev)
             : (g.smt == CU_MEMORYTYPE_ARRAY ? g.sarr : g.sdev);
  d.dst = dh ? CX_U64(g.dhost ? g.dhost : (void *)(uintptr_t)g.ddev)
             : (g.dmt == CU_MEMORYTYPE_ARRAY ? g.darr : g.ddev);
  cucap_fb_ref geo = geometry_ref(b, &g, 1);
  cucap_fb_memcpy_start(b);
  cucap_fb_memcpy_add_kind(b, d.kind);
  cucap_fb_memcpy_add_dst(b, d.dst);
  cucap_fb_memcpy_add_src(b, d.src);
  cucap_fb_memcpy_add_size(b, d.size);
  cucap_fb_memcpy_add_geometry(b, geo);
  return cucap_fb_memcpy_end(b);
}

/* ---- 1D array copies: the array offset goes to geometry src/dst_x_bytes ---- */

static void copy_array(cucap_call *c, CUresult r, uint8_t kind, uint64_t dst, size_t doff,
                       uint64_t src, size_t soff, size_t n, int async, CUstream s) {
  c->stack = cucap_rec_stack_id();
  copy_desc d = {.kind = kind, .dst = dst, .src = src, .size = n, .async = async,
                 .stream = CX_U64(s)};
  if (r == CUDA_SUCCESS && n) {
    if (kind == CUCAP_FB_MEMCPYKIND_HTOA) {
      d.payload = (const void *)(uintptr_t)src;
      d.payload_size = n;
    } else if (kind == CUCAP_FB_MEMCPYKIND_ATOH && want_dtoh()) {
      if (!async || dtoh_ready(c, s, (const void *)(uintptr_t)dst, n)) {
        d.payload = (const void *)(uintptr_t)dst;
        d.payload_size = n;
      }
    }
  }
  if (!async && r == CUDA_SUCCESS)
    cx_deferred_poll();
  geom g;
  memset(&g, 0, sizeof g);
  g.width = n;
  g.height = g.depth = 1;
  g.dx = doff;
  g.sx = soff;
  int sa = kind == CUCAP_FB_MEMCPYKIND_ATOH || kind == CUCAP_FB_MEMCPYKIND_ATOD ||
           kind == CUCAP_FB_MEMCPYKIND_ATOA;
  int da = kind == CUCAP_FB_MEMCPYKIND_HTOA || kind == CUCAP_FB_MEMCPYKIND_DTOA ||
           kind == CUCAP_FB_MEMCPYKIND_ATOA;
  g.smt = sa ? CU_MEMORYTYPE_ARRAY
             : (kind == CUCAP_FB_MEMCPYKIND_HTOA ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
  g.dmt = da ? CU_MEMORYTYPE_ARRAY
             : (kind == CUCAP_FB_MEMCPYKIND_ATOH ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
  if (sa)
    g.sarr = src;
  if (da)
    g.darr = dst;
  d.geometry = geometry_ref(c->b, &g, 0);
  memcpy_emit(c, &d);
}

void custom_memcpy_htoa(cucap_call *c, CUresult r, CUarray dst, size_t doff, const void *src,
                        size_t n) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_HTOA, CX_U64(dst), doff, CX_U64(src), 0, n, 0, NULL);
}
void custom_memcpy_htoa_async(cucap_call *c, CUresult r, CUarray dst, size_t doff,
                              const void *src, size_t n, CUstream s) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_HTOA, CX_U64(dst), doff, CX_U64(src), 0, n, 1, s);
}
void custom_memcpy_atoh(cucap_call *c, CUresult r, void *dst, CUarray src, size_t soff,
                        size_t n) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_ATOH, CX_U64(dst), 0, CX_U64(src), soff, n, 0, NULL);
}
void custom_memcpy_atoh_async(cucap_call *c, CUresult r, void *dst, CUarray src, size_t soff,
                              size_t n, CUstream s) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_ATOH, CX_U64(dst), 0, CX_U64(src), soff, n, 1, s);
}
void custom_memcpy_dtoa(cucap_call *c, CUresult r, CUarray dst, size_t doff, CUdeviceptr src,
                        size_t n) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_DTOA, CX_U64(dst), doff, src, 0, n, 0, NULL);
}
void custom_memcpy_atod(cucap_call *c, CUresult r, CUdeviceptr dst, CUarray src, size_t soff,
                        size_t n) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_ATOD, dst, 0, CX_U64(src), soff, n, 0, NULL);
}
void custom_memcpy_atoa(cucap_call *c, CUresult r, CUarray dst, size_t doff, CUarray src,
                        size_t soff, size_t n) {
  copy_array(c, r, CUCAP_FB_MEMCPYKIND_ATOA, CX_U64(dst), doff, CX_U64(src), soff, n, 0, NULL);
}
