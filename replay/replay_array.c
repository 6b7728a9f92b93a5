/* replay_array.c - CUDA arrays and the copies to and from them.
 *
 * The recorder stores cuArrayCreate/cuArray3DCreate as Alloc(kind Array):
 * address = the CUarray, width/height, size = depth (0 for cuArrayCreate),
 * flags = Flags << 32 | Format << 8 | NumChannels. Both are replayed with
 * cuArray3DCreate (Depth 0 = a 2D or 1D array, as cuArrayCreate makes).
 * Arrays are mapped recorded -> live in replay_object.c.
 *
 * Copies: the 1D calls (cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA and the async
 * HtoA/AtoH) are replayed with the same calls, the array offset taken from
 * the geometry's src/dst_x_bytes; 2D/3D copies with an array side (from
 * cuMemcpy2D*, cuMemcpy3D*) with cuMemcpy2DAsync/cuMemcpy3DAsync. The host
 * side is the recorded payload, packed rows (HtoA: the data the program
 * uploaded; AtoH: what it read, compared under --verify like a DtoH). */
#include <cupti_driver_cbid.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "replay_state.h"

#define CB(fn) CUPTI_DRIVER_TRACE_CBID_##fn

void rp_array_alloc(rp_state *R, const cucap_fb_record *rec, const cucap_fb_alloc *a) {
  uint64_t fl = cucap_fb_alloc_flags(a);
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  d.Width = cucap_fb_alloc_width(a);
  d.Height = cucap_fb_alloc_height(a);
  d.Depth = cucap_fb_alloc_size(a);
  d.Format = (CUarray_format)((fl >> 8) & 0xffffff);
  d.NumChannels = (unsigned)(fl & 0xff);
  d.Flags = (unsigned)(fl >> 32);
  if (!R->d.df.Array3DCreate) {
    rp_skip(R, "cuArrayCreate (driver lacks cuArray3DCreate)");
    return;
  }
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  CUarray live = NULL;
  if (!rp_cu(R, R->d.df.Array3DCreate(&live, &d), "cuArray3DCreate"))
    return;
  if (rp_object_array_put(R, cucap_fb_alloc_address(a), (uint64_t)(uintptr_t)live, 1) != CUCAP_OK) {
    if (R->d.df.ArrayDestroy)
      R->d.df.ArrayDestroy(live);
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return;
  }
  R->rep->executed++;
}

void rp_array_free(rp_state *R, const cucap_fb_record *rec, const cucap_fb_free *f) {
  uint64_t live = rp_object_array_del(R, cucap_fb_free_address(f));
  if (live && R->d.df.ArrayDestroy) {
    rp_ctx_rec(R, rec);
    R->d.df.ArrayDestroy((CUarray)(uintptr_t)live);
  }
  R->rep->executed++;
}

int rp_array_is_copy(const cucap_fb_memcpy *c) {
  int k = cucap_fb_memcpy_kind(c);
  return k >= CUCAP_FB_MEMCPYKIND_HTOA && k <= CUCAP_FB_MEMCPYKIND_ATOA;
}

/* The 1D array calls (offset in bytes, no rows). */
static int is_1d_call(uint32_t call) {
  switch (call) {
  case CB(cuMemcpyHtoA_v2): case CB(cuMemcpyHtoA_v2_ptds):
  case CB(cuMemcpyHtoAAsync_v2): case CB(cuMemcpyHtoAAsync_v2_ptsz):
  case CB(cuMemcpyAtoH_v2): case CB(cuMemcpyAtoH_v2_ptds):
  case CB(cuMemcpyAtoHAsync_v2): case CB(cuMemcpyAtoHAsync_v2_ptsz):
  case CB(cuMemcpyDtoA_v2): case CB(cuMemcpyDtoA_v2_ptds):
  case CB(cuMemcpyAtoD_v2): case CB(cuMemcpyAtoD_v2_ptds):
  case CB(cuMemcpyAtoA_v2): case CB(cuMemcpyAtoA_v2_ptds):
    return 1;
  default:
    return 0;
  }
}

static int is_3d_call(uint32_t call, const cucap_fb_copy_geometry *g) {
  switch (call) {
  case CB(cuMemcpy3D_v2): case CB(cuMemcpy3D_v2_ptds):
  case CB(cuMemcpy3DAsync_v2): case CB(cuMemcpy3DAsync_v2_ptsz):
    return 1;
  default:
    return cucap_fb_copy_geometry_depth(g) > 1 || cucap_fb_copy_geometry_src_z(g) ||
           cucap_fb_copy_geometry_dst_z(g);
  }
}

/* One side of a 2D/3D copy: an array, a device range or a packed host buffer. */
typedef struct side {
  CUmemorytype mt;
  uint64_t array, dev;  /* live */
  void *host;
  size_t x, y, z, pitch, height;
} side;

static void put2d(CUDA_MEMCPY2D *p, const side *s, int dst) {
  if (dst) {
    p->dstMemoryType = s->mt; p->dstArray = (CUarray)(uintptr_t)s->array;
    p->dstDevice = s->dev; p->dstHost = s->host;
    p->dstXInBytes = s->x; p->dstY = s->y; p->dstPitch = s->pitch;
  } else {
    p->srcMemoryType = s->mt; p->srcArray = (CUarray)(uintptr_t)s->array;
    p->srcDevice = s->dev; p->srcHost = s->host;
    p->srcXInBytes = s->x; p->srcY = s->y; p->srcPitch = s->pitch;
  }
}

static void put3d(CUDA_MEMCPY3D *p, const side *s, int dst) {
  if (dst) {
    p->dstMemoryType = s->mt; p->dstArray = (CUarray)(uintptr_t)s->array;
    p->dstDevice = s->dev; p->dstHost = s->host;
    p->dstXInBytes = s->x; p->dstY = s->y; p->dstZ = s->z;
    p->dstPitch = s->pitch; p->dstHeight = s->height;
  } else {
    p->srcMemoryType = s->mt; p->srcArray = (CUarray)(uintptr_t)s->array;
    p->srcDevice = s->dev; p->srcHost = s->host;
    p->srcXInBytes = s->x; p->srcY = s->y; p->srcZ = s->z;
    p->srcPitch = s->pitch; p->srcHeight = s->height;
  }
}

/* Fills one side from the geometry; 0 when a recorded array is unknown. */
static int side_of(rp_state *R, const cucap_fb_copy_geometry *g, int dst, int is_array,
                   int is_host, uint64_t recorded, void *host, side *s) {
  memset(s, 0, sizeof *s);
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g), h = cucap_fb_copy_geometry_height(g);
  if (is_host) { /* the packed payload: rows of width bytes */
    s->mt = CU_MEMORYTYPE_HOST;
    s->host = host;
    s->pitch = w;
    s->height = h;
    return 1;
  }
  s->x = dst ? cucap_fb_copy_geometry_dst_x_bytes(g) : cucap_fb_copy_geometry_src_x_bytes(g);
  s->y = dst ? cucap_fb_copy_geometry_dst_y(g) : cucap_fb_copy_geometry_src_y(g);
  s->z = dst ? cucap_fb_copy_geometry_dst_z(g) : cucap_fb_copy_geometry_src_z(g);
  s->pitch = dst ? cucap_fb_copy_geometry_dst_pitch(g) : cucap_fb_copy_geometry_src_pitch(g);
  s->height = dst ? cucap_fb_copy_geometry_dst_height(g) : cucap_fb_copy_geometry_src_height(g);
  if (is_array) {
    s->mt = CU_MEMORYTYPE_ARRAY;
    s->array = rp_object_array(R, recorded);
    return s->array != 0;
  }
  s->mt = CU_MEMORYTYPE_DEVICE;
  s->dev = rp_tr(R, recorded);
  return 1;
}

/* rp_array_memcpy, the host side: an HtoA copy's payload (patched; *staged
 * when in a staging slot), the buffer an AtoH copy reads into (*kept when
 * it must outlive the op), NULL for a copy between device and array. 0 when
 * skipped or out of memory (reported). */
static int array_host_side(rp_state *R, const cucap_fb_memcpy *c,
                           const cucap_fb_copy_geometry *g, uint64_t size,
                           int src_host, int dst_host, void **hb_out,
                           unsigned *slot_out, int *kept_out, int *staged_out) {
  void *hb = NULL;
  unsigned slot = 0;
  int kept = 0, staged = 0;
  if (src_host) {
    if (!cucap_fb_memcpy_has_payload(c) || !(hb = rp_payload(R, c, size, &slot, &kept))) {
      rp_skip(R, "HtoA copy (payload missing)");
      return 0;
    }
    staged = !kept;
    if (R->obj) /* bindless textures keep their handles in arrays too */
      rp_object_patch_upload(R, hb, size, cucap_fb_copy_geometry_dst_x_bytes(g),
                             cucap_fb_copy_geometry_width_bytes(g));
  } else if (dst_host) {
    if (R->capturing) { /* read when the graph runs: not verifiable */
      hb = malloc(size ? size : 1);
      if (!hb) {
        rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
        return 0;
      }
      R->rep->captured_host_reads++;
      kept = 1;
    } else {
      if (rp_grow(&R->buf.scratch, &R->buf.scratch_cap, size ? size : 1,
                  &R->buf.scratch_pinned, R) != CUCAP_OK) {
        rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
        return 0;
      }
      hb = R->buf.scratch;
    }
  }
  *hb_out = hb;
  *slot_out = slot;
  *kept_out = kept;
  *staged_out = staged;
  return 1;
}

/* rp_array_memcpy, a 1D copy (cuMemcpy*A*): the driver call by direction
 * (*what names it). */
static CUresult array_copy_1d(rp_state *R, const rp_fns *fn, int k,
                              const cucap_fb_copy_geometry *g, uint64_t src,
                              uint64_t dst, void *hb, uint64_t size,
                              CUstream st, const char **what) {
  uint64_t sx = cucap_fb_copy_geometry_src_x_bytes(g), dx = cucap_fb_copy_geometry_dst_x_bytes(g);
  CUarray sa = (CUarray)(uintptr_t)rp_object_array(R, src);
  CUarray da = (CUarray)(uintptr_t)rp_object_array(R, dst);
  switch (k) {
  case CUCAP_FB_MEMCPYKIND_HTOA:
    *what = "cuMemcpyHtoA";
    return fn->MemcpyHtoAAsync ? fn->MemcpyHtoAAsync(da, dx, hb, size, st) : CUDA_ERROR_NOT_FOUND;
  case CUCAP_FB_MEMCPYKIND_ATOH:
    *what = "cuMemcpyAtoH";
    return fn->MemcpyAtoHAsync ? fn->MemcpyAtoHAsync(hb, sa, sx, size, st) : CUDA_ERROR_NOT_FOUND;
  case CUCAP_FB_MEMCPYKIND_DTOA:
    *what = "cuMemcpyDtoA";
    return fn->MemcpyDtoA ? fn->MemcpyDtoA(da, dx, rp_tr(R, src), size) : CUDA_ERROR_NOT_FOUND;
  case CUCAP_FB_MEMCPYKIND_ATOD:
    *what = "cuMemcpyAtoD";
    return fn->MemcpyAtoD ? fn->MemcpyAtoD(rp_tr(R, dst), sa, sx, size) : CUDA_ERROR_NOT_FOUND;
  default:
    *what = "cuMemcpyAtoA";
    return fn->MemcpyAtoA ? fn->MemcpyAtoA(da, dx, sa, sx, size) : CUDA_ERROR_NOT_FOUND;
  }
}

/* rp_array_memcpy, a 2D/3D copy with an array side (*what names it). */
static CUresult array_copy_nd(rp_state *R, const rp_fns *fn, uint32_t call,
                              const cucap_fb_copy_geometry *g, int src_arr,
                              int dst_arr, int src_host, int dst_host,
                              uint64_t src, uint64_t dst, void *hb,
                              CUstream st, const char **what) {
  CUresult r;
  side s, d;
  side_of(R, g, 0, src_arr, src_host, src, hb, &s);
  side_of(R, g, 1, dst_arr, dst_host, dst, hb, &d);
  if (is_3d_call(call, g)) {
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = cucap_fb_copy_geometry_width_bytes(g);
    p.Height = cucap_fb_copy_geometry_height(g);
    p.Depth = cucap_fb_copy_geometry_depth(g);
    put3d(&p, &s, 0);
    put3d(&p, &d, 1);
    *what = "cuMemcpy3D (array)";
    r = fn->Memcpy3DAsync ? fn->Memcpy3DAsync(&p, st) : CUDA_ERROR_NOT_FOUND;
  } else {
    CUDA_MEMCPY2D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = cucap_fb_copy_geometry_width_bytes(g);
    p.Height = cucap_fb_copy_geometry_height(g);
    put2d(&p, &s, 0);
    put2d(&p, &d, 1);
    *what = "cuMemcpy2D (array)";
    r = fn->Memcpy2DAsync ? fn->Memcpy2DAsync(&p, st) : CUDA_ERROR_NOT_FOUND;
  }
  return r;
}

void rp_array_memcpy(rp_state *R, const cucap_fb_record *rec, const cucap_fb_memcpy *c) {
  int k = cucap_fb_memcpy_kind(c);
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
  uint64_t size = cucap_fb_memcpy_size(c);
  uint64_t dst = cucap_fb_memcpy_dst(c), src = cucap_fb_memcpy_src(c);
  uint32_t call = cucap_fb_record_call(rec);
  const rp_fns *fn = rp_fn(R, rec);
  if (!g) {
    rp_skip(R, "array copy without geometry");
    return;
  }
  if ((k == CUCAP_FB_MEMCPYKIND_HTOA || k == CUCAP_FB_MEMCPYKIND_ATOH) &&
      !rp_geometry_fits(g, size)) {
    rp_skip(R, "copy whose geometry exceeds its size");
    return;
  }
  int src_arr = k == CUCAP_FB_MEMCPYKIND_ATOH || k == CUCAP_FB_MEMCPYKIND_ATOD ||
                k == CUCAP_FB_MEMCPYKIND_ATOA;
  int dst_arr = k == CUCAP_FB_MEMCPYKIND_HTOA || k == CUCAP_FB_MEMCPYKIND_DTOA ||
                k == CUCAP_FB_MEMCPYKIND_ATOA;
  int src_host = k == CUCAP_FB_MEMCPYKIND_HTOA, dst_host = k == CUCAP_FB_MEMCPYKIND_ATOH;
  if ((src_arr && !rp_object_array(R, src)) || (dst_arr && !rp_object_array(R, dst))) {
    rp_skip(R, "copy with an unknown CUDA array");
    return;
  }
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  CUstream st = rp_stream(R, cucap_fb_memcpy_stream(c));
  void *hb = NULL;
  unsigned slot = 0;
  int kept = 0, staged = 0;
  if (!array_host_side(R, c, g, size, src_host, dst_host, &hb, &slot, &kept,
                       &staged))
    return;
  CUresult r;
  const char *what;
  if (is_1d_call(call))
    r = array_copy_1d(R, fn, k, g, src, dst, hb, size, st, &what);
  else
    r = array_copy_nd(R, fn, call, g, src_arr, dst_arr, src_host, dst_host,
                      src, dst, hb, st, &what);
  if (kept && dst_host && rp_keep(R, hb) != CUCAP_OK) {
    free(hb);
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return;
  }
  if (!rp_cu(R, r, what))
    return;
  if (staged)
    rp_stage_done(R, slot, st, fn);
  int async = cucap_fb_memcpy_async(c);
  if (dst_host && !R->capturing) {
    if (!rp_cu(R, fn->StreamSynchronize(st), "cuStreamSynchronize"))
      return;
    R->obs.op.host_data = hb; /* AtoH: for observers (verify), as a DtoH */
    R->obs.op.host_size = size;
  } else if (!async && !R->capturing && !rp_cu(R, fn->StreamSynchronize(st), "cuStreamSynchronize")) {
    return;
  }
  R->rep->executed++;
}
