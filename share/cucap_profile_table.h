/* cucap_profile_table.h - GPU timings of kernel launches, as the export and
 * diff commands take them (`--profile FILE`). The CLI reads a profile file
 * (`replay --profile-out`) into one of these too (tools/cli_timings.c), so
 * export and diff see one kind of input whatever file they were given.
 *
 * Format ("cucap GPU timings", text, one launch per line):
 *   # comment lines and empty lines are ignored
 *   launch_index,start_ns,end_ns[,kernel][,METRIC...]    <- header, required
 *   12,1000500,1004250,vec_add,0.93
 * Columns are found by name in the header; launch_index, start_ns and
 * end_ns are required (unsigned decimal, end_ns >= start_ns); `kernel` is
 * optional text (no commas); every other column is a metric (a decimal
 * number, or empty when unknown). Times are nanoseconds on any clock (a
 * replay's or the recording's): consumers align them. launch_index is the
 * recorded launch number (Launch.launch_index). A launch may appear more
 * than once (e.g. one row per replay pass); consumers take the first.
 * At most CUCAP_PROFILE_MAX_METRICS metrics; lines up to 64 KiB.
 *
 * Ownership: the table owns everything it returns; strings and rows stay
 * valid until cucap_profile_table_destroy. */
#ifndef CUCAP_PROFILE_TABLE_H
#define CUCAP_PROFILE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUCAP_PROFILE_MAX_METRICS 32

typedef struct cucap_profile_row {
  uint64_t launch_index;
  uint64_t start_ns, end_ns;
  const char *kernel;       /* NULL when the file has no kernel column/value */
  const double *metrics;    /* cucap_profile_table_metric_count() values;
                               NaN when empty */
} cucap_profile_row;

typedef struct cucap_profile_table cucap_profile_table;

/* Parses data[0..size). CUCAP_ERR_CORRUPT with "line N: ..." in msg when
 * the text is not such a table; CUCAP_ERR_NOMEM. On error *out is NULL. */
cucap_status cucap_profile_table_parse(const char *data, size_t size,
                                       cucap_profile_table **out, char *msg,
                                       size_t msg_size);
/* Reads and parses a file (CUCAP_ERR_IO when it cannot be read). */
cucap_status cucap_profile_table_load(const char *path, cucap_profile_table **out,
                                      char *msg, size_t msg_size);
void cucap_profile_table_destroy(cucap_profile_table *t); /* NULL ok */

size_t cucap_profile_table_rows(const cucap_profile_table *t);
const cucap_profile_row *cucap_profile_table_row(const cucap_profile_table *t, size_t i);
/* The first row of a launch, or NULL. O(1) average. */
const cucap_profile_row *cucap_profile_table_find(const cucap_profile_table *t,
                                                  uint64_t launch_index);
size_t cucap_profile_table_metric_count(const cucap_profile_table *t);
const char *cucap_profile_table_metric_name(const cucap_profile_table *t, size_t i);

#ifdef __cplusplus
}
#endif
#endif
