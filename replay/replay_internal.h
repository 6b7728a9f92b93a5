/* replay_internal.h - shared state of the replayer's files. Not a public header: only replay/replay_*.c include it. */
#ifndef CUCAP_REPLAY_INTERNAL_H
#define CUCAP_REPLAY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cucap_map.h"
#include "cucap_reader.h"
#include "cucap_replay.h"

/* X(field, getproc name, version, PFN type, exported fallback name, ptsz) -
 * every driver entry point the replayer uses. ptsz = 1: also fetched with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for Ptsz/Ptds records. */
#define CUCAP_REPLAY_DRIVER_FNS(X)                                                       \
  X(Init, "cuInit", 2000, PFN_cuInit_v2000, "cuInit", 0)                                 \
  X(DriverGetVersion, "cuDriverGetVersion", 2020, PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion", 0) \
  X(GetErrorName, "cuGetErrorName", 6000, PFN_cuGetErrorName_v6000, "cuGetErrorName", 0) \
  X(DeviceGet, "cuDeviceGet", 2000, PFN_cuDeviceGet_v2000, "cuDeviceGet", 0)             \
  X(DeviceGetCount, "cuDeviceGetCount", 2000, PFN_cuDeviceGetCount_v2000, "cuDeviceGetCount", 0) \
  X(DeviceGetName, "cuDeviceGetName", 2000, PFN_cuDeviceGetName_v2000, "cuDeviceGetName", 0) \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", 2000, PFN_cuDeviceGetAttribute_v2000, "cuDeviceGetAttribute", 0) \
  X(DeviceTotalMem, "cuDeviceTotalMem", 3020, PFN_cuDeviceTotalMem_v3020, "cuDeviceTotalMem_v2", 0) \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain", 0) \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000, PFN_cuDevicePrimaryCtxRelease_v11000, "cuDevicePrimaryCtxRelease_v2", 0) \
  X(CtxSetCurrent, "cuCtxSetCurrent", 4000, PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent", 0) \
  X(CtxGetCurrent, "cuCtxGetCurrent", 4000, PFN_cuCtxGetCurrent_v4000, "cuCtxGetCurrent", 0) \
  X(CtxCreate, "cuCtxCreate", 3020, PFN_cuCtxCreate_v3020, "cuCtxCreate_v2", 0)         \
  X(CtxDestroy, "cuCtxDestroy", 4000, PFN_cuCtxDestroy_v4000, "cuCtxDestroy_v2", 0)     \
  X(CtxPopCurrent, "cuCtxPopCurrent", 4000, PFN_cuCtxPopCurrent_v4000, "cuCtxPopCurrent_v2", 0) \
  X(CtxSynchronize, "cuCtxSynchronize", 2000, PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize", 0) \
  X(MemAddressReserve, "cuMemAddressReserve", 10020, PFN_cuMemAddressReserve_v10020, "cuMemAddressReserve", 0) \
  X(MemAddressFree, "cuMemAddressFree", 10020, PFN_cuMemAddressFree_v10020, "cuMemAddressFree", 0) \
  X(MemCreate, "cuMemCreate", 10020, PFN_cuMemCreate_v10020, "cuMemCreate", 0)           \
  X(MemRelease, "cuMemRelease", 10020, PFN_cuMemRelease_v10020, "cuMemRelease", 0)       \
  X(MemMap, "cuMemMap", 10020, PFN_cuMemMap_v10020, "cuMemMap", 0)                       \
  X(MemUnmap, "cuMemUnmap", 10020, PFN_cuMemUnmap_v10020, "cuMemUnmap", 0)               \
  X(MemSetAccess, "cuMemSetAccess", 10020, PFN_cuMemSetAccess_v10020, "cuMemSetAccess", 0) \
  X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, PFN_cuMemGetAllocationGranularity_v10020, "cuMemGetAllocationGranularity", 0) \
  X(MemAlloc, "cuMemAlloc", 3020, PFN_cuMemAlloc_v3020, "cuMemAlloc_v2", 0)             \
  X(MemFree, "cuMemFree", 3020, PFN_cuMemFree_v3020, "cuMemFree_v2", 0)                 \
  X(MemGetInfo, "cuMemGetInfo", 3020, PFN_cuMemGetInfo_v3020, "cuMemGetInfo_v2", 0)     \
  X(MemAllocHost, "cuMemAllocHost", 3020, PFN_cuMemAllocHost_v3020, "cuMemAllocHost_v2", 0) \
  X(MemFreeHost, "cuMemFreeHost", 2000, PFN_cuMemFreeHost_v2000, "cuMemFreeHost", 0)     \
  X(MemHostAlloc, "cuMemHostAlloc", 2020, PFN_cuMemHostAlloc_v2020, "cuMemHostAlloc", 0)  \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", 3020, PFN_cuMemcpyHtoDAsync_v3020, "cuMemcpyHtoDAsync_v2", 1) \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", 3020, PFN_cuMemcpyDtoHAsync_v3020, "cuMemcpyDtoHAsync_v2", 1) \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", 3020, PFN_cuMemcpyDtoDAsync_v3020, "cuMemcpyDtoDAsync_v2", 1) \
  X(Memcpy2DAsync, "cuMemcpy2DAsync", 3020, PFN_cuMemcpy2DAsync_v3020, "cuMemcpy2DAsync_v2", 1) \
  X(Memcpy3DAsync, "cuMemcpy3DAsync", 3020, PFN_cuMemcpy3DAsync_v3020, "cuMemcpy3DAsync_v2", 1) \
  X(MemsetD8Async, "cuMemsetD8Async", 3020, PFN_cuMemsetD8Async_v3020, "cuMemsetD8Async", 1) \
  X(MemsetD16Async, "cuMemsetD16Async", 3020, PFN_cuMemsetD16Async_v3020, "cuMemsetD16Async", 1) \
  X(MemsetD32Async, "cuMemsetD32Async", 3020, PFN_cuMemsetD32Async_v3020, "cuMemsetD32Async", 1) \
  X(MemsetD2D8Async, "cuMemsetD2D8Async", 3020, PFN_cuMemsetD2D8Async_v3020, "cuMemsetD2D8Async", 1) \
  X(MemsetD2D16Async, "cuMemsetD2D16Async", 3020, PFN_cuMemsetD2D16Async_v3020, "cuMemsetD2D16Async", 1) \
  X(MemsetD2D32Async, "cuMemsetD2D32Async", 3020, PFN_cuMemsetD2D32Async_v3020, "cuMemsetD2D32Async", 1) \
  X(ModuleLoadData, "cuModuleLoadData", 2000, PFN_cuModuleLoadData_v2000, "cuModuleLoadData", 0) \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx", 2010, PFN_cuModuleLoadDataEx_v2010, "cuModuleLoadDataEx", 0) \
  X(ModuleUnload, "cuModuleUnload", 2000, PFN_cuModuleUnload_v2000, "cuModuleUnload", 0) \
  X(ModuleGetFunction, "cuModuleGetFunction", 2000, PFN_cuModuleGetFunction_v2000, "cuModuleGetFunction", 0) \
  X(ModuleGetGlobal, "cuModuleGetGlobal", 3020, PFN_cuModuleGetGlobal_v3020, "cuModuleGetGlobal_v2", 0) \
  X(LibraryLoadData, "cuLibraryLoadData", 12000, PFN_cuLibraryLoadData_v12000, "cuLibraryLoadData", 0) \
  X(LibraryUnload, "cuLibraryUnload", 12000, PFN_cuLibraryUnload_v12000, "cuLibraryUnload", 0) \
  X(LibraryGetKernel, "cuLibraryGetKernel", 12000, PFN_cuLibraryGetKernel_v12000, "cuLibraryGetKernel", 0) \
  X(LibraryGetModule, "cuLibraryGetModule", 12000, PFN_cuLibraryGetModule_v12000, "cuLibraryGetModule", 0) \
  X(LibraryGetGlobal, "cuLibraryGetGlobal", 12000, PFN_cuLibraryGetGlobal_v12000, "cuLibraryGetGlobal", 0) \
  X(KernelGetFunction, "cuKernelGetFunction", 12000, PFN_cuKernelGetFunction_v12000, "cuKernelGetFunction", 0) \
  X(FuncGetParamInfo, "cuFuncGetParamInfo", 12040, PFN_cuFuncGetParamInfo_v12040, "cuFuncGetParamInfo", 0) \
  X(LaunchKernel, "cuLaunchKernel", 4000, PFN_cuLaunchKernel_v4000, "cuLaunchKernel", 1) \
  X(LaunchKernelEx, "cuLaunchKernelEx", 11060, PFN_cuLaunchKernelEx_v11060, "cuLaunchKernelEx", 1) \
  X(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000, PFN_cuLaunchCooperativeKernel_v9000, "cuLaunchCooperativeKernel", 1) \
  X(StreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, PFN_cuStreamCreateWithPriority_v5050, "cuStreamCreateWithPriority", 0) \
  X(StreamDestroy, "cuStreamDestroy", 4000, PFN_cuStreamDestroy_v4000, "cuStreamDestroy_v2", 0) \
  X(StreamSynchronize, "cuStreamSynchronize", 2000, PFN_cuStreamSynchronize_v2000, "cuStreamSynchronize", 1) \
  X(StreamWaitEvent, "cuStreamWaitEvent", 3020, PFN_cuStreamWaitEvent_v3020, "cuStreamWaitEvent", 1) \
  X(StreamBeginCapture, "cuStreamBeginCapture", 10010, PFN_cuStreamBeginCapture_v10010, "cuStreamBeginCapture_v2", 1) \
  X(StreamEndCapture, "cuStreamEndCapture", 10000, PFN_cuStreamEndCapture_v10000, "cuStreamEndCapture", 1) \
  X(EventCreate, "cuEventCreate", 2000, PFN_cuEventCreate_v2000, "cuEventCreate", 0)     \
  X(EventDestroy, "cuEventDestroy", 4000, PFN_cuEventDestroy_v4000, "cuEventDestroy_v2", 0) \
  X(EventRecord, "cuEventRecord", 2000, PFN_cuEventRecord_v2000, "cuEventRecord", 1)     \
  X(EventSynchronize, "cuEventSynchronize", 2000, PFN_cuEventSynchronize_v2000, "cuEventSynchronize", 0) \
  X(EventElapsedTime, "cuEventElapsedTime", 2000, PFN_cuEventElapsedTime_v2000, "cuEventElapsedTime", 0) \
  X(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010, PFN_cuThreadExchangeStreamCaptureMode_v10010, "cuThreadExchangeStreamCaptureMode", 0) \
  X(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, PFN_cuGraphInstantiateWithFlags_v11040, "cuGraphInstantiateWithFlags", 0) \
  X(GraphLaunch, "cuGraphLaunch", 10000, PFN_cuGraphLaunch_v10000, "cuGraphLaunch", 1) \
  X(GraphDestroy, "cuGraphDestroy", 10000, PFN_cuGraphDestroy_v10000, "cuGraphDestroy", 0) \
  X(GraphExecDestroy, "cuGraphExecDestroy", 10000, PFN_cuGraphExecDestroy_v10000, "cuGraphExecDestroy", 0) \
  CUCAP_REPLAY_DRIVER_FNS_OBJECTS(X)

/* Attributes, limits, CUDA arrays, texture/surface objects (replay_attr.c,
 * replay_array.c, replay_object.c). All optional: a missing one skips the op. */
#define CUCAP_REPLAY_DRIVER_FNS_OBJECTS(X)                                               \
  X(FuncSetAttribute, "cuFuncSetAttribute", 9000, PFN_cuFuncSetAttribute_v9000, "cuFuncSetAttribute", 0) \
  X(FuncSetCacheConfig, "cuFuncSetCacheConfig", 3000, PFN_cuFuncSetCacheConfig_v3000, "cuFuncSetCacheConfig", 0) \
  X(FuncSetSharedMemConfig, "cuFuncSetSharedMemConfig", 4020, PFN_cuFuncSetSharedMemConfig_v4020, "cuFuncSetSharedMemConfig", 0) \
  X(KernelSetAttribute, "cuKernelSetAttribute", 12000, PFN_cuKernelSetAttribute_v12000, "cuKernelSetAttribute", 0) \
  X(KernelSetCacheConfig, "cuKernelSetCacheConfig", 12000, PFN_cuKernelSetCacheConfig_v12000, "cuKernelSetCacheConfig", 0) \
  X(CtxSetLimit, "cuCtxSetLimit", 3010, PFN_cuCtxSetLimit_v3010, "cuCtxSetLimit", 0)     \
  X(CtxGetLimit, "cuCtxGetLimit", 3010, PFN_cuCtxGetLimit_v3010, "cuCtxGetLimit", 0)     \
  X(CtxSetCacheConfig, "cuCtxSetCacheConfig", 3020, PFN_cuCtxSetCacheConfig_v3020, "cuCtxSetCacheConfig", 0) \
  X(CtxSetSharedMemConfig, "cuCtxSetSharedMemConfig", 4020, PFN_cuCtxSetSharedMemConfig_v4020, "cuCtxSetSharedMemConfig", 0) \
  X(Array3DCreate, "cuArray3DCreate", 3020, PFN_cuArray3DCreate_v3020, "cuArray3DCreate_v2", 0) \
  X(ArrayDestroy, "cuArrayDestroy", 2000, PFN_cuArrayDestroy_v2000, "cuArrayDestroy", 0) \
  X(MipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, PFN_cuMipmappedArrayCreate_v5000, "cuMipmappedArrayCreate", 0) \
  X(MipmappedArrayGetLevel, "cuMipmappedArrayGetLevel", 5000, PFN_cuMipmappedArrayGetLevel_v5000, "cuMipmappedArrayGetLevel", 0) \
  X(MipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, PFN_cuMipmappedArrayDestroy_v5000, "cuMipmappedArrayDestroy", 0) \
  X(TexObjectCreate, "cuTexObjectCreate", 5000, PFN_cuTexObjectCreate_v5000, "cuTexObjectCreate", 0) \
  X(TexObjectDestroy, "cuTexObjectDestroy", 5000, PFN_cuTexObjectDestroy_v5000, "cuTexObjectDestroy", 0) \
  X(SurfObjectCreate, "cuSurfObjectCreate", 5000, PFN_cuSurfObjectCreate_v5000, "cuSurfObjectCreate", 0) \
  X(SurfObjectDestroy, "cuSurfObjectDestroy", 5000, PFN_cuSurfObjectDestroy_v5000, "cuSurfObjectDestroy", 0) \
  X(MemcpyHtoAAsync, "cuMemcpyHtoAAsync", 3020, PFN_cuMemcpyHtoAAsync_v3020, "cuMemcpyHtoAAsync_v2", 1) \
  X(MemcpyAtoHAsync, "cuMemcpyAtoHAsync", 3020, PFN_cuMemcpyAtoHAsync_v3020, "cuMemcpyAtoHAsync_v2", 1) \
  X(MemcpyDtoA, "cuMemcpyDtoA", 3020, PFN_cuMemcpyDtoA_v3020, "cuMemcpyDtoA_v2", 1)     \
  X(MemcpyAtoD, "cuMemcpyAtoD", 3020, PFN_cuMemcpyAtoD_v3020, "cuMemcpyAtoD_v2", 1)     \
  X(MemcpyAtoA, "cuMemcpyAtoA", 3020, PFN_cuMemcpyAtoA_v3020, "cuMemcpyAtoA_v2", 1)

typedef struct rp_fns {
#define RP_X_FIELD(f, n, v, t, e, p) t f;
  CUCAP_REPLAY_DRIVER_FNS(RP_X_FIELD)
#undef RP_X_FIELD
} rp_fns;

typedef struct rp_driver {
  void *lib;
  rp_fns df;   /* default (legacy default stream) variants */
  rp_fns pt;   /* per-thread default stream variants (ptsz entries only) */
  int have_pt;
} rp_driver;

/* replay_driver.c: dlopen + cuGetProcAddress_v2. Missing optional entries
 * stay NULL; msg gets the reason on failure. */
cucap_status rp_driver_load(rp_driver *d, const char *libname, char *msg,
                            size_t msg_size);
void rp_driver_unload(rp_driver *d);
/* Any entry point by name (legacy default-stream variant), NULL if none. */
void *rp_driver_proc(const rp_driver *d, const char *name, int cuda_version);
const char *rp_cu_err(const rp_driver *d, CUresult r);

/* ---- memory placement (replay_memory.c) ------------------------------- */
typedef struct rp_range {
  uint64_t addr, size;
} rp_range;

typedef struct rp_reloc {      /* a recorded range replayed elsewhere */
  uint64_t addr, size, live;   /* live = new address */
  int owned;                   /* 1: cuMemAlloc'ed by us */
} rp_reloc;

/* Evidence, measured on the GPU machine (H100, driver 580, CUDA 13, fresh
 * process after cuInit + primary context): cuMemAddressReserve honours a
 * fixed-address hint EXACTLY when the hint is 32 MiB-aligned (0x2000000) and
 * the range is free (sizes 32 and 64 MiB, 0x7f0000000000, the start of a
 * freed cuMemAlloc region); a hint that is only 2 MiB-aligned is IGNORED
 * (a default address comes back). So the recorded ranges are reserved in
 * super-ranges whose start and end are rounded to this alignment. */
#define RP_VA_HINT_ALIGN ((uint64_t)32 << 20)

typedef struct rp_chunk {      /* one mapped (backed) piece of a super-range */
  uint64_t addr, size;
  CUmemGenericAllocationHandle h;
  int created, mapped;
} rp_chunk;

typedef struct rp_fixed {      /* one reserved super-range (32 MiB-aligned) */
  uint64_t addr, size;
  int reserved;
  int host_guard;              /* 1: still held by our PROT_NONE host mmap */
} rp_fixed;

typedef struct rp_mem {
  rp_range *recorded; size_t nrecorded, caprecorded; /* device alloc ranges */
  rp_fixed *fixed; size_t nfixed;   /* super-ranges (planned or reserved) */
  rp_chunk *chunks; size_t nchunks; /* mapped 2 MiB-aligned pieces, sorted */
  int planned;                      /* recorded[] merged + fixed[] computed */
  rp_reloc *reloc; size_t nreloc, capreloc;
  rp_range *pins; size_t npins, cappins; /* recorded page-locked host ranges */
  size_t pins_backed;               /* of those: device memory inside a
                                       reserved range stands in for them */
  rp_range *resv; size_t nresv, capresv; /* reservations made (sorted) */
} rp_mem;

int rp_mem_add_recorded(rp_mem *m, uint64_t addr, uint64_t size);
/* Merges the recorded ranges and computes the 32 MiB super-ranges. */
int rp_mem_plan(rp_mem *m);
/* Before libcuda is loaded: reserves every super-range in the host address
 * space (mmap PROT_NONE, MAP_FIXED_NOREPLACE) so that shared libraries and
 * driver mappings of this process stay out of it; released range by range
 * just before its cuMemAddressReserve (or by rp_mem_release). Best effort:
 * returns the number of super-ranges guarded. */
size_t rp_mem_host_guard(rp_mem *m);
void rp_mem_host_unguard(rp_mem *m); /* releases every guard now */
/* Notes a recorded page-locked host range (page-aligned) for the plan. */
int rp_mem_add_pin(rp_mem *m, uint64_t addr, uint64_t size);
/* 1 if [addr, addr+size) lies within `margin` bytes of a planned
 * super-range (plans first). */
int rp_mem_near_fixed(rp_mem *m, uint64_t addr, uint64_t size, uint64_t margin);
/* What this process has mapped over [addr, addr+size) (/proc/self/maps). */
void rp_mem_describe_va(uint64_t addr, uint64_t size, char *buf, size_t n);
/* Reserves each super-range at its exact address (a super-range that cannot
 * be reserved whole is reserved block by block, 32 MiB each, skipping the
 * blocks that fail), then maps device memory over the 2 MiB-aligned union of
 * the recorded ranges inside the reservations, and over the parts of noted
 * pinned host ranges that fall inside them (counted in pins_backed). Returns
 * the number of pieces that could not be placed (their allocations are
 * relocated); ranges and bytes receive the reservations made and the bytes
 * mapped. */
size_t rp_mem_place_fixed(rp_mem *m, rp_driver *d, CUdevice dev,
                          uint64_t *ranges, uint64_t *bytes);
/* Sorts/merges the recorded ranges only (relocation mode). */
void rp_mem_sort_recorded(rp_mem *m);
int rp_mem_is_fixed(const rp_mem *m, uint64_t addr, uint64_t size);
int rp_mem_is_recorded(const rp_mem *m, uint64_t addr);
/* Adds a relocation (replacing overlapping ones). */
int rp_mem_add_reloc(rp_mem *m, uint64_t addr, uint64_t size, uint64_t live,
                     int owned);
/* Removes the relocation starting at addr; returns its live address if we
 * own it (caller frees), else 0. */
uint64_t rp_mem_del_reloc(rp_mem *m, uint64_t addr);
/* Recorded address -> live address (identity when not relocated). */
static inline uint64_t rp_mem_translate(const rp_mem *m, uint64_t addr,
                                        int *relocated) {
  for (size_t i = m->nreloc; i-- > 0;) {
    const rp_reloc *r = &m->reloc[i];
    if (addr - r->addr < r->size) { /* unsigned: also addr >= r->addr */
      if (relocated)
        *relocated = 1;
      return r->live + (addr - r->addr);
    }
  }
  if (relocated)
    *relocated = 0;
  return addr;
}

/* Relocation inside uploaded data: rewrites each 8-byte value of buf (n
 * bytes about to be copied to recorded device address dev) that lies at an
 * 8-aligned device address and points into a relocated recorded range.
 * Returns how many were rewritten. */
size_t rp_mem_patch_row(const rp_mem *m, uint8_t *buf, uint64_t n, uint64_t dev);
/* The same for a struct parameter of `size` bytes at offset off of an
 * argument block of n bytes (CUTLASS/cuBLAS Params: pointers inside it). */
static inline size_t rp_mem_patch_struct(const rp_mem *m, uint8_t *args, size_t n,
                                         uint32_t off, uint32_t size) {
  return off < n ? rp_mem_patch_row(m, args + off, size < n - off ? size : n - off, off) : 0;
}

#define RP_MAX_PARAM_BYTES CUCAP_READER_MAX_PARAM_BYTES

/* Zero-fills every mapped piece (the start of each replay pass; the NULL
 * stream, synchronised). Returns the first failure. */
CUresult rp_mem_zero(const rp_mem *m, const rp_driver *d);
void rp_mem_release(rp_mem *m, rp_driver *d);

#endif
