/* analyze_util.c - small accessors of the program model (analyze_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "analyze_internal.h"

const char *az_name(const cucap_analysis *a, uint32_t id) {
  return id < a->names.n ? a->names.s[id] : "";
}

