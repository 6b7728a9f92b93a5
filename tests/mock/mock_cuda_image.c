/* Image parsing for the mock driver: fatbin container -> sm_90 ELF cubin (or
 * uncompressed PTX) -> kernel names, parameter layouts and globals.
 * Uses <elf.h> only, so the mock has no dependencies. Every read is bounds
 * checked: a malformed image yields CUDA_ERROR_INVALID_IMAGE, never a crash.
 * Layouts are documented in /work/shared/notes/cuda-facts.md. */
#include "mock_cuda_internal.h"

#include <ctype.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243B1u
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_FLAG_COMPRESSED (0x2000ull | 0x8000ull)
#define MOCK_SM 90
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define SHT_CUDA_INFO 0x70000000u
#define STO_CUDA_ENTRY 0x10

static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static size_t elf_size(const uint8_t *p) {
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  size_t end = (size_t)eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
  size_t ph = (size_t)eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
  if (ph > end) end = ph;
  /* sections may lie after the section header table */
  if (eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum < 65535) {
    for (unsigned i = 0; i < eh.e_shnum; i++) {
      Elf64_Shdr sh;
      memcpy(&sh, p + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
      if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end) end = sh.sh_offset + sh.sh_size;
    }
  }
  return end;
}

size_t mock_image_size(const void *image) {
  const uint8_t *p = image;
  if (!p) return 0;
  uint32_t magic = rd32(p);
  if (magic == FATBIN_MAGIC) return rd16(p + 6) + (size_t)rd64(p + 8);
  if (magic == FATBIN_WRAPPER_MAGIC) {
    const uint8_t *inner = (const uint8_t *)(uintptr_t)rd64(p + 8);
    return inner ? mock_image_size(inner) : 0;
  }
  if (memcmp(p, ELFMAG, SELFMAG) == 0) return elf_size(p);
  return strlen((const char *)p) + 1;
}

/* ---- PTX ---------------------------------------------------------------- */
static size_t ptx_type_size(const char *t, size_t n) {
  if (n < 3 || t[0] != '.') return 0;
  int bits = atoi(t + 2);
  if (t[1] == 'p' && n >= 5 && strncmp(t, ".pred", 5) == 0) return 1;
  return bits > 0 ? (size_t)bits / 8 : 0;
}

/* Parses `.entry name( .param .u64 a, .param .align 4 .b8 s[12], ... )`. */
static CUresult ptx_parse(const char *text, size_t len, mock_image_info *out) {
  const char *p = text, *end = text + len;
  size_t cap = 0;
  while (p < end) {
    const char *e = strstr(p, ".entry");
    if (!e || e >= end) break;
    p = e + 6;
    if (!isspace((unsigned char)*p)) continue;
    while (p < end && isspace((unsigned char)*p)) p++;
    const char *ns = p;
    while (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == '$' || *p == '.')) p++;
    if (p == ns) continue;
    if (out->nkernels == cap) {
      cap = cap ? cap * 2 : 8;
      void *n = realloc(out->kernels, cap * sizeof *out->kernels);
      if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
      out->kernels = n;
    }
    mock_kernel_info *k = &out->kernels[out->nkernels++];
    memset(k, 0, sizeof *k);
    k->name = strndup(ns, (size_t)(p - ns));
    if (!k->name) return CUDA_ERROR_OUT_OF_MEMORY;
    while (p < end && isspace((unsigned char)*p)) p++;
    if (p >= end || *p != '(') continue; /* no parameters */
    const char *close = memchr(p, ')', (size_t)(end - p));
    if (!close) return CUDA_ERROR_INVALID_PTX;
    uint32_t off = 0;
    const char *q = p + 1;
    while (q < close) {
      const char *param = strstr(q, ".param");
      if (!param || param >= close) break;
      q = param + 6;
      size_t align = 0, tsize = 0, count = 1;
      int after_ptr = 0; /* `.ptr .global .align N` describes the pointee */
      while (q < close && *q != ',') {
        while (q < close && isspace((unsigned char)*q)) q++;
        const char *ts = q;
        while (q < close && !isspace((unsigned char)*q) && *q != ',') q++;
        size_t tl = (size_t)(q - ts);
        if (tl >= 6 && strncmp(ts, ".align", 6) == 0) {
          while (q < close && isspace((unsigned char)*q)) q++;
          if (!after_ptr) align = strtoul(q, NULL, 10);
          while (q < close && isdigit((unsigned char)*q)) q++;
        } else if (tl >= 4 && strncmp(ts, ".ptr", 4) == 0) {
          after_ptr = 1;
        } else if (tl > 1 && ts[0] == '.' && !after_ptr) {
          size_t ts_n = ptx_type_size(ts, tl);
          if (ts_n) tsize = ts_n;
        } else if (tl > 0 && ts[0] != '.') {
          const char *br = memchr(ts, '[', tl);
          if (br) count = strtoul(br + 1, NULL, 10);
        }
      }
      if (tsize == 0) return CUDA_ERROR_INVALID_PTX;
      if (!align) align = tsize;
      off = (uint32_t)((off + align - 1) / align * align);
      mock_param *np = realloc(k->params, (size_t)(k->nparams + 1) * sizeof *np);
      if (!np) return CUDA_ERROR_OUT_OF_MEMORY;
      k->params = np;
      k->params[k->nparams].offset = off;
      k->params[k->nparams].size = (uint32_t)(tsize * count);
      k->nparams++;
      off += (uint32_t)(tsize * count);
    }
    k->param_bytes = off;
    p = close;
  }
  out->code = (const uint8_t *)text;
  out->code_size = len;
  out->is_ptx = 1;
  return CUDA_SUCCESS;
}

/* ---- ELF cubin ---------------------------------------------------------- */
#define CHECK_RANGE(off, n, total) \
  do { if ((uint64_t)(off) > (total) || (uint64_t)(n) > (total) - (uint64_t)(off)) return CUDA_ERROR_INVALID_IMAGE; } while (0)

static CUresult kparams_from_info(const uint8_t *d, size_t n, mock_kernel_info *k) {
  size_t pos = 0;
  int maxord = -1;
  mock_param tmp[1024];
  int have[1024] = {0};
  while (pos + 2 <= n) {
    uint8_t fmt = d[pos], attr = d[pos + 1];
    pos += 2;
    if (fmt == 4) {
      if (pos + 2 > n) return CUDA_ERROR_INVALID_IMAGE;
      uint16_t sz = rd16(d + pos);
      pos += 2;
      if (sz > n - pos) return CUDA_ERROR_INVALID_IMAGE;
      if (attr == EIATTR_KPARAM_INFO && sz >= 12) {
        uint16_t ord = rd16(d + pos + 4), off = rd16(d + pos + 6);
        uint32_t packed = rd32(d + pos + 8);
        if (ord < 1024) {
          tmp[ord].offset = off;
          tmp[ord].size = packed >> 18;
          have[ord] = 1;
          if (ord > maxord) maxord = ord;
        }
      } else if (attr == EIATTR_CBANK_PARAM_SIZE && sz >= 2) {
        k->param_bytes = rd16(d + pos);
      }
      pos += sz;
    } else if (fmt == 1) {
      /* EIFMT_NVAL: no payload */
    } else {
      if (attr == EIATTR_CBANK_PARAM_SIZE && pos + 2 <= n) k->param_bytes = rd16(d + pos);
      pos += 2;
    }
  }
  k->nparams = maxord + 1;
  if (k->nparams > 0) {
    k->params = calloc((size_t)k->nparams, sizeof *k->params);
    if (!k->params) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < k->nparams; i++) {
      if (!have[i]) return CUDA_ERROR_INVALID_IMAGE;
      k->params[i] = tmp[i];
    }
  }
  return CUDA_SUCCESS;
}

static CUresult elf_parse(const uint8_t *p, size_t size, mock_image_info *out) {
  if (size < sizeof(Elf64_Ehdr)) return CUDA_ERROR_INVALID_IMAGE;
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != 190 /* EM_CUDA */)
    return CUDA_ERROR_INVALID_IMAGE;
  unsigned sm = eh.e_ident[EI_ABIVERSION] >= 8 ? (eh.e_flags >> 8) & 0xff : eh.e_flags & 0xff;
  if (sm / 10 != MOCK_SM / 10) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return CUDA_ERROR_INVALID_IMAGE;
  CHECK_RANGE(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), size);
  Elf64_Shdr *sh = calloc(eh.e_shnum ? eh.e_shnum : 1, sizeof *sh);
  if (!sh) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(sh, p + eh.e_shoff, (size_t)eh.e_shnum * sizeof *sh);
  CUresult rc = CUDA_ERROR_INVALID_IMAGE;
  if (eh.e_shstrndx >= eh.e_shnum) goto done;
  const Elf64_Shdr *ss = &sh[eh.e_shstrndx];
  if (ss->sh_offset > size || ss->sh_size > size - ss->sh_offset) goto done;
  const char *shstr = (const char *)p + ss->sh_offset;
  size_t shstr_n = ss->sh_size;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    if (sh[i].sh_type != SHT_NOBITS && (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)) goto done;
    if (sh[i].sh_name >= shstr_n || !memchr(shstr + sh[i].sh_name, 0, shstr_n - sh[i].sh_name)) goto done;
  }
  /* kernels: one `.nv.info.<name>` section each */
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    const char *nm = shstr + sh[i].sh_name;
    if (sh[i].sh_type != SHT_CUDA_INFO || strncmp(nm, ".nv.info.", 9) != 0) continue;
    void *nk = realloc(out->kernels, (out->nkernels + 1) * sizeof *out->kernels);
    if (!nk) { rc = CUDA_ERROR_OUT_OF_MEMORY; goto done; }
    out->kernels = nk;
    mock_kernel_info *k = &out->kernels[out->nkernels++];
    memset(k, 0, sizeof *k);
    k->name = strdup(nm + 9);
    if (!k->name) { rc = CUDA_ERROR_OUT_OF_MEMORY; goto done; }
    rc = kparams_from_info(p + sh[i].sh_offset, sh[i].sh_size, k);
    if (rc != CUDA_SUCCESS) goto done;
    rc = CUDA_ERROR_INVALID_IMAGE;
  }
  /* globals: OBJECT symbols in .nv.global(.init) */
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    if (sh[i].sh_link >= eh.e_shnum) goto done;
    const Elf64_Shdr *st = &sh[sh[i].sh_link];
    const char *str = (const char *)p + st->sh_offset;
    size_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t j = 0; j < nsym; j++) {
      Elf64_Sym sym;
      memcpy(&sym, p + sh[i].sh_offset + j * sizeof sym, sizeof sym);
      if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= eh.e_shnum)
        continue;
      if (sym.st_name >= st->sh_size || !memchr(str + sym.st_name, 0, st->sh_size - sym.st_name)) goto done;
      const Elf64_Shdr *ds = &sh[sym.st_shndx];
      const char *dsn = shstr + ds->sh_name;
      if (strncmp(dsn, ".nv.global", 10) != 0 && strncmp(dsn, ".nv.constant", 12) != 0) continue;
      if (strncmp(dsn, ".nv.constant", 12) == 0 && strcmp(dsn, ".nv.constant3") != 0) continue;
      void *ng = realloc(out->globals, (out->nglobals + 1) * sizeof *out->globals);
      if (!ng) { rc = CUDA_ERROR_OUT_OF_MEMORY; goto done; }
      out->globals = ng;
      out->globals[out->nglobals].name = strdup(str + sym.st_name);
      out->globals[out->nglobals].size = sym.st_size;
      out->globals[out->nglobals].init = NULL;
      if (ds->sh_type != SHT_NOBITS) {
        if (sym.st_value > ds->sh_size || sym.st_size > ds->sh_size - sym.st_value) goto done;
        out->globals[out->nglobals].init = p + ds->sh_offset + sym.st_value;
      }
      out->nglobals++;
    }
  }
  out->code = p;
  out->code_size = size;
  out->is_ptx = 0;
  rc = CUDA_SUCCESS;
done:
  free(sh);
  return rc;
}

/* ---- fatbin ------------------------------------------------------------- */
static CUresult fatbin_parse(const uint8_t *p, size_t size, mock_image_info *out) {
  if (size < 16) return CUDA_ERROR_INVALID_IMAGE;
  uint16_t hs = rd16(p + 6);
  uint64_t fs = rd64(p + 8);
  CHECK_RANGE(hs, fs, size);
  const uint8_t *ptx = NULL, *elf = NULL;
  size_t ptx_n = 0, elf_n = 0;
  int saw_compressed = 0;
  uint64_t off = hs, end = hs + fs;
  while (off + 64 <= end) {
    const uint8_t *e = p + off;
    uint16_t kind = rd16(e);
    uint32_t ehs = rd32(e + 4);
    uint64_t ps = rd64(e + 8);
    uint32_t arch = rd32(e + 28);
    uint64_t flags = rd64(e + 40);
    if (ehs < 64 || ehs > end - off || ps > end - off - ehs) return CUDA_ERROR_INVALID_IMAGE;
    const uint8_t *payload = e + ehs;
    if (flags & FATBIN_FLAG_COMPRESSED) {
      saw_compressed = 1;
    } else if (kind == FATBIN_KIND_ELF && arch / 10 == MOCK_SM / 10 && arch <= MOCK_SM) {
      if (!elf || arch == MOCK_SM) { elf = payload; elf_n = ps; }
    } else if (kind == FATBIN_KIND_PTX && arch <= MOCK_SM) {
      ptx = payload; ptx_n = ps;
    }
    off += ehs + ps;
  }
  if (elf) return elf_parse(elf, elf_n, out);
  if (ptx) {
    size_t n = strnlen((const char *)ptx, ptx_n);
    return ptx_parse((const char *)ptx, n, out);
  }
  (void)saw_compressed; /* compressed entries are not supported: see mock_cuda.md */
  return CUDA_ERROR_NO_BINARY_FOR_GPU;
}

CUresult mock_image_parse(const void *image, size_t size, mock_image_info *out) {
  memset(out, 0, sizeof *out);
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  const uint8_t *p = image;
  CUresult rc;
  uint32_t magic = rd32(p);
  if (magic == FATBIN_WRAPPER_MAGIC) {
    const uint8_t *inner = (const uint8_t *)(uintptr_t)rd64(p + 8);
    if (!inner) return CUDA_ERROR_INVALID_IMAGE;
    return mock_image_parse(inner, 0, out);
  }
  if (size == 0) size = mock_image_size(image);
  if (magic == FATBIN_MAGIC)
    rc = fatbin_parse(p, size, out);
  else if (memcmp(p, ELFMAG, SELFMAG) == 0)
    rc = elf_parse(p, size, out);
  else {
    size_t n = strnlen((const char *)p, size);
    if (!memmem(p, n, ".entry", 6) && !memmem(p, n, ".version", 8)) return CUDA_ERROR_INVALID_IMAGE;
    rc = ptx_parse((const char *)p, n, out);
  }
  if (rc != CUDA_SUCCESS) mock_image_free(out);
  return rc;
}

void mock_image_free(mock_image_info *info) {
  if (!info) return;
  for (size_t i = 0; i < info->nkernels; i++) {
    free(info->kernels[i].name);
    free(info->kernels[i].params);
  }
  free(info->kernels);
  for (size_t i = 0; i < info->nglobals; i++) free(info->globals[i].name);
  free(info->globals);
  memset(info, 0, sizeof *info);
}
