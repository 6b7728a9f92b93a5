/* fuzz_range.c - libFuzzer target for the range spec parser of `cucap trim
 * --range` (share/range.c): any bytes as a spec; a spec that parses must
 * print (cucap_range_format) as text that parses back to the same range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s)
    return 0;
  memcpy(s, data, size);
  s[size] = 0;
  cucap_range_spec a, b;
  char msg[256], buf[512];
  if (cucap_range_parse(s, &a, msg, sizeof msg) == CUCAP_OK) {
    cucap_range_format(&a, buf, sizeof buf);
    if (cucap_range_parse(buf, &b, NULL, 0) != CUCAP_OK || memcmp(&a, &b, sizeof a) != 0)
      abort(); /* the canonical text must mean the same range */
  }
  free(s);
  return 0;
}
