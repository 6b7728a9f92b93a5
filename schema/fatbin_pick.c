/* fatbin_pick.c - the one ELF of a fatbin that a GPU runs, decompressed
 * (cucap_fatbin_device_elf). The replayer hands it to the driver instead of
 * the fatbin, so that a compressed image is decompressed once per run rather
 * than by every cuModuleLoadData of every pass. */
#include <stdlib.h>
#include <string.h>

#include "cucap_fatbin.h"
#include "fatbin_elf.h"

typedef struct pick_state {
  unsigned sm;
  unsigned best;        /* the highest SASS arch that runs on sm */
  size_t nbest;         /* ELF entries of that arch */
  int other;            /* an entry of a kind not judged here */
  cucap_fatbin_entry e; /* the last ELF entry of arch best */
} pick_state;

static int pick_entry(const cucap_fatbin_entry *e, void *user) {
  pick_state *s = user;
  if (e->kind == CUCAP_FATBIN_ENTRY_PTX)
    return 0;
  if (e->kind != CUCAP_FATBIN_ENTRY_ELF) {
    s->other = 1;
    return 0;
  }
  if (!fb_sass_ok(e->arch, s->sm))
    return 0;
  if (!s->nbest || e->arch > s->best) {
    s->best = e->arch;
    s->nbest = 0;
  }
  if (e->arch == s->best) {
    s->nbest++;
    s->e = *e;
  }
  return 0;
}

cucap_status cucap_fatbin_device_elf(const void *fatbin, size_t size, unsigned sm,
                                     void **out, size_t *out_size) {
  CUCAP_RETURN_IF(!fatbin || !out || !out_size, CUCAP_ERR_INVALID_ARG);
  *out = NULL;
  *out_size = 0;
  pick_state s;
  memset(&s, 0, sizeof s);
  s.sm = sm;
  CUCAP_FORWARD(cucap_fatbin_foreach(fatbin, size, pick_entry, &s));
  /* the driver's own choice only where it is not in doubt: one ELF of the
   * best arch, nothing of an unknown kind, and compressed (else the fatbin
   * costs the driver no more than the ELF would) */
  if (s.nbest != 1 || s.other || s.e.codec == CUCAP_FATBIN_CODEC_NONE)
    return CUCAP_OK;
  void *d = NULL;
  size_t n = 0;
  CUCAP_FORWARD(cucap_fatbin_entry_data(&s.e, &d, &n));
  cucap_image_info info;
  if (cucap_image_detect(d, n, &info) != CUCAP_OK ||
      info.format != CUCAP_IMAGE_CUBIN || info.size > n) {
    free(d);
    return CUCAP_ERR_CORRUPT;
  }
  *out = d;
  *out_size = n;
  return CUCAP_OK;
}
