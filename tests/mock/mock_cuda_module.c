/* Mock driver: modules, libraries, kernels, the JIT linker and kernel
 * execution. A module owns a copy of the selected cubin/PTX and one CUfunction
 * per kernel of the image (created at load, freed at unload). A CUlibrary
 * wraps one module; a CUkernel is the same object as its CUfunction, so
 * casting CUkernel to CUfunction works as with the real driver. */
#include "mock_cuda_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct CUlib_st {
  uint32_t magic;
  CUmodule mod;
};

typedef struct link_input {
  uint8_t *data;
  size_t size;
  CUjitInputType type;
} link_input;

struct CUlinkState_st {
  uint32_t magic;
  link_input *in;
  size_t nin;
  /* cuLinkCreate's options: the arrays stay the app's (as in the driver) */
  unsigned nopt;
  CUjit_option *opt;
  void **val;
};

/* Loaded modules (not a library's): cuCtxDestroy kills those of its context.
 * Dead ones keep their shell (and their functions') for the use check. */
static CUmodule all_modules, dead_modules;

static void module_unlist(CUmodule m) {
  pthread_mutex_lock(&mock_lock);
  for (CUmodule *pp = &all_modules; *pp; pp = &(*pp)->next)
    if (*pp == m) { *pp = m->next; break; }
  pthread_mutex_unlock(&mock_lock);
}

void mock_modules_ctx_destroyed(CUcontext c) {
  pthread_mutex_lock(&mock_lock);
  for (CUmodule *pp = &all_modules; *pp;) {
    CUmodule m = *pp;
    if (m->owner != c) { pp = &m->next; continue; }
    *pp = m->next;
    m->next = dead_modules;
    dead_modules = m;
    m->magic = MOCK_MAGIC_DEAD; /* kept: a later use aborts */
    MOCK_LIVE(MOCK_LIVE_MODULE, -1); /* the context took it, as the driver does */
    for (CUfunction f = m->funcs; f; f = f->next) {
      f->magic = MOCK_MAGIC_DEAD;
      free(f->name);
      free(f->params);
      f->name = NULL;
      f->params = NULL;
    }
    for (size_t i = 0; i < m->nglobals; i++) free(m->globals[i].name); /* memory: gone with c */
    free(m->globals);
    free(m->image);
    m->globals = NULL;
    m->nglobals = 0;
    m->image = NULL;
  }
  pthread_mutex_unlock(&mock_lock);
}

/* JIT options with out-values, as the driver documents them: the info/error
 * log buffers receive a NUL-terminated message (at most *_SIZE_BYTES bytes)
 * and the size option's value is overwritten with the bytes written;
 * CU_JIT_WALL_TIME's value slot receives a float (ms). The mock's "wall
 * time" is a constant so that outputs compare byte for byte. */
static void jit_outputs(unsigned n, const CUjit_option *o, void **v, const char *info, const char *err) {
  if (!o || !v) return;
  size_t info_cap = 0, err_cap = 0;
  int verbose = 0;
  for (unsigned i = 0; i < n; i++) {
    if (o[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) info_cap = (size_t)(uintptr_t)v[i];
    if (o[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) err_cap = (size_t)(uintptr_t)v[i];
    if (o[i] == CU_JIT_LOG_VERBOSE) verbose = v[i] != NULL;
  }
  char msg[512];
  snprintf(msg, sizeof msg, "%s%s", info ? info : "",
           info && verbose ? "mock-ptxas info    : verbose log requested\n" : "");
  for (unsigned i = 0; i < n; i++) {
    const char *text = NULL;
    size_t cap = 0;
    CUjit_option size_opt = 0;
    if (o[i] == CU_JIT_INFO_LOG_BUFFER && info) { text = msg; cap = info_cap; size_opt = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES; }
    if (o[i] == CU_JIT_ERROR_LOG_BUFFER && err) { text = err; cap = err_cap; size_opt = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES; }
    if (o[i] == CU_JIT_WALL_TIME) {
      float ms = 0.125f;
      memcpy(&v[i], &ms, sizeof ms);
    }
    if (!text || !v[i] || !cap) continue;
    size_t len = strlen(text);
    if (len >= cap) len = cap - 1;
    memcpy(v[i], text, len);
    ((char *)v[i])[len] = 0;
    for (unsigned k = 0; k < n; k++)
      if (o[k] == size_opt) v[k] = (void *)(uintptr_t)(len + 1);
  }
}

static void module_free(CUmodule m) {
  if (!m) return;
  module_unlist(m);
  for (CUfunction f = m->funcs, n; f; f = n) {
    n = f->next;
    f->magic = 0;
    free(f->name);
    free(f->params);
    free(f);
  }
  for (size_t i = 0; i < m->nglobals; i++) {
    free(m->globals[i].name);
    if (m->globals[i].ptr) mock_free_device(m->globals[i].ptr);
  }
  free(m->globals);
  free(m->image);
  m->magic = 0;
  free(m);
  MOCK_LIVE(MOCK_LIVE_MODULE, -1);
}

static CUresult module_load(CUmodule *out, const void *image, size_t size) {
  MOCK_TRY(mock_need_ctx());
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  mock_image_info info;
  MOCK_TRY(mock_image_parse(image, size, &info));
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  CUmodule m = calloc(1, sizeof *m);
  if (!m) goto fail;
  m->magic = MOCK_MAGIC_MODULE;
  MOCK_LIVE(MOCK_LIVE_MODULE, 1);
  m->is_ptx = info.is_ptx;
  m->image = malloc(info.code_size + 1);
  if (!m->image) goto fail;
  memcpy(m->image, info.code, info.code_size);
  m->image[info.code_size] = 0;
  m->image_size = info.code_size;
  for (size_t i = info.nkernels; i-- > 0;) {
    mock_kernel_info *k = &info.kernels[i];
    CUfunction f = calloc(1, sizeof *f);
    if (!f) goto fail;
    f->magic = MOCK_MAGIC_FUNC;
    f->mod = m;
    f->name = k->name;
    f->params = k->params;
    f->nparams = k->nparams;
    f->param_bytes = k->param_bytes;
    if (f->nparams > 0) { /* the cbank size may include padding; never less */
      uint32_t end = f->params[f->nparams - 1].offset + f->params[f->nparams - 1].size;
      for (int j = 0; j < f->nparams; j++)
        if (f->params[j].offset + f->params[j].size > end) end = f->params[j].offset + f->params[j].size;
      if (f->param_bytes < end) f->param_bytes = end;
    }
    k->name = NULL;
    k->params = NULL;
    f->impl = mock_kernel_lookup(f->name);
    f->next = m->funcs;
    m->funcs = f;
  }
  if (info.nglobals) {
    m->globals = calloc(info.nglobals, sizeof *m->globals);
    if (!m->globals) goto fail;
    for (size_t i = 0; i < info.nglobals; i++) {
      mock_global *g = &m->globals[m->nglobals++];
      g->name = info.globals[i].name;
      info.globals[i].name = NULL;
      g->size = info.globals[i].size;
      if (g->size) {
        rc = mock_alloc_device(&g->ptr, g->size);
        if (rc != CUDA_SUCCESS) goto fail;
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (info.globals[i].init) memcpy((void *)(uintptr_t)g->ptr, info.globals[i].init, g->size);
        else memset((void *)(uintptr_t)g->ptr, 0, g->size);
      }
    }
  }
  mock_image_free(&info);
  m->owner = mock_current_ctx();
  pthread_mutex_lock(&mock_lock);
  m->next = all_modules;
  all_modules = m;
  pthread_mutex_unlock(&mock_lock);
  *out = m;
  mock_tool_module(m->image, m->image_size);
  return CUDA_SUCCESS;
fail:
  mock_image_free(&info);
  module_free(m);
  return rc;
}

static int module_ok(CUmodule m) {
  if (m && m->magic == MOCK_MAGIC_DEAD) mock_dead_use("module", m);
  return m && m->magic == MOCK_MAGIC_MODULE;
}
static int func_ok(CUfunction f) {
  if (f && f->magic == MOCK_MAGIC_DEAD) mock_dead_use("function", f);
  return f && f->magic == MOCK_MAGIC_FUNC;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *image) { return module_load(m, image, 0); }
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v) {
  if (n && (!o || !v)) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = module_load(m, image, 0);
  if (rc == CUDA_SUCCESS)
    jit_outputs(n, o, v, "mock-ptxas info    : module loaded\n", NULL);
  else
    jit_outputs(n, o, v, NULL, "mock-ptxas error   : image rejected\n");
  return rc;
}
CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *m, const void *fatbin) { return module_load(m, fatbin, 0); }

static CUresult read_file(const char *path, uint8_t **data, size_t *size) {
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  FILE *fp = fopen(path, "rb");
  if (!fp) return CUDA_ERROR_FILE_NOT_FOUND;
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  uint8_t *buf = NULL;
  long n = -1;
  if (fseek(fp, 0, SEEK_END) == 0) n = ftell(fp);
  if (n < 0 || fseek(fp, 0, SEEK_SET) != 0) { rc = CUDA_ERROR_FILE_NOT_FOUND; goto out; }
  buf = malloc((size_t)n + 1);
  if (!buf) goto out;
  if (fread(buf, 1, (size_t)n, fp) != (size_t)n) { rc = CUDA_ERROR_FILE_NOT_FOUND; goto out; }
  buf[n] = 0; /* PTX files are text */
  *data = buf;
  *size = (size_t)n;
  buf = NULL;
  rc = CUDA_SUCCESS;
out:
  free(buf);
  fclose(fp);
  return rc;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *m, const char *path) {
  uint8_t *data;
  size_t size;
  MOCK_TRY(read_file(path, &data, &size));
  CUresult rc = module_load(m, data, size);
  free(data);
  return rc;
}

CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  MOCK_TRY(mock_need_ctx());
  if (!module_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  module_free(m);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *pf, CUmodule m, const char *name) {
  MOCK_TRY(mock_need_ctx());
  if (!pf || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!module_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  for (CUfunction f = m->funcs; f; f = f->next)
    if (strcmp(f->name, name) == 0) { *pf = f; return CUDA_SUCCESS; }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule m) {
  MOCK_TRY(mock_need_ctx());
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (!module_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  unsigned n = 0;
  for (CUfunction f = m->funcs; f; f = f->next) n++;
  *count = n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *fs, unsigned int n, CUmodule m) {
  MOCK_TRY(mock_need_ctx());
  if (!fs) return CUDA_ERROR_INVALID_VALUE;
  if (!module_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  unsigned i = 0;
  for (CUfunction f = m->funcs; f && i < n; f = f->next) fs[i++] = f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule m, const char *name) {
  MOCK_TRY(mock_need_ctx());
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!module_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < m->nglobals; i++)
    if (strcmp(m->globals[i].name, name) == 0) {
      if (dptr) *dptr = m->globals[i].ptr;
      if (bytes) *bytes = m->globals[i].size;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

/* ---- libraries ---------------------------------------------------------- */
static int lib_ok(CUlibrary l) { return l && l->magic == MOCK_MAGIC_LIBRARY; }

static CUresult library_load(CUlibrary *out, const void *image, size_t size) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  CUlibrary l = calloc(1, sizeof *l);
  if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = module_load(&l->mod, image, size);
  if (rc != CUDA_SUCCESS) { free(l); return rc; }
  module_unlist(l->mod); /* a library lives in every context: not the loader's */
  l->mod->owner = NULL;
  l->mod->lib = l;
  l->magic = MOCK_MAGIC_LIBRARY;
  MOCK_LIVE(MOCK_LIVE_LIBRARY, 1);
  *out = l;
  return CUDA_SUCCESS;
}

/* CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE passes a host pointer the
 * real driver reads: so does the mock (a stale pointer from another process
 * faults here as it would there). */
static void library_options_touch(CUlibraryOption *lo, void **lv, unsigned int nl) {
  for (unsigned i = 0; lo && lv && i < nl; i++)
    if (lo[i] == CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE && lv[i]) {
      volatile const unsigned char *t = lv[i];
      (void)t[0];
    }
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv, unsigned int nj,
                                   CUlibraryOption *lo, void **lv, unsigned int nl) {
  library_options_touch(lo, lv, nl);
  CUresult rc = library_load(lib, code, 0);
  if (rc == CUDA_SUCCESS)
    jit_outputs(nj, jo, jv, "mock-ptxas info    : library loaded\n", NULL);
  else
    jit_outputs(nj, jo, jv, NULL, "mock-ptxas error   : image rejected\n");
  return rc;
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *lib, const char *path, CUjit_option *jo, void **jv,
                                       unsigned int nj, CUlibraryOption *lo, void **lv, unsigned int nl) {
  (void)jo; (void)jv; (void)nj;
  library_options_touch(lo, lv, nl);
  uint8_t *data;
  size_t size;
  MOCK_TRY(mock_need_ctx());
  MOCK_TRY(read_file(path, &data, &size));
  CUresult rc = library_load(lib, data, size);
  free(data);
  return rc;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary l) {
  MOCK_TRY(mock_need_ctx());
  if (!lib_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  module_free(l->mod);
  l->magic = 0;
  free(l);
  MOCK_LIVE(MOCK_LIVE_LIBRARY, -1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pk, CUlibrary l, const char *name) {
  if (!pk) return CUDA_ERROR_INVALID_VALUE;
  if (!lib_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  CUfunction f;
  MOCK_TRY(cuModuleGetFunction(&f, l->mod, name));
  *pk = (CUkernel)f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary l) {
  if (!lib_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  return cuModuleGetFunctionCount(count, l->mod);
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *ks, unsigned int n, CUlibrary l) {
  if (!lib_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  return cuModuleEnumerateFunctions((CUfunction *)ks, n, l->mod);
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *pm, CUlibrary l) {
  if (!pm) return CUDA_ERROR_INVALID_VALUE;
  if (!lib_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  *pm = l->mod;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary l, const char *name) {
  if (!lib_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  return cuModuleGetGlobal(dptr, bytes, l->mod, name);
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pf, CUkernel k) {
  MOCK_TRY(mock_need_ctx());
  if (!pf) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok((CUfunction)k)) return CUDA_ERROR_INVALID_HANDLE;
  *pf = (CUfunction)k;
  return CUDA_SUCCESS;
}

/* CUCAP_MOCK_NO_KERNEL_LIBRARY=1: unsupported, as before CUDA 12.5 (the
 * recorder then records a CUkernel without its library; tests of the
 * replay's lookup by name use it). */
CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pl, CUkernel k) {
  const char *off = getenv("CUCAP_MOCK_NO_KERNEL_LIBRARY");
  if (off && *off == '1') return CUDA_ERROR_NOT_SUPPORTED;
  if (!pl) return CUDA_ERROR_INVALID_VALUE;
  CUfunction f = (CUfunction)k;
  if (!func_ok(f) || !f->mod || !f->mod->lib) return CUDA_ERROR_INVALID_HANDLE;
  *pl = f->mod->lib;
  return CUDA_SUCCESS;
}

/* ---- function queries --------------------------------------------------- */
static CUresult param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->nparams < 0 || i >= (size_t)f->nparams) return CUDA_ERROR_INVALID_VALUE;
  if (off) *off = f->params[i].offset;
  if (size) *size = f->params[i].size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size) {
  return param_info(f, i, off, size);
}
CUresult CUDAAPI cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size) {
  return param_info((CUfunction)k, i, off, size);
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction f) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel k) { return cuFuncGetName(name, (CUfunction)k); }

CUresult CUDAAPI cuFuncGetModule(CUmodule *pm, CUfunction f) {
  if (!pm) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  *pm = f->mod;
  return CUDA_SUCCESS;
}

/* cuFuncGetAttribute, cuFuncSetAttribute, cuKernel{Get,Set}Attribute and the
 * cache/shared-memory configs live in mock_cuda_attr.c. */
CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *st, CUfunction f) {
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  *st = CU_FUNCTION_LOADING_STATE_LOADED;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncLoad(CUfunction f) { return func_ok(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int bs, size_t sm) {
  (void)sm;
  if (!n || bs <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  int b = 2048 / bs;
  *n = b > 32 ? 32 : b;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, CUfunction f, int bs, size_t sm,
                                                                     unsigned int flags) {
  (void)flags;
  return cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, bs, sm);
}
CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *mg, int *bs, CUfunction f, CUoccupancyB2DSize cb, size_t sm,
                                                  int limit) {
  (void)cb; (void)sm;
  if (!mg || !bs) return CUDA_ERROR_INVALID_VALUE;
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  *bs = limit > 0 && limit < 1024 ? limit : 1024;
  *mg = 132 * (2048 / *bs);
  return CUDA_SUCCESS;
}

/* ---- JIT linker ---------------------------------------------------------- */
CUresult CUDAAPI cuLinkCreate(unsigned int n, CUjit_option *o, void **v, CUlinkState *out) {
  MOCK_TRY(mock_need_ctx());
  if (!out || (n && (!o || !v))) return CUDA_ERROR_INVALID_VALUE;
  CUlinkState l = calloc(1, sizeof *l);
  if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
  l->magic = MOCK_MAGIC_LINK;
  l->nopt = n;
  l->opt = o;
  l->val = v;
  MOCK_LIVE(MOCK_LIVE_LINK, 1);
  *out = l;
  return CUDA_SUCCESS;
}

static CUresult link_add(CUlinkState l, CUjitInputType type, const void *data, size_t size) {
  if (!l || l->magic != MOCK_MAGIC_LINK) return CUDA_ERROR_INVALID_HANDLE;
  if (!data || size == 0) return CUDA_ERROR_INVALID_VALUE;
  /* Check it parses (PTX: has .entry / .version; cubin/fatbin: valid). */
  mock_image_info info;
  CUresult prc = mock_image_parse(data, size, &info);
  if (prc != CUDA_SUCCESS) {
    jit_outputs(l->nopt, l->opt, l->val, NULL, "mock-ptxas error   : input rejected\n");
    return prc;
  }
  mock_image_free(&info);
  link_input *n = realloc(l->in, (l->nin + 1) * sizeof *n);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  l->in = n;
  uint8_t *copy = malloc(size + 1);
  if (!copy) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(copy, data, size);
  copy[size] = 0;
  l->in[l->nin++] = (link_input){copy, size, type};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkAddData(CUlinkState l, CUjitInputType type, void *data, size_t size, const char *name,
                               unsigned int n, CUjit_option *o, void **v) {
  (void)name; (void)n; (void)o; (void)v;
  return link_add(l, type, data, size);
}

CUresult CUDAAPI cuLinkAddFile(CUlinkState l, CUjitInputType type, const char *path, unsigned int n,
                               CUjit_option *o, void **v) {
  (void)n; (void)o; (void)v;
  uint8_t *data;
  size_t size;
  MOCK_TRY(read_file(path, &data, &size));
  CUresult rc = link_add(l, type, data, size);
  free(data);
  return rc;
}

/* The "linked cubin" is the first input verbatim (PTX stays PTX): the mock
 * does not link, it only passes the image through to cuModuleLoadData. */
CUresult CUDAAPI cuLinkComplete(CUlinkState l, void **cubin, size_t *size) {
  if (!l || l->magic != MOCK_MAGIC_LINK) return CUDA_ERROR_INVALID_HANDLE;
  if (!cubin || !size) return CUDA_ERROR_INVALID_VALUE;
  if (l->nin == 0) return CUDA_ERROR_INVALID_IMAGE;
  *cubin = l->in[0].data;
  *size = l->in[0].size;
  char info[160];
  snprintf(info, sizeof info, "mock-ptxas info    : linked %zu input(s), %zu bytes, first is %s\n", l->nin,
           l->in[0].size, l->in[0].type == CU_JIT_INPUT_PTX ? "PTX" : "binary");
  jit_outputs(l->nopt, l->opt, l->val, info, NULL);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState l) {
  if (!l || l->magic != MOCK_MAGIC_LINK) return CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; i < l->nin; i++) free(l->in[i].data);
  free(l->in);
  l->magic = 0;
  free(l);
  MOCK_LIVE(MOCK_LIVE_LINK, -1);
  return CUDA_SUCCESS;
}

/* ---- execution ----------------------------------------------------------- */
static int warn_unimplemented(void) {
  const char *s = getenv("CUCAP_MOCK_STRICT");
  return s && *s && *s != '0';
}

CUresult mock_run_op(const mock_op *op) {
  switch (op->kind) {
  case MOCK_OP_KERNEL: {
    CUfunction f = op->func;
    if (!f->impl || mock_no_kernels()) return CUDA_SUCCESS; /* no host implementation: no-op */
    void *args[256];
    int n = f->nparams > 256 ? 256 : f->nparams;
    for (int i = 0; i < n; i++) args[i] = op->argbuf + f->params[i].offset;
    mock_thread t;
    t.gridDim = op->grid;
    t.blockDim = op->block;
    t.clusterDim = op->cluster;
    if (!t.clusterDim.x) t.clusterDim = (mock_dim3){1, 1, 1};
    t.func = f;
    for (t.blockIdx.z = 0; t.blockIdx.z < op->grid.z; t.blockIdx.z++)
      for (t.blockIdx.y = 0; t.blockIdx.y < op->grid.y; t.blockIdx.y++)
        for (t.blockIdx.x = 0; t.blockIdx.x < op->grid.x; t.blockIdx.x++)
          for (t.threadIdx.z = 0; t.threadIdx.z < op->block.z; t.threadIdx.z++)
            for (t.threadIdx.y = 0; t.threadIdx.y < op->block.y; t.threadIdx.y++)
              for (t.threadIdx.x = 0; t.threadIdx.x < op->block.x; t.threadIdx.x++) f->impl(&t, args);
    return CUDA_SUCCESS;
  }
  case MOCK_OP_COPY:
    for (size_t z = 0; z < (op->depth ? op->depth : 1); z++)
      for (size_t r = 0; r < op->height; r++)
        memmove((uint8_t *)op->dst + z * op->dslice + r * op->dpitch,
                (const uint8_t *)op->src + z * op->sslice + r * op->spitch, op->width);
    return CUDA_SUCCESS;
  case MOCK_OP_SET: {
    /* elem-byte elements of value; a value whose bytes are all equal (0
     * above all) is a memset (mock_fill), rows back to back in one go */
    unsigned es = op->elem == 1 || op->elem == 2 ? op->elem : 4;
    uint8_t v[4];
    memcpy(v, &op->value, 4); /* little-endian: v[0..es) is the element */
    int same = 1;
    for (unsigned k = 1; k < es; k++) same &= v[k] == v[0];
    size_t rowb = op->width * es;
    if (same && op->height && (op->height == 1 || op->dpitch == rowb)) {
      mock_fill(op->dst, v[0], rowb * op->height);
      return CUDA_SUCCESS;
    }
    for (size_t r = 0; r < op->height; r++) {
      uint8_t *row = (uint8_t *)op->dst + r * op->dpitch;
      if (same) {
        mock_fill(row, v[0], rowb);
        continue;
      }
      if (!rowb) continue;
      memcpy(row, v, es); /* then doubling copies of what is written */
      for (size_t done = es; done < rowb;) {
        size_t c = done < rowb - done ? done : rowb - done;
        memcpy(row + done, row, c);
        done += c;
      }
    }
    return CUDA_SUCCESS;
  }
  case MOCK_OP_HOST:
    op->fn(op->user);
    return CUDA_SUCCESS;
  case MOCK_OP_EMPTY:
  case MOCK_OP_MARK:
    return CUDA_SUCCESS;
  case MOCK_OP_COND: {
    /* CU_GRAPH_COND_TYPE_IF: body 0 when non-zero (body 1, if any, when
     * zero); WHILE: body 0 as long as non-zero; SWITCH: body n for value n */
    unsigned v = mock_cond_get(op->cond);
    if (op->cond_type == CU_GRAPH_COND_TYPE_IF) {
      if (v && op->nsubs > 0) return mock_graph_run(op->subs[0]);
      if (!v && op->nsubs > 1) return mock_graph_run(op->subs[1]);
      return CUDA_SUCCESS;
    }
    if (op->cond_type == CU_GRAPH_COND_TYPE_WHILE) {
      for (unsigned long it = 0; op->nsubs && mock_cond_get(op->cond); it++) {
        if (it > (1ul << 24)) return CUDA_ERROR_LAUNCH_TIMEOUT; /* a runaway loop */
        MOCK_TRY(mock_graph_run(op->subs[0]));
      }
      return CUDA_SUCCESS;
    }
    return v < op->nsubs ? mock_graph_run(op->subs[v]) : CUDA_SUCCESS;
  }
  case MOCK_OP_CHILD:
    return op->nsubs ? mock_graph_run(op->subs[0]) : CUDA_SUCCESS;
  case MOCK_OP_EVENT:
    return mock_event_record(op->event, NULL);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult mock_kernel_op(CUfunction f, mock_dim3 grid, mock_dim3 block, unsigned shmem, void **params,
                        void **extra, mock_op *out) {
  if (!func_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z || grid.y > 65535 || grid.z > 65535 ||
      block.z > 64 || (uint64_t)block.x * block.y * block.z > 1024 || shmem > 232448)
    return CUDA_ERROR_INVALID_VALUE;
  /* above 48 KiB of dynamic shared memory the kernel must have opted in
   * (cuFuncSetAttribute/cuKernelSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES),
   * as on the real driver */
  if (shmem > 49152 && (int)shmem > mock_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))
    return CUDA_ERROR_INVALID_VALUE;
  mock_dim3 cluster;
  MOCK_TRY(mock_cluster_dims(f, grid, (mock_dim3){0, 0, 0}, &cluster));
  if (!f->impl && warn_unimplemented()) return CUDA_ERROR_NOT_SUPPORTED;
  if (f->nparams < 0) return CUDA_ERROR_INVALID_IMAGE;
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;
  mock_op op = {0};
  op.kind = MOCK_OP_KERNEL;
  op.shmem = shmem;
  op.func = f;
  op.grid = grid;
  op.block = block;
  op.cluster = cluster;
  op.argbuf = calloc(1, f->param_bytes ? f->param_bytes : 1);
  if (!op.argbuf) return CUDA_ERROR_OUT_OF_MEMORY;
  if (f->nparams > 0) {
    if (params) {
      for (int i = 0; i < f->nparams; i++) {
        if (!params[i]) { free(op.argbuf); return CUDA_ERROR_INVALID_VALUE; }
        memcpy(op.argbuf + f->params[i].offset, params[i], f->params[i].size);
      }
    } else if (extra) {
      const void *buf = NULL;
      size_t size = 0;
      for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(size_t *)extra[i + 1];
        else { free(op.argbuf); return CUDA_ERROR_INVALID_VALUE; }
      }
      if (!buf || size < f->param_bytes) {
        /* a buffer may stop right after the last parameter */
        uint32_t need = f->params[f->nparams - 1].offset + f->params[f->nparams - 1].size;
        if (!buf || size < need) { free(op.argbuf); return CUDA_ERROR_INVALID_VALUE; }
      }
      memcpy(op.argbuf, buf, size < f->param_bytes ? size : f->param_bytes);
    } else {
      free(op.argbuf);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  *out = op;
  return CUDA_SUCCESS;
}

/* CUCAP_MOCK_LAUNCH_US=N: each cuLaunchKernel takes N µs more (busy), as a
 * launch does on a loaded machine (test_replay_managed_host). */
static void launch_delay(void) {
  static _Atomic long cached = -1; /* launches come from many threads */
  long us = atomic_load_explicit(&cached, memory_order_relaxed);
  if (us < 0) {
    const char *e = getenv("CUCAP_MOCK_LAUNCH_US");
    us = e && *e ? strtol(e, NULL, 10) : 0;
    atomic_store_explicit(&cached, us, memory_order_relaxed);
  }
  if (us <= 0) return;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

CUresult mock_launch(CUfunction f, mock_dim3 grid, mock_dim3 block, unsigned shmem, CUstream s, void **params,
                     void **extra) {
  launch_delay();
  MOCK_TRY(mock_check_stream(s));
  MOCK_TRY(mock_legacy_check(s, 0));
  mock_op op;
  MOCK_TRY(mock_kernel_op(f, grid, block, shmem, params, extra, &op));
  return mock_submit(s, &op);
}

#define P(name, ver) {#name, ver, (void *)name}
const mock_proc mock_procs_module[] = {
  P(cuModuleLoad, 2000), P(cuModuleLoadData, 2000), P(cuModuleLoadDataEx, 2010), P(cuModuleLoadFatBinary, 2000),
  P(cuModuleUnload, 2000), P(cuModuleGetFunction, 2000), P(cuModuleGetFunctionCount, 12040),
  P(cuModuleEnumerateFunctions, 12040), P(cuModuleGetGlobal, 3020), P(cuModuleGetLoadingMode, 11070),
  P(cuLibraryLoadData, 12000), P(cuLibraryLoadFromFile, 12000), P(cuLibraryUnload, 12000),
  P(cuLibraryGetKernel, 12000), P(cuLibraryGetKernelCount, 12040), P(cuLibraryEnumerateKernels, 12040),
  P(cuLibraryGetModule, 12000), P(cuLibraryGetGlobal, 12000), P(cuKernelGetFunction, 12000),
  P(cuKernelGetLibrary, 12050), P(cuKernelGetParamInfo, 12040), P(cuKernelGetName, 12030),
  P(cuFuncGetParamInfo, 12040), P(cuFuncGetName, 12030), P(cuFuncGetModule, 11000),
  P(cuFuncIsLoaded, 12040), P(cuFuncLoad, 12040),
  P(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050),
  P(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000), P(cuOccupancyMaxPotentialBlockSize, 6050),
  P(cuLinkCreate, 6050), P(cuLinkAddData, 6050), P(cuLinkAddFile, 6050), P(cuLinkComplete, 5050),
  P(cuLinkDestroy, 5050),
  {NULL, 0, NULL}};
#undef P
