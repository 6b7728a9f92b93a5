/* test_fb_builder.c - FlatBuffers builder and verifier (schema/fb_builder.c,
 * schema/fb_verify.c): layout, alignment, vtable sharing, sticky failure,
 * reuse, corrupted-buffer rejection (bit flips, truncation, bad offsets) and
 * a build-speed measurement (Record + Launch, printed as records/s). */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cucap_schema.h"
#include "testutil.h"

static int checks;
#define CHECK(c) do { checks++; TU_CHECK(c); } while (0)

static const uint8_t launch_args[40] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

/* The writer's hot path: Record with 8 scalars + a Launch body. */
static const uint8_t *build_launch_record(cucap_fbb *b, uint64_t seq,
                                          size_t *len) {
  cucap_fbb_reset(b);
  cucap_fb_ref args = cucap_fb_launch_create_args(b, launch_args, sizeof launch_args);
  cucap_fb_dim3 grid = {(uint32_t)seq, 2, 3}, block = {128, 1, 1};
  cucap_fb_launch_start(b);
  cucap_fb_launch_add_function(b, 0x7f0000001000ull);
  cucap_fb_launch_add_stream(b, 0x5555);
  cucap_fb_launch_add_launch_index(b, seq);
  cucap_fb_launch_add_grid(b, &grid);
  cucap_fb_launch_add_block(b, &block);
  cucap_fb_launch_add_args(b, args);
  cucap_fb_launch_add_shared_mem(b, 1024);
  cucap_fb_launch_add_kind(b, CUCAP_FB_LAUNCHKIND_KERNEL);
  cucap_fb_ref body = cucap_fb_launch_end(b);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, seq);
  cucap_fb_record_add_t_enter(b, seq * 10);
  cucap_fb_record_add_t_exit(b, seq * 10 + 5);
  cucap_fb_record_add_context(b, 0xc0ffee);
  cucap_fb_record_add_tid(b, 4242);
  cucap_fb_record_add_call(b, 307);
  cucap_fb_record_add_result(b, 0);
  cucap_fb_record_add_stack(b, 7);
  cucap_fb_record_add_variant(b, CUCAP_FB_CALLVARIANT_PTSZ);
  cucap_fb_record_add_body(b, CUCAP_FB_BODY_LAUNCH, body);
  return cucap_fbb_finish(b, cucap_fb_record_end(b), 1, len);
}

static void test_basic(void) {
  cucap_fbb *b = cucap_fbb_create(16); /* forces growth */
  TU_REQUIRE(b);
  size_t len;
  const uint8_t *buf = build_launch_record(b, 99, &len);
  CHECK(buf != NULL);
  CHECK(len % 8 == 0);
  CHECK(((uintptr_t)buf & 7) == 0);
  CHECK(memcmp(buf + 8, "CCAP", 4) == 0); /* after prefix and root offset */
  uint32_t prefix;
  memcpy(&prefix, buf, 4);
  CHECK(prefix == len - 4);
  CHECK(cucap_fb_record_verify(buf, len, 1) == CUCAP_OK);
  const cucap_fb_record *r = cucap_fb_record_root_sp(buf);
  CHECK(cucap_fb_record_seq(r) == 99);
  CHECK(cucap_fb_record_variant(r) == CUCAP_FB_CALLVARIANT_PTSZ);
  CHECK(cucap_fb_record_result_is_present(r));
  CHECK(!cucap_fb_record_args_is_present(r));
  CHECK(cucap_fb_record_body_type(r) == CUCAP_FB_BODY_LAUNCH);
  CHECK(cucap_fb_record_body_as_memcpy(r) == NULL);
  const cucap_fb_launch *l = cucap_fb_record_body_as_launch(r);
  CHECK(l != NULL);
  if (l) {
    CHECK(cucap_fb_launch_grid(l)->x == 99 && cucap_fb_launch_block(l)->x == 128);
    size_t n = 0;
    const uint8_t *a = cucap_fb_launch_args(l, &n);
    CHECK(n == 40 && a && memcmp(a, launch_args, 40) == 0);
    CHECK(cucap_fb_launch_shared_mem(l) == 1024);
    CHECK(!cucap_fb_launch_host_fn_is_present(l) && cucap_fb_launch_host_fn(l) == 0);
    CHECK(cucap_fb_launch_args_blob(l) == NULL);
  }
  /* plain (not size-prefixed) buffer */
  cucap_fbb_reset(b);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, 5);
  buf = cucap_fbb_finish(b, cucap_fb_record_end(b), 0, &len);
  CHECK(buf && len % 8 == 0 && cucap_fb_record_verify(buf, len, 0) == CUCAP_OK);
  CHECK(buf && cucap_fb_record_seq(cucap_fb_record_root(buf)) == 5);
  CHECK(buf && cucap_fb_record_verify(buf, len, 1) != CUCAP_OK);
  cucap_fbb_destroy(b);
  cucap_fbb_destroy(NULL);
}

static void test_vtable_sharing_and_misuse(void) {
  cucap_fbb *b = cucap_fbb_create(0);
  TU_REQUIRE(b);
  cucap_fb_ref e[100];
  for (int i = 0; i < 100; i++) {
    cucap_fb_chunk_entry_start(b);
    cucap_fb_chunk_entry_add_offset(b, (uint64_t)i * 4096);
    cucap_fb_chunk_entry_add_records(b, (uint32_t)i);
    e[i] = cucap_fb_chunk_entry_end(b);
  }
  cucap_fb_ref v = cucap_fbb_vector_refs(b, e, 100);
  cucap_fb_chunk_index_start(b);
  cucap_fb_chunk_index_add_chunks(b, v);
  cucap_fb_chunk_index_add_complete(b, true);
  size_t len;
  const uint8_t *buf = cucap_fbb_finish(b, cucap_fb_chunk_index_end(b), 1, &len);
  CHECK(buf != NULL);
  /* 100 tables of 8+4+4 bytes plus one shared 10-byte vtable stay small */
  CHECK(len < 100 * 24 + 200);
  CHECK(cucap_fb_chunk_index_verify(buf, len, 1) == CUCAP_OK);
  const cucap_fb_chunk_index *ci = cucap_fb_chunk_index_root_sp(buf);
  CHECK(cucap_fb_chunk_index_chunks_len(ci) == 100);
  CHECK(cucap_fb_chunk_entry_offset(cucap_fb_chunk_index_chunks_at(ci, 42)) == 42 * 4096);
  CHECK(cucap_fb_chunk_index_chunks_at(ci, 100) == NULL);
  CHECK(cucap_fb_chunk_index_complete(ci));

  /* misuse: nested start, string inside a table, add outside a table */
  cucap_fbb_reset(b);
  CHECK(!cucap_fbb_failed(b));
  cucap_fb_launch_start(b);
  CHECK(cucap_fbb_string(b, "x", 1) == 0);
  CHECK(cucap_fbb_failed(b));
  CHECK(cucap_fbb_finish(b, 1, 1, &len) == NULL && len == 0);
  cucap_fbb_reset(b);
  cucap_fb_launch_add_shared_mem(b, 1);
  CHECK(cucap_fbb_failed(b));
  cucap_fbb_reset(b);
  cucap_fb_launch_start(b);
  cucap_fb_launch_start(b);
  CHECK(cucap_fbb_failed(b));
  cucap_fbb_reset(b);
  cucap_fb_launch_start(b);
  cucap_fbb_add_u32(b, 13, 1); /* slot out of range */
  CHECK(cucap_fbb_failed(b));
  cucap_fbb_reset(b);
  CHECK(cucap_fbb_finish(b, 0, 1, &len) == NULL);
  cucap_fbb_reset(b);
  CHECK(cucap_fbb_vector(b, NULL, SIZE_MAX / 2, 4, 4) == 0 && cucap_fbb_failed(b));
  cucap_fbb_reset(b);
  cucap_fb_ref bogus = 12345;
  CHECK(cucap_fbb_vector_refs(b, &bogus, 1) == 0 && cucap_fbb_failed(b));
  CHECK(cucap_fbb_failed(NULL));
  cucap_fbb_destroy(b);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Builds a rich FileHeader (vectors of tables/strings). */
static const uint8_t *build_header(cucap_fbb *b, size_t *len) {
  cucap_fbb_reset(b);
  cucap_fb_ref devs[2];
  for (int i = 0; i < 2; i++) {
    cucap_fb_ref name = cucap_fbb_string(b, "NVIDIA H100", 11);
    uint8_t uuid[16] = {1, 2, 3};
    cucap_fb_ref u = cucap_fb_device_props_create_uuid(b, uuid, 16);
    cucap_fb_device_props_start(b);
    cucap_fb_device_props_add_ordinal(b, i);
    cucap_fb_device_props_add_name(b, name);
    cucap_fb_device_props_add_uuid(b, u);
    cucap_fb_device_props_add_total_mem(b, 80ull << 30);
    devs[i] = cucap_fb_device_props_end(b);
  }
  cucap_fb_ref dv = cucap_fbb_vector_refs(b, devs, 2);
  cucap_fb_ref argv[3] = {cucap_fbb_string(b, "./app", 5), cucap_fbb_string(b, "-n", 2),
                          cucap_fbb_string(b, "", 0)};
  cucap_fb_ref av = cucap_fbb_vector_refs(b, argv, 3);
  cucap_fb_ref host = cucap_fbb_string(b, "node1", 5);
  cucap_fb_file_header_start(b);
  cucap_fb_file_header_add_format_major(b, 1);
  cucap_fb_file_header_add_hostname(b, host);
  cucap_fb_file_header_add_devices(b, dv);
  cucap_fb_file_header_add_argv(b, av);
  cucap_fb_file_header_add_start_mono_ns(b, 123456789);
  return cucap_fbb_finish(b, cucap_fb_file_header_end(b), 1, len);
}

/* Random corruption: verification may pass or fail but must never read out
 * of bounds (ASan) and a passing buffer must be printable. */
static void test_corruption(void) {
  cucap_fbb *b = cucap_fbb_create(0);
  cucap_json *w = cucap_json_create_mem(0);
  TU_REQUIRE(b && w);
  size_t rlen, hlen;
  const uint8_t *r = build_launch_record(b, 7, &rlen);
  uint8_t rec[512];
  TU_REQUIRE(r && rlen <= sizeof rec);
  memcpy(rec, r, rlen);
  const uint8_t *h = build_header(b, &hlen);
  TU_REQUIRE(h);
  uint8_t *hdr = malloc(hlen);
  TU_REQUIRE(hdr);
  memcpy(hdr, h, hlen);
  CHECK(cucap_fb_file_header_verify(hdr, hlen, 1) == CUCAP_OK);
  const cucap_fb_file_header *fh = cucap_fb_file_header_root_sp(hdr);
  CHECK(cucap_fb_file_header_devices_len(fh) == 2);
  CHECK(strcmp(cucap_fb_device_props_name(cucap_fb_file_header_devices_at(fh, 1)), "NVIDIA H100") == 0);
  CHECK(cucap_fb_file_header_argv_len(fh) == 3 &&
        strcmp(cucap_fb_file_header_argv_at(fh, 1), "-n") == 0 &&
        cucap_fb_file_header_argv_at_len(fh, 2) == 0);

  /* truncation: every shorter length must be rejected */
  int trunc_ok = 1;
  for (size_t n = 0; n < rlen; n++) {
    uint8_t *cut = malloc(n ? n : 1);
    memcpy(cut, rec, n);
    /* the prefix claims more than we have: size-prefixed must fail */
    if (cucap_fb_record_verify(cut, n, 1) == CUCAP_OK)
      trunc_ok = 0;
    free(cut);
  }
  CHECK(trunc_ok);

  int accepted = 0, rejected = 0;
  for (int it = 0; it < 20000; it++) {
    int use_hdr = it & 1;
    size_t len = use_hdr ? hlen : rlen;
    uint8_t *m = malloc(len);
    memcpy(m, use_hdr ? hdr : rec, len);
    int flips = 1 + (int)(rng() % 4);
    for (int k = 0; k < flips; k++) {
      size_t pos = rng() % len;
      if (rng() & 1)
        m[pos] ^= (uint8_t)(1u << (rng() % 8));
      else
        m[pos] = (uint8_t)rng();
    }
    size_t vlen = (rng() % 8 == 0) ? (size_t)(rng() % len) : len;
    cucap_status st = use_hdr ? cucap_fb_file_header_verify(m, vlen, 1)
                              : cucap_fb_record_verify(m, vlen, 1);
    if (st == CUCAP_OK) {
      accepted++;
      cucap_json_mem_clear(w);
      if (use_hdr)
        cucap_fb_file_header_to_json(cucap_fb_file_header_root_sp(m), w, CUCAP_JSON_HEX_BYTES);
      else
        cucap_fb_record_to_json(cucap_fb_record_root_sp(m), w, CUCAP_JSON_HASH_HEX);
    } else {
      rejected++;
    }
    /* verifying as the wrong root type must be safe too */
    (void)cucap_fb_chunk_index_verify(m, vlen, 1);
    free(m);
  }
  printf("corruption: %d accepted, %d rejected\n", accepted, rejected);
  CHECK(rejected > 1000);

  /* targeted: root offset past the end, vtable offset outside */
  uint8_t bad[64];
  memcpy(bad, rec, 64);
  uint32_t big = 0x7FFFFFF0u;
  memcpy(bad + 4, &big, 4);
  CHECK(cucap_fb_record_verify(bad, 64, 0) != CUCAP_OK);
  memcpy(bad, rec, 64);
  uint32_t root;
  memcpy(&root, rec + 4, 4);
  int32_t soff = -100000;
  if (4 + root + 4 <= 64) {
    memcpy(bad + 4 + root, &soff, 4);
    CHECK(cucap_fb_record_verify(bad, 64, 1) != CUCAP_OK);
  }
  CHECK(cucap_fb_record_verify(NULL, 10, 1) == CUCAP_ERR_INVALID_ARG);
  free(hdr);
  cucap_json_destroy(w);
  cucap_fbb_destroy(b);
}

static void bench(void) {
  cucap_fbb *b = cucap_fbb_create(4096);
  TU_REQUIRE(b);
  const int n = 2000000;
  size_t len = 0, total = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    const uint8_t *buf = build_launch_record(b, (uint64_t)i, &len);
    total += buf[len - 1] + len;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("bench: built %d Record+Launch (%zu bytes each) in %.3f s: %.2f M records/s (chk %zu)\n",
         n, len, s, n / s / 1e6, total % 10);
  /* verify speed, for reference */
  const uint8_t *buf = build_launch_record(b, 1, &len);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int ok = 0;
  for (int i = 0; i < n; i++)
    ok += cucap_fb_record_verify(buf, len, 1) == CUCAP_OK;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("bench: verified %d records in %.3f s: %.2f M records/s\n", ok, s, n / s / 1e6);
  CHECK(ok == n);
  cucap_fbb_destroy(b);
}

int main(void) {
  test_basic();
  test_vtable_sharing_and_misuse();
  test_corruption();
  bench();
  return tu_finish("test_fb_builder", checks);
}
