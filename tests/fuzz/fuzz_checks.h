/* fuzz_checks.h - shared by the capture fuzz targets (fuzz_reader,
 * fuzz_share): random bytes rarely get past the XXH3 checks of a capture,
 * so targets also try a copy with every check recomputed. Header-only. */
#ifndef CUCAP_FUZZ_CHECKS_H
#define CUCAP_FUZZ_CHECKS_H

#include <stdint.h>
#include <string.h>

#include "cucap_format.h"
#include "cucap_hash.h"

/* Recomputes every check the reader looks at, where the framing allows. */
static inline void fix_checks(uint8_t *d, size_t n) {
  cucap_preamble p;
  if (n < sizeof p)
    return;
  memcpy(&p, d, sizeof p);
  if (p.header_size > n - sizeof p)
    return;
  p.header_check = cucap_check32(d + sizeof p, p.header_size);
  memcpy(d, &p, sizeof p);
  uint64_t off = (sizeof p + (uint64_t)p.header_size + 7) & ~7ull;
  for (int i = 0; i < 4096 && off + 40 <= n; i++) {
    cucap_chunk_header h;
    memcpy(&h, d + off, sizeof h);
    if (h.magic != CUCAP_CHUNK_MAGIC || h.compressed_size > n - off - 40)
      break;
    h.payload_check = cucap_check32(d + off + 40, (size_t)h.compressed_size);
    h.header_check = cucap_check32(&h, 36);
    memcpy(d + off, &h, sizeof h);
    off = (off + 40 + h.compressed_size + 7) & ~7ull;
  }
  if (n >= sizeof p + 32) {
    cucap_trailer t;
    memcpy(&t, d + n - 32, 32);
    if (t.magic == CUCAP_TRAILER_MAGIC) {
      t.check = cucap_check32(&t, 24);
      memcpy(d + n - 32, &t, 32);
    }
  }
}

#endif
