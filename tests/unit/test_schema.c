/* test_schema.c - generated schema API (schema/generated/cucap_schema.[ch]),
 * verifier and JSON printer: every table round-trips with all fields set
 * (descriptor-driven, tests/oracle/fb_fill.h), defaults and absent fields,
 * enum names, unions (including an unknown member from a newer minor), the
 * depth limit and JSON output flags. */
#include <string.h>

#include "../oracle/fb_fill.h"
#include "cucap_json.h"
#include "testutil.h"

static int checks;
#define CHECK(c) do { checks++; TU_CHECK(c); } while (0)

static void test_every_table(void) {
  cucap_fbb *b = cucap_fbb_create(0);
  cucap_json *w = cucap_json_create_mem(CUCAP_JSON_PRETTY);
  TU_REQUIRE(b && w);
  for (size_t i = 0; i < FILL_NTABLES; i++) {
    const cucap_fb_table_desc *td = fill_all_tables[i];
    for (int sp = 0; sp < 2; sp++) {
      cucap_fbb_reset(b);
      size_t len;
      const uint8_t *buf = cucap_fbb_finish(b, fill_table(b, td, 3, 0, 0), sp, &len);
      CHECK(buf != NULL);
      if (!buf)
        continue;
      CHECK(len % 8 == 0);
      CHECK(cucap_fb_verify_table(buf, len, sp, td) == CUCAP_OK);
      const void *t = sp ? cucap_fb__root_sp(buf) : cucap_fb__root(buf);
      int bad = check_table(t, td, 3, 0, 0);
      if (bad)
        fprintf(stderr, "table %s: %d mismatches\n", td->name, bad);
      CHECK(bad == 0);
      cucap_json_mem_clear(w);
      cucap_fb_table_to_json(t, td, w, CUCAP_JSON_HEX_BYTES | CUCAP_JSON_HASH_HEX);
      CHECK(cucap_json_status(w) == CUCAP_OK);
    }
  }
  /* every Body member as a Record */
  const cucap_fb_union_desc *u = &cucap_fb_union_desc_body;
  for (unsigned ty = 1; ty < u->count; ty++) {
    cucap_fbb_reset(b);
    size_t len;
    const uint8_t *buf = cucap_fbb_finish(
        b, fill_table(b, &cucap_fb_table_desc_record, 9, ty, 0), 1, &len);
    CHECK(buf && cucap_fb_record_verify(buf, len, 1) == CUCAP_OK);
    const cucap_fb_record *r = cucap_fb_record_root_sp(buf);
    CHECK(cucap_fb_record_body_type(r) == ty);
    CHECK(check_table(r, &cucap_fb_table_desc_record, 9, ty, 0) == 0);
  }
  cucap_json_destroy(w);
  cucap_fbb_destroy(b);
}

static void test_defaults_and_accessors(void) {
  cucap_fbb *b = cucap_fbb_create(0);
  TU_REQUIRE(b);
  /* Memcpy with nested CopyGeometry table and a Hash128 */
  cucap_fb_copy_geometry_start(b);
  cucap_fb_copy_geometry_add_width_bytes(b, 640);
  cucap_fb_copy_geometry_add_dst_array(b, 0xa11);
  cucap_fb_ref g = cucap_fb_copy_geometry_end(b);
  cucap_fb_hash128 h = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  cucap_fb_memcpy_start(b);
  cucap_fb_memcpy_add_kind(b, CUCAP_FB_MEMCPYKIND_HTOD);
  cucap_fb_memcpy_add_payload(b, &h);
  cucap_fb_memcpy_add_geometry(b, g);
  cucap_fb_memcpy_add_async(b, false);
  cucap_fb_ref m = cucap_fb_memcpy_end(b);
  cucap_fb_ref path = cucap_fbb_string(b, "/lib/x.so", 9);
  cucap_fb_loaded_object_start(b);
  cucap_fb_loaded_object_add_path(b, path);
  cucap_fb_loaded_object_add_start(b, 0x1000);
  cucap_fb_ref lo = cucap_fb_loaded_object_end(b);
  cucap_fb_ref objs = cucap_fbb_vector_refs(b, &lo, 1);
  cucap_fb_module_map_start(b);
  cucap_fb_module_map_add_objects(b, objs);
  cucap_fb_ref mm = cucap_fb_module_map_end(b);
  (void)mm;
  cucap_fb_record_start(b);
  cucap_fb_record_add_body(b, CUCAP_FB_BODY_MEMCPY, m);
  size_t len;
  const uint8_t *buf = cucap_fbb_finish(b, cucap_fb_record_end(b), 1, &len);
  CHECK(buf && cucap_fb_record_verify(buf, len, 1) == CUCAP_OK);
  const cucap_fb_record *r = cucap_fb_record_root_sp(buf);
  CHECK(!cucap_fb_record_seq_is_present(r) && cucap_fb_record_seq(r) == 0);
  CHECK(cucap_fb_record_variant(r) == CUCAP_FB_CALLVARIANT_DEFAULT);
  size_t n = 5;
  CHECK(cucap_fb_record_args(r, &n) == NULL && n == 0);
  const cucap_fb_memcpy *mc = cucap_fb_record_body_as_memcpy(r);
  CHECK(mc != NULL);
  if (mc) {
    CHECK(cucap_fb_memcpy_kind_is_present(mc) && cucap_fb_memcpy_kind(mc) == CUCAP_FB_MEMCPYKIND_HTOD);
    CHECK(cucap_fb_memcpy_async_is_present(mc) && !cucap_fb_memcpy_async(mc));
    CHECK(!cucap_fb_memcpy_has_payload_is_present(mc));
    CHECK(cucap_fb_memcpy_payload(mc)->hi == h.hi);
    const cucap_fb_copy_geometry *cg = cucap_fb_memcpy_geometry(mc);
    CHECK(cg && cucap_fb_copy_geometry_width_bytes(cg) == 640 &&
          cucap_fb_copy_geometry_dst_array(cg) == 0xa11 &&
          !cucap_fb_copy_geometry_height_is_present(cg));
  }
  CHECK(strcmp(cucap_fb_memcpy_kind_name(CUCAP_FB_MEMCPYKIND_PREFETCH), "Prefetch") == 0);
  CHECK(strcmp(cucap_fb_body_name(CUCAP_FB_BODY_BLOBPIECE), "BlobPiece") == 0);
  CHECK(strcmp(cucap_fb_body_name(CUCAP_FB_BODY_DEVICES), "Devices") == 0); /* 1.1 */
  CHECK(cucap_fb_body_name(CUCAP_FB_BODY_NONE) != NULL);
  CHECK(cucap_fb_graph_node_type_name(CUCAP_FB_GRAPHNODETYPE_UNKNOWN) != NULL);
  CHECK(cucap_fb_chunk_kind_name(77) == NULL);

  /* JSON: compact, hash as hex, enum by name */
  cucap_json *w = cucap_json_create_mem(0);
  TU_REQUIRE(w);
  cucap_fb_record_to_json(r, w, CUCAP_JSON_HASH_HEX);
  const char *js = cucap_json_mem_data(w, NULL);
  CHECK(strstr(js, "\"body_type\":\"Memcpy\"") != NULL);
  CHECK(strstr(js, "\"payload\":\"fedcba98765432100123456789abcdef\"") != NULL);
  CHECK(strstr(js, "\"kind\":\"HtoD\"") != NULL);
  CHECK(strstr(js, "\"async\":false") != NULL);
  CHECK(strchr(js, '\n') == NULL);
  cucap_json_destroy(w);

  /* unknown union member (newer minor): accepted, accessor-free */
  cucap_fbb_reset(b);
  cucap_fb_context_start(b);
  cucap_fb_ref c = cucap_fb_context_end(b);
  cucap_fb_record_start(b);
  cucap_fb_record_add_body(b, 200, c);
  buf = cucap_fbb_finish(b, cucap_fb_record_end(b), 1, &len);
  CHECK(buf && cucap_fb_record_verify(buf, len, 1) == CUCAP_OK);
  r = cucap_fb_record_root_sp(buf);
  CHECK(cucap_fb_record_body_type(r) == 200 && cucap_fb_record_body_as_context(r) == NULL);
  w = cucap_json_create_mem(0);
  cucap_fb_record_to_json(r, w, 0);
  CHECK(strcmp(cucap_json_mem_data(w, NULL), "{\"body_type\":200}") == 0);
  cucap_json_destroy(w);

  /* hex bytes, escaping */
  cucap_fbb_reset(b);
  uint8_t bytes[3] = {0x00, 0xab, 0xff};
  cucap_fb_ref d = cucap_fb_note_create_data(b, bytes, 3);
  cucap_fb_ref txt = cucap_fbb_string(b, "a\"b\\\x01\xff", 6);
  cucap_fb_note_start(b);
  cucap_fb_note_add_text(b, txt);
  cucap_fb_note_add_data(b, d);
  buf = cucap_fbb_finish(b, cucap_fb_note_end(b), 0, &len);
  CHECK(buf && cucap_fb_note_verify(buf, len, 0) == CUCAP_OK);
  w = cucap_json_create_mem(0);
  cucap_fb_note_to_json(cucap_fb_note_root(buf), w, CUCAP_JSON_HEX_BYTES);
  CHECK(strcmp(cucap_json_mem_data(w, NULL),
               "{\"text\":\"a\\\"b\\\\\\u0001\\u00ff\",\"data\":\"00abff\"}") == 0);
  cucap_json_mem_clear(w);
  cucap_fb_note_to_json(cucap_fb_note_root(buf), w, 0);
  CHECK(strstr(cucap_json_mem_data(w, NULL), "\"data\":[0,171,255]") != NULL);
  cucap_json_destroy(w);
  cucap_fbb_destroy(b);
}

/* A self-referencing table type (not in cucap.fbs, described here by hand)
 * to exercise the depth limit, plus a fan-out past the table limit. */
extern const cucap_fb_table_desc self_td;
static const cucap_fb_field_desc self_fields[] = {
    {"next", 0, CUCAP_FB_K_TABLE, 0, NULL, NULL, &self_td, NULL}};
const cucap_fb_table_desc self_td = {"Self", 1, 1, self_fields};

static void test_depth_and_limits(void) {
  cucap_fbb *b = cucap_fbb_create(0);
  TU_REQUIRE(b);
  for (int depth = 60; depth <= 70; depth += 10) {
    cucap_fbb_reset(b);
    cucap_fb_ref prev = 0;
    for (int i = 0; i < depth; i++) {
      cucap_fbb_table_start(b, 1);
      cucap_fbb_add_ref(b, 0, prev);
      prev = cucap_fbb_table_end(b);
    }
    size_t len;
    const uint8_t *buf = cucap_fbb_finish(b, prev, 0, &len);
    CHECK(buf != NULL);
    CHECK(buf && (cucap_fb_verify_table(buf, len, 0, &self_td) == CUCAP_OK) ==
                     (depth <= CUCAP_FB_MAX_DEPTH));
  }
  cucap_fbb_reset(b);
  cucap_fb_loaded_object_start(b);
  cucap_fb_loaded_object_add_base(b, 1);
  cucap_fb_ref lo = cucap_fb_loaded_object_end(b);
  size_t n = 1100000; /* > CUCAP_FB_MAX_TABLES references to one table */
  cucap_fb_ref *refs = malloc(n * sizeof *refs);
  TU_REQUIRE(refs);
  for (size_t i = 0; i < n; i++)
    refs[i] = lo;
  cucap_fb_ref v = cucap_fbb_vector_refs(b, refs, n);
  cucap_fb_module_map_start(b);
  cucap_fb_module_map_add_objects(b, v);
  size_t len;
  const uint8_t *buf = cucap_fbb_finish(b, cucap_fb_module_map_end(b), 0, &len);
  CHECK(buf != NULL);
  CHECK(buf && cucap_fb_module_map_verify(buf, len, 0) == CUCAP_ERR_VERIFY);
  free(refs);
  cucap_fbb_destroy(b);
}

int main(void) {
  test_every_table();
  test_defaults_and_accessors();
  test_depth_and_limits();
  return tu_finish("test_schema", checks);
}
