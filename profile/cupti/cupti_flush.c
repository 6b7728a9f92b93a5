/* cupti_flush.c - --cache=flush: the L2 cache emptied of the program's data
 * before each profiled kernel, the way Nsight Compute's cache control does
 * it (invalidate, not write).
 *
 * A memset of a buffer twice the size of L2 evicts every line, but leaves
 * L2 full of dirty lines: the profiled kernel then pays for writing them
 * back, which shows as extra duration and DRAM throughput that ncu does not
 * report. So the flush reads the buffer instead, with a kernel of its own
 * (PTX below, JIT-compiled for the GPU once per run): the previous kernels'
 * dirty lines are written back while the flush runs, and what it leaves in
 * L2 is clean and none of the profiled kernel's data. Its store (there only
 * so that the loads are not optimised away) is guarded by a parameter the
 * engine always passes as 0, so the buffer's contents do not matter and it
 * is never written or zeroed.
 *
 * The counter passes flush from the profiled context (E->ctx, which may be
 * a context the program created); in auto-range mode the flush kernel
 * forms a range of its own there, and cupti_rangedata.c matches ranges with
 * the flushes interleaved (m->flushed). The duration passes flush from a
 * context of their own (a second buffer and module, created here): the
 * profiled context waits for idle, the flush runs in the side context and
 * is waited for, and the kernel's range then starts after the GPU has
 * switched back to the profiled context. The switch is what lets a
 * microsecond kernel's range start on a quiet GPU, so its duration matches
 * ncu's; flushing in the profiled context leaves short kernels measured
 * short. The switch costs two context switches per flush, so the main
 * counter passes, whose SOL metrics do not depend on it, keep the flush in
 * the profiled context.
 * The side context is made after the timeline pass, with the rest of the
 * set-up, on the calling thread: made on a thread beside the metrics
 * set-up, it slowed that set-up down by about as much as it saved.
 * A green context of the primary one over every SM (cuGreenCtxCreate, CUDA
 * 12.4) shares the address space, so the switch needs no change of page
 * tables and the profile is faster; but at locked base clocks (the default
 * --clock-control) its durations agree with ncu less often than the side
 * context's on most programs, so it is offered on request only. Flushing
 * the main counter passes from a green context saves nothing (its flush
 * kernels cost the range profiler what they cost in the profiled context)
 * and is not offered.
 * To compare the modes: bench/profile_vs_ncu.sh (per-kernel durations
 * against ncu in the same run) with CUCAP_PROFILE_FLUSH_CTX set; the
 * figures behind these choices are in docs/bench-log.md ("Flush
 * context").
 * CUCAP_PROFILE_FLUSH_CTX: "side" (the default: the duration passes from a
 * context of their own), "green" (the duration passes from a green context
 * of the primary one; the side context when the profiled context is one
 * the program created, or the driver has no green contexts), "all" (every
 * counter pass from a context of its own), "own" (none: every flush in the
 * profiled context).
 * Should the module not load, the memset flush is used (and said so). */
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cucap_knobs.h"
#include "cucap_log.h"
#include "cupti_internal.h"

/* Reads n 16-byte words at p (grid-stride), xor-folds them, and stores the
 * fold to *sink only if store is not 0 (the engine passes 0: the compiler
 * cannot know that, so the loads stay). PTX ISA 6.4 / sm_60: JIT-compiled
 * for any newer GPU. */
static const char ck_flush_ptx[] =
    ".version 6.4\n"
    ".target sm_60\n"
    ".address_size 64\n"
    ".visible .entry cucap_l2_flush(.param .u64 p, .param .u64 n, .param .u64 sink, "
    ".param .u32 store)\n"
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
    "  ld.param.u32 %r10, [store];\n"
    "  setp.eq.u32 %q, %r10, 0;\n"
    "  @%q bra END;\n"
    "  st.global.u32 [%rd3], %r5;\n"
    "END:\n"
    "  ret;\n"
    "}\n";

#define CK_FLUSH_THREADS 512

static void ck_flusher_drop(ck_engine *E, ck_flusher *f);

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

static ck_flush_ctx_mode ck_flush_mode(void) {
  const char *e = cucap_knob_str(CUCAP_KNOB(CUCAP_PROFILE_FLUSH_CTX));
  if (e && !strcmp(e, "own"))
    return CK_FLUSH_CTX_OWN;
  if (e && !strcmp(e, "all"))
    return CK_FLUSH_CTX_ALL;
  if (e && !strcmp(e, "green"))
    return CK_FLUSH_CTX_GREEN;
  return CK_FLUSH_CTX_SIDE;
}

/* Fills f in the context current now (the profiled one, or the duration
 * passes' context just created): the buffer and the flush kernel, else
 * the buffer alone (memset flush). 0: no buffer. */
static int ck_flusher_fill(ck_engine *E, ck_flusher *f, uint64_t bytes) {
  CUresult r = E->cu.MemAlloc(&f->buf, bytes);
  if (r != CUDA_SUCCESS) {
    f->buf = 0;
    CUCAP_WARN("profile: --cache=flush: cannot allocate the %" PRIu64
               " MiB flush buffer%s (CUresult %d); L2 is not flushed%s",
               bytes >> 20, f->ctx ? " in the duration passes' context" : "",
               (int)r, f->ctx ? " from there" : "");
    return 0;
  }
  CUCAP_DEBUG("profile: setup: %" PRIu64 " MiB flush buffer allocated", bytes >> 20);
  if (E->cu.ModuleLoadData && E->cu.ModuleGetFunction && E->cu.LaunchKernel &&
      E->cu.ModuleLoadData(&f->mod, ck_flush_ptx) == CUDA_SUCCESS &&
      E->cu.ModuleGetFunction(&f->fn, f->mod, "cucap_l2_flush") == CUDA_SUCCESS) {
    CUCAP_DEBUG("profile: setup: flush kernel loaded");
    return 1;
  }
  if (f->mod && E->cu.ModuleUnload)
    E->cu.ModuleUnload(f->mod);
  f->mod = NULL;
  f->fn = NULL;
  CUCAP_WARN("profile: --cache=flush: the flush kernel did not load%s; L2 is "
             "flushed by a memset, which leaves dirty lines (small kernels "
             "then read slower than under ncu)",
             f->ctx ? " in the duration passes' context" : "");
  return 1;
}

/* The side context and its flusher; the profiled context stays current. */
static void ck_flusher_side(ck_engine *E, uint64_t bytes) {
  ck_flusher *f = &E->fl.flush[1];
  if (!E->cu.CtxCreate || !E->cu.CtxDestroy || !E->cu.CtxPushCurrent ||
      !E->cu.CtxPopCurrent || !E->cu.CtxSynchronize ||
      E->cu.CtxCreate(&f->ctx, 0, (CUdevice)E->device) != CUDA_SUCCESS) {
    f->ctx = NULL;
    CUCAP_WARN("profile: --cache=flush: no context of its own for the "
               "duration passes' flush; it runs in the profiled context "
               "(microsecond kernels then measure shorter than under ncu)");
    return;
  }
  /* created current: popped below */
  int ok = ck_flusher_fill(E, f, bytes);
  CUcontext top = NULL;
  E->cu.CtxPopCurrent(&top);
  if (!ok)
    ck_flusher_drop(E, f);
}

/* The duration passes' flusher in a green context of the primary one
 * (flush[1]), over every SM: 1 when made, 0 (flush[1] left empty) when the
 * profiled context is not the primary one, the driver has no green
 * contexts, or one cannot be made. The profiled context stays current. */
static int ck_flusher_green(ck_engine *E, uint64_t bytes) {
  ck_flusher *f = &E->fl.flush[1];
  if (E->ctx != E->primary || !E->cu.DeviceGetDevResource ||
      !E->cu.DevResourceGenerateDesc || !E->cu.GreenCtxCreate ||
      !E->cu.GreenCtxDestroy || !E->cu.CtxFromGreenCtx ||
      !E->cu.CtxPushCurrent || !E->cu.CtxPopCurrent || !E->cu.CtxSynchronize) {
    CUCAP_DEBUG("profile: --cache=flush: no green context for the duration "
                "passes' flush (%s); a context of its own instead",
                E->ctx != E->primary ? "the profiled context is not the primary one"
                                     : "the driver has no green contexts");
    return 0;
  }
  CUdevResource res;
  CUdevResourceDesc desc = NULL;
  memset(&res, 0, sizeof res);
  CUresult r = E->cu.DeviceGetDevResource((CUdevice)E->device, &res,
                                          CU_DEV_RESOURCE_TYPE_SM);
  if (r == CUDA_SUCCESS)
    r = E->cu.DevResourceGenerateDesc(&desc, &res, 1);
  if (r == CUDA_SUCCESS)
    r = E->cu.GreenCtxCreate(&f->green, desc, (CUdevice)E->device,
                             CU_GREEN_CTX_DEFAULT_STREAM);
  if (r == CUDA_SUCCESS)
    r = E->cu.CtxFromGreenCtx(&f->ctx, f->green);
  if (r == CUDA_SUCCESS)
    r = E->cu.CtxPushCurrent(f->ctx);
  if (r != CUDA_SUCCESS) {
    CUCAP_WARN("profile: --cache=flush: no green context for the duration "
               "passes' flush (CUresult %d); a context of its own instead", (int)r);
    ck_flusher_drop(E, f);
    return 0;
  }
  CUCAP_DEBUG("profile: setup: green context made");
  int ok = ck_flusher_fill(E, f, bytes);
  CUcontext top = NULL;
  E->cu.CtxPopCurrent(&top);
  if (!ok)
    ck_flusher_drop(E, f);
  return ok;
}

void ck_flush_setup(ck_engine *E) {
  if (!E->o.cache_flush || !E->env.l2_bytes || !E->cu.MemAlloc ||
      !E->cu.MemsetD8Async || E->fl.flush[0].buf)
    return;
  CUcontext prev;
  if (!ck_in_ctx(E, &prev)) {
    CUCAP_WARN("profile: --cache=flush: cannot make the profiled context "
               "current; L2 is not flushed");
    return;
  }
  E->own_call = 1;
  uint64_t bytes = 2 * E->env.l2_bytes;
  E->fl.flush_sync = cucap_knob_flag(CUCAP_KNOB(CUCAP_PROFILE_FLUSH_SYNC));
  E->fl.flush_mode = ck_flush_mode();
  if (ck_flusher_fill(E, &E->fl.flush[0], bytes)) {
    E->fl.flush_bytes = bytes;
    int dur = E->m && E->m->dconfig; /* duration passes planned */
    ck_flush_ctx_mode fm = E->fl.flush_mode;
    if (fm == CK_FLUSH_CTX_ALL ||
        (dur && (fm == CK_FLUSH_CTX_SIDE ||
                 (fm == CK_FLUSH_CTX_GREEN && !ck_flusher_green(E, bytes)))))
      ck_flusher_side(E, bytes);
    CUCAP_INFO("profile: --cache=flush: L2 emptied by reading a %" PRIu64
               " MiB buffer before each profiled kernel%s", bytes >> 20,
               ck_flush_where(E));
  }
  E->own_call = 0;
  ck_ctx_back(E, prev);
}

const char *ck_flush_where(const ck_engine *E) {
  if (!E->fl.flush[1].buf)
    return "";
  if (E->fl.flush[1].green)
    return " (from a green context of the primary one in the duration passes)";
  return E->fl.flush_mode == CK_FLUSH_CTX_ALL
             ? " from a context of its own"
             : " (from a context of its own in the duration passes)";
}

/* 1 when the flush of this pass runs in the duration passes' context
 * (flush[1]) */
static int ck_flush_side_now(const ck_engine *E) {
  return E->fl.flush[1].buf &&
         (E->fl.flush_mode == CK_FLUSH_CTX_ALL || (E->m && E->m->dur_phase));
}

int ck_flush_run(ck_engine *E, CUstream stream) {
  int side = ck_flush_side_now(E);
  ck_flusher *f = &E->fl.flush[side];
  if (!f->buf)
    return 0;
  CUresult r;
  E->own_call = 1;
  if (side) {
    /* the profiled context's earlier work first, then the flush alone */
    r = E->cu.CtxSynchronize();
    if (r == CUDA_SUCCESS)
      r = E->cu.CtxPushCurrent(f->ctx);
    if (r != CUDA_SUCCESS) {
      E->own_call = 0;
      CUCAP_WARN("profile: L2 flush from the duration passes' context failed "
                 "(CUresult %d); the profiled context flushes from now on", (int)r);
      ck_flusher_drop(E, f);
      return ck_flush_run(E, stream);
    }
    stream = NULL;
  }
  if (f->fn) {
    uint64_t n16 = E->fl.flush_bytes / 16, sink = f->buf;
    uint32_t store = 0;
    void *args[] = {&f->buf, &n16, &sink, &store};
    unsigned blocks = E->env.sm_count > 0 ? 4u * (unsigned)E->env.sm_count : 512u;
    r = E->cu.LaunchKernel(f->fn, blocks, 1, 1, CK_FLUSH_THREADS, 1, 1, 0,
                           stream, args, NULL);
  } else {
    r = E->cu.MemsetD8Async(f->buf, 0, E->fl.flush_bytes, stream);
  }
  if (side) {
    if (r == CUDA_SUCCESS)
      r = E->cu.CtxSynchronize();
    CUcontext top = NULL;
    E->cu.CtxPopCurrent(&top);
  }
  E->own_call = 0;
  if (r != CUDA_SUCCESS) {
    CUCAP_WARN("profile: L2 flush failed (CUresult %d); no more flushes", (int)r);
    ck_flush_free(E);
    return 0;
  }
  return 1;
}

static void ck_flusher_unload(ck_engine *E, const ck_flusher *f) {
  if (f->mod && E->cu.ModuleUnload)
    E->cu.ModuleUnload(f->mod);
  if (f->buf && E->cu.MemFree)
    E->cu.MemFree(f->buf);
}

/* Releases f's module and buffer (a side context takes them along; a
 * green context's belong to the primary one and are released with the
 * green context current, before it goes) and clears it, also when only
 * part of it was made; the caller's own_call is kept. */
static void ck_flusher_drop(ck_engine *E, ck_flusher *f) {
  if (!f->buf && !f->mod && !f->ctx && !f->green)
    return;
  int own = E->own_call;
  E->own_call = 1;
  if (f->green) {
    if (f->ctx && E->cu.CtxPushCurrent(f->ctx) == CUDA_SUCCESS) {
      ck_flusher_unload(E, f);
      CUcontext top = NULL;
      E->cu.CtxPopCurrent(&top);
    }
    E->cu.GreenCtxDestroy(f->green);
  } else if (f->ctx) {
    E->cu.CtxDestroy(f->ctx);
  } else {
    CUcontext prev;
    int in = ck_in_ctx(E, &prev);
    ck_flusher_unload(E, f);
    if (in)
      ck_ctx_back(E, prev);
  }
  E->own_call = own;
  memset(f, 0, sizeof *f);
}

void ck_flush_free(ck_engine *E) {
  ck_flusher_drop(E, &E->fl.flush[1]);
  ck_flusher_drop(E, &E->fl.flush[0]);
}
