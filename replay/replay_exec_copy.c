/* replay_exec_copy.c - the executor's memory ops: Alloc/Free records (at
 * the recorded addresses, or relocated), Memcpy records (payloads from the
 * capture through pinned staging slots; 2D/3D geometry; results read back
 * for observers through op->host_data) and Memset records. Dispatched by
 * rp_execute (replay_exec.c). Owns rp_state's staging part (rp_staging,
 * replay_state.h): the staging slots are touched here alone. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "replay_state.h"
#include "replay_graph.h"

void rp_op_alloc(rp_state *R, const cucap_fb_record *rec,
                 const cucap_fb_alloc *a) {
  int k = cucap_fb_alloc_kind(a);
  uint64_t addr = cucap_fb_alloc_address(a), size = rp_alloc_size(a);
  if (k == CUCAP_FB_ALLOCKIND_VMMCREATE || k == CUCAP_FB_ALLOCKIND_VMMSETACCESS ||
      k == CUCAP_FB_ALLOCKIND_POOL || !rp_alloc_is_device(k)) {
    R->rep->ignored++; /* host memory: payloads are in the capture */
    return;
  }
  if (rp_mem_is_fixed(&R->mem, addr, size)) {
    R->rep->executed++; /* already backed at its recorded address */
    return;
  }
  rp_ctx_rec(R, rec);
  CUdeviceptr p = 0;
  if (!rp_cu(R, R->d.df.MemAlloc(&p, size ? size : 1), "cuMemAlloc"))
    return;
  /* zero-filled like the fixed-address ranges at each pass start
   * (replay_run.c): a pass must not see what an earlier one left there */
  if (!R->capturing && size &&
      (!rp_cu(R, R->d.df.MemsetD8Async(p, 0, size, NULL), "cuMemsetD8 (new allocation)") ||
       !rp_cu(R, R->d.df.StreamSynchronize(NULL), "cuStreamSynchronize")))
    return;
  if (!rp_mem_add_reloc(&R->mem, addr, size, p, 1)) {
    R->d.df.MemFree(p);
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return;
  }
  rp_owned(R, p);
  R->rep->relocated_allocs++;
  if (!R->buf.warned_reloc_ptr++)
    CUCAP_WARN("replay: relocating device allocations: pointers in kernel "
               "parameters, graph nodes and uploaded data (HtoD payloads) are "
               "patched; pointers a kernel computes and stores in device "
               "memory cannot be");
  R->rep->executed++;
}

void rp_op_free(rp_state *R, const cucap_fb_record *rec,
                const cucap_fb_free *f) {
  int k = cucap_fb_free_kind(f);
  if (!rp_alloc_is_device(k)) {
    R->rep->ignored++;
    return;
  }
  uint64_t live = rp_mem_del_reloc(&R->mem, cucap_fb_free_address(f));
  if (live) {
    rp_ctx_rec(R, rec);
    if (!R->capturing) /* a sync during a capture would invalidate it */
      R->d.df.CtxSynchronize(); /* the program's free was ordered after use */
    R->d.df.MemFree(live);
  }
  R->rep->executed++;
}

/* Next staging slot, at least `size` bytes, safe to overwrite. */
static void *rp_stage(rp_state *R, size_t size, unsigned *slot) {
  unsigned s = R->buf.stage_next;
  R->buf.stage_next = (s + 1) % RP_STAGING_SLOTS;
  if (R->buf.stage_used[s] && R->buf.stage_ev[s])
    R->d.df.EventSynchronize(R->buf.stage_ev[s]);
  R->buf.stage_used[s] = 0;
  if (rp_grow(&R->buf.stage[s], &R->buf.stage_cap[s], size, &R->buf.stage_pinned[s], R) != CUCAP_OK)
    return NULL;
  *slot = s;
  return R->buf.stage[s];
}

void rp_stage_done(rp_state *R, unsigned slot, CUstream st,
                   const rp_fns *fn) {
  if (R->buf.stage_ev[slot] && R->buf.stage_ev_ctx[slot] != R->cx.cur) {
    /* events are per context: this one (idle, rp_stage waited) goes */
    R->d.df.EventDestroy(R->buf.stage_ev[slot]);
    R->buf.stage_ev[slot] = NULL;
  }
  if (!R->buf.stage_ev[slot] && R->d.df.EventCreate &&
      R->d.df.EventCreate(&R->buf.stage_ev[slot], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS)
    R->buf.stage_ev_ctx[slot] = R->cx.cur;
  if (R->buf.stage_ev[slot] && fn->EventRecord(R->buf.stage_ev[slot], st) == CUDA_SUCCESS)
    R->buf.stage_used[slot] = 1;
  else
    fn->StreamSynchronize(st);
}

/* The staging slots' events made in context live go before it does
 * (rp_ctx_dying, live current). */
void rp_stage_ctx_gone(rp_state *R, CUcontext live) {
  for (int i = 0; i < RP_STAGING_SLOTS; i++) {
    if (R->buf.stage_ev[i] && R->buf.stage_ev_ctx[i] == live) {
      R->d.df.EventDestroy(R->buf.stage_ev[i]);
      R->buf.stage_ev[i] = NULL;
      R->buf.stage_ev_ctx[i] = NULL;
      R->buf.stage_used[i] = 0;
    }
  }
}

/* The teardown of the staging slots: events and buffers. */
void rp_stage_free(rp_state *R) {
  for (int i = 0; i < RP_STAGING_SLOTS; i++) {
    if (R->buf.stage_ev[i])
      R->d.df.EventDestroy(R->buf.stage_ev[i]);
    if (!R->buf.stage[i])
      continue;
    if (R->buf.stage_pinned[i])
      rp_host_buf_free(R, R->buf.stage[i]);
    else
      free(R->buf.stage[i]);
    R->buf.stage[i] = NULL;
  }
}

/* Host buffer holding the payload; *owned: caller must keep/free it. */
void *rp_payload(rp_state *R, const cucap_fb_memcpy *c, uint64_t size,
                 unsigned *slot, int *kept) {
  cucap_hash128 h = rp_h(cucap_fb_memcpy_payload(c));
  uint64_t bsz = 0;
  if (cucap_reader_blob_size(R->r, h, &bsz) != CUCAP_OK || bsz < size)
    return NULL;
  void *dst;
  *kept = 0;
  if (R->capturing) { /* the copy runs when the graph launches */
    dst = malloc(bsz ? bsz : 1);
    if (!dst || rp_keep(R, dst) != CUCAP_OK) {
      free(dst);
      return NULL;
    }
    *kept = 1;
  } else {
    dst = rp_stage(R, bsz, slot);
  }
  if (!dst || cucap_reader_blob_read(R->r, h, dst, bsz) != CUCAP_OK)
    return NULL;
  return dst;
}

void rp_copy2d_src_dev(CUDA_MEMCPY2D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p->srcDevice = dev;
  p->srcXInBytes = cucap_fb_copy_geometry_src_x_bytes(g);
  p->srcY = cucap_fb_copy_geometry_src_y(g);
  p->srcPitch = cucap_fb_copy_geometry_src_pitch(g);
}

void rp_copy2d_dst_dev(CUDA_MEMCPY2D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p->dstDevice = dev;
  p->dstXInBytes = cucap_fb_copy_geometry_dst_x_bytes(g);
  p->dstY = cucap_fb_copy_geometry_dst_y(g);
  p->dstPitch = cucap_fb_copy_geometry_dst_pitch(g);
}

void rp_copy3d_src_dev(CUDA_MEMCPY3D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p->srcDevice = dev;
  p->srcXInBytes = cucap_fb_copy_geometry_src_x_bytes(g);
  p->srcY = cucap_fb_copy_geometry_src_y(g);
  p->srcZ = cucap_fb_copy_geometry_src_z(g);
  p->srcPitch = cucap_fb_copy_geometry_src_pitch(g);
  p->srcHeight = cucap_fb_copy_geometry_src_height(g);
}

void rp_copy3d_dst_dev(CUDA_MEMCPY3D *p, const cucap_fb_copy_geometry *g, uint64_t dev) {
  p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p->dstDevice = dev;
  p->dstXInBytes = cucap_fb_copy_geometry_dst_x_bytes(g);
  p->dstY = cucap_fb_copy_geometry_dst_y(g);
  p->dstZ = cucap_fb_copy_geometry_dst_z(g);
  p->dstPitch = cucap_fb_copy_geometry_dst_pitch(g);
  p->dstHeight = cucap_fb_copy_geometry_dst_height(g);
}

int rp_geometry_fits(const cucap_fb_copy_geometry *g, uint64_t size) {
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g), h = cucap_fb_copy_geometry_height(g);
  uint64_t d = cucap_fb_copy_geometry_depth(g), rows;
  if (!h)
    h = 1;
  if (!d)
    d = 1;
  return !__builtin_mul_overflow(h, d, &rows) && (!w || rows <= size / w);
}

static void rp_copy2d(const cucap_fb_copy_geometry *g, int dtoh,
                      uint64_t dev, void *host, CUstream st, const rp_fns *fn,
                      CUresult *res) {
  uint64_t depth = cucap_fb_copy_geometry_depth(g);
  uint64_t w = cucap_fb_copy_geometry_width_bytes(g);
  uint64_t hgt = cucap_fb_copy_geometry_height(g);
  if (depth > 1 || cucap_fb_copy_geometry_src_z(g) ||
      cucap_fb_copy_geometry_dst_z(g)) {
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = w;
    p.Height = hgt;
    p.Depth = depth;
    if (dtoh) {
      rp_copy3d_src_dev(&p, g, dev);
      p.dstMemoryType = CU_MEMORYTYPE_HOST;
      p.dstHost = host;
      p.dstPitch = w;
      p.dstHeight = hgt;
    } else {
      rp_copy3d_dst_dev(&p, g, dev);
      p.srcMemoryType = CU_MEMORYTYPE_HOST;
      p.srcHost = host;
      p.srcPitch = w;
      p.srcHeight = hgt;
    }
    *res = fn->Memcpy3DAsync ? fn->Memcpy3DAsync(&p, st) : CUDA_ERROR_NOT_SUPPORTED;
    return;
  }
  CUDA_MEMCPY2D p;
  memset(&p, 0, sizeof p);
  p.WidthInBytes = w;
  p.Height = hgt;
  if (dtoh) {
    rp_copy2d_src_dev(&p, g, dev);
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = host;
    p.dstPitch = w;
  } else {
    rp_copy2d_dst_dev(&p, g, dev);
    p.srcMemoryType = CU_MEMORYTYPE_HOST;
    p.srcHost = host;
    p.srcPitch = w;
  }
  *res = fn->Memcpy2DAsync ? fn->Memcpy2DAsync(&p, st) : CUDA_ERROR_NOT_SUPPORTED;
}

/* rp_op_memcpy by direction: 1 when the copy was issued (or needs none),
 * 0 when skipped or failed (reported). HtoD: the payload from the cache or
 * a staging slot, uploaded. */
static int rp_memcpy_htod(rp_state *R, const cucap_fb_memcpy *c,
                          const rp_fns *fn, CUstream st, uint64_t dst,
                          uint64_t size, const cucap_fb_copy_geometry *g) {
  CUresult res = CUDA_SUCCESS;
  int async = cucap_fb_memcpy_async(c);
  if (!cucap_fb_memcpy_has_payload(c)) {
    rp_skip(R, "HtoD copy without stored payload");
    return 0;
  }
  unsigned slot = 0;
  int kept = 0;
  void *hb = rp_paycache_get(R, c, size, dst, g); /* patched already */
  int cached = hb != NULL;
  if (!cached && (hb = rp_payload(R, c, size, &slot, &kept)))
    rp_patch_payload(R, hb, size, dst, g); /* pointers into moved ranges */
  if (!hb) {
    rp_skip(R, "HtoD copy (payload blob missing)");
    return 0;
  }
  uint64_t d = rp_tr(R, dst);
  if (R->obj) /* texture/surface handles stored in device memory */
    rp_object_patch_upload(R, hb, size, g ? dst + cucap_fb_copy_geometry_dst_x_bytes(g) : dst,
                           g ? cucap_fb_copy_geometry_width_bytes(g) : 0);
  /* a pass that measures kernels only: from the payload's device copy */
  CUdeviceptr dsrc = cached && !g && R->buf.device_uploads ? rp_paycache_device(R, hb) : 0;
  if (dsrc)
    res = fn->MemcpyDtoDAsync(d, dsrc, size, st);
  else if (g)
    rp_copy2d(g, 0, d, hb, st, fn, &res);
  else
    res = fn->MemcpyHtoDAsync(d, hb, size, st);
  if (!rp_cu(R, res, dsrc ? "cuMemcpyDtoD (device payload)" : "cuMemcpyHtoD"))
    return 0;
  if (!kept && !cached)
    rp_stage_done(R, slot, st, fn);
  /* a synchronous copy completes before the call returns (errors too) */
  if (!async && !R->capturing &&
      !rp_cu(R, fn->StreamSynchronize(st), "cuStreamSynchronize (synchronous HtoD)"))
    return 0;
  return 1;
}

/* DtoH: read back into R->buf.scratch (or, while capturing, a buffer the graph
 * writes at its launch) for the observers; left out when nothing reads it. */
static int rp_memcpy_dtoh(rp_state *R, const rp_fns *fn, CUstream st,
                          uint64_t src, uint64_t size,
                          const cucap_fb_copy_geometry *g) {
  CUresult res = CUDA_SUCCESS;
  void *hb;
  if (R->buf.skip_host_reads && !rp_obs_reads_host_data(R) && !R->capturing) {
    R->buf.host_reads_skipped++; /* nothing on the device reads the bytes */
    return 1;
  }
  if (R->dev_mem && size > R->dev_mem) {
    rp_set_error(R, CUCAP_ERR_CORRUPT,
                 "record %" PRIu64 " (seq %" PRIu64 "): a DtoH copy of %" PRIu64
                 " bytes is larger than this GPU's memory (%" PRIu64 " bytes)",
                 R->rec_index, R->cur_seq, size, R->dev_mem);
    return 0;
  }
  if (R->capturing) {
    hb = rp_capture_host_buffer(R, size);
    if (!hb) {
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      return 0;
    }
  } else {
    if (rp_grow(&R->buf.scratch, &R->buf.scratch_cap, size, &R->buf.scratch_pinned,
                R) != CUCAP_OK) {
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      return 0;
    }
    hb = R->buf.scratch;
  }
  uint64_t s = rp_tr(R, src);
  if (g)
    rp_copy2d(g, 1, s, hb, st, fn, &res);
  else
    res = fn->MemcpyDtoHAsync(hb, s, size, st);
  if (!rp_cu(R, res, "cuMemcpyDtoH"))
    return 0;
  if (R->capturing) {
    /* runs at graph launch: the bytes land in hb then (kept until the end
     * of the pass); its CopyResult snapshot follows the graph launch */
    R->obs.op.host_data = hb;
    R->obs.op.host_size = size;
  } else {
    if (!rp_cu(R, fn->StreamSynchronize(st), "cuStreamSynchronize"))
      return 0;
    R->obs.op.host_data = hb; /* for observers (verify) */
    R->obs.op.host_size = size;
  }
  return 1;
}

/* DtoD (and peer): both sides translated. */
static int rp_memcpy_dtod(rp_state *R, const rp_fns *fn, CUstream st,
                          uint64_t dst, uint64_t src, uint64_t size,
                          const cucap_fb_copy_geometry *g) {
  CUresult res;
  uint64_t d = rp_tr(R, dst), s = rp_tr(R, src);
  if (g) {
    CUDA_MEMCPY2D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = cucap_fb_copy_geometry_width_bytes(g);
    p.Height = cucap_fb_copy_geometry_height(g);
    rp_copy2d_src_dev(&p, g, s);
    rp_copy2d_dst_dev(&p, g, d);
    res = fn->Memcpy2DAsync(&p, st);
  } else {
    res = fn->MemcpyDtoDAsync(d, s, size, st);
  }
  return rp_cu(R, res, "cuMemcpyDtoD");
}

void rp_op_memcpy(rp_state *R, const cucap_fb_record *rec,
                  const cucap_fb_memcpy *c) {
  int k = cucap_fb_memcpy_kind(c);
  uint64_t dst = cucap_fb_memcpy_dst(c), src = cucap_fb_memcpy_src(c);
  uint64_t size = cucap_fb_memcpy_size(c);
  const rp_fns *fn = rp_fn(R, rec);
  if (k == CUCAP_FB_MEMCPYKIND_UNIFIED) {
    int dd = rp_mem_is_recorded(&R->mem, dst), sd = rp_mem_is_recorded(&R->mem, src);
    k = dd && sd ? CUCAP_FB_MEMCPYKIND_DTOD
        : dd     ? CUCAP_FB_MEMCPYKIND_HTOD
        : sd     ? CUCAP_FB_MEMCPYKIND_DTOH
                 : CUCAP_FB_MEMCPYKIND_HTOH;
  }
  if (k == CUCAP_FB_MEMCPYKIND_PEER)
    k = CUCAP_FB_MEMCPYKIND_DTOD;
  if (k == CUCAP_FB_MEMCPYKIND_HTOH || k == CUCAP_FB_MEMCPYKIND_PREFETCH) {
    R->rep->ignored++;
    return;
  }
  if (!size) { /* XLA's InitializeTypedBuffer copies 0 bytes: nothing to do */
    R->rep->executed++;
    return;
  }
  const char *bad = rp_unreplayable(rec);
  if (bad) {
    rp_skip(R, bad);
    return;
  }
  const cucap_fb_copy_geometry *g = cucap_fb_memcpy_geometry(c);
  if (g && (k == CUCAP_FB_MEMCPYKIND_HTOD || k == CUCAP_FB_MEMCPYKIND_DTOH) &&
      !rp_geometry_fits(g, size)) {
    rp_skip(R, "copy whose geometry exceeds its size");
    return;
  }
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  CUstream st = rp_stream(R, cucap_fb_memcpy_stream(c));
  int ok;
  if (k == CUCAP_FB_MEMCPYKIND_HTOD)
    ok = rp_memcpy_htod(R, c, fn, st, dst, size, g);
  else if (k == CUCAP_FB_MEMCPYKIND_DTOH)
    ok = rp_memcpy_dtoh(R, fn, st, src, size, g);
  else
    ok = rp_memcpy_dtod(R, fn, st, dst, src, size, g);
  if (!ok)
    return;
  R->rep->executed++;
}

void rp_op_memset(rp_state *R, const cucap_fb_record *rec,
                  const cucap_fb_memset *m) {
  const rp_fns *fn = rp_fn(R, rec);
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return;
  CUstream st = rp_stream(R, cucap_fb_memset_stream(m));
  uint64_t d = rp_tr(R, cucap_fb_memset_dst(m));
  uint32_t v = cucap_fb_memset_value(m);
  uint64_t n = cucap_fb_memset_count(m), h = cucap_fb_memset_height(m);
  uint64_t pitch = cucap_fb_memset_pitch(m);
  int es = cucap_fb_memset_elem_size(m);
  CUresult r;
  if (h > 1) {
    r = es == 4   ? fn->MemsetD2D32Async(d, pitch, v, n, h, st)
        : es == 2 ? fn->MemsetD2D16Async(d, pitch, (unsigned short)v, n, h, st)
                  : fn->MemsetD2D8Async(d, pitch, (unsigned char)v, n, h, st);
  } else {
    r = es == 4   ? fn->MemsetD32Async(d, v, n, st)
        : es == 2 ? fn->MemsetD16Async(d, (unsigned short)v, n, st)
                  : fn->MemsetD8Async(d, (unsigned char)v, n, st);
  }
  if (!rp_cu(R, r, "cuMemset"))
    return;
  R->rep->executed++;
}
