/* symbolize.c - frame address -> object+offset -> function+offset. See
 * cucap_symbolize.h. */
#include "cucap_sort.h"
#include "cucap_symbolize.h"
#include "cucap_vec.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct sym {
  uint64_t value, size;
  const char *name; /* into names */
} sym;

/* Symbols of one object file (shared by objects with the same path). */
typedef struct symfile {
  char *path;
  uint8_t build_id[64];
  size_t build_id_len;
  int loaded;        /* tried */
  int mismatch;      /* build-id differs from the recorded one */
  sym *syms;
  size_t nsyms;
  char *names;       /* concatenated NUL-terminated names */
  struct symfile *next;
} symfile;

typedef struct object {
  uint64_t base, start, end;
  symfile *file;
} object;

struct cucap_symbolizer {
  object *objs;
  size_t nobjs, cap;
  symfile *files;
};

cucap_status cucap_symbolizer_create(cucap_symbolizer **out) {
  CUCAP_RETURN_IF(!out, CUCAP_ERR_INVALID_ARG);
  *out = calloc(1, sizeof **out);
  return *out ? CUCAP_OK : CUCAP_ERR_NOMEM;
}

void cucap_symbolizer_destroy(cucap_symbolizer *s) {
  if (!s)
    return;
  for (symfile *f = s->files, *n; f; f = n) {
    n = f->next;
    free(f->path);
    free(f->syms);
    free(f->names);
    free(f);
  }
  free(s->objs);
  free(s);
}

void cucap_symbolizer_clear(cucap_symbolizer *s) {
  if (s)
    s->nobjs = 0;
}

cucap_status cucap_symbolizer_add_object(cucap_symbolizer *s, const char *path,
                                         const uint8_t *build_id, size_t build_id_len,
                                         uint64_t base, uint64_t start, uint64_t end) {
  CUCAP_RETURN_IF(!s || !path, CUCAP_ERR_INVALID_ARG);
  if (build_id_len > 64)
    build_id_len = 64;
  symfile *f = s->files;
  for (; f; f = f->next)
    if (strcmp(f->path, path) == 0 && f->build_id_len == build_id_len &&
        (!build_id_len || memcmp(f->build_id, build_id, build_id_len) == 0))
      break;
  if (!f) {
    f = calloc(1, sizeof *f);
    CUCAP_RETURN_IF(!f, CUCAP_ERR_NOMEM);
    f->path = strdup(path);
    if (!f->path) {
      free(f);
      return CUCAP_ERR_NOMEM;
    }
    if (build_id && build_id_len)
      memcpy(f->build_id, build_id, build_id_len);
    f->build_id_len = build_id && build_id_len ? build_id_len : 0;
    f->next = s->files;
    s->files = f;
  }
  CUCAP_RETURN_IF(!CUCAP_VEC_RESERVE(s->objs, s->cap, s->nobjs + 1, 32), CUCAP_ERR_NOMEM);
  s->objs[s->nobjs++] = (object){base, start, end, f};
  return CUCAP_OK;
}

/* ------------------------------------------------------------ ELF reading */

static int fits(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

static int sym_cmp(const void *a, const void *b) {
  const sym *x = a, *y = b;
  return x->value < y->value ? -1 : x->value > y->value;
}

/* GNU build-id of a mapped ELF file; 0 if none. */
static size_t file_build_id(const uint8_t *p, size_t size, const Elf64_Ehdr *eh,
                            const uint8_t **out) {
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, p + eh->e_shoff + (uint64_t)i * eh->e_shentsize, sizeof sh);
    if (sh.sh_type != SHT_NOTE || !fits(sh.sh_offset, sh.sh_size, size))
      continue;
    const uint8_t *d = p + sh.sh_offset;
    size_t off = 0;
    while (off + sizeof(Elf64_Nhdr) <= sh.sh_size) {
      Elf64_Nhdr nh;
      memcpy(&nh, d + off, sizeof nh);
      size_t name_off = off + sizeof nh;
      size_t desc_off = name_off + (((size_t)nh.n_namesz + 3) & ~(size_t)3);
      size_t next = desc_off + (((size_t)nh.n_descsz + 3) & ~(size_t)3);
      if (next > sh.sh_size || next <= off)
        break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          memcmp(d + name_off, "GNU", 4) == 0) {
        *out = d + desc_off;
        return nh.n_descsz;
      }
      off = next;
    }
  }
  return 0;
}

static void load_symbols(symfile *f) {
  f->loaded = 1;
  int fd = open(f->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
      !S_ISREG(st.st_mode)) {
    close(fd);
    return;
  }
  size_t size = (size_t)st.st_size;
  const uint8_t *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return;
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize < sizeof(Elf64_Shdr) ||
      !fits(eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize, size))
    goto out;
  if (f->build_id_len) {
    const uint8_t *bid = NULL;
    size_t n = file_build_id(p, size, &eh, &bid);
    if (n != f->build_id_len || memcmp(bid, f->build_id, n) != 0) {
      f->mismatch = 1;
      goto out;
    }
  }
  /* .symtab (full, unstripped files) when there is one, else .dynsym
   * (exported functions only): the dynsym of an unstripped file is a subset
   * and would only add duplicates. */
  uint32_t want = SHT_DYNSYM;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof sh);
    if (sh.sh_type == SHT_SYMTAB && sh.sh_size >= sizeof(Elf64_Sym))
      want = SHT_SYMTAB;
  }
  /* two passes: count, then copy */
  size_t nsyms = 0, names_len = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (unsigned i = 0; i < eh.e_shnum; i++) {
      Elf64_Shdr sh, strh;
      memcpy(&sh, p + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof sh);
      if (sh.sh_type != want ||
          sh.sh_entsize < sizeof(Elf64_Sym) || !fits(sh.sh_offset, sh.sh_size, size) ||
          sh.sh_link >= eh.e_shnum)
        continue;
      memcpy(&strh, p + eh.e_shoff + (uint64_t)sh.sh_link * eh.e_shentsize, sizeof strh);
      if (!fits(strh.sh_offset, strh.sh_size, size))
        continue;
      const char *strs = (const char *)p + strh.sh_offset;
      size_t cnt = sh.sh_size / sh.sh_entsize;
      for (size_t k = 0; k < cnt; k++) {
        Elf64_Sym es;
        memcpy(&es, p + sh.sh_offset + k * sh.sh_entsize, sizeof es);
        if (ELF64_ST_TYPE(es.st_info) != STT_FUNC || es.st_shndx == SHN_UNDEF ||
            !es.st_value || es.st_name >= strh.sh_size)
          continue;
        const char *nm = strs + es.st_name;
        size_t nl = strnlen(nm, strh.sh_size - es.st_name);
        if (nl == strh.sh_size - es.st_name || nl == 0)
          continue; /* unterminated or empty */
        if (pass == 0) {
          nsyms++;
          names_len += nl + 1;
        } else {
          memcpy(f->names + names_len, nm, nl + 1);
          f->syms[nsyms++] = (sym){es.st_value, es.st_size, f->names + names_len};
          names_len += nl + 1;
        }
      }
    }
    if (pass == 0) {
      if (!nsyms)
        goto out;
      f->syms = malloc(nsyms * sizeof *f->syms);
      f->names = malloc(names_len);
      if (!f->syms || !f->names) {
        free(f->syms);
        free(f->names);
        f->syms = NULL;
        f->names = NULL;
        goto out;
      }
      nsyms = 0;
      names_len = 0;
    }
  }
  cucap_sort(f->syms, nsyms, sizeof *f->syms, sym_cmp);
  f->nsyms = nsyms;
out:
  munmap((void *)p, size);
}

cucap_status cucap_symbolizer_lookup(cucap_symbolizer *s, uint64_t addr, cucap_symbol *out) {
  CUCAP_RETURN_IF(!s || !out, CUCAP_ERR_INVALID_ARG);
  memset(out, 0, sizeof *out);
  const object *o = NULL;
  for (size_t i = 0; i < s->nobjs; i++)
    if (addr >= s->objs[i].start && addr < s->objs[i].end) {
      o = &s->objs[i];
      break;
    }
  if (!o)
    return CUCAP_ERR_NOT_FOUND;
  symfile *f = o->file;
  out->object = f->path;
  out->object_offset = addr - o->base;
  if (!f->loaded)
    load_symbols(f);
  out->build_id_mismatch = f->mismatch;
  uint64_t rel = addr - o->base, key = rel ? rel - 1 : 0; /* return address: call site */
  size_t lo = 0, hi = f->nsyms;
  while (lo < hi) { /* last symbol with value <= key */
    size_t mid = lo + (hi - lo) / 2;
    if (f->syms[mid].value <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo > 0) {
    const sym *sm = &f->syms[lo - 1];
    if (!sm->size || key < sm->value + sm->size) {
      out->function = sm->name;
      out->function_offset = rel - sm->value;
    }
  }
  return CUCAP_OK;
}

int cucap_symbolizer_format(cucap_symbolizer *s, uint64_t addr, char *buf, size_t size) {
  cucap_symbol sy;
  if (cucap_symbolizer_lookup(s, addr, &sy) != CUCAP_OK)
    return snprintf(buf, size, "0x%llx", (unsigned long long)addr);
  const char *base = strrchr(sy.object, '/');
  base = base ? base + 1 : sy.object;
  if (sy.function)
    return snprintf(buf, size, "%s+0x%llx (%s+0x%llx)", sy.function,
                    (unsigned long long)sy.function_offset, base,
                    (unsigned long long)sy.object_offset);
  return snprintf(buf, size, "%s+0x%llx%s", base, (unsigned long long)sy.object_offset,
                  sy.build_id_mismatch ? " (build-id mismatch)" : "");
}
