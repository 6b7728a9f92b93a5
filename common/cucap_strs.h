/* cucap_strs.h - string interning: each distinct string gets a small id
 * (kernel names, file names, frames in the analysis and the profile model).
 *
 * Id 0 is always "" (also what an out-of-memory intern returns). A zeroed
 * struct is an empty table. The table owns copies of the strings; s[id]
 * stays valid (never moves) until cucap_strs_free. Not thread-safe. */
#ifndef CUCAP_STRS_H
#define CUCAP_STRS_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_map.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cucap_strs {
  char **s;        /* s[id], n of them */
  size_t n, cap;
  cucap_map index; /* FNV-1a hash (re-hashed on collision) -> id */
} cucap_strs;

uint32_t cucap_strs_intern(cucap_strs *t, const char *s);      /* NULL is "" */
uint32_t cucap_strs_lookup(const cucap_strs *t, const char *s); /* 0 if absent */
void cucap_strs_free(cucap_strs *t);

#ifdef __cplusplus
}
#endif
#endif
