/* replay_exec_kernel.c - the executor's code ops: Module records (load a
 * module or library image again, with its JIT options), Global records
 * (module globals), Function records (function and kernel handles) and
 * Launch records (parameters rebuilt from the recorded argument block,
 * device pointers relocated, launch attributes mapped). Dispatched by
 * rp_execute (replay_exec.c); owns rp_state's modules, images and
 * functions part (rp_code, replay_state.h), where the handle maps live. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_vec.h"
#include "replay_state.h"
#include "replay_graph.h"

static int rp_jit_option_scalar(int opt) {
  switch (opt) {
  case CU_JIT_WALL_TIME:
  case CU_JIT_INFO_LOG_BUFFER:
  case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
  case CU_JIT_ERROR_LOG_BUFFER:
  case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
  case CU_JIT_GLOBAL_SYMBOL_NAMES:
  case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
  case CU_JIT_GLOBAL_SYMBOL_COUNT:
  case CU_JIT_REFERENCED_KERNEL_NAMES:
  case CU_JIT_REFERENCED_KERNEL_COUNT:
  case CU_JIT_REFERENCED_VARIABLE_NAMES:
  case CU_JIT_REFERENCED_VARIABLE_COUNT:
    return 0; /* pointers/buffers (not stored) or counts that go with them */
  default:
    return opt >= 0 && opt < CU_JIT_NUM_OPTIONS;
  }
}

#define RP_MAX_JIT 32
/* rp_op_module, the options of a load: the recorded JIT options (scalar
 * ones only) and library options that may be passed again. */
typedef struct rp_load_opts {
  CUjit_option jo[RP_MAX_JIT], lo[RP_MAX_JIT];
  void *jv[RP_MAX_JIT], *lv[RP_MAX_JIT];
  unsigned nj, nl;
} rp_load_opts;

static void rp_module_options(const cucap_fb_module *m, rp_load_opts *op) {
  op->nj = op->nl = 0;
  for (size_t i = 0; i < cucap_fb_module_jit_options_len(m) && op->nj < RP_MAX_JIT; i++) {
    const cucap_fb_jit_option *o = cucap_fb_module_jit_options_at(m, i);
    int opt = cucap_fb_jit_option_option(o);
    if (!rp_jit_option_scalar(opt))
      continue;
    op->jo[op->nj] = (CUjit_option)opt;
    op->jv[op->nj++] = (void *)(uintptr_t)cucap_fb_jit_option_value(o);
  }
  for (size_t i = 0; i < cucap_fb_module_library_options_len(m) && op->nl < RP_MAX_JIT; i++) {
    const cucap_fb_jit_option *o = cucap_fb_module_library_options_at(m, i);
    if (!rp_lib_option_safe(cucap_fb_jit_option_option(o)))
      continue;
    op->lo[op->nl] = (CUjit_option)cucap_fb_jit_option_option(o);
    op->lv[op->nl++] = (void *)(uintptr_t)cucap_fb_jit_option_value(o);
  }
}

/* rp_op_module, the image of a load as the driver gets it (*img: the mapped
 * image or a padded copy kept to the end; the return value: the plain ELF
 * made of it, else *img); NULL when skipped or out of memory (reported). */
static const void *rp_module_image(rp_state *R, const cucap_fb_module *m,
                                   const void **img_out, uint64_t *isz_out) {
  if (!cucap_fb_module_image(m)) {
    rp_skip(R, "module load without stored image");
    return NULL;
  }
  const void *img = NULL;
  uint64_t isz = 0;
  if (cucap_reader_blob_map(R->r, rp_h(cucap_fb_module_image(m)), &img,
                            &isz) != CUCAP_OK) {
    rp_skip(R, "module load (image blob missing)");
    return NULL;
  }
  const char *why = NULL;
  void *copy = NULL;
  if (!(img = rp_image_for_driver(img, isz, &copy, &why))) {
    if (why)
      rp_skip(R, why);
    else
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return NULL;
  }
  if (copy && rp_keep(R, copy) != CUCAP_OK) {
    free(copy);
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return NULL;
  }
  *img_out = img;
  *isz_out = isz;
  /* the driver gets the plain ELF it would pick, where one was made */
  const void *drv = rp_plainelf_get(R, img);
  if (!drv)
    drv = img;
  return drv;
}

/* rp_op_module, a Load: a module kept from an earlier pass, else the image
 * loaded again. 1 when executed, 0 when skipped or failed. */
static int rp_module_load(rp_state *R, const cucap_fb_record *rec,
                          const cucap_fb_module *m, uint64_t h, int kind) {
  int library = kind == CUCAP_FB_MODULEKIND_LIBRARY;
  if (R->code.mk) { /* loaded by this record in an earlier pass and kept */
    if (rp_ctx_rec(R, rec) != CUCAP_OK)
      return 0;
    uint64_t kept = rp_modkeep_get(R, R->rec_index, library);
    if (kept) {
      if (rp_live_put(R, library ? &R->code.library : &R->code.module, h, kept) != CUCAP_OK)
        return 0;
      if (!library)
        rp_owned(R, kept);
      return 1;
    }
  }
  const void *img = NULL;
  uint64_t isz = 0;
  const void *drv = rp_module_image(R, m, &img, &isz);
  if (!drv)
    return 0;
  rp_load_opts op;
  rp_module_options(m, &op);
  unsigned nj = op.nj, nl = op.nl;
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return 0;
  if (kind == CUCAP_FB_MODULEKIND_LIBRARY) {
    CUlibrary lib = NULL;
    if (!R->d.df.LibraryLoadData) {
      rp_skip(R, "cuLibraryLoadData (driver lacks it)");
      return 0;
    }
    if (!rp_cu(R, R->d.df.LibraryLoadData(&lib, drv, nj ? op.jo : NULL,
                                          nj ? op.jv : NULL, nj,
                                          (CUlibraryOption *)(nl ? op.lo : NULL),
                                          nl ? op.lv : NULL, nl),
               "cuLibraryLoadData"))
      return 0;
    if (rp_live_put(R, &R->code.library, h, (uint64_t)(uintptr_t)lib) != CUCAP_OK)
      return 0;
    rp_modkeep_add(R, R->rec_index, 1, (uint64_t)(uintptr_t)lib, img, isz);
  } else {
    CUmodule mod = NULL;
    if (!rp_cu(R, R->d.df.ModuleLoadDataEx(&mod, drv, nj, nj ? op.jo : NULL,
                                           nj ? op.jv : NULL),
               "cuModuleLoadDataEx"))
      return 0;
    if (rp_live_put(R, &R->code.module, h, (uint64_t)(uintptr_t)mod) != CUCAP_OK)
      return 0;
    rp_owned(R, (uint64_t)(uintptr_t)mod);
    rp_modkeep_add(R, R->rec_index, 0, (uint64_t)(uintptr_t)mod, img, isz);
  }
  return 1;
}

void rp_op_module(rp_state *R, const cucap_fb_record *rec,
                  const cucap_fb_module *m) {
  uint64_t h = cucap_fb_module_handle(m);
  int kind = cucap_fb_module_kind(m);
  switch (cucap_fb_module_op(m)) {
  case CUCAP_FB_MODULEOP_LOAD:
    if (!rp_module_load(R, rec, m, h, kind))
      return;
    break;
  case CUCAP_FB_MODULEOP_LIBRARYMODULE:
    rp_op_library_module(R, rec, m);
    return;
  case CUCAP_FB_MODULEOP_UNLOAD: {
    uint64_t live;
    rp_ctx_rec(R, rec);
    if (cucap_map_del(&R->code.libmod, h, NULL)) {
      /* a library's module: the library owns it */
    } else if (cucap_map_del(&R->code.library, h, &live)) {
      if (!rp_modkeep_has(R, live))
        rp_unload(R, live, 1);
    } else if (cucap_map_del(&R->code.module, h, &live)) {
      if (!rp_modkeep_has(R, live))
        rp_unload(R, live, 0);
    }
    break;
  }
  default: /* cuLink*: the linked cubin is loaded by a later Module record */
    R->rep->ignored++;
    return;
  }
  R->rep->executed++;
}

void rp_op_global(rp_state *R, const cucap_fb_record *rec,
                  const cucap_fb_global *g) {
  uint64_t mh = cucap_fb_global_module(g), live = 0;
  const char *name = cucap_fb_global_name(g);
  CUdeviceptr addr = 0;
  size_t size = 0;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (!name)
    return;
  rp_ctx_rec(R, rec);
  if (cucap_map_get(&R->code.library, mh, &live) && R->d.df.LibraryGetGlobal)
    r = R->d.df.LibraryGetGlobal(&addr, &size, (CUlibrary)(uintptr_t)live,
                                 name);
  else if (rp_module_live(R, mh, &live) && R->d.df.ModuleGetGlobal)
    r = R->d.df.ModuleGetGlobal(&addr, &size, (CUmodule)(uintptr_t)live, name);
  if (r != CUDA_SUCCESS) {
    rp_skip(R, "module global lookup");
    return;
  }
  uint64_t rec_addr = cucap_fb_global_address(g);
  if (addr != rec_addr) {
    /* module globals are placed by the loader: relocate references */
    uint64_t rsz = cucap_fb_global_size(g) ? cucap_fb_global_size(g) : size;
    if (!R->code.warned_global++)
      CUCAP_WARN("replay: module global %s is at 0x%llx, recorded at 0x%" PRIx64
                 " (the driver places globals); kernel parameters and copies "
                 "are relocated, its address stored in device memory is not",
                 name, (unsigned long long)addr, rec_addr);
    else
      CUCAP_INFO("replay: global %s at 0x%llx, recorded at 0x%" PRIx64
                 "; relocating references", name, (unsigned long long)addr,
                 rec_addr);
    rp_mem_add_reloc(&R->mem, rec_addr, rsz, addr, 0);
  }
  R->rep->executed++;
}

/* rp_op_function, the live handle by the recorded one: a CUkernel's
 * CUfunction, a library's CUkernel or a module's CUfunction (*mod_owner:
 * the context of that module). 0 when a driver call failed (reported);
 * *live stays NULL when the module or kernel is not known. */
static int rp_function_live(rp_state *R, const cucap_fb_function *f,
                            const char *name, int kind, void **live,
                            CUcontext *mod_owner) {
  uint64_t mh = cucap_fb_function_module(f), mlive = 0, idx;
  if (kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION) {
    /* module field = the CUkernel */
    if (cucap_map_get(&R->code.func, mh, &idx) && R->d.df.KernelGetFunction) {
      CUfunction fn = NULL;
      if (!rp_cu(R, R->d.df.KernelGetFunction(
                        &fn, (CUkernel)(uintptr_t)R->code.funcs[idx].live),
                 "cuKernelGetFunction"))
        return 0;
      *live = fn;
    }
  } else if (name && kind == CUCAP_FB_FUNCTIONKIND_KERNEL) {
    if (cucap_map_get(&R->code.library, mh, &mlive) && R->d.df.LibraryGetKernel) {
      CUkernel k = NULL;
      if (!rp_cu(R, R->d.df.LibraryGetKernel(&k, (CUlibrary)(uintptr_t)mlive,
                                             name),
                 "cuLibraryGetKernel"))
        return 0;
      *live = k;
    }
  } else if (name && rp_module_live(R, mh, &mlive)) {
    *mod_owner = rp_owner_of(R, mlive);
    CUfunction fn = NULL;
    if (!rp_cu(R, R->d.df.ModuleGetFunction(&fn, (CUmodule)(uintptr_t)mlive,
                                            name),
               "cuModuleGetFunction"))
      return 0;
    *live = fn;
  }
  return 1;
}

/* rp_op_function, when the recorded handle led nowhere: the one kernel of
 * that name among the live libraries and modules (*kind becomes how it is
 * launched). 0 when a driver call failed (reported). */
static int rp_function_by_name(rp_state *R, const char *name, int *kind,
                               void **live, CUcontext *mod_owner) {
  /* its module or CUkernel was never defined in the capture */
  uint64_t flive = 0, fmod = 0;
  int how = rp_func_by_name(R, name, &flive, &fmod);
  if (how == 1 && *kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION) {
    CUfunction fn = NULL;
    if (!rp_cu(R, R->d.df.KernelGetFunction(&fn, (CUkernel)(uintptr_t)flive),
               "cuKernelGetFunction"))
      return 0;
    *live = fn;
  } else if (how == 1) {
    *live = (void *)(uintptr_t)flive;
    *kind = CUCAP_FB_FUNCTIONKIND_KERNEL; /* launched through the CUkernel */
  } else if (how == 2) {
    *live = (void *)(uintptr_t)flive;
    *mod_owner = rp_owner_of(R, fmod);
    if (*kind == CUCAP_FB_FUNCTIONKIND_KERNEL)
      *kind = CUCAP_FB_FUNCTIONKIND_FUNCTION;
  }
  if (*live) {
    R->rep->found_by_name++;
    if (R->run.pass == 0)
      CUCAP_INFO("replay: kernel %s (record %" PRIu64 ") found by name in a "
                 "%s the capture loaded: its own module was never recorded",
                 name, R->rec_index, how == 1 ? "library" : "module");
  }
  return 1;
}

/* rp_op_function, the recorded parameter layout of fi (dropped when no
 * kernel could take that much). */
static void rp_function_params(rp_func *fi, const cucap_fb_function *f) {
  size_t np = 0;
  const cucap_fb_param_info *pp = cucap_fb_function_params(f, &np);
  if (pp && np) {
    fi->params = malloc(np * sizeof *fi->params);
    if (fi->params) {
      memcpy(fi->params, pp, np * sizeof *fi->params);
      fi->nparams = np;
    }
  }
  fi->param_bytes = cucap_fb_function_param_bytes(f);
  fi->layout_bytes = fi->param_bytes; /* end of the last parameter */
  for (size_t i = 0; i < fi->nparams; i++) {
    size_t end = (size_t)fi->params[i].offset + fi->params[i].size;
    if (end > fi->layout_bytes)
      fi->layout_bytes = end;
  }
  if (fi->layout_bytes > RP_MAX_PARAM_BYTES) {
    /* no kernel takes that much (the driver's limit is 32 KiB): a damaged
     * capture (fuzz_replay: a 4 GB layout sized a graph node's block); the
     * recorded argument block alone is launched */
    free(fi->params);
    fi->params = NULL;
    fi->nparams = 0;
    fi->param_bytes = 0;
    fi->layout_bytes = 0;
  }
}

void rp_op_function(rp_state *R, const cucap_fb_record *rec,
                    const cucap_fb_function *f) {
  uint64_t h = cucap_fb_function_handle(f), mh = cucap_fb_function_module(f);
  const char *name = cucap_fb_function_name(f);
  int kind = cucap_fb_function_kind(f);
  uint64_t idx;
  void *live = NULL;
  CUcontext mod_owner = NULL; /* a module's function lives and dies with its module's context */
  rp_ctx_rec(R, rec);
  if (!rp_function_live(R, f, name, kind, &live, &mod_owner))
    return;
  if (!live && name && !rp_function_by_name(R, name, &kind, &live, &mod_owner))
    return;
  if (!live) {
    rp_skip(R, "function lookup (module not loaded)");
    return;
  }
  rp_func *fi;
  const char *inherit = NULL;
  if (kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION && !name &&
      cucap_map_get(&R->code.func, mh, &idx))
    inherit = R->code.funcs[idx].name; /* the CUkernel's name */
  char *nm = strdup(name ? name : inherit ? inherit : "?");
  if (!nm) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return;
  }
  if (cucap_map_get(&R->code.func, h, &idx)) {
    fi = &R->code.funcs[idx];
    free(fi->params);
    free(fi->name);
  } else {
    if (!CUCAP_VEC_RESERVE(R->code.funcs, R->code.capfuncs, R->code.nfuncs + 1, 32)) {
      free(nm);
      rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
      return;
    }
    idx = R->code.nfuncs++;
    cucap_map_put(&R->code.func, h, idx);
    fi = &R->code.funcs[idx];
  }
  memset(fi, 0, sizeof *fi);
  fi->handle = h;
  fi->live = (uint64_t)(uintptr_t)live;
  /* A module's function belongs to the module's context, which need not be
   * the current one (a capture may look a function up with another context
   * current: found by fuzz_replay, the function outlived its module's
   * context and a launch used it); a cuKernelGetFunction result belongs to
   * the current context. */
  if (mod_owner)
    cucap_map_put(&R->cx.owner, fi->live, (uint64_t)(uintptr_t)mod_owner);
  else if (kind != CUCAP_FB_FUNCTIONKIND_KERNEL)
    rp_owned(R, fi->live);
  fi->live_fn = kind == CUCAP_FB_FUNCTIONKIND_KERNEL ? 0 : fi->live;
  fi->kind = kind;
  fi->name = nm;
  rp_function_params(fi, f);
  R->code.last_fn_idx = 0; /* funcs[] may have moved or changed */
  R->rep->executed++;
}


#define RP_MAX_ATTRS 32

/* A recorded device address in the 8 bytes at p becomes its live one
 * (relocated replays); counted in patched_params. */
static void patch_word(rp_state *R, uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  int rel = 0;
  uint64_t nv = rp_mem_translate(&R->mem, v, &rel);
  if (rel) {
    memcpy(p, &nv, 8);
    R->rep->patched_params++;
  }
}

/* rp_op_launch, the function launched: its funcs[] entry, with its
 * CUfunction in the recorded context and its layout checked; NULL when
 * skipped or failed. */
static rp_func *rp_launch_function(rp_state *R, const cucap_fb_record *rec,
                                   const cucap_fb_launch *l) {
  uint64_t idx, fh = cucap_fb_launch_function(l);
  if (R->code.last_fn_idx && R->code.last_fn_handle == fh) {
    idx = R->code.last_fn_idx - 1; /* loops launch the same kernel again and again */
  } else {
    if (!cucap_map_get(&R->code.func, fh, &idx)) {
      rp_skip(R, "launch of an unknown function");
      return NULL;
    }
    R->code.last_fn_handle = fh;
    R->code.last_fn_idx = idx + 1;
  }
  rp_func *fi = &R->code.funcs[idx];
  if (rp_ctx_rec(R, rec) != CUCAP_OK)
    return NULL;
  if (!rp_func_fn(R, fi)) {
    if (!R->failed)
      rp_skip(R, "launch of a function whose module was unloaded");
    return NULL;
  }
  rp_func_layout(R, fi);
  return fi;
}

/* rp_op_launch, the argument block in R->buf.expect: *n bytes recorded, *need
 * (at least the layout) in all, relocated pointers and texture/surface
 * handles patched; NULL when skipped or out of memory. */
static uint8_t *rp_launch_args(rp_state *R, const cucap_fb_launch *l,
                               const rp_func *fi, size_t *n_out,
                               size_t *need_out) {
  /* argument block (inline or a blob), copied so it can be patched; the
   * driver reads every parameter at its offset: the block covers the
   * recorded layout (zero-filled past what was stored) */
  uint64_t n64 = 0;
  if (cucap_reader_launch_args_size(R->r, l, &n64) != CUCAP_OK || n64 > RP_MAX_PARAM_BYTES) {
    rp_skip(R, "launch (argument block missing or larger than 1 MiB)");
    return NULL;
  }
  size_t n = (size_t)n64, need = n;
  if (fi->layout_bytes > need)
    need = fi->layout_bytes;
  if (rp_grow(&R->buf.expect, &R->buf.expect_cap, need + 8, &R->buf.expect_pinned, R) != CUCAP_OK) {
    rp_set_error(R, CUCAP_ERR_NOMEM, "out of memory");
    return NULL;
  }
  uint8_t *args = R->buf.expect;
  if (cucap_reader_launch_args_read(R->r, l, args, n) != CUCAP_OK) {
    rp_skip(R, "launch (argument blob missing)");
    return NULL;
  }
  memset(args + n, 0, need - n);
  /* relocation: patch 8-byte parameters that point into moved ranges */
  if (R->mem.nreloc) {
    if (fi->nparams) {
      for (size_t i = 0; i < fi->nparams; i++) {
        uint32_t off = fi->params[i].offset, psz = fi->params[i].size;
        if (psz > 8) {
          /* a struct parameter (CUTLASS/cuBLAS Params, cublasSplitKParams
           * with its alpha/beta pointers into cuBLAS's deviceConstants) */
          R->rep->patched_params += rp_mem_patch_struct(&R->mem, args, n, off, psz);
        } else if (psz == 8 && off % 8 == 0 && off + 8 <= n) {
          patch_word(R, args + off);
        }
      }
    } else {
      for (size_t off = 0; off + 8 <= n; off += 8)
        patch_word(R, args + off);
    }
  }
  if (R->obj)
    rp_object_patch_params(R, fi, args, n);
  *n_out = n;
  *need_out = need;
  return args;
}

/* rp_op_launch, a KernelEx launch: its configuration with the recorded
 * launch attributes mapped to live ones. */
static CUresult rp_launch_ex(rp_state *R, const cucap_fb_launch *l,
                             const rp_fns *fn, CUfunction f,
                             const cucap_fb_dim3 *gd, const cucap_fb_dim3 *bd,
                             unsigned shm, CUstream st, void **kparams,
                             void **extra) {
  CUlaunchAttribute at[RP_MAX_ATTRS];
  unsigned na = rp_attr_launch_attrs(R, l, at, RP_MAX_ATTRS);
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = gd->x;
  cfg.gridDimY = gd->y;
  cfg.gridDimZ = gd->z;
  cfg.blockDimX = bd->x;
  cfg.blockDimY = bd->y;
  cfg.blockDimZ = bd->z;
  cfg.sharedMemBytes = shm;
  cfg.hStream = st;
  cfg.attrs = na ? at : NULL;
  cfg.numAttrs = na;
  return fn->LaunchKernelEx(&cfg, f, kparams, extra);
}

void rp_op_launch(rp_state *R, const cucap_fb_record *rec,
                  const cucap_fb_launch *l) {
  const char *bad = rp_unreplayable(rec);
  if (bad) {
    rp_skip(R, bad);
    return;
  }
  const rp_fns *fn = rp_fn(R, rec);
  rp_func *fi = rp_launch_function(R, rec, l);
  if (!fi)
    return;
  size_t n = 0, need = 0;
  uint8_t *args = rp_launch_args(R, l, fi, &n, &need);
  if (!args)
    return;
  void *kp[RP_MAX_PARAMS];
  void **kparams = NULL, **extra = NULL;
  size_t argsize = n;
  void *extra_buf[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args,
                        CU_LAUNCH_PARAM_BUFFER_SIZE, &argsize,
                        CU_LAUNCH_PARAM_END};
  if (fi->nparams && fi->nparams <= RP_MAX_PARAMS) {
    /* kernelParams: no size limit on the parameter block (CUDA 12.1+) */
    for (size_t i = 0; i < fi->nparams; i++) {
      uint32_t off = fi->params[i].offset;
      kp[i] = off < need ? args + off : args; /* args holds need bytes */
    }
    kparams = kp;
  } else if (n) {
    extra = extra_buf;
  }
  const cucap_fb_dim3 *gd = cucap_fb_launch_grid(l), *bd = cucap_fb_launch_block(l);
  cucap_fb_dim3 one = {1, 1, 1};
  if (!gd)
    gd = &one;
  if (!bd)
    bd = &one;
  CUstream st = rp_stream(R, cucap_fb_launch_stream(l));
  CUfunction f = (CUfunction)(uintptr_t)fi->live_fn;
  unsigned shm = cucap_fb_launch_shared_mem(l);
  if (R->attr) /* attributes set before the function was known */
    rp_attr_before_launch(R, fi);
  CUresult r;
  if (R->o->nobservers) { /* observers see the launch exactly around the call */
    R->obs.op.launch_index = cucap_fb_launch_launch_index(l);
    R->obs.op.kernel = fi->name;
    R->obs.op.function = (uint64_t)(uintptr_t)f;
    R->obs.op.stream = (uint64_t)(uintptr_t)st;
    R->obs.op.context = (uint64_t)(uintptr_t)R->cx.cur;
    R->obs.op.callstack = cucap_fb_record_stack(rec);
    rp_obs_op_before(R);
  }
  int k = cucap_fb_launch_kind(l);
  if (k == CUCAP_FB_LAUNCHKIND_KERNELEX && fn->LaunchKernelEx) {
    r = rp_launch_ex(R, l, fn, f, gd, bd, shm, st, kparams, extra);
  } else if (k == CUCAP_FB_LAUNCHKIND_COOPERATIVE && fn->LaunchCooperativeKernel) {
    if (!kparams && n) { /* no extra path for cooperative launches */
      rp_skip(R, "cooperative launch without parameter layout");
      return;
    }
    r = fn->LaunchCooperativeKernel(f, gd->x, gd->y, gd->z, bd->x, bd->y, bd->z,
                                    shm, st, kparams);
  } else {
    r = fn->LaunchKernel(f, gd->x, gd->y, gd->z, bd->x, bd->y, bd->z, shm, st,
                         kparams, extra);
  }
  if (r != CUDA_SUCCESS) { /* message formatted only on failure */
    char what[200];
    snprintf(what, sizeof what, "launch of %s (launch %" PRIu64 ")", fi->name,
             cucap_fb_launch_launch_index(l));
    rp_cu(R, r, what);
    return;
  }
  if (!R->capturing) /* captured: runs (and counts) at cuGraphLaunch */
    R->rep->launches++;
  R->rep->executed++;
}
