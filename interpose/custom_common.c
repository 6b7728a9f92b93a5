/* custom_common.c - helpers of the semantic hooks: blobs, JIT options, parameter layouts, argument blocks.
 * See custom_internal.h. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

static atomic_int g_blob_errors;

int cx_blob(const void *data, size_t size, cucap_fb_hash128 *out) {
  cucap_hash128 h;
  cucap_status st = cucap_rec_blob(data, size, &h);
  if (st != CUCAP_OK) {
    /* STATE: not recording (any more); a writer error was reported once */
    if (st != CUCAP_ERR_STATE && atomic_fetch_add(&g_blob_errors, 1) < 3)
      CUCAP_ERROR("storing a %zu-byte blob failed: %s", size, cucap_status_str(st));
    return 0;
  }
  *out = cx_fbh(h);
  return 1;
}

static int jit_option_is_pointer(int o, int is_library_opt) {
  if (is_library_opt)
    return o == CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE;
  switch (o) {
  case CU_JIT_WALL_TIME:
  case CU_JIT_INFO_LOG_BUFFER:
  case CU_JIT_ERROR_LOG_BUFFER:
  case CU_JIT_GLOBAL_SYMBOL_NAMES:
  case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
  case CU_JIT_REFERENCED_KERNEL_NAMES:
  case CU_JIT_REFERENCED_VARIABLE_NAMES:
    return 1;
  default:
    return 0;
  }
}

cucap_fb_ref cx_jit_options(cucap_fbb *b, unsigned n, const int *opts,
                            void *const *vals, int is_library_opt) {
  if (!n || !opts || n > 256)
    return 0;
  cucap_fb_ref refs[256];
  for (unsigned i = 0; i < n; i++) {
    uint64_t v = 0;
    if (vals && !jit_option_is_pointer(opts[i], is_library_opt))
      v = CX_U64(vals[i]);
    cucap_fb_jit_option_start(b);
    cucap_fb_jit_option_add_option(b, opts[i]);
    cucap_fb_jit_option_add_value(b, v);
    refs[i] = cucap_fb_jit_option_end(b);
  }
  return cucap_fbb_vector_refs(b, refs, n);
}

void cx_guarded(void (*fn)(void)) {
  cucap_rec_thread *th = cucap_rec_thread_get();
  if (th) {
    th->depth++;
    th->audit_expect = 0;
  }
  fn();
  if (th)
    th->depth--;
}

uint64_t cx_current_ctx(void) {
  CUcontext ctx = NULL;
  if (cucap_real.cuCtxGetCurrent && cucap_real.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS)
    return CX_U64(ctx);
  return 0;
}

void *cx_read_file(const char *path, size_t *size) {
  if (!path)
    return NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  void *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
      /* +1: a PTX file is passed on as a NUL-terminated string */
      buf = calloc(1, (size_t)n + 1);
      if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      }
      *size = (size_t)n;
    }
  }
  fclose(f);
  return buf;
}

/* ------------------------------------------------------ parameter layouts */

#define CX_MAX_PARAMS 1024

const cucap_tracked_fn *cx_function_learn(uint64_t handle, uint64_t module,
                                          uint8_t kind, const char *name) {
  cucap_param_layout *p = malloc(CX_MAX_PARAMS * sizeof *p);
  if (!p)
    return NULL;
  size_t n = 0;
  uint32_t total = 0;
  uint8_t source = CUCAP_FB_PARAMSOURCE_NONE;
  int driver_ok = 0;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  for (size_t i = 0; i < CX_MAX_PARAMS; i++) {
    size_t off = 0, sz = 0;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (kind == CUCAP_FB_FUNCTIONKIND_KERNEL) {
      if (cucap_real.cuKernelGetParamInfo)
        r = cucap_real.cuKernelGetParamInfo((CUkernel)(uintptr_t)handle, i, &off, &sz);
    } else if (cucap_real.cuFuncGetParamInfo) {
      r = cucap_real.cuFuncGetParamInfo((CUfunction)(uintptr_t)handle, i, &off, &sz);
    }
    if (r != CUDA_SUCCESS) {
      /* INVALID_VALUE past the last parameter is the normal end */
      driver_ok = (r == CUDA_ERROR_INVALID_VALUE);
      break;
    }
    p[n].offset = (uint32_t)off;
    p[n].size = (uint32_t)sz;
    if (off + sz > total)
      total = (uint32_t)(off + sz);
    n++;
  }
  cx_relax_end(&rx);
  if (driver_ok) {
    source = CUCAP_FB_PARAMSOURCE_DRIVER;
  } else {
    /* older driver / failure: the cubin's .nv.info from the kept image */
    size_t cnt = 0;
    uint32_t tot = 0;
    n = 0;
    total = 0;
    if (name && cucap_tracker_module_params(cx_tracker(), module, name, p,
                                            CX_MAX_PARAMS, &cnt, &tot) == CUCAP_OK) {
      n = cnt < CX_MAX_PARAMS ? cnt : CX_MAX_PARAMS;
      total = tot;
      source = CUCAP_FB_PARAMSOURCE_NVINFO;
    }
  }
  if (total > CX_MAX_PARAM_BYTES)
    total = CX_MAX_PARAM_BYTES;
  cucap_status st = cucap_tracker_fn_add(cx_tracker(), handle, module, kind, name,
                                         p, (uint32_t)n, total, source);
  free(p);
  if (st != CUCAP_OK)
    return NULL;
  return cucap_tracker_fn_find(cx_tracker(), handle);
}

cucap_fb_ref cx_function_body(cucap_fbb *b, const cucap_tracked_fn *f) {
  return cx_function_body_as(b, f, f->kind, f->module);
}

cucap_fb_ref cx_function_body_as(cucap_fbb *b, const cucap_tracked_fn *f, uint8_t kind,
                                 uint64_t module) {
  cucap_fb_ref name = f->name ? cucap_fbb_string(b, f->name, strlen(f->name)) : 0;
  cucap_fb_ref params = 0;
  if (f->nparams) {
    /* cucap_param_layout and cucap_fb_param_info share the layout {u32,u32} */
    _Static_assert(sizeof(cucap_param_layout) == sizeof(cucap_fb_param_info), "layout");
    params = cucap_fb_function_create_params(b, (const cucap_fb_param_info *)f->params,
                                             f->nparams);
  }
  cucap_fb_function_start(b);
  cucap_fb_function_add_kind(b, kind);
  cucap_fb_function_add_handle(b, f->handle);
  cucap_fb_function_add_module(b, module);
  if (name)
    cucap_fb_function_add_name(b, name);
  if (params)
    cucap_fb_function_add_params(b, params);
  cucap_fb_function_add_param_source(b, f->param_source);
  cucap_fb_function_add_param_bytes(b, f->param_bytes);
  return cucap_fb_function_end(b);
}

/* Records f's Function body as an extra record (before the call's own). */
static void fn_emit(const cucap_tracked_fn *f) {
  cucap_fbb *b = cucap_rec_builder();
  if (b) {
    cucap_fbb_reset(b);
    cucap_fb_ref body = cx_function_body(b, f);
    (void)cucap_rec_emit(b, CUCAP_FB_BODY_FUNCTION, body, 0);
  }
}

const cucap_tracked_fn *cx_kernel_learn(uint64_t k) {
  const cucap_tracked_fn *f = cucap_tracker_fn_find(cx_tracker(), k);
  if (f || !k)
    return f;
  const char *name = NULL;
  CUlibrary lib = NULL;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  int ok = cucap_real.cuKernelGetName &&
           cucap_real.cuKernelGetName(&name, (CUkernel)(uintptr_t)k) == CUDA_SUCCESS;
  if (ok && (!cucap_real.cuKernelGetLibrary ||
             cucap_real.cuKernelGetLibrary(&lib, (CUkernel)(uintptr_t)k) != CUDA_SUCCESS))
    lib = NULL; /* a library of its own (cudart's): found by name in a replay */
  cx_relax_end(&rx);
  if (!ok || !name)
    return NULL;
  f = cx_function_learn(k, CX_U64(lib), CUCAP_FB_FUNCTIONKIND_KERNEL, name);
  if (f)
    fn_emit(f);
  return f;
}

const cucap_tracked_fn *cx_function_for_launch(uint64_t handle) {
  const cucap_tracked_fn *f = cucap_tracker_fn_find(cx_tracker(), handle);
  if (f || !handle)
    return f;
  /* Slow path, once per handle: a CUfunction/CUkernel we did not see being
   * created (cudart passes CUkernel handles; enumerate APIs; export tables).
   * The driver answers cuFuncGetName/cuFuncGetModule for a CUkernel too,
   * with the library's module in the current context, which no record
   * defines: a handle whose module is unknown is tried as a CUkernel first
   * (the replay then finds it by name in its library). */
  const char *name = NULL;
  uint64_t module = 0;
  CUmodule mod = NULL;
  cucap_tracked_module tm;
  cx_relaxed rx;
  cx_relax_begin(&rx);
  int is_fn = cucap_real.cuFuncGetName &&
              cucap_real.cuFuncGetName(&name, (CUfunction)(uintptr_t)handle) == CUDA_SUCCESS;
  if (is_fn && cucap_real.cuFuncGetModule &&
      cucap_real.cuFuncGetModule(&mod, (CUfunction)(uintptr_t)handle) == CUDA_SUCCESS)
    module = CX_U64(mod);
  cx_relax_end(&rx);
  if (!is_fn || !cucap_tracker_module_find(cx_tracker(), module, &tm)) {
    if ((f = cx_kernel_learn(handle)))
      return f;
    if (!is_fn)
      return NULL;
  }
  f = cx_function_learn(handle, module, CUCAP_FB_FUNCTIONKIND_FUNCTION, name);
  if (f)
    fn_emit(f);
  return f;
}

/* ------------------------------------------------------------ arguments */

static void args_finish(cucap_fbb *b, const uint8_t *buf, size_t n, cx_args *out) {
  if (n <= CX_INLINE_ARGS_MAX) {
    out->vec = cucap_fb_launch_create_args(b, buf, n);
  } else if (cx_blob(buf, n, &out->blob)) {
    out->has_blob = 1;
  }
}

int cx_extra_buffer(void **extra, const void **ptr, size_t *size) {
  /* extra = {key, value, ..., CU_LAUNCH_PARAM_END}; bounded in case the app
   * passed garbage (the driver would reject it; we must not run away). */
  int have_size = 0;
  *ptr = NULL;
  *size = 0;
  for (int i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      *ptr = extra[i + 1];
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
      *size = *(const size_t *)extra[i + 1];
      have_size = 1;
    }
  }
  return have_size;
}

void cx_launch_args(cucap_fbb *b, const cucap_tracked_fn *f,
                    void **kernelParams, void **extra, cx_args *out) {
  memset(out, 0, sizeof *out);
  if (!kernelParams && extra) {
    const void *ptr;
    size_t size;
    int have_size = cx_extra_buffer(extra, &ptr, &size);
    out->from_extra = 1;
    if (ptr && have_size && size <= CX_MAX_PARAM_BYTES)
      args_finish(b, ptr, size, out);
    return;
  }
  if (!kernelParams || !f || !f->nparams)
    return;
  size_t total = f->param_bytes;
  if (total <= CX_INLINE_ARGS_MAX) {
    /* common case: on the stack, no malloc */
    uint8_t buf[CX_INLINE_ARGS_MAX];
    memset(buf, 0, total);
    for (uint32_t i = 0; i < f->nparams; i++) {
      const cucap_param_layout *p = &f->params[i];
      if (kernelParams[i] && p->offset <= total && p->size <= total - p->offset)
        memcpy(buf + p->offset, kernelParams[i], p->size);
    }
    args_finish(b, buf, total, out);
    return;
  }
  uint8_t *buf = calloc(1, total);
  if (!buf)
    return;
  for (uint32_t i = 0; i < f->nparams; i++) {
    const cucap_param_layout *p = &f->params[i];
    if (kernelParams[i] && p->offset <= total && p->size <= total - p->offset)
      memcpy(buf + p->offset, kernelParams[i], p->size);
  }
  args_finish(b, buf, total, out);
  free(buf);
}
