/* fuzz_nvdisasm.c - libFuzzer target for the nvdisasm listing parser of the
 * CUPTI engine (profile/cupti/cupti_disasm.c): arbitrary bytes as a listing; every
 * callback's strings must be NUL-terminated and readable. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cupti_disasm.h"

static size_t sink;

static void cb(void *user, const char *function, uint64_t pc, const char *text,
               const char *file, uint32_t line, const char *chain) {
  (void)user;
  sink += strlen(function) + strlen(text) + strlen(file) + strlen(chain) +
          (size_t)pc + line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ck_disasm_parse((const char *)data, size, cb, NULL);
  return 0;
}
