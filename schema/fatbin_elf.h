/* fatbin_elf.h - internal to schema/: the bounds-checked ELF view that
 * fatbin.c (fatbins, cubins, .nv.info) and fatbin_vars.c (device variables)
 * share, and the driver's SASS choice (fatbin_pick.c). Every pointer handed
 * out points into the caller's buffer and is valid as long as that buffer
 * is; nothing here allocates. Not installed, not for other directories. */
#ifndef CUCAP_FATBIN_ELF_H
#define CUCAP_FATBIN_ELF_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#include "cucap_fatbin.h"
#include "cucap_status.h"

typedef struct fb_elf {
  const uint8_t *p;
  size_t size;
  Elf64_Ehdr eh;
} fb_elf;

/* A 64-bit little-endian ELF of `size` bytes whose section table fits. */
cucap_status fb_elf_open(const void *data, size_t size, fb_elf *v);
/* Section header i; 0 if there is none. */
int fb_elf_shdr(const fb_elf *v, unsigned i, Elf64_Shdr *sh);
/* Section contents, NULL if out of bounds or NOBITS. */
const uint8_t *fb_elf_sec_data(const fb_elf *v, const Elf64_Shdr *sh);
/* Name of section sh from .shstrtab; NULL if malformed. */
const char *fb_elf_sec_name(const fb_elf *v, const Elf64_Shdr *sh);

/* Called per symbol of the first symbol table: name is NULL when it is out
 * of the string table or not NUL-terminated there; k is the symbol index.
 * Nonzero stops the walk. */
typedef int (*fb_sym_fn)(const Elf64_Sym *sym, const char *name, uint64_t k, void *user);
/* Walks the first SHT_SYMTAB. A table whose entries or strings cannot be read
 * is CUCAP_ERR_CORRUPT when strict, else nothing is walked (CUCAP_OK). */
cucap_status fb_elf_foreach_symbol(const fb_elf *v, int strict, fb_sym_fn fn, void *user);

/* SASS for sm `have` runs on sm `want` (same major, minor not above). */
int fb_sass_ok(unsigned have, unsigned want);

/* The SASS the driver loads on sm from a fatbin (fatbin_pick.c): best, the
 * highest ELF arch that runs there (0: none, the driver would JIT PTX);
 * nbest, the ELF entries of that arch, last the last of them (its payload
 * points into the fatbin); other, set when an entry is neither ELF nor
 * PTX. The fatbin's own errors as cucap_fatbin_foreach gives them. */
typedef struct fb_sass_pick {
  unsigned best;
  size_t nbest;
  int other;
  cucap_fatbin_entry last;
} fb_sass_pick;
cucap_status fb_sass_pick_find(const void *fatbin, size_t size, unsigned sm,
                               fb_sass_pick *p);

#endif
