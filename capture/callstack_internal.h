/* callstack_internal.h - what callstack.c (walks, caches, the stack table)
 * and callstack_map.c (the module map) share. Not a public header. */
#ifndef CUCAP_CALLSTACK_INTERNAL_H
#define CUCAP_CALLSTACK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Serialises module-map scans and the process-wide stack table
 * (callstack.c's intern_locked). */
extern pthread_mutex_t cs_mu;
/* Set (release) once the first ModuleMap record was emitted; the stack walk
 * reads it (acquire) on every call. */
extern atomic_int cs_map_emitted;

/* cs_mu held: 1 if the loader loaded or unloaded objects since the last
 * scan. */
int cs_loader_changed_locked(void);
/* cs_mu held: rescans the module map (a ModuleMap record, timed for
 * --stats) and the walks' executable map. */
void cs_rescan_locked(void);
/* cs_mu held: 1 if pc lies in an object of the last scan. */
int cs_known_frame_locked(uintptr_t pc);
/* callstack.c: rebuilds the executable map the walks check (under its own
 * lock). */
void cs_xmap_rescan(void);

#endif
