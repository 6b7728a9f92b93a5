/* fuzz_reader.c - libFuzzer target for the capture stream reader. The input is opened as a capture (in memory) in default and
 * strict mode and everything it offers is read: records, chunk and blob
 * tables, every blob. Random bytes rarely get past the XXH3 checks, so the
 * input is opened a second time with all checks recomputed (header, chunk
 * headers, payloads, trailer), which lets the fuzzer reach the index, zstd
 * and FlatBuffers paths. Seed with any small capture (e.g. from test_reader). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_log.h"
#include "cucap_reader.h"
#include "fuzz_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_everything(const uint8_t *d, size_t n, int strict) {
  cucap_reader_options o = {.strict = strict, .decode_threads = 0};
  cucap_reader *r = NULL;
  char msg[256];
  if (cucap_reader_open_memory(d, n, &o, &r, msg, sizeof msg) != CUCAP_OK)
    return;
  const void *rec, *buf;
  size_t sz;
  while (cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK) {
  }
  /* A second pass skips the FlatBuffers verification of chunks whose
   * records all verified on the first: it must be just as safe. */
  cucap_reader_rewind(r);
  while (cucap_reader_next(r, &rec, &buf, &sz) == CUCAP_OK) {
  }
  cucap_reader_recovery rc;
  cucap_reader_recovery_get(r, &rc);
  for (size_t i = 0; i < cucap_reader_chunk_count(r); i++) {
    cucap_reader_chunk c;
    cucap_reader_chunk_get(r, i, &c);
  }
  for (size_t i = 0; i < cucap_reader_blob_count(r); i++) {
    cucap_hash128 h;
    uint64_t bs;
    const void *m;
    if (cucap_reader_blob_get(r, i, &h, &bs) == CUCAP_OK &&
        bs < (64u << 20)) {
      if (bs <= 4096) { /* single-piece chunks decode straight into dst */
        uint8_t small[4096];
        cucap_reader_blob_read(r, h, small, sizeof small);
      }
      cucap_reader_blob_map(r, h, &m, &bs);
    }
  }
  cucap_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int quiet;
  if (!quiet) {
    cucap_log_set_level(CUCAP_LOG_OFF);
    quiet = 1;
  }
  read_everything(data, size, 0);
  read_everything(data, size, 1);
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  fix_checks(copy, size);
  read_everything(copy, size, 0);
  free(copy);
  return 0;
}
