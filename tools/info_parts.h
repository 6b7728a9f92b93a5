/* info_parts.h - internal to `cucap info` (tools/cmd_info.c,
 * tools/info_parts.c): a u64 -> u64 count map and the --audit summary. */
#ifndef CUCAP_INFO_PARTS_H
#define CUCAP_INFO_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_json.h"
#include "cucap_schema.h"

/* u64 -> u64 open addressing map (key 0 unused: handles and addresses are
 * never 0) for the per-kernel and per-allocation counts; owns its arrays. */
typedef struct u64map {
  uint64_t *k, *v;
  size_t cap, n;
} u64map;

/* The value slot of key (created as 0 when create; NULL when absent or on
 * OOM). Valid until the next create. */
uint64_t *info_map_slot(u64map *m, uint64_t key, int create);
void info_map_free(u64map *m);
/* Allocation kinds holding device data (the memory high-water mark). */
int info_is_device_kind(int kind);

/* The Audit record's summary: text (stdout) or a JSON "audit" key. */
void info_print_audit_text(const cucap_fb_audit *a);
void info_print_audit_json(cucap_json *w, const cucap_fb_audit *a);

#endif
