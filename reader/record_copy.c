/* record_copy.c - reading a recorded Memcpy: which side is host memory and
 * the recorded address of each side's first byte (cucap_reader.h). Shared by
 * the replayer's graph rebuild and the verifier's graph copy checks. */
#include <cuda.h>

#include "cucap_reader.h"
#include "cucap_schema.h"

/* Whether a side of a recorded copy node is host memory. A node the
 * program made with CU_MEMORYTYPE_HOST says so; one with
 * CU_MEMORYTYPE_UNIFIED (cudaMemcpyDefault, and copies captured from
 * cuMemcpyAsync) names a host pointer just as well - pinned memory, or a
 * pageable buffer on the program's stack (simpleCudaGraphs' result) -
 * which the recorder classified into the copy's kind (HtoD, DtoH, ...).
 * Passing such a pointer as device memory made cuGraphAddMemcpyNode fail
 * with CUDA_ERROR_INVALID_VALUE. */
int cucap_memcpy_side_host(const cucap_fb_memcpy *c, int dst) {
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
  if (!g)
    return 0;
  unsigned t = dst ? cucap_fb_copy_geometry_dst_memory_type(g)
                   : cucap_fb_copy_geometry_src_memory_type(g);
  if (t == CU_MEMORYTYPE_HOST)
    return 1;
  if (t != CU_MEMORYTYPE_UNIFIED)
    return 0;
  int k = cucap_fb_memcpy_kind(c);
  if (dst)
    return k == CUCAP_FB_MEMCPYKIND_DTOH || k == CUCAP_FB_MEMCPYKIND_HTOH ||
           k == CUCAP_FB_MEMCPYKIND_ATOH;
  return k == CUCAP_FB_MEMCPYKIND_HTOD || k == CUCAP_FB_MEMCPYKIND_HTOH ||
         k == CUCAP_FB_MEMCPYKIND_HTOA;
}

/* The recorded address of the first byte a copy node reads (src) or writes
 * (dst) on a side, its offsets applied (what the recorder stores payloads
 * and results under). */
uint64_t cucap_memcpy_side_addr(const cucap_fb_memcpy *c, int dst) {
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
  uint64_t base = dst ? cucap_fb_memcpy_dst(c) : cucap_fb_memcpy_src(c);
  if (!g)
    return base;
  uint64_t x = dst ? cucap_fb_copy_geometry_dst_x_bytes(g) : cucap_fb_copy_geometry_src_x_bytes(g);
  uint64_t y = dst ? cucap_fb_copy_geometry_dst_y(g) : cucap_fb_copy_geometry_src_y(g);
  uint64_t z = dst ? cucap_fb_copy_geometry_dst_z(g) : cucap_fb_copy_geometry_src_z(g);
  uint64_t pitch = dst ? cucap_fb_copy_geometry_dst_pitch(g) : cucap_fb_copy_geometry_src_pitch(g);
  uint64_t h = dst ? cucap_fb_copy_geometry_dst_height(g) : cucap_fb_copy_geometry_src_height(g);
  if (!pitch)
    pitch = cucap_fb_copy_geometry_width_bytes(g);
  if (!h)
    h = cucap_fb_copy_geometry_height(g) ? cucap_fb_copy_geometry_height(g) : 1;
  return base + x + y * pitch + z * pitch * h;
}

