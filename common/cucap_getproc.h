/* cucap_getproc.h - one way to fetch a CUDA driver entry point from a
 * dlopen'ed libcuda: cuGetProcAddress_v2 with the CUDA version of the PFN
 * type the caller calls through (cuMemAlloc at 3020 is cuMemAlloc_v2), and
 * where the driver has no cuGetProcAddress_v2 or refuses the name, dlsym of
 * the exported symbol (with "_ptsz" appended first for per-thread
 * default-stream variants). Used by the replayer's driver table, its graph
 * and host-memory tables, and the profiler's device probes.
 *
 * The returned pointer belongs to the driver and stays valid while lib is
 * loaded; NULL when the driver has no such entry point. */
#ifndef CUCAP_GETPROC_H
#define CUCAP_GETPROC_H

#ifdef __cplusplus
extern "C" {
#endif

/* lib: a dlopen handle of libcuda. exported: the exported name to fall
 * back to (NULL: none). per_thread: ask for the per-thread default-stream
 * variant (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM). */
void *cucap_getproc(void *lib, const char *name, int cuda_version, const char *exported,
                    int per_thread);

#ifdef __cplusplus
}
#endif
#endif
