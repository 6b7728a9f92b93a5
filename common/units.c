/* units.c - byte counts for people (cucap_units.h). */
#include <inttypes.h>
#include <stdio.h>

#include "cucap_units.h"

/* the value in its largest unit of at least 1, and that unit (NULL: bytes) */
static const char *scale(uint64_t n, double *v) {
  static const char *const u[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double h = (double)n;
  int k = -1;
  while (h >= 1024 && k < 5) {
    h /= 1024;
    k++;
  }
  *v = h;
  return k < 0 ? NULL : u[k];
}

const char *cucap_bytes_human(uint64_t n, char *buf, size_t size) {
  double v;
  const char *u = scale(n, &v);
  if (u)
    snprintf(buf, size, "%.1f %s", v, u);
  else
    snprintf(buf, size, "%" PRIu64 " B", n);
  return buf;
}

const char *cucap_bytes_exact(uint64_t n, char *buf, size_t size) {
  double v;
  const char *u = scale(n, &v);
  if (u)
    snprintf(buf, size, "%" PRIu64 " B (%.1f %s)", n, v, u);
  else
    snprintf(buf, size, "%" PRIu64 " B", n);
  return buf;
}
