/* snapshot.c - device memory snapshots and launch hashes. See cucap_snapshot.h. */
#include "cucap_snapshot.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_recorder.h"
#include "cucap_schema.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* Pinned staging buffer, kept until its context goes (see
 * cucap_snapshot_release_staging); pageable (malloc) when pinned memory cannot
 * be had, e.g. late in process teardown: slower copies, same bytes. */
static void *g_staging;
static int g_staging_pageable;

typedef struct region_out {
  uint64_t address, size;
  cucap_hash128 hash;
  int ok;
} region_out;

/* Copies [src, src+size) through the staging buffer; feeds each chunk to
 * the hash state and, if dst != NULL, into dst. g_mu held. */
static int read_region(const cucap_snapshot_ops *ops, uint64_t src, uint64_t size,
                       cucap_hash_state *hs, uint8_t *dst) {
  for (uint64_t off = 0; off < size;) {
    size_t n = size - off > CUCAP_SNAPSHOT_STAGING ? CUCAP_SNAPSHOT_STAGING
                                                    : (size_t)(size - off);
    if (ops->copy_dtoh(ops->user, g_staging, src + off, n) != 0)
      return 0;
    if (hs)
      cucap_hash_state_update(hs, g_staging, n);
    if (dst)
      memcpy(dst + off, g_staging, n);
    off += n;
  }
  return 1;
}

/* The staging buffer, taken once and kept; and the device synchronised so
 * that memory holds what the launches wrote. g_mu held. */
static cucap_status staging_ready(const cucap_snapshot_ops *ops, size_t n) {
  /* Nothing live: an empty snapshot still records that memory was checked,
   * and needs no staging buffer (the context may already be half gone). */
  if (n && !g_staging && ops->alloc_host(ops->user, &g_staging, CUCAP_SNAPSHOT_STAGING) != 0) {
    g_staging = malloc(CUCAP_SNAPSHOT_STAGING);
    g_staging_pageable = g_staging != NULL;
  }
  if (n && !g_staging) {
    CUCAP_WARN("snapshot: no pinned staging buffer");
    return CUCAP_ERR_CUDA;
  }
  if (n && ops->synchronize && ops->synchronize(ops->user) != 0)
    CUCAP_WARN("snapshot: synchronize failed; contents may be in flight");
  return CUCAP_OK;
}

/* Reads the n allocations into out[]: stored as blobs (store) or hashed. A
 * region that cannot be read is left out (out[i].ok == 0). g_mu held. */
static cucap_status read_regions(const cucap_snapshot_ops *ops,
                                 const cucap_tracked_alloc *allocs, size_t n, int store,
                                 region_out *out) {
  cucap_hash_state *hs = cucap_hash_state_create();
  CUCAP_RETURN_IF(!hs, CUCAP_ERR_NOMEM);
  for (size_t i = 0; i < n; i++) {
    out[i].address = allocs[i].address;
    out[i].size = allocs[i].size;
    if (!allocs[i].size)
      continue;
    if (store) {
      uint8_t *buf = allocs[i].size <= SIZE_MAX ? malloc((size_t)allocs[i].size) : NULL;
      if (!buf) {
        CUCAP_WARN("snapshot: no memory for %llu bytes at 0x%llx",
                   (unsigned long long)allocs[i].size, (unsigned long long)allocs[i].address);
        continue;
      }
      if (read_region(ops, allocs[i].address, allocs[i].size, NULL, buf))
        out[i].ok = cucap_rec_blob(buf, (size_t)allocs[i].size, &out[i].hash) == CUCAP_OK;
      free(buf);
    } else {
      /* fresh state per region */
      cucap_hash_state_destroy(hs);
      hs = cucap_hash_state_create();
      if (!hs)
        break;
      if (read_region(ops, allocs[i].address, allocs[i].size, hs, NULL)) {
        out[i].hash = cucap_hash_state_digest(hs);
        out[i].ok = 1;
      }
    }
    if (!out[i].ok)
      CUCAP_WARN("snapshot: region 0x%llx (%llu bytes) not read",
                 (unsigned long long)allocs[i].address, (unsigned long long)allocs[i].size);
  }
  cucap_hash_state_destroy(hs);
  return CUCAP_OK;
}

/* The Snapshot (store) or LaunchHash record of the regions read. */
static cucap_status emit_regions(const region_out *out, size_t n, int store, uint8_t reason,
                                 uint64_t launch_index) {
  cucap_status st = CUCAP_ERR_NOMEM;
  cucap_fbb *b = cucap_fbb_create(256 + n * 64);
  cucap_fb_ref *refs = malloc((n ? n : 1) * sizeof *refs);
  if (b && refs) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (!out[i].ok)
        continue;
      cucap_fb_hash128 h = {out[i].hash.lo, out[i].hash.hi};
      cucap_fb_mem_region_start(b);
      cucap_fb_mem_region_add_address(b, out[i].address);
      cucap_fb_mem_region_add_size(b, out[i].size);
      if (store)
        cucap_fb_mem_region_add_data(b, &h);
      else
        cucap_fb_mem_region_add_hash(b, &h);
      refs[k++] = cucap_fb_mem_region_end(b);
    }
    cucap_fb_ref regions = cucap_fbb_vector_refs(b, refs, k);
    cucap_fb_ref body;
    uint8_t type;
    if (store) {
      cucap_fb_snapshot_start(b);
      cucap_fb_snapshot_add_reason(b, reason);
      cucap_fb_snapshot_add_launch_index(b, launch_index);
      cucap_fb_snapshot_add_regions(b, regions);
      body = cucap_fb_snapshot_end(b);
      type = CUCAP_FB_BODY_SNAPSHOT;
    } else {
      cucap_fb_launch_hash_start(b);
      cucap_fb_launch_hash_add_launch_index(b, launch_index);
      cucap_fb_launch_hash_add_regions(b, regions);
      body = cucap_fb_launch_hash_end(b);
      type = CUCAP_FB_BODY_LAUNCHHASH;
    }
    st = cucap_rec_emit(b, type, body, 0);
  }
  free(refs);
  cucap_fbb_destroy(b);
  return st;
}

static cucap_status take(cucap_tracker *t, const cucap_snapshot_ops *ops, int store,
                         uint8_t reason, uint64_t launch_index) {
  CUCAP_RETURN_IF(!t || !ops || !ops->copy_dtoh || !ops->alloc_host, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(!cucap_rec_active(), CUCAP_ERR_STATE);
  cucap_tracked_alloc *allocs = NULL;
  size_t n = 0;
  CUCAP_FORWARD(cucap_tracker_alloc_list_device(t, &allocs, &n));
  region_out *out = calloc(n ? n : 1, sizeof *out);
  cucap_status st = CUCAP_ERR_NOMEM;
  pthread_mutex_lock(&g_mu);
  if (!out)
    goto done;
  st = staging_ready(ops, n);
  if (st == CUCAP_OK)
    st = read_regions(ops, allocs, n, store, out);
  if (st == CUCAP_OK)
    st = emit_regions(out, n, store, reason, launch_index);
done:
  pthread_mutex_unlock(&g_mu);
  free(out);
  free(allocs);
  return st;
}

cucap_status cucap_snapshot_take(cucap_tracker *t, const cucap_snapshot_ops *ops,
                                 uint8_t reason, uint64_t launch_index) {
  return take(t, ops, 1, reason, launch_index);
}

cucap_status cucap_snapshot_hash_launch(cucap_tracker *t, const cucap_snapshot_ops *ops,
                                        uint64_t launch_index) {
  return take(t, ops, 0, 0, launch_index);
}

void cucap_snapshot_release_staging(const cucap_snapshot_ops *ops) {
  pthread_mutex_lock(&g_mu);
  if (g_staging && g_staging_pageable)
    free(g_staging);
  else if (g_staging && ops && ops->free_host)
    ops->free_host(ops->user, g_staging);
  g_staging = NULL;
  g_staging_pageable = 0;
  pthread_mutex_unlock(&g_mu);
}
