/* fatbin_vars.c - the device variables of a module image (cucap_fatbin.h:
 * cucap_image_foreach_variable, cucap_cubin_foreach_variable): the
 * __device__, __managed__ and __constant__ symbols the loader places, which
 * the replayer's kept modules restore at each pass (replay_modkeep.c). Reads
 * through the bounds-checked ELF view of fatbin_elf.h; the input is
 * untrusted (tests/fuzz/fuzz_fatbin.c). */
#include "cucap_fatbin.h"
#include "fatbin_elf.h"

#include <stdlib.h>
#include <string.h>


/* A variable the loader places: an object symbol with a size, defined in a
 * global-memory section (.nv.global: zero-filled, .nv.global.init) or a
 * user constant bank (.nv.constantN, N > 0; bank 0 holds each kernel's
 * parameters and has no object symbols). __managed__ variables live in
 * .nv.global too. */
static int var_section(const char *n) {
  if (!n)
    return 0;
  if (!strncmp(n, ".nv.global", 10))
    return n[10] == 0 || n[10] == '.';
  return !strncmp(n, ".nv.constant", 12) && n[12] >= '1' && n[12] <= '9';
}

typedef struct var_walk {
  const fb_elf *v;
  cucap_var_fn fn;
  void *user;
} var_walk;

static int var_sym(const Elf64_Sym *es, const char *nm, uint64_t k, void *user) {
  var_walk *w = user;
  Elf64_Shdr ds;
  (void)k;
  if (ELF64_ST_TYPE(es->st_info) != STT_OBJECT || !es->st_size || !nm ||
      es->st_shndx == SHN_UNDEF || es->st_shndx >= SHN_LORESERVE ||
      !fb_elf_shdr(w->v, es->st_shndx, &ds) || !var_section(fb_elf_sec_name(w->v, &ds)))
    return 0;
  return w->fn(nm, es->st_size, w->user);
}

cucap_status cucap_cubin_foreach_variable(const void *elf, size_t size,
                                          cucap_var_fn fn, void *user) {
  fb_elf v;
  CUCAP_RETURN_IF(!fn, CUCAP_ERR_INVALID_ARG);
  CUCAP_FORWARD(fb_elf_open(elf, size, &v));
  var_walk w = {&v, fn, user};
  return fb_elf_foreach_symbol(&v, 1, var_sym, &w);
}

typedef struct var_search {
  unsigned best;
  cucap_var_fn fn;
  void *user;
  cucap_status st;
  int stop;
} var_search;

static int var_stop(const char *name, uint64_t size, void *user) {
  var_search *s = user;
  return s->stop = s->fn(name, size, s->user);
}

static int var_entry(const cucap_fatbin_entry *e, void *user) {
  var_search *s = user;
  if (e->kind != CUCAP_FATBIN_ENTRY_ELF || e->arch != s->best)
    return 0;
  void *d = NULL;
  size_t n = e->payload_size;
  const void *img = e->payload;
  if (e->codec) {
    cucap_status st = cucap_fatbin_entry_data(e, &d, &n);
    if (st != CUCAP_OK) {
      s->st = st;
      return 1;
    }
    img = d;
  }
  s->st = cucap_cubin_foreach_variable(img, n, var_stop, s);
  free(d);
  return s->st != CUCAP_OK || s->stop;
}

cucap_status cucap_image_foreach_variable(const void *image, size_t size,
                                          unsigned sm, cucap_var_fn fn,
                                          void *user) {
  cucap_image_info info;
  CUCAP_RETURN_IF(!fn, CUCAP_ERR_INVALID_ARG);
  CUCAP_FORWARD(cucap_image_detect(image, size, &info));
  if (info.data_format == CUCAP_IMAGE_CUBIN)
    return cucap_cubin_foreach_variable(info.data, info.data_size, fn, user);
  CUCAP_RETURN_IF(info.data_format != CUCAP_IMAGE_FATBIN, CUCAP_ERR_UNSUPPORTED);
  fb_sass_pick pick;
  CUCAP_FORWARD(fb_sass_pick_find(info.data, info.data_size, sm, &pick));
  CUCAP_RETURN_IF(!pick.nbest, CUCAP_ERR_UNSUPPORTED); /* the driver would JIT */
  var_search s = {pick.best, fn, user, CUCAP_OK, 0};
  CUCAP_FORWARD(cucap_fatbin_foreach(info.data, info.data_size, var_entry, &s));
  return s.st;
}
