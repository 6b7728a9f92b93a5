/* cucap_verify.h - `replay --verify`: an observer of the replay
 * (cucap_replay_observer.h) that compares what the replay copies back and
 * snapshots with what the recording holds, and tells nondeterministic bytes
 * (they differ between replays) from real differences.
 *
 * The caller creates the verifier, puts its observer first in
 * cucap_replay_options.observers and runs the replay; the verdict goes into
 * the cucap_replay_report at the end of the run. cucap_verify_replay_run
 * does all three. Ownership: the verifier is the caller's
 * (cucap_verify_destroy, NULL ok); its observer stays valid until then.
 * The options it was created with are read during the run and must outlive
 * it. */
#ifndef CUCAP_VERIFY_H
#define CUCAP_VERIFY_H

#include "cucap_replay.h"
#include "cucap_replay_observer.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_verify cucap_verify;

/* NULL when out of memory. Reads o->verify, o->verify_passes, o->strict. */
cucap_verify *cucap_verify_create(const cucap_replay_options *o);
const cucap_replay_observer *cucap_verify_observer(cucap_verify *v);
void cucap_verify_destroy(cucap_verify *v);

/* cucap_replay_run with the verifier first among o's observers when
 * o->verify is set (else a plain cucap_replay_run). Same return and report
 * as cucap_replay_run. */
cucap_status cucap_verify_replay_run(const char *path, const cucap_replay_options *o,
                                     cucap_replay_report *rep);

#ifdef __cplusplus
}
#endif
#endif
