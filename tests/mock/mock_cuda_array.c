/* Mock driver: CUDA arrays, mipmapped arrays, texture and surface objects,
 * and the copy geometry shared by 2D/3D copies with array sides.
 *
 * Arrays live in host memory: width x max(height,1) x max(depth,1) elements
 * of format size x channels, rows packed. Only the 1-, 2- and 4-byte formats
 * (integers, half, float) are supported (others: CUDA_ERROR_NOT_SUPPORTED).
 * Texture reads are point-sampled (linear filtering reads the nearest texel:
 * the test kernels use point filtering), with the wrap/clamp/mirror/border
 * address modes, normalized coordinates and nearest-level mipmapping.
 * Texture and surface handles are numbers from a counter that starts at
 * CUCAP_MOCK_OBJ_BASE (default 0x100): a replay run with another base gets
 * other numbers than the recording, as it may on a real GPU. Host kernels
 * read textures through mock_tex_fetch and write surfaces through
 * mock_surf_write (mock_cuda_kernels.c). Arrays and objects are kept in
 * registries so that a stale handle is refused instead of dereferenced.
 * They belong to the context current at their creation: cuCtxDestroy takes
 * them along (mock_arrays_ctx_destroyed) and a later use of one aborts
 * (mock_dead_use), as for streams and modules. */
#include "mock_cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct CUarray_st {
  uint32_t magic;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  size_t esize, pitch, slice, bytes;
  uint8_t *data;
  struct CUmipmappedArray_st *parent; /* a level: freed with its parent */
  struct CUarray_st *next;
  CUcontext owner;
};

struct CUmipmappedArray_st {
  uint32_t magic;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  unsigned nlevels;
  struct CUarray_st **levels;
  struct CUmipmappedArray_st *next;
  CUcontext owner;
};

typedef struct mock_obj {
  unsigned long long handle;
  int surf;
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  CUDA_RESOURCE_VIEW_DESC view;
  int has_view;
  CUcontext owner;
} mock_obj;

static struct CUarray_st *arrays;
static struct CUmipmappedArray_st *mipmaps;
static mock_obj *objs;
static size_t nobjs, capobjs;
static unsigned long long next_obj;
/* gone with their context: shells kept (arrays: data freed) for the check */
static struct CUarray_st *dead_arrays;
static struct CUmipmappedArray_st *dead_mipmaps;
static unsigned long long *dead_objs;
static size_t ndead_objs, capdead_objs;

/* Under mock_lock: aborts if a/m/h died with its context. */
static void dead_check(CUarray a, CUmipmappedArray m, unsigned long long h) {
  for (struct CUarray_st *p = dead_arrays; a && p; p = p->next)
    if (p == a) mock_dead_use("array", a);
  for (struct CUmipmappedArray_st *p = dead_mipmaps; (a || m) && p; p = p->next) {
    if (m && p == m) mock_dead_use("mipmapped array", m);
    for (unsigned i = 0; a && i < p->nlevels; i++)
      if (p->levels[i] == a) mock_dead_use("mipmapped array level", a);
  }
  for (size_t i = 0; h && i < ndead_objs; i++)
    if (dead_objs[i] == h) mock_dead_use("texture/surface object", (const void *)(uintptr_t)h);
}

static size_t fmt_size(CUarray_format f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
  default: return 0;
  }
}

static size_t dim1(size_t v) { return v ? v : 1; }

/* Under mock_lock. */
static int array_live(CUarray a) {
  dead_check(a, NULL, 0);
  for (struct CUarray_st *p = arrays; p; p = p->next)
    if (p == a) return p->magic == MOCK_MAGIC_ARRAY;
  for (struct CUmipmappedArray_st *m = mipmaps; m; m = m->next)
    for (unsigned i = 0; i < m->nlevels; i++)
      if (m->levels[i] == a) return 1;
  return 0;
}

static int mipmap_live(CUmipmappedArray m) {
  dead_check(NULL, m, 0);
  for (struct CUmipmappedArray_st *p = mipmaps; p; p = p->next)
    if (p == m) return 1;
  return 0;
}

static CUresult array_new(const CUDA_ARRAY3D_DESCRIPTOR *d, struct CUarray_st **out) {
  size_t es = fmt_size(d->Format);
  if (!d->Width || (d->Depth && !d->Height)) return CUDA_ERROR_INVALID_VALUE;
  if (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) return CUDA_ERROR_INVALID_VALUE;
  if (!es) return CUDA_ERROR_NOT_SUPPORTED;
  if (d->Flags & ~(unsigned)(CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_TEXTURE_GATHER))
    return CUDA_ERROR_NOT_SUPPORTED;
  struct CUarray_st *a = calloc(1, sizeof *a);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  a->magic = MOCK_MAGIC_ARRAY;
  a->desc = *d;
  a->esize = es * d->NumChannels;
  a->pitch = d->Width * a->esize;
  a->slice = a->pitch * dim1(d->Height);
  a->bytes = a->slice * dim1(d->Depth);
  a->data = calloc(1, a->bytes);
  if (!a->data) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DCreate(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  MOCK_TRY(mock_need_ctx());
  if (!pa || !d) return CUDA_ERROR_INVALID_VALUE;
  struct CUarray_st *a;
  MOCK_TRY(array_new(d, &a));
  a->owner = mock_current_ctx();
  pthread_mutex_lock(&mock_lock);
  a->next = arrays;
  arrays = a;
  pthread_mutex_unlock(&mock_lock);
  *pa = a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayCreate(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR *d) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3 = {d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
  return cuArray3DCreate(pa, &d3);
}

CUresult CUDAAPI cuArrayDestroy(CUarray a) {
  MOCK_TRY(mock_need_ctx());
  pthread_mutex_lock(&mock_lock);
  dead_check(a, NULL, 0);
  struct CUarray_st **pp = &arrays;
  while (*pp && *pp != a) pp = &(*pp)->next;
  if (!*pp) { /* unknown, or a level of a mipmapped array */
    pthread_mutex_unlock(&mock_lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *pp = a->next;
  pthread_mutex_unlock(&mock_lock);
  a->magic = 0;
  free(a->data);
  free(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray a) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  int ok = array_live(a);
  pthread_mutex_unlock(&mock_lock);
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  *d = a->desc;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR *d, CUarray a) {
  CUDA_ARRAY3D_DESCRIPTOR d3;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  MOCK_TRY(cuArray3DGetDescriptor(&d3, a));
  if (d3.Depth) return CUDA_ERROR_INVALID_VALUE; /* a 3D array */
  d->Width = d3.Width;
  d->Height = d3.Height;
  d->Format = d3.Format;
  d->NumChannels = d3.NumChannels;
  return CUDA_SUCCESS;
}

/* ---- mipmapped arrays --------------------------------------------------- */

static void mipmap_free(struct CUmipmappedArray_st *m) {
  for (unsigned i = 0; i < m->nlevels; i++)
    if (m->levels[i]) {
      m->levels[i]->magic = 0;
      free(m->levels[i]->data);
      free(m->levels[i]);
    }
  free(m->levels);
  m->magic = 0;
  free(m);
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pm, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                        unsigned int levels) {
  MOCK_TRY(mock_need_ctx());
  if (!pm || !d || !levels) return CUDA_ERROR_INVALID_VALUE;
  size_t big = d->Width > d->Height ? d->Width : d->Height;
  if (d->Depth > big) big = d->Depth;
  unsigned maxl = 1;
  while ((big >> maxl) > 0) maxl++;
  if (levels > maxl) return CUDA_ERROR_INVALID_VALUE;
  struct CUmipmappedArray_st *m = calloc(1, sizeof *m);
  if (!m || !(m->levels = calloc(levels, sizeof *m->levels))) {
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  m->magic = MOCK_MAGIC_MIPMAP;
  m->desc = *d;
  m->nlevels = levels;
  for (unsigned l = 0; l < levels; l++) {
    CUDA_ARRAY3D_DESCRIPTOR ld = *d;
    ld.Width = dim1(d->Width >> l);
    ld.Height = d->Height ? dim1(d->Height >> l) : 0;
    ld.Depth = d->Depth ? dim1(d->Depth >> l) : 0;
    CUresult rc = array_new(&ld, &m->levels[l]);
    if (rc != CUDA_SUCCESS) {
      mipmap_free(m);
      return rc;
    }
    m->levels[l]->parent = m;
  }
  m->owner = mock_current_ctx();
  pthread_mutex_lock(&mock_lock);
  m->next = mipmaps;
  mipmaps = m;
  pthread_mutex_unlock(&mock_lock);
  *pm = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pa, CUmipmappedArray m, unsigned int level) {
  MOCK_TRY(mock_need_ctx());
  if (!pa) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  int ok = mipmap_live(m);
  pthread_mutex_unlock(&mock_lock);
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  if (level >= m->nlevels) return CUDA_ERROR_INVALID_VALUE;
  *pa = m->levels[level];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray m) {
  MOCK_TRY(mock_need_ctx());
  pthread_mutex_lock(&mock_lock);
  dead_check(NULL, m, 0);
  struct CUmipmappedArray_st **pp = &mipmaps;
  while (*pp && *pp != m) pp = &(*pp)->next;
  if (!*pp) {
    pthread_mutex_unlock(&mock_lock);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *pp = m->next;
  pthread_mutex_unlock(&mock_lock);
  mipmap_free(m);
  return CUDA_SUCCESS;
}

void mock_arrays_ctx_destroyed(CUcontext c) {
  pthread_mutex_lock(&mock_lock);
  for (struct CUarray_st **pp = &arrays; *pp;) {
    struct CUarray_st *a = *pp;
    if (a->owner != c) { pp = &a->next; continue; }
    *pp = a->next;
    a->magic = MOCK_MAGIC_DEAD;
    free(a->data);
    a->data = NULL;
    a->next = dead_arrays;
    dead_arrays = a;
  }
  for (struct CUmipmappedArray_st **pp = &mipmaps; *pp;) {
    struct CUmipmappedArray_st *m = *pp;
    if (m->owner != c) { pp = &m->next; continue; }
    *pp = m->next;
    m->magic = MOCK_MAGIC_DEAD;
    for (unsigned i = 0; i < m->nlevels; i++) {
      m->levels[i]->magic = MOCK_MAGIC_DEAD;
      free(m->levels[i]->data);
      m->levels[i]->data = NULL;
    }
    m->next = dead_mipmaps;
    dead_mipmaps = m;
  }
  for (size_t i = 0; i < nobjs;) {
    if (objs[i].owner != c) { i++; continue; }
    if (ndead_objs == capdead_objs) {
      size_t nc = capdead_objs ? capdead_objs * 2 : 16;
      unsigned long long *n = realloc(dead_objs, nc * sizeof *n);
      if (!n) break; /* out of memory: the rest stay (harmless for a mock) */
      dead_objs = n;
      capdead_objs = nc;
    }
    dead_objs[ndead_objs++] = objs[i].handle;
    objs[i] = objs[--nobjs];
  }
  pthread_mutex_unlock(&mock_lock);
}

/* ---- copies --------------------------------------------------------------- */

uint8_t *mock_array_at(CUarray a, size_t x, size_t y, size_t z, size_t width, size_t height,
                       size_t depth, size_t *pitch, size_t *slice) {
  pthread_mutex_lock(&mock_lock);
  int ok = array_live(a);
  pthread_mutex_unlock(&mock_lock);
  if (!ok) return NULL;
  size_t h = dim1(a->desc.Height), d = dim1(a->desc.Depth);
  if (x > a->pitch || width > a->pitch - x || y > h || dim1(height) > h - y || z > d || dim1(depth) > d - z)
    return NULL;
  *pitch = a->pitch;
  *slice = a->slice;
  return a->data + z * a->slice + y * a->pitch + x;
}

CUresult mock_array_copy1d(void *dst, CUarray da, size_t doff, const void *src, CUarray sa, size_t soff,
                           size_t n, int dst_dev, int src_dev, CUstream s) {
  MOCK_TRY(mock_check_stream(s));
  size_t p, sl;
  if (n == 0) return CUDA_SUCCESS;
  /* 1D copies see the array as its bytes in order */
  if (da) {
    pthread_mutex_lock(&mock_lock);
    int ok = array_live(da);
    pthread_mutex_unlock(&mock_lock);
    if (!ok) return CUDA_ERROR_INVALID_HANDLE;
    if (doff > da->bytes || n > da->bytes - doff) return CUDA_ERROR_INVALID_VALUE;
    dst = da->data + doff;
  }
  if (sa) {
    if (!mock_array_at(sa, 0, 0, 0, 1, 1, 1, &p, &sl)) return CUDA_ERROR_INVALID_HANDLE;
    if (soff > sa->bytes || n > sa->bytes - soff) return CUDA_ERROR_INVALID_VALUE;
    src = sa->data + soff;
  }
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  if (dst_dev && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if (src_dev && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)src, n)) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_COPY;
  op.dst = dst;
  op.src = src;
  op.width = n;
  op.height = 1;
  return mock_submit(s, &op);
}

/* One side of a 3D copy: its first byte and row/slice strides. */
static CUresult copy_side(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr, size_t x,
                          size_t y, size_t z, size_t pitch, size_t height, const CUDA_MEMCPY3D *c,
                          uint8_t **p, size_t *rp, size_t *sp) {
  size_t W = c->WidthInBytes, H = c->Height, D = dim1(c->Depth);
  if (t == CU_MEMORYTYPE_ARRAY) {
    *p = mock_array_at(arr, x, y, z, W, H, D, rp, sp);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  int is_dev;
  const uint8_t *base;
  switch (t) {
  case CU_MEMORYTYPE_HOST: base = host; is_dev = 0; break;
  case CU_MEMORYTYPE_DEVICE: base = (const uint8_t *)(uintptr_t)dev; is_dev = 1; break;
  case CU_MEMORYTYPE_UNIFIED:
    base = (const uint8_t *)(uintptr_t)dev;
    is_dev = mock_mem_type(base) == CU_MEMORYTYPE_DEVICE;
    break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  if (!base) return CUDA_ERROR_INVALID_VALUE;
  *rp = pitch ? pitch : W;
  if (*rp < W) return CUDA_ERROR_INVALID_VALUE;
  size_t h = height ? height : H;
  if (D > 1 && h < H) return CUDA_ERROR_INVALID_VALUE;
  *sp = *rp * h;
  *p = (uint8_t *)base + (z * h + y) * *rp + x;
  if (is_dev && !mock_dev_range_ok((CUdeviceptr)(uintptr_t)*p, (D - 1) * *sp + (H - 1) * *rp + W))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult mock_copy3d_op(const CUDA_MEMCPY3D *c, mock_op *op, int *empty) {
  memset(op, 0, sizeof *op);
  *empty = !c->WidthInBytes || !c->Height || !dim1(c->Depth);
  if (*empty) return CUDA_SUCCESS;
  uint8_t *s, *d;
  size_t srp, ssp, drp, dsp;
  MOCK_TRY(copy_side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
                     c->srcZ, c->srcPitch, c->srcHeight, c, &s, &srp, &ssp));
  MOCK_TRY(copy_side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY,
                     c->dstZ, c->dstPitch, c->dstHeight, c, &d, &drp, &dsp));
  op->kind = MOCK_OP_COPY;
  op->dst = d;
  op->src = s;
  op->width = c->WidthInBytes;
  op->height = c->Height;
  op->dpitch = drp;
  op->spitch = srp;
  op->depth = dim1(c->Depth);
  op->dslice = dsp;
  op->sslice = ssp;
  return CUDA_SUCCESS;
}

/* ---- texture and surface objects ---------------------------------------- */

static unsigned long long obj_next(void) {
  if (!next_obj) {
    const char *e = getenv("CUCAP_MOCK_OBJ_BASE");
    next_obj = e && *e ? strtoull(e, NULL, 0) : 0x100;
    if (!next_obj) next_obj = 1;
  }
  return next_obj++;
}

static CUresult res_check(const CUDA_RESOURCE_DESC *r, int surf) {
  if (r->flags) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  int ok = 0;
  switch (r->resType) {
  case CU_RESOURCE_TYPE_ARRAY:
    ok = array_live(r->res.array.hArray) &&
         (!surf || (r->res.array.hArray->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST));
    break;
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
    ok = !surf && mipmap_live(r->res.mipmap.hMipmappedArray);
    break;
  default:
    break;
  }
  pthread_mutex_unlock(&mock_lock);
  /* device memory (the replay must have relocated it); mock_dev_range_ok locks */
  if (r->resType == CU_RESOURCE_TYPE_LINEAR)
    ok = !surf && fmt_size(r->res.linear.format) &&
         mock_dev_range_ok(r->res.linear.devPtr, r->res.linear.sizeInBytes);
  else if (r->resType == CU_RESOURCE_TYPE_PITCH2D)
    ok = !surf && fmt_size(r->res.pitch2D.format) && r->res.pitch2D.height &&
         mock_dev_range_ok(r->res.pitch2D.devPtr, r->res.pitch2D.pitchInBytes * r->res.pitch2D.height);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult obj_create(unsigned long long *out, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *t,
                           const CUDA_RESOURCE_VIEW_DESC *v, int surf) {
  MOCK_TRY(mock_need_ctx());
  if (!out || !r || (!surf && !t)) return CUDA_ERROR_INVALID_VALUE;
  MOCK_TRY(res_check(r, surf));
  pthread_mutex_lock(&mock_lock);
  if (nobjs == capobjs) {
    size_t nc = capobjs ? capobjs * 2 : 16;
    mock_obj *n = realloc(objs, nc * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&mock_lock);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    objs = n;
    capobjs = nc;
  }
  mock_obj *o = &objs[nobjs++];
  memset(o, 0, sizeof *o);
  o->handle = obj_next();
  o->surf = surf;
  o->owner = mock_current_ctx();
  o->res = *r;
  if (t) o->tex = *t;
  if (v) {
    o->view = *v;
    o->has_view = 1;
  }
  *out = o->handle;
  pthread_mutex_unlock(&mock_lock);
  return CUDA_SUCCESS;
}

/* Copies the object out (under the lock); 0 if there is no such object. */
static int obj_get(unsigned long long h, int surf, mock_obj *out) {
  int found = 0;
  pthread_mutex_lock(&mock_lock);
  dead_check(NULL, NULL, h);
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].handle == h && objs[i].surf == surf) {
      *out = objs[i];
      found = 1;
      break;
    }
  pthread_mutex_unlock(&mock_lock);
  return found;
}

static CUresult obj_destroy(unsigned long long h, int surf) {
  MOCK_TRY(mock_need_ctx());
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mock_lock);
  dead_check(NULL, NULL, h);
  for (size_t i = 0; i < nobjs; i++)
    if (objs[i].handle == h && objs[i].surf == surf) {
      objs[i] = objs[--nobjs];
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&mock_lock);
  return rc;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pt, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *t,
                                   const CUDA_RESOURCE_VIEW_DESC *v) {
  return obj_create(pt, r, t, v, 0);
}
CUresult CUDAAPI cuTexObjectDestroy(CUtexObject t) { return obj_destroy(t, 0); }
CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *ps, const CUDA_RESOURCE_DESC *r) {
  return obj_create(ps, r, NULL, NULL, 1);
}
CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject s) { return obj_destroy(s, 1); }

CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *r, CUtexObject t) {
  mock_obj o;
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  if (!obj_get(t, 0, &o)) return CUDA_ERROR_INVALID_VALUE;
  *r = o.res;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *d, CUtexObject t) {
  mock_obj o;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!obj_get(t, 0, &o)) return CUDA_ERROR_INVALID_VALUE;
  *d = o.tex;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *v, CUtexObject t) {
  mock_obj o;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (!obj_get(t, 0, &o) || !o.has_view) return CUDA_ERROR_INVALID_VALUE;
  *v = o.view;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *r, CUsurfObject s) {
  mock_obj o;
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  if (!obj_get(s, 1, &o)) return CUDA_ERROR_INVALID_VALUE;
  *r = o.res;
  return CUDA_SUCCESS;
}

/* ---- texel access for host kernels -------------------------------------- */

/* Texel index along one dimension of extent n; -1 = outside (border). */
static long texel(float c, size_t n, int normalized, CUaddress_mode m) {
  double v = normalized ? (double)c * (double)n : (double)c;
  long i = (long)floor(v);
  long N = (long)n;
  switch (m) {
  case CU_TR_ADDRESS_MODE_WRAP:
    if (normalized) return ((i % N) + N) % N;
    return i < 0 ? 0 : i >= N ? N - 1 : i; /* wrap needs normalized coords: clamp */
  case CU_TR_ADDRESS_MODE_MIRROR:
    if (normalized) {
      long p = ((i % (2 * N)) + 2 * N) % (2 * N);
      return p < N ? p : 2 * N - 1 - p;
    }
    return i < 0 ? 0 : i >= N ? N - 1 : i;
  case CU_TR_ADDRESS_MODE_BORDER:
    return i < 0 || i >= N ? -1 : i;
  case CU_TR_ADDRESS_MODE_CLAMP:
  default:
    return i < 0 ? 0 : i >= N ? N - 1 : i;
  }
}

int mock_tex_fetch(unsigned long long tex, float x, float y, float z, float lod, void *out, size_t out_size) {
  memset(out, 0, out_size);
  mock_obj o;
  if (!obj_get(tex, 0, &o)) return 0;
  const uint8_t *base = NULL;
  size_t es = 0, w = 0, h = 0, d = 0, pitch = 0, slice = 0;
  CUarray a = NULL;
  switch (o.res.resType) {
  case CU_RESOURCE_TYPE_LINEAR: { /* tex1Dfetch: an element index, no modes */
    es = fmt_size(o.res.res.linear.format) * o.res.res.linear.numChannels;
    if (!es) return 0;
    long i = (long)x;
    if (i < 0 || (size_t)(i + 1) * es > o.res.res.linear.sizeInBytes) return 1;
    memcpy(out, (const uint8_t *)(uintptr_t)o.res.res.linear.devPtr + (size_t)i * es, es < out_size ? es : out_size);
    return 1;
  }
  case CU_RESOURCE_TYPE_PITCH2D:
    es = fmt_size(o.res.res.pitch2D.format) * o.res.res.pitch2D.numChannels;
    base = (const uint8_t *)(uintptr_t)o.res.res.pitch2D.devPtr;
    w = o.res.res.pitch2D.width;
    h = o.res.res.pitch2D.height;
    pitch = o.res.res.pitch2D.pitchInBytes;
    slice = pitch * h;
    break;
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
    CUmipmappedArray m = o.res.res.mipmap.hMipmappedArray;
    pthread_mutex_lock(&mock_lock);
    int ok = mipmap_live(m);
    pthread_mutex_unlock(&mock_lock);
    if (!ok) return 0;
    float l = lod + o.tex.mipmapLevelBias;
    if (l > o.tex.maxMipmapLevelClamp) l = o.tex.maxMipmapLevelClamp;
    if (l < o.tex.minMipmapLevelClamp) l = o.tex.minMipmapLevelClamp;
    long li = (long)floorf(l + 0.5f); /* nearest level */
    if (li < 0) li = 0;
    if ((unsigned long)li >= m->nlevels) li = (long)m->nlevels - 1;
    a = m->levels[li];
    break;
  }
  case CU_RESOURCE_TYPE_ARRAY:
    a = o.res.res.array.hArray;
    break;
  default:
    return 0;
  }
  if (a) {
    if (!mock_array_at(a, 0, 0, 0, 1, 1, 1, &pitch, &slice)) return 0;
    es = a->esize;
    base = a->data;
    w = a->desc.Width;
    h = a->desc.Height;
    d = a->desc.Depth;
  }
  int norm = (o.tex.flags & CU_TRSF_NORMALIZED_COORDINATES) != 0;
  long ix = texel(x, w, norm, o.tex.addressMode[0]);
  long iy = h ? texel(y, h, norm, o.tex.addressMode[1]) : 0;
  long iz = d ? texel(z, d, norm, o.tex.addressMode[2]) : 0;
  if (ix < 0 || iy < 0 || iz < 0) { /* border: the border color for float data */
    if (out_size >= sizeof(float)) memcpy(out, o.tex.borderColor, out_size < 16 ? out_size : 16);
    return 1;
  }
  memcpy(out, base + (size_t)iz * slice + (size_t)iy * pitch + (size_t)ix * es, es < out_size ? es : out_size);
  return 1;
}

int mock_surf_write(unsigned long long surf, const void *val, size_t size, int x, int y, int z) {
  mock_obj o;
  size_t pitch, slice;
  if (!obj_get(surf, 1, &o) || x < 0 || y < 0 || z < 0) return 0;
  uint8_t *p = mock_array_at(o.res.res.array.hArray, (size_t)x, (size_t)y, (size_t)z, size, 1, 1, &pitch, &slice);
  if (!p) return 0; /* the real default boundary mode traps; the mock drops it */
  memcpy(p, val, size);
  return 1;
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc mock_procs_array[] = {
  P(cuArrayCreate, 3020), P(cuArray3DCreate, 3020), P(cuArrayDestroy, 2000), P(cuArrayGetDescriptor, 3020),
  P(cuArray3DGetDescriptor, 3020), P(cuMipmappedArrayCreate, 5000), P(cuMipmappedArrayGetLevel, 5000),
  P(cuMipmappedArrayDestroy, 5000), P(cuTexObjectCreate, 5000), P(cuTexObjectDestroy, 5000),
  P(cuTexObjectGetResourceDesc, 5000), P(cuTexObjectGetTextureDesc, 5000),
  P(cuTexObjectGetResourceViewDesc, 5000), P(cuSurfObjectCreate, 5000), P(cuSurfObjectDestroy, 5000),
  P(cuSurfObjectGetResourceDesc, 5000),
  {NULL, 0, NULL}};
#undef P
