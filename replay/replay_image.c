/* replay_image.c - which bytes of a recorded module image reach the driver
 * (see rp_image_for_driver in replay_state.h). A capture is untrusted input:
 * cuModuleLoadData reads until its own parse of the image says stop, so an
 * image cut short or claiming more bytes than were stored would make the
 * driver read past the replayer's buffer (fuzz_replay found it). */
#include <stdlib.h>
#include <string.h>

#include "cucap_fatbin.h"
#include "replay_state.h"

#define RP_IMAGE_PAD 16 /* zeros after a copy: no fixed header reads past */

const void *rp_image_for_driver(const void *img, uint64_t isz, void **copy,
                                const char **why) {
  *copy = NULL;
  *why = NULL;
  cucap_image_info info;
  cucap_status ds = cucap_image_detect(img, (size_t)isz, &info);
  if (ds == CUCAP_OK && info.format == CUCAP_IMAGE_FATBINARY) {
    *why = "module load (fatbinary wrapper: its pointer is meaningless in a replay)";
    return NULL;
  }
  if (ds == CUCAP_OK && info.size <= isz)
    return img; /* a fatbin/cubin that ends inside, or PTX with its NUL */
  if (isz >= 4) {
    uint32_t magic;
    memcpy(&magic, img, 4);
    if (magic == CUCAP_FATBIN_MAGIC || memcmp(img, "\x7f" "ELF", 4) == 0) {
      *why = "module load (damaged fatbin/cubin image)";
      return NULL;
    }
  }
  char *z = calloc(1, (size_t)isz + RP_IMAGE_PAD);
  if (!z)
    return NULL;
  memcpy(z, img, (size_t)isz);
  *copy = z;
  return z;
}
