/* replay_verify_sync.c - replay side of the Snapshot reasons of format 1.2,
 * written by a recorder that never synchronises the program:
 *
 *  - CopyResult: the host bytes of an asynchronous DtoH copy, read by the
 *    recorder once the copy had completed (after its Memcpy record, which
 *    then has no payload). The scan maps copy_seq -> bytes; the DtoH copy is
 *    verified against them at its own record, like a payload in the record
 *    (rp_vsync_dtoh_expected). A copy captured into a graph was executed
 *    into a kept buffer during the re-done capture (rp_vsync_captured); its
 *    CopyResult follows the graph launch that ran it and is verified there,
 *    after a context synchronisation.
 *  - SyncPoint: managed memory the program may read after one of its own
 *    synchronisations: read back after a context synchronisation and
 *    compared, like an exit snapshot.
 *  - HostWrite: managed memory the host wrote before GPU work used it:
 *    uploaded at this point.
 * State lives in rp_state.vsync (this file owns it). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "replay_state.h"

typedef struct rp_vsync_cap { /* a DtoH copy executed into a capture */
  void *buf;                  /* kept by replay_exec.c (rp_keep) */
  uint64_t size;
} rp_vsync_cap;

struct rp_vsync {
  rp_map copy_result;         /* copy_seq -> index + 1 into hashes */
  cucap_hash128 *hashes;
  uint64_t *sizes;
  size_t n, cap;
  rp_map captured;            /* copy seq -> index + 1 into caps (per loop) */
  rp_vsync_cap *caps;
  size_t ncaps, capcaps;
};

static struct rp_vsync *vs(rp_state *R) {
  if (!R->vsync)
    R->vsync = calloc(1, sizeof *R->vsync);
  return R->vsync;
}

int rp_vsync_scan(rp_state *R, const cucap_fb_snapshot *s) {
  if (cucap_fb_snapshot_reason(s) != CUCAP_FB_SNAPSHOTREASON_COPYRESULT ||
      cucap_fb_snapshot_regions_len(s) != 1)
    return 1;
  struct rp_vsync *v = vs(R);
  if (!v)
    return 0;
  const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, 0);
  if (!cucap_fb_mem_region_data(g))
    return 1;
  if (v->n == v->cap) {
    size_t nc = v->cap ? v->cap * 2 : 64;
    cucap_hash128 *nh = realloc(v->hashes, nc * sizeof *nh);
    if (!nh)
      return 0;
    v->hashes = nh;
    uint64_t *ns = realloc(v->sizes, nc * sizeof *ns);
    if (!ns)
      return 0;
    v->sizes = ns;
    v->cap = nc;
  }
  v->hashes[v->n] = rp_h(cucap_fb_mem_region_data(g));
  v->sizes[v->n] = cucap_fb_mem_region_size(g);
  v->n++;
  return rp_map_put(&v->copy_result, cucap_fb_snapshot_copy_seq(s), v->n);
}

int rp_vsync_dtoh_expected(rp_state *R, const cucap_fb_memcpy *c, uint64_t seq,
                           cucap_hash128 *h) {
  if (cucap_fb_memcpy_has_payload(c)) {
    *h = rp_h(cucap_fb_memcpy_payload(c));
    return 1;
  }
  uint64_t idx = 0;
  if (!R->vsync || !rp_map_get(&R->vsync->copy_result, seq, &idx) || !idx)
    return 0;
  *h = R->vsync->hashes[idx - 1];
  return 1;
}

void rp_vsync_captured(rp_state *R, uint64_t seq, void *buf, uint64_t size) {
  struct rp_vsync *v = vs(R);
  if (!v)
    return;
  if (v->ncaps == v->capcaps) {
    size_t nc = v->capcaps ? v->capcaps * 2 : 16;
    rp_vsync_cap *n = realloc(v->caps, nc * sizeof *n);
    if (!n)
      return;
    v->caps = n;
    v->capcaps = nc;
  }
  v->caps[v->ncaps].buf = buf;
  v->caps[v->ncaps].size = size;
  v->ncaps++;
  (void)rp_map_put(&v->captured, seq, v->ncaps);
}

/* Expected bytes of region g into R->expect; 0 when they cannot be had. */
static int expected(rp_state *R, const cucap_fb_mem_region *g, uint64_t size) {
  cucap_hash128 h = rp_h(cucap_fb_mem_region_data(g));
  uint64_t bsz = 0;
  return cucap_fb_mem_region_data(g) && cucap_reader_blob_size(R->r, h, &bsz) == CUCAP_OK &&
         bsz == size && rp_grow(&R->expect, &R->expect_cap, size ? size : 1, &R->expect_pinned, R) &&
         cucap_reader_blob_read(R->r, h, R->expect, size) == CUCAP_OK;
}

static void copy_result(rp_state *R, const cucap_fb_snapshot *s) {
  uint64_t seq = cucap_fb_snapshot_copy_seq(s), idx = 0;
  if (cucap_fb_snapshot_regions_len(s) != 1)
    return;
  /* a plain copy was verified at its own record; only captured ones here */
  if (!R->vsync || !rp_map_get(&R->vsync->captured, seq, &idx) || !idx)
    return;
  if (R->o->verify == CUCAP_REPLAY_VERIFY_NONE)
    return;
  const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, 0);
  const rp_vsync_cap *cap = &R->vsync->caps[idx - 1];
  uint64_t size = cucap_fb_mem_region_size(g);
  if (R->capturing || size != cap->size || !expected(R, g, size)) {
    R->rep->copies_unverifiable++;
    return;
  }
  R->d.df.CtxSynchronize();
  char what[128];
  snprintf(what, sizeof what, "DtoH copy captured into a graph (seq %" PRIu64
           "), result after the graph launch (record %" PRIu64 ")", seq, R->rec_index);
  R->rep->copies_checked++;
  rp_verify_bytes(R, what, cap->buf, R->expect, size, cucap_fb_mem_region_address(g));
}

static void host_write(rp_state *R, const cucap_fb_snapshot *s) {
  size_t n = cucap_fb_snapshot_regions_len(s);
  if (R->capturing) {
    CUCAP_WARN("replay: host writes to managed memory during a capture not uploaded");
    return;
  }
  R->d.df.CtxSynchronize();
  for (size_t i = 0; i < n && !R->failed; i++) {
    const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
    uint64_t addr = cucap_fb_mem_region_address(g), size = cucap_fb_mem_region_size(g);
    if (!expected(R, g, size)) {
      CUCAP_WARN("replay: host write to managed memory at 0x%" PRIx64 " (%" PRIu64
                 " bytes): contents missing from the capture", addr, size);
      continue;
    }
    rp_cu(R, R->d.df.MemcpyHtoDAsync(rp_tr(R, addr), R->expect, size, NULL),
          "cuMemcpyHtoD (host write to managed memory)");
    R->d.df.StreamSynchronize(NULL);
  }
}

void rp_vsync_snapshot(rp_state *R, const cucap_fb_snapshot *s) {
  switch (cucap_fb_snapshot_reason(s)) {
  case CUCAP_FB_SNAPSHOTREASON_SYNCPOINT:
    if (R->o->verify != CUCAP_REPLAY_VERIFY_NONE)
      rp_verify_snapshot(R, s);
    else
      R->rep->ignored++;
    break;
  case CUCAP_FB_SNAPSHOTREASON_HOSTWRITE:
    host_write(R, s); /* replay input: always applied */
    break;
  case CUCAP_FB_SNAPSHOTREASON_COPYRESULT:
    copy_result(R, s);
    break;
  default:
    R->rep->ignored++;
    break;
  }
}

void rp_vsync_loop_reset(rp_state *R) {
  if (!R->vsync)
    return;
  rp_map_free(&R->vsync->captured);
  R->vsync->ncaps = 0;
}

void rp_vsync_free(rp_state *R) {
  if (!R->vsync)
    return;
  rp_map_free(&R->vsync->copy_result);
  rp_map_free(&R->vsync->captured);
  free(R->vsync->hashes);
  free(R->vsync->sizes);
  free(R->vsync->caps);
  free(R->vsync);
  R->vsync = NULL;
}
