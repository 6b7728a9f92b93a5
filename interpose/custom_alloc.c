/* custom_alloc.c - allocation and free hooks: the tracker learns every
 * device, page-locked host, managed, virtual-memory and pool range (and
 * forgets it at its free), and the records carry what a replay needs to
 * place the range again at its recorded address.
 *
 * Stream-ordered allocations and frees enqueued into a capturing stream are
 * graph memory nodes, not allocations now: the tracker does not see them. */
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

/* ------------------------------------------------------------ allocations */

static int kind_is_device(uint8_t k) {
  switch (k) {
  case CUCAP_FB_ALLOCKIND_DEVICE:
  case CUCAP_FB_ALLOCKIND_PITCH:
  case CUCAP_FB_ALLOCKIND_MANAGED:
  case CUCAP_FB_ALLOCKIND_ASYNC:
  case CUCAP_FB_ALLOCKIND_FROMPOOL:
  case CUCAP_FB_ALLOCKIND_VMMMAP:
    return 1;
  default:
    return 0;
  }
}

typedef struct alloc_desc {
  uint8_t kind;
  uint64_t address, size, flags, pitch, stream, pool, handle, host_address;
  uint64_t width, height;
  uint32_t elem_size;
  int device;
} alloc_desc;

static void alloc_post(cucap_call *c, CUresult r, const alloc_desc *d, int track) {
  if (r != CUDA_SUCCESS)
    return;
  c->stack = cucap_rec_stack_id();
  /* cuMemAllocAsync into a capturing stream: a graph mem-alloc node, whose
   * memory exists only while an instance of the graph runs */
  if (track && (d->kind == CUCAP_FB_ALLOCKIND_ASYNC || d->kind == CUCAP_FB_ALLOCKIND_FROMPOOL) &&
      cx_stream_capturing((CUstream)(uintptr_t)d->stream, c->variant))
    track = 0;
  if (track && d->kind == CUCAP_FB_ALLOCKIND_MANAGED)
    cx_managed_add(d->address, d->size);
  if (track) {
    cucap_tracked_alloc a = {d->address, d->size, d->flags, d->kind,
                             (uint8_t)kind_is_device(d->kind), cx_current_ctx()};
    if (cucap_tracker_alloc_add(cx_tracker(), &a) != CUCAP_OK)
      CUCAP_WARN("allocation tracking failed (OOM)");
    cx_snapshot_init();
  }
  cucap_fbb *b = c->b;
  cucap_fb_alloc_start(b);
  cucap_fb_alloc_add_kind(b, d->kind);
  cucap_fb_alloc_add_address(b, d->address);
  cucap_fb_alloc_add_size(b, d->size);
  if (d->flags)
    cucap_fb_alloc_add_flags(b, d->flags);
  if (d->pitch)
    cucap_fb_alloc_add_pitch(b, d->pitch);
  if (d->stream)
    cucap_fb_alloc_add_stream(b, d->stream);
  if (d->pool)
    cucap_fb_alloc_add_pool(b, d->pool);
  if (d->handle)
    cucap_fb_alloc_add_handle(b, d->handle);
  if (d->device)
    cucap_fb_alloc_add_device(b, d->device);
  if (d->host_address)
    cucap_fb_alloc_add_host_address(b, d->host_address);
  if (d->width)
    cucap_fb_alloc_add_width(b, d->width);
  if (d->height)
    cucap_fb_alloc_add_height(b, d->height);
  if (d->elem_size)
    cucap_fb_alloc_add_elem_size(b, d->elem_size);
  c->body = cucap_fb_alloc_end(b);
  c->body_type = CUCAP_FB_BODY_ALLOC;
}

void custom_mem_alloc(cucap_call *c, CUresult r, CUdeviceptr *dptr, size_t bytesize) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_DEVICE, .size = bytesize};
  if (r == CUDA_SUCCESS && dptr)
    d.address = *dptr;
  alloc_post(c, r, &d, 1);
}

void custom_mem_alloc_pitch(cucap_call *c, CUresult r, CUdeviceptr *dptr, size_t *pPitch,
                            size_t width, size_t height, unsigned int elem) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_PITCH, .width = width, .height = height,
                  .elem_size = elem};
  if (r == CUDA_SUCCESS && dptr && pPitch) {
    d.address = *dptr;
    d.pitch = *pPitch;
    d.size = (uint64_t)*pPitch * height;
  }
  alloc_post(c, r, &d, 1);
}

void custom_mem_alloc_managed(cucap_call *c, CUresult r, CUdeviceptr *dptr,
                              size_t bytesize, unsigned int flags) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_MANAGED, .size = bytesize, .flags = flags};
  if (r == CUDA_SUCCESS && dptr)
    d.address = *dptr;
  alloc_post(c, r, &d, 1);
}

void custom_mem_alloc_host(cucap_call *c, CUresult r, void **pp, size_t bytesize) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_HOST, .size = bytesize};
  if (r == CUDA_SUCCESS && pp)
    d.address = d.host_address = CX_U64(*pp);
  alloc_post(c, r, &d, 1);
}

void custom_mem_host_alloc(cucap_call *c, CUresult r, void **pp, size_t bytesize,
                           unsigned int flags) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_HOSTALLOC, .size = bytesize, .flags = flags};
  if (r == CUDA_SUCCESS && pp)
    d.address = d.host_address = CX_U64(*pp);
  alloc_post(c, r, &d, 1);
}

void custom_mem_host_register(cucap_call *c, CUresult r, void *p, size_t bytesize,
                              unsigned int flags) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_HOSTREGISTER, .size = bytesize,
                  .flags = flags, .address = CX_U64(p), .host_address = CX_U64(p)};
  alloc_post(c, r, &d, 1);
}

void custom_mem_alloc_async(cucap_call *c, CUresult r, CUdeviceptr *dptr,
                            size_t bytesize, CUstream s) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_ASYNC, .size = bytesize, .stream = CX_U64(s)};
  if (r == CUDA_SUCCESS && dptr)
    d.address = *dptr;
  alloc_post(c, r, &d, 1);
}

void custom_mem_alloc_from_pool(cucap_call *c, CUresult r, CUdeviceptr *dptr,
                                size_t bytesize, CUmemoryPool pool, CUstream s) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_FROMPOOL, .size = bytesize,
                  .stream = CX_U64(s), .pool = CX_U64(pool)};
  if (r == CUDA_SUCCESS && dptr)
    d.address = *dptr;
  alloc_post(c, r, &d, 1);
}

void custom_mem_create(cucap_call *c, CUresult r, CUmemGenericAllocationHandle *handle,
                       size_t size, const CUmemAllocationProp *prop,
                       unsigned long long flags) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_VMMCREATE, .size = size, .flags = flags};
  if (r == CUDA_SUCCESS && handle)
    d.handle = *handle;
  if (prop)
    d.device = prop->location.id;
  alloc_post(c, r, &d, 0);
}

void custom_mem_address_reserve(cucap_call *c, CUresult r, CUdeviceptr *ptr, size_t size,
                                size_t alignment, CUdeviceptr addr,
                                unsigned long long flags) {
  /* pitch carries the requested fixed address hint, width the alignment */
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_VMMRESERVE, .size = size, .flags = flags,
                  .pitch = addr, .width = alignment};
  if (r == CUDA_SUCCESS && ptr)
    d.address = *ptr;
  alloc_post(c, r, &d, 0);
}

void custom_mem_map(cucap_call *c, CUresult r, CUdeviceptr ptr, size_t size,
                    size_t offset, CUmemGenericAllocationHandle handle,
                    unsigned long long flags) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_VMMMAP, .address = ptr, .size = size,
                  .pitch = offset, .handle = handle, .flags = flags};
  alloc_post(c, r, &d, 1);
}

void custom_mem_set_access(cucap_call *c, CUresult r, CUdeviceptr ptr, size_t size,
                           const CUmemAccessDesc *desc, size_t count) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_VMMSETACCESS, .address = ptr, .size = size};
  if (desc && count) {
    d.flags = (uint64_t)desc[0].flags;
    d.device = desc[0].location.id;
  }
  alloc_post(c, r, &d, 0);
}

void custom_mem_pool_create(cucap_call *c, CUresult r, CUmemoryPool *pool,
                            const CUmemPoolProps *props) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_POOL};
  if (r == CUDA_SUCCESS && pool)
    d.pool = d.handle = CX_U64(*pool);
  if (props)
    d.device = props->location.id;
  alloc_post(c, r, &d, 0);
}

void custom_array_create(cucap_call *c, CUresult r, CUarray *ph,
                         const CUDA_ARRAY_DESCRIPTOR *desc) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_ARRAY};
  if (r == CUDA_SUCCESS && ph)
    d.address = d.handle = CX_U64(*ph);
  if (desc) {
    d.width = desc->Width;
    d.height = desc->Height;
    d.flags = ((uint64_t)desc->Format << 8) | desc->NumChannels;
  }
  alloc_post(c, r, &d, 0);
}

void custom_array3d_create(cucap_call *c, CUresult r, CUarray *ph,
                           const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  alloc_desc d = {.kind = CUCAP_FB_ALLOCKIND_ARRAY};
  if (r == CUDA_SUCCESS && ph)
    d.address = d.handle = CX_U64(*ph);
  if (desc) {
    d.width = desc->Width;
    d.height = desc->Height;
    d.size = desc->Depth; /* depth (arrays have no byte size here) */
    d.flags = ((uint64_t)desc->Flags << 32) | ((uint64_t)desc->Format << 8) |
              desc->NumChannels;
  }
  alloc_post(c, r, &d, 0);
}

/* ------------------------------------------------------------------ frees */

static void free_post(cucap_call *c, CUresult r, uint8_t kind, uint64_t address,
                      uint64_t stream, uint64_t size, uint64_t handle, int untrack) {
  if (r != CUDA_SUCCESS)
    return;
  c->stack = cucap_rec_stack_id();
  /* cuMemFreeAsync into a capturing stream: a graph mem-free node; the
   * memory stays live until an instance of the graph frees it */
  if (untrack && kind == CUCAP_FB_ALLOCKIND_ASYNC &&
      cx_stream_capturing((CUstream)(uintptr_t)stream, c->variant))
    untrack = 0;
  if (untrack && cx_managed_any())
    cx_managed_remove(address);
  if (untrack) {
    cucap_tracked_alloc a;
    if (cucap_tracker_alloc_remove(cx_tracker(), address, &a)) {
      kind = a.kind;
      if (!size)
        size = a.size;
    }
  }
  cucap_fbb *b = c->b;
  cucap_fb_free_start(b);
  cucap_fb_free_add_kind(b, kind);
  cucap_fb_free_add_address(b, address);
  if (stream)
    cucap_fb_free_add_stream(b, stream);
  if (size)
    cucap_fb_free_add_size(b, size);
  if (handle)
    cucap_fb_free_add_handle(b, handle);
  c->body = cucap_fb_free_end(b);
  c->body_type = CUCAP_FB_BODY_FREE;
}

void custom_mem_free(cucap_call *c, CUresult r, CUdeviceptr p) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_DEVICE, p, 0, 0, 0, 1);
}
/* pre hooks: copy results still to be read into this memory (see
 * custom_deferred.c) */
static void host_free_pre(void *p) {
  cucap_tracked_alloc a;
  uint64_t size = cucap_tracker_alloc_find(cx_tracker(), CX_U64(p), &a) ? a.size : 1;
  cx_deferred_host_free(CX_U64(p), size);
}
void custom_mem_free_host_pre(cucap_call *c, void *p) {
  (void)c;
  host_free_pre(p);
}
void custom_mem_host_unregister_pre(cucap_call *c, void *p) {
  (void)c;
  host_free_pre(p);
}
void custom_mem_free_host(cucap_call *c, CUresult r, void *p) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_HOST, CX_U64(p), 0, 0, 0, 1);
}
void custom_mem_host_unregister(cucap_call *c, CUresult r, void *p) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_HOSTREGISTER, CX_U64(p), 0, 0, 0, 1);
}
void custom_mem_free_async(cucap_call *c, CUresult r, CUdeviceptr p, CUstream s) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_ASYNC, p, CX_U64(s), 0, 0, 1);
}
void custom_mem_unmap(cucap_call *c, CUresult r, CUdeviceptr p, size_t size) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_VMMMAP, p, 0, size, 0, 1);
}
void custom_mem_release(cucap_call *c, CUresult r, CUmemGenericAllocationHandle h) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_VMMCREATE, 0, 0, 0, h, 0);
}
void custom_mem_address_free(cucap_call *c, CUresult r, CUdeviceptr p, size_t size) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_VMMRESERVE, p, 0, size, 0, 0);
}
void custom_mem_pool_destroy(cucap_call *c, CUresult r, CUmemoryPool pool) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_POOL, 0, 0, 0, CX_U64(pool), 0);
}
void custom_array_destroy(cucap_call *c, CUresult r, CUarray a) {
  free_post(c, r, CUCAP_FB_ALLOCKIND_ARRAY, CX_U64(a), 0, 0, CX_U64(a), 0);
}
