/* fuzz_profile.c - libFuzzer target for the profile file reader
 * (profile/profile_file.c). The input is loaded as a profile file as it is,
 * then as the uncompressed FlatBuffer payload of one (a valid preamble with
 * the right size and hash in front), which lets the fuzzer past the hash
 * check into the FlatBuffers verifier and the conversion into the model.
 * What loads is finalized and written as JSON, report and folded stacks.
 * Seed: any profile (`cucap replay --profile --profile-out`, test_profile). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_hash.h"
#include "cucap_json.h"
#include "cucap_profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use(cucap_profile *p) {
  cucap_json *w = cucap_json_create_mem(0);
  if (w) {
    cucap_profile_write_json(p, w);
    cucap_json_destroy(w);
  }
  FILE *f = fopen("/dev/null", "w");
  if (f) {
    cucap_profile_print(p, f, NULL);
    cucap_profile_write_folded(p, f, NULL);
    fclose(f);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char msg[256];
  cucap_profile *p = NULL;
  if (cucap_profile_load_memory(data, size, &p, msg, sizeof msg) == CUCAP_OK) {
    use(p);
    cucap_profile_destroy(p);
  }
  uint8_t *buf = malloc(size + 32);
  if (!buf)
    return 0;
  memcpy(buf, CUCAP_PROFILE_MAGIC, 8);
  uint16_t major = CUCAP_PROFILE_FORMAT_MAJOR, minor = 0;
  uint32_t flags = 0;
  uint64_t raw = size, check = cucap_hash64_of(data, size);
  memcpy(buf + 8, &major, 2);
  memcpy(buf + 10, &minor, 2);
  memcpy(buf + 12, &flags, 4);
  memcpy(buf + 16, &raw, 8);
  memcpy(buf + 24, &check, 8);
  memcpy(buf + 32, data, size);
  p = NULL;
  if (cucap_profile_load_memory(buf, size + 32, &p, msg, sizeof msg) == CUCAP_OK) {
    use(p);
    cucap_profile_destroy(p);
  }
  free(buf);
  return 0;
}
