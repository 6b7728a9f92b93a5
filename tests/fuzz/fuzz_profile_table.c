/* fuzz_profile_table.c - libFuzzer target for the GPU timings table parser
 * (`cucap export/diff --profile`, share/profile_table.c): any bytes; a table
 * that parses is read completely (rows, lookups, metric names). */
#include <stdint.h>
#include <stdlib.h>

#include "cucap_profile_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cucap_profile_table *t = NULL;
  char msg[256];
  if (cucap_profile_table_parse((const char *)data, size, &t, msg, sizeof msg) != CUCAP_OK)
    return 0;
  volatile double sink = 0;
  size_t nm = cucap_profile_table_metric_count(t);
  for (size_t i = 0; i < nm; i++)
    sink += (double)(cucap_profile_table_metric_name(t, i)[0]);
  for (size_t i = 0; i < cucap_profile_table_rows(t); i++) {
    const cucap_profile_row *r = cucap_profile_table_row(t, i);
    const cucap_profile_row *f = cucap_profile_table_find(t, r->launch_index);
    if (!f || f->end_ns < f->start_ns)
      abort(); /* every row's launch must be found, times ordered */
    sink += (double)(r->end_ns - r->start_ns) + (r->kernel ? r->kernel[0] : 0);
    for (size_t k = 0; k < nm; k++)
      sink += r->metrics[k];
  }
  (void)sink;
  cucap_profile_table_destroy(t);
  return 0;
}
