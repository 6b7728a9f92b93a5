/* analyze_util.c - small accessors of the program model (analyze_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "analyze_internal.h"

const char *az_name(const cucap_analysis *a, uint32_t id) {
  return id < a->names.n ? a->names.s[id] : "";
}

const char *az_bytes(double v, char *buf, size_t size) {
  static const char *const u[] = {"KiB", "MiB", "GiB", "TiB"};
  int k = -1;
  double h = v;
  while (h >= 1024 && k < 3) {
    h /= 1024;
    k++;
  }
  if (k < 0)
    snprintf(buf, size, "%.0f B", v);
  else
    snprintf(buf, size, "%.0f B (%.1f %s)", v, h, u[k]);
  return buf;
}
