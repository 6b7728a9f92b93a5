/* cucap_stacktab.h - the host callstacks of a capture, symbolized: the
 * Callstack records (id -> return addresses) and the ModuleMap records
 * (loaded objects) of a capture, fed in file order, and frames formatted as
 * `cucap dump` prints them ("function+0x1a (libfoo.so+0x11a3a)",
 * "libfoo.so+0x11a3a", "0x7f..."), through symbols/symbolize.c.
 *
 * Used by the readers that report where in the program something happens
 * (cucap analyze, the profile writers). A frame is formatted with the
 * ModuleMap that was current when the stack was first used (a later
 * ModuleMap may have dropped an unloaded object), so feed every record in
 * file order and call cucap_stacktab_use when a record refers to a stack.
 *
 * Ownership: strings returned stay valid until the table is destroyed. Not
 * thread-safe: one table per thread. */
#ifndef CUCAP_STACKTAB_H
#define CUCAP_STACKTAB_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_stacktab cucap_stacktab;

/* symbolize = 0: frames print as "0x..." and no object file is opened. */
cucap_status cucap_stacktab_create(int symbolize, cucap_stacktab **out);
void cucap_stacktab_destroy(cucap_stacktab *t); /* accepts NULL */

/* Takes what it needs from a verified Record (const cucap_fb_record *):
 * Callstack and ModuleMap bodies are copied; other records are ignored.
 * Out of memory only loses that stack or map (frames then print as hex). */
void cucap_stacktab_feed(cucap_stacktab *t, const void *record);

/* Notes that stack `id` is used now: it is formatted with the ModuleMap
 * current at its first use. Cheap; call for every record with a stack. */
void cucap_stacktab_use(cucap_stacktab *t, uint32_t id);

/* 1 if a Callstack record of id was fed. */
int cucap_stacktab_known(const cucap_stacktab *t, uint32_t id);

/* The formatted frames of stack id, innermost first, or NULL (unknown id,
 * out of memory). *n receives the count. *first_app receives the index of
 * the first frame that is not inside the CUDA driver, runtime, CUPTI or
 * cucap itself (libcuda, libcudart, libcupti, libcucap, libnvidia-*), or 0
 * when every frame is. Formats lazily, once per stack. */
const char *const *cucap_stacktab_frames(cucap_stacktab *t, uint32_t id,
                                         size_t *n, size_t *first_app);

#ifdef __cplusplus
}
#endif
#endif
