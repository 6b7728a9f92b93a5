/* custom_hostwrite.c - pre hooks of the calls that write host memory: every
 * copy with a host (or unified) destination, synchronous or not. Before the
 * program enqueues such work, a pending asynchronous copy result whose
 * destination it overlaps must be read (custom_deferred.c owns the pending
 * results and the ordering argument; cx_deferred_before_host_write). The
 * destination is taken as the program named it, whatever its memory type:
 * a device destination cannot overlap a pending host range, so nothing is
 * asked of the driver here. One atomic load per call when no result is
 * pending. */
#include "custom_internal.h"

static void write_1d(cucap_call *c, CUstream s, uint64_t dst, size_t n) {
  cx_rows w = {(const uint8_t *)(uintptr_t)dst, n, 1, 1, n, n};
  cx_deferred_before_host_write(c, s, &w);
}

/* The destination rows of a 2D/3D copy (not an array). */
static void write_3d(cucap_call *c, CUstream s, unsigned mt, const void *host, uint64_t dev,
                     size_t x, size_t y, size_t z, size_t pitch, size_t height,
                     size_t width, size_t rows, size_t depth) {
  if (mt == CU_MEMORYTYPE_ARRAY)
    return;
  uint64_t base = mt == CU_MEMORYTYPE_HOST ? CX_U64(host) : dev;
  if (!base || !width)
    return;
  if (!pitch)
    pitch = width;
  if (!height)
    height = rows;
  cx_rows w = {(const uint8_t *)(uintptr_t)(base + (z * height + y) * pitch + x), width,
               rows ? rows : 1, depth ? depth : 1, pitch, pitch * height};
  cx_deferred_before_host_write(c, s, &w);
}

void custom_hw_dtoh_pre(cucap_call *c, void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  (void)srcDevice;
  write_1d(c, NULL, CX_U64(dstHost), ByteCount);
}

void custom_hw_dtoh_async_pre(cucap_call *c, void *dstHost, CUdeviceptr srcDevice,
                              size_t ByteCount, CUstream hStream) {
  (void)srcDevice;
  write_1d(c, hStream, CX_U64(dstHost), ByteCount);
}

void custom_hw_unified_pre(cucap_call *c, CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  (void)src;
  write_1d(c, NULL, dst, ByteCount);
}

void custom_hw_unified_async_pre(cucap_call *c, CUdeviceptr dst, CUdeviceptr src,
                                 size_t ByteCount, CUstream hStream) {
  (void)src;
  write_1d(c, hStream, dst, ByteCount);
}

void custom_hw_atoh_pre(cucap_call *c, void *dstHost, CUarray srcArray, size_t srcOffset,
                        size_t ByteCount) {
  (void)srcArray, (void)srcOffset;
  write_1d(c, NULL, CX_U64(dstHost), ByteCount);
}

void custom_hw_atoh_async_pre(cucap_call *c, void *dstHost, CUarray srcArray,
                              size_t srcOffset, size_t ByteCount, CUstream hStream) {
  (void)srcArray, (void)srcOffset;
  write_1d(c, hStream, CX_U64(dstHost), ByteCount);
}

static void write_2d(cucap_call *c, CUstream s, const CUDA_MEMCPY2D *p) {
  if (p)
    write_3d(c, s, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0,
             p->dstPitch, 0, p->WidthInBytes, p->Height, 1);
}

void custom_hw_2d_pre(cucap_call *c, const CUDA_MEMCPY2D *pCopy) { write_2d(c, NULL, pCopy); }

void custom_hw_2d_async_pre(cucap_call *c, const CUDA_MEMCPY2D *pCopy, CUstream hStream) {
  write_2d(c, hStream, pCopy);
}

static void write_3d_desc(cucap_call *c, CUstream s, const CUDA_MEMCPY3D *p) {
  if (p)
    write_3d(c, s, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
             p->dstZ, p->dstPitch, p->dstHeight, p->WidthInBytes, p->Height, p->Depth);
}

void custom_hw_3d_pre(cucap_call *c, const CUDA_MEMCPY3D *pCopy) { write_3d_desc(c, NULL, pCopy); }

void custom_hw_3d_async_pre(cucap_call *c, const CUDA_MEMCPY3D *pCopy, CUstream hStream) {
  write_3d_desc(c, hStream, pCopy);
}
