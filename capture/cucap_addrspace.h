/* cucap_addrspace.h - the recorded process's address space, for ModuleMap
 * records (format 1.4): what `cucap diff` needs to tell a host address in a
 * kernel argument (a stack scalar, a heap object, a stale pointer in struct
 * padding) from a value, by the kind of region it falls in.
 *
 * Read from /proc/self/maps at the moment of the call (open/read/close, no
 * stdio, no CUDA); neighbouring mappings of one kind and one path are
 * merged (a shared object's segments become one range, adjacent anonymous
 * mappings one range). Used by capture/callstack.c inside the application:
 * never exits, prints or calls CUDA. Thread-safe (no shared state).
 * Nothing returned needs freeing: the vector lives in the caller's builder. */
#ifndef CUCAP_ADDRSPACE_H
#define CUCAP_ADDRSPACE_H

#include <stddef.h>

#include "cucap_fb_builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most ranges stored in one map (a process with more mappings keeps the
 * first ones, in address order). */
#define CUCAP_ADDRSPACE_MAX_RANGES 65536

/* Builds a [AddressRange] vector of the address space into b (sorted by
 * start). Returns its ref, or 0 when /proc/self/maps cannot be read or
 * memory runs out (the ModuleMap is then written without ranges). */
cucap_fb_ref cucap_addrspace_build(cucap_fbb *b);

/* Parses maps text (the format of /proc/PID/maps) of len bytes into b, as
 * cucap_addrspace_build does (exposed for tests and fuzzing). */
cucap_fb_ref cucap_addrspace_build_from(cucap_fbb *b, const char *text, size_t len);

#ifdef __cplusplus
}
#endif
#endif
