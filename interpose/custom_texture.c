/* custom_texture.c - texture and surface objects and mipmapped arrays
 * (schema Object, format 1.2).
 *
 * The descriptors are stored as the driver's structs, raw: their layout is
 * part of the CUDA ABI, and the replayer (replay/replay_object.c) maps the
 * CUarray / CUmipmappedArray handles and device pointers inside them. CUDA
 * arrays themselves are Alloc records (custom_memory.c). Nothing here calls
 * the driver. */
#include <string.h>

#include "custom_internal.h"

typedef struct obj_desc {
  uint8_t kind;
  int destroyed;
  uint64_t handle, parent;
  uint32_t level;
  const void *res, *tex, *view;
  size_t res_size, tex_size, view_size;
} obj_desc;

static void object_post(cucap_call *c, CUresult r, const obj_desc *d) {
  c->stack = cucap_rec_stack_id();
  if (r != CUDA_SUCCESS)
    return; /* the replayer ignores failed calls: no body */
  cucap_fbb *b = c->b;
  /* vectors before the table */
  cucap_fb_ref res = d->res ? cucap_fb_object_create_resource(b, d->res, d->res_size) : 0;
  cucap_fb_ref tex = d->tex ? cucap_fb_object_create_texture(b, d->tex, d->tex_size) : 0;
  cucap_fb_ref view = d->view ? cucap_fb_object_create_view(b, d->view, d->view_size) : 0;
  cucap_fb_object_start(b);
  cucap_fb_object_add_kind(b, d->kind);
  if (d->destroyed)
    cucap_fb_object_add_destroyed(b, 1);
  cucap_fb_object_add_handle(b, d->handle);
  if (d->parent)
    cucap_fb_object_add_parent(b, d->parent);
  if (d->level)
    cucap_fb_object_add_level(b, d->level);
  if (res)
    cucap_fb_object_add_resource(b, res);
  if (tex)
    cucap_fb_object_add_texture(b, tex);
  if (view)
    cucap_fb_object_add_view(b, view);
  c->body = cucap_fb_object_end(b);
  c->body_type = CUCAP_FB_BODY_OBJECT;
}

/* ---- mipmapped arrays ---- */

void custom_mipmap_create(cucap_call *c, CUresult r, CUmipmappedArray *ph,
                          const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_MIPMAPPEDARRAY, .level = levels,
                .res = desc, .res_size = sizeof *desc};
  if (r == CUDA_SUCCESS && ph)
    d.handle = CX_U64(*ph);
  object_post(c, r, &d);
}

void custom_mipmap_get_level(cucap_call *c, CUresult r, CUarray *plevel,
                             CUmipmappedArray mm, unsigned int level) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_MIPMAPPEDLEVEL, .parent = CX_U64(mm),
                .level = level};
  if (r == CUDA_SUCCESS && plevel)
    d.handle = CX_U64(*plevel);
  object_post(c, r, &d);
}

void custom_mipmap_destroy(cucap_call *c, CUresult r, CUmipmappedArray mm) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_MIPMAPPEDARRAY, .destroyed = 1,
                .handle = CX_U64(mm)};
  object_post(c, r, &d);
}

/* ---- texture and surface objects ---- */

void custom_tex_object_create(cucap_call *c, CUresult r, CUtexObject *pt,
                              const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
                              const CUDA_RESOURCE_VIEW_DESC *view) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_TEXOBJECT,
                .res = res, .res_size = sizeof *res,
                .tex = tex, .tex_size = sizeof *tex,
                .view = view, .view_size = sizeof *view};
  if (r == CUDA_SUCCESS && pt)
    d.handle = (uint64_t)*pt;
  object_post(c, r, &d);
}

void custom_tex_object_destroy(cucap_call *c, CUresult r, CUtexObject t) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_TEXOBJECT, .destroyed = 1, .handle = t};
  object_post(c, r, &d);
}

void custom_surf_object_create(cucap_call *c, CUresult r, CUsurfObject *ps,
                               const CUDA_RESOURCE_DESC *res) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_SURFOBJECT, .res = res, .res_size = sizeof *res};
  if (r == CUDA_SUCCESS && ps)
    d.handle = (uint64_t)*ps;
  object_post(c, r, &d);
}

void custom_surf_object_destroy(cucap_call *c, CUresult r, CUsurfObject s) {
  obj_desc d = {.kind = CUCAP_FB_OBJECTKIND_SURFOBJECT, .destroyed = 1, .handle = s};
  object_post(c, r, &d);
}
