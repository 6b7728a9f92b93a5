/* fuzz_verify.c - libFuzzer target for the FlatBuffers verifier and JSON
 * printer: the input is verified as a size-prefixed and a plain Record,
 * FileHeader and ChunkIndex; whatever verifies is printed to a memory JSON
 * writer (which must not read out of bounds either). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an 8-aligned private copy, as readers keep buffers */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  static cucap_json *w;
  if (!w)
    w = cucap_json_create_mem(0);
  const cucap_fb_table_desc *tds[3] = {&cucap_fb_table_desc_record,
                                       &cucap_fb_table_desc_file_header,
                                       &cucap_fb_table_desc_chunk_index};
  for (int sp = 0; sp < 2; sp++) {
    for (int i = 0; i < 3; i++) {
      if (cucap_fb_verify_table(buf, size, sp, tds[i]) != CUCAP_OK)
        continue;
      cucap_json_mem_clear(w);
      const void *t = sp ? cucap_fb__root_sp(buf) : cucap_fb__root(buf);
      cucap_fb_table_to_json(t, tds[i], w, i == 0 ? CUCAP_JSON_HASH_HEX : CUCAP_JSON_HEX_BYTES);
    }
  }
  free(buf);
  return 0;
}
