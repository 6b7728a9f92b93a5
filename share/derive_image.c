/* derive_image.c - the module images of a derived capture
 * (derive_internal.h).
 *
 * Frameworks ship fatbins with SASS for every architecture they support
 * (PyTorch: sm_75 ... sm_120) and sometimes PTX; a trimmed iteration or an
 * extracted launch replays on the recorded GPU (or a newer one). So, unless
 * --keep-all-archs, each fatbin a kept Module record loads is reduced with
 * cucap_fatbin_select to what the recorded devices (FileHeader.devices)
 * need: the SASS the driver picks there and the PTX of the highest virtual
 * architecture <= the device's, which a newer GPU can JIT. The reduced
 * image is a new blob (its own XXH3 hash); the Module records naming the
 * source image are appended with that hash and size patched in place (both
 * are fixed-size fields of the table, so the record keeps its layout).
 * Cubins and PTX images, images the selection would not shrink and images
 * of Link records are copied whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_fatbin.h"
#include "cucap_hash.h"
#include "derive_internal.h"

static void add_device(dv_plan *p, const cucap_fb_device_props *d) {
  int ma = d ? cucap_fb_device_props_cc_major(d) : 0, mi = d ? cucap_fb_device_props_cc_minor(d) : 0;
  if (ma <= 0 || ma > 99 || mi < 0 || mi > 9 || p->nsms >= DV_MAX_DEVICES)
    return; /* unknown: no selection for it */
  unsigned sm = (unsigned)(ma * 10 + mi);
  for (size_t k = 0; k < p->nsms; k++)
    if (p->sms[k] == sm)
      return;
  p->sms[p->nsms++] = sm;
}

void dv_images_setup(dv_plan *p, int keep_all_archs) {
  p->keep_all_archs = keep_all_archs;
  const cucap_fb_file_header *h = cucap_reader_header(p->r);
  size_t nd = h ? cucap_fb_file_header_devices_len(h) : 0;
  for (size_t i = 0; i < nd; i++)
    add_device(p, cucap_fb_file_header_devices_at(h, i));
}

void dv_images_add_devices(dv_plan *p, const cucap_fb_devices *d) {
  size_t nd = d ? cucap_fb_devices_devices_len(d) : 0;
  for (size_t i = 0; i < nd; i++)
    add_device(p, cucap_fb_devices_devices_at(d, i));
}

/* The image entry for source hash h, as records that may be reduced
 * (Module Load) or not (Link inputs) store it. */
static dv_image *find(dv_plan *p, cucap_hash128 h, int reduce) {
  for (size_t i = 0; i < p->images.n; i++) {
    dv_image *g = sh_vec_at(&p->images, i);
    if (g->src.lo == h.lo && g->src.hi == h.hi && g->reduce == reduce)
      return g;
  }
  return NULL;
}

static int eligible(const dv_plan *p, const cucap_fb_module *m) {
  return !p->keep_all_archs && p->nsms && cucap_fb_module_op(m) == CUCAP_FB_MODULEOP_LOAD;
}

static int is_fatbin(const uint8_t *b, uint64_t n) {
  uint32_t magic = 0;
  if (n >= 4)
    memcpy(&magic, b, 4);
  return magic == CUCAP_FATBIN_MAGIC;
}

cucap_status dv_image_copy(dv_plan *p, cucap_writer *w, const cucap_fb_module *m) {
  if (!m || !cucap_fb_module_image(m))
    return CUCAP_OK;
  cucap_hash128 h = sh_h(cucap_fb_module_image(m));
  int reduce = eligible(p, m);
  if (find(p, h, reduce))
    return CUCAP_OK; /* stored already (one writer per plan) */
  uint64_t size = 0;
  cucap_status st = cucap_reader_blob_size(p->r, h, &size);
  if (st == CUCAP_ERR_NOT_FOUND)
    return CUCAP_OK; /* never stored: nothing to copy (the replayer reports it) */
  CUCAP_RETURN_IF(st != CUCAP_OK, st);
  CUCAP_RETURN_IF(size > SIZE_MAX || size > CUCAP_IMAGE_MAX_SIZE, CUCAP_ERR_TOO_LARGE);
  uint8_t *buf = malloc(size ? (size_t)size : 1);
  CUCAP_RETURN_IF(!buf, CUCAP_ERR_NOMEM);
  if ((st = cucap_reader_blob_read(p->r, h, buf, size)) != CUCAP_OK) {
    free(buf);
    return st;
  }
  dv_image *g = sh_vec_push(&p->images);
  if (!g) {
    free(buf);
    return CUCAP_ERR_NOMEM;
  }
  g->src = g->dst = h;
  g->src_size = g->dst_size = size;
  g->reduce = reduce;
  void *sel = NULL;
  size_t seln = 0;
  cucap_fatbin_select_stats ss;
  /* a damaged fatbin is copied as it is: the replay reports it */
  if (reduce && is_fatbin(buf, size) &&
      cucap_fatbin_select(buf, (size_t)size, p->sms, p->nsms, &sel, &seln, &ss) == CUCAP_OK) {
    g->entries = ss.entries;
    g->kept = ss.kept;
    if (sel) {
      g->dst = cucap_hash128_of(sel, seln);
      g->dst_size = seln;
    }
  }
  const void *data = sel ? sel : buf;
  st = cucap_writer_has_blob(w, g->dst)
           ? CUCAP_OK
           : cucap_writer_put_blob_hashed(w, data, (size_t)g->dst_size, g->dst);
  free(sel);
  free(buf);
  return st;
}

cucap_status dv_append(dv_plan *p, cucap_writer *w, const void *buf, size_t size,
                       const cucap_fb_record *rec) {
  const cucap_fb_module *m = cucap_fb_record_body_type(rec) == CUCAP_FB_BODY_MODULE
                                 ? cucap_fb_record_body_as_module(rec) : NULL;
  const dv_image *g = m && cucap_fb_module_image(m)
                          ? find(p, sh_h(cucap_fb_module_image(m)), eligible(p, m)) : NULL;
  if (!g || (g->dst.lo == g->src.lo && g->dst.hi == g->src.hi))
    return cucap_writer_append(w, buf, size, NULL);
  /* the same bytes with the image's hash (a struct) and size (a scalar
   * stored in the table: present, as the recorder always writes it)
   * overwritten where they are */
  const uint8_t *hp = (const uint8_t *)cucap_fb_module_image(m);
  const uint8_t *sp = cucap_fb__field(m, 4);
  const uint8_t *b0 = buf;
  if (hp < b0 || hp + 16 > b0 + size || (sp && (sp < b0 || sp + 8 > b0 + size)))
    return CUCAP_ERR_CORRUPT;
  sh_rec_copy c;
  CUCAP_RETURN_IF(!sh_rec_copy_make(&c, buf, size, rec), CUCAP_ERR_NOMEM);
  uint64_t v[2] = {g->dst.lo, g->dst.hi};
  memcpy(c.buf + (hp - b0), v, 16);
  if (sp)
    memcpy(c.buf + (sp - b0), &g->dst_size, 8);
  cucap_status st = cucap_writer_append(w, c.buf, c.size, NULL);
  free(c.buf);
  return st;
}

void dv_images_report(const dv_plan *p, cucap_derive_report *rep) {
  rep->images = p->images.n;
  for (size_t i = 0; i < p->images.n; i++) {
    const dv_image *g = sh_vec_at(&p->images, i);
    rep->image_bytes_in += g->src_size;
    rep->image_bytes_out += g->dst_size;
    rep->images_reduced += g->dst.lo != g->src.lo || g->dst.hi != g->src.hi;
  }
  if (p->keep_all_archs || !p->nsms) {
    snprintf(rep->archs, sizeof rep->archs, "%s",
             p->keep_all_archs ? "every architecture" : "every architecture (no device recorded)");
    return;
  }
  size_t o = 0;
  for (size_t k = 0; k < p->nsms && o < sizeof rep->archs; k++)
    o += (size_t)snprintf(rep->archs + o, sizeof rep->archs - o, "%ssm_%u + PTX <= compute_%u",
                          k ? ", " : "", p->sms[k], p->sms[k]);
}
