/* fatbin_pick.c - the SASS the driver picks from a fatbin for a GPU
 * (fb_sass_pick_find, which fatbin_vars.c's device variables use too) and
 * that one ELF, decompressed (cucap_fatbin_device_elf). The replayer hands
 * it to the driver instead of the fatbin, so that a compressed image is
 * decompressed once per run rather than by every cuModuleLoadData of every
 * pass. */
#include <stdlib.h>
#include <string.h>

#include "cucap_fatbin.h"
#include "fatbin_elf.h"

typedef struct pick_walk {
  unsigned sm;
  fb_sass_pick *p;
} pick_walk;

static int pick_entry(const cucap_fatbin_entry *e, void *user) {
  pick_walk *w = user;
  fb_sass_pick *p = w->p;
  if (e->kind == CUCAP_FATBIN_ENTRY_PTX)
    return 0;
  if (e->kind != CUCAP_FATBIN_ENTRY_ELF) {
    p->other = 1;
    return 0;
  }
  if (!fb_sass_ok(e->arch, w->sm))
    return 0;
  if (!p->nbest || e->arch > p->best) {
    p->best = e->arch;
    p->nbest = 0;
  }
  if (e->arch == p->best) {
    p->nbest++;
    p->last = *e;
  }
  return 0;
}

cucap_status fb_sass_pick_find(const void *fatbin, size_t size, unsigned sm,
                               fb_sass_pick *p) {
  memset(p, 0, sizeof *p);
  pick_walk w = {sm, p};
  return cucap_fatbin_foreach(fatbin, size, pick_entry, &w);
}

cucap_status cucap_fatbin_device_elf(const void *fatbin, size_t size, unsigned sm,
                                     void **out, size_t *out_size) {
  CUCAP_RETURN_IF(!fatbin || !out || !out_size, CUCAP_ERR_INVALID_ARG);
  *out = NULL;
  *out_size = 0;
  fb_sass_pick s;
  CUCAP_FORWARD(fb_sass_pick_find(fatbin, size, sm, &s));
  /* the driver's own choice only where it is not in doubt: one ELF of the
   * best arch, nothing of an unknown kind, and compressed (else the fatbin
   * costs the driver no more than the ELF would) */
  if (s.nbest != 1 || s.other || s.last.codec == CUCAP_FATBIN_CODEC_NONE)
    return CUCAP_OK;
  void *d = NULL;
  size_t n = 0;
  CUCAP_FORWARD(cucap_fatbin_entry_data(&s.last, &d, &n));
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
