/* cucap_snapshot.h - device memory snapshots and launch hashes. Used by the interposer (interpose/custom_snapshot.c),
 * which supplies the driver calls: capture/ never calls CUDA itself.
 *
 * A snapshot copies every live device allocation known to the tracker to
 * the host (through one reused pinned staging buffer, in chunks), stores the
 * contents as blobs and emits a Snapshot record; a launch hash stores only
 * XXH3-128 content hashes (LaunchHash record) so a replayer can find the
 * first kernel whose results differ. Both synchronize the device first.
 * Thread-safe (serialised internally). Must run with the interposer's
 * re-entrancy guard held (the ops call the real driver). */
#ifndef CUCAP_SNAPSHOT_H
#define CUCAP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"
#include "cucap_tracker.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_snapshot_ops {
  void *user;
  /* each returns 0 on success */
  int (*alloc_host)(void *user, void **p, size_t size); /* pinned staging */
  void (*free_host)(void *user, void *p);
  int (*copy_dtoh)(void *user, void *dst, uint64_t src, size_t size);
  int (*synchronize)(void *user);
} cucap_snapshot_ops;

/* Snapshot{reason, launch_index, regions with data blobs}. reason is a
 * cucap.fb.SnapshotReason. Regions that cannot be read are logged and left
 * out. */
cucap_status cucap_snapshot_take(cucap_tracker *t, const cucap_snapshot_ops *ops,
                                 uint8_t reason, uint64_t launch_index);

/* LaunchHash{launch_index, regions with content hashes only}. */
cucap_status cucap_snapshot_hash_launch(cucap_tracker *t, const cucap_snapshot_ops *ops,
                                        uint64_t launch_index);

/* Staging buffer size (bytes) used per chunk. */
#define CUCAP_SNAPSHOT_STAGING (8u << 20)

/* Frees the pinned staging buffer (call before its context is destroyed:
 * pinned memory belongs to the context that allocated it). The next snapshot
 * allocates a new one. */
void cucap_snapshot_release_staging(const cucap_snapshot_ops *ops);

#ifdef __cplusplus
}
#endif
#endif
