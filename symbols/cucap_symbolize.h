/* cucap_symbolize.h - host callstack symbolization for `cucap dump`.
 *
 * Feed it the objects of a ModuleMap record (path, GNU build-id, load bias,
 * mapped range), then ask for frame addresses from Callstack records:
 *   addr -> "object+0xoff" and, when the object file is readable on this
 *   machine and its build-id matches the recorded one, "function+0xoff"
 *   from its .symtab, or its .dynsym when it has no .symtab (STT_FUNC
 *   symbols). A file whose build-id differs is not used for symbols
 *   (build_id_mismatch). Each object file is opened and read at most once
 *   per symbolizer (cached by path + build-id, across clear()).
 * Return addresses are looked up at addr-1 (the call instruction), offsets
 * are printed relative to addr.
 *
 * Object files are opened lazily on the first lookup that needs them, read
 * with bounds-checked ELF64 parsing (<elf.h>; no libelf link dependency) and
 * never trusted. Not thread-safe: one symbolizer per thread.
 *
 * Ownership: strings in cucap_symbol point into the symbolizer and stay valid
 * until it is destroyed. */
#ifndef CUCAP_SYMBOLIZE_H
#define CUCAP_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_symbolizer cucap_symbolizer;

cucap_status cucap_symbolizer_create(cucap_symbolizer **out);
void cucap_symbolizer_destroy(cucap_symbolizer *s); /* accepts NULL */

/* Adds one LoadedObject. A later ModuleMap is a full list: call
 * cucap_symbolizer_clear first (cached symbol tables of the same path +
 * build-id are kept). build_id may be NULL. Copies everything. */
cucap_status cucap_symbolizer_add_object(cucap_symbolizer *s, const char *path,
                                         const uint8_t *build_id, size_t build_id_len,
                                         uint64_t base, uint64_t start, uint64_t end);
void cucap_symbolizer_clear(cucap_symbolizer *s);

typedef struct cucap_symbol {
  const char *object;        /* path of the object, NULL if addr is in none */
  uint64_t object_offset;    /* addr - load bias */
  const char *function;      /* NULL if unknown */
  uint64_t function_offset;  /* addr - function start */
  int build_id_mismatch;     /* the file on disk is not the recorded one */
} cucap_symbol;

/* CUCAP_OK with out filled; CUCAP_ERR_NOT_FOUND if addr is in no object. */
cucap_status cucap_symbolizer_lookup(cucap_symbolizer *s, uint64_t addr, cucap_symbol *out);

/* "function+0x1a (libfoo.so+0x11a3a)", "libfoo.so+0x11a3a" or "0x7f..."
 * into buf (always NUL-terminated when size > 0). Returns the length that
 * would have been written (snprintf style). */
int cucap_symbolizer_format(cucap_symbolizer *s, uint64_t addr, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
