/* cupti_flush.c - --cache=flush: the L2 cache emptied of the program's data
 * before each profiled kernel, the way Nsight Compute's cache control does
 * it (invalidate, not write).
 *
 * A memset of a buffer twice the size of L2 evicts every line, but leaves
 * L2 full of dirty lines: the profiled kernel then pays for writing them
 * back (on the H100 about 1 us and a few % of DRAM throughput on a 3 us
 * kernel, where ncu shows 0.05 %). So the flush reads the buffer instead,
 * with a kernel of its own (PTX below, JIT-compiled for the GPU once per
 * run): the previous kernels' dirty lines are written back while the flush
 * runs, and what it leaves in L2 is clean and none of the profiled kernel's
 * data. The buffer is zeroed once, so the kernel's guarded store (there only
 * so that the loads are not optimised away) never executes.
 *
 * Everything lives in the profiled context (E->ctx, which may be a context
 * the program created): a kernel of one context cannot read another's
 * memory. In auto-range mode the flush kernel forms a range of its own;
 * cupti_ranges.c matches ranges with the flushes interleaved (m->flushed).
 * Should the module not load, the memset flush is used (and said so). */
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cucap_log.h"
#include "cupti_internal.h"

/* Reads n 16-byte words at p (grid-stride), xor-folds them, and stores the
 * fold to *sink only if it equals a constant the zeroed buffer never
 * yields. PTX ISA 6.4 / sm_60: JIT-compiled for any newer GPU. */
static const char ck_flush_ptx[] =
    ".version 6.4\n"
    ".target sm_60\n"
    ".address_size 64\n"
    ".visible .entry cucap_l2_flush(.param .u64 p, .param .u64 n, .param .u64 sink)\n"
    "{\n"
    "  .reg .pred %q;\n"
    "  .reg .b32 %r<12>;\n"
    "  .reg .b64 %rd<12>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u64 %rd2, [n];\n"
    "  ld.param.u64 %rd3, [sink];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  cvta.to.global.u64 %rd3, %rd3;\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mov.u32 %r4, %nctaid.x;\n"
    "  mul.wide.u32 %rd4, %r1, %r2;\n"
    "  cvt.u64.u32 %rd5, %r3;\n"
    "  add.u64 %rd4, %rd4, %rd5;\n"
    "  mul.wide.u32 %rd6, %r4, %r2;\n"
    "  mov.u32 %r5, 0;\n"
    "LOOP:\n"
    "  setp.ge.u64 %q, %rd4, %rd2;\n"
    "  @%q bra DONE;\n"
    "  shl.b64 %rd7, %rd4, 4;\n"
    "  add.u64 %rd8, %rd1, %rd7;\n"
    "  ld.global.cg.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];\n"
    "  xor.b32 %r5, %r5, %r6;\n"
    "  xor.b32 %r5, %r5, %r7;\n"
    "  xor.b32 %r5, %r5, %r8;\n"
    "  xor.b32 %r5, %r5, %r9;\n"
    "  add.u64 %rd4, %rd4, %rd6;\n"
    "  bra LOOP;\n"
    "DONE:\n"
    "  setp.ne.u32 %q, %r5, 2086280765;\n"
    "  @%q bra END;\n"
    "  st.global.u32 [%rd3], %r5;\n"
    "END:\n"
    "  ret;\n"
    "}\n";

#define CK_FLUSH_THREADS 512

/* Makes the profiled context current (1), the one current before in *prev
 * for ck_ctx_back; 0 when that cannot be done. */
static int ck_in_ctx(ck_engine *E, CUcontext *prev) {
  *prev = NULL;
  if (!E->cu.CtxGetCurrent || !E->cu.CtxSetCurrent ||
      E->cu.CtxGetCurrent(prev) != CUDA_SUCCESS)
    return 0;
  return *prev == E->ctx || E->cu.CtxSetCurrent(E->ctx) == CUDA_SUCCESS;
}

static void ck_ctx_back(ck_engine *E, CUcontext prev) {
  if (prev && prev != E->ctx)
    E->cu.CtxSetCurrent(prev);
}

void ck_flush_setup(ck_engine *E) {
  if (!E->o.cache_flush || !E->env.l2_bytes || !E->cu.MemAlloc ||
      !E->cu.MemsetD8Async || E->flush_buf)
    return;
  CUcontext prev;
  if (!ck_in_ctx(E, &prev)) {
    CUCAP_WARN("profile: --cache=flush: cannot make the profiled context "
               "current; L2 is not flushed");
    return;
  }
  E->own_call = 1;
  uint64_t bytes = 2 * E->env.l2_bytes;
  CUresult r = E->cu.MemAlloc(&E->flush_buf, bytes);
  if (r != CUDA_SUCCESS) {
    E->flush_buf = 0;
    CUCAP_WARN("profile: --cache=flush: cannot allocate the %" PRIu64
               " MiB flush buffer (CUresult %d); L2 is not flushed",
               bytes >> 20, (int)r);
  } else {
    E->flush_bytes = bytes;
    const char *fs = getenv("CUCAP_PROFILE_FLUSH_SYNC");
    E->flush_sync = !(fs && *fs == '0');
    if (E->cu.MemsetD8Async(E->flush_buf, 0, bytes, NULL) == CUDA_SUCCESS &&
        E->cu.CtxSynchronize() == CUDA_SUCCESS && E->cu.ModuleLoadData &&
        E->cu.ModuleGetFunction && E->cu.LaunchKernel &&
        E->cu.ModuleLoadData(&E->flush_mod, ck_flush_ptx) == CUDA_SUCCESS &&
        E->cu.ModuleGetFunction(&E->flush_fn, E->flush_mod, "cucap_l2_flush") ==
            CUDA_SUCCESS) {
      CUCAP_INFO("profile: --cache=flush: L2 emptied by reading a %" PRIu64
                 " MiB buffer before each profiled kernel", bytes >> 20);
    } else {
      if (E->flush_mod && E->cu.ModuleUnload)
        E->cu.ModuleUnload(E->flush_mod);
      E->flush_mod = NULL;
      E->flush_fn = NULL;
      CUCAP_WARN("profile: --cache=flush: the flush kernel did not load; L2 "
                 "is flushed by a memset, which leaves dirty lines (small "
                 "kernels then read slower than under ncu)");
    }
  }
  E->own_call = 0;
  ck_ctx_back(E, prev);
}

int ck_flush_run(ck_engine *E, CUstream stream) {
  if (!E->flush_buf)
    return 0;
  CUresult r;
  E->own_call = 1;
  if (E->flush_fn) {
    uint64_t n16 = E->flush_bytes / 16, sink = E->flush_buf;
    void *args[] = {&E->flush_buf, &n16, &sink};
    unsigned blocks = E->env.sm_count > 0 ? 4u * (unsigned)E->env.sm_count : 512u;
    r = E->cu.LaunchKernel(E->flush_fn, blocks, 1, 1, CK_FLUSH_THREADS, 1, 1, 0,
                           stream, args, NULL);
  } else {
    r = E->cu.MemsetD8Async(E->flush_buf, 0, E->flush_bytes, stream);
  }
  E->own_call = 0;
  if (r != CUDA_SUCCESS) {
    CUCAP_WARN("profile: L2 flush failed (CUresult %d); no more flushes", (int)r);
    ck_flush_free(E);
    return 0;
  }
  return 1;
}

void ck_flush_free(ck_engine *E) {
  if (!E->flush_buf && !E->flush_mod)
    return;
  CUcontext prev;
  int in = ck_in_ctx(E, &prev);
  E->own_call = 1;
  if (E->flush_mod && E->cu.ModuleUnload)
    E->cu.ModuleUnload(E->flush_mod);
  if (E->flush_buf && E->cu.MemFree)
    E->cu.MemFree(E->flush_buf);
  E->own_call = 0;
  if (in)
    ck_ctx_back(E, prev);
  E->flush_mod = NULL;
  E->flush_fn = NULL;
  E->flush_buf = 0;
}
