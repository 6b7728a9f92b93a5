/* replay_deferred.c - the replay side of the recorder's deferred reads
 * (format 1.2 Snapshot reasons, written by a recorder that never
 * synchronises the program; interpose/custom_deferred.c and
 * custom_managed.c):
 *
 *  - CopyResult: the host bytes of an asynchronous copy to the host, read
 *    by the recorder once the copy had completed, after its Memcpy record
 *    (which then has no payload). The scan indexes copy_seq -> bytes, so
 *    that observers find a copy's recorded result at the copy itself
 *    (cucap_replay_session_copy_result). For a copy captured into a graph
 *    the CopyResult follows the graph launch that ran it: the verify
 *    observer checks it there. A format 1.3 recorder names that launch
 *    (launch_seq): its result may be written after later launches of the
 *    graph (a buffer reused before the program synchronised), so the scan
 *    also indexes launch_seq -> results, checked right after that launch
 *    (cucap_replay_session_graph_copy_result).
 *  - HostWrite: managed memory the program wrote on the host before GPU
 *    work used it: replay input, uploaded at this point (rp_host_write),
 *    with pointers and texture handles rewritten like any uploaded data.
 *  - SyncPoint: managed memory the program may read after one of its own
 *    synchronisations: checked by the verify observer like any snapshot.
 * The index lives in rp_state.deferred (this file owns it). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"

struct rp_deferred {
  cucap_map copy_result;         /* copy_seq -> index + 1 into hashes/sizes */
  cucap_map by_launch;           /* launch_seq -> index + 1 of its first result */
  cucap_hash128 *hashes;
  uint64_t *sizes;
  uint64_t *copy_seqs, *launch_seqs;
  uint64_t *addrs;            /* the host address the result was read from */
  size_t *next_same_launch;   /* index + 1 of the launch's next result, 0: none */
  size_t n, cap;
};

cucap_status rp_deferred_scan(rp_state *R, const cucap_fb_snapshot *s) {
  if (cucap_fb_snapshot_reason(s) != CUCAP_FB_SNAPSHOTREASON_COPYRESULT ||
      cucap_fb_snapshot_regions_len(s) != 1)
    return CUCAP_OK;
  const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, 0);
  if (!cucap_fb_mem_region_data(g))
    return CUCAP_OK;
  CUCAP_RETURN_IF(!R->deferred && !(R->deferred = calloc(1, sizeof *R->deferred)),
                  CUCAP_ERR_NOMEM);
  struct rp_deferred *v = R->deferred;
  if (v->n == v->cap) { /* parallel arrays, one capacity: it grows once all did */
    size_t c[6];
    for (size_t i = 0; i < 6; i++)
      c[i] = v->cap;
    CUCAP_RETURN_IF(!CUCAP_VEC_RESERVE(v->hashes, c[0], v->n + 1, 64) ||
                        !CUCAP_VEC_RESERVE(v->sizes, c[1], v->n + 1, 64) ||
                        !CUCAP_VEC_RESERVE(v->copy_seqs, c[2], v->n + 1, 64) ||
                        !CUCAP_VEC_RESERVE(v->launch_seqs, c[3], v->n + 1, 64) ||
                        !CUCAP_VEC_RESERVE(v->addrs, c[4], v->n + 1, 64) ||
                        !CUCAP_VEC_RESERVE(v->next_same_launch, c[5], v->n + 1, 64),
                    CUCAP_ERR_NOMEM);
    v->cap = c[0]; /* all grew alike */
  }
  uint64_t cs = cucap_fb_snapshot_copy_seq(s), ls = cucap_fb_snapshot_launch_seq(s);
  v->hashes[v->n] = rp_h(cucap_fb_mem_region_data(g));
  v->sizes[v->n] = cucap_fb_mem_region_size(g);
  v->copy_seqs[v->n] = cs;
  v->launch_seqs[v->n] = ls;
  v->addrs[v->n] = cucap_fb_mem_region_address(g);
  v->next_same_launch[v->n] = 0;
  v->n++;
  if (ls) { /* append to the launch's chain */
    uint64_t first = 0;
    if (!cucap_map_get(&v->by_launch, ls, &first) || !first) {
      CUCAP_RETURN_IF(!cucap_map_put(&v->by_launch, ls, v->n), CUCAP_ERR_NOMEM);
    } else {
      size_t i = (size_t)first - 1;
      while (v->next_same_launch[i])
        i = v->next_same_launch[i] - 1;
      v->next_same_launch[i] = v->n;
    }
  }
  CUCAP_RETURN_IF(!cucap_map_put(&v->copy_result, cs, v->n), CUCAP_ERR_NOMEM);
  return CUCAP_OK;
}

int rp_deferred_graph_copy_result(const rp_state *R, uint64_t launch_seq, size_t k,
                                  uint64_t *copy_seq, cucap_hash128 *h, uint64_t *size,
                                  uint64_t *addr) {
  uint64_t first = 0;
  if (!R->deferred || !launch_seq || !cucap_map_get(&R->deferred->by_launch, launch_seq, &first) ||
      !first)
    return 0;
  const struct rp_deferred *v = R->deferred;
  size_t i = (size_t)first - 1;
  for (; k; k--) {
    if (!v->next_same_launch[i])
      return 0;
    i = v->next_same_launch[i] - 1;
  }
  if (copy_seq)
    *copy_seq = v->copy_seqs[i];
  if (h)
    *h = v->hashes[i];
  if (size)
    *size = v->sizes[i];
  if (addr)
    *addr = v->addrs[i];
  return 1;
}

int rp_deferred_copy_result(const rp_state *R, uint64_t copy_seq,
                            cucap_hash128 *h, uint64_t *size) {
  uint64_t idx = 0;
  if (!R->deferred || !cucap_map_get(&R->deferred->copy_result, copy_seq, &idx) || !idx)
    return 0;
  *h = R->deferred->hashes[idx - 1];
  *size = R->deferred->sizes[idx - 1];
  return 1;
}

void rp_host_write(rp_state *R, const cucap_fb_snapshot *s) {
  size_t n = cucap_fb_snapshot_regions_len(s);
  if (R->capturing) {
    CUCAP_WARN("replay: host writes to managed memory during a stream capture "
               "not uploaded (record %" PRIu64 ")", R->rec_index);
    R->rep->ignored++;
    return;
  }
  R->d.df.CtxSynchronize(); /* the program's earlier GPU work comes first */
  for (size_t i = 0; i < n && !R->failed; i++) {
    const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
    uint64_t addr = cucap_fb_mem_region_address(g), size = cucap_fb_mem_region_size(g);
    cucap_hash128 h = rp_h(cucap_fb_mem_region_data(g));
    uint64_t bsz = 0;
    if (!cucap_fb_mem_region_data(g) || cucap_reader_blob_size(R->r, h, &bsz) != CUCAP_OK ||
        bsz != size || rp_grow(&R->buf.expect, &R->buf.expect_cap, size ? size : 1,
                               &R->buf.expect_pinned, R) != CUCAP_OK ||
        cucap_reader_blob_read(R->r, h, R->buf.expect, size) != CUCAP_OK) {
      CUCAP_WARN("replay: host write to managed memory at 0x%" PRIx64 " (%" PRIu64
                 " bytes): contents missing from the capture", addr, size);
      continue;
    }
    /* uploaded data like any other: pointers into moved ranges, texture
     * handles that are other numbers here */
    rp_patch_payload(R, R->buf.expect, size, addr, NULL);
    if (R->obj)
      rp_object_patch_upload(R, R->buf.expect, size, addr, 0);
    rp_cu(R, R->d.df.MemcpyHtoDAsync(rp_tr(R, addr), R->buf.expect, size, NULL),
          "cuMemcpyHtoD (host write to managed memory)");
    R->d.df.StreamSynchronize(NULL);
  }
  R->rep->executed++;
}

void rp_deferred_free(rp_state *R) {
  if (!R->deferred)
    return;
  cucap_map_free(&R->deferred->copy_result);
  cucap_map_free(&R->deferred->by_launch);
  free(R->deferred->hashes);
  free(R->deferred->sizes);
  free(R->deferred->copy_seqs);
  free(R->deferred->launch_seqs);
  free(R->deferred->addrs);
  free(R->deferred->next_same_launch);
  free(R->deferred);
  R->deferred = NULL;
}
