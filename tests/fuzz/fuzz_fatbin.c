/* fuzz_fatbin.c - libFuzzer target for schema/fatbin.c. Every entry point must survive arbitrary bytes with a bounded
 * size (a bounded avail never follows a fatbinary wrapper's pointer).
 * Build: clang -fsanitize=fuzzer,address -Ischema tests/fuzz/fuzz_fatbin.c
 *        schema/fatbin.c common/status.c -lzstd */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_fatbin.h"

static int on_entry(const cucap_fatbin_entry *e, void *user) {
  (void)user;
  void *d;
  size_t n;
  /* cap the decompression size so the fuzzer explores, not allocates */
  if (e->uncompressed_size < ((size_t)1 << 24) &&
      cucap_fatbin_entry_data(e, &d, &n) == CUCAP_OK)
    free(d);
  return 0;
}

static int on_kernel(const char *name, void *user) {
  (void)name;
  (void)user;
  return 0;
}

static int on_var(const char *name, uint64_t size, void *user) {
  (void)size;
  *(size_t *)user += strlen(name); /* names are NUL-terminated in bounds */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cucap_image_info info;
  (void)cucap_image_detect(data, size, &info);
  (void)cucap_fatbin_foreach(data, size, on_entry, NULL);
  (void)cucap_cubin_foreach_kernel(data, size, on_kernel, NULL);
  {
    static const char *const names[2] = {"_Z6kernelPf", "vec_add"};
    uint32_t idx[2];
    (void)cucap_cubin_function_symbols(data, size, names, 2, idx);
    (void)cucap_cubin_has_line_info(data, size);
  }
  cucap_param_layout p[16];
  size_t n;
  uint32_t t;
  (void)cucap_image_kernel_params(data, size, "k", p, 16, &n, &t);
  (void)cucap_image_has_code_for(data, size, 90);
  size_t names_len = 0;
  (void)cucap_image_foreach_variable(data, size, 90, on_var, &names_len);
  (void)cucap_cubin_foreach_variable(data, size, on_var, &names_len);
  size_t es;
  (void)cucap_elf_size(data, size, &es);
  const unsigned sms[2] = {86, 90};
  void *sel = NULL;
  size_t seln = 0;
  if (cucap_fatbin_select(data, size, sms, 2, &sel, &seln, NULL) == CUCAP_OK && sel) {
    if (seln > size) /* a selection never grows the image */
      __builtin_trap();
    free(sel);
  }
  void *elf = NULL;
  size_t elfn = 0;
  if (cucap_fatbin_device_elf(data, size, 90, &elf, &elfn) == CUCAP_OK && elf) {
    cucap_image_info ei; /* what the replayer hands to the driver: a cubin */
    if (cucap_image_detect(elf, elfn, &ei) != CUCAP_OK || ei.format != CUCAP_IMAGE_CUBIN)
      __builtin_trap();
    free(elf);
  }
  uint8_t out[4096];
  (void)cucap_lz4_block_decode(data, size, out, size < sizeof out ? size : sizeof out);
  return 0;
}
