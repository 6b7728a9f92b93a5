/* custom_module.c - module, library, linker, global and function hooks.
 *
 * Images: the exact bytes the driver was given (format and size from
 * schema/fatbin.c; a fatbinary wrapper is followed to its fatbin; files are
 * read from disk) are stored once as a blob and kept in the tracker for
 * parameter layouts parsed on demand (.nv.info) when the driver cannot say. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "custom_internal.h"

typedef struct image_desc {
  const void *data;
  size_t size;
  uint8_t format;
  cucap_fb_hash128 hash;
  int has_hash;
  void *owned; /* malloc'ed (file contents), freed by image_release */
} image_desc;

static void image_from_memory(const void *image, image_desc *d) {
  memset(d, 0, sizeof *d);
  if (!image)
    return;
  cucap_image_info info;
  cucap_status st = cucap_image_detect(image, SIZE_MAX, &info);
  if (st != CUCAP_OK || !info.data) {
    CUCAP_WARN("module image of unknown format (%s): not stored", cucap_status_str(st));
    return;
  }
  d->data = info.data;
  d->size = info.data_size;
  d->format = (uint8_t)info.data_format;
}

static void image_from_file(const char *path, image_desc *d) {
  memset(d, 0, sizeof *d);
  size_t n = 0;
  void *buf = cx_read_file(path, &n);
  if (!buf) {
    CUCAP_WARN("cannot read module file %s: image not stored", path ? path : "(null)");
    return;
  }
  d->owned = buf;
  cucap_image_info info;
  /* n + 1: the reader appended a NUL, which a PTX file needs */
  if (cucap_image_detect(buf, n + 1, &info) == CUCAP_OK && info.data) {
    d->data = info.data;
    d->size = info.data_size;
    d->format = (uint8_t)info.data_format;
  } else {
    d->data = buf; /* unknown: keep the file verbatim */
    d->size = n;
    d->format = CUCAP_FB_IMAGEFORMAT_UNKNOWN;
  }
}

static void image_store(image_desc *d) {
  if (d->data && d->size)
    d->has_hash = cx_blob(d->data, d->size, &d->hash);
}

static void image_release(image_desc *d) { free(d->owned); }

typedef struct module_desc {
  uint8_t op, kind;
  uint64_t handle;
  const image_desc *img;
  const char *path;
  const char *name;
  int input_type;
  cucap_fb_ref jit, lib;
} module_desc;

static void module_emit(cucap_call *c, const module_desc *m) {
  cucap_fbb *b = c->b;
  cucap_fb_ref path = m->path ? cucap_fbb_string(b, m->path, strlen(m->path)) : 0;
  cucap_fb_ref name = m->name ? cucap_fbb_string(b, m->name, strlen(m->name)) : 0;
  cucap_fb_module_start(b);
  cucap_fb_module_add_op(b, m->op);
  cucap_fb_module_add_kind(b, m->kind);
  cucap_fb_module_add_handle(b, m->handle);
  if (m->img && m->img->has_hash) {
    cucap_fb_module_add_image(b, &m->img->hash);
    cucap_fb_module_add_image_size(b, m->img->size);
    cucap_fb_module_add_format(b, m->img->format);
  }
  if (path)
    cucap_fb_module_add_path(b, path);
  if (m->jit)
    cucap_fb_module_add_jit_options(b, m->jit);
  if (m->lib)
    cucap_fb_module_add_library_options(b, m->lib);
  if (name)
    cucap_fb_module_add_name(b, name);
  if (m->op == CUCAP_FB_MODULEOP_LINKADD)
    cucap_fb_module_add_input_type(b, m->input_type);
  c->body = cucap_fb_module_end(b);
  c->body_type = CUCAP_FB_BODY_MODULE;
}

static void module_loaded(cucap_call *c, CUresult r, uint8_t kind, uint64_t handle,
                          image_desc *img, const char *path, cucap_fb_ref jit,
                          cucap_fb_ref lib) {
  c->stack = cucap_rec_stack_id();
  if (r == CUDA_SUCCESS) {
    image_store(img);
    cucap_tracked_module tm = {handle, kind, img->format, {0, 0}, img->size};
    tm.hash.lo = img->hash.lo;
    tm.hash.hi = img->hash.hi;
    if (handle && cucap_tracker_module_add(cx_tracker(), &tm, img->data) != CUCAP_OK)
      CUCAP_WARN("module tracking failed (OOM)");
  }
  module_desc m = {CUCAP_FB_MODULEOP_LOAD, kind, handle, r == CUDA_SUCCESS ? img : NULL,
                   path, NULL, 0, jit, lib};
  module_emit(c, &m);
}

/* ---- cuModuleLoad* ---- */

void custom_module_load(cucap_call *c, CUresult r, CUmodule *mod, const char *fname) {
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS)
    image_from_file(fname, &img);
  module_loaded(c, r, CUCAP_FB_MODULEKIND_MODULE, r == CUDA_SUCCESS && mod ? CX_U64(*mod) : 0,
                &img, fname, 0, 0);
  image_release(&img);
}

void custom_module_load_data(cucap_call *c, CUresult r, CUmodule *mod, const void *image) {
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS)
    image_from_memory(image, &img);
  module_loaded(c, r, CUCAP_FB_MODULEKIND_MODULE, r == CUDA_SUCCESS && mod ? CX_U64(*mod) : 0,
                &img, NULL, 0, 0);
}

void custom_module_load_data_ex(cucap_call *c, CUresult r, CUmodule *mod, const void *image,
                                unsigned int n, CUjit_option *opts, void **vals) {
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS)
    image_from_memory(image, &img);
  cucap_fb_ref jit = cx_jit_options(c->b, n, (const int *)opts, vals, 0);
  module_loaded(c, r, CUCAP_FB_MODULEKIND_MODULE, r == CUDA_SUCCESS && mod ? CX_U64(*mod) : 0,
                &img, NULL, jit, 0);
}

void custom_module_load_fat_binary(cucap_call *c, CUresult r, CUmodule *mod,
                                   const void *fat) {
  custom_module_load_data(c, r, mod, fat);
}

void custom_module_unload(cucap_call *c, CUresult r, CUmodule hmod) {
  c->stack = cucap_rec_stack_id();
  if (r == CUDA_SUCCESS)
    cucap_tracker_module_remove(cx_tracker(), CX_U64(hmod));
  module_desc m = {CUCAP_FB_MODULEOP_UNLOAD, CUCAP_FB_MODULEKIND_MODULE, CX_U64(hmod),
                   NULL, NULL, NULL, 0, 0, 0};
  module_emit(c, &m);
}

/* ---- cuLibrary* ---- */

void custom_library_load_data(cucap_call *c, CUresult r, CUlibrary *lib, const void *code,
                              CUjit_option *jo, void **jv, unsigned int nj,
                              CUlibraryOption *lo, void **lv, unsigned int nl) {
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS)
    image_from_memory(code, &img);
  cucap_fb_ref jit = cx_jit_options(c->b, nj, (const int *)jo, jv, 0);
  cucap_fb_ref lopt = cx_jit_options(c->b, nl, (const int *)lo, lv, 1);
  module_loaded(c, r, CUCAP_FB_MODULEKIND_LIBRARY, r == CUDA_SUCCESS && lib ? CX_U64(*lib) : 0,
                &img, NULL, jit, lopt);
}

void custom_library_load_file(cucap_call *c, CUresult r, CUlibrary *lib, const char *path,
                              CUjit_option *jo, void **jv, unsigned int nj,
                              CUlibraryOption *lo, void **lv, unsigned int nl) {
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS)
    image_from_file(path, &img);
  cucap_fb_ref jit = cx_jit_options(c->b, nj, (const int *)jo, jv, 0);
  cucap_fb_ref lopt = cx_jit_options(c->b, nl, (const int *)lo, lv, 1);
  module_loaded(c, r, CUCAP_FB_MODULEKIND_LIBRARY, r == CUDA_SUCCESS && lib ? CX_U64(*lib) : 0,
                &img, path, jit, lopt);
  image_release(&img);
}

void custom_library_unload(cucap_call *c, CUresult r, CUlibrary lib) {
  c->stack = cucap_rec_stack_id();
  if (r == CUDA_SUCCESS)
    cucap_tracker_module_remove(cx_tracker(), CX_U64(lib));
  module_desc m = {CUCAP_FB_MODULEOP_UNLOAD, CUCAP_FB_MODULEKIND_LIBRARY, CX_U64(lib),
                   NULL, NULL, NULL, 0, 0, 0};
  module_emit(c, &m);
}

/* ---- cuLibraryGetModule ----
 * A library's module in the current context: functions looked up in it (or
 * launched through a handle whose cuFuncGetModule is it) name this handle,
 * which no load record defines. The LibraryModule record ties it to its
 * library, so a replay asks its own library for the module. The module
 * belongs to the library (the app never unloads it): tracked without an
 * image, forgotten when the handle is loaded or unloaded as a module. */
int custom_library_get_module_known(CUresult r, CUmodule *pmod, CUlibrary lib) {
  (void)lib;
  cucap_tracked_module tm;
  return r == CUDA_SUCCESS && pmod && *pmod &&
         cucap_tracker_module_find(cx_tracker(), CX_U64(*pmod), &tm);
}

void custom_library_get_module(cucap_call *c, CUresult r, CUmodule *pmod, CUlibrary lib) {
  c->stack = cucap_rec_stack_id();
  if (r != CUDA_SUCCESS || !pmod || !*pmod)
    return;
  cucap_tracked_module tm = {CX_U64(*pmod), CUCAP_FB_MODULEKIND_MODULE, 0, {0, 0}, 0};
  if (cucap_tracker_module_add(cx_tracker(), &tm, NULL) != CUCAP_OK)
    CUCAP_WARN("module tracking failed (OOM)");
  cucap_fb_module_start(c->b);
  cucap_fb_module_add_op(c->b, CUCAP_FB_MODULEOP_LIBRARYMODULE);
  cucap_fb_module_add_kind(c->b, CUCAP_FB_MODULEKIND_MODULE);
  cucap_fb_module_add_handle(c->b, CX_U64(*pmod));
  cucap_fb_module_add_library(c->b, CX_U64(lib));
  c->body = cucap_fb_module_end(c->b);
  c->body_type = CUCAP_FB_BODY_MODULE;
}

/* ---- cuLink* (the linked cubin becomes the image of LinkComplete) ---- */

void custom_link_create(cucap_call *c, CUresult r, unsigned int n, CUjit_option *opts,
                        void **vals, CUlinkState *out) {
  c->stack = cucap_rec_stack_id();
  cucap_fb_ref jit = cx_jit_options(c->b, n, (const int *)opts, vals, 0);
  module_desc m = {CUCAP_FB_MODULEOP_LINKCREATE, CUCAP_FB_MODULEKIND_LINK,
                   r == CUDA_SUCCESS && out ? CX_U64(*out) : 0, NULL, NULL, NULL, 0, jit, 0};
  module_emit(c, &m);
}

void custom_link_add_data(cucap_call *c, CUresult r, CUlinkState st, CUjitInputType type,
                          void *data, size_t size, const char *name, unsigned int n,
                          CUjit_option *opts, void **vals) {
  c->stack = cucap_rec_stack_id();
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS && data && size) {
    /* the size is given: store exactly those bytes */
    img.data = data;
    img.size = size;
    cucap_image_info info;
    img.format = cucap_image_detect(data, size, &info) == CUCAP_OK ? (uint8_t)info.format
                                                                 : CUCAP_FB_IMAGEFORMAT_UNKNOWN;
    if (type == CU_JIT_INPUT_OBJECT)
      img.format = CUCAP_FB_IMAGEFORMAT_OBJECT;
    else if (type == CU_JIT_INPUT_LIBRARY)
      img.format = CUCAP_FB_IMAGEFORMAT_LIBRARY;
    image_store(&img);
  }
  cucap_fb_ref jit = cx_jit_options(c->b, n, (const int *)opts, vals, 0);
  module_desc m = {CUCAP_FB_MODULEOP_LINKADD, CUCAP_FB_MODULEKIND_LINK, CX_U64(st),
                   &img, NULL, name, (int)type, jit, 0};
  module_emit(c, &m);
}

void custom_link_add_file(cucap_call *c, CUresult r, CUlinkState st, CUjitInputType type,
                          const char *path, unsigned int n, CUjit_option *opts,
                          void **vals) {
  c->stack = cucap_rec_stack_id();
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS) {
    image_from_file(path, &img);
    image_store(&img);
  }
  cucap_fb_ref jit = cx_jit_options(c->b, n, (const int *)opts, vals, 0);
  module_desc m = {CUCAP_FB_MODULEOP_LINKADD, CUCAP_FB_MODULEKIND_LINK, CX_U64(st),
                   &img, path, NULL, (int)type, jit, 0};
  module_emit(c, &m);
  image_release(&img);
}

void custom_link_complete(cucap_call *c, CUresult r, CUlinkState st, void **cubin,
                          size_t *size) {
  c->stack = cucap_rec_stack_id();
  image_desc img;
  memset(&img, 0, sizeof img);
  if (r == CUDA_SUCCESS && cubin && *cubin && size && *size) {
    img.data = *cubin;
    img.size = *size;
    cucap_image_info info;
    img.format = cucap_image_detect(*cubin, *size, &info) == CUCAP_OK
                     ? (uint8_t)info.format
                     : CUCAP_FB_IMAGEFORMAT_CUBIN;
    image_store(&img);
  }
  module_desc m = {CUCAP_FB_MODULEOP_LINKCOMPLETE, CUCAP_FB_MODULEKIND_LINK, CX_U64(st),
                   &img, NULL, NULL, 0, 0, 0};
  module_emit(c, &m);
}

void custom_link_destroy(cucap_call *c, CUresult r, CUlinkState st) {
  (void)r;
  module_desc m = {CUCAP_FB_MODULEOP_LINKDESTROY, CUCAP_FB_MODULEKIND_LINK, CX_U64(st),
                   NULL, NULL, NULL, 0, 0, 0};
  module_emit(c, &m);
}

/* ---- globals: also device allocations for snapshots ---- */

static void global_post(cucap_call *c, CUresult r, CUdeviceptr *dptr, size_t *bytes,
                        uint64_t module, const char *name, uint8_t kind) {
  c->stack = cucap_rec_stack_id();
  uint64_t addr = 0, size = 0;
  if (r == CUDA_SUCCESS) {
    if (dptr)
      addr = *dptr;
    if (bytes)
      size = *bytes;
    else if (cucap_real.cuMemGetAddressRange_v2 && addr) {
      CUdeviceptr base;
      size_t sz = 0;
      cx_relaxed rx;
      cx_relax_begin(&rx);
      if (cucap_real.cuMemGetAddressRange_v2(&base, &sz, addr) == CUDA_SUCCESS)
        size = sz;
      cx_relax_end(&rx);
    }
    if (addr && size) {
      cucap_tracked_alloc a = {addr, size, 0, CUCAP_FB_ALLOCKIND_DEVICE, 1, cx_current_ctx()};
      (void)cucap_tracker_alloc_add(cx_tracker(), &a);
      cx_snapshot_init();
    }
  }
  cucap_fbb *b = c->b;
  cucap_fb_ref nm = name ? cucap_fbb_string(b, name, strlen(name)) : 0;
  cucap_fb_global_start(b);
  cucap_fb_global_add_module(b, module);
  if (nm)
    cucap_fb_global_add_name(b, nm);
  cucap_fb_global_add_address(b, addr);
  cucap_fb_global_add_size(b, size);
  cucap_fb_global_add_kind(b, kind);
  c->body = cucap_fb_global_end(b);
  c->body_type = CUCAP_FB_BODY_GLOBAL;
}

void custom_module_get_global(cucap_call *c, CUresult r, CUdeviceptr *dptr, size_t *bytes,
                              CUmodule hmod, const char *name) {
  global_post(c, r, dptr, bytes, CX_U64(hmod), name, CUCAP_FB_MODULEKIND_MODULE);
}

void custom_library_get_global(cucap_call *c, CUresult r, CUdeviceptr *dptr, size_t *bytes,
                               CUlibrary lib, const char *name) {
  global_post(c, r, dptr, bytes, CX_U64(lib), name, CUCAP_FB_MODULEKIND_LIBRARY);
}

/* ---- functions ---- */

static void function_post(cucap_call *c, CUresult r, uint64_t handle, uint64_t module,
                          uint8_t kind, const char *name, const cucap_tracked_fn *from) {
  c->stack = cucap_rec_stack_id();
  if (r != CUDA_SUCCESS || !handle)
    return;
  const cucap_tracked_fn *f;
  if (from) {
    /* cuKernelGetFunction: same parameters as the kernel */
    f = cucap_tracker_fn_add(cx_tracker(), handle, module, kind, from->name, from->params,
                             from->nparams, from->param_bytes,
                             from->param_source) == CUCAP_OK
            ? cucap_tracker_fn_find(cx_tracker(), handle)
            : NULL;
  } else {
    f = cx_function_learn(handle, module, kind, name);
  }
  if (!f)
    return;
  c->body = cx_function_body(c->b, f);
  c->body_type = CUCAP_FB_BODY_FUNCTION;
}

void custom_module_get_function(cucap_call *c, CUresult r, CUfunction *hfunc, CUmodule hmod,
                                const char *name) {
  function_post(c, r, r == CUDA_SUCCESS && hfunc ? CX_U64(*hfunc) : 0, CX_U64(hmod),
                CUCAP_FB_FUNCTIONKIND_FUNCTION, name, NULL);
}

void custom_library_get_kernel(cucap_call *c, CUresult r, CUkernel *k, CUlibrary lib,
                               const char *name) {
  function_post(c, r, r == CUDA_SUCCESS && k ? CX_U64(*k) : 0, CX_U64(lib),
                CUCAP_FB_FUNCTIONKIND_KERNEL, name, NULL);
}

/* custom_table.txt count=: cuDNN/PyTorch ask again before every launch of a
 * CUkernel, and the driver hands back the same function per (kernel,
 * context). A successful call returning a function already tracked as this
 * kernel's has been recorded once with its Function body (which is what a
 * replay maps the handle with; a library unload forgets it, see
 * cucap_tracker_module_remove): this one is only counted (QueryCounts). */
int custom_kernel_get_function_known(CUresult r, CUfunction *pf, CUkernel k) {
  if (r != CUDA_SUCCESS || !pf || !*pf)
    return 0;
  const cucap_tracked_fn *f = cucap_tracker_fn_find(cx_tracker(), CX_U64(*pf));
  if (!f)
    return 0;
  if (f->module == CX_U64(k) && f->kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION)
    return 1;
  /* the function is the kernel's own handle (below): known once its
   * KernelFunction body was recorded */
  return f->handle == CX_U64(k) && f->kind == CUCAP_FB_FUNCTIONKIND_KERNEL &&
         atomic_load_explicit(&f->own_function_recorded, memory_order_relaxed);
}

void custom_kernel_get_function(cucap_call *c, CUresult r, CUfunction *pf, CUkernel k) {
  uint64_t h = r == CUDA_SUCCESS && pf ? CX_U64(*pf) : 0;
  /* cuDNN/PyTorch ask again before every launch of a CUkernel: the driver
   * hands back the same function per (kernel, context). Already recorded
   * (the Function body of the first call maps it): a plain record. A
   * library unload forgets it (cucap_tracker_module_remove). */
  if (custom_kernel_get_function_known(r, pf, k)) {
    c->stack = cucap_rec_stack_id();
    return;
  }
  const cucap_tracked_fn *kf = cucap_tracker_fn_find(cx_tracker(), CX_U64(k));
  if (!kf)
    kf = cx_kernel_learn(CX_U64(k));
  if (kf && h == CX_U64(k)) {
    /* the function is the kernel's own handle (the mock's are): the
     * kernel's entry stays as it is, owned by its library, so that an
     * unload forgets the handle (else a reused one was taken for the old
     * function) */
    c->stack = cucap_rec_stack_id();
    if (r == CUDA_SUCCESS) {
      c->body = cx_function_body_as(c->b, kf, CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION, CX_U64(k));
      c->body_type = CUCAP_FB_BODY_FUNCTION;
      if (c->body) /* later calls are only counted (custom_kernel_get_function_known) */
        cucap_tracker_fn_mark_own_function(cx_tracker(), CX_U64(k));
    }
    return;
  }
  if (kf) {
    function_post(c, r, h, CX_U64(k), CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION, NULL, kf);
  } else {
    const char *name = NULL;
    cx_relaxed rx;
    cx_relax_begin(&rx);
    if (cucap_real.cuKernelGetName)
      (void)cucap_real.cuKernelGetName(&name, k);
    cx_relax_end(&rx);
    function_post(c, r, h, CX_U64(k), CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION, name, NULL);
  }
}
