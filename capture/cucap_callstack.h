/* cucap_callstack.h - host callstacks of recorded calls. Used by interpose/ hooks inside the recorded application.
 *
 * cucap_rec_stack_id() walks the calling thread's stack (mode and depth from
 * CUCAP_OPTIONS stack=off|fp|unwind, stack_depth=N, capped at
 * CUCAP_CALLSTACK_MAX_DEPTH), skips the frames inside libcucap itself, and
 * returns a small id: identical stacks get the same id (dedup by a 64-bit hash
 * of the return addresses; a collision would merge two stacks). The first time
 * an id is seen a Callstack record is emitted before the call's record; a
 * ModuleMap record (every loaded object: path, GNU build-id, load bias,
 * address range) is emitted before the first Callstack and again whenever a
 * new stack has a frame outside all known objects (dlopen'ed libraries).
 *
 * Cost (measured by tests/unit/test_callstack.c): a repeated stack costs a
 * verification of its cached frame chain (independent loads, no pointer
 * chase; exact: the id a walk would give) or, when the chain is new on this
 * thread, the walk plus a thread-local cache probe; no lock, no malloc, no
 * syscall. Per thread (fp mode): ~100 KB allocated at its first stack, freed
 * at its exit; its stack bound is read once (pthread_getattr_np). Nothing
 * returned needs freeing. */
#ifndef CUCAP_CALLSTACK_H
#define CUCAP_CALLSTACK_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUCAP_CALLSTACK_MAX_DEPTH 64

/* 0 when stacks are off or recording is inactive; otherwise an id >= 1. */
uint32_t cucap_rec_stack_id(void);

/* Return addresses of the caller's stack, innermost first, without frames
 * inside libcucap. mode: cucap_rec_stack_mode (FP or UNWIND). Returns the
 * number of frames written (<= max). Async-signal-unsafe (unwind mode). */
size_t cucap_callstack_walk(int mode, uint64_t *frames, size_t max);

/* Emits a ModuleMap record of the objects loaded now (recording must be
 * active). Called on the first callstack and on unknown frames; callers may
 * call it at any time (e.g. after cuModuleLoad of a dlopen'ed library). */
cucap_status cucap_callstack_emit_module_map(void);

#ifdef __cplusplus
}
#endif
#endif
