/* cupti_disasm.h - the nvdisasm listing parser of the CUPTI engine
 * (cupti_disasm.c). Internal to replay/; kept apart from cupti_internal.h so
 * that it needs no CUPTI header (the fuzz target and the unit test use it). */
#ifndef CUCAP_CUPTI_DISASM_H
#define CUCAP_CUPTI_DISASM_H

#include <stddef.h>
#include <stdint.h>

/* Called for every instruction of the listing: its function, offset, text,
 * and the line info in force ("" / 0 when none; chain "" unless inlined:
 * "a.cu:7 <- b.cu:42", innermost first). Strings are valid during the call. */
typedef void (*ck_disasm_fn)(void *user, const char *function, uint64_t pc,
                             const char *text, const char *file, uint32_t line,
                             const char *chain);
void ck_disasm_parse(const char *text, size_t len, ck_disasm_fn fn, void *user);

#endif
