/* replay_object.c - CUDA arrays, mipmapped arrays, texture and surface
 * objects: the one recorded -> live handle map of the replay, and the places
 * where a program passes or stores such handles.
 *
 * Object handles are new numbers in the replay process. Arrays and mipmapped
 * arrays only ever travel through driver calls (copies, resource
 * descriptors), where they are mapped here. Texture and surface objects
 * (64-bit CUtexObject/CUsurfObject) are also kernel parameters and data: a
 * bindless-texture program uploads them into device memory or into an array
 * and kernels read them from there. Created in the same order in a fresh
 * context, the driver usually hands out the same numbers, and then nothing
 * is rewritten. Where a live handle differs from the recorded one, the pair
 * goes into `moved`, and
 *  - 8-byte, 8-aligned kernel parameters holding a recorded value are
 *    rewritten (rp_object_patch_params, counted in patched_params);
 *  - 8-aligned words of uploaded host data (HtoD, HtoA and 2D/3D copies from
 *    the host) holding a recorded value are rewritten
 *    (rp_object_patch_upload, counted in patched_handles, with a warning: a
 *    value that merely equals a recorded handle is rewritten too);
 *  - verification accepts the live value where the recording has the
 *    recorded one (rp_object_fix_expected), so that reading the handles back
 *    still verifies.
 * Descriptors are the driver's structs as raw bytes (schema Object). */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"

/* OWN_LEVEL: a mipmapped array's level, noted for its context only (its
 * parent frees it) */
enum { OWN_ARRAY, OWN_MIPMAP, OWN_TEX, OWN_SURF, OWN_LEVEL };

typedef struct rp_own_entry { /* an object this replay made and must destroy */
  int kind;
  uint64_t rec, live;
  uint64_t ctx;      /* live context it belongs to: gone with it */
  uint64_t parent;   /* OWN_LEVEL: the recorded mipmapped array */
} rp_own_entry;

struct rp_objects {
  cucap_map array;      /* recorded CUarray -> live (created and mipmap levels) */
  cucap_map mipmap;     /* recorded CUmipmappedArray -> live */
  cucap_map tex, surf;  /* recorded CUtexObject / CUsurfObject -> live */
  cucap_map moved;      /* recorded tex/surf handle -> live, where they differ */
  cucap_map clash;      /* recorded values claimed by two objects: never rewritten */
  rp_own_entry *own;     /* in creation order */
  size_t nown, capown;
  int warned_upload, warned_moved;
};

static struct rp_objects *objs(rp_state *R) {
  if (!R->obj)
    R->obj = calloc(1, sizeof *R->obj);
  if (!R->obj)
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
  return R->obj;
}

static cucap_map *own_map(struct rp_objects *O, int kind) {
  switch (kind) {
  case OWN_ARRAY:
  case OWN_LEVEL: return &O->array;
  case OWN_MIPMAP: return &O->mipmap;
  case OWN_TEX: return &O->tex;
  default: return &O->surf;
  }
}

static cucap_status own_add(rp_state *R, struct rp_objects *O, int kind, uint64_t rec,
                            uint64_t live) {
  if (!CUCAP_VEC_RESERVE(O->own, O->capown, O->nown + 1, 16)) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  rp_own_entry *o = &O->own[O->nown++];
  o->kind = kind;
  o->rec = rec;
  o->live = live;
  o->ctx = (uint64_t)(uintptr_t)R->cx.cur;
  o->parent = 0;
  return CUCAP_OK;
}

/* Forgets the newest object of that kind and recorded handle; its live
 * handle, 0 if none. */
static uint64_t own_del(struct rp_objects *O, int kind, uint64_t rec) {
  for (size_t i = O->nown; i-- > 0;)
    if (O->own[i].kind == kind && O->own[i].rec == rec) {
      uint64_t live = O->own[i].live;
      memmove(&O->own[i], &O->own[i + 1], (O->nown - i - 1) * sizeof *O->own);
      O->nown--;
      return live;
    }
  return 0;
}

uint64_t rp_object_array(rp_state *R, uint64_t recorded) {
  uint64_t v = 0;
  if (R->obj)
    cucap_map_get(&R->obj->array, recorded, &v);
  return v;
}

uint64_t rp_object_mipmap(rp_state *R, uint64_t recorded) {
  uint64_t v = 0;
  if (R->obj)
    cucap_map_get(&R->obj->mipmap, recorded, &v);
  return v;
}

cucap_status rp_object_array_put(rp_state *R, uint64_t recorded, uint64_t live, int owned) {
  struct rp_objects *O = objs(R);
  CUCAP_RETURN_IF(!O, CUCAP_ERR_NOMEM);
  if (owned)
    CUCAP_FORWARD(own_add(R, O, OWN_ARRAY, recorded, live));
  if (!cucap_map_put(&O->array, recorded, live)) {
    if (owned)
      own_del(O, OWN_ARRAY, recorded); /* the caller destroys it */
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  return CUCAP_OK;
}

uint64_t rp_object_array_del(rp_state *R, uint64_t recorded) {
  if (!R->obj)
    return 0;
  cucap_map_del(&R->obj->array, recorded, NULL);
  return own_del(R->obj, OWN_ARRAY, recorded);
}

size_t rp_object_context_gone(rp_state *R, uint64_t ctx) {
  struct rp_objects *O = R->obj;
  if (!O)
    return 0;
  size_t k = 0;
  for (size_t i = 0; i < O->nown; i++) {
    if (O->own[i].ctx == ctx) /* destroyed with its context */
      cucap_map_del(own_map(O, O->own[i].kind), O->own[i].rec, NULL);
    else
      O->own[k++] = O->own[i];
  }
  size_t gone = O->nown - k;
  O->nown = k;
  return gone;
}

/* Notes the live tex/surf handle of a recorded one. */
static void note_handle(struct rp_objects *O, int tex, uint64_t rec,
                        uint64_t live) {
  const char *what = tex ? "texture" : "surface";
  uint64_t other;
  if (cucap_map_get(tex ? &O->surf : &O->tex, rec, &other) && other != live) {
    /* a live texture and a live surface recorded with the same value but
     * replayed with different ones: which one a stored value means is unknown */
    cucap_map_put(&O->clash, rec, 1);
    CUCAP_WARN("replay: texture and surface objects both recorded as 0x%" PRIx64
               " differ in this replay; values equal to it are not rewritten", rec);
  }
  if (rec == live) {
    cucap_map_del(&O->moved, rec, NULL);
    return;
  }
  cucap_map_put(&O->moved, rec, live);
  if (!O->warned_moved++)
    CUCAP_INFO("replay: %s object 0x%" PRIx64 " is 0x%" PRIx64 " in this replay; "
               "kernel parameters and uploaded data holding it are rewritten",
               what, rec, live);
  else
    CUCAP_DEBUG("replay: %s object 0x%" PRIx64 " is 0x%" PRIx64, what, rec, live);
}

static int moved(const struct rp_objects *O, uint64_t v, uint64_t *live) {
  return v > 0 && O->moved.count && cucap_map_get(&O->moved, v, live) &&
         !cucap_map_get(&O->clash, v, NULL);
}

/* ---------------------------------------------------------------- Object */

/* Copies a recorded descriptor into a zeroed struct of `size` bytes; 0 when
 * absent or too short to hold the fields that matter (`need`). */
static int desc_copy(void *dst, size_t size, const uint8_t *src, size_t n, size_t need) {
  memset(dst, 0, size);
  if (!src || n < need)
    return 0;
  memcpy(dst, src, n < size ? n : size);
  return 1;
}

/* Maps the array/mipmap handle or device pointer of a resource descriptor;
 * NULL on success, else why it cannot be. */
static const char *map_resource(rp_state *R, CUDA_RESOURCE_DESC *rd) {
  switch (rd->resType) {
  case CU_RESOURCE_TYPE_ARRAY: {
    uint64_t live = rp_object_array(R, (uint64_t)(uintptr_t)rd->res.array.hArray);
    if (!live)
      return "texture/surface on an unknown CUDA array";
    rd->res.array.hArray = (CUarray)(uintptr_t)live;
    return NULL;
  }
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
    uint64_t live = rp_object_mipmap(R, (uint64_t)(uintptr_t)rd->res.mipmap.hMipmappedArray);
    if (!live)
      return "texture on an unknown mipmapped array";
    rd->res.mipmap.hMipmappedArray = (CUmipmappedArray)(uintptr_t)live;
    return NULL;
  }
  case CU_RESOURCE_TYPE_LINEAR:
    rd->res.linear.devPtr = rp_tr(R, rd->res.linear.devPtr);
    return NULL;
  case CU_RESOURCE_TYPE_PITCH2D:
    rd->res.pitch2D.devPtr = rp_tr(R, rd->res.pitch2D.devPtr);
    return NULL;
  default:
    return "texture/surface with an unknown resource type";
  }
}

/* obj_create, a mipmapped array (owned by the replay). 0 when skipped or
 * failed (reported). */
static int obj_create_mipmap(rp_state *R, const cucap_fb_object *o, struct rp_objects *O,
                             uint64_t h, const uint8_t *rb, size_t rn) {
  const rp_fns *d = &R->d.df;
  CUDA_ARRAY3D_DESCRIPTOR ad;
  CUmipmappedArray live = NULL;
  if (!d->MipmappedArrayCreate) {
    rp_skip(R, "cuMipmappedArrayCreate (driver lacks it)");
    return 0;
  }
  if (!desc_copy(&ad, sizeof ad, rb, rn, sizeof ad)) {
    rp_skip(R, "cuMipmappedArrayCreate (descriptor missing)");
    return 0;
  }
  if (!rp_cu(R, d->MipmappedArrayCreate(&live, &ad, cucap_fb_object_level(o)),
             "cuMipmappedArrayCreate"))
    return 0;
  if (own_add(R, O, OWN_MIPMAP, h, (uint64_t)(uintptr_t)live) != CUCAP_OK)
    return 0;
  if (!cucap_map_put(&O->mipmap, h, (uint64_t)(uintptr_t)live)) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return 0;
  }
  return 1;
}

/* obj_create, a level of a mipmapped array (owned by its parent). */
static int obj_create_level(rp_state *R, const cucap_fb_object *o, struct rp_objects *O,
                            uint64_t h) {
  const rp_fns *d = &R->d.df;
  uint64_t parent = rp_object_mipmap(R, cucap_fb_object_parent(o));
  CUarray live = NULL;
  if (!parent || !d->MipmappedArrayGetLevel) {
    rp_skip(R, "cuMipmappedArrayGetLevel (unknown mipmapped array)");
    return 0;
  }
  if (!rp_cu(R, d->MipmappedArrayGetLevel(&live, (CUmipmappedArray)(uintptr_t)parent,
                                          cucap_fb_object_level(o)),
             "cuMipmappedArrayGetLevel"))
    return 0;
  if (rp_object_array_put(R, h, (uint64_t)(uintptr_t)live, 0) != CUCAP_OK) /* owned by its parent */
    return 0;
  if (own_add(R, O, OWN_LEVEL, h, (uint64_t)(uintptr_t)live) != CUCAP_OK) /* its context */
    return 0;
  O->own[O->nown - 1].parent = cucap_fb_object_parent(o);
  return 1;
}

/* obj_create, a texture or surface object on its resource, mapped to
 * live handles. */
static int obj_create_texsurf(rp_state *R, const cucap_fb_object *o, struct rp_objects *O,
                              uint64_t h, const uint8_t *rb, size_t rn,
                              int kind) {
  const rp_fns *d = &R->d.df;
  int tex = kind == CUCAP_FB_OBJECTKIND_TEXOBJECT;
  size_t tn = 0, vn = 0;
  const uint8_t *tb = cucap_fb_object_texture(o, &tn);
  const uint8_t *vb = cucap_fb_object_view(o, &vn);
  const char *name = tex ? "cuTexObjectCreate" : "cuSurfObjectCreate";
  CUDA_RESOURCE_DESC rd;
  CUDA_TEXTURE_DESC td;
  CUDA_RESOURCE_VIEW_DESC vd;
  /* the handle or pointer of the resource plus its type must be there */
  if (!desc_copy(&rd, sizeof rd, rb, rn, offsetof(CUDA_RESOURCE_DESC, res) + 8) ||
      (tex && !desc_copy(&td, sizeof td, tb, tn, offsetof(CUDA_TEXTURE_DESC, maxMipmapLevelClamp) + 4))) {
    rp_skip(R, tex ? "cuTexObjectCreate (descriptor missing)"
                   : "cuSurfObjectCreate (descriptor missing)");
    return 0;
  }
  int have_view = tex && desc_copy(&vd, sizeof vd, vb, vn, offsetof(CUDA_RESOURCE_VIEW_DESC, lastLayer) + 4);
  const char *why = map_resource(R, &rd);
  if (why) {
    rp_skip(R, why);
    return 0;
  }
  CUresult r;
  uint64_t live = 0;
  if (tex) {
    CUtexObject t = 0;
    r = d->TexObjectCreate ? d->TexObjectCreate(&t, &rd, &td, have_view ? &vd : NULL)
                           : CUDA_ERROR_NOT_FOUND;
    live = t;
  } else {
    CUsurfObject s = 0;
    r = d->SurfObjectCreate ? d->SurfObjectCreate(&s, &rd) : CUDA_ERROR_NOT_FOUND;
    live = s;
  }
  if (!rp_cu(R, r, name))
    return 0;
  if (own_add(R, O, tex ? OWN_TEX : OWN_SURF, h, live) != CUCAP_OK)
    return 0;
  if (!cucap_map_put(tex ? &O->tex : &O->surf, h, live)) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return 0;
  }
  note_handle(O, tex, h, live);
  return 1;
}

static void obj_create(rp_state *R, const cucap_fb_record *rec, const cucap_fb_object *o,
                       struct rp_objects *O) {
  int kind = cucap_fb_object_kind(o);
  uint64_t h = cucap_fb_object_handle(o);
  size_t rn = 0;
  const uint8_t *rb = cucap_fb_object_resource(o, &rn);
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  switch (kind) {
  case CUCAP_FB_OBJECTKIND_MIPMAPPEDARRAY:
    if (!obj_create_mipmap(R, o, O, h, rb, rn))
      return;
    break;
  case CUCAP_FB_OBJECTKIND_MIPMAPPEDLEVEL:
    if (!obj_create_level(R, o, O, h))
      return;
    break;
  case CUCAP_FB_OBJECTKIND_TEXOBJECT:
  case CUCAP_FB_OBJECTKIND_SURFOBJECT:
    if (!obj_create_texsurf(R, o, O, h, rb, rn, kind))
      return;
    break;
  default:
    rp_skip(R, "unknown object kind");
    return;
  }
  R->rep->executed++;
}

static void levels_gone(struct rp_objects *O, uint64_t parent) {
  size_t k = 0;
  for (size_t i = 0; i < O->nown; i++) {
    if (O->own[i].kind == OWN_LEVEL && O->own[i].parent == parent)
      cucap_map_del(&O->array, O->own[i].rec, NULL);
    else
      O->own[k++] = O->own[i];
  }
  O->nown = k;
}

static void obj_destroy(rp_state *R, const cucap_fb_record *rec, const cucap_fb_object *o,
                        struct rp_objects *O) {
  const rp_fns *d = &R->d.df;
  uint64_t h = cucap_fb_object_handle(o), live = 0;
  rp_ctx_rec(R, rec);
  switch (cucap_fb_object_kind(o)) {
  case CUCAP_FB_OBJECTKIND_TEXOBJECT:
    cucap_map_del(&O->tex, h, NULL);
    if ((live = own_del(O, OWN_TEX, h)) && d->TexObjectDestroy)
      d->TexObjectDestroy((CUtexObject)live);
    break;
  case CUCAP_FB_OBJECTKIND_SURFOBJECT:
    cucap_map_del(&O->surf, h, NULL);
    if ((live = own_del(O, OWN_SURF, h)) && d->SurfObjectDestroy)
      d->SurfObjectDestroy((CUsurfObject)live);
    break;
  case CUCAP_FB_OBJECTKIND_MIPMAPPEDARRAY:
    cucap_map_del(&O->mipmap, h, NULL);
    if ((live = own_del(O, OWN_MIPMAP, h)) && d->MipmappedArrayDestroy)
      d->MipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)live);
    levels_gone(O, h); /* its levels went with it */
    break;
  default:
    R->rep->ignored++;
    return;
  }
  /* `moved` keeps its entry: data read back later may still hold the value */
  R->rep->executed++;
}

void rp_object_execute(rp_state *R, const cucap_fb_record *rec, const cucap_fb_object *o) {
  struct rp_objects *O = objs(R);
  if (!O || !o)
    return;
  if (cucap_fb_object_destroyed(o))
    obj_destroy(R, rec, o, O);
  else
    obj_create(R, rec, o, O);
}

/* ---------------------------------------------------------------- handles */

void rp_object_patch_params(rp_state *R, const rp_func *fi, uint8_t *args, size_t n) {
  const struct rp_objects *O = R->obj;
  if (!O || !O->moved.count)
    return;
  for (size_t i = 0; i < fi->nparams; i++) {
    uint32_t off = fi->params[i].offset;
    uint64_t v, live;
    if (fi->params[i].size != 8 || off % 8 || off + 8 > n)
      continue;
    memcpy(&v, args + off, 8);
    if (moved(O, v, &live)) {
      memcpy(args + off, &live, 8);
      R->rep->patched_params++;
    }
  }
}

void rp_object_patch_upload(rp_state *R, void *buf, uint64_t size, uint64_t first_addr,
                            uint64_t row) {
  struct rp_objects *O = R->obj;
  if (!O || !O->moved.count || first_addr % 8 || (row && row < size && row % 8))
    return; /* words that do not land 8-aligned cannot be handles */
  uint8_t *p = buf;
  uint64_t n = 0;
  for (uint64_t off = 0; off + 8 <= size; off += 8) {
    uint64_t v, live;
    memcpy(&v, p + off, 8);
    if (moved(O, v, &live)) {
      memcpy(p + off, &live, 8);
      n++;
    }
  }
  if (!n)
    return;
  R->rep->patched_handles += n;
  if (!O->warned_upload++)
    CUCAP_WARN("replay: record %" PRIu64 ": %" PRIu64 " texture/surface handle "
               "value(s) in uploaded data rewritten to this replay's handles (an "
               "8-byte value that merely equals a recorded handle is rewritten too; "
               "the total is in the report)", R->rec_index, n);
}

void rp_object_fix_expected(rp_state *R, const void *got, void *want, uint64_t size,
                            uint64_t addr) {
  const struct rp_objects *O = R->obj;
  if (!O || !O->moved.count)
    return;
  const uint8_t *g = got;
  uint8_t *w = want;
  for (uint64_t off = (8 - addr % 8) % 8; off + 8 <= size; off += 8) {
    uint64_t x, y, live;
    memcpy(&x, w + off, 8);
    memcpy(&y, g + off, 8);
    if (x != y && moved(O, x, &live) && live == y)
      memcpy(w + off, &y, 8);
  }
}

/* ---------------------------------------------------------------- teardown */

void rp_object_destroy_live(rp_state *R) {
  struct rp_objects *O = R->obj;
  if (!O)
    return;
  const rp_fns *d = &R->d.df;
  for (size_t i = O->nown; R->d.lib && i-- > 0;) { /* newest first: objects before their arrays */
    const rp_own_entry *o = &O->own[i];
    CUcontext c = (CUcontext)(uintptr_t)o->ctx; /* destroyed in their (live) context */
    if (o->kind != OWN_LEVEL && c && c != R->cx.cur && d->CtxSetCurrent(c) == CUDA_SUCCESS)
      R->cx.cur = c;
    switch (o->kind) {
    case OWN_TEX:
      if (d->TexObjectDestroy)
        d->TexObjectDestroy((CUtexObject)o->live);
      break;
    case OWN_SURF:
      if (d->SurfObjectDestroy)
        d->SurfObjectDestroy((CUsurfObject)o->live);
      break;
    case OWN_MIPMAP:
      if (d->MipmappedArrayDestroy)
        d->MipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)o->live);
      break;
    case OWN_LEVEL: /* freed with its mipmapped array */
      break;
    default:
      if (d->ArrayDestroy)
        d->ArrayDestroy((CUarray)(uintptr_t)o->live);
      break;
    }
  }
  free(O->own);
  cucap_map *maps[] = {&O->array, &O->mipmap, &O->tex, &O->surf, &O->moved, &O->clash};
  for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
    cucap_map_free(maps[i]);
  free(O);
  R->obj = NULL;
}
