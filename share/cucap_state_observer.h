/* cucap_state_observer.h - device memory read back at one point of a replay:
 * the replay observer behind `cucap trim --replay` and `extract --replay`.
 *
 * The caller knows which device regions are live at record `at` of the
 * capture (from its Alloc/Free records) and hands them over. In the first
 * pass, at op_before of the first executed record whose position is >= at,
 * the observer synchronises the current context and copies every `before`
 * region to the host, storing each as a blob in the writer (its hash goes
 * into the region). With `after` regions it lets record `at` execute and
 * reads them again at its op_after (a launch: its results); then it ends
 * the replay (cucap_replay_session_stop) - nothing later is executed.
 *
 * The observer fails the replay (cucap_replay_session_fail) when a region
 * cannot be read, or when record `at` comes while a stream is being
 * captured (nothing may be read then). It needs the driver entry point
 * cuCtxSynchronize only; it never changes the current context.
 *
 * Ownership: the region arrays belong to the caller and must outlive the
 * observer; the writer must stay open while the replay runs. Regions must
 * be small enough to be read into host memory at once (the planner splits
 * large allocations). */
#ifndef CUCAP_STATE_OBSERVER_H
#define CUCAP_STATE_OBSERVER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_format.h"
#include "cucap_replay_observer.h"
#include "cucap_status.h"
#include "cucap_writer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_state_region {
  uint64_t address, size;   /* recorded device address */
  cucap_hash128 data;       /* set when read */
  int read;                 /* 1 once read */
} cucap_state_region;

typedef struct cucap_state_observer cucap_state_observer;

/* before/after may be NULL when their count is 0. */
cucap_status cucap_state_observer_create(cucap_writer *w, uint64_t at,
                                         cucap_state_region *before, size_t nbefore,
                                         cucap_state_region *after, size_t nafter,
                                         cucap_state_observer **out);
void cucap_state_observer_destroy(cucap_state_observer *o); /* NULL ok */

/* The observer table to put into cucap_replay_options.observers; owned by
 * o, valid until it is destroyed. */
const cucap_replay_observer *cucap_state_observer_get(cucap_state_observer *o);

/* FNV-1a 64 (offset basis 14695981039346656037, prime 1099511628211) of the
 * bytes of the `after` regions, concatenated in array order: the checksum
 * `cucap extract` prints and its emitted program recomputes. */
uint64_t cucap_state_observer_after_checksum(const cucap_state_observer *o);

/* After the replay: CUCAP_OK when every region was read, else why not
 * (into msg). */
cucap_status cucap_state_observer_result(const cucap_state_observer *o, char *msg,
                                         size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif
