/* fatbin.c - fatbin / fatbinary / ELF cubin / PTX parser. See cucap_fatbin.h. Every read is bounds-checked: the input
 * is untrusted (a fuzz target, tests/fuzz/fuzz_fatbin.c, exercises it). */
#include "cucap_sort.h"
#include "cucap_fatbin.h"
#include "cucap_vec.h"
#include "fatbin_elf.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define EM_CUDA_ 190
#define SHT_CUDA_INFO_ 0x70000000u
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define FATBIN_ENTRY_MIN_HEADER 64
#define MAX_PARAMS_SCRATCH 4096

static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* a + b <= lim without overflow */
static int fits(uint64_t a, uint64_t b, uint64_t lim) {
  return a <= lim && b <= lim - a;
}

/* ------------------------------------------------------------------ ELF */

cucap_status fb_elf_open(const void *data, size_t size, fb_elf *v) {
  CUCAP_RETURN_IF(!data, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(size < sizeof(Elf64_Ehdr), CUCAP_ERR_TRUNCATED);
  const uint8_t *p = data;
  CUCAP_RETURN_IF(memcmp(p, ELFMAG, SELFMAG) != 0, CUCAP_ERR_UNSUPPORTED);
  CUCAP_RETURN_IF(p[EI_CLASS] != ELFCLASS64 || p[EI_DATA] != ELFDATA2LSB,
                  CUCAP_ERR_UNSUPPORTED);
  v->p = p;
  v->size = size;
  memcpy(&v->eh, p, sizeof v->eh);
  if (v->eh.e_shnum) {
    CUCAP_RETURN_IF(v->eh.e_shentsize < sizeof(Elf64_Shdr), CUCAP_ERR_CORRUPT);
    CUCAP_RETURN_IF(!fits(v->eh.e_shoff,
                          (uint64_t)v->eh.e_shnum * v->eh.e_shentsize, size),
                    CUCAP_ERR_TRUNCATED);
  }
  return CUCAP_OK;
}

int fb_elf_shdr(const fb_elf *v, unsigned i, Elf64_Shdr *sh) {
  if (i >= v->eh.e_shnum)
    return 0;
  memcpy(sh, v->p + v->eh.e_shoff + (uint64_t)i * v->eh.e_shentsize, sizeof *sh);
  return 1;
}

/* Section contents, NULL if out of bounds or NOBITS. */
const uint8_t *fb_elf_sec_data(const fb_elf *v, const Elf64_Shdr *sh) {
  if (sh->sh_type == SHT_NOBITS || !fits(sh->sh_offset, sh->sh_size, v->size))
    return NULL;
  return v->p + sh->sh_offset;
}

/* Name of section sh from .shstrtab; NULL if malformed. */
const char *fb_elf_sec_name(const fb_elf *v, const Elf64_Shdr *sh) {
  Elf64_Shdr str;
  if (!fb_elf_shdr(v, v->eh.e_shstrndx, &str))
    return NULL;
  const uint8_t *d = fb_elf_sec_data(v, &str);
  if (!d || sh->sh_name >= str.sh_size)
    return NULL;
  const char *s = (const char *)d + sh->sh_name;
  if (!memchr(s, 0, str.sh_size - sh->sh_name))
    return NULL;
  return s;
}

cucap_status cucap_elf_size(const void *elf, size_t avail, size_t *out) {
  CUCAP_RETURN_IF(!elf || !out, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(avail < sizeof(Elf64_Ehdr), CUCAP_ERR_TRUNCATED);
  const uint8_t *p = elf;
  CUCAP_RETURN_IF(memcmp(p, ELFMAG, SELFMAG) != 0, CUCAP_ERR_UNSUPPORTED);
  CUCAP_RETURN_IF(p[EI_CLASS] != ELFCLASS64, CUCAP_ERR_UNSUPPORTED);
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  uint64_t lim = avail < CUCAP_IMAGE_MAX_SIZE ? avail : CUCAP_IMAGE_MAX_SIZE;
  uint64_t end = sizeof eh;
  if (eh.e_shnum) {
    CUCAP_RETURN_IF(eh.e_shentsize < sizeof(Elf64_Shdr), CUCAP_ERR_CORRUPT);
    uint64_t tab = (uint64_t)eh.e_shnum * eh.e_shentsize;
    CUCAP_RETURN_IF(!fits(eh.e_shoff, tab, lim), CUCAP_ERR_TRUNCATED);
    if (eh.e_shoff + tab > end)
      end = eh.e_shoff + tab;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
      Elf64_Shdr sh;
      memcpy(&sh, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof sh);
      if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
        continue;
      CUCAP_RETURN_IF(!fits(sh.sh_offset, sh.sh_size, lim), CUCAP_ERR_CORRUPT);
      if (sh.sh_offset + sh.sh_size > end)
        end = sh.sh_offset + sh.sh_size;
    }
  }
  if (eh.e_phnum) {
    CUCAP_RETURN_IF(eh.e_phentsize < sizeof(Elf64_Phdr), CUCAP_ERR_CORRUPT);
    uint64_t tab = (uint64_t)eh.e_phnum * eh.e_phentsize;
    CUCAP_RETURN_IF(!fits(eh.e_phoff, tab, lim), CUCAP_ERR_TRUNCATED);
    if (eh.e_phoff + tab > end)
      end = eh.e_phoff + tab;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
      Elf64_Phdr ph;
      memcpy(&ph, p + eh.e_phoff + (uint64_t)i * eh.e_phentsize, sizeof ph);
      if (!ph.p_filesz)
        continue;
      CUCAP_RETURN_IF(!fits(ph.p_offset, ph.p_filesz, lim), CUCAP_ERR_CORRUPT);
      if (ph.p_offset + ph.p_filesz > end)
        end = ph.p_offset + ph.p_filesz;
    }
  }
  *out = (size_t)end;
  return CUCAP_OK;
}

typedef struct fsym_search {
  const char *const *names;
  size_t n, found;
  uint32_t *idx;
} fsym_search;

static int fsym_match(const Elf64_Sym *es, const char *nm, uint64_t k, void *user) {
  fsym_search *f = user;
  if (ELF64_ST_TYPE(es->st_info) != STT_FUNC || !nm || k >= UINT32_MAX)
    return 0;
  for (size_t i = 0; i < f->n; i++)
    if (f->idx[i] == UINT32_MAX && f->names[i] && !strcmp(f->names[i], nm)) {
      f->idx[i] = (uint32_t)k;
      f->found++;
    }
  return 0;
}

size_t cucap_cubin_function_symbols(const void *elf, size_t size,
                                    const char *const *names, size_t n,
                                    uint32_t *idx) {
  for (size_t i = 0; i < n; i++)
    idx[i] = UINT32_MAX;
  fb_elf v;
  if (!n || fb_elf_open(elf, size, &v) != CUCAP_OK)
    return 0;
  fsym_search f = {names, n, 0, idx};
  (void)fb_elf_foreach_symbol(&v, 0, fsym_match, &f);
  return f.found;
}

/* The symbol iterator of fatbin_elf.h: the first SHT_SYMTAB's entries, with
 * their names (NULL when st_name is out of the string table or the name is
 * not NUL-terminated in it). */
cucap_status fb_elf_foreach_symbol(const fb_elf *v, int strict, fb_sym_fn fn, void *user) {
  for (unsigned s = 0; s < v->eh.e_shnum; s++) {
    Elf64_Shdr sh, strh;
    if (!fb_elf_shdr(v, s, &sh) || sh.sh_type != SHT_SYMTAB)
      continue;
    if (sh.sh_entsize < sizeof(Elf64_Sym) || !fb_elf_shdr(v, sh.sh_link, &strh))
      return strict ? CUCAP_ERR_CORRUPT : CUCAP_OK;
    const uint8_t *sym = fb_elf_sec_data(v, &sh);
    const uint8_t *str = fb_elf_sec_data(v, &strh);
    if (!sym || !str)
      return strict ? CUCAP_ERR_CORRUPT : CUCAP_OK;
    uint64_t nsym = sh.sh_size / sh.sh_entsize;
    for (uint64_t k = 0; k < nsym; k++) {
      Elf64_Sym es;
      memcpy(&es, sym + k * sh.sh_entsize, sizeof es);
      const char *nm = NULL;
      if (es.st_name < strh.sh_size &&
          memchr(str + es.st_name, 0, strh.sh_size - es.st_name))
        nm = (const char *)str + es.st_name;
      if (fn(&es, nm, k, user))
        break;
    }
    return CUCAP_OK; /* one symbol table */
  }
  return CUCAP_OK;
}

int cucap_cubin_has_line_info(const void *elf, size_t size) {
  fb_elf v;
  if (fb_elf_open(elf, size, &v) != CUCAP_OK)
    return 0;
  for (unsigned s = 0; s < v.eh.e_shnum; s++) {
    Elf64_Shdr sh;
    if (!fb_elf_shdr(&v, s, &sh))
      continue;
    const char *n = fb_elf_sec_name(&v, &sh);
    if (n && (!strcmp(n, ".debug_line") || !strcmp(n, ".nv_debug_line_sass")))
      return 1;
  }
  return 0;
}

cucap_status cucap_cubin_arch(const void *elf, size_t size, unsigned *sm) {
  fb_elf v;
  CUCAP_FORWARD(fb_elf_open(elf, size, &v));
  CUCAP_RETURN_IF(v.eh.e_machine != EM_CUDA_, CUCAP_ERR_UNSUPPORTED);
  unsigned abiver = v.p[EI_ABIVERSION];
  *sm = abiver >= 8 ? (v.eh.e_flags >> 8) & 0xff : v.eh.e_flags & 0xff;
  return CUCAP_OK;
}

cucap_status cucap_cubin_foreach_kernel(const void *elf, size_t size,
                                        cucap_kernel_fn fn, void *user) {
  fb_elf v;
  CUCAP_RETURN_IF(!fn, CUCAP_ERR_INVALID_ARG);
  CUCAP_FORWARD(fb_elf_open(elf, size, &v));
  for (unsigned i = 0; i < v.eh.e_shnum; i++) {
    Elf64_Shdr sh;
    fb_elf_shdr(&v, i, &sh);
    if (sh.sh_type != SHT_CUDA_INFO_)
      continue;
    const char *n = fb_elf_sec_name(&v, &sh);
    if (n && strncmp(n, ".nv.info.", 9) == 0 && n[9] && fn(n + 9, user))
      break;
  }
  return CUCAP_OK;
}

typedef struct kp_rec {
  uint16_t ordinal;
  uint16_t offset;
  uint32_t size;
} kp_rec;

static int kp_cmp(const void *a, const void *b) {
  const kp_rec *x = a, *y = b;
  return (int)x->ordinal - (int)y->ordinal;
}

/* Parses one .nv.info.<kernel> section. */
static cucap_status parse_nvinfo(const uint8_t *d, size_t n,
                                 cucap_param_layout *out, size_t max,
                                 size_t *count, uint32_t *total_bytes) {
  kp_rec *recs = NULL;
  size_t nrec = 0, cap = 0;
  int have_total = 0;
  uint32_t total = 0;
  size_t off = 0;
  cucap_status st = CUCAP_OK;
  while (off + 2 <= n) {
    uint8_t fmt = d[off], attr = d[off + 1];
    off += 2;
    if (fmt == 4) { /* EIFMT_SVAL: u16 size + payload */
      if (off + 2 > n) { st = CUCAP_ERR_CORRUPT; break; }
      size_t len = rd16(d + off);
      off += 2;
      if (len > n - off) { st = CUCAP_ERR_CORRUPT; break; }
      const uint8_t *pl = d + off;
      off += len;
      if (attr == EIATTR_KPARAM_INFO && len >= 12) {
        if (nrec == cap && cap >= MAX_PARAMS_SCRATCH) { st = CUCAP_ERR_TOO_LARGE; break; }
        if (!CUCAP_VEC_RESERVE(recs, cap, nrec + 1, 16)) { st = CUCAP_ERR_NOMEM; break; }
        recs[nrec].ordinal = rd16(pl + 4);
        recs[nrec].offset = rd16(pl + 6);
        recs[nrec].size = rd32(pl + 8) >> 18;
        nrec++;
      } else if (attr == EIATTR_CBANK_PARAM_SIZE && len >= 4) {
        total = rd32(pl);
        have_total = 1;
      }
    } else if (fmt >= 1 && fmt <= 3) {
      if (off + 2 > n) { st = CUCAP_ERR_CORRUPT; break; }
      if (attr == EIATTR_CBANK_PARAM_SIZE) {
        total = rd16(d + off);
        have_total = 1;
      }
      off += 2;
    } else {
      st = CUCAP_ERR_CORRUPT;
      break;
    }
  }
  if (st == CUCAP_OK) {
    if (nrec > 1)
      cucap_sort(recs, nrec, sizeof *recs, kp_cmp);
    uint32_t end = 0;
    for (size_t i = 0; i < nrec; i++) {
      if (i < max) {
        out[i].offset = recs[i].offset;
        out[i].size = recs[i].size;
      }
      if ((uint32_t)recs[i].offset + recs[i].size > end)
        end = (uint32_t)recs[i].offset + recs[i].size;
    }
    *count = nrec;
    *total_bytes = have_total ? total : end;
  }
  free(recs);
  return st;
}

cucap_status cucap_cubin_kernel_params(const void *elf, size_t size,
                                       const char *kernel,
                                       cucap_param_layout *out, size_t max,
                                       size_t *count, uint32_t *total_bytes) {
  fb_elf v;
  CUCAP_RETURN_IF(!kernel || !count || !total_bytes || (max && !out),
                  CUCAP_ERR_INVALID_ARG);
  CUCAP_FORWARD(fb_elf_open(elf, size, &v));
  size_t klen = strlen(kernel);
  for (unsigned i = 0; i < v.eh.e_shnum; i++) {
    Elf64_Shdr sh;
    fb_elf_shdr(&v, i, &sh);
    if (sh.sh_type != SHT_CUDA_INFO_)
      continue;
    const char *n = fb_elf_sec_name(&v, &sh);
    if (!n || strncmp(n, ".nv.info.", 9) != 0 || strncmp(n + 9, kernel, klen) ||
        n[9 + klen])
      continue;
    const uint8_t *d = fb_elf_sec_data(&v, &sh);
    CUCAP_RETURN_IF(!d, CUCAP_ERR_CORRUPT);
    return parse_nvinfo(d, sh.sh_size, out, max, count, total_bytes);
  }
  return CUCAP_ERR_NOT_FOUND;
}

/* --------------------------------------------------------------- fatbin */

cucap_status cucap_fatbin_foreach(const void *fatbin, size_t size,
                                  cucap_fatbin_entry_fn fn, void *user) {
  CUCAP_RETURN_IF(!fatbin || !fn, CUCAP_ERR_INVALID_ARG);
  CUCAP_RETURN_IF(size < 16, CUCAP_ERR_TRUNCATED);
  const uint8_t *p = fatbin;
  CUCAP_RETURN_IF(rd32(p) != CUCAP_FATBIN_MAGIC, CUCAP_ERR_UNSUPPORTED);
  uint64_t hs = rd16(p + 6), fs = rd64(p + 8);
  CUCAP_RETURN_IF(hs < 16, CUCAP_ERR_CORRUPT);
  CUCAP_RETURN_IF(!fits(hs, fs, size), CUCAP_ERR_TRUNCATED);
  uint64_t off = hs, end = hs + fs;
  while (off < end) {
    CUCAP_RETURN_IF(end - off < FATBIN_ENTRY_MIN_HEADER, CUCAP_ERR_CORRUPT);
    const uint8_t *e = p + off;
    uint64_t ehs = rd32(e + 4), psz = rd64(e + 8);
    CUCAP_RETURN_IF(ehs < FATBIN_ENTRY_MIN_HEADER, CUCAP_ERR_CORRUPT);
    CUCAP_RETURN_IF(!fits(ehs, psz, end - off), CUCAP_ERR_CORRUPT);
    cucap_fatbin_entry ent;
    memset(&ent, 0, sizeof ent);
    ent.kind = rd16(e);
    ent.arch = rd32(e + 28);
    ent.flags = rd64(e + 40);
    ent.payload = e + ehs;
    uint64_t csz = rd32(e + 16), usz = rd64(e + 56);
    if (ent.flags & CUCAP_FATBIN_FLAG_ZSTD)
      ent.codec = CUCAP_FATBIN_CODEC_ZSTD;
    else if (ent.flags & CUCAP_FATBIN_FLAG_LZ4)
      ent.codec = CUCAP_FATBIN_CODEC_LZ4;
    if (ent.codec) {
      /* compressed_size excludes the padding up to payload_size */
      CUCAP_RETURN_IF(csz == 0 || csz > psz, CUCAP_ERR_CORRUPT);
      CUCAP_RETURN_IF(usz > CUCAP_IMAGE_MAX_SIZE, CUCAP_ERR_TOO_LARGE);
      ent.payload_size = (size_t)csz;
      ent.uncompressed_size = (size_t)usz;
    } else {
      ent.payload_size = (size_t)psz;
      ent.uncompressed_size = (size_t)psz;
    }
    if (fn(&ent, user))
      break;
    off += ehs + psz;
  }
  return CUCAP_OK;
}

/* One entry's place in the fatbin (cucap_fatbin_select). */
typedef struct sel_ent {
  uint64_t off, len; /* header + payload */
  unsigned kind, arch;
  int keep;
} sel_ent;


/* The entries of the fatbin's data part (hs, fs: header size, data size)
 * into e[0..*n_out), at most cap. */
static cucap_status sel_entries(const uint8_t *p, uint64_t hs, uint64_t fs, sel_ent *e,
                                size_t cap, size_t *n_out) {
  size_t n = 0;
  uint64_t off = hs, end = hs + fs;
  while (off < end) {
    CUCAP_RETURN_IF(end - off < FATBIN_ENTRY_MIN_HEADER || n == cap, CUCAP_ERR_CORRUPT);
    const uint8_t *h = p + off;
    uint64_t ehs = rd32(h + 4), psz = rd64(h + 8);
    CUCAP_RETURN_IF(ehs < FATBIN_ENTRY_MIN_HEADER || !fits(ehs, psz, end - off),
                    CUCAP_ERR_CORRUPT);
    e[n] = (sel_ent){off, ehs + psz, rd16(h), rd32(h + 28), 0};
    n++;
    off += ehs + psz;
  }
  *n_out = n;
  return CUCAP_OK;
}

/* Marks the entries to keep; 0 when some device has neither. */
static int sel_mark(sel_ent *e, size_t n, const unsigned *sms, size_t nsms) {
  /* per device: the best SASS arch and the best PTX arch */
  int covered_all = 1;
  for (size_t d = 0; d < nsms; d++) {
    unsigned best_elf = 0, best_ptx = 0;
    int have_elf = 0, have_ptx = 0;
    for (size_t i = 0; i < n; i++) {
      if (e[i].kind == CUCAP_FATBIN_ENTRY_ELF && fb_sass_ok(e[i].arch, sms[d]) &&
          (!have_elf || e[i].arch > best_elf)) {
        best_elf = e[i].arch;
        have_elf = 1;
      } else if (e[i].kind == CUCAP_FATBIN_ENTRY_PTX && e[i].arch <= sms[d] &&
                 (!have_ptx || e[i].arch > best_ptx)) {
        best_ptx = e[i].arch;
        have_ptx = 1;
      }
    }
    if (!have_elf && !have_ptx)
      covered_all = 0;
    for (size_t i = 0; i < n; i++)
      if ((have_elf && e[i].kind == CUCAP_FATBIN_ENTRY_ELF && e[i].arch == best_elf) ||
          (have_ptx && e[i].kind == CUCAP_FATBIN_ENTRY_PTX && e[i].arch == best_ptx))
        e[i].keep = 1;
  }
  return covered_all;
}

/* The reduced fatbin: the header with the new data size, then the kept
 * entries in their order. */
static cucap_status sel_write(const uint8_t *p, uint64_t hs, uint64_t new_fs,
                              const sel_ent *e, size_t n, void **out, size_t *out_size) {
  uint8_t *o = malloc((size_t)(hs + new_fs));
  CUCAP_RETURN_IF(!o, CUCAP_ERR_NOMEM);
  memcpy(o, p, (size_t)hs);
  memcpy(o + 8, &new_fs, 8);
  uint64_t w = hs;
  for (size_t i = 0; i < n; i++) {
    if (!e[i].keep)
      continue;
    memcpy(o + w, p + e[i].off, (size_t)e[i].len);
    w += e[i].len;
  }
  *out = o;
  *out_size = (size_t)w;
  return CUCAP_OK;
}

cucap_status cucap_fatbin_select(const void *fatbin, size_t size, const unsigned *sms,
                                 size_t nsms, void **out, size_t *out_size,
                                 cucap_fatbin_select_stats *stats) {
  CUCAP_RETURN_IF(!fatbin || !out || !out_size || (nsms && !sms), CUCAP_ERR_INVALID_ARG);
  *out = NULL;
  *out_size = 0;
  if (stats)
    memset(stats, 0, sizeof *stats);
  CUCAP_RETURN_IF(size < 16, CUCAP_ERR_TRUNCATED);
  const uint8_t *p = fatbin;
  CUCAP_RETURN_IF(rd32(p) != CUCAP_FATBIN_MAGIC, CUCAP_ERR_UNSUPPORTED);
  uint64_t hs = rd16(p + 6), fs = rd64(p + 8);
  CUCAP_RETURN_IF(hs < 16, CUCAP_ERR_CORRUPT);
  CUCAP_RETURN_IF(!fits(hs, fs, size), CUCAP_ERR_TRUNCATED);
  /* the entries (each at least a minimal header) */
  size_t cap = (size_t)(fs / FATBIN_ENTRY_MIN_HEADER) + 1, n = 0;
  sel_ent *e = malloc(cap * sizeof *e);
  CUCAP_RETURN_IF(!e, CUCAP_ERR_NOMEM);
  cucap_status st = sel_entries(p, hs, fs, e, cap, &n);
  if (st != CUCAP_OK) {
    free(e);
    return st;
  }
  int covered_all = sel_mark(e, n, sms, nsms);
  size_t kept = 0;
  uint64_t new_fs = 0;
  int aligned = 1;
  for (size_t i = 0; i < n; i++) {
    if (e[i].kind != CUCAP_FATBIN_ENTRY_ELF && e[i].kind != CUCAP_FATBIN_ENTRY_PTX)
      e[i].keep = 1; /* a kind this parser does not judge */
    if (!e[i].keep)
      continue;
    if ((hs + new_fs) % 8 != e[i].off % 8)
      aligned = 0;
    kept++;
    new_fs += e[i].len;
  }
  int whole = kept == n || !nsms || !covered_all || !aligned;
  if (stats) {
    stats->entries = n;
    for (size_t i = 0; i < n; i++) {
      if (!whole && !e[i].keep)
        continue;
      stats->kept++;
      stats->elf_kept += e[i].kind == CUCAP_FATBIN_ENTRY_ELF;
      stats->ptx_kept += e[i].kind == CUCAP_FATBIN_ENTRY_PTX;
    }
  }
  if (whole) {
    free(e);
    return CUCAP_OK; /* keep the image whole */
  }
  st = sel_write(p, hs, new_fs, e, n, out, out_size);
  free(e);
  return st;
}

cucap_status cucap_lz4_block_decode(const uint8_t *src, size_t src_size,
                                    uint8_t *dst, size_t dst_size) {
  size_t ip = 0, op = 0;
  CUCAP_RETURN_IF(!src || (dst_size && !dst), CUCAP_ERR_INVALID_ARG);
  while (ip < src_size) {
    unsigned tok = src[ip++];
    size_t lit = tok >> 4;
    if (lit == 15) {
      unsigned b;
      do {
        CUCAP_RETURN_IF(ip >= src_size, CUCAP_ERR_DECOMPRESS);
        b = src[ip++];
        lit += b;
        CUCAP_RETURN_IF(lit > dst_size, CUCAP_ERR_DECOMPRESS);
      } while (b == 255);
    }
    CUCAP_RETURN_IF(lit > src_size - ip || lit > dst_size - op,
                    CUCAP_ERR_DECOMPRESS);
    memcpy(dst + op, src + ip, lit);
    ip += lit;
    op += lit;
    if (ip == src_size)
      break; /* last sequence: literals only */
    CUCAP_RETURN_IF(src_size - ip < 2, CUCAP_ERR_DECOMPRESS);
    size_t moff = rd16(src + ip);
    ip += 2;
    CUCAP_RETURN_IF(moff == 0 || moff > op, CUCAP_ERR_DECOMPRESS);
    size_t mlen = tok & 15;
    if (mlen == 15) {
      unsigned b;
      do {
        CUCAP_RETURN_IF(ip >= src_size, CUCAP_ERR_DECOMPRESS);
        b = src[ip++];
        mlen += b;
        CUCAP_RETURN_IF(mlen > dst_size, CUCAP_ERR_DECOMPRESS);
      } while (b == 255);
    }
    mlen += 4;
    CUCAP_RETURN_IF(mlen > dst_size - op, CUCAP_ERR_DECOMPRESS);
    const uint8_t *m = dst + op - moff;
    if (moff >= mlen) {
      memcpy(dst + op, m, mlen);
    } else {
      for (size_t i = 0; i < mlen; i++) /* overlapping copy, byte by byte */
        dst[op + i] = m[i];
    }
    op += mlen;
  }
  CUCAP_RETURN_IF(op != dst_size, CUCAP_ERR_DECOMPRESS);
  return CUCAP_OK;
}

cucap_status cucap_fatbin_entry_data(const cucap_fatbin_entry *e, void **out,
                                     size_t *out_size) {
  CUCAP_RETURN_IF(!e || !out || !out_size, CUCAP_ERR_INVALID_ARG);
  *out = NULL;
  *out_size = 0;
  size_t n = e->uncompressed_size;
  CUCAP_RETURN_IF(n > CUCAP_IMAGE_MAX_SIZE, CUCAP_ERR_TOO_LARGE);
  /* The sizes are untrusted: never allocate more than the payload could
   * decode to (found by fuzz_fatbin: a 2 GiB claim on a few bytes). LZ4
   * cannot expand beyond ~255x; real cubins compress < 50x, so 4096x bounds
   * zstd generously. */
  if (e->codec == CUCAP_FATBIN_CODEC_NONE)
    CUCAP_RETURN_IF(n > e->payload_size, CUCAP_ERR_CORRUPT);
  else
    CUCAP_RETURN_IF(n / 4096 > e->payload_size, CUCAP_ERR_CORRUPT);
  uint8_t *buf = malloc(n ? n : 1);
  CUCAP_RETURN_IF(!buf, CUCAP_ERR_NOMEM);
  cucap_status st = CUCAP_OK;
  switch (e->codec) {
  case CUCAP_FATBIN_CODEC_NONE:
    memcpy(buf, e->payload, n);
    break;
  case CUCAP_FATBIN_CODEC_LZ4:
    st = cucap_lz4_block_decode(e->payload, e->payload_size, buf, n);
    break;
  case CUCAP_FATBIN_CODEC_ZSTD: {
    size_t r = ZSTD_decompress(buf, n, e->payload, e->payload_size);
    if (ZSTD_isError(r) || r != n)
      st = CUCAP_ERR_DECOMPRESS;
    break;
  }
  default:
    st = CUCAP_ERR_UNSUPPORTED;
  }
  if (st != CUCAP_OK) {
    free(buf);
    return st;
  }
  *out = buf;
  *out_size = n;
  return CUCAP_OK;
}

/* --------------------------------------------------------------- detect */

static cucap_status fatbin_size(const uint8_t *p, size_t avail, size_t *out) {
  CUCAP_RETURN_IF(avail < 16, CUCAP_ERR_TRUNCATED);
  uint64_t hs = rd16(p + 6), fs = rd64(p + 8);
  CUCAP_RETURN_IF(hs < 16, CUCAP_ERR_CORRUPT);
  uint64_t lim = avail < CUCAP_IMAGE_MAX_SIZE ? avail : CUCAP_IMAGE_MAX_SIZE;
  CUCAP_RETURN_IF(!fits(hs, fs, lim), CUCAP_ERR_TRUNCATED);
  *out = (size_t)(hs + fs);
  return CUCAP_OK;
}

static int looks_like_ptx(const uint8_t *p, size_t avail) {
  /* PTX is text: the first bytes are printable or whitespace. */
  size_t n = avail < 64 ? avail : 64;
  size_t i = 0;
  for (; i < n && p[i]; i++)
    if (p[i] < 0x09 || (p[i] > 0x0d && p[i] < 0x20) || p[i] >= 0x7f)
      return 0;
  return i > 0;
}

cucap_status cucap_image_detect(const void *image, size_t avail,
                                cucap_image_info *out) {
  CUCAP_RETURN_IF(!image || !out, CUCAP_ERR_INVALID_ARG);
  memset(out, 0, sizeof *out);
  const uint8_t *p = image;
  CUCAP_RETURN_IF(avail < 4, CUCAP_ERR_TRUNCATED);
  uint32_t magic = rd32(p);
  if (magic == CUCAP_FATBIN_MAGIC) {
    CUCAP_FORWARD(fatbin_size(p, avail, &out->size));
    out->format = CUCAP_IMAGE_FATBIN;
  } else if (magic == CUCAP_FATBINARY_MAGIC) {
    CUCAP_RETURN_IF(avail < 24, CUCAP_ERR_TRUNCATED);
    const uint8_t *inner = (const uint8_t *)(uintptr_t)rd64(p + 8);
    out->format = CUCAP_IMAGE_FATBINARY;
    out->size = 24;
    /* Only a live application pointer (avail unknown) may be followed: a
     * bounded buffer (a file, the fuzzer) holds a meaningless address. */
    if (avail != SIZE_MAX)
      return CUCAP_OK;
    CUCAP_RETURN_IF(!inner, CUCAP_ERR_CORRUPT);
    /* The wrapper's data pointer is only known valid, not its extent. */
    cucap_image_info in;
    CUCAP_FORWARD(cucap_image_detect(inner, SIZE_MAX, &in));
    CUCAP_RETURN_IF(in.format == CUCAP_IMAGE_FATBINARY, CUCAP_ERR_CORRUPT);
    out->data = in.data;
    out->data_size = in.data_size;
    out->data_format = in.data_format;
    return CUCAP_OK;
  } else if (memcmp(p, ELFMAG, SELFMAG) == 0) {
    CUCAP_FORWARD(cucap_elf_size(p, avail, &out->size));
    out->format = CUCAP_IMAGE_CUBIN;
  } else if (looks_like_ptx(p, avail)) {
    size_t lim = avail < CUCAP_IMAGE_MAX_SIZE ? avail : CUCAP_IMAGE_MAX_SIZE;
    const uint8_t *z = memchr(p, 0, lim);
    CUCAP_RETURN_IF(!z, CUCAP_ERR_TRUNCATED);
    out->size = (size_t)(z - p) + 1;
    out->format = CUCAP_IMAGE_PTX;
  } else {
    return CUCAP_ERR_UNSUPPORTED;
  }
  out->data = image;
  out->data_size = out->size;
  out->data_format = out->format;
  return CUCAP_OK;
}

/* ------------------------------------------------------ kernel lookups */

typedef struct kp_search {
  const char *kernel;
  cucap_param_layout *out;
  size_t max, *count;
  uint32_t *total;
  cucap_status st;
} kp_search;

static int kp_entry(const cucap_fatbin_entry *e, void *user) {
  kp_search *s = user;
  if (e->kind != CUCAP_FATBIN_ENTRY_ELF)
    return 0;
  void *d = NULL;
  size_t n = 0;
  const void *img = e->payload;
  size_t sz = e->payload_size;
  if (e->codec) {
    if (cucap_fatbin_entry_data(e, &d, &n) != CUCAP_OK)
      return 0;
    img = d;
    sz = n;
  }
  cucap_status st = cucap_cubin_kernel_params(img, sz, s->kernel, s->out,
                                              s->max, s->count, s->total);
  free(d);
  if (st == CUCAP_OK) {
    s->st = CUCAP_OK;
    return 1;
  }
  if (st != CUCAP_ERR_NOT_FOUND && s->st == CUCAP_ERR_NOT_FOUND)
    s->st = st; /* remember a damaged entry, keep looking */
  return 0;
}

cucap_status cucap_image_kernel_params(const void *image, size_t size,
                                       const char *kernel,
                                       cucap_param_layout *out, size_t max,
                                       size_t *count, uint32_t *total_bytes) {
  cucap_image_info info;
  CUCAP_FORWARD(cucap_image_detect(image, size, &info));
  if (info.data_format == CUCAP_IMAGE_CUBIN)
    return cucap_cubin_kernel_params(info.data, info.data_size, kernel, out,
                                     max, count, total_bytes);
  if (info.data_format != CUCAP_IMAGE_FATBIN)
    return CUCAP_ERR_NOT_FOUND;
  kp_search s = {kernel, out, max, count, total_bytes, CUCAP_ERR_NOT_FOUND};
  CUCAP_FORWARD(cucap_fatbin_foreach(info.data, info.data_size, kp_entry, &s));
  return s.st;
}

int fb_sass_ok(unsigned have, unsigned want) {
  return have / 10 == want / 10 && have % 10 <= want % 10;
}

/* ".target sm_NN" of a PTX text; 0 if not found. */
static unsigned ptx_target(const uint8_t *p, size_t n) {
  static const char key[] = ".target sm_";
  size_t kl = sizeof key - 1;
  for (size_t i = 0; i + kl < n; i++) {
    if (p[i] == '.' && memcmp(p + i, key, kl) == 0) {
      unsigned v = 0;
      for (size_t j = i + kl; j < n && p[j] >= '0' && p[j] <= '9' && v < 10000; j++)
        v = v * 10 + (p[j] - '0');
      return v;
    }
  }
  return 0;
}

typedef struct arch_search {
  unsigned sm;
  int ok;
} arch_search;

static int arch_entry(const cucap_fatbin_entry *e, void *user) {
  arch_search *s = user;
  if (e->kind == CUCAP_FATBIN_ENTRY_ELF && fb_sass_ok(e->arch, s->sm))
    s->ok = 1;
  else if (e->kind == CUCAP_FATBIN_ENTRY_PTX && e->arch <= s->sm)
    s->ok = 1;
  return s->ok;
}

int cucap_image_has_code_for(const void *image, size_t size, unsigned sm) {
  cucap_image_info info;
  if (cucap_image_detect(image, size, &info) != CUCAP_OK)
    return 0;
  switch (info.data_format) {
  case CUCAP_IMAGE_CUBIN: {
    unsigned a;
    return cucap_cubin_arch(info.data, info.data_size, &a) == CUCAP_OK &&
           fb_sass_ok(a, sm);
  }
  case CUCAP_IMAGE_PTX: {
    unsigned t = ptx_target(info.data, info.data_size);
    return t == 0 || t <= sm;
  }
  case CUCAP_IMAGE_FATBIN: {
    arch_search s = {sm, 0};
    if (cucap_fatbin_foreach(info.data, info.data_size, arch_entry, &s) != CUCAP_OK)
      return 0;
    return s.ok;
  }
  default:
    return 0;
  }
}
