/* cucap_units.h - byte counts for people: "12.0 MiB", or the exact count
 * with it, "12582912 B (12.0 MiB)" (what the analysis, diff, info and stats
 * print next to raw numbers). Binary units (KiB = 1024 B) up to EiB; below
 * 1 KiB both forms are "512 B". Both write into the caller's buffer and
 * return it (nothing is allocated). */
#ifndef CUCAP_UNITS_H
#define CUCAP_UNITS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

const char *cucap_bytes_human(uint64_t n, char *buf, size_t size);
const char *cucap_bytes_exact(uint64_t n, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
