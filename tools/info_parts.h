/* info_parts.h - internal to `cucap info` (tools/cmd_info.c,
 * tools/info_parts.c): the stored bytes by use and the --audit summary. */
#ifndef CUCAP_INFO_PARTS_H
#define CUCAP_INFO_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_json.h"
#include "cucap_map.h"
#include "cucap_schema.h"

/* cucap_map_slot for info's count maps, keyed by function handles,
 * addresses and blob keys: key 0 (a NULL handle or address) is never
 * counted and gets NULL, as does OOM. Valid until the next create. */
static inline uint64_t *info_map_slot(cucap_map *m, uint64_t key, int create) {
  return key ? cucap_map_slot(m, key, create) : NULL;
}
/* Allocation kinds holding device data (the memory high-water mark). */
int info_is_device_kind(int kind);

/* Stored bytes by use: every blob a record names is counted once, under
 * the first use seen (module images; memory uploads = the state prefix of
 * a trimmed/extracted capture, copies without a seq; copy payloads;
 * snapshots; argument blocks; graph payloads), unnamed blobs as other, and
 * the record chunks. Compressed sizes are estimates: a blob's share of the
 * blob chunks its pieces lie in. */
enum { IS_IMAGES, IS_UPLOADS, IS_COPIES, IS_SNAPSHOTS, IS_ARGS, IS_GRAPHS, IS_OTHER,
       IS_RECORDS, IS_N };
typedef struct info_store {
  cucap_map use;                /* blob key -> IS_* + 1 */
  uint64_t count[IS_N], raw[IS_N], comp[IS_N];
} info_store;
void info_store_feed(info_store *s, const cucap_fb_record *rec);
struct cucap_reader;
void info_store_total(info_store *s, const struct cucap_reader *r);
void info_store_print_text(const info_store *s);
void info_store_print_json(cucap_json *w, const info_store *s);
void info_store_free(info_store *s);

/* The Audit record's summary: text (stdout) or a JSON "audit" key. */
void info_print_audit_text(const cucap_fb_audit *a);
void info_print_audit_json(cucap_json *w, const cucap_fb_audit *a);

#endif
