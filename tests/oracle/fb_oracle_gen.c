/* fb_oracle_gen.c - flatc oracle helper (tests/integration/test_flatc_oracle.sh).
 *
 * Usage: fb_oracle_gen OUTDIR
 * Writes, for every Body union member, a size-prefixed Record with every field
 * (recursively) set: OUTDIR/record_<member>.bin, plus file_header.bin and
 * chunk_index.bin; next to each, <name>.json is our own cucap_fb_*_to_json
 * output and <name>.root the root type name for flatc. Exit 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_fill.h"

static int write_file(const char *dir, const char *name, const char *ext,
                      const void *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "fb_oracle_gen: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

static int emit(const char *dir, const char *name, const cucap_fb_table_desc *td,
                unsigned union_type) {
  cucap_fbb *b = cucap_fbb_create(0);
  cucap_json *w = cucap_json_create_mem(CUCAP_JSON_PRETTY);
  int rc = 1;
  if (!b || !w)
    goto out;
  cucap_fb_ref root = fill_table(b, td, 1, union_type, 0);
  size_t len;
  const uint8_t *buf = cucap_fbb_finish(b, root, 1, &len);
  if (!buf || cucap_fb_verify_table(buf, len, 1, td) != CUCAP_OK) {
    fprintf(stderr, "fb_oracle_gen: %s did not build/verify\n", name);
    goto out;
  }
  cucap_fb_table_to_json(cucap_fb__root_sp(buf), td, w, 0);
  cucap_json_newline(w);
  size_t jl;
  const char *js = cucap_json_mem_data(w, &jl);
  if (cucap_json_status(w) != CUCAP_OK)
    goto out;
  char root_name[256];
  int rn = snprintf(root_name, sizeof root_name, "cucap.fb.%s\n", td->name);
  rc = write_file(dir, name, "bin", buf, len) ||
       write_file(dir, name, "json", js, jl) ||
       write_file(dir, name, "root", root_name, (size_t)rn);
out:
  cucap_json_destroy(w);
  cucap_fbb_destroy(b);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fb_oracle_gen OUTDIR\n");
    return 2;
  }
  int bad = 0;
  const cucap_fb_union_desc *u = &cucap_fb_union_desc_body;
  for (unsigned ty = 1; ty < u->count; ty++) {
    if (!u->members[ty])
      continue;
    char name[128];
    snprintf(name, sizeof name, "record_%s", cucap_fb_body_name((int)ty));
    bad += emit(argv[1], name, &cucap_fb_table_desc_record, ty);
  }
  bad += emit(argv[1], "file_header", &cucap_fb_table_desc_file_header, 0);
  bad += emit(argv[1], "chunk_index", &cucap_fb_table_desc_chunk_index, 0);
  return bad ? 1 : 0;
}
