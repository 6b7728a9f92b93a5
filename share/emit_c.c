/* emit_c.c - `cucap extract --emit-c DIR`: a self-contained C program that
 * reproduces an extracted launch with nothing but cuda.h and libcuda
 * (cucap_derive.h).
 *
 * Everything comes from the extracted capture: the module image of the
 * launched function, its name and parameter layout, the argument block, the
 * uploads of the state prefix (memory before the launch; uploads into
 * module globals become cuModuleGetGlobal + copy) and the Exit snapshot
 * (the result regions and the expected checksum). The program reserves the
 * recorded device addresses (32 MiB-aligned cuMemAddressReserve hints, which
 * the driver honours, then cuMemCreate/cuMemMap over 2 MiB pieces) so
 * pointers inside memory stay valid; if that fails it allocates elsewhere
 * and patches 8-byte parameters that point into the regions. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cucap_sort.h"
#include "cucap_derive.h"
#include "cucap_state_observer.h"
#include "share_internal.h"

typedef struct ec_fn {
  uint64_t handle, module;
  int kind;
  char name[512];
  const cucap_fb_param_info *params; /* into fn_copy */
  size_t nparams;
} ec_fn;

typedef struct ec_upload {
  uint64_t addr, size;
  cucap_hash128 data;
  int global;            /* index + 1 into globals */
  uint64_t goff;
} ec_upload;

typedef struct ec_global {
  uint64_t module, addr, size;
  char name[256];
} ec_global;

typedef struct ec_state {
  cucap_reader *r;
  sh_vec mods;      /* {handle, hash, format} */
  sh_vec fns;       /* ec_fn */
  sh_vec copies;    /* sh_rec_copy of Function records (params point into them) */
  sh_vec globals;   /* ec_global */
  sh_vec uploads;   /* ec_upload */
  sh_vec results;   /* cucap_state_region */
  sh_rec_copy launch;
  char msg[512];
} ec_state;

typedef struct ec_mod {
  uint64_t handle;
  cucap_hash128 image;
  int format;
} ec_mod;

static int fail(ec_state *s, const char *fmt, const char *a) {
  if (snprintf(s->msg, sizeof s->msg, fmt, a) < 0) /* long paths are cut */
    s->msg[0] = 0;
  return 0;
}

static int collect(ec_state *s) {
  const void *rv, *buf;
  size_t size;
  cucap_status st;
  while ((st = cucap_reader_next(s->r, &rv, &buf, &size)) == CUCAP_OK) {
    const cucap_fb_record *rec = rv;
    switch (cucap_fb_record_body_type(rec)) {
    case CUCAP_FB_BODY_MODULE: {
      const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
      if (cucap_fb_module_op(m) != CUCAP_FB_MODULEOP_LOAD || !cucap_fb_module_image(m))
        break;
      ec_mod *e = sh_vec_push(&s->mods);
      if (!e)
        return fail(s, "%s", "out of memory");
      e->handle = cucap_fb_module_handle(m);
      e->image = sh_h(cucap_fb_module_image(m));
      e->format = cucap_fb_module_format(m);
      break;
    }
    case CUCAP_FB_BODY_FUNCTION: {
      const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
      sh_rec_copy *c = sh_vec_push(&s->copies);
      ec_fn *e = sh_vec_push(&s->fns);
      if (!c || !e || !sh_rec_copy_make(c, buf, size, rec))
        return fail(s, "%s", "out of memory");
      f = cucap_fb_record_body_as_function(c->rec);
      e->handle = cucap_fb_function_handle(f);
      e->module = cucap_fb_function_module(f);
      e->kind = cucap_fb_function_kind(f);
      const char *nm = cucap_fb_function_name(f);
      snprintf(e->name, sizeof e->name, "%s", nm ? nm : "");
      e->params = cucap_fb_function_params(f, &e->nparams);
      break;
    }
    case CUCAP_FB_BODY_GLOBAL: {
      const cucap_fb_global *g = cucap_fb_record_body_as_global(rec);
      ec_global *e = sh_vec_push(&s->globals);
      if (!e)
        return fail(s, "%s", "out of memory");
      e->module = cucap_fb_global_module(g);
      e->addr = cucap_fb_global_address(g);
      e->size = cucap_fb_global_size(g);
      snprintf(e->name, sizeof e->name, "%s", cucap_fb_global_name(g) ? cucap_fb_global_name(g) : "");
      break;
    }
    case CUCAP_FB_BODY_MEMCPY: {
      const cucap_fb_memcpy *m = cucap_fb_record_body_as_memcpy(rec);
      if (cucap_fb_memcpy_kind(m) != CUCAP_FB_MEMCPYKIND_HTOD || !cucap_fb_memcpy_has_payload(m) ||
          cucap_fb_memcpy_geometry(m) || s->launch.buf)
        break;
      ec_upload *u = sh_vec_push(&s->uploads);
      if (!u)
        return fail(s, "%s", "out of memory");
      u->addr = cucap_fb_memcpy_dst(m);
      u->size = cucap_fb_memcpy_size(m);
      u->data = sh_h(cucap_fb_memcpy_payload(m));
      break;
    }
    case CUCAP_FB_BODY_LAUNCH:
      if (s->launch.buf)
        return fail(s, "%s", "the capture holds more than one launch: not an extracted launch");
      if (!sh_rec_copy_make(&s->launch, buf, size, rec))
        return fail(s, "%s", "out of memory");
      break;
    case CUCAP_FB_BODY_SNAPSHOT: {
      const cucap_fb_snapshot *sn = cucap_fb_record_body_as_snapshot(rec);
      if (cucap_fb_snapshot_reason(sn) != CUCAP_FB_SNAPSHOTREASON_EXIT || !s->launch.buf)
        break;
      size_t n = cucap_fb_snapshot_regions_len(sn);
      for (size_t i = 0; i < n; i++) {
        const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(sn, i);
        cucap_state_region *e = sh_vec_push(&s->results);
        if (!e)
          return fail(s, "%s", "out of memory");
        e->address = cucap_fb_mem_region_address(g);
        e->size = cucap_fb_mem_region_size(g);
        e->data = sh_h(cucap_fb_mem_region_data(g));
      }
      break;
    }
    default:
      break;
    }
  }
  if (st != CUCAP_END)
    return fail(s, "reading the capture: %s", cucap_status_str(st));
  if (!s->launch.buf)
    return fail(s, "%s", "the capture holds no kernel launch");
  return 1;
}

static int write_blob(ec_state *s, const char *dir, const char *name, cucap_hash128 h,
                      int nul) {
  uint64_t size = 0;
  if (cucap_reader_blob_size(s->r, h, &size) != CUCAP_OK)
    return fail(s, "blob of %s is missing", name);
  void *b = malloc(size + 1);
  if (!b)
    return fail(s, "%s", "out of memory");
  if (cucap_reader_blob_read(s->r, h, b, size) != CUCAP_OK) {
    free(b);
    return fail(s, "cannot read the blob of %s", name);
  }
  if (nul && (size == 0 || ((char *)b)[size - 1] != 0))
    ((char *)b)[size++] = 0; /* PTX text must end in NUL */
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(b, 1, size, f) == size;
  if (f && fclose(f) != 0)
    ok = 0;
  free(b);
  if (!ok)
    return fail(s, "cannot write %s", path);
  return 1;
}

typedef struct ec_reg {
  uint64_t addr, size;
  long file; /* upload index, -1: no contents */
} ec_reg;

static int reg_cmp(const void *a, const void *b) {
  const ec_reg *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const ec_fn *fn_of(const ec_state *s, uint64_t h) {
  for (size_t i = 0; i < s->fns.n; i++) {
    const ec_fn *f = sh_vec_at(&s->fns, i);
    if (f->handle == h)
      return f;
  }
  return NULL;
}

static void c_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(f, "\\%03o", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* The fixed part of the program (placement, upload, launch, checksum). */
static const char prog_body[] =
    "#define CK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char *n_ = 0;\\\n"
    "  cuGetErrorName(r_, &n_); fprintf(stderr, \"%s failed: %s\\n\", #call, n_ ? n_ : \"?\");\\\n"
    "  exit(2); } } while (0)\n"
    "#define NREG (sizeof regions / sizeof regions[0])\n"
    "static void *read_file(const char *path, size_t *size) {\n"
    "  FILE *f = fopen(path, \"rb\");\n"
    "  if (!f) { perror(path); exit(2); }\n"
    "  fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);\n"
    "  void *b = malloc(n > 0 ? (size_t)n : 1);\n"
    "  if (!b || (n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n)) { perror(path); exit(2); }\n"
    "  fclose(f); *size = (size_t)n; return b;\n"
    "}\n"
    "static CUdeviceptr live[NREG > 0 ? NREG : 1]; /* where each region is */\n"
    "static int relocated;\n"
    "static CUdeviceptr translate(uint64_t a) {\n"
    "  for (size_t i = 0; i < NREG; i++)\n"
    "    if (a >= regions[i].addr && a - regions[i].addr < regions[i].size) return live[i] + (a - regions[i].addr);\n"
    "  return (CUdeviceptr)a;\n"
    "}\n"
    "#define PIECE ((uint64_t)2 << 20)\n"
    "#define HINT ((uint64_t)32 << 20)\n"
    "/* what placement made, released at the end */\n"
    "static struct { uint64_t addr, size; } *resv; static size_t nresv;\n"
    "static struct { uint64_t addr; CUmemGenericAllocationHandle h; } *pieces; static size_t npieces;\n"
    "static void *grow(void *p, size_t n, size_t elem) {\n"
    "  void *q = realloc(p, (n + 1) * elem);\n"
    "  if (!q) { perror(\"realloc\"); exit(2); }\n"
    "  return q;\n"
    "}\n"
    "/* Reserve the recorded addresses (regions are sorted); 0 when the driver\n"
    " * would not give them. */\n"
    "static int place_fixed(CUdevice dev) {\n"
    "  CUmemAllocationProp prop; memset(&prop, 0, sizeof prop);\n"
    "  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = dev;\n"
    "  CUmemAccessDesc acc; memset(&acc, 0, sizeof acc);\n"
    "  acc.location = prop.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;\n"
    "  uint64_t lo = 0, hi = 0, mapped = 0;\n"
    "  for (size_t i = 0; i <= NREG; i++) {\n"
    "    /* super-ranges: 32 MiB-aligned unions of the regions */\n"
    "    uint64_t l = i < NREG ? regions[i].addr & ~(HINT - 1) : 0;\n"
    "    uint64_t h = i < NREG ? (regions[i].addr + regions[i].size + HINT - 1) & ~(HINT - 1) : 0;\n"
    "    if (i < NREG && hi && l <= hi) { if (h > hi) hi = h; continue; }\n"
    "    if (hi) {\n"
    "      CUdeviceptr got = 0;\n"
    "      if (cuMemAddressReserve(&got, hi - lo, 0, (CUdeviceptr)lo, 0) != CUDA_SUCCESS) return 0;\n"
    "      resv = grow(resv, nresv, sizeof *resv);\n"
    "      resv[nresv].addr = got; resv[nresv++].size = hi - lo;\n"
    "      if (got != lo) return 0;\n"
    "    }\n"
    "    lo = l; hi = h;\n"
    "  }\n"
    "  for (size_t i = 0; i < NREG; i++) {\n"
    "    uint64_t plo = regions[i].addr & ~(PIECE - 1), phi = (regions[i].addr + regions[i].size + PIECE - 1) & ~(PIECE - 1);\n"
    "    for (uint64_t p = plo > mapped ? plo : mapped; p < phi; p += PIECE) {\n"
    "      CUmemGenericAllocationHandle mh;\n"
    "      if (cuMemCreate(&mh, PIECE, &prop, 0) != CUDA_SUCCESS) return 0;\n"
    "      if (cuMemMap((CUdeviceptr)p, PIECE, 0, mh, 0) != CUDA_SUCCESS) { cuMemRelease(mh); return 0; }\n"
    "      pieces = grow(pieces, npieces, sizeof *pieces);\n"
    "      pieces[npieces].addr = p; pieces[npieces++].h = mh;\n"
    "      if (cuMemSetAccess((CUdeviceptr)p, PIECE, &acc, 1) != CUDA_SUCCESS) return 0;\n"
    "    }\n"
    "    if (phi > mapped) mapped = phi;\n"
    "    live[i] = (CUdeviceptr)regions[i].addr;\n"
    "  }\n"
    "  return 1;\n"
    "}\n"
    "static void release_fixed(void) {\n"
    "  for (size_t i = 0; i < npieces; i++) { cuMemUnmap(pieces[i].addr, PIECE); cuMemRelease(pieces[i].h); }\n"
    "  for (size_t i = 0; i < nresv; i++) cuMemAddressFree(resv[i].addr, resv[i].size);\n"
    "  free(pieces); free(resv); pieces = NULL; resv = NULL; npieces = nresv = 0;\n"
    "}\n"
    "static void place_relocated(void) {\n"
    "  release_fixed();\n"
    "  relocated = 1;\n"
    "  for (size_t i = 0; i < NREG; i++) if (regions[i].size) CK(cuMemAlloc(&live[i], regions[i].size));\n"
    "  fprintf(stderr, \"note: recorded addresses unavailable; memory relocated (pointer parameters are patched, pointers stored in memory are not)\\n\");\n"
    "}\n"
    "int main(void) {\n"
    "  CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; size_t n;\n"
    "  CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));\n"
    "  void *image = read_file(\"module.bin\", &n);\n"
    "  CK(cuModuleLoadData(&mod, image));\n"
    "  free(image);\n"
    "  CK(cuModuleGetFunction(&fn, mod, kernel_name));\n"
    "  if (smem > 48 * 1024) CK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));\n"
    "  if (!place_fixed(dev)) place_relocated();\n"
    "  for (size_t i = 0; i < NREG; i++) {\n"
    "    if (!regions[i].size) continue;\n"
    "    if (!regions[i].file) { CK(cuMemsetD8(live[i], 0, regions[i].size)); continue; }\n"
    "    void *b = read_file(regions[i].file, &n);\n"
    "    CK(cuMemcpyHtoD(live[i], b, regions[i].size)); free(b);\n"
    "  }\n"
    "  for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {\n"
    "    if (!globals[i].name) continue;\n"
    "    CUdeviceptr g; size_t gs; CK(cuModuleGetGlobal(&g, &gs, mod, globals[i].name));\n"
    "    void *b = read_file(globals[i].file, &n);\n"
    "    CK(cuMemcpyHtoD(g + globals[i].offset, b, globals[i].size)); free(b);\n"
    "  }\n"
    "  size_t argn = 0;\n"
    "  unsigned char *args = args_size ? read_file(\"args.bin\", &argn) : NULL;\n"
    "  if (relocated) {\n"
    "    for (size_t k = 0, off = 0;; k++, off += 8) {\n"
    "      size_t o = NPARAMS ? params[k].offset : off;\n"
    "      if (NPARAMS ? k >= NPARAMS : off + 8 > argn) break;\n"
    "      if ((NPARAMS && params[k].size != 8) || o % 8 || o + 8 > argn) continue;\n"
    "      uint64_t v; memcpy(&v, args + o, 8); v = translate(v); memcpy(args + o, &v, 8);\n"
    "    }\n"
    "  }\n"
    "  void *kp[NPARAMS > 0 ? NPARAMS : 1];\n"
    "  for (size_t k = 0; k < NPARAMS; k++) kp[k] = args + params[k].offset;\n"
    "  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &argn, CU_LAUNCH_PARAM_END};\n"
    "  if (cooperative)\n"
    "    CK(cuLaunchCooperativeKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, NULL, kp));\n"
    "  else\n"
    "    CK(cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, NULL,\n"
    "                      NPARAMS ? kp : NULL, NPARAMS || !argn ? NULL : extra));\n"
    "  CK(cuCtxSynchronize());\n"
    "  uint64_t h = 1469598103934665603ull; /* FNV-1a 64 of the result regions */\n"
    "  for (size_t i = 0; i < sizeof results / sizeof results[0]; i++) {\n"
    "    if (!results[i].size) continue;\n"
    "    unsigned char *b = malloc(results[i].size);\n"
    "    if (!b) { perror(\"malloc\"); return 2; }\n"
    "    CK(cuMemcpyDtoH(b, translate(results[i].addr), results[i].size));\n"
    "    for (uint64_t k = 0; k < results[i].size; k++) h = (h ^ b[k]) * 1099511628211ull;\n"
    "    free(b);\n"
    "  }\n"
    "  free(args);\n"
    "  if (relocated) { for (size_t i = 0; i < NREG; i++) if (live[i]) cuMemFree(live[i]); }\n"
    "  else release_fixed();\n"
    "  cuModuleUnload(mod);\n"
    "  cuDevicePrimaryCtxRelease(dev);\n"
    "  printf(\"checksum 0x%016llx\\n\", (unsigned long long)h);\n"
    "  if (!have_expected) { printf(\"no recorded result to compare with\\n\"); return 0; }\n"
    "  printf(\"recorded 0x%016llx: %s\\n\", expected, h == expected ? \"MATCH\" : \"DIFFERENT\");\n"
    "  return h == expected ? 0 : 1;\n"
    "}\n";

/* fail() for the helpers below, which return a status. */
static cucap_status failed(ec_state *s, cucap_status st, const char *fmt, const char *a) {
  fail(s, fmt, a);
  return st;
}

/* The launched function (*fn), the record that names it (*named) and the
 * module whose image holds it. */
static cucap_status find_launched(ec_state *s, const cucap_fb_launch *l, const ec_fn **fn_out,
                                  const ec_fn **named_out, const ec_mod **mod_out) {
  const ec_fn *fn = fn_of(s, cucap_fb_launch_function(l));
  const ec_fn *named = fn;
  /* A CUfunction of a CUkernel (cuKernelGetFunction): its module field is
   * the CUkernel, whose own record names the library. On the mock both
   * handles are one number and fn_of finds the kernel's record first. */
  if (fn && (!fn->name[0] || fn->kind == CUCAP_FB_FUNCTIONKIND_KERNELFUNCTION)) {
    const ec_fn *k = fn_of(s, fn->module);
    if (k && k != fn)
      named = k;
    else if (!fn->name[0])
      named = NULL;
  }
  CUCAP_RETURN_IF(!fn || !named || !named->name[0],
                  failed(s, CUCAP_ERR_CORRUPT, "%s",
                         "the launched function is not described in the capture"));
  uint64_t modh = named->module;
  const ec_mod *mod = NULL;
  for (size_t i = 0; i < s->mods.n; i++)
    if (((ec_mod *)sh_vec_at(&s->mods, i))->handle == modh)
      mod = sh_vec_at(&s->mods, i);
  CUCAP_RETURN_IF(!mod, failed(s, CUCAP_ERR_CORRUPT, "%s",
                               "the launched function's module image is not in the capture"));
  *fn_out = fn;
  *named_out = named;
  *mod_out = mod;
  return CUCAP_OK;
}

/* args.bin from the launch's blob or its inline block; *nargs_out: the
 * block's size. */
static cucap_status write_args(ec_state *s, const char *dir, const cucap_fb_launch *l,
                               size_t *nargs_out) {
  char path[4096];
  /* argument block */
  size_t nargs = 0;
  const uint8_t *args = cucap_fb_launch_args(l, &nargs);
  if (cucap_fb_launch_has_args_blob(l)) {
    uint64_t bs = 0;
    CUCAP_RETURN_IF(cucap_reader_blob_size(s->r, sh_h(cucap_fb_launch_args_blob(l)), &bs) !=
                            CUCAP_OK ||
                        !write_blob(s, dir, "args.bin", sh_h(cucap_fb_launch_args_blob(l)), 0),
                    CUCAP_ERR_IO);
    nargs = (size_t)bs;
  } else if (nargs) {
    snprintf(path, sizeof path, "%s/args.bin", dir);
    FILE *af = fopen(path, "wb");
    int ok = af && fwrite(args, 1, nargs, af) == nargs;
    if (af && fclose(af) != 0)
      ok = 0;
    CUCAP_RETURN_IF(!ok, failed(s, CUCAP_ERR_IO, "cannot write %s", path));
  }
  *nargs_out = nargs;
  return CUCAP_OK;
}

/* One file per upload; marks the uploads that land in a global of the
 * launched function's module (modh). */
static cucap_status write_uploads(ec_state *s, const char *dir, uint64_t modh) {
  /* uploads: into module globals, or device regions */
  for (size_t i = 0; i < s->uploads.n; i++) {
    ec_upload *u = sh_vec_at(&s->uploads, i);
    for (size_t g = 0; g < s->globals.n; g++) {
      const ec_global *gl = sh_vec_at(&s->globals, g);
      if (gl->module == modh && u->addr - gl->addr < (gl->size ? gl->size : 1)) {
        u->global = (int)g + 1;
        u->goff = u->addr - gl->addr;
      }
    }
    char name[64];
    snprintf(name, sizeof name, "%s%zu.bin", u->global ? "global" : "mem", i);
    CUCAP_RETURN_IF(!write_blob(s, dir, name, u->data, 0), CUCAP_ERR_IO);
  }
  return CUCAP_OK;
}

/* The FNV-1a 64 of the recorded result regions, which the program compares
 * its own with. */
static cucap_status expected_checksum(ec_state *s, uint64_t *expected_out) {
  uint64_t expected = SH_FNV_INIT;
  for (size_t i = 0; i < s->results.n; i++) {
    cucap_state_region *g = sh_vec_at(&s->results, i);
    void *b = malloc(g->size ? g->size : 1);
    if (!b || cucap_reader_blob_read(s->r, g->data, b, g->size) != CUCAP_OK) {
      free(b);
      return failed(s, CUCAP_ERR_CORRUPT, "%s", "cannot read the recorded result");
    }
    expected = sh_fnv1a(expected, b, (size_t)g->size);
    free(b);
  }
  *expected_out = expected;
  return CUCAP_OK;
}

/* repro.c up to the regions table: the header comment, the includes and the
 * launch's constants (name, geometry, argument size, parameter layout). */
static void print_launch(ec_state *s, FILE *c, const cucap_fb_launch *l, const ec_fn *fn,
                         const ec_fn *named, size_t nargs) {
  const cucap_fb_dim3 *gd = cucap_fb_launch_grid(l), *bd = cucap_fb_launch_block(l);
  const cucap_fb_file_header *h = cucap_reader_header(s->r);
  const cucap_fb_origin *org = h ? cucap_fb_file_header_origin(h) : NULL;
  const char *src = org ? cucap_fb_origin_source(org) : NULL;
  fprintf(c, "/* repro.c - launch %" PRIu64 " of ", cucap_fb_launch_launch_index(l));
  for (const char *p = named->name; *p; p++)
    fputc(*p == '*' && p[1] == '/' ? '?' : *p, c);
  fprintf(c, ",\n * written by `cucap extract --emit-c` from %s.\n",
          src && !strstr(src, "*/") ? src : "a capture");
  fprintf(c, " * Build and run in this directory (needs only cuda.h and libcuda):\n"
             " *   cc -O2 -o repro repro.c -I/usr/local/cuda/include -lcuda && ./repro\n"
             " * Prints the FNV-1a 64 checksum of the result regions and whether it\n"
             " * matches the recorded result (exit 0 if so, 1 if not, 2 on error). */\n");
  fprintf(c, "#include <cuda.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
             "#include <string.h>\n\n");
  fprintf(c, "static const char *kernel_name = ");
  c_string(c, named->name);
  fprintf(c, ";\nstatic const unsigned grid[3] = {%u, %u, %u}, block[3] = {%u, %u, %u};\n",
          gd ? gd->x : 1, gd ? gd->y : 1, gd ? gd->z : 1, bd ? bd->x : 1, bd ? bd->y : 1,
          bd ? bd->z : 1);
  fprintf(c, "static const unsigned smem = %u;\nstatic const int cooperative = %d;\n",
          cucap_fb_launch_shared_mem(l),
          cucap_fb_launch_kind(l) == CUCAP_FB_LAUNCHKIND_COOPERATIVE);
  fprintf(c, "static const size_t args_size = %zu;\n", nargs);
  size_t np = named->nparams ? named->nparams : fn->nparams;
  const cucap_fb_param_info *pi = named->nparams ? named->params : fn->params;
  fprintf(c, "#define NPARAMS %zu\nstatic const struct { uint32_t offset, size; } params[] = {", np);
  for (size_t i = 0; i < np; i++)
    fprintf(c, "%s{%u, %u}", i ? ", " : "", pi[i].offset, pi[i].size);
  fprintf(c, "%s};\n", np ? "" : "{0, 0}");
}

/* repro.c's regions table. */
static cucap_status print_regions(ec_state *s, FILE *c) {
  fprintf(c, "static const struct { uint64_t addr, size; const char *file; } regions[] = {\n");
  /* uploads, and result regions no upload covers (they still need memory),
   * sorted by address */
  ec_reg *regs = malloc((s->uploads.n + s->results.n + 1) * sizeof *regs);
  size_t nreg = 0;
  CUCAP_RETURN_IF(!regs, failed(s, CUCAP_ERR_IO, "%s", "out of memory"));
  for (size_t i = 0; i < s->uploads.n; i++) {
    const ec_upload *u = sh_vec_at(&s->uploads, i);
    if (!u->global)
      regs[nreg++] = (ec_reg){u->addr, u->size, (long)i};
  }
  for (size_t i = 0; i < s->results.n; i++) {
    const cucap_state_region *g = sh_vec_at(&s->results, i);
    int covered = 0;
    for (size_t k = 0; k < s->uploads.n && !covered; k++) {
      const ec_upload *u = sh_vec_at(&s->uploads, k);
      covered = !u->global && g->address >= u->addr && g->address - u->addr < u->size;
    }
    if (!covered)
      regs[nreg++] = (ec_reg){g->address, g->size, -1};
  }
  cucap_sort(regs, nreg, sizeof *regs, reg_cmp);
  for (size_t i = 0; i < nreg; i++) {
    if (regs[i].file >= 0)
      fprintf(c, "  {0x%" PRIx64 "ull, %" PRIu64 "ull, \"mem%ld.bin\"},\n", regs[i].addr,
              regs[i].size, regs[i].file);
    else
      fprintf(c, "  {0x%" PRIx64 "ull, %" PRIu64 "ull, NULL},\n", regs[i].addr, regs[i].size);
  }
  free(regs);
  if (!nreg)
    fprintf(c, "  {0, 0, NULL}\n");
  return CUCAP_OK;
}

/* repro.c's results and globals tables and the expected checksum. */
static void print_results(const ec_state *s, FILE *c, uint64_t expected) {
  fprintf(c, "};\nstatic const struct { uint64_t addr, size; } results[] = {\n");
  for (size_t i = 0; i < s->results.n; i++) {
    const cucap_state_region *g = sh_vec_at(&s->results, i);
    fprintf(c, "  {0x%" PRIx64 "ull, %" PRIu64 "ull},\n", g->address, g->size);
  }
  if (!s->results.n)
    fprintf(c, "  {0, 0}\n");
  fprintf(c, "};\nstatic const struct { const char *name; uint64_t offset, size; const char *file; } globals[] = {\n");
  int nglob = 0;
  for (size_t i = 0; i < s->uploads.n; i++) {
    const ec_upload *u = sh_vec_at(&s->uploads, i);
    if (!u->global)
      continue;
    const ec_global *gl = sh_vec_at(&s->globals, (size_t)u->global - 1);
    fprintf(c, "  {");
    c_string(c, gl->name);
    fprintf(c, ", %" PRIu64 "ull, %" PRIu64 "ull, \"global%zu.bin\"},\n", u->goff, u->size, i);
    nglob++;
  }
  if (!nglob)
    fprintf(c, "  {NULL, 0, 0, NULL}\n");
  fprintf(c, "};\nstatic const unsigned long long expected = 0x%016" PRIx64 "ull;\n"
             "static const int have_expected = %d;\n\n",
          expected, s->results.n > 0);
}

static cucap_status write_repro(ec_state *s, const char *dir, const cucap_fb_launch *l,
                                const ec_fn *fn, const ec_fn *named, size_t nargs,
                                uint64_t expected) {
  char path[4096];
  snprintf(path, sizeof path, "%s/repro.c", dir);
  FILE *c = fopen(path, "w");
  CUCAP_RETURN_IF(!c, failed(s, CUCAP_ERR_IO, "cannot write %s", path));
  print_launch(s, c, l, fn, named, nargs);
  cucap_status st = print_regions(s, c);
  if (st != CUCAP_OK) {
    fclose(c);
    return st;
  }
  print_results(s, c, expected);
  fputs(prog_body, c);
  CUCAP_RETURN_IF(fclose(c) != 0, failed(s, CUCAP_ERR_IO, "cannot write %s", path));
  return CUCAP_OK;
}

static cucap_status write_makefile(ec_state *s, const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/Makefile", dir);
  FILE *mk = fopen(path, "w");
  if (!mk || fprintf(mk, "CUDA_HOME ?= /usr/local/cuda\nrepro: repro.c\n\t$(CC) -O2 -o repro "
                         "repro.c -I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib64/stubs -lcuda\n") < 0 ||
      fclose(mk) != 0)
    return failed(s, CUCAP_ERR_IO, "cannot write %s", path);
  return CUCAP_OK;
}

/* The phases in order; the first that fails ends the emit. */
static cucap_status emit(ec_state *s, const char *dir) {
  CUCAP_RETURN_IF(cucap_reader_rewind(s->r) != CUCAP_OK || !collect(s), CUCAP_ERR_CORRUPT);
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    if (snprintf(s->msg, sizeof s->msg, "cannot create %s: %s", dir, strerror(errno)) < 0)
      s->msg[0] = 0;
    return CUCAP_ERR_IO;
  }
  const cucap_fb_launch *l = cucap_fb_record_body_as_launch(s->launch.rec);
  const ec_fn *fn, *named;
  const ec_mod *mod;
  CUCAP_FORWARD(find_launched(s, l, &fn, &named, &mod));
  CUCAP_RETURN_IF(
      !write_blob(s, dir, "module.bin", mod->image, mod->format == CUCAP_FB_IMAGEFORMAT_PTX),
      CUCAP_ERR_IO);
  size_t nargs;
  CUCAP_FORWARD(write_args(s, dir, l, &nargs));
  CUCAP_FORWARD(write_uploads(s, dir, named->module));
  uint64_t expected;
  CUCAP_FORWARD(expected_checksum(s, &expected));
  CUCAP_FORWARD(write_repro(s, dir, l, fn, named, nargs, expected));
  return write_makefile(s, dir);
}

cucap_status cucap_emit_c(cucap_reader *r, const char *dir, char *msg, size_t msg_size) {
  ec_state s;
  memset(&s, 0, sizeof s);
  s.r = r;
  sh_vec_init(&s.mods, sizeof(ec_mod));
  sh_vec_init(&s.fns, sizeof(ec_fn));
  sh_vec_init(&s.copies, sizeof(sh_rec_copy));
  sh_vec_init(&s.globals, sizeof(ec_global));
  sh_vec_init(&s.uploads, sizeof(ec_upload));
  sh_vec_init(&s.results, sizeof(cucap_state_region));
  cucap_status st = emit(&s, dir);
  if (msg && msg_size)
    snprintf(msg, msg_size, "%s", st == CUCAP_OK ? "" : s.msg[0] ? s.msg : cucap_status_str(st));
  for (size_t i = 0; i < s.copies.n; i++)
    free(((sh_rec_copy *)sh_vec_at(&s.copies, i))->buf);
  free(s.launch.buf);
  sh_vec *vs[] = {&s.mods, &s.fns, &s.copies, &s.globals, &s.uploads, &s.results};
  for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
    sh_vec_free(vs[i]);
  return st;
}
