/* cucap_tracker.h - what the recorder knows about live driver objects: device allocations (interval lookup), kernel
 * functions (name + parameter layout, looked up on every launch), modules
 * (kept image copy for parse-on-demand), streams and events.
 *
 * Thread-safe. The handle maps (functions, modules, streams, events) are
 * read lock-free: open addressing with atomic slots, writers serialised by a
 * mutex, grown tables and replaced entries are retired (kept until
 * cucap_tracker_destroy) so a reader never touches freed memory. Memory thus
 * grows with handle churn (an entry per created function/module), which is
 * small next to the images themselves. Allocations live in a sorted interval
 * array under a rwlock (launches do not consult it).
 *
 * Ownership: the tracker copies everything it is given. A
 * `const cucap_tracked_fn *` stays valid until the tracker is destroyed, even
 * after the function is removed or replaced. Arrays returned through
 * `**out` are malloc'ed; the caller frees them with free(). */
#ifndef CUCAP_TRACKER_H
#define CUCAP_TRACKER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_fatbin.h"
#include "cucap_format.h"
#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_tracker cucap_tracker;

cucap_tracker *cucap_tracker_create(void); /* NULL on OOM */
void cucap_tracker_destroy(cucap_tracker *t); /* accepts NULL */
/* The process-wide tracker used by the interposer; created on first use,
 * never destroyed (the app may call the driver from atexit handlers).
 * NULL only on OOM. */
cucap_tracker *cucap_tracker_global(void);

/* ---- allocations ---- */
typedef struct cucap_tracked_alloc {
  uint64_t address;
  uint64_t size;
  uint64_t flags;
  uint8_t kind;    /* cucap.fb.AllocKind */
  uint8_t device_memory; /* 1: device-resident contents (snapshot these) */
  uint64_t context; /* CUcontext current at allocation (0: unknown) */
} cucap_tracked_alloc;

/* Adds [address, address+size); an existing entry at the same address is
 * replaced (the driver reuses addresses after a free we did not see). */
cucap_status cucap_tracker_alloc_add(cucap_tracker *t, const cucap_tracked_alloc *a);
/* Removes the allocation starting at address; 1 and *out (may be NULL) if
 * found. */
int cucap_tracker_alloc_remove(cucap_tracker *t, uint64_t address,
                               cucap_tracked_alloc *out);
/* Removes every allocation made in `context` (context destroyed/reset);
 * returns how many. */
size_t cucap_tracker_alloc_remove_context(cucap_tracker *t, uint64_t context);
/* The allocation containing address; 1 if found. */
int cucap_tracker_alloc_find(cucap_tracker *t, uint64_t address,
                             cucap_tracked_alloc *out);
/* Copy of all allocations with device_memory set (sorted by address) in a
 * malloc'ed array; *count its length. */
cucap_status cucap_tracker_alloc_list_device(cucap_tracker *t,
                                             cucap_tracked_alloc **out,
                                             size_t *count);

/* ---- functions ---- */
typedef struct cucap_tracked_fn {
  uint64_t handle;
  uint64_t module;        /* CUmodule / CUlibrary / CUkernel */
  uint8_t kind;           /* cucap.fb.FunctionKind */
  uint8_t param_source;   /* cucap.fb.ParamSource */
  /* a kernel whose cuKernelGetFunction returned its own handle (the mock's
   * driver does) and whose KernelFunction body was recorded once:
   * cucap_tracker_fn_mark_own_function */
  _Atomic uint8_t own_function_recorded;
  uint32_t nparams;
  uint32_t param_bytes;
  const char *name;       /* NUL-terminated, owned by the tracker */
  cucap_param_layout params[]; /* nparams entries */
} cucap_tracked_fn;

cucap_status cucap_tracker_fn_add(cucap_tracker *t, uint64_t handle,
                                  uint64_t module, uint8_t kind,
                                  const char *name,
                                  const cucap_param_layout *params,
                                  uint32_t nparams, uint32_t param_bytes,
                                  uint8_t param_source);
/* Lock-free; NULL if unknown. */
const cucap_tracked_fn *cucap_tracker_fn_find(cucap_tracker *t, uint64_t handle);
/* Sets own_function_recorded of the entry of handle, if any. Lock-free. */
void cucap_tracker_fn_mark_own_function(cucap_tracker *t, uint64_t handle);
/* Removes every function whose module is `module` (module unload). */
void cucap_tracker_fn_remove_module(cucap_tracker *t, uint64_t module);

/* ---- modules ---- */
typedef struct cucap_tracked_module {
  uint64_t handle;
  uint8_t kind;           /* cucap.fb.ModuleKind */
  uint8_t format;         /* cucap.fb.ImageFormat of the stored image */
  cucap_hash128 hash;
  size_t image_size;
} cucap_tracked_module;

/* image (may be NULL) is copied and kept for cucap_tracker_module_params. */
cucap_status cucap_tracker_module_add(cucap_tracker *t,
                                      const cucap_tracked_module *m,
                                      const void *image);
int cucap_tracker_module_find(cucap_tracker *t, uint64_t handle,
                              cucap_tracked_module *out);
/* Parameter layout of `kernel` parsed from the module's kept image (see
 * cucap_image_kernel_params). CUCAP_ERR_NOT_FOUND if unknown. */
cucap_status cucap_tracker_module_params(cucap_tracker *t, uint64_t module,
                                         const char *kernel,
                                         cucap_param_layout *out, size_t max,
                                         size_t *count, uint32_t *total_bytes);
/* Forgets the module, its image copy and its functions. */
void cucap_tracker_module_remove(cucap_tracker *t, uint64_t handle);

/* ---- streams and events: handle -> flags ---- */
cucap_status cucap_tracker_stream_add(cucap_tracker *t, uint64_t handle, uint32_t flags);
int cucap_tracker_stream_find(cucap_tracker *t, uint64_t handle, uint32_t *flags);
void cucap_tracker_stream_remove(cucap_tracker *t, uint64_t handle);
cucap_status cucap_tracker_event_add(cucap_tracker *t, uint64_t handle, uint32_t flags);
int cucap_tracker_event_find(cucap_tracker *t, uint64_t handle, uint32_t *flags);
void cucap_tracker_event_remove(cucap_tracker *t, uint64_t handle);

#ifdef __cplusplus
}
#endif
#endif
